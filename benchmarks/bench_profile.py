"""Where a cold run's time goes, as shares of LibCST's parse of the same files (issue 28).

    python benchmarks/bench_profile.py DIR [DIR ...] [--repeat 3] [--preview] [--findings FOLDER]
        [--no-processes] [--no-in-process] [--no-breakdown]

``--preview`` times every rule (the command's ``--preview``) instead of the default output.
``--findings FOLDER`` first checks that the findings did not change: the JSON findings of
``-j 2 --no-cache`` (default and ``--preview``), paths relative to DIR and sorted, are compared
with ``FOLDER/<DIR's name>.<default|preview>.json``, or written there when it holds none (the
"before" of an optimization); a difference is printed and the script exits 1.

For each DIR (copied to a temporary directory first: the one-file-changed run edits the copy):

1. Whole processes, as users run them (``--isolated --exit-zero -q``, the default tier):
   a bare ``libcst.parse_module`` of exactly the files the linter checks; a cold run
   ``-j 1 --no-cache`` (CPU seconds, and their ratio to the parse: the target is <= 1.3);
   ``-j 2`` into an empty cache (wall, and its ratio to ``-j 1``'s wall; the cache it fills
   serves the next runs); a warm run (nothing
   changed: wall, target < 1 s on diffusers); a run after one file changed; peak memory of
   each (the process and its workers). Medians of ``--repeat`` runs (CPU time, not wall,
   is what to compare on a shared machine; wall times are printed beside it).
2. Phases of one in-process cold run (``-j 1 --no-cache``), timed exactly (CPU seconds,
   exclusive: a phase inside another counts once): reading files, the project index,
   the ``wants`` prefilter, the depth budget (``limits.measure``), the LibCST parse, the
   syntax check of files no rule wants, the traversal with every rule and analysis, the
   positions metadata, noqa, fixes and output.
3. The traversal's share per analysis module and per rule: the same run under cProfile,
   switched on only inside the traversal; each module's own time, and the time of code
   outside the package (LibCST's node properties, ``re``) charged to the module that called
   it; scaled to the exact traversal time of step 2 (the profiler slows Python code more
   than native code, so its absolute figures are not used).

Every figure of steps 2 and 3 is printed in seconds and as a multiple of the parse time of
step 1's in-process counterpart (``libcst.parse_module`` in this process, median of
``--repeat``).
"""

from __future__ import annotations

import argparse
import collections
import compileall
import cProfile
import contextlib
import functools
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGE = str(ROOT / "torchdev_lint")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHDEV_LINT_DAEMON": "0"}
LINT = [sys.executable, "-m", "torchdev_lint", "--isolated", "--exit-zero", "-q"]
PREVIEW: list[str] = []  # ["--preview"] with --preview: every rule

_PARSE_LISTED = """
import sys, libcst
for path in open(sys.argv[1], encoding='utf-8').read().splitlines():
    try:
        with open(path, encoding='utf-8') as handle:
            libcst.parse_module(handle.read())
    except Exception:
        pass
"""


def findings(tree: Path, preview: bool) -> list:
    """The findings of the command on ``tree``, as JSON objects: paths relative to it, sorted."""
    command = [sys.executable, "-m", "torchdev_lint", "--isolated", "--exit-zero", "--no-cache", "-j", "2",
               "--format", "json", *(["--preview"] if preview else []), str(tree)]
    found = json.loads(subprocess.run(command, env=ENV, check=True, capture_output=True, text=True).stdout)
    return sorted((relative_paths(f, str(tree)) for f in found), key=lambda f: json.dumps(f, sort_keys=True))


