"""The lint benchmark must keep running as the code under it changes (it broke once when
file discovery started taking per-directory settings): a tiny run, nothing timed."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_lint_reports_its_ratios_on_the_bundled_example():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_lint.py"), str(ROOT / "testdata"),
         "--repeat", "1", "--no-processes"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "x parse" in done.stdout and "project index build" in done.stdout
