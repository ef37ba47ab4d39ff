"""Lint speed against the floor of any LibCST tool: bare ``libcst.parse_module``.

    python benchmarks/bench_lint.py DIR [--repeat 3]

Reads every Python file under DIR once, then times, in this one process and on the same
texts, (a) ``libcst.parse_module`` alone and (b) the whole lint (pre-check, parse, one
traversal with every rule, positions and noqa for files with findings). Each is repeated;
medians are reported, with lines per second and the ratio lint / parse (target: <= 2.5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import libcst  # noqa: E402

import torchdev_lint.rules  # noqa: E402,F401
from torchdev_lint import files  # noqa: E402
from torchdev_lint.config import enabled_rules  # noqa: E402
from torchdev_lint.engine import lint_source  # noqa: E402


def _sources(directory: str) -> list[files.SourceFile]:
    paths, _ = files.discover([directory], [], Path(directory))
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
    args = parser.parse_args()
    sources = _sources(args.directory)
    lines = sum(s.text.count("\n") + 1 for s in sources)
    rules = enabled_rules(["TDL"], [])
    findings = sum(len(lint_source(s.path, s.text, rules).findings) for s in sources)  # warm-up

    parse_times = [_time(_parse, sources) for _ in range(args.repeat)]
    lint_times = [
        _time(lambda s: lint_source(s.path, s.text, rules), sources) for _ in range(args.repeat)
    ]
    parse_s, lint_s = statistics.median(parse_times), statistics.median(lint_times)
    print(f"{args.directory}: {len(sources)} files, {lines} lines, {findings} findings, "
          f"{len(rules)} rules, median of {args.repeat} runs (CPU seconds)")
    print(f"  libcst.parse_module  {parse_s:8.2f} s  {lines / parse_s:10,.0f} lines/s  1.00x")
    print(f"  torchdev-lint        {lint_s:8.2f} s  {lines / lint_s:10,.0f} lines/s  "
          f"{lint_s / parse_s:.2f}x parse")


if __name__ == "__main__":
    main()
