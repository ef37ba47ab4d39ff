"""What LibCST can parse safely, measured before it sees a file.

LibCST's native parser recurses on the C stack and its cost grows with the square of an
expression's depth: 1500 nested parentheses kill the process with SIGSEGV, an operator
chain of 3000 terms takes 17 s, 1000 chained subscripts 6 s, and more than 3000 implicitly
concatenated strings fail as a "syntax error". One linear scan (a regular expression that
skips strings and comments) measures bracket depth and the longest chain, so such a file is
reported in one line instead of taking the run down.
Where the stdlib parser has read the file (the project index), only the stretches between
statement starts holding enough brackets, operators and strings to pass a limit are scanned.

The project index (``analysis/project_index.py``) reads files nobody named, the rest of each
named file's package, with the stdlib parser: it keeps to the same limits, and to a size
budget (``MAX_INDEX_BYTES``), so that a generated module beside the named files (a 5 MB
protobuf ``_pb2.py``) costs a ``stat``, not seconds and gigabytes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

# CPython's own limit (its tokenizer refuses a 201st open bracket): deeper is never valid Python.
MAX_BRACKET_DEPTH = 200
# Operators, attribute dots and brackets from a statement's start to its deepest operand:
# roughly the depth of the tree LibCST builds. LibCST parses 500 levels in well under a
# second; its cost grows with the square of the depth.
MAX_CHAIN = 500
# Adjacent string literals LibCST accepts (its parser stops at 3000; the cost is linear). Writing
# them back (positions, fixes) recurses through C calls (context managers) for each literal, and
# CPython 3.12 caps that depth at a fixed number no recursion limit or stack size raises: 740
# literals there (3.12.1, measured), so 3.12 gets the one-line answer sooner. Operators, brackets
# and attribute chains stay well within it at the limits above.
MAX_STRINGS = 700 if sys.version_info[:2] == (3, 12) else 3000
# The largest file the project index reads: the largest hand-written module of the 66 corpus
# repositories is 330 kB; generated code (protobuf, vendored bundles) runs to megabytes, and
# `ast.parse` takes 1.4 s and 160 MB per MB of it. Files over it contribute no facts. A file
# the command is asked to check is checked whatever its size (the work grows linearly).
MAX_INDEX_BYTES = 1 << 20

_TOKENS = re.compile(
    r"""
    (?P<string>(?i:[rbuf]{0,2})(?:'''(?:\\.|[^\\])*?(?:'''|\Z)|\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z)
        |'(?:\\.|[^\\'\n])*(?:'|$)|"(?:\\.|[^\\"\n])*(?:"|$)))
    |(?P<comment>\#[^\n]*)
    |(?P<continuation>\\\r?\n)
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<newline>\n)
    |(?P<separator>,|;|:(?!=)|(?<![=!<>])=(?!=))
    |(?P<operator>\*\*=?|//=?|<<=?|>>=?|:=|->|[-+*/%@&|^~<>!=]=?|\.(?!\d)
        |\b(?:and|or|not|if|else|lambda|await|in|is)\b)
    """,
    re.VERBOSE | re.MULTILINE,
)


@dataclass
class Excess:
    """Where a file passes a limit: the offset of the expression and what it holds."""

    offset: int
    what: str
    invalid: bool = False  # beyond CPython's own limits: a syntax error, not only too complex

    def position(self, source: str) -> tuple[int, int]:
        """1-based line and column of the expression's first character."""
        offset = self.offset
        while offset < len(source) and source[offset] in " \t\r\n\\":
            offset += 1
        line_start = source.rfind("\n", 0, offset) + 1
        return source.count("\n", 0, offset) + 1, offset - line_start + 1


# The last texts measured: the project index measures every file before the lint does.
_MEASURED: dict[tuple[int, int], Excess | None] = {}
_MEASURED_LIMIT = 4096


def measure(source: str, statement_lines: Sequence[int] | None = None) -> Excess | None:
    """The first place ``source`` passes a limit, or None when LibCST can parse it safely.
    Remembered for the last few thousand texts (by length and hash). ``statement_lines``: the
    lines where the file's statements start (``pyast.statement_lines``), when the stdlib
    parser has read it: only the statements that could pass a limit are then scanned."""
    key = (len(source), hash(source))
    try:
        return _MEASURED[key]
    except KeyError:
        pass
    found = _measure(source) if statement_lines is None else _measure_statements(source, statement_lines)
    if len(_MEASURED) >= _MEASURED_LIMIT:
        del _MEASURED[next(iter(_MEASURED))]
    _MEASURED[key] = found
    return found


def index_budget(size: int, source: str | None = None, statement_lines: Sequence[int] | None = None) -> str | None:
    """Why the project index must not read a file of ``size`` bytes (and text ``source``,
    when it has been read, with its ``statement_lines`` when parsed), or None when it may."""
    if size > MAX_INDEX_BYTES:
        return f"{size / 1e6:.1f} MB, over the index's budget of {MAX_INDEX_BYTES / 1e6:.1f} MB"
    excess = measure(source, statement_lines) if source is not None else None
    return f"too complex: {excess.what}" if excess is not None else None


# A stretch of code passes no limit when it holds few characters that can make a bracket, an
# operator or a string (``_SYMBOLS``), and few words that can be keyword operators: its
# operators and brackets are at most their sum (MAX_CHAIN), its open brackets and strings at
# most the characters (MAX_BRACKET_DEPTH, MAX_STRINGS).
_QUIET_SYMBOLS = 200
_SYMBOLS = str.maketrans("", "", "([{+-*/%@&|^~<>!=.\\'\"")
_KEYWORD_OPERATOR = re.compile(r"\b(?:and|or|not|if|else|lambda|await|in|is)\b")


def _measure_statements(source: str, statement_lines: Sequence[int]) -> Excess | None:
    """``_measure``, scanning only the stretches between statement starts that could pass a
    limit. A statement starts a line at bracket depth 0, where the scan starts afresh, so each
    stretch scanned alone finds what the whole scan finds there (offsets shifted)."""
    if "\r" in source:  # the parser's lines may end at a lone "\r", the split below only at "\n"
        return _measure(source)
    line_starts = list(accumulate(map((1).__add__, map(len, source.split("\n"))), initial=0))
    bounds = sorted({0, len(source), *(line_starts[line - 1] for line in statement_lines if 0 < line < len(line_starts))})
    for start, end in zip(bounds, bounds[1:]):
        stretch = source[start:end]
        symbols = len(stretch) - len(stretch.translate(_SYMBOLS))
        if symbols <= _QUIET_SYMBOLS and symbols + len(_KEYWORD_OPERATOR.findall(stretch)) < MAX_CHAIN:
            continue
        found = _measure(stretch)
        if found is not None:
            return Excess(start + found.offset, found.what, found.invalid)
    return None


def _measure(source: str) -> Excess | None:
    """``measure``, not remembered.

    The chain count runs along the path from the statement to the innermost bracket (an
    operand in brackets is one level deeper in the tree): ``(a+...+(a+...))`` nests its chains."""
    depth = 0
    chains = [0]  # operators and trailers from the statement's start, per open bracket
    bases = [0]  # the chain count where each bracket was opened (a comma returns to it)
    strings = [0]
    starts = [0]  # where the expression being counted at each depth began
    for match in _TOKENS.finditer(source):
        kind = match.lastgroup
        if kind == "string":
            strings[depth] += 1
            if strings[depth] > MAX_STRINGS:
                return Excess(starts[depth], f"more than {MAX_STRINGS} adjacent string literals")
        elif kind == "operator" or kind == "open":
            chains[depth] += 1
            if chains[depth] > MAX_CHAIN:
                return Excess(starts[0], f"an expression nested more than {MAX_CHAIN} operators deep")
            if kind == "open":
                depth += 1
                if depth > MAX_BRACKET_DEPTH:
                    return Excess(match.start(), f"more than {MAX_BRACKET_DEPTH} nested brackets", True)
                if depth == len(chains):
                    chains.append(0)
                    bases.append(0)
                    strings.append(0)
                    starts.append(0)
                chains[depth] = bases[depth] = chains[depth - 1]
                strings[depth] = 0
                starts[depth] = match.end()
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "separator" or (kind == "newline" and depth == 0):
            chains[depth] = bases[depth]
            strings[depth] = 0
            starts[depth] = match.end()
    return None
