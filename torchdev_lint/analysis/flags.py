"""Which branches of a function no caller takes: a flag every call passes the other way.

``def get_model(pretrained=False): if pretrained: model.load_state_dict(torch.load(p))``
loads only for a caller that passes a true ``pretrained``. When every call of
``get_model`` in the project passes a literal (or leaves a default) that skips the branch,
no run of the project reaches the line: what it would do on a machine without CUDA is not
shown by any run. The tests read are a parameter's truth (``if pretrained:``, ``if not
distilled:``, ``and`` of such tests) and its None-ness (``if path is not None:``), in the
``if`` branches around the line up to its function; the parameter must be bound only as a
parameter there. Calls are the project's (``ProjectIndex.calls_of``: by the function's
name, a method's through any object but one bound to an unrelated class), and the
function must never be named except to call it (``ProjectIndex.named_uncalled``): handed
on as a value, it may be called with anything.
"""

from __future__ import annotations

import ast
from typing import Sequence

import libcst as cst

from torchdev_lint.analysis import run_order
from torchdev_lint.analysis.devices import bindings
from torchdev_lint.analysis.reach import Step

# a flag's requirement: what it must be for the branch to run (``run_order.takes_branch``)
_TRUE, _FALSE, _NONE, _NOT_NONE = run_order.TRUE, run_order.FALSE, run_order.NONE, "!n"
_SAID = {_TRUE: "true", _FALSE: "false", _NONE: "None", _NOT_NONE: "given"}
# calls named in the evidence, at most
_SHOWN_CALLS = 3


def never_taken(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line runs only in a branch of its function that every project call skips, with
    the evidence; None when one may take it, or it is not known."""
    index = ctx.index
    if index is None or ctx.path == "-" or not ctx.path.endswith(".py") or len(ancestors) < 3:
        return None
    found = _function(ancestors)
    if found is None:
        return None
    at, scope = found
    function = ancestors[at]
    static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                 for d in function.decorators)
    flags, test = _flags(function, ancestors[at + 1:], at == 3 and not static)
    if not flags:
        return None
    calls = index.calls_of(scope, ctx.path)
    if not calls or any(run_order.takes_branch(arguments, flags) for _, _, arguments in calls):
        return None
    name = scope.rpartition(".")[2]
    if index.named_uncalled(ctx.path, name, {path for path, _, _ in calls}) != "":
        return None
    needs = " and ".join(f"`{parameter}` is {_SAID[must]}" for parameter, _, must, _ in flags)
    shown = ", ".join(f"{index.shown(path)}:{line}" for path, line, _ in calls[:_SHOWN_CALLS])
    more = f" and {len(calls) - _SHOWN_CALLS} more" if len(calls) > _SHOWN_CALLS else ""
    return test, (f"this runs only when {needs}, and no call of `{name}` in the project passes that "
                           f"({shown}{more}): no run reaches it")


def _function(ancestors: Sequence[cst.CSTNode]) -> tuple[int, str] | None:
    """Where the line's function stands in ``ancestors`` and its name as ``run_order.read``
    names scopes ("train", "Net" for ``Net.__init__``, "Net.fit"): a top-level function or a
    method of a top-level class; None for the module's own code or a nested function."""
    if isinstance(ancestors[1], cst.FunctionDef):
        at = 1
    elif isinstance(ancestors[1], cst.ClassDef) and len(ancestors) > 3 and isinstance(ancestors[3], cst.FunctionDef):
        at = 3
    else:
        return None
    if any(isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for a in ancestors[at + 1:]):
        return None
    name = ancestors[at].name.value
    if at == 1:
        return at, name
    klass = ancestors[1].name.value
    return at, klass if name == "__init__" else f"{klass}.{name}"


def _flags(function: cst.FunctionDef, inside: Sequence[cst.CSTNode],
           method: bool) -> tuple[list[tuple[str, int, str, str]], cst.If | None]:
    """What the ``if`` branches in ``inside`` (the line's ancestors below its function)
    require of the function's parameters, as ``run_order.takes_branch`` reads them, and the
    innermost ``if`` that requires something."""
    parameters = _parameters(function, method)
    bound = bindings(function)
    required: dict[str, str] = {}
    last = None
    for node, below in zip(inside, inside[1:]):
        if not isinstance(node, cst.If):
            continue
        holds = below is node.body
        if not holds and below is not node.orelse:
            continue  # the test itself
        for parameter, must in _tested(node.test, holds):
            if parameter in parameters and len(bound.get(parameter, ())) == 1:
                if required.get(parameter, must) != must:
                    return [], None  # branches that ask the opposite: code no test reading skips
                required[parameter], last = must, node
    return [(name, parameters[name][0], must, parameters[name][1]) for name, must in required.items()], last


def _parameters(function: cst.FunctionDef, method: bool) -> dict[str, tuple[int, str]]:
    """Each parameter a caller passes: its position (-1 for keyword-only) and its default's
    ``run_order.literal_mark``."""
    params = function.params
    positional = [*params.posonly_params, *params.params][1 if method else 0:]
    found = {p.name.value: (at, _mark(p.default)) for at, p in enumerate(positional)}
    found.update((p.name.value, (-1, _mark(p.default))) for p in params.kwonly_params)
    return found


def _mark(default: cst.BaseExpression | None) -> str:
    if default is None:
        return run_order.UNKNOWN
    try:
        value = ast.parse(cst.Module([]).code_for_node(default), mode="eval").body
    except (SyntaxError, ValueError):
        return run_order.UNKNOWN
    return run_order.literal_mark(value)


def _tested(test: cst.BaseExpression, holds: bool) -> list[tuple[str, str]]:
    """The parameters a test requires something of when it ``holds`` (or fails): ``flag``,
    ``not flag``, ``flag is None``, ``flag is not None`` (``==``/``!=`` alike), and every part
    of an ``and`` that holds (of an ``or`` that fails)."""
    if isinstance(test, cst.Name):
        return [(test.value, _TRUE if holds else _FALSE)]
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _tested(test.expression, not holds)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            if isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
                holds = not holds
            elif not isinstance(target.operator, (cst.Is, cst.Equal)):
                return []
            return [(test.left.value, _NONE if holds else _NOT_NONE)]
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And if holds else cst.Or):
        return [*_tested(test.left, holds), *_tested(test.right, holds)]
    return []

