"""The default text format (flake8-style lines) and the summary line under it."""

from __future__ import annotations

from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext


def text_line(finding: Finding) -> str:
    marker = " [*]" if finding.fixable else ""
    return f"{finding.location}: {finding.code}{marker} {finding.message}"


def render(findings: list[Finding], context: OutputContext) -> str:
    return "\n".join(text_line(f) for f in findings)


def summary(findings: list[Finding], checked: int) -> str:
    if not findings:
        return f"All checks passed ({checked} file{'s' if checked != 1 else ''} checked)."
    files = len({f.path for f in findings})
    problems = "problem" if len(findings) == 1 else "problems"
    line = f"Found {len(findings)} {problems} in {files} file{'s' if files != 1 else ''}."
    fixable = [f for f in findings if f.fixable]
    if fixable:
        safe = sum(1 for f in fixable if f.fix.applicability.value == "safe")
        line += f" [*] {safe} fixable with `--fix`"
        if len(fixable) > safe:
            line += f" ({len(fixable) - safe} more with `--unsafe-fixes`)"
        line += "."
    return line
