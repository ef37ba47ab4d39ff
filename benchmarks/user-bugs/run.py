"""The user-bug benchmark: does the default output flag the device bugs of realistic programs,
and does `torchdev-lint trace --mode sim` confirm them?

    python benchmarks/user-bugs/run.py            # static: default output and --preview
    python benchmarks/user-bugs/run.py --trace    # also trace each reachable bug program
    python benchmarks/user-bugs/run.py --trace --trace-fixed   # and the fixed copies

Each case is a directory `NN_name/` with `bug/` (the program, its bug lines marked
`# BUG: <class>`), `fixed/` (the same program with the fix) and `case.toml` (how to run it).
See README.md. tests/test_user_bugs.py imports this module.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# The bug classes, in report order, and the rules whose finding at the marked line counts.
CLASSES: dict[str, tuple[str, ...]] = {
    "hardcoded-cuda": ("TDL001", "TDL002"),
    "discarded-move": ("TDL003",),
    "load-without-map-location": ("TDL004",),
    "optimizer-state-before-move": ("TDL005",),
    "cpu-attribute": ("TDL006",),
    "factory-in-forward": ("TDL008",),
    "numpy-on-gpu": ("TDL009",),
}
MARK = re.compile(r"#\s*BUG:\s*([a-z-]+)\s*$")
TRACE_TIMEOUT = 120  # seconds, per traced program (they take a few)


@dataclass(frozen=True)
class Mark:
    case: str
    path: str  # relative to the copy (bug/ or fixed/)
    line: int
    cls: str

    def where(self, copy: str = "bug") -> str:
        return f"{self.case}/{copy}/{self.path}:{self.line}"


@dataclass
class Case:
    name: str
    dir: Path
    entry: str
    args: list[str]
    setup: list[list[str]]
    trace_options: list[str]
    reachable: bool
    reason: str
    description: str
    marks: list[Mark] = field(default_factory=list)

    def files(self, copy: str) -> list[Path]:
        return sorted(p for p in (self.dir / copy).rglob("*.py") if "__pycache__" not in p.parts)


def load_cases(root: Path = HERE, names: list[str] | None = None) -> list[Case]:
    cases = []
    for meta_path in sorted(root.glob("*/case.toml")):
        name = meta_path.parent.name
        if names and name not in names:
            continue
        meta = tomllib.loads(meta_path.read_text())
        case = Case(
            name=name, dir=meta_path.parent, entry=meta["entry"], args=list(meta.get("args", [])),
            setup=[list(s) for s in meta.get("setup", [])], trace_options=list(meta.get("trace_options", [])),
            reachable=bool(meta.get("reachable", True)), reason=meta.get("reason", ""),
            description=meta.get("description", ""),
        )
        for path in case.files("bug"):
            rel = path.relative_to(case.dir / "bug").as_posix()
            for number, text in enumerate(path.read_text().splitlines(), 1):
                found = MARK.search(text)
                if found:
                    if found.group(1) not in CLASSES:
                        raise ValueError(f"{name}/bug/{rel}:{number}: unknown bug class {found.group(1)!r}")
                    case.marks.append(Mark(name, rel, number, found.group(1)))
        if not case.marks:
            raise ValueError(f"{name}: no `# BUG: <class>` mark in bug/")
        if not (case.dir / "fixed" / case.entry).is_file() or not (case.dir / "bug" / case.entry).is_file():
            raise ValueError(f"{name}: entry {case.entry} missing in bug/ or fixed/")
        cases.append(case)
    return cases


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["TORCHDEV_LINT_DAEMON"] = "0"
    return env


# ----------------------------------------------------------------------------- static


def lint(cases: list[Case], *, preview: bool = False) -> list[dict]:
    """One run of the command line over every bug and fixed copy: its JSON findings, with
    `path` relative to this directory (`NN_name/bug/file.py`).

    `--isolated`: the repository's own configuration excludes `benchmarks/` (and a user's
    project would have none of it); everything else is the default output."""
    paths = [f"{c.name}/{copy}" for c in cases for copy in ("bug", "fixed")]
    command = [sys.executable, "-m", "torchdev_lint", "--no-cache", "--no-daemon", "--isolated",
               "--format", "json", "--exit-zero", *(["--preview"] if preview else []), *paths]
    done = subprocess.run(command, cwd=HERE, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise RuntimeError(f"torchdev-lint exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout)


@dataclass
class StaticScore:
    """What one lint run says about the corpus."""

    total: dict[str, int]
    flagged: dict[str, int]
    misses: list[Mark]
    hits: dict[Mark, dict]  # mark -> the finding that flags it
    on_fixed: list[dict]  # findings on fixed copies
    unmarked: list[dict]  # findings on bug copies at no mark (or with another rule than the mark's)

    @property
    def recall(self) -> float:
        total = sum(self.total.values())
        return sum(self.flagged.values()) / total if total else 1.0


def score(cases: list[Case], findings: list[dict]) -> StaticScore:
    by_place: dict[tuple[str, int], list[dict]] = {}
    on_fixed = []
    for f in findings:
        parts = Path(f["path"]).parts
        if len(parts) >= 3 and parts[1] == "fixed":
            on_fixed.append(f)
        by_place.setdefault((f["path"], f["line"]), []).append(f)
    total = {cls: 0 for cls in CLASSES}
    flagged = {cls: 0 for cls in CLASSES}
    misses, hits, used = [], {}, set()
    for case in cases:
        for mark in case.marks:
            total[mark.cls] += 1
            place = (f"{case.name}/bug/{mark.path}", mark.line)
            match = [f for f in by_place.get(place, []) if f["code"] in CLASSES[mark.cls]]
            if match:
                flagged[mark.cls] += 1
                hits[mark] = match[0]
                used.update(id(f) for f in match)
            else:
                misses.append(mark)
    unmarked = [f for f in findings if id(f) not in used and Path(f["path"]).parts[1:2] == ("bug",)]
    return StaticScore(total, flagged, misses, hits, on_fixed, unmarked)


# ----------------------------------------------------------------------------- trace


@dataclass
class TraceResult:
    case: str
    statuses: dict[Mark, str]  # mark -> "confirmed" / "not confirmed: ..." / "no finding" ...
    evidence: dict[Mark, str]
    report: dict | None
    error: str  # why there is no report (a setup step or the tracer failed)
    seconds: float
    runtime_mentions: dict[Mark, list[str]]  # the run's TDL100/TDL101 findings, for a report

    @property
    def confirmed(self) -> list[Mark]:
        return [m for m, s in self.statuses.items() if s == "confirmed"]


def _workdir(case: Case, copy: str, parent: Path) -> Path:
    work = parent / case.name / copy
    shutil.copytree(case.dir / copy, work, ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.ckpt"))
    return work


def trace_case(case: Case, copy: str = "bug", *, keep: Path | None = None) -> TraceResult:
    """Copy the case's `copy` into a temporary directory, run its setup steps there as a GPU
    machine would have (gpu_machine.py), then `torchdev-lint trace --mode sim` its entry."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="user-bugs-") as tmp:
        parent = keep or Path(tmp)
        work = _workdir(case, copy, parent)
        env = _env()
        # The tracer remembers the files its runs saved: keep this case's memory to itself.
        env["TORCHDEV_LINT_TRACE_SAVES"] = str(work.parent / f"trace-saves-{copy}.jsonl")
        for step in case.setup:
            done = subprocess.run([sys.executable, str(HERE / "gpu_machine.py"), *step], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=TRACE_TIMEOUT)
            if done.returncode != 0:
                return TraceResult(case.name, {m: "setup failed" for m in case.marks}, {}, None,
                                   f"setup {' '.join(step)} exited {done.returncode}:\n{done.stderr[-3000:]}",
                                   time.monotonic() - start, {})
        command = [sys.executable, "-m", "torchdev_lint", "trace", "--mode", "sim", "--format", "json",
                   "--timeout", str(TRACE_TIMEOUT), *case.trace_options, case.entry, *case.args]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=TRACE_TIMEOUT * 3)
    seconds = time.monotonic() - start
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return TraceResult(case.name, {m: "no report" for m in case.marks}, {}, None,
                           f"trace exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}",
                           seconds, {})
    statuses, evidence, mentions = {}, {}, {}
    for mark in case.marks:
        at_line = [f for f in report["findings"] if f["path"] == mark.path and f["line"] == mark.line]
        match = [f for f in at_line if f["code"] in CLASSES[mark.cls]]
        if match:
            best = next((f for f in match if f["status"] == "confirmed"), match[0])
            statuses[mark] = best["status"]
            evidence[mark] = best.get("evidence", "")
        else:
            statuses[mark] = "no finding at the line"
            evidence[mark] = "; ".join(f"{f['code']} {f['status']}" for f in at_line)
        # What the run saw without a static finding to pin it on: the mismatches (TDL100) and the
        # CUDA requests that fail without a GPU (TDL101), which name where each operand came from.
        mentions[mark] = [f"{f['code']} at {f['path']}:{f['line']}: {f.get('evidence', '')}"
                          for f in report["findings"] if f["code"] in ("TDL100", "TDL101")]
    return TraceResult(case.name, statuses, evidence, report, "", seconds, mentions)


