"""What the methods of a class do with ``self``: which attribute an expression names, and
which methods ``__init__`` (or ``forward``) reaches through ``self.method(...)`` calls."""

from __future__ import annotations

from typing import Iterable, Iterator

import libcst as cst


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
