"""Checking in several processes: the same output as one, and a file that kills its worker
costs that file alone."""

import faulthandler
import io
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import config, pool, progress, runner

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def lint(*args, cwd=ROOT):
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", *args],
                             cwd=cwd, capture_output=True, text=True, env=ENV)
    return process.returncode, process.stdout, process.stderr


def test_jobs_give_the_same_output_in_the_same_order():
    for fmt in ("text", "json"):
        one = lint("-j", "1", "--format", fmt, "testdata")
        assert one[0] == 1 and one[1]
        assert lint("-j", "3", "--format", fmt, "testdata") == one
        assert lint("--format", fmt, "testdata") == one  # the default: one process per core


def test_jobs_must_be_positive():
    status, _, err = lint("-j", "0", "testdata")
    assert status == 2 and "--jobs" in err


def _die_on_odd(number):
    if number % 2:
        faulthandler.disable()  # pytest's would print the child's stack
        os.kill(os.getpid(), signal.SIGSEGV)
    return number * 10


def test_pool_survives_workers_that_die():
    done = []
    results = pool.ordered_map(_die_on_odd, list(range(7)), 2, lambda item, code: (item, code), done.append)
    assert results == [0, (1, -signal.SIGSEGV), 20, (3, -signal.SIGSEGV), 40, (5, -signal.SIGSEGV), 60]
    assert sorted(done) == list(range(1, 8))


# A hostile file that crashes the parser (a native stack overflow, say), stood in for by a
# check that segfaults on files containing a marker. The toy scripts of the tests below have
# no CPU path (their findings are possible), so the runs are in the preview tier.
CRASHING_RUN = textwrap.dedent(
    """\
    import os, signal, sys
    from torchdev_lint import cli, runner

    real = runner.check_source

    def check_source(source, *args):
        if "CRASH" in source.text:
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(source, *args)

    runner.check_source = check_source
    sys.exit(cli.main(sys.argv[1:]))
    """
)


def test_a_file_that_kills_its_worker_is_one_error_and_the_run_goes_on(tmp_path):
    for name in "abcdef":
        (tmp_path / f"{name}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    (tmp_path / "c.py").write_text("# CRASH\nimport torch\n")
    process = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, "--isolated", "--no-cache", "--preview", "-j", "2",
         "--format", "json", "."],
        cwd=tmp_path, capture_output=True, text=True, env=ENV)
    assert process.returncode == 2
    assert process.stderr.splitlines() == [
        "torchdev-lint: c.py: error: the checker crashed on this file (killed by SIGSEGV)"]
    assert [f["path"] for f in json.loads(process.stdout)] == ["a.py", "b.py", "d.py", "e.py", "f.py"]


def test_a_file_that_killed_its_worker_is_not_cached(tmp_path):
    """The crash is no result of the file's: the next run checks it again and finds its bug."""
    work = tmp_path / "work"
    work.mkdir()
    for name in "abc":
        (work / f"{name}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    (work / "b.py").write_text("# CRASH\nimport torch\nx = torch.zeros(2).cuda()\n")
    options = ["--isolated", "--preview", "--cache-dir", str(tmp_path / "cache"), "-j", "2", "-v",
               "--format", "json", "."]
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUN, *options],
                             cwd=work, capture_output=True, text=True, env=ENV)
    assert crashed.returncode == 2
    assert "torchdev-lint: b.py: error: the checker crashed on this file (killed by SIGSEGV)" in crashed.stderr
    again = subprocess.run([sys.executable, "-m", "torchdev_lint", *options],
                           cwd=work, capture_output=True, text=True, env=ENV)
    assert again.returncode == 1, again.stderr
    assert "torchdev-lint: checked b.py" in again.stderr.splitlines()
    assert "torchdev-lint: cached a.py" in again.stderr.splitlines()
    assert [f["path"] for f in json.loads(again.stdout)] == ["a.py", "b.py", "c.py"]