def trace_many(cases: list[Case], copy: str = "bug", jobs: int | None = None) -> dict[str, TraceResult]:
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(jobs) as pool:
        return dict(zip([c.name for c in cases], pool.map(lambda c: trace_case(c, copy), cases)))


# ----------------------------------------------------------------------------- report


def _finding_line(f: dict) -> str:
    tier = "" if f.get("confidence", "certain") == "certain" else " (possible)"
    return f"{f['path']}:{f['line']}:{f['column']}: {f['code']}{tier} {f['message']}"


def print_static(title: str, cases: list[Case], result: StaticScore, preview: StaticScore | None = None) -> None:
    print(f"{title}")
    print(f"  {'class':<30} {'flagged':>8}")
    for cls in CLASSES:
        if result.total[cls]:
            print(f"  {cls:<30} {result.flagged[cls]:>3}/{result.total[cls]:<4}")
    total = sum(result.total.values())
    print(f"  {'all marked lines':<30} {sum(result.flagged.values()):>3}/{total:<4} ({100 * result.recall:.1f}%)")
    if result.misses:
        print("  missed:")
        for mark in result.misses:
            extra = ""
            if preview is not None:
                found = preview.hits.get(mark)
                if found:
                    steps = "; ".join(f"{e['path']}:{e['line']}: {e['message']}" for e in found.get("evidence", []))
                    extra = f"\n      --preview: {found['code']} ({found.get('confidence')})" + \
                            (f", evidence: {steps}" if steps else ", no evidence")
                else:
                    extra = "\n      --preview: not flagged either"
            print(f"    {mark.where()}  {mark.cls}{extra}")
    print(f"  findings on fixed copies: {len(result.on_fixed)}")
    for f in result.on_fixed:
        print(f"    {_finding_line(f)}")
    print(f"  unmarked findings on bug copies: {len(result.unmarked)}")
    for f in result.unmarked:
        print(f"    {_finding_line(f)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="store_true", help="also trace each reachable bug program")
    parser.add_argument("--trace-fixed", action="store_true",
                        help="with --trace: also trace the fixed copies (each should confirm nothing)")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="programs traced at once")
    parser.add_argument("--case", action="append", default=[], help="only this case (repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = parser.parse_args(argv)

    cases = load_cases(names=args.case or None)
    marks = sum(len(c.marks) for c in cases)
    print(f"User-bug benchmark: {len(cases)} programs, {marks} marked lines "
          f"({sum(1 for c in cases if c.reachable)} programs reachable by the tracer)\n")
    default = score(cases, lint(cases))
    preview = score(cases, lint(cases, preview=True))
    print_static("Default output (certain findings):", cases, default, preview)
    print()
    print_static("With --preview (possible findings too):", cases, preview)
    out: dict = {
        "programs": len(cases), "marked_lines": marks,
        "default": {"flagged": default.flagged, "total": default.total, "recall": default.recall,
                    "misses": [m.where() for m in default.misses], "on_fixed": len(default.on_fixed),
                    "unmarked": [_finding_line(f) for f in default.unmarked]},
        "preview": {"flagged": preview.flagged, "total": preview.total, "recall": preview.recall,
                    "misses": [m.where() for m in preview.misses], "on_fixed": len(preview.on_fixed),
                    "unmarked": [_finding_line(f) for f in preview.unmarked]},
    }
    status = 0 if default.recall >= 0.95 and not default.on_fixed else 1

    if args.trace:
        reachable = [c for c in cases if c.reachable]
        print(f"\nTracing {len(reachable)} reachable bug programs (torchdev-lint trace --mode sim)...", flush=True)
        start = time.monotonic()
        results = trace_many(reachable, "bug", args.jobs)
        marks_reachable = [m for c in reachable for m in c.marks]
        confirmed = [m for r in results.values() for m in r.confirmed]
        print(f"confirmed: {len(confirmed)}/{len(marks_reachable)} reachable marked lines "
              f"({time.monotonic() - start:.0f} s)")
        for case in reachable:
            r = results[case.name]
            for mark in case.marks:
                if r.statuses[mark] != "confirmed":
                    print(f"  not confirmed: {mark.where()} {mark.cls}: {r.statuses[mark]}"
                          + (f" ({r.evidence[mark]})" if r.evidence.get(mark) else ""))
                    for line in r.runtime_mentions.get(mark, []):
                        print(f"      runtime: {line}")
                    if r.error:
                        print("      " + r.error.strip().replace("\n", "\n      "))
        for case in cases:
            if not case.reachable:
                print(f"  not reachable: {case.name}: {case.reason}")
        out["trace"] = {"reachable": len(marks_reachable), "confirmed": len(confirmed),
                        "not_confirmed": {m.where(): results[m.case].statuses[m]
                                          for m in marks_reachable if m not in confirmed}}
        if len(confirmed) < len(marks_reachable):
            status = 1
        if args.trace_fixed:
            print(f"\nTracing the {len(reachable)} fixed copies...", flush=True)
            fixed = trace_many(reachable, "fixed", args.jobs)
            bad = {name: [f for f in r.report["findings"] if f["status"] == "confirmed"] if r.report else r.error
                   for name, r in fixed.items()}
            bad = {k: v for k, v in bad.items() if v}
            print(f"fixed copies with something confirmed (or no report): {len(bad)}")
            for name, what in bad.items():
                if isinstance(what, str):
                    print(f"  {name}: {what.strip()}")
                else:
                    for f in what:
                        print(f"  {name}/fixed/{f['path']}:{f['line']}: {f['code']} {f['evidence']}")
            out["trace"]["fixed_with_confirmed"] = sorted(bad)
            if bad:
                status = 1
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
