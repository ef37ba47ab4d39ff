"""``# noqa`` and ``# noqa: TDL001, TDL004`` comments: a comment anywhere on the lines of a
multi-line statement applies to the whole statement, and codes prefix-match, case-insensitively.
flake8 (which applies its own noqa to the plugin) only reads the reported physical line.

Also: ``# torchdev-lint: noqa`` on a line of its own turns the whole file off (or, with
codes, those codes in the whole file); ``--add-noqa`` writes directives for a baseline; and
each directive remembers which of its codes suppressed something, for the unused-noqa check."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from torchdev_lint.lines import split as split_lines

_CODES = r"(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)"
_NOQA = re.compile(r"#\s*noqa(?::[\s]?" + _CODES + ")?", re.I)
_FILE_NOQA = re.compile(r"#\s*torchdev-lint:\s*noqa(?::\s*" + _CODES + ")?", re.I)

ALL = frozenset({"*"})
_LAYOUT = (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER)


def _split(codes: str | None) -> frozenset[str]:
    return ALL if not codes else frozenset(c.upper() for c in re.split(r"[,\s]+", codes) if c)


@dataclass
class Directive:
    """One ``# noqa`` comment: where it is, its codes, and the codes that suppressed a finding."""

    line: int
    column: int  # 1-based
    codes: frozenset[str]
    used: set[str] = field(default_factory=set)

    def suppresses(self, code: str) -> bool:
        for pattern in self.codes:
            if pattern == "*" or code.startswith(pattern):
                self.used.add(pattern)
                return True
        return False


def _logical_lines(source: str):
    """(first line, last line, comments, NEWLINE token) of each logical line; a comment on
    a line of its own comes alone, as (None, None, [comment], None)."""
    start, comments = None, []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            if start is None:
                yield None, None, [token], None
            else:
                comments.append(token)
        elif token.type == tokenize.NEWLINE:
            if start is not None:
                yield start, token.start[0], comments, token
            start, comments = None, []
        elif token.type not in _LAYOUT and start is None:
            start = token.start[0]


class NoqaMap:
    def __init__(self, source: str) -> None:
        self._by_line: dict[int, Directive] = {}
        self.directives: list[Directive] = []
        self.file_codes: frozenset[str] = frozenset()  # `# torchdev-lint: noqa[: codes]`
        if "noqa" not in source.lower():
            return
        try:
            for start, end, comments, _ in _logical_lines(source):
                for comment in comments:
                    whole = _FILE_NOQA.search(comment.string)
                    if whole and start is None:
                        self.file_codes |= _split(whole.group("codes"))
                        continue
                    match = _NOQA.search(comment.string)
                    if match and start is not None:
                        directive = Directive(comment.start[0], comment.start[1] + 1 + match.start(),
                                              _split(match.group("codes")))
                        self.directives.append(directive)
                        for line in range(start, end + 1):
                            self._by_line.setdefault(line, directive)
        except (tokenize.TokenError, SyntaxError):
            return

    def suppresses(self, line: int, code: str) -> bool:
        if "*" in self.file_codes or any(code.startswith(c) for c in self.file_codes):
            return True
        directive = self._by_line.get(line)
        return directive is not None and directive.suppresses(code)


def add_noqa(source: str, codes_by_line: dict[int, set[str]]) -> tuple[str, int]:
    """``source`` with a ``# noqa: CODES`` on each statement that has findings (on its last
    line, where a comment is allowed), merged into an existing ``# noqa: ...``; and how many
    directives were written or extended."""
    lines = split_lines(source, keepends=True)  # as the tokenizer numbers them
    added = 0
    edits: list[tuple[int, int, int, str]] = []  # (line, start column, end column, new text)
    for start, end, comments, newline in _logical_lines(source):
        if start is None:
            continue
        wanted = set().union(*(codes_by_line.get(n, set()) for n in range(start, end + 1)))
        if not wanted:
            continue
        existing = next((c for c in comments if c.start[0] == end and _NOQA.search(c.string)), None)
        if existing is None:
            edits.append((end, newline.start[1], newline.start[1], f"  # noqa: {', '.join(sorted(wanted))}"))
        else:
            match = _NOQA.search(existing.string)
            old = _split(match.group("codes"))
            if "*" in old or wanted <= old:
                continue
            text = existing.string[:match.start()] + f"# noqa: {', '.join(sorted(old | wanted))}" \
                + existing.string[match.end():]
            edits.append((end, existing.start[1], existing.end[1], text))
        added += 1
    for line, begin, finish, text in sorted(edits, reverse=True):
        old = lines[line - 1]
        lines[line - 1] = old[:begin] + text + old[finish:]
    return "".join(lines), added


def baseline(source, findings) -> tuple[str, int]:
    """``--add-noqa`` for one file (a ``files.SourceFile``): its text as written to disk (a
    notebook's JSON, each directive in its cell) with directives for ``findings``, and how
    many were written or extended."""
    notebook = source.notebook
    # A notebook's findings are placed in their cells: back to lines of the joined text.
    joined = {(e.cell + 1, e.number): n for n, e in enumerate(notebook.lines, 1)} if notebook else {}
    codes_by_line: dict[int, set[str]] = {}
    for finding in findings:
        line = joined.get((finding.cell, finding.line), finding.line)
        codes_by_line.setdefault(line, set()).add(finding.code)
    text, added = add_noqa(source.text, codes_by_line)
    return (source.file_text_for(text) if added else source.file_text), added


def unused(noqa: NoqaMap, enabled: set[str], known: set[str]) -> list[tuple[int, int, str]]:
    """(line, column, code) of each ``TDL`` code in a directive that suppressed nothing, among
    the rules that ran (``enabled``), or that names no rule at all."""
    found = []
    for directive in noqa.directives:
        for code in sorted(directive.codes - directive.used):
            if not code.startswith("TDL"):
                continue
            ran = any(k.startswith(code) for k in enabled)
            exists = any(k.startswith(code) for k in known)
            if ran or not exists:
                found.append((directive.line, directive.column, code))
    return found
