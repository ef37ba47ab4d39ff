"""Where something happened in the user's code: the innermost frame of the program's own files.

Capturing a site costs about a microsecond (a walk up ``f_back``), so the tracer does it only
when something worth reporting happens, never per op. A site is a plain list
``[path, line, end_line, col, end_col]`` (col 0-based, as ``co_positions`` gives it) so that it
can be written to JSON and compared as a tuple.
"""

from __future__ import annotations

import ast
import os
import sys

from torchdev_lint import pyast

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)  # torchdev_lint/


class UserFiles:
    """Decides, once per file name, whether a code object belongs to the traced program."""

    def __init__(self, root: str, script: str | None = None):
        self.root = os.path.realpath(root)
        self.script = os.path.realpath(script) if script else None
        self._cache: dict[str, bool] = {}
        self._real: dict[str, str] = {}

    def real(self, filename: str) -> str:
        path = self._real.get(filename)
        if path is None:
            path = self._real[filename] = os.path.realpath(filename)
        return path

    def __contains__(self, filename: str) -> bool:
        answer = self._cache.get(filename)
        if answer is None:
            answer = self._cache[filename] = self._decide(filename)
        return answer

    def _decide(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = self.real(filename)
        if path == self.script:
            return True
        if path.startswith(_PACKAGE + os.sep):
            return False
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        if any(p and path.startswith(os.path.realpath(p) + os.sep) for p in prefixes) and not \
                path.startswith(self.root + os.sep):
            return False
        return path.startswith(self.root + os.sep)


_POSITIONS: dict = {}


def position(code, lasti: int, lineno: int | None) -> tuple[int, int, int, int]:
    """(line, end_line, col, end_col) of the instruction at ``lasti``; on Python 3.10 (no
    ``co_positions``) found from the source (``positions_310``), else the line with column 0."""
    positions = _POSITIONS.get(code)
    if positions is None:
        try:
            positions = _POSITIONS[code] = list(code.co_positions())
        except AttributeError:  # Python 3.10
            positions = _POSITIONS[code] = positions_310(code)
    index = lasti // 2
    if 0 <= index < len(positions) and positions[index] is not None:
        line, end_line, col, end_col = positions[index]
        if line is not None:
            return line, end_line or line, col or 0, end_col or 0
    line = lineno or code.co_firstlineno
    return line, line, 0, 0


# Python 3.10: the instructions whose expression a site can point at, and the AST nodes they
# evaluate (an instruction's column is that of its node).
_CALLS = {"CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "CALL_METHOD"}
_SCOPES = (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_TREES: dict = {}


def _kind_of_instruction(opname: str) -> str | None:
    if opname in _CALLS:
        return "call"
    if opname == "BINARY_SUBSCR":
        return "subscript"
    if opname.startswith("BINARY_"):
        return "binop"
    if opname.startswith("INPLACE_"):
        return "augassign"
    if opname == "RAISE_VARARGS":
        return "raise"
    return None


def _kind_of_node(node) -> str | None:
    if isinstance(node, ast.Call):
        return "call"
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return "subscript"
    if isinstance(node, ast.BinOp):
        return "binop"
    if isinstance(node, ast.AugAssign):
        return "augassign"
    if isinstance(node, ast.Raise):
        return "raise"
    return None


def _evaluation_order(node, out: list) -> None:
    """The nodes under ``node`` (not inside nested scopes), children before their parent, in the
    order the interpreter evaluates them (an assignment's value before its targets)."""
    if isinstance(node, ast.Assign):
        children = [node.value, *node.targets]
    elif isinstance(node, (ast.AnnAssign,)):
        children = [c for c in (node.value, node.target) if c is not None]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        if not isinstance(child, _SCOPES):
            _evaluation_order(child, out)
    out.append(node)


def _scope_nodes(code) -> list | None:
    """The AST nodes of ``code``'s own body (its nested scopes excluded), in evaluation order;
    None when the source is unavailable or ``code`` is no plain function or module."""
    import linecache

    tree = _TREES.get(code.co_filename)
    if tree is None:
        source = "".join(linecache.getlines(code.co_filename))
        tree = (pyast.parse(source) if source else None) or False
        _TREES[code.co_filename] = tree
    if tree is False:
        return None
    if code.co_name == "<module>":
        scope = tree
    elif code.co_name.startswith("<"):
        return None  # lambdas, comprehensions
    else:
        # A decorated function's code starts at its first decorator, its node at ``def``.
        scope = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.name == code.co_name
                      and min([n.lineno, *(d.lineno for d in n.decorator_list)]) <= code.co_firstlineno
                      <= n.body[0].lineno),
                     None)
        if scope is None:
            return None
    out: list = []
    for child in ast.iter_child_nodes(scope):
        if not isinstance(child, _SCOPES):
            _evaluation_order(child, out)
    return out


def positions_310(code) -> list:
    """Per instruction (index ``offset // 2``), the position ``co_positions`` would give on 3.11+,
    for the calls, operators and subscripts of each line: the k-th such instruction of a kind on a
    line is the k-th node of that kind starting on that line, in evaluation order. A line where
    the counts differ (a call spread over lines, a conditional) keeps column 0 (None here), but
    for an assert that pytest rewrote, whose own expression comes first."""
    import dis

    nodes = _scope_nodes(code)
    if not nodes:
        return []
    by_line: dict = {}
    for node in nodes:
        kind = _kind_of_node(node)
        if kind is not None:
            by_line.setdefault((node.lineno, kind), []).append(node)
    instructions: dict = {}
    line = code.co_firstlineno
    size = 0
    for ins in dis.get_instructions(code):
        if ins.starts_line is not None:
            line = ins.starts_line
        size = max(size, ins.offset // 2 + 1)
        kind = _kind_of_instruction(ins.opname)
        if kind is not None:
            instructions.setdefault((line, kind), []).append(ins.offset // 2)
    # pytest's assertion rewriting evaluates an assert's expression first, in order, then adds
    # the calls and operators that build its message, all on the assert's line.
    rewritten = any(name.startswith("@py_assert") for name in code.co_varnames)
    asserts = {node.lineno for node in nodes if isinstance(node, ast.Assert)} if rewritten else set()
    positions: list = [None] * size
    for key, indexes in instructions.items():
        matched = by_line.get(key, ())
        if len(matched) != len(indexes) and not (key[0] in asserts and len(matched) < len(indexes)):
            continue
        for index, node in zip(indexes, matched):
            positions[index] = (node.lineno, node.end_lineno or node.lineno, node.col_offset,
                                node.end_col_offset or 0)
    return positions


def frame_site(frame, users: UserFiles) -> list:
    code = frame.f_code
    line, end_line, col, end_col = position(code, frame.f_lasti, frame.f_lineno)
    return [users.real(code.co_filename), line, end_line, col, end_col]


def user_frame(users: UserFiles, depth: int = 1):
    """The innermost frame of the program's own code above the caller, or None."""
    frame = sys._getframe(depth + 1)
    while frame is not None:
        if frame.f_code.co_filename in users:
            return frame
        frame = frame.f_back
    return None


def site(users: UserFiles, depth: int = 1) -> list | None:
    frame = user_frame(users, depth + 1)
    return frame_site(frame, users) if frame is not None else None


def stack(users: UserFiles, depth: int = 1, limit: int = 8) -> list[list]:
    """The user frames, innermost first (so a finding at a caller's line can match too)."""
    frames = []
    frame = sys._getframe(depth + 1)
    while frame is not None and len(frames) < limit:
        if frame.f_code.co_filename in users:
            frames.append(frame_site(frame, users))
        frame = frame.f_back
    return frames


def traceback_sites(tb, users: UserFiles) -> list[list]:
    """User frames of a traceback, innermost first."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in users:
            line, end_line, col, end_col = position(code, tb.tb_lasti, tb.tb_lineno)
            frames.append([users.real(code.co_filename), line, end_line, col, end_col])
        tb = tb.tb_next
    frames.reverse()
    return frames
