"""What the methods of a class do with ``self``: which attribute an expression names, and
which methods ``__init__`` (or ``forward``) reaches through ``self.method(...)`` calls."""

from __future__ import annotations

from typing import Iterable, Iterator

import libcst as cst

from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.tree import collect


def self_attribute(expr: cst.BaseExpression, self_name: str) -> str | None:
    """``attr`` for ``self.attr``, else None."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == self_name
    ):
        return expr.attr.value
    return None


def methods(klass: cst.ClassDef) -> Iterator[tuple[cst.FunctionDef, str]]:
    """Each method defined in ``klass``'s body that takes a first parameter, with that
    parameter's name (``self`` by convention, any name in fact)."""
    for method in klass.body.body:
        if isinstance(method, cst.FunctionDef):
            params = [*method.params.posonly_params, *method.params.params]
            if params:
                yield method, params[0].name.value


def self_call(call: cst.Call, self_name: str) -> str | None:
    """``method`` for ``self.method(...)``, else None."""
    return self_attribute(call.func, self_name) if isinstance(call.func, cst.Attribute) else None


def reachable(calls: dict[str, set[str]], starts: Iterable[str]) -> set[str]:
    """The methods ``starts`` run, directly or through ``self.method(...)`` calls, given
    the calls each method makes."""
    seen = set(starts)
    todo = list(seen)
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


_STATE_CALLS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module", "__setattr__"})


def holds_no_state(klass: cst.ClassDef) -> bool:
    """``klass`` derives from ``nn.Module`` alone, assigns nothing in its body, and no
    method of it sets or registers an attribute of ``self``: a stateless loss holds no
    tensors, so its ``.cuda()`` moves nothing and does not fail without CUDA."""
    if [code_of(b.value) for b in klass.bases] not in (["nn.Module"], ["torch.nn.Module"], ["Module"]):
        return False  # a base of its own may hold tensors
    for statement in klass.body.body:
        plain = isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(small, (cst.Expr, cst.Pass)) for small in statement.body)  # a docstring, `pass`
        if not (plain or isinstance(statement, cst.FunctionDef)):
            return False  # class attributes, nested classes: perhaps tensors
    for method, self_name in methods(klass):
        for node in collect(method.body, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.Call)):
            if isinstance(node, cst.Call):
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in _STATE_CALLS:
                    return False
            elif self_attribute(node.target, self_name) is not None:
                return False
    return True
