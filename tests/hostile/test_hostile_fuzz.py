"""Fuzzing with hypothesmith (valid Python programs generated from the grammar and from LibCST's
node types), mixed with code the rules flag: checking never raises, and --fix leaves a program
that compiles, that a second --fix does not change, and that differs from the original only on
the lines of the findings reported before (definitions it adds are new lines).

A bounded number of examples runs here (TORCHDEV_FUZZ_EXAMPLES raises it: the long run is
``TORCHDEV_FUZZ_EXAMPLES=2000 python -m pytest tests/hostile/test_hostile_fuzz.py
--hypothesis-show-statistics``, which also counts what the programs exercised)."""

import difflib
import os

import pytest

hypothesmith = pytest.importorskip("hypothesmith")
from hypothesis import HealthCheck, event, given, settings, strategies as st  # noqa: E402

import torchdev_lint.rules  # noqa: E402,F401  (registers the rules)
from torchdev_lint.engine import lint_source  # noqa: E402
from torchdev_lint.fixer import applicable, fix_to_fixpoint  # noqa: E402
from torchdev_lint.lines import split as split_lines  # noqa: E402
from torchdev_lint.rule import Rule  # noqa: E402

RULES = [cls for _, cls in sorted(Rule.registry.items())]
EXAMPLES = int(os.environ.get("TORCHDEV_FUZZ_EXAMPLES", "15"))

# Code the rules flag, with safe fixes, spliced between generated statements.
FLAGGED = [
    "import torch\n",
    "x = torch.zeros(3).cuda()\n",
    "state = torch.load('w.pt')\n",
    "y = torch.ones(2)\ny.cuda()\n",
    "device = 'cuda'\n",
    "model = torch.nn.Linear(2, 2).cuda()\n",
    "z = torch.randn(4).to('cuda:0')\n",
]


def check(code: str) -> None:
    # Events say what the examples exercised (pytest --hypothesis-show-statistics).
    try:
        compile(code, "fuzz.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        event("refused by CPython")
        return  # hypothesmith's grammar strategy can produce what CPython still refuses
    result = lint_source("fuzz.py", code, RULES, preview=True)
    if result.error is not None:
        event("not checked: " + result.error.message.split(":")[0])
        assert "too complex" in result.error.message or "syntax error" in result.error.message
        return
    if not any(applicable(f, False) for f in result.findings):
        event("checked, nothing to fix")
        return
    event("fixed")
    outcome = fix_to_fixpoint(result, lambda text: lint_source("fuzz.py", text, RULES, preview=True))
    fixed = outcome.source
    compile(fixed, "fuzz.py", "exec")
    again = lint_source("fuzz.py", fixed, RULES, preview=True)
    assert fix_to_fixpoint(again, lambda text: lint_source("fuzz.py", text, RULES, preview=True)).source == fixed
    lines = {n for f in result.findings for n in range(f.line, f.end_line + 1)}
    old = split_lines(code, keepends=True)  # not str.splitlines: a form feed ends no line
    matcher = difflib.SequenceMatcher(None, old, split_lines(fixed, keepends=True), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            assert set(range(i1 + 1, i2 + 1)) <= lines, (tag, old[i1:i2])


def spliced(program: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(st.lists(st.sampled_from(FLAGGED), max_size=4), program, st.sampled_from(FLAGGED)).map(
        lambda parts: "".join(parts[0]) + parts[1] + ("" if parts[1].endswith("\n") else "\n") + parts[2]
    )


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 15,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(spliced(hypothesmith.from_grammar()))
def test_fuzz_programs_from_the_grammar(code):
    check(code)


@FUZZ
@given(spliced(hypothesmith.from_node()))
def test_fuzz_programs_from_libcst_nodes(code):
    check(code)
