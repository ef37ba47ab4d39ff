"""How the cost of one file grows with its size and with the length of one expression.

Generated files of 0.1, 1 and 5 MB (ordinary PyTorch code, repeated) and ``b = a+a+...``
chains of 1k/3k/10k terms. For each: seconds and peak memory of ``ast.parse``, of LibCST's
``parse_module`` and of ``torchdev-lint`` checking the file, each in a fresh process, with the
linter's ratios to both parsers. Linear growth shows as a steady ratio across sizes.

    python benchmarks/bench_scaling.py                 # this checkout
    python benchmarks/bench_scaling.py --repo /path    # another checkout (before/after)
    python benchmarks/bench_scaling.py --sizes 0.1 1   # skip the 5 MB file
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
import resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
if kind == "libcst":
    import libcst
elif kind == "lint":
    import torchdev_lint.rules
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule
start = time.perf_counter()
if kind == "ast":
    import ast; ast.parse(source); outcome = "ok"
elif kind == "libcst":
    try:
        libcst.parse_module(source); outcome = "ok"
    except Exception as error:
        outcome = type(error).__name__
else:
    result = lint_source(path, source, list(Rule.registry.values()))
    outcome = f"error: {result.error.message[:40]}" if result.error else f"{len(result.findings)} findings"
elapsed = time.perf_counter() - start
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, outcome)
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


def measure(kind: str, path: Path, repo: Path, timeout: float) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(repo)}  # run outside any checkout: -c puts the cwd first
    try:
        done = subprocess.run([sys.executable, "-c", MEASURE, kind, str(path)], capture_output=True,
                              text=True, env=env, timeout=timeout, cwd=path.parent)
    except subprocess.TimeoutExpired:
        return float("inf"), float("nan"), f"still running after {timeout:.0f} s"
    if done.returncode != 0:
        return float("nan"), float("nan"), f"died (exit {done.returncode})"
    seconds, mib, outcome = done.stdout.split(maxsplit=2)
    return float(seconds), float(mib), outcome.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--sizes", type=float, nargs="*", default=[0.1, 1, 5])
    parser.add_argument("--chains", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    inputs = [(f"{size:g} MB file", generated(size)) for size in args.sizes]
    inputs += [(f"{terms // 1000}k-term chain", chain(terms)) for terms in args.chains]
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for name, text in inputs:
            path = Path(directory, "generated.py")
            path.write_text(text, encoding="utf-8")
            row = {"input": name, "bytes": len(text)}
            for kind in ("ast", "libcst", "lint"):
                row[kind] = measure(kind, path, args.repo, args.timeout)
            rows.append(row)
            if not args.json:
                print_row(row, header=len(rows) == 1)
    if args.json:
        print(json.dumps(rows, indent=1))


def print_row(row: dict, header: bool) -> None:
    if header:
        print(f"{'input':<16} {'ast s':>7} {'libcst s':>9} {'lint s':>8} {'lint/ast':>9} {'lint/cst':>9} "
              f"{'ast MiB':>8} {'cst MiB':>8} {'lint MiB':>9}  lint outcome")
    (a, am, _), (c, cm, cstout), (t, tm, out) = row["ast"], row["libcst"], row["lint"]
    print(f"{row['input']:<16} {a:7.2f} {c:9.2f} {t:8.2f} {t / a:9.1f} {t / c:9.2f} "
          f"{am:8.0f} {cm:8.0f} {tm:9.0f}  {out} (libcst: {cstout})", flush=True)


if __name__ == "__main__":
    main()
