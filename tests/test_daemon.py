"""The resident checker (launcher.py, resident.py): a run it serves is the run the command
would have made itself (same output, status, files written), it is used only where it should
be, and a dead or foreign one never costs a run."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from torchdev_lint import launcher

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the resident checker needs POSIX")

# The file chooses the CPU where CUDA is missing, so its hardcoded "cuda"s are bugs: findings of
# preview rules (TDL001, TDL002), shown with --preview, whose fixes are safe.
BUG = ("import torch\n\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
       "model = torch.nn.Linear(2, 2)\nmodel.cuda()\nx = torch.zeros(3, device='cuda')\n")
SERVED = "checked by the resident process"


def command(args, env, cwd, **kwargs):
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", *map(str, args)], cwd=cwd, env=env,
                             capture_output=True, timeout=180, **kwargs)
    return process.returncode, process.stdout, process.stderr


# Deadlines, not fixed sleeps: on a loaded machine (the whole suite on 2 cores) starting a
# checker takes seconds. Each wait ends as soon as its condition holds.
PATIENCE = 180.0


def wait_for(predicate, seconds=PATIENCE):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def where(runtime):
    """The directory the checkers of ``runtime`` really use: a short one when ``runtime``
    is too deep for a socket path (pytest's own temporary directories may be)."""
    return Path(launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}))


def sockets(runtime):
    return sorted(where(runtime).glob("*.sock"))


def lock_pid(runtime):
    """The pid the last checker wrote in its lock file (which it leaves behind), or None."""
    for lock in where(runtime).glob("*.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            return int(text)
    return None


def served_run(args, env, cwd):
    """Run until the resident checker serves a run (a run started before it listens checks
    in its own process, and starts or waits for the checker); return that run."""
    runs = []

    def served() -> bool:
        runs.append(command(["-v", *args], env, cwd))
        return SERVED.encode() in runs[-1][2]

    assert wait_for(served), runs[-1]
    return runs


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    """A project, and an environment whose runs a warm resident checker serves."""
    project = tmp_path_factory.mktemp("project")
    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    (project / "bug.py").write_text(BUG)
    (project / "broken.py").write_text("def f(:\n")
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "NO_COLOR", "FORCE_COLOR")}
    env.update(TORCHDEV_LINT_DAEMON="1", TORCHDEV_LINT_RUNTIME_DIR=str(runtime))
    first = command(["-v", "--no-cache", "bug.py"], env, project)
    assert SERVED.encode() not in first[2]  # nothing to talk to yet: this run checks itself...
    assert wait_for(lambda: sockets(runtime))  # ...and leaves a checker for the next ones
    yield project, runtime, env
    command(["daemon", "stop"], env, project)


def served_and_alone(args, env, cwd, **kwargs):
    """Run through the checker and in-process; return both, the marker line taken out."""
    served = command(["-v", *args], env, cwd, **kwargs)
    alone = command(["-v", "--no-daemon", *args], env, cwd, **kwargs)
    assert SERVED.encode() in served[2].splitlines()[0], served
    return (served[0], served[1], served[2].split(b"\n", 1)[1]), alone


@pytest.mark.parametrize("args", [
    ["--no-cache", "bug.py"],
    ["--no-cache", "--format", "json", "."],
    ["--no-cache", "--preview", "bug.py"],
    ["--no-cache", "--preview", "--select", "TDL002", "--statistics", "bug.py"],
    ["--no-cache", "broken.py", "bug.py", "missing.py"],
    ["--no-cache", "--preview", "--diff", "bug.py"],
    ["--bogus-option"],
    ["--version"],
    ["--explain", "TDL001"],
])
def test_a_served_run_prints_and_exits_as_one_made_in_process(checker, args):
    project, _, env = checker
    served, alone = served_and_alone(args, env, project)
    assert served == alone


def test_standard_input_reaches_the_served_run(checker):
    project, _, env = checker
    served, alone = served_and_alone(["--no-cache", "--preview", "--fix", "--stdin-filename", "x.py", "-"], env,
                                     project, input=BUG.encode())
    assert served == alone
    assert b"torch.zeros(3, device='cpu')" not in served[1] and b".cuda()" not in served[1]


def test_a_closed_standard_input_is_closed_in_the_served_run(checker):
    project, _, env = checker
    served, alone = served_and_alone(["--no-cache", "-"], env, project, preexec_fn=lambda: os.close(0))
    assert served == alone
    assert b"standard input: it is closed" in served[2]


