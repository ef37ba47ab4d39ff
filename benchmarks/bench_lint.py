"""Lint speed and memory against the floor of any LibCST tool: bare ``libcst.parse_module``.

    python benchmarks/bench_lint.py DIR [--repeat 3]

Reads every Python file under DIR once, then times, in this one process and on the same
texts, (a) ``libcst.parse_module`` alone, (b) the whole lint (pre-check, parse, one
traversal with every rule, positions and noqa for files with findings) and (c) the project
index the CLI builds once per run (stdlib ``ast``) with the lint that uses it: its share of
the time has a budget of 10%. Each is repeated;
medians are reported, with lines per second and the ratio lint / parse (target: <= 2.5).
Then whole processes, as users run them: CPU time and peak memory of a process that only
parses every file, of ``torchdev-lint DIR``, and of ``ruff check`` when ruff is installed
(a different, Rust-based tool: the speed users are used to).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import libcst  # noqa: E402

import torchdev_lint.rules  # noqa: E402,F401
from torchdev_lint import files  # noqa: E402
from torchdev_lint.analysis import project_index  # noqa: E402
from torchdev_lint.config import Resolver, enabled_rules  # noqa: E402
from torchdev_lint.engine import lint_source  # noqa: E402


def _sources(directory: str) -> list[files.SourceFile]:
    paths, _ = files.discover([directory], Resolver())
    sources = [files.read(p) for p in paths]
    return [s for s in sources if isinstance(s, files.SourceFile)]


def _time(fn, sources) -> float:
    start = time.process_time()
    for source in sources:
        fn(source)
    return time.process_time() - start


def _parse(source: files.SourceFile) -> None:
    try:
        libcst.parse_module(source.text)
    except libcst.ParserSyntaxError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-processes", action="store_true",
                        help="only the in-process timings, not whole processes")
    args = parser.parse_args()
    sources = _sources(args.directory)
    lines = sum(s.text.count("\n") + 1 for s in sources)
    rules = enabled_rules(["TDL"], [])
    findings = sum(len(lint_source(s.path, s.text, rules).findings) for s in sources)  # warm-up

    parse_times = [_time(_parse, sources) for _ in range(args.repeat)]
    lint_times = [
        _time(lambda s: lint_source(s.path, s.text, rules), sources) for _ in range(args.repeat)
    ]
    # The project index, as the CLI builds it once per run, and the lint that uses it.
    paths = [s.path for s in sources]
    index_times, indexes = [], []
    for _ in range(args.repeat):
        start = time.process_time()
        indexes.append(project_index.build(paths))
        index_times.append(time.process_time() - start)
    index = indexes[-1]
    indexed_times = [
        _time(lambda s: lint_source(s.path, s.text, rules, index=index), sources)
        for _ in range(args.repeat)
    ]
    parse_s, lint_s = statistics.median(parse_times), statistics.median(lint_times)
    index_s, indexed_s = statistics.median(index_times), statistics.median(indexed_times)
    total_s = index_s + indexed_s
    print(f"{args.directory}: {len(sources)} files, {lines} lines, {findings} findings, "
          f"{len(rules)} rules, median of {args.repeat} runs (CPU seconds)")
    print(f"  libcst.parse_module  {parse_s:8.2f} s  {lines / parse_s:10,.0f} lines/s  1.00x")
    print(f"  torchdev-lint        {lint_s:8.2f} s  {lines / lint_s:10,.0f} lines/s  "
          f"{lint_s / parse_s:.2f}x parse  (no project index)")
    print(f"  project index build  {index_s:8.2f} s  {len(index.paths)} modules")
    print(f"  lint with the index  {total_s:8.2f} s  {lines / total_s:10,.0f} lines/s  "
          f"{total_s / parse_s:.2f}x parse  (index {100 * index_s / total_s:.1f}% of it; "
          f"budget 10%)")
    if not args.no_processes:
        processes(args.directory, args.repeat)


_PARSE_ONLY = """
import sys, libcst
from pathlib import Path
for p in Path(sys.argv[1]).rglob('*.py'):
    try:
        libcst.parse_module(p.read_text(encoding='utf-8'))
    except Exception:
        pass
"""


def _process(command: list[str]) -> tuple[float, float]:
    """CPU seconds and peak memory (MiB) of one child process."""
    pid = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def processes(directory: str, repeat: int) -> None:
    commands = {
        "parse only (python + libcst)": [sys.executable, "-c", _PARSE_ONLY, directory],
        "torchdev-lint": [sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", "-j", "1", "--exit-zero", "-q",
                          directory],
    }
    if shutil.which("ruff"):
        commands["ruff check --select ALL"] = ["ruff", "check", "--no-cache", "--select", "ALL", "--exit-zero", directory]
    print("  whole processes (median CPU seconds, peak MiB):")
    base = None
    for name, command in commands.items():
        runs = [_process(command) for _ in range(repeat)]
        cpu = statistics.median(r[0] for r in runs)
        memory = statistics.median(r[1] for r in runs)
        base = base or cpu
        print(f"    {name:30} {cpu:8.2f} s  {memory:7.0f} MiB  {cpu / base:5.2f}x parse-only")


if __name__ == "__main__":
    main()
