"""The default text format: a location line per finding with a code frame under it (ruff's
``full``), or one line each (``concise``); the summary and ``--statistics`` tables."""

from __future__ import annotations

import os
from collections import Counter
from typing import TextIO

from torchdev_lint.finding import FileError, Finding
from torchdev_lint.output.context import OutputContext

SAFE_MARK, UNSAFE_MARK = "[*]", "[~]"  # fixed by `--fix`; fixed only with `--unsafe-fixes`
_BOLD, _RED, _CYAN, _RESET = "\033[1m", "\033[31m", "\033[36m", "\033[0m"


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal only; NO_COLOR (https://no-color.org) and FORCE_COLOR decide first."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _paint(text: str, style: str, context: OutputContext) -> str:
    return f"{style}{text}{_RESET}" if context.color else text


def mark(finding: Finding, context: OutputContext) -> str:
    if context.will_fix(finding):
        return f" {_paint(SAFE_MARK, _CYAN, context)}"
    return f" {UNSAFE_MARK}" if context.hidden_fix(finding) else ""


def text_line(finding: Finding, context: OutputContext | None = None) -> str:
    context = context or OutputContext()
    return (f"{_paint(finding.location, _BOLD, context)}: {_paint(finding.code, _RED, context)}"
            f"{mark(finding, context)} {finding.shown_message}")


def evidence_lines(finding: Finding) -> list[str]:
    """``  = evidence: path:line:column: what it shows``, one line per step."""
    lines = []
    for step in finding.evidence:
        cell = f"cell {step.cell}:" if step.cell is not None else ""
        lines.append(f"  = evidence: {step.path}:{cell}{step.line}:{step.column}: {step.message}")
    return lines


def frame(finding: Finding, context: OutputContext) -> list[str]:
    """The finding's first line with carets under the offending span."""
    line = context.source_line(finding)
    if line is None:
        return []
    line = line.rstrip("\r\n")
    start = finding.column - 1
    end = finding.end_column - 1 if finding.end_line == finding.line else len(line)
    end = max(end, start + 1)
    # Keep tabs under tabs so the carets line up in any terminal.
    pad = "".join(c if c == "\t" else " " for c in line[:start])
    gutter = " " * len(str(finding.line))
    carets = _paint("^" * (end - start), _RED, context)
    return [f"{gutter} |", f"{finding.line} | {line}", f"{gutter} | {pad}{carets}"]


def render(findings: list[Finding], context: OutputContext) -> str:
    def evidence(finding: Finding) -> list[str]:
        return evidence_lines(finding) if context.show_evidence else []

    if context.concise:
        return "\n".join("\n".join([text_line(f, context), *evidence(f)]) for f in findings)
    blocks = ["\n".join([text_line(f, context), *frame(f, context), *evidence(f)]) for f in findings]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def summary(findings: list[Finding], checked: int, context: OutputContext | None = None) -> str:
    context = context or OutputContext()
    unchecked = _unchecked(context.errors)
    if not findings:
        if unchecked:
            return f"No problems found in {_plural(checked - unchecked, 'file')} checked; " \
                   f"{_plural(unchecked, 'file')} could not be checked.{_hidden(context)}"
        return f"All checks passed ({_plural(checked, 'file')} checked).{_hidden(context)}"
    files = len({f.path for f in findings})
    line = f"Found {_plural(len(findings), 'problem')} in {_plural(files, 'file')}."
    if unchecked:
        line += f" {_plural(unchecked, 'file')} could not be checked."
    fixable = sum(1 for f in findings if context.will_fix(f))
    hidden = sum(1 for f in findings if context.hidden_fix(f))
    if fixable:
        line += f" {SAFE_MARK} {fixable} fixable with `--fix`."
    if hidden:
        line += f" {UNSAFE_MARK} {hidden} hidden fix{'es' if hidden != 1 else ''} " \
                f"can be enabled with `--unsafe-fixes`."
    return line + _hidden(context)


def _hidden(context: OutputContext) -> str:
    """What the default output left out, and how to ask for it."""
    if not context.hidden:
        return ""
    text = f"\n{_plural(context.hidden, 'possible finding')} not shown (`--preview`)"
    if context.set_aside:
        text += (f"; {context.set_aside} of them in code judged CUDA-only "
                 "(`--target-devices cpu,cuda` if it must run without CUDA)")
    return text + "."


def _unchecked(errors: list[FileError]) -> int:
    return len({e.path for e in errors})


def statistics(findings: list[Finding], context: OutputContext) -> str:
    """One line per rule, most frequent first: count, code, fix mark, name."""
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = {f.code for f in findings if context.will_fix(f)}
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "\n".join(
        f"{count:>{width}}\t{code}\t{SAFE_MARK if code in fixable else '   '} {names[code]}"
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )


def fixes_by_file(fixed: list[Finding]) -> str:
    """`--show-fixes`: what `--fix` changed, per file and rule."""
    by_file: dict[str, Counter] = {}
    names = {}
    for finding in fixed:
        by_file.setdefault(finding.path, Counter())[finding.code] += 1
        names[finding.code] = finding.name
    lines = []
    for path in sorted(by_file):
        lines.append(f"- {path}:")
        lines += [f"    {count} × {code} ({names[code]})" for code, count in sorted(by_file[path].items())]
    return "\n".join(lines)
