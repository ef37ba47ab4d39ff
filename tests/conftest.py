import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The suite checks in its own processes; tests/test_daemon.py turns the resident checker on
# where it tests it, with a runtime directory of its own.
os.environ["TORCHDEV_LINT_DAEMON"] = "0"


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