def relative_paths(value, root: str):
    """``value`` (a finding as JSON) with the paths under ``root`` made relative to it, in
    its fields and in the text of its messages (the scratch copy's name differs per run)."""
    if isinstance(value, dict):
        return {key: relative_paths(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [relative_paths(item, root) for item in value]
    if isinstance(value, str) and value.startswith(root + os.sep):
        return value[len(root) + 1:]
    if isinstance(value, str):
        return value.replace(root + os.sep, "")
    return value


def compare_findings(tree: Path, name: str, folder: Path) -> bool:
    """The findings match those recorded in ``folder`` (recorded there when it has none)."""
    same = True
    for preview in (False, True):
        recorded = folder / f"{name}.{'preview' if preview else 'default'}.json"
        now = findings(tree, preview)
        if not recorded.exists():
            folder.mkdir(parents=True, exist_ok=True)
            recorded.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print(f"  findings recorded: {recorded} ({len(now)})")
            continue
        before = json.loads(recorded.read_text(encoding="utf-8"))
        if now == before:
            print(f"  findings identical to {recorded} ({len(now)})")
            continue
        same = False
        encode = functools.partial(json.dumps, sort_keys=True)
        was, is_now = {encode(f) for f in before}, {encode(f) for f in now}
        gone, new = was - is_now, is_now - was
        print(f"  FINDINGS DIFFER from {recorded}: {len(before)} before, {len(now)} now")
        for line in sorted(gone)[:20]:
            print(f"    - {line}")
        for line in sorted(new)[:20]:
            print(f"    + {line}")
    return same


def timed(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (the process and its workers) and peak MiB of one run."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, _, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def medians(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return tuple(statistics.median(r[i] for r in runs) for i in range(3))  # type: ignore[return-value]


def processes(tree: Path, listed: Path, scratch: Path, repeat: int) -> None:
    # The command runs a copy of the package: an edit to the checkout during the runs (its
    # files' times are the cache's fingerprint) would turn the warm runs cold.
    snapshot = scratch / "package"
    shutil.copytree(ROOT / "torchdev_lint", snapshot / "torchdev_lint", ignore=shutil.ignore_patterns("__pycache__"))
    # An installed package carries its bytecode (pip compiles it at install); without it
    # every process would compile the package again (~0.3 s), more so where
    # PYTHONDONTWRITEBYTECODE is set and nothing is ever cached.
    compileall.compile_dir(snapshot, quiet=1)
    ENV["PYTHONPATH"] = str(snapshot)
    fresh = iter(range(10_000))
    rows = []

    def row(name: str, runs: list) -> tuple[float, float, float]:
        wall, cpu, memory = medians(runs)
        rows.append((name, wall, cpu, memory))
        return wall, cpu, memory

    parse = row("bare libcst.parse_module (same files)",
                [timed([sys.executable, "-c", _PARSE_LISTED, str(listed)]) for _ in range(repeat)])
    cold = row(f"cold -j 1 --no-cache {' '.join(PREVIEW)}",
               [timed([*LINT, "-j", "1", "--no-cache", str(tree)]) for _ in range(repeat)])
    # Cold -j 2 runs, each into an empty cache: the last one's fills it for the warm runs.
    caches = [scratch / f"cache{next(fresh)}" for _ in range(repeat)]
    two = row("cold -j 2 (an empty cache, filled by the run)",
              [timed([*LINT, "-j", "2", "--cache-dir", str(c), str(tree)]) for c in caches])
    shared = caches[-1]
    warm = row("warm (unchanged tree)", [timed([*LINT, "--cache-dir", str(shared), str(tree)]) for _ in range(repeat)])
    edited = next((p for p in sorted(tree.rglob("*.py")) if b"torch" in p.read_bytes()), None)
    one = None
    if edited is not None:
        changed = []
        for number in range(repeat):
            with edited.open("a") as handle:
                handle.write(f"\n# benchmark edit {number}\n")
            changed.append(timed([*LINT, "--cache-dir", str(shared), str(tree)]))
        one = row(f"one file changed ({edited.relative_to(tree).as_posix()})", changed)
    print(f"  whole processes, median of {repeat} (load average {os.getloadavg()[0]:.1f}):")
    print(f"    {'run':58} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}")
    for name, wall, cpu, memory in rows:
        print(f"    {name:58} {wall:8.2f} {cpu:8.2f} {memory:9.0f}")
    print(f"    cold -j 1 CPU / parse CPU:   {cold[1] / parse[1]:.2f}  (target <= 1.3)")
    print(f"    -j 2 wall / -j 1 wall:       {two[0] / cold[0]:.2f}")
    print(f"    warm wall:                   {warm[0]:.2f} s  (target < 1 s on diffusers)")
    if one is not None:
        print(f"    one file changed wall:       {one[0]:.2f} s")


# -- phases of one in-process run --------------------------------------------------------------


class Phases:
    """Exclusive CPU time per phase: a wrapped call's time, less that of wrapped calls
    inside it (process CPU time: the lint runs on a thread of its own)."""

    def __init__(self) -> None:
        self.seconds: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self.stack: list[list] = []  # [phase, start, time inside nested phases]

    def wrap(self, phase: str, function):
        def timed_call(*args, **kwargs):
            self.stack.append([phase, time.process_time(), 0.0])
            try:
                return function(*args, **kwargs)
            finally:
                name, start, inner = self.stack.pop()
                spent = time.process_time() - start
                self.seconds[name] += spent - inner
                self.calls[name] += 1
                if self.stack:
                    self.stack[-1][2] += spent
        timed_call.__wrapped__ = function
        return timed_call


_INHERITED = object()


@contextlib.contextmanager
def patched(targets: list[tuple[object, str, str]], phases: Phases):
    saved = []
    try:
        for owner, attribute, phase in targets:
            # A class keeps its own entry (a classmethod stays one), or inherits again.
            saved.append((owner, attribute, vars(owner).get(attribute, _INHERITED)))
            setattr(owner, attribute, phases.wrap(phase, getattr(owner, attribute)))
        yield
    finally:
        for owner, attribute, original in reversed(saved):
            if original is _INHERITED:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


class _TimedAst:
    """``engine.ast`` with its ``parse`` (the syntax check of files no rule wants) timed."""

    def __init__(self, module, phases: Phases) -> None:
        self._module = module
        self.parse = phases.wrap("syntax check of unwanted files (ast)", module.parse)

    def __getattr__(self, name):
        return getattr(self._module, name)


WALK = "traversal, rules and analyses"


def run_in_process(tree: Path, phases: Phases, profiler: cProfile.Profile | None = None) -> float:
    """One cold ``-j 1 --no-cache`` run of the command line in this process; its CPU time."""
    from torchdev_lint import cli, engine, files, limits, runner
    from torchdev_lint.analysis import callees, project_index
    from torchdev_lint.analysis import context as context_module

    for memo in ("_MEASURED", "_PARSED"):  # what an earlier run in this process remembers
        for module in (limits, project_index, callees):
            getattr(module, memo, {}).clear()
    from torchdev_lint.rule import Rule

    walk = engine._Traversal.walk

    def top_walk(self, node):  # the first call per file: the whole traversal
        if getattr(self, "_profiled", False):
            return walk(self, node)
        self._profiled = True
        if profiler is not None:
            profiler.enable()
        try:
            return walk(self, node)
        finally:
            if profiler is not None:
                profiler.disable()

    end_of_file = {cls: cls.end_of_file for cls in Rule.registry.values()}

    def profiled_end(original):
        def end(self):
            if profiler is not None:
                profiler.enable()
            try:
                return original(self)
            finally:
                if profiler is not None:
                    profiler.disable()
        return end

    report = context_module.FileContext.report

    def timed_report(self, rule, node, message, fix, *args, **kwargs):
        if callable(fix):
            fix = phases.wrap("fixes", fix)
        return report(self, rule, node, message, fix, *args, **kwargs)

    targets = [
        (files, "read", "read files"),
        (runner, "build_index", "project index"),
        (limits, "measure", "depth budget (limits.measure)"),
        (engine, "parse", "LibCST parse"),
        (engine, "_positions", "positions (metadata)"),
        *((engine.Positions, method, "positions (metadata)")
          for method in ("_statement_starts", "statement", "_compute")),
        (engine, "NoqaMap", "noqa"),
        (engine.placement, "withhold_unplaceable", "fixes"),
        (cli, "_report", "output"),
        (engine, "lint_source", WALK),  # the rest of the lint: the walk and its analyses
        *((cls, "wants", "prefilter (wants)") for cls in Rule.registry.values()),
    ]
    ast_module = engine.ast
    engine._Traversal.walk = top_walk
    context_module.FileContext.report = timed_report
    for cls, original in end_of_file.items():
        if "end_of_file" in vars(cls):
            cls.end_of_file = profiled_end(original)
    engine.ast = _TimedAst(ast_module, phases)
    try:
        with patched(targets, phases), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            start = time.process_time()
            cli.main(["--isolated", "--exit-zero", "-q", "--no-cache", "-j", "1", *PREVIEW, str(tree)])
            return time.process_time() - start
    finally:
        engine.ast = ast_module
        engine._Traversal.walk = walk
        context_module.FileContext.report = report
        for cls, original in end_of_file.items():
            if "end_of_file" in vars(cls):
                cls.end_of_file = original


def _category(filename: str) -> str | None:
    """The analysis module or rule a function's file belongs to; None outside the package."""
    if not filename.startswith(PACKAGE):
        return None
    relative = filename[len(PACKAGE) + 1:]
    if relative.startswith("rules" + os.sep):
        return "rule " + Path(relative).stem.split("_", 1)[0].upper()
    if relative.startswith("analysis" + os.sep):
        return "analysis " + Path(relative).stem
    if relative == "engine.py":
        return "traversal (engine)"
    return Path(relative).stem


def breakdown(profiler: cProfile.Profile) -> dict[str, float]:
    """Own time per category; code outside the package is charged to its callers in
    proportion to the time each spent in it, up the chain to a function of the package."""
    stats = pstats.Stats(profiler).stats  # func -> (cc, nc, tt, ct, callers)
    charged: dict = {}

    def shares(function, depth=0) -> dict[str, float]:
        """Where one second of ``function``'s own time is charged."""
        if function in charged:
            return charged[function]
        category = _category(function[0])
        if category is not None:
            charged[function] = {category: 1.0}
            return charged[function]
        charged[function] = {"outside the package": 1.0}  # while computing (a cycle)
        callers = stats[function][4] if function in stats else {}
        total = sum(entry[3] for entry in callers.values())
        if depth > 50 or not callers or total <= 0:
            return charged[function]
        result: collections.Counter = collections.Counter()
        for caller, entry in callers.items():
            for category, share in shares(caller, depth + 1).items():
                result[category] += share * entry[3] / total
        charged[function] = dict(result)
        return charged[function]

    spent: collections.Counter = collections.Counter()
    for function, (_, _, own, _, _) in stats.items():
        for category, share in shares(function).items():
            spent[category] += own * share
    return dict(spent)


def in_process(tree: Path, repeat: int, want_breakdown: bool) -> None:
    import libcst

    from torchdev_lint import files
    from torchdev_lint.config import Resolver

    paths, _ = files.discover([str(tree)], Resolver())
    texts = [s.text for s in map(files.read, paths) if isinstance(s, files.SourceFile)]
    parses = []
    for _ in range(repeat):
        start = time.process_time()
        for text in texts:
            try:
                libcst.parse_module(text)
            except Exception:
                pass
        parses.append(time.process_time() - start)
    parse = statistics.median(parses)
    runs = []
    for _ in range(repeat):
        phases = Phases()
        total = run_in_process(tree, phases)
        runs.append((total, phases))
    total = statistics.median(r[0] for r in runs)
    names = sorted({n for _, p in runs for n in p.seconds}, key=lambda n: -statistics.median(
        p.seconds[n] for _, p in runs))
    seconds = {n: statistics.median(p.seconds[n] for _, p in runs) for n in names}
    print(f"  one in-process cold run (-j 1 --no-cache), median of {repeat}, CPU seconds and x parse "
          f"(libcst.parse_module in this process: {parse:.2f} s):")
    print(f"    {'phase':58} {'s':>8} {'x parse':>8}")
    for name in names:
        print(f"    {name:58} {seconds[name]:8.2f} {seconds[name] / parse:8.3f}")
    rest = total - sum(seconds.values())
    print(f"    {'other (settings, discovery, the run around them)':58} {rest:8.2f} {rest / parse:8.3f}")
    print(f"    {'total':58} {total:8.2f} {total / parse:8.3f}")
    if not want_breakdown:
        return
    profiler = cProfile.Profile()
    run_in_process(tree, Phases(), profiler)
    spent = breakdown(profiler)
    profiled = sum(spent.values()) or 1.0
    walk = seconds.get(WALK, 0.0)
    print(f"  {WALK!r} by module (cProfile shares, scaled to its {walk:.2f} s):")
    for name, own in sorted(spent.items(), key=lambda item: -item[1]):
        share = walk * own / profiled
        if share >= 0.0005 * parse:
            print(f"    {name:58} {share:8.2f} {share / parse:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--preview", action="store_true", help="time every rule (the command's --preview)")
    parser.add_argument("--findings", type=Path, metavar="FOLDER",
                        help="compare the findings with those recorded in FOLDER (record them when absent)")
    parser.add_argument("--no-processes", action="store_true", help="skip the whole-process runs")
    parser.add_argument("--no-in-process", action="store_true", help="skip the phase table")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the cProfile run")
    args = parser.parse_args()
    if args.preview:
        LINT.append("--preview")
        PREVIEW.append("--preview")
    differ = False
    for directory in args.directories:
        scratch = Path(tempfile.mkdtemp(prefix="bench-profile-"))
        try:
            tree = scratch / directory.name
            shutil.copytree(directory, tree, ignore=shutil.ignore_patterns(".git"), symlinks=True)
            import torchdev_lint.rules  # noqa: F401  (registers the rules)
            from torchdev_lint import files
            from torchdev_lint.config import Resolver

            paths, _ = files.discover([str(tree)], Resolver())
            listed = scratch / "files.txt"
            listed.write_text("\n".join(paths), encoding="utf-8")
            lines = sum(Path(p).read_bytes().count(b"\n") for p in paths)
            print(f"{directory}: {len(paths)} files, {lines:,} lines, {len(os.sched_getaffinity(0))} cores")
            if args.findings is not None:
                differ |= not compare_findings(tree, directory.name, args.findings)
            if not args.no_processes:
                processes(tree, listed, scratch, args.repeat)
            if not args.no_in_process:
                in_process(tree, args.repeat, not args.no_breakdown)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        sys.stdout.flush()
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
