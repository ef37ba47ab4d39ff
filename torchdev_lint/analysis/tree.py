"""Fast walks over a LibCST tree that only read it.

LibCST's visitors rebuild every node on the way back up and visit every whitespace, comma
and parenthesis. A linter only reads the tree, and only the nodes that carry meaning: these
helpers walk the dataclass fields directly and skip pure layout.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

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


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The meaningful children of ``node``, in field order."""
    cls = type(node)
    fields = _CHILD_FIELDS.get(cls) or child_fields(cls)
    found = []
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found += [item for item in value if _IS_NODE.get(type(item)) or is_node(type(item))]
        elif _IS_NODE.get(kind) or is_node(kind):
            found.append(value)
    return found


def walk(root: cst.CSTNode, enter: Callable[[cst.CSTNode], bool]) -> None:
    """Call ``enter`` on ``root`` and its descendants, pre-order; a False answer skips the
    node's children."""
    stack = [root]
    while stack:
        node = stack.pop()
        if enter(node) is not False:
            found = children(node)
            found.reverse()
            stack += found


def collect(root: cst.CSTNode, kind, skip=()) -> list:
    """The nodes of type ``kind`` in ``root`` (``root`` included), pre-order, not looking
    inside nodes of the types ``skip``."""
    found: list = []

    def enter(node: cst.CSTNode) -> bool:
        cls = type(node)
        if is_a(cls, kind):
            found.append(node)
        return not (skip and is_a(cls, skip))

    walk(root, enter)
    return found


_IS_A: dict[tuple[type, object], bool] = {}


def is_a(cls: type, kind) -> bool:
    """``issubclass(cls, kind)``, remembered: LibCST's classes are ABCs, and an
    ``isinstance`` that fails runs ``ABCMeta.__instancecheck__`` in Python."""
    try:
        return _IS_A[cls, kind]
    except KeyError:
        known = _IS_A[cls, kind] = issubclass(cls, kind)
        return known


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


def is_none(node: cst.CSTNode | None) -> bool:
    """The literal ``None``."""
    return isinstance(node, cst.Name) and node.value == "None"
