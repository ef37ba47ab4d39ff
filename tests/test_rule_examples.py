"""Every rule's own VALID/INVALID examples, run as tests (Fixit's idea): the examples that
document a rule are the cases it is held to, pinned to line and column, with its fix."""

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability, Confidence
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULES = sorted(Rule.registry.values(), key=lambda r: r.code)
VALID = [pytest.param(r, v, id=f"{r.code}-valid-{i}") for r in RULES for i, v in enumerate(r.VALID)]
INVALID = [pytest.param(r, v, id=f"{r.code}-invalid-{i}") for r in RULES for i, v in enumerate(r.INVALID)]


def test_every_rule_has_examples_of_both_kinds():
    for rule in RULES:
        assert len(rule.VALID) >= 3 and len(rule.INVALID) >= 3, rule.code


@pytest.mark.parametrize("rule, example", VALID)
def test_valid_code_is_not_flagged(rule, example):
    assert lint_source(example.path, example.code, [rule], preview=True).findings == []


@pytest.mark.parametrize("rule, example", INVALID)
def test_invalid_code_is_flagged_at_its_position(rule, example):
    findings = lint_source("example.py", example.code, [rule], preview=True).findings
    assert [(f.code, f.line, f.column) for f in findings] == [(rule.code, example.line, example.column)]


@pytest.mark.parametrize("rule, example", INVALID)
def test_invalid_code_is_in_its_tier(rule, example):
    """A possible finding is hidden from the default output; a certain one shows there."""
    (finding,) = lint_source("example.py", example.code, [rule], preview=True).findings
    possible = rule.preview or example.possible
    assert finding.confidence is (Confidence.POSSIBLE if possible else Confidence.CERTAIN)
    assert len(lint_source("example.py", example.code, [rule]).findings) == (0 if possible else 1)


@pytest.mark.parametrize("rule, example", INVALID)
def test_fix(rule, example):
    result = lint_source("example.py", example.code, [rule], preview=True)
    (finding,) = result.findings
    if example.fixed is None:
        assert finding.fix is None
        return
    assert finding.fix is not None
    assert (finding.fix.applicability is Applicability.UNSAFE) == example.unsafe
    fixed = fix_file(result, unsafe=example.unsafe)
    assert fixed.error is None
    assert fixed.source == example.fixed
    # Idempotent: the fixed code has nothing left for the rule to find or fix.
    again = lint_source("example.py", fixed.source, [rule], preview=True)
    assert again.findings == []
