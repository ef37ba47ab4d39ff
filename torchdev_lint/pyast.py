"""The standard library's parser, safe to call from several threads.

CPython 3.11 and 3.12 keep the depth counter of the parser's tree construction in state that
every thread shares: a parse that another thread's parse interrupts (a garbage collection can
switch threads in the middle) fails with ``SystemError: AST constructor recursion depth
mismatch``. The tool parses in several threads at once (the tracer's runs beside the checks,
each check on a large stack of its own, the resident checker), so every parse of ours holds one
lock, and one that a parse outside the tool interrupted is made again.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()
_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def parse(source: str, mode: str = "exec") -> ast.AST | None:
    """The tree of ``source``, or None when CPython cannot parse it (a syntax error, a null
    byte, nesting too deep for the parser or for the tree's construction)."""
    with _ONE_AT_A_TIME:
        try:
            try:
                return ast.parse(source, mode=mode)
            except SystemError as error:
                if "recursion depth mismatch" not in str(error):
                    raise
                return ast.parse(source, mode=mode)  # a foreign thread's parse interrupted ours
        except _UNPARSABLE:
            return None


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain of the stdlib tree, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def statement_lines(tree: ast.Module) -> list[int]:
    """The line of every statement of ``tree`` (nested ones too): where each starts, at bracket
    depth 0 (``limits.measure`` scans between them)."""
    lines = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        lines.append(node.lineno)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for item in getattr(node, name, ()):
                if isinstance(item, ast.stmt):
                    todo.append(item)
                else:  # an `except` clause, a `case`: its statements
                    todo.extend(item.body)
    return lines
