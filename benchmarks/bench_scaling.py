"""How the cost of one file grows with its size and with the length of one expression.

Generated files of 0.1, 1 and 5 MB (ordinary PyTorch code, repeated) and ``b = a+a+...``
chains of 1k/3k/10k terms. For each: CPU seconds and peak memory of ``ast.parse``, of LibCST's
``parse_module`` and of ``torchdev-lint`` checking the file, each in a fresh process, with the
linter's ratios to both parsers; with ``--before``, the same check by another checkout (the
parsers are measured once: both checkouts use this environment's LibCST). Linear growth shows
as a steady CPU time per MB across sizes (printed at the end). CPU seconds (user+sys of the
measuring process) are quoted because wall time means little on a shared machine.

    python benchmarks/bench_scaling.py                          # this checkout
    python benchmarks/bench_scaling.py --before /tmp/before     # and an older checkout
    python benchmarks/bench_scaling.py --repo /path             # only another checkout
    python benchmarks/bench_scaling.py --sizes 0.1 1 --chains   # skip the 5 MB file and the chains
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BLOCK = '''
class Block{n}(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = torch.ones(dim)

    def forward(self, x, mask=None):
        y = self.proj(x) * self.scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return torch.relu(y) + x.mean(dim=-1, keepdim=True)


def train_{n}(model, loader, epochs=1):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x.cuda()), y.to("cuda"))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return {{"loss": loss.item(), "name": "block-{n}"}}
'''
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

MEASURE = r'''
import ast, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
if kind == "ast":
    parse = ast.parse
elif kind == "libcst":
    import libcst
    parse = libcst.parse_module
else:
    import torchdev_lint.rules
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule
start, cpu = time.perf_counter(), time.process_time()
if kind == "lint":
    result = lint_source(path, source, list(Rule.registry.values()))
    outcome = f"error: {result.error.message[:40]}" if result.error else f"{len(result.findings)} findings"
else:
    try:
        parse(source)
        outcome = "ok"
    except Exception as error:  # ast: RecursionError on long chains; LibCST: its own limits
        outcome = type(error).__name__
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
print(cpu, wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, outcome)
'''


def generated(megabytes: float) -> str:
    parts, size, n = [HEADER], len(HEADER), 0
    while size < megabytes * 1e6:
        block = BLOCK.format(n=n)
        parts.append(block)
        size += len(block)
        n += 1
    return "".join(parts)


def chain(terms: int) -> str:
    return HEADER + "a = torch.ones(1)\nb = " + "+".join(["a"] * terms) + "\nc = b.cuda()\n"


@dataclass
class Measured:
    cpu: float  # seconds, user+sys; inf when stopped at the CPU limit, nan when the process died
    wall: float
    mib: float  # peak resident memory of the whole process (interpreter and imports included)
    outcome: str


def measure(kind: str, path: Path, repo: Path, cpu_limit: int) -> Measured:
    """One measurement in a fresh process, stopped once it has used ``cpu_limit`` CPU seconds
    (a limit on CPU, not wall, time: on a shared machine the wall clock says little)."""
    env = {**os.environ, "PYTHONPATH": str(repo)}  # run outside any checkout: -c puts the cwd first
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, kind, str(path)], capture_output=True, text=True, env=env,
        cwd=path.parent, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 10)),
    )
    if done.returncode == -signal.SIGXCPU:
        return Measured(float("inf"), float("inf"), float("nan"), f"still running after {cpu_limit} CPU s")
    if done.returncode != 0:
        how = f"killed by {signal.Signals(-done.returncode).name}" if done.returncode < 0 else f"exit {done.returncode}"
        return Measured(float("nan"), float("nan"), float("nan"), f"crashed ({how})")
    cpu, wall, mib, outcome = done.stdout.split(maxsplit=3)
    return Measured(float(cpu), float(wall), float(mib), outcome.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout measured as 'after' (default: this one)")
    parser.add_argument("--before", type=Path, help="a checkout measured as 'before' too")
    parser.add_argument("--sizes", type=float, nargs="*", default=[0.1, 1, 5])
    parser.add_argument("--chains", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--cpu-limit", type=int, default=600, help="CPU seconds per measurement")
    parser.add_argument("--json", type=Path, help="also write the rows to this file as JSON")
    args = parser.parse_args()
    kinds = {"ast": None, "libcst": None, "lint": args.repo.resolve()}
    if args.before is not None:
        kinds["before"] = args.before.resolve()
    inputs = [(f"{size:g} MB file", generated(size)) for size in args.sizes]
    inputs += [(f"{terms // 1000}k-term chain", chain(terms)) for terms in args.chains]
    rows = []
    print(header(kinds), flush=True)
    with tempfile.TemporaryDirectory() as directory:
        for name, text in inputs:
            path = Path(directory, "generated.py")
            path.write_text(text, encoding="utf-8")
            row = {"input": name, "bytes": len(text)}
            for kind, repo in kinds.items():
                row[kind] = measure("lint" if repo else kind, path, repo or args.repo, args.cpu_limit)
            rows.append(row)
            print(line(row, kinds), flush=True)
    print(growth(rows, kinds))
    if args.json:
        args.json.write_text(json.dumps(
            [{k: dataclasses.asdict(v) if isinstance(v, Measured) else v for k, v in row.items()} for row in rows],
            indent=1))


def header(kinds) -> str:
    columns = [f"{'input':<15}", f"{'ast s':>7}", f"{'cst s':>8}"]
    for kind in kinds:
        if kind in ("lint", "before"):
            label = "after" if kind == "lint" else "before"
            columns += [f"{label + ' s':>9}", f"{'/ast':>6}", f"{'/cst':>6}"]
    columns += [f"{k + ' MiB':>{11 if k == 'before' else 10}}" for k in kinds]
    return " ".join(columns) + "  outcomes (lint" + (", before)" if "before" in kinds else ")")


def line(row: dict, kinds) -> str:
    a, c = row["ast"].cpu, row["libcst"].cpu
    columns = [f"{row['input']:<15}", seconds(row["ast"], 7), seconds(row["libcst"], 8)]
    for kind in kinds:
        if kind in ("lint", "before"):
            t = row[kind].cpu
            columns += [seconds(row[kind], 9), ratio(t, a), ratio(t, c)]
    columns += [f"{row[k].mib:>{11 if k == 'before' else 10}.0f}" for k in kinds]
    outcomes = [row[k].outcome for k in kinds if k in ("lint", "before")]
    extra = f"; libcst: {row['libcst'].outcome}; ast: {row['ast'].outcome}"
    return " ".join(columns) + "  " + " | ".join(outcomes) + extra


def seconds(measured: Measured, width: int) -> str:
    if measured.cpu == float("inf"):
        return f"{'limit':>{width}}"
    if measured.cpu != measured.cpu:
        return f"{'crash':>{width}}"
    return f"{measured.cpu:{width}.2f}"


def ratio(t: float, base: float) -> str:
    return f"{t / base:6.1f}" if base > 0 and t == t and base == base and t != float("inf") else f"{'-':>6}"


def growth(rows: list[dict], kinds) -> str:
    """CPU seconds per MB of each generated file: constant when the cost is linear."""
    files = [r for r in rows if r["input"].endswith("MB file")]
    if len(files) < 2:
        return ""
    out = ["", "CPU seconds per MB (linear growth: the same on every row)"]
    for row in files:
        megabytes = row["bytes"] / 1e6
        out.append(f"{row['input']:<15} " + " ".join(
            f"{kind} {row[kind].cpu / megabytes:7.2f}" for kind in kinds))
    return "\n".join(out)


if __name__ == "__main__":
    main()