def test_confirm_runs_the_projects_tests_under_the_caller_not_the_checker(checker, tmp_path):
    """`confirm` executes the project's tests: they are the caller's children (its signals, its
    terminal, its CPU accounting), whatever checker is warm."""
    _, _, env = checker
    (tmp_path / "test_parent.py").write_text(
        "import os\n\n\ndef test_parent():\n    open('parent.txt', 'w').write(str(os.getppid()))\n")
    process = subprocess.Popen([sys.executable, "-m", "torchdev_lint", "confirm", "-q", "-p", "no:cacheprovider",
                                "test_parent.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = process.communicate(timeout=300)
    assert int((tmp_path / "parent.txt").read_text()) == process.pid, err


def test_the_served_run_reads_the_callers_directory_environment_and_settings(checker, tmp_path):
    _, _, env = checker
    (tmp_path / "pyproject.toml").write_text("[tool.torchdev-lint]\npreview = true\nignore = ['TDL001']\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(BUG)
    served, alone = served_and_alone(["--no-cache", "pkg/m.py"], {**env, "FORCE_COLOR": "1"}, tmp_path)
    assert served == alone
    assert b"TDL001" not in served[1] and b"TDL002" in served[1] and b"\x1b[" in served[1]


def test_fix_through_the_checker_writes_what_the_command_writes(checker, tmp_path):
    _, _, env = checker
    for name in ("served", "alone"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text(BUG)
        (tmp_path / name / "m.py").chmod(0o640)
    served = command(["-v", "--preview", "--fix", "m.py"], env, tmp_path / "served")
    alone = command(["--no-daemon", "--preview", "--fix", "m.py"], env, tmp_path / "alone")
    assert SERVED.encode() in served[2] and served[0] == alone[0] == 0
    assert (tmp_path / "served" / "m.py").read_text() == (tmp_path / "alone" / "m.py").read_text() != BUG
    assert stat.S_IMODE((tmp_path / "served" / "m.py").stat().st_mode) == 0o640
    # The cache is created under the caller's umask, as the command creates it.
    cache = tmp_path / "served" / ".torchdev_lint_cache"
    assert stat.S_IMODE(cache.stat().st_mode) == stat.S_IMODE((tmp_path / "alone" / ".torchdev_lint_cache")
                                                                .stat().st_mode)


def test_runs_at_once_are_each_served_whole(checker):
    project, _, env = checker
    expected = command(["--no-daemon", "--no-cache", "--format", "json", "."], env, project)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: command(["--no-cache", "--format", "json", "."], env, project),
                                range(8)))
    assert all(result == expected for result in results)


def test_a_killed_checker_costs_no_run_and_is_replaced(tmp_path):
    runtime = tmp_path / "runtime"
    (tmp_path / "bug.py").write_text(BUG)
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}
    env.pop("CI", None)
    expected = command(["--no-daemon", "--no-cache", "bug.py"], env, tmp_path)
    try:
        served_run(["--no-cache", "bug.py"], env, tmp_path)  # a checker is up and listening
        pid = lock_pid(runtime)
        assert pid is not None and _alive(pid)
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not _alive(pid))
        assert sockets(runtime)  # killed: its socket is left behind, and nobody answers it
        assert command(["--no-cache", "bug.py"], env, tmp_path) == expected
        # That run started a new checker, which names itself before it has warmed up and
        # listens: the runs checked here meanwhile are the same runs; one of the next is served.
        runs = served_run(["--no-cache", "bug.py"], env, tmp_path)
        assert all((rc, out) == expected[:2] for rc, out, _ in runs)
        assert lock_pid(runtime) not in (None, pid) and _status_pid(env, tmp_path) == lock_pid(runtime)
    finally:
        command(["daemon", "stop"], env, tmp_path)


def test_an_idle_checker_leaves_and_removes_its_socket(tmp_path):
    runtime = tmp_path / "runtime"
    (tmp_path / "ok.py").write_text("x = 1\n")
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(runtime),
           "TORCHDEV_LINT_DAEMON_IDLE": "3"}
    env.pop("CI", None)
    served_run(["ok.py"], env, tmp_path)  # it listened (a run that finds none starts one)
    pid = lock_pid(runtime)
    assert pid is not None
    # It leaves 3 s after that run; its lock is let go only when it has gone, socket removed.
    assert wait_for(lambda: not _alive(pid))
    assert not sockets(runtime)
    assert command(["daemon", "status"], env, tmp_path)[1] == b"no resident process\n"


