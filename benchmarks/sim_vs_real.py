"""A project's suite on the simulated GPU against the real one: does each test end the same way?

    python benchmarks/sim_vs_real.py --cwd PROJECT --out DIR [--python PY] -- PYTEST_ARGS...

On a machine with a CUDA GPU, runs the suite three times, each with its own verdict store:
plain (`pytest`, the GPU as the suite finds it), `--simulate-gpu=real` (the real GPU, with the
verdicts recorded) and `--simulate-gpu=sim` with the GPU hidden (`CUDA_VISIBLE_DEVICES=`, as on
a machine without one). Prints, per test, where the simulated run's outcome (passed, failed,
skipped, error; the first line of a failure) differs from the real run's, the count of tests
that agree and of failures whose messages agree, whether the two verdict stores hold the same
confirmed findings and the same device problems (test by test), and the user CPU seconds of each run (real-mode recording against the plain run). Each run's JUnit XML, verdict
store and output land in DIR; `--report-only` compares what DIR holds again.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def run(name: str, command: list[str], cwd: str, env: dict, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        subprocess.run(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before.ru_utime, wall


def outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, first line of its message) from a JUnit XML report."""
    if not xml.exists():
        return {}
    result = {}
    for case in ET.parse(xml).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or "").strip().splitlines()[0:1]
                message = message[0][:160] if message else ""
                break
        result[test] = (outcome, message)
    return result


def _words(message: str) -> str:
    """A failure's message without its exception class (`RuntimeError: ...` and the simulator's
    `...SimulatedDeviceError: ...` say the same)."""
    head, colon, rest = message.partition(": ")
    return rest if colon and head.replace(".", "").replace("_", "").isalnum() else message


def verdicts(store: Path, kind: str) -> set[tuple]:
    """(file content key, line, code, test) of each confirmed finding (kind "confirmed") or each
    device problem a test hit (kind "runtime") in a verdict store."""
    if not store.exists():
        return set()
    files = json.loads(store.read_text()).get("files", {})
    return {(key, entry.get("line"), entry.get("code"), entry.get("by")) for key, data in files.items()
            for entry in data.get(kind, [])}


def report(out: Path, cost: dict[str, tuple[float, float]]) -> None:
    real, sim = outcomes(out / "real.xml"), outcomes(out / "sim.xml")
    same = [test for test in real if sim.get(test, ("absent",))[0] == real[test][0]]
    print(f"{len(same)} of {len(real)} tests end the same on the simulated and the real GPU "
          f"({len(sim)} ran on the simulated one)")
    for test in sorted(set(real) | set(sim)):
        if test not in same:
            print(f"  {test}\n    real: {real.get(test, ('absent', ''))}\n    sim:  {sim.get(test, ('absent', ''))}")
    failed = [test for test in same if real[test][0] == "failed"]
    worded = [test for test in failed if _words(real[test][1]) == _words(sim[test][1])]
    print(f"{len(worded)} of the {len(failed)} tests that fail on both say the same (the exception's class aside: "
          "the simulator's are subclasses)")
    for name in ("plain", "real", "sim"):
        counts = {}
        for outcome, _ in outcomes(out / f"{name}.xml").values():
            counts[outcome] = counts.get(outcome, 0) + 1
        spent = f", user CPU {cost[name][0]:.1f} s, wall {cost[name][1]:.1f} s" if name in cost else ""
        print(f"{name}: {counts}{spent}")
    if "real" in cost and "plain" in cost:
        print(f"real-mode recording against the plain run (user CPU): {cost['real'][0] / max(cost['plain'][0], 1e-9):.2f}x")
    for kind in ("confirmed", "runtime"):
        stores = {name: verdicts(out / f"{name}-verdicts" / "verdicts.json", kind) for name in ("real", "sim")}
        print(f"{kind} verdicts (line, code, test): real {len(stores['real'])}, sim {len(stores['sim'])}, "
              f"{'the same' if stores['real'] == stores['sim'] else 'DIFFERENT'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cwd", default=".")
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--report-only", action="store_true", help="compare the runs already in --out (no run)")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    variants = {"plain": ([], {}), "real": (["--simulate-gpu=real"], {}),
                "sim": (["--simulate-gpu=sim"], {"CUDA_VISIBLE_DEVICES": ""})}
    cost = {}
    for name, (options, extra) in ({} if args.report_only else variants).items():
        env = {**os.environ, **extra, "TORCHDEV_LINT_CACHE_DIR": str(out / f"{name}-verdicts")}
        command = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options,
                   f"--junitxml={out / f'{name}.xml'}", *args.pytest_args]
        cost[name] = run(name, command, args.cwd, env, out)
    report(out, cost)
    return 0


if __name__ == "__main__":
    sys.exit(main())
