"""``--format json``: a list of findings (docs/json-output.md)."""

from __future__ import annotations

import json

from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext


def render(findings: list[Finding], context: OutputContext) -> str:
    return json.dumps([f.to_json() for f in findings], indent=2)