def test_a_checker_whose_code_was_deleted_leaves_at_once(tmp_path):
    """pre-commit's `try-repo` installs the tool in a temporary environment and deletes it
    afterwards: a checker started from there leaves within seconds, not at its idle timeout."""
    runtime, environment = tmp_path / "runtime", tmp_path / "environment"
    shutil.copytree(Path(launcher.__file__).parent, environment / "torchdev_lint",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "ok.py").write_text("x = 1\n")
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(runtime),
           "TORCHDEV_LINT_DAEMON_IDLE": "900", "PYTHONPATH": str(environment)}
    env.pop("CI", None)
    served_run(["ok.py"], env, tmp_path)
    pid = lock_pid(runtime)
    assert pid is not None and _alive(pid)
    shutil.rmtree(environment)
    assert wait_for(lambda: not _alive(pid), seconds=30)
    assert not sockets(runtime)


def test_a_runtime_directory_too_deep_for_a_socket_moves_to_a_short_private_one(tmp_path):
    """A socket's path holds about 100 bytes: a deeper runtime directory (a long
    $XDG_RUNTIME_DIR, pytest's) gets a short one of this user's instead, said under -v."""
    runtime = tmp_path / ("deep" * 20) / "runtime"
    (tmp_path / "bug.py").write_text(BUG)
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}
    env.pop("CI", None)
    short = where(runtime)
    assert short != runtime and len(str(short / f"{'0' * 20}.sock")) <= 100
    assert short.parent.name == f"torchdev-lint-{os.getuid()}"
    assert where(runtime) == short  # the same one each time, so runs find its checker
    try:
        rc, out, err = command(["-v", "--no-cache", "--preview", "bug.py"], env, tmp_path)
        assert rc == 1 and b"TDL001" in out
        assert f"torchdev-lint: the runtime directory {runtime} is too deep for a socket path; using {short}" \
            in err.decode()
        served_run(["--no-cache", "--preview", "bug.py"], env, tmp_path)
        for directory in (short, short.parent):
            info = directory.lstat()
            assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
            assert info.st_uid == os.getuid()
    finally:
        command(["daemon", "stop"], env, tmp_path)
        pid = lock_pid(runtime)
        assert pid is None or wait_for(lambda: not _alive(pid))
        shutil.rmtree(short, ignore_errors=True)


def test_a_short_runtime_directory_another_user_could_enter_is_not_used(tmp_path, monkeypatch):
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setattr(launcher, "_SHORT_BASE", str(base))
    deep = str(tmp_path / ("deep" * 20))
    mine = base / f"torchdev-lint-{os.getuid()}"
    mine.mkdir(mode=0o777)
    mine.chmod(0o777)
    assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": deep}) is None
    mine.chmod(0o700)
    found = launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": deep})
    assert found is not None and Path(found).parent == mine
    mine.rename(base / "elsewhere")
    mine.symlink_to(base / "elsewhere")  # a link planted in /tmp is never followed
    assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": deep}) is None


@pytest.mark.parametrize("setting", [{"CI": "true"}, {"TORCHDEV_LINT_DAEMON": "0"}, {"args": ["--no-daemon"]}])
def test_no_checker_is_started_or_used_on_ci_or_when_turned_off(tmp_path, setting):
    runtime = tmp_path / "runtime"
    (tmp_path / "bug.py").write_text(BUG)
    env = {**os.environ, "TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}
    env.pop("TORCHDEV_LINT_DAEMON")
    env.pop("CI", None)
    env.update({key: value for key, value in setting.items() if key != "args"})
    for _ in range(2):
        rc, out, err = command([*setting.get("args", []), "-v", "--no-cache", "--preview", "bug.py"], env, tmp_path)
        assert rc == 1 and b"TDL001" in out and SERVED.encode() not in err
    time.sleep(0.5)
    assert not sockets(runtime)


def test_a_runtime_directory_others_can_enter_is_not_used(tmp_path):
    top = Path(tempfile.mkdtemp(prefix="tdl-", dir="/tmp"))  # short enough for a socket path
    try:
        runtime = top / "shared"
        runtime.mkdir(mode=0o777)
        runtime.chmod(0o777)
        assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}) is None
        private = top / "private"
        assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": str(private)}) == str(private)
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(top)


