"""Where a check in the code says a value is a tensor: ``isinstance(x, torch.Tensor)``.

A value of unknown kind is a tensor inside ``if isinstance(x, torch.Tensor):`` (or
``torch.is_tensor(x)``), in the ``else`` of the negated test, and after
``if not isinstance(x, torch.Tensor): return`` (``continue``, ``raise``...) or
``assert isinstance(x, torch.Tensor)`` in the same block. The answer is the check itself:
the evidence a finding on ``x`` shows.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Callable, Sequence

import libcst as cst

from torchdev_lint.analysis.guards import code_of, is_exit

# Per block, its statements by identity and those that may be a check (an assert, an `if`
# that leaves): found once per file (FileContext starts the memo), not once per question.
_blocks: ContextVar[dict | None] = ContextVar("torchdev_lint_tensor_checks", default=None)

TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
Qualifier = Callable[["cst.BaseExpression"], "str | None"]


def _checks(test: cst.BaseExpression, subject: str, qualify: Qualifier) -> bool:
    """``test`` holds only when ``subject`` (source text) is a tensor."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _checks(test.left, subject, qualify) or _checks(test.right, subject, qualify)
    if not isinstance(test, cst.Call) or not test.args or code_of(test.args[0].value) != subject:
        return False
    name = qualify(test.func)
    if name == "torch.is_tensor":
        return len(test.args) == 1
    if name != "isinstance" and code_of(test.func) != "isinstance" or len(test.args) != 2:
        return False
    kinds = test.args[1].value
    elements = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return all(qualify(e) in TENSOR_CLASSES for e in elements)


def _negated(test: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    return None


def _leaves(body: cst.BaseSuite) -> bool:
    """The suite ends by leaving the block: ``return``, ``continue``, ``break``, ``raise``,
    ``sys.exit(...)`` (guards' exits)."""
    if isinstance(body, cst.IndentedBlock):
        return bool(body.body) and is_exit(body.body[-1])
    smalls = body.body  # a suite on the line of its `if`
    return bool(smalls) and isinstance(smalls[-1], (cst.Return, cst.Continue, cst.Break, cst.Raise))


def tensor_check(ancestors: Sequence[cst.CSTNode], subject: cst.BaseExpression,
                 qualify: Qualifier) -> cst.CSTNode | None:
    """The check that makes ``subject`` a tensor at the node ``ancestors`` ends with."""
    text = code_of(subject)
    for depth in range(len(ancestors) - 1, 0, -1):
        parent, child = ancestors[depth - 1], ancestors[depth]
        if isinstance(parent, cst.If):
            if child is parent.body and _checks(parent.test, text, qualify):
                return parent.test
            negated = _negated(parent.test)
            if child is parent.orelse and negated is not None and _checks(negated, text, qualify):
                return parent.test
        if isinstance(parent, (cst.IndentedBlock, cst.Module)):
            where, candidates = _block(parent)
            index = where.get(id(child), -1)
            for position, statement in candidates:
                if position >= index:
                    break
                found = _earlier_check(statement, text, qualify)
                if found is not None:
                    return found
    return None


def remember_blocks() -> None:
    """Start the per-file memo of blocks (asked for every move in a long block, reading all
    the statements before it was quadratic)."""
    _blocks.set({})


def _block(block: cst.Module | cst.IndentedBlock):
    memo = _blocks.get()
    known = memo.get(id(block)) if memo is not None else None
    if known is None:
        candidates = [(i, s) for i, s in enumerate(block.body)
                      if isinstance(s, cst.If) or (isinstance(s, cst.SimpleStatementLine)
                                                   and any(isinstance(x, cst.Assert) for x in s.body))]
        known = ({id(s): i for i, s in enumerate(block.body)}, candidates, block)  # the block keeps its id
        if memo is not None:
            memo[id(block)] = known
    return known[0], known[1]


def _earlier_check(statement: cst.CSTNode, text: str, qualify: Qualifier) -> cst.CSTNode | None:
    if isinstance(statement, cst.If) and statement.orelse is None and _leaves(statement.body):
        negated = _negated(statement.test)
        if negated is not None and _checks(negated, text, qualify):
            return statement.test
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assert) and _checks(small.test, text, qualify):
                return small.test
    return None
