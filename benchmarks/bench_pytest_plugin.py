"""Overhead of `pytest --simulate-gpu` on a project's own test suite, against a plain run.

    python benchmarks/bench_pytest_plugin.py [--repeats 3] [--cwd DIR] -- PYTEST_ARGS...

Runs `python -m pytest -q -p no:cacheprovider PYTEST_ARGS` plain, with `--simulate-gpu`, and
(as the plugin's idle cost) plain with the plugin disabled (`-p no:torchdev_lint`), each
--repeats times, alternating. Prints the median wall time and the median CPU time of each
(the CPU time of the child: fairer than the wall time on a shared machine), the ratios to the
plain run, and the outcome line of the last run of each, so that a changed outcome shows.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

VARIANTS = {
    "plugin disabled": ["-p", "no:torchdev_lint"],
    "plain (plugin idle)": [],
    "--simulate-gpu": ["--simulate-gpu"],
}


def run_once(args: list[str], cwd: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                             cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in process.stdout.splitlines() if line.strip()]
    return wall, cpu, lines[-1] if lines else f"(no output, exit status {process.returncode})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("pytest_args", nargs="*")
    options = parser.parse_args()
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in VARIANTS}
    for _ in range(options.repeats):
        for name, extra in VARIANTS.items():
            results[name].append(run_once([*extra, *options.pytest_args], options.cwd))
    base_wall = statistics.median(r[0] for r in results["plain (plugin idle)"])
    base_cpu = statistics.median(r[1] for r in results["plain (plugin idle)"])
    print(f"{'variant':<22} {'wall s':>8} {'ratio':>6} {'cpu s':>8} {'ratio':>6}  outcome")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:<22} {wall:8.2f} {wall / base_wall:5.2f}x {cpu:8.2f} {cpu / base_cpu:5.2f}x  {runs[-1][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