def test_the_key_changes_with_the_tools_code(tmp_path, monkeypatch):
    package = tmp_path / "torchdev_lint"
    (package / "rules").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    rule = package / "rules" / "r.py"
    rule.write_text("A = 1\n")
    monkeypatch.setattr(launcher, "PACKAGE", str(package))
    before = launcher.fingerprint()
    assert launcher.fingerprint() == before
    rule.write_text("A = 22\n")
    assert launcher.fingerprint() != before
    assert launcher._wanted(["trace", "x.py"], {}) is False and launcher._wanted(["x.py"], {}) is True
    assert launcher._wanted(["confirm", "-m", "not gpu"], {}) is False  # it runs the project's tests
    assert launcher._wanted(["--", "--no-daemon"], {}) is True  # a file so named, not the option


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of a process this test did not start cannot be reaped here: read its state
        with open(f"/proc/{pid}/stat") as status:
            return status.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _status_pid(env, cwd):
    out = command(["daemon", "status"], env, cwd)[1].decode()
    return int(out.split()[2].rstrip(":")) if out.startswith("resident process") else None


def test_a_served_run_loads_neither_libcst_nor_the_command_line_here(checker):
    project, _, env = checker
    process = subprocess.run([sys.executable, "-X", "importtime", "-m", "torchdev_lint", "-v", "--no-cache",
                              "--preview", "bug.py"], cwd=project, env=env, capture_output=True, text=True,
                             timeout=180)
    imported = [line.rsplit("|", 1)[-1].strip() for line in process.stderr.splitlines()
                if line.startswith("import time:")]
    assert SERVED in process.stderr and process.returncode == 1 and "TDL001" in process.stdout
    assert "torchdev_lint.launcher" in imported
    assert not [name for name in imported if name.split(".")[0] in ("libcst", "torch", "multiprocessing")
                or name == "torchdev_lint.cli"]


def test_a_run_whose_caller_is_killed_is_stopped(checker, tmp_path):
    _, _, env = checker
    for number in range(400):  # long enough to still be running when its caller dies
        (tmp_path / f"m{number}.py").write_text(BUG * 20)
    caller = subprocess.Popen([sys.executable, "-m", "torchdev_lint", "-v", "--no-cache", "-j", "1", "."],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first = caller.stderr.readline().decode()
    assert SERVED in first, first
    run = int(first.split(SERVED)[1].split()[0])
    caller.kill()
    caller.wait()
    assert wait_for(lambda: not _alive(run), seconds=30)


CRASH_IN_CHECKS = textwrap.dedent(
    """\
    import os

    if os.environ.get("TDL_TEST_CRASH") == "check":  # a bug in the checks, in every process
        from torchdev_lint import runner

        def boom(*args, **kwargs):
            raise RuntimeError("forced failure for a test")

        runner.check_source = boom
    """
)


def test_an_internal_error_in_a_served_run_is_one_line_and_exit_2(tmp_path):
    """As in a run of its own (tests/test_cli.py): the resident checker's copy says the same
    one line on the caller's stderr and exits 2, not 1 (findings) with a traceback."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CRASH_IN_CHECKS)  # loaded by the checker too
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "ok.py").write_text("x = 1\n")
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(tmp_path / "runtime"),
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "TDL_TEST_CRASH": "check", "TMPDIR": str(logs)}
    env.pop("CI", None)
    message = "torchdev-lint: internal error (a bug in torchdev-lint, not a finding): " \
              "RuntimeError: forced failure for a test"
    try:
        served = served_run(["--no-cache", "ok.py"], env, tmp_path)[-1]
        rc, out, err = served
        assert rc == 2 and out == b""
        assert err.decode().splitlines()[-1] == f"{message}; the traceback is above"
        assert b"Traceback (most recent call last)" in err
        for log in logs.iterdir():
            log.unlink()
        served = command(["--no-cache", "ok.py"], env, tmp_path)  # the checker is warm: served
        (kept,) = logs.glob("torchdev-lint-crash-*.txt")
        assert served == (2, b"", f"{message}; the traceback is in {kept}\n".encode())
    finally:
        command(["daemon", "stop"], env, tmp_path)
