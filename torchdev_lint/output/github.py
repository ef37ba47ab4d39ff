"""``--format github``: workflow commands that GitHub Actions shows as annotations."""

from __future__ import annotations

from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext


def escape_data(text: str) -> str:
    """The message part of a workflow command: `%`, CR and LF would end or corrupt it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (`file=...`): `,` and `:` also separate properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], context: OutputContext) -> str:
    lines = []
    for f in findings:
        properties = {
            "title": f"torchdev-lint ({f.code})", "file": f.path, "line": f.line, "col": f.column,
            "endLine": f.end_line, "endColumn": f.end_column,
        }
        joined = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
        lines.append(f"::error {joined}::{escape_data(f'{f.code} {f.shown_message}')}")
    return "\n".join(lines)
