"""``--format github``: workflow commands that GitHub Actions shows as annotations."""

from __future__ import annotations

from torchdev_lint.finding import CHECK_ERROR_CODE, Finding
from torchdev_lint.output.context import OutputContext


def escape_data(text: str) -> str:
    """The message part of a workflow command: `%`, CR and LF would end or corrupt it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (`file=...`): `,` and `:` also separate properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], context: OutputContext) -> str:
    """One ``::error`` per finding and per file that could not be checked, at paths from the
    repository root (where GitHub places annotations)."""
    lines = [
        _command(context.relative(f.path), f.code, f"{f.code} {f.shown_message}",
                 line=f.line, col=f.column, endLine=f.end_line, endColumn=f.end_column)
        for f in findings
    ]
    for error in context.errors:
        where = {"line": error.line, "col": error.column} if error.line is not None else {}
        lines.append(_command(context.relative(error.path), CHECK_ERROR_CODE,
                              error.as_finding_message, **where))
    return "\n".join(lines)


def _command(path: str, code: str, message: str, **where) -> str:
    properties = {"title": f"torchdev-lint ({code})", "file": path, **where}
    joined = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::error {joined}::{escape_data(message)}"
