"""The user-bug benchmark (benchmarks/user-bugs/, issue 37 item 5): realistic programs, each with
its device bug lines marked `# BUG: <class>` and a fixed copy.

(a) The default output flags at least 95% of the marked lines of the bug classes whose rules
    are default rules, and nothing on the fixed copies; `--preview` flags every line of
    class of a preview rule, 95% of all (one run of the command line per tier).
(b) `torchdev-lint trace --mode sim` confirms each marked line of each program a run can reach
    (the finding at that line has the status `confirmed`; where no static finding is there, the
    run reports the device problem as a TDL100). The programs are traced a few at a
    time, in one go, the first time a test asks for one (about 5-15 s each).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint.rule import Rule

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "user-bugs"


def _load_runner():
    spec = importlib.util.spec_from_file_location("user_bugs_run", BENCH / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


run = _load_runner()
CASES = run.load_cases()
# The classes whose rules are in the default output (not preview rules).
MAIN_CLASSES = [cls for cls, codes in run.CLASSES.items()
                if not any(Rule.registry[code].preview for code in codes)]
PREVIEW_CLASSES = [cls for cls in run.CLASSES if cls not in MAIN_CLASSES]
RECALL_BAR = 0.95
# The four bugs the tool is named for: each with enough programs to measure.
MISSION_CLASSES = ["hardcoded-cuda", "discarded-move", "load-without-map-location", "optimizer-state-before-move"]


def test_the_corpus_is_what_the_issue_asks_for():
    counts = {cls: sum(1 for c in CASES for m in c.marks if m.cls == cls) for cls in run.CLASSES}
    problems = []
    if len(CASES) < 32:
        problems.append(f"{len(CASES)} programs, fewer than 32")
    problems += [f"{cls}: {counts[cls]} marked lines, fewer than 6" for cls in MISSION_CLASSES if counts[cls] < 6]
    for case in CASES:
        if not case.reachable and not case.reason:
            problems.append(f"{case.name}: reachable = false without a reason")
        bug = {p.relative_to(case.dir / "bug") for p in case.files("bug")}
        fixed = {p.relative_to(case.dir / "fixed") for p in case.files("fixed")}
        if bug != fixed:
            problems.append(f"{case.name}: bug/ and fixed/ hold different files: {sorted(map(str, bug ^ fixed))}")
        for path in case.files("fixed"):
            if "# BUG" in path.read_text():
                problems.append(f"{path.relative_to(BENCH)}: a fixed copy with a bug mark")
    assert not problems, "\n".join(problems)


def _problems(result, classes, bar: float, tier: str) -> list[str]:
    total = sum(result.total[cls] for cls in classes)
    flagged = sum(result.flagged[cls] for cls in classes)
    per_class = ", ".join(f"{cls} {result.flagged[cls]}/{result.total[cls]}" for cls in classes if result.total[cls])
    problems = []
    if total and flagged / total < bar:
        problems.append(f"{tier} flags {flagged}/{total} marked lines ({100 * flagged / total:.1f}%, "
                        f"the bar is {100 * bar:.0f}%): {per_class}; missed:")
        problems += [f"  {m.where()} {m.cls}" for m in result.misses if m.cls in classes]
    if result.on_fixed:
        problems.append(f"{tier}: {len(result.on_fixed)} findings on the fixed copies:")
        problems += [f"  {f['path']}:{f['line']}:{f['column']}: {f['code']} {f['message']}" for f in result.on_fixed]
    return problems


def test_the_mission_classes_are_default_classes():
    assert set(MISSION_CLASSES) <= set(MAIN_CLASSES)


def test_default_output_flags_the_marked_lines_and_nothing_on_the_fixed_copies():
    """The classes of the default rules: certain, at 95% of their lines."""
    result = run.score(CASES, run.lint(CASES))
    problems = _problems(result, MAIN_CLASSES, RECALL_BAR, "the default output")
    assert not problems, "\n".join(problems)


def test_preview_flags_every_marked_line_and_nothing_on_the_fixed_copies():
    """With --preview (possible findings too, and the rules still in preview): every line of
    the preview rules' classes, 95% of all, and still nothing on the fixed copies."""
    result = run.score(CASES, run.lint(CASES, preview=True))
    problems = _problems(result, PREVIEW_CLASSES, 1.0, "--preview") if PREVIEW_CLASSES else []
    problems += _problems(result, list(run.CLASSES), RECALL_BAR, "--preview")
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- (b) trace

REACHABLE = [m for c in CASES if c.reachable for m in c.marks]


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def traced(request):
    """case name -> its TraceResult. Outside pytest-xdist, the programs of every selected trace
    test are traced at once, a few in parallel; a worker of xdist traces its own, one by one."""
    if not _has_torch():
        pytest.skip("the tracer needs torch")
    results: dict = {}
    if not hasattr(request.config, "workerinput"):
        wanted = {item.callspec.params["mark"].case for item in request.session.items
                  if getattr(item, "originalname", "") == "test_trace_confirms_the_bug" and hasattr(item, "callspec")}
        jobs = max(1, min(4, os.cpu_count() or 1))
        results.update(run.trace_many([c for c in CASES if c.name in wanted], "bug", jobs))

    def get(name):
        if name not in results:
            results[name] = run.trace_case(next(c for c in CASES if c.name == name))
        return results[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("mark", REACHABLE, ids=[f"{m.case}:{m.path}:{m.line}" for m in REACHABLE])
def test_trace_confirms_the_bug(mark, traced):
    result = traced(mark.case)
    assert not result.error, result.error
    status = result.statuses[mark]
    if status == "no finding at the line" and result.runtime_mentions.get(mark):
        # no static rule predicted it (a factory in another file picks Adagrad): the run still
        # shows the device problem, as a TDL100 whose evidence names its origin
        return
    if status != "confirmed":
        seen = "\n".join(f"  runtime: {line}" for line in result.runtime_mentions.get(mark, []))
        outcome = "; ".join(r["summary"] for r in result.report["runs"])
        pytest.fail(f"{mark.where()} ({mark.cls}) is not confirmed: {status}"
                    + (f" ({result.evidence[mark]})" if result.evidence.get(mark) else "")
                    + f"\n  the run: {outcome}" + (f"\n{seen}" if seen else ""))
