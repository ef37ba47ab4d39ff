"""User CPU of `torchdev-lint confirm` on a project's suite, against the plain suite (issue 41).

    python benchmarks/bench_confirm.py [--repeats 3] [--python VENV/bin/python] [--cwd DIR]
        [--keep DIR] -- PYTEST_ARGS...

Runs, alternating, `PYTHON -m pytest -q -p no:cacheprovider PYTEST_ARGS` and
`PYTHON -m torchdev_lint confirm -q -p no:cacheprovider PYTEST_ARGS` in --cwd, with
OMP_NUM_THREADS=1 (the steadiest figures on a shared machine). Prints the median user CPU
seconds of each (children's rusage: pytest, and for confirm its pytest child and the lint it
runs afterwards), the ratio, the plain run's outcome line and confirm's summary line. --python:
the project's venv, where torch and the tool are installed.

--keep DIR: copy the verdict store (verdicts.json of the project's .torchdev_lint_cache) after
each confirm run (which starts without one) to DIR/verdicts-N.json, with confirm's summary in DIR/summary-N.txt, so that
two versions of the simulator can be compared for identical verdicts (diff the files; the store
holds no time nor order that changes between runs).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time


def run_once(command: list[str], cwd: str, env: dict) -> tuple[float, float, str, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    out = [line for line in process.stdout.splitlines() if line.strip()]
    err = [line for line in process.stderr.splitlines() if line.strip()]
    outcome = next((line for line in reversed(out + err) if " passed" in line or " failed" in line
                    or " skipped" in line), f"(exit status {process.returncode})")
    summary = next((line for line in reversed(err) if line.startswith("torchdev-lint confirm: the tests ran")), "")
    return user, wall, outcome, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--cwd", default=".")
    parser.add_argument("--keep", metavar="DIR")
    parser.add_argument("--only", choices=("plain", "confirm"))
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = ["-q", "-p", "no:cacheprovider", *args.pytest_args]
    variants = {"plain": [args.python, "-m", "pytest", *common],
                "confirm": [args.python, "-m", "torchdev_lint", "confirm", *common]}
    if args.only:
        variants = {args.only: variants[args.only]}
    users: dict[str, list[float]] = {name: [] for name in variants}
    last: dict[str, tuple[str, str]] = {}
    store = os.path.join(args.cwd, ".torchdev_lint_cache", "verdicts.json")
    for repeat in range(args.repeats):
        for name, command in variants.items():
            if name == "confirm" and args.keep and os.path.exists(store):
                os.unlink(store)  # a store merges with what it held: start each kept run empty
            user, wall, outcome, summary = run_once(command, args.cwd, env)
            users[name].append(user)
            last[name] = (outcome, summary)
            print(f"  {name:8} run {repeat + 1}: user {user:7.1f} s, wall {wall:7.1f} s  {outcome}", flush=True)
            if name == "confirm" and args.keep:
                os.makedirs(args.keep, exist_ok=True)
                if os.path.exists(store):
                    shutil.copy(store, os.path.join(args.keep, f"verdicts-{repeat + 1}.json"))
                with open(os.path.join(args.keep, f"summary-{repeat + 1}.txt"), "w", encoding="utf-8") as handle:
                    handle.write(summary.split("; ", 1)[-1] + "\n" + outcome + "\n")
    medians = {name: statistics.median(values) for name, values in users.items()}
    for name, value in medians.items():
        print(f"{name:8} median user CPU {value:7.1f} s  ({', '.join(f'{v:.1f}' for v in users[name])})")
    if "plain" in medians and "confirm" in medians and medians["plain"]:
        print(f"ratio confirm / plain: {medians['confirm'] / medians['plain']:.2f}x")
    if "confirm" in last:
        print(f"confirm: {last['confirm'][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
