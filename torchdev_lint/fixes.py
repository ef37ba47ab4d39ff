"""Building blocks the rules' fixes share: rewriting calls without disturbing formatting."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.devices import DeviceChoice, device_expression
from torchdev_lint.finding import Applicability


def expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _new_line(like: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """A line break to the same indentation as ``like``, without its comment."""
    return cst.ParenthesizedWhitespace(indent=like.indent, last_line=like.last_line)


def _separator(call: cst.Call) -> cst.Comma:
    """The comma to put between arguments: one per line when the call is laid out that way."""
    before = call.whitespace_before_args
    if isinstance(before, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=_new_line(before))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``f(a)`` -> ``f(a, name=value)``; in a call laid out one argument per line with a
    trailing comma, the new argument gets its own line and the comments stay where they were."""
    new = keyword(name, value)
    if not call.args:
        return call.with_changes(args=[new])
    *others, last = call.args
    trailing = last.comma
    if isinstance(trailing, cst.Comma) and isinstance(trailing.whitespace_after, cst.ParenthesizedWhitespace):
        separator = _separator(call).whitespace_after
        after = trailing.whitespace_after
        last = last.with_changes(comma=trailing.with_changes(whitespace_after=after.with_changes(
            indent=separator.indent, last_line=separator.last_line)))
        new = new.with_changes(comma=cst.Comma(whitespace_after=_new_line(after)))
    elif not isinstance(trailing, cst.Comma) and isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):
        # `f(\n    a  # note\n)`: the comma goes after `a` (before its comment), the new
        # argument on a line of its own, and the closing parenthesis stays on its line
        closing = last.whitespace_after_arg
        indent = _separator(call).whitespace_after
        if not isinstance(indent, cst.ParenthesizedWhitespace) and others and isinstance(others[-1].comma, cst.Comma):
            indent = others[-1].comma.whitespace_after  # `f(a,\n  b\n)`: under the arguments
        line = indent.with_changes(first_line=closing.first_line, empty_lines=closing.empty_lines) if isinstance(
            indent, cst.ParenthesizedWhitespace) else _new_line(closing)
        last = last.with_changes(comma=cst.Comma(whitespace_after=line), whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=closing.with_changes(first_line=cst.TrailingWhitespace(),
                                                                          empty_lines=()))
    else:
        last = last.with_changes(comma=_separator(call))
        new = new.with_changes(comma=trailing)  # `f(a, )` keeps its trailing comma
    return call.with_changes(args=[*others, last, new])


def move_call(call: cst.Call, device: cst.BaseExpression, keep: Sequence[cst.Arg] = ()) -> cst.Call:
    """``x.<method>(...)`` -> ``x.to(<device>, <keep>...)``: the kept arguments keep their
    own commas and comments; a lone device takes over the original closing comma."""
    renamed = call.with_changes(func=call.func.with_changes(attr=cst.Name("to")))
    closing = call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT
    first = cst.Arg(value=device, comma=_separator(call) if keep else closing)
    return renamed.with_changes(args=[first, *keep])


def device_for(ctx, ancestors, node, moved: str | None = None) -> tuple[DeviceChoice, Applicability]:
    """The device expression to use at ``node``, and how far the fix using it is safe:
    our own default (CUDA when available) behaves exactly like a hardcoded CUDA device on a
    GPU machine; an existing device variable carries the program's own choice."""
    choice = device_expression(ctx, ancestors, node, moved)
    return choice, Applicability.UNSAFE if choice.existing and not choice.holds_default else Applicability.SAFE


def torch_reference(ctx, qualified: str) -> tuple[str, bool]:
    """How to spell ``torch.nn.ModuleList`` (any ``torch.`` name) with this file's imports:
    ``ModuleList``, ``nn.ModuleList``, ``T.nn.ModuleList``; and whether ``import torch``
    must be added for it (``Fix.needs_torch``)."""
    imports = ctx.imports
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        local = imports.local_name_for(".".join(parts[:cut]))
        if local is not None:
            return ".".join([local, *parts[cut:]]), False
    return qualified, True


def string_like(node: cst.CSTNode, text: str) -> cst.SimpleString:
    """``text`` as a literal in the quotes of the first string in ``node``: valid wherever
    that one is. Inside an f-string's braces, Python before 3.12 rejects the enclosing
    f-string's own quote (a `"cpu"` added to `f"{torch.device(f'cuda:{i}')}"` broke it)."""
    quotes = []

    def enter(child: cst.CSTNode) -> bool:
        if isinstance(child, (cst.SimpleString, cst.FormattedString)) and not quotes:
            quotes.append(child.quote)
        return not quotes

    tree.walk(node, enter)
    quote = quotes[0] if quotes else '"'
    return cst.SimpleString(f"{quote}{text}{quote}")
