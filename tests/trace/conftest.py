"""Shared machinery for the tracer's tests.

Every trace runs the traced program in a child process (which imports torch, ~2 s; an
optimizer imports torch._dynamo, ~3.5 s more on this 2-core machine). To keep the
suite fast, the runs a session needs are declared up front and run in parallel: a test names
its runs with ``@pytest.mark.traces(key, ...)`` (keys of TRACES below), and the first test
that asks for any of them submits all the runs of the selected tests to a thread pool.
The pytest process itself never imports torch.
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from tracehelp import DEPENDS, ROOT, SUBPROCESS, TRACES, Traced

from torchdev_lint.trace import cli


def _env() -> dict:
    """The repository first, then whatever the caller's PYTHONPATH held (where its libcst may live)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}


class Pool:
    """Runs traces in worker threads. Most run in-process through ``cli.main`` (the parent side
    imports neither torch nor the program, so this is what the command does, minus a Python
    start and the linter's imports per run); the program's output goes to a file."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self.futures: dict = {}
        self.lock = threading.Lock()

    def _run(self, key: str) -> Traced:
        directory = self.tmp / key
        directory.mkdir(exist_ok=True)
        if key in SUBPROCESS:
            command = [part.replace("{shared}", str(self.tmp)) for part in SUBPROCESS[key]]
            env = {**_env(), "TORCHDEV_LINT_CACHE_DIR": str(directory / "verdicts")}  # as above
            process = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                     timeout=600)
            return Traced(process.returncode, process.stdout, process.stderr)
        argv = [part.replace("{shared}", str(self.tmp)) for part in TRACES[key]]
        out, err = io.StringIO(), io.StringIO()
        # the run outlives the test that started it: it records no verdicts, which would land in
        # the checkout's store (read by the README job) or another test's (tests/test_verdicts.py
        # checks the recording)
        status = cli.main(["--no-verdicts", "--program-output", str(directory / "program-output.txt"), *argv],
                          stdout=out, stderr=err, cwd=str(ROOT))
        files = {p.name: p.read_text(errors="replace") for p in directory.iterdir() if p.is_file()}
        return Traced(status, out.getvalue(), err.getvalue(), files)

    def submit(self, key: str) -> None:
        """Start the run of ``key``; one that needs another's output (DEPENDS) starts when that one
        has ended, never waiting inside a worker (with every worker waiting, none would run)."""
        with self.lock:
            if key in self.futures:
                return
            if key not in DEPENDS:
                self.futures[key] = self.executor.submit(self._run, key)
                return
            future = self.futures[key] = Future()
        self.submit(DEPENDS[key])

        def start(dependency):
            if dependency.cancelled():  # the session ends: submitting now would deadlock shutdown
                future.cancel()
                return
            inner = self.executor.submit(self._run, key)
            inner.add_done_callback(lambda done: future.set_exception(done.exception()) if done.exception()
                                    else future.set_result(done.result()))

        self.futures[DEPENDS[key]].add_done_callback(start)

    def get(self, key: str) -> Traced:
        self.submit(key)
        return self.futures[key].result()


@pytest.fixture(scope="session")
def _pool(tmp_path_factory):
    pool = Pool(tmp_path_factory.mktemp("trace"))
    # the tracer's record of the files its runs saved: this session's own, not the user's
    saves = os.environ.get("TORCHDEV_LINT_TRACE_SAVES")
    os.environ["TORCHDEV_LINT_TRACE_SAVES"] = str(pool.tmp / "saves.jsonl")
    yield pool
    pool.executor.shutdown(wait=False, cancel_futures=True)
    if saves is None:
        os.environ.pop("TORCHDEV_LINT_TRACE_SAVES", None)
    else:
        os.environ["TORCHDEV_LINT_TRACE_SAVES"] = saves


@pytest.fixture
def traced(request, _pool):
    """``traced(key)`` -> Traced; prefetches every run the selected tests declared."""
    if not getattr(request.session, "_trace_prefetched", False):
        request.session._trace_prefetched = True
        for item in request.session.items:
            for mark in item.iter_markers("traces"):
                for key in mark.args:
                    _pool.submit(key)
    return _pool.get


def pytest_configure(config):
    config.addinivalue_line("markers", "traces(*keys): trace runs the test uses (prefetched in parallel)")
