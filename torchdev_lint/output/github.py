"""``--format github``: workflow commands that GitHub Actions shows as annotations."""

from __future__ import annotations

from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext


def render(findings: list[Finding], context: OutputContext) -> str:
    return "\n".join(
        f"::error title=torchdev-lint ({f.code}),file={f.path},line={f.line},"
        f"col={f.column},endLine={f.end_line},endColumn={f.end_column}::"
        f"{f.code} {f.message}"
        for f in findings
    )