def test_index_and_settings_reach_the_workers(tmp_path):
    """Whatever the caller hands the per-file entry point arrives in each worker process."""
    for name in "abc":
        (tmp_path / f"{name}.py").write_text("import torch\nstate = torch.load(p)\n")
    settings = config.Settings(root=tmp_path, per_file_ignores={"b.py": ["TDL004"]}, preview=True)
    job = runner.Job(config.enabled_rules(["TDL"], []), settings)
    paths = [str(tmp_path / f"{name}.py") for name in "abc"]
    checked = runner.check_paths(paths, job, jobs=2)
    assert [len(c.result.findings) for c in checked] == [1, 0, 1]


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_after_two_seconds_and_erased_at_the_end():
    now = [0.0]
    stream = FakeTerminal()
    bar = progress.Progress(10, stream, clock=lambda: now[0])
    bar.update(1)
    assert stream.getvalue() == ""  # a short run shows nothing
    now[0] = 2.5
    bar.update(5)
    assert "5/10 files" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_no_progress_bar_when_piped_quiet_or_machine_readable(monkeypatch):
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    monkeypatch.setattr(sys, "stdout", FakeTerminal())
    assert progress.wanted(quiet=False, fmt="text")
    assert not progress.wanted(quiet=True, fmt="text")
    assert not progress.wanted(quiet=False, fmt="json")
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert not progress.wanted(quiet=False, fmt="text")


PY313 = "/work/venvs/py3.13.0/bin/python"
# A host that runs threads of its own when it calls the linter (an editor plugin, pytest-xdist's
# worker): forking it is what Python 3.12+ warns about.
THREADED_HOST = textwrap.dedent(
    """\
    import sys, threading
    from torchdev_lint import cli, pool

    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
    print(pool.start_method(), file=sys.stderr)
    status = cli.main(sys.argv[1:])
    stop.set()
    sys.exit(status)
    """
)


def _python_313():
    python = os.environ.get("TORCHDEV_LINT_PY313", PY313)
    if not os.path.exists(python):
        pytest.skip(f"no Python 3.13 at {python}")
    return python


@pytest.mark.parametrize("warnings", ["error::DeprecationWarning", "always::DeprecationWarning"])
def test_jobs_on_python_313_start_workers_without_the_fork_deprecation_warning(tmp_path, warnings):
    """Python 3.12+ warns 'This process is multi-threaded, use of fork() may lead to
    deadlocks': the pool forks only a single-threaded process, and a threaded host gets
    a fork server, with the same results. (Under -W error the warning raised in os.fork is
    dropped silently, so the test also runs with it always shown.)"""
    python = _python_313()
    for number in range(6):
        (tmp_path / f"m{number}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    options = ["--isolated", "--no-cache", "--no-daemon", "--preview", "--format", "json", "-j", "2", "."]
    env = {**ENV, "TORCHDEV_LINT_DAEMON": "0"}
    env.pop(pool.ENV_START_METHOD, None)
    single = subprocess.run([python, "-W", warnings, "-m", "torchdev_lint", *options],
                            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert single.returncode == 1 and single.stderr == ""
    threaded = subprocess.run([python, "-W", warnings, "-c", THREADED_HOST, *options],
                              cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert threaded.returncode == 1
    assert threaded.stderr == "forkserver\n"  # no warning, and no worker's traceback
    assert threaded.stdout == single.stdout and len(json.loads(single.stdout)) == 6


def test_every_start_method_gives_the_same_results(tmp_path):
    for number in range(5):
        (tmp_path / f"m{number}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    results = {}
    for method in ("fork", "forkserver", "spawn"):
        process = subprocess.run(
            [sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", "--no-daemon", "--preview",
             "-j", "2", "--format", "json", "."],
            cwd=tmp_path, capture_output=True, text=True, env={**ENV, pool.ENV_START_METHOD: method}, timeout=300)
        assert process.returncode == 1 and process.stderr == "", (method, process.stderr)
        results[method] = process.stdout
    assert results["fork"] == results["forkserver"] == results["spawn"]
    assert len(json.loads(results["fork"])) == 5


def test_the_start_method_is_fork_only_for_a_single_threaded_process_on_linux(monkeypatch):
    import threading

    monkeypatch.delenv(pool.ENV_START_METHOD, raising=False)
    if not sys.platform.startswith("linux"):
        assert pool.start_method() != "fork"
        return
    monkeypatch.setattr(pool, "_threads", lambda: 1)
    assert pool.start_method() == "fork"
    monkeypatch.setattr(pool, "_threads", lambda: 2)
    assert pool.start_method() == "forkserver"
    monkeypatch.undo()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert pool._threads() >= 2
    finally:
        stop.set()
        thread.join()
