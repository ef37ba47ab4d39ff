"""Building blocks the rules' fixes share: rewriting calls without disturbing formatting."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from torchdev_lint.analysis.devices import DeviceChoice, device_expression
from torchdev_lint.finding import Applicability


def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _separator(call: cst.Call) -> cst.Comma:
    """The comma to put between arguments, multi-line when the call is laid out that way."""
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=call.whitespace_before_args)
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def with_arguments(call: cst.Call, args: Sequence[cst.Arg]) -> cst.Call:
    """``call`` with ``args``, keeping the original trailing comma and closing layout."""
    args = list(args)
    if not args:
        return call.with_changes(args=())
    trailing = call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT
    separator = _separator(call)
    laid_out = [a.with_changes(comma=separator) for a in args[:-1]]
    laid_out.append(args[-1].with_changes(comma=trailing))
    return call.with_changes(args=laid_out)


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    return with_arguments(call, [*call.args, keyword(name, value)])


def move_call(call: cst.Call, device: cst.BaseExpression, keep: Sequence[cst.Arg] = ()) -> cst.Call:
    """``x.<method>(...)`` -> ``x.to(<device>, <keep>...)``."""
    renamed = call.with_changes(func=call.func.with_changes(attr=cst.Name("to")))
    return with_arguments(renamed, [cst.Arg(value=device), *keep])


def device_for(ctx, ancestors, node, moved: str | None = None) -> tuple[DeviceChoice, Applicability]:
    """The device expression to use at ``node``, and how far the fix using it is safe:
    our own default (CUDA when available) behaves exactly like a hardcoded CUDA device on a
    GPU machine; an existing device variable carries the program's own choice."""
    choice = device_expression(ctx, ancestors, node, moved)
    return choice, Applicability.UNSAFE if choice.existing else Applicability.SAFE
