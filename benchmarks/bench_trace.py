"""Overhead of `torchdev-lint trace --mode sim` against a plain CPU run.

    python benchmarks/bench_trace.py [--repeats 5] [--steps 100] [--no-end-to-end]

Steady state, in one process: the same training loop, plain and under the tracer's full
instrumentation (simulated GPU: function mode, dispatch mode, hooks, line recording, with the
model and batches on the virtual cuda:0), and under all of it but the line recording, for a small MLP (many cheap ops: the worst case)
and a larger model (compute-bound). End to end: `python SCRIPT` against
`torchdev-lint trace --mode sim SCRIPT` (a child process, imports, the static lint, the report)
on a small training script. Every figure is the median of --repeats runs; the ratio is
traced / plain. Threads are pinned to 1 so that the two sides compete fairly.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMALL_SCRIPT = ROOT / "testdata" / "trace" / "clean_training.py"


def _models(torch, nn):
    small = (lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)),
             (64, 32))
    large = (lambda: nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10)), (32, 3, 32, 32))
    return {"small MLP (32-64-64-10, batch 64)": small, "CNN (2 conv + BN, 32x32 images, batch 32)": large}


def _train(torch, nn, build, shape, steps, device):
    torch.manual_seed(0)
    model = build().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(*shape).to(device)
    y = torch.randint(0, 10, (shape[0],)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(3):  # warm-up (first-use costs of the modes, allocator)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    started = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    elapsed = time.perf_counter() - started
    return elapsed / steps, loss.item()


def steady_state(repeats: int, steps: int) -> list[tuple[str, float, float, float, bool]]:
    import torch
    import torch.nn as nn

    from torchdev_lint.trace import recorder, runner, sites
    from torchdev_lint.trace.coverage import LineRecorder
    from torchdev_lint.trace.runtime import Runtime

    torch.set_num_threads(1)
    rows = []
    events = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
    for name, (build, shape) in _models(torch, nn).items():
        plain, traced, no_lines, same = [], [], [], True
        for _ in range(repeats):
            seconds, plain_loss = _train(torch, nn, build, shape, steps, "cpu")
            plain.append(seconds)
            for with_lines, results in ((True, traced), (False, no_lines)):
                record = recorder.Recorder(events)
                users = sites.UserFiles(str(Path(__file__).parent), __file__)
                rt = Runtime("sim", False, users, record)
                lines = LineRecorder(users, lambda: record.last_seq)
                with runner.instrumented(rt):
                    if with_lines:
                        lines.start()
                    try:
                        seconds, traced_loss = _train(torch, nn, build, shape, steps, "cuda")
                    finally:
                        if with_lines:
                            lines.stop()
                record.close()
                results.append(seconds)
                same = same and plain_loss == traced_loss
        rows.append((name, statistics.median(plain), statistics.median(traced), statistics.median(no_lines), same))
    os.unlink(events)
    return rows


def end_to_end(repeats: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    args = ["--workers", "0", "--epochs", "3"]
    plain, traced = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, str(SMALL_SCRIPT), *args], env=env, check=True, capture_output=True)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torchdev_lint", "trace", "--mode", "sim", str(SMALL_SCRIPT), *args],
                       env=env, capture_output=True, cwd=ROOT)
        traced.append(time.perf_counter() - started)
    return statistics.median(plain), statistics.median(traced)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--no-end-to-end", action="store_true")
    options = parser.parse_args()

    import torch

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"medians of {options.repeats} runs")
    print(f"\nSteady state ({options.steps} training steps after 3 warm-up steps, 1 thread):")
    print(f"  {'model':43} {'plain':>8} {'traced':>8} {'ratio':>6}   {'no lines':>8} {'ratio':>6}  same loss")
    for name, plain, traced, no_lines, same in steady_state(options.repeats, options.steps):
        print(f"  {name:43} {plain * 1e3:8.2f} {traced * 1e3:8.2f} {traced / plain:5.2f}x   "
              f"{no_lines * 1e3:8.2f} {no_lines / plain:5.2f}x  {same}")
    print("  (ms per step; 'no lines': without the line recorder, whose sys.settrace costs a call event per\n"
          "   Python frame on Python < 3.12; 3.12+ uses sys.monitoring, whose cost is negligible)")
    if not options.no_end_to_end:
        plain, traced = end_to_end(options.repeats)
        print(f"\nEnd to end, {SMALL_SCRIPT.relative_to(ROOT)} (3 epochs, no workers), wall seconds:")
        print(f"  python SCRIPT: {plain:.2f} s   torchdev-lint trace --mode sim SCRIPT: {traced:.2f} s   "
              f"ratio {traced / plain:.2f}x")


if __name__ == "__main__":
    main()
