"""Shared machinery for the tracer's tests.

Every trace is a real `torchdev-lint trace` run in a subprocess (the child imports torch,
~2 s; an optimizer imports torch._dynamo, ~3.5 s more on this 2-core machine). To keep the
suite fast, the runs a session needs are declared up front and run in parallel: a test names
its runs with ``@pytest.mark.traces(key, ...)`` (keys of TRACES below), and the first test
that asks for any of them submits all the runs of the selected tests to a thread pool.
The pytest process itself never imports torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tracehelp import MAKE_GPU_CHECKPOINT, ROOT, TRACES, Traced

def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}


class Pool:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self.futures: dict = {}
        self._checkpoint = None
        self._lock = threading.Lock()

    def gpu_checkpoint(self) -> str:
        with self._lock:
            return self._make_checkpoint()

    def _make_checkpoint(self) -> str:
        if self._checkpoint is None:
            path = self.tmp / "gpu_saved.pt"
            subprocess.run([sys.executable, "-c", MAKE_GPU_CHECKPOINT, str(path)], check=True,
                           env=_env(), capture_output=True)
            self._checkpoint = str(path)
        return self._checkpoint

    def _run(self, key: str) -> Traced:
        tmp = self.tmp / key
        tmp.mkdir(exist_ok=True)
        command = []
        for part in TRACES[key]:
            if "{gpu_checkpoint}" in part:
                part = part.replace("{gpu_checkpoint}", self.gpu_checkpoint())
            command.append(part.replace("{tmp}", str(tmp)))
        process = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
        files = {p.name: p.read_text(errors="replace") for p in tmp.iterdir() if p.is_file()}
        return Traced(process.returncode, process.stdout, process.stderr, files)

    def submit(self, key: str) -> None:
        if key not in self.futures:
            self.futures[key] = self.executor.submit(self._run, key)

    def get(self, key: str) -> Traced:
        self.submit(key)
        return self.futures[key].result()


@pytest.fixture(scope="session")
def _pool(tmp_path_factory):
    pool = Pool(tmp_path_factory.mktemp("trace"))
    yield pool
    pool.executor.shutdown(wait=False, cancel_futures=True)


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
