"""Speed as users see it: whole ``torchdev-lint`` runs, cold, warm, after one edit, and with
more processes, next to bare LibCST parsing and (when installed) ruff and TorchFix.

    python benchmarks/bench_speed.py DIR [--repeat 3] [--startup 20] [--torchfix]

DIR is copied to a temporary directory first (the one-file-changed runs edit the copy).
Every figure is the median wall-clock time of ``--repeat`` runs (CPU seconds beside it:
on a shared machine, wall time also measures the neighbours). Targets (issue 13):
warm / cold <= 0.05, ``-j 2`` / ``-j 1`` <= 0.6 on a 2-core machine, start-up < 0.25 s (the
one-file case is timed three ways: parsed in process, parsed by a warm resident checker, and
served from the cache).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-m", "torchdev_lint", "--isolated", "--exit-zero", "-q"]
_PARSE_ONLY = """
import sys, libcst
from pathlib import Path
for p in sorted(Path(sys.argv[1]).rglob('*.py')):
    try:
        libcst.parse_module(p.read_text(encoding='utf-8'))
    except Exception:
        pass
"""


# Every run checks in its own process (its CPU time is then the run's), except the resident
# start-up figure, which is the point of the resident checker.
IN_PROCESS = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHDEV_LINT_DAEMON": "0"}


def timed(command: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its workers) of one run."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env or IN_PROCESS)
    _, _, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, str]] = []

    def add(self, name: str, runs: list[tuple[float, float]], note: str = "") -> float:
        wall, cpu = median(runs)
        self.rows.append((name, wall, cpu, note))
        return wall

    def print(self, base: float) -> None:
        print(f"  {'run':44} {'wall s':>8} {'CPU s':>8} {'/ parse':>8}  note")
        for name, wall, cpu, note in self.rows:
            print(f"  {name:44} {wall:8.3f} {cpu:8.2f} {wall / base:8.2f}  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--startup", type=int, default=20, help="runs of the one-small-file case")
    parser.add_argument("--torchfix", action="store_true", help="also time TorchFix's CLI (slow), once")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-speed-"))
    try:
        run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args, scratch: Path) -> None:
    tree = scratch / args.directory.name
    shutil.copytree(args.directory, tree, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    py = sorted(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in py)
    cores = len(os.sched_getaffinity(0))
    print(f"{args.directory}: {len(py)} files, {lines:,} lines; {cores} cores; "
          f"median of {args.repeat} runs (load average {os.getloadavg()[0]:.1f} at start)")
    table = Table()
    fresh = iter(range(10_000))

    def cold(jobs: int) -> list[tuple[float, float]]:
        return [timed([*LINT, "-j", str(jobs), "--cache-dir", str(scratch / f"cache{next(fresh)}"), str(tree)])
                for _ in range(args.repeat)]

    parse = table.add("bare libcst.parse_module, one process", [
        timed([sys.executable, "-c", _PARSE_ONLY, str(tree)]) for _ in range(args.repeat)])
    cold1 = table.add("torchdev-lint cold -j 1", cold(1))
    scaling = {jobs: table.add(f"torchdev-lint cold -j {jobs}", cold(jobs)) for jobs in sorted({2, cores}) if jobs > 1}
    shared = scratch / "shared-cache"
    timed([*LINT, "--cache-dir", str(shared), str(tree)])  # fill the cache
    warm = table.add("torchdev-lint warm (unchanged tree)", [
        timed([*LINT, "--cache-dir", str(shared), str(tree)]) for _ in range(args.repeat)])
    edited = next(p for p in py if b"torch" in p.read_bytes())
    changed = []
    for number in range(args.repeat):
        with edited.open("a") as handle:
            handle.write(f"\n# benchmark edit {number}\n")
        changed.append(timed([*LINT, "--cache-dir", str(shared), str(tree)]))
    one = table.add("torchdev-lint one file changed", changed, edited.relative_to(tree).as_posix())
    ruff = shutil.which("ruff")
    if ruff:
        table.add("ruff check --select ALL --no-cache", [
            timed([ruff, "check", "--no-cache", "--select", "ALL", "--exit-zero", "-q", str(tree)])
            for _ in range(args.repeat)])
    torchfix = shutil.which("torchfix")
    if torchfix and args.torchfix:
        table.add("torchfix (CLI, check only), one run", [timed([torchfix, str(tree)])])
    table.print(parse)

    small = scratch / "small.py"
    small.write_text("import torch\n\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    command = [shutil.which("torchdev-lint") or LINT[0], *([] if shutil.which("torchdev-lint") else LINT[1:3])]
    parsed = [*command, "--isolated", "--no-cache", "--exit-zero", str(small)]
    startup = median([timed(parsed) for _ in range(args.startup)])
    print(f"  start-up, one small file, parsed in process (median of {args.startup}): {startup[0]:.3f} s wall, "
          f"{startup[1]:.3f} s CPU")
    resident = {**IN_PROCESS, "TORCHDEV_LINT_DAEMON": "1", "TORCHDEV_LINT_RUNTIME_DIR": str(scratch / "run")}
    timed(parsed, env=resident)  # checks in process and starts the resident checker
    deadline = time.monotonic() + 60
    while not list((scratch / "run").glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    startup = median([timed(parsed, env=resident) for _ in range(args.startup)])
    # The figure means something only if those runs were served: -v says whether, or why not.
    said = subprocess.run([*parsed, "-v"], env=resident, capture_output=True, text=True).stderr.splitlines()
    subprocess.run([*command, "daemon", "stop"], env=resident, stdout=subprocess.DEVNULL)
    print(f"  start-up, one small file, parsed by the resident checker (median of {args.startup}): "
          f"{startup[0]:.3f} s wall  (target < 0.25 s; the command's own CPU: {startup[1]:.3f} s)")
    print(f"    {said[0] if said else 'torchdev-lint: (nothing said under -v)'}")
    cached = [*command, "--isolated", "--cache-dir", str(scratch / "small-cache"), "--exit-zero", str(small)]
    timed(cached)  # fill the cache
    startup = median([timed(cached) for _ in range(args.startup)])
    print(f"  start-up, one small file, from the cache (median of {args.startup}): {startup[0]:.3f} s wall, "
          f"{startup[1]:.3f} s CPU  (target < 0.25 s)")
    print(f"  warm / cold -j 1:          {warm / cold1:.3f}  (target <= 0.05)")
    print(f"  one file changed / cold:   {one / cold1:.3f}")
    for jobs, wall in scaling.items():
        print(f"  -j {jobs} / -j 1:               {wall / cold1:.3f}" + ("  (target <= 0.6)" if jobs == 2 else ""))
    print(f"  cold -j 1 / bare parse:    {cold1 / parse:.2f}")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (other work on the machine inflates wall times)")


if __name__ == "__main__":
    main()
