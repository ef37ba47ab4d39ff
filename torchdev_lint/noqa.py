"""``# noqa`` and ``# noqa: TDL001, TDL004`` comments: a comment anywhere on the lines of a
multi-line statement applies to the whole statement, and codes prefix-match, case-insensitively.
flake8 (which applies its own noqa to the plugin) only reads the reported physical line."""

from __future__ import annotations

import io
import re
import tokenize

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)

ALL = frozenset({"*"})
_LAYOUT = (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER)


class NoqaMap:
    def __init__(self, source: str) -> None:
        # line -> codes suppressed on it; ALL for a bare noqa
        self._by_line: dict[int, frozenset[str]] = {}
        if "noqa" not in source.lower():
            return
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        except (tokenize.TokenError, SyntaxError):
            return
        statement_start: int | None = None  # first line of the current logical line
        pending: set[str] = set()
        for token in tokens:
            if token.type == tokenize.COMMENT:
                match = _NOQA.search(token.string)
                if match and statement_start is not None:
                    codes = match.group("codes")
                    pending |= ALL if not codes else {
                        c.upper() for c in re.split(r"[,\s]+", codes) if c
                    }
            elif token.type == tokenize.NEWLINE:
                if pending and statement_start is not None:
                    for line in range(statement_start, token.start[0] + 1):
                        self._by_line[line] = self._by_line.get(line, frozenset()) | pending
                pending, statement_start = set(), None
            elif token.type not in _LAYOUT and statement_start is None:
                statement_start = token.start[0]

    def suppresses(self, line: int, code: str) -> bool:
        codes = self._by_line.get(line)
        if not codes:
            return False
        return "*" in codes or any(code.startswith(c) for c in codes)

