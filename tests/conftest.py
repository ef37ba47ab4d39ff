import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The suite checks in its own processes; tests/test_daemon.py turns the resident checker on
# where it tests it, with a runtime directory of its own.
os.environ["TORCHDEV_LINT_DAEMON"] = "0"


@pytest.fixture(autouse=True)
def _private_verdict_store(request, tmp_path_factory, monkeypatch):
    """Each test records and reads the verdicts of the tracer and the pytest plugin in a store
    of its own (docs/verdicts.md), not in the checkout's `.torchdev_lint_cache/`: a trace of
    `testdata/` in one test must not change what the linter prints in another. The verdict
    tests themselves use the default place."""
    if "verdict" not in request.node.module.__name__:
        monkeypatch.setenv("TORCHDEV_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("verdicts")))


def gpu_available() -> bool:
    """Whether torch here sees a GPU, asked in a subprocess so the suite itself stays free of
    CUDA state (a CUDA build without a driver must say no, and a CPU build always does)."""
    global _gpu
    if _gpu is None:
        probe = "import torch; print(torch.cuda.is_available())"
        try:
            done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
            _gpu = done.stdout.strip() == "True"
        except (OSError, subprocess.TimeoutExpired):
            _gpu = False
    return _gpu


_gpu = None


@pytest.fixture
def run_cli():
    """Run the real command line in a subprocess: (exit status, stdout, stderr)."""

    def run(*args, cwd=None, input=None):
        process = subprocess.run(
            [sys.executable, "-m", "torchdev_lint", *map(str, args)],
            cwd=cwd or ROOT, input=input, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        return process.returncode, process.stdout, process.stderr

    return run


def lint_project(root: Path, files: dict[str, str], name: str, rule) -> list[tuple[int, int]]:
    """Write ``files`` (path -> dedented text) under ``root``, index them as a project and
    check ``name`` with ``rule``: the (line, column) of each finding."""
    import textwrap

    from torchdev_lint.analysis import project_index
    from torchdev_lint.engine import lint_source

    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    target = root / name
    index = project_index.build([str(target)])
    result = lint_source(str(target), target.read_text(), [rule], index=index, preview=True)
    return [(f.line, f.column) for f in result.findings]
