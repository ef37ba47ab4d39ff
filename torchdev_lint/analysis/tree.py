"""Fast walks over a LibCST tree that only read it.

LibCST's visitors rebuild every node on the way back up and visit every whitespace, comma
and parenthesis. A linter only reads the tree, and only the nodes that carry meaning: these
helpers walk the dataclass fields directly and skip pure layout.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

import libcst as cst

# Fields that hold only layout (whitespace, parentheses, commas, operators): never walked.
_LAYOUT_FIELDS = frozenset(
    """lpar rpar lbracket rbracket lbrace rbrace leading_lines lines_after_decorators header
    footer semicolon comma equal dot colon operator asynchronous trailing_whitespace indent
    encoding default_indent default_newline has_trailing_newline star posonly_ind newline
    value_before_as""".split()
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = tuple(
            f.name for f in dataclasses.fields(cls)
            if f.name not in _LAYOUT_FIELDS and not f.name.startswith("whitespace")
        )
        _CHILD_FIELDS[cls] = fields
    return fields


def is_node(cls: type) -> bool:
    known = _IS_NODE.get(cls)
    if known is None:
        known = _IS_NODE[cls] = issubclass(cls, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The meaningful children of ``node``, in field order."""
    for name in child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if is_node(type(item)):
                    yield item
        elif is_node(kind):
            yield value


def walk(root: cst.CSTNode, enter: Callable[[cst.CSTNode], bool]) -> None:
    """Call ``enter`` on ``root`` and its descendants, pre-order; a False answer skips the
    node's children."""
    stack = [root]
    while stack:
        node = stack.pop()
        if enter(node) is not False:
            stack.extend(reversed(list(children(node))))


def collect(root: cst.CSTNode, kind, skip=()) -> list:
    """The nodes of type ``kind`` in ``root`` (``root`` included), pre-order, not looking
    inside nodes of the types ``skip``."""
    found: list = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, kind):
            found.append(node)
        return not (skip and isinstance(node, skip))

    walk(root, enter)
    return found


def contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    """``target`` is ``root`` or one of its descendants."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        found = found or node is target
        return not found

    walk(root, enter)
    return found


class Reader:
    """A read-only visitor: ``read(node)`` calls ``visit_<NodeClass>`` methods in pre-order,
    and a method answering False skips that node's children. Unlike LibCST's visitors it
    rebuilds nothing, skips layout, and needs no LibCST class at import time."""

    def read(self, root: cst.CSTNode) -> None:
        walk(root, self._enter)

    def _enter(self, node: cst.CSTNode) -> bool:
        visit = getattr(self, "visit_" + type(node).__name__, None)
        return visit is None or visit(node) is not False
