"""The resident checker (launcher.py, resident.py): a run it serves is the run the command
would have made itself (same output, status, files written), it is used only where it should
be, and a dead or foreign one never costs a run."""

import os
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from torchdev_lint import launcher

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the resident checker needs POSIX")

BUG = "import torch\n\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\nx = torch.zeros(3, device='cuda')\n"
SERVED = "checked by the resident process"


def command(args, env, cwd, **kwargs):
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", *map(str, args)], cwd=cwd, env=env,
                             capture_output=True, timeout=180, **kwargs)
    return process.returncode, process.stdout, process.stderr


def wait_for(predicate, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def sockets(runtime):
    return sorted(runtime.glob("*.sock"))


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
    ["--no-cache", "--select", "TDL002", "--statistics", "bug.py"],
    ["--no-cache", "broken.py", "bug.py", "missing.py"],
    ["--no-cache", "--diff", "bug.py"],
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
    served, alone = served_and_alone(["--no-cache", "--fix", "--stdin-filename", "x.py", "-"], env, project,
                                     input=BUG.encode())
    assert served == alone
    assert b"torch.zeros(3, device='cpu')" not in served[1] and b".cuda()" not in served[1]


def test_a_closed_standard_input_is_closed_in_the_served_run(checker):
    project, _, env = checker
    served, alone = served_and_alone(["--no-cache", "-"], env, project, preexec_fn=lambda: os.close(0))
    assert served == alone
    assert b"standard input: it is closed" in served[2]


def test_the_served_run_reads_the_callers_directory_environment_and_settings(checker, tmp_path):
    _, _, env = checker
    (tmp_path / "pyproject.toml").write_text("[tool.torchdev-lint]\nignore = ['TDL001']\n")
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
    served = command(["-v", "--fix", "m.py"], env, tmp_path / "served")
    alone = command(["--no-daemon", "--fix", "m.py"], env, tmp_path / "alone")
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
    command(["--no-cache", "bug.py"], env, tmp_path)
    assert wait_for(lambda: sockets(runtime))
    pid = int(next(runtime.glob("*.lock")).read_text())
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not _alive(pid))
    try:
        assert sockets(runtime)  # killed: its socket is left behind, and nobody answers it
        assert command(["--no-cache", "bug.py"], env, tmp_path) == expected
        assert wait_for(lambda: _status_pid(env, tmp_path) not in (None, pid))
        # The new checker names itself before it has warmed up and listens: runs checked here
        # meanwhile are the same runs; one of the next is served by it.
        runs = []

        def served() -> bool:
            runs.append(command(["-v", "--no-cache", "bug.py"], env, tmp_path))
            return SERVED.encode() in runs[-1][2]

        assert wait_for(served)
        assert all((rc, out) == expected[:2] for rc, out, _ in runs)
    finally:
        command(["daemon", "stop"], env, tmp_path)


def test_an_idle_checker_leaves_and_removes_its_socket(tmp_path):
    runtime = tmp_path / "runtime"
    (tmp_path / "ok.py").write_text("x = 1\n")
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(runtime),
           "TORCHDEV_LINT_DAEMON_IDLE": "1"}
    command(["ok.py"], env, tmp_path)
    assert wait_for(lambda: sockets(runtime))
    assert wait_for(lambda: not sockets(runtime), seconds=30)
    assert command(["daemon", "status"], env, tmp_path)[1] == b"no resident process\n"


@pytest.mark.parametrize("setting", [{"CI": "true"}, {"TORCHDEV_LINT_DAEMON": "0"}, {"args": ["--no-daemon"]}])
def test_no_checker_is_started_or_used_on_ci_or_when_turned_off(tmp_path, setting):
    runtime = tmp_path / "runtime"
    (tmp_path / "bug.py").write_text(BUG)
    env = {**os.environ, "TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}
    env.pop("TORCHDEV_LINT_DAEMON")
    env.pop("CI", None)
    env.update({key: value for key, value in setting.items() if key != "args"})
    for _ in range(2):
        rc, out, err = command([*setting.get("args", []), "-v", "--no-cache", "bug.py"], env, tmp_path)
        assert rc == 1 and b"TDL001" in out and SERVED.encode() not in err
    time.sleep(0.5)
    assert not sockets(runtime)


def test_a_runtime_directory_others_can_enter_is_not_used(tmp_path):
    runtime = tmp_path / "shared"
    runtime.mkdir(mode=0o777)
    runtime.chmod(0o777)
    assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": str(runtime)}) is None
    private = tmp_path / "private"
    assert launcher.runtime_dir({"TORCHDEV_LINT_RUNTIME_DIR": str(private)}) == str(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


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
                              "bug.py"], cwd=project, env=env, capture_output=True, text=True, timeout=180)
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
