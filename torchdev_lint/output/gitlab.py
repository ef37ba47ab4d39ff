"""``--format gitlab``: GitLab's code-quality report (a JSON list of issues), shown in merge
requests when a job saves it as ``artifacts:reports:codequality``."""

from __future__ import annotations

import hashlib
import json

from torchdev_lint.finding import CHECK_ERROR_CODE, Finding
from torchdev_lint.output.context import OutputContext


def render(findings: list[Finding], context: OutputContext) -> str:
    return json.dumps(report(findings, context), indent=2)


def report(findings: list[Finding], context: OutputContext) -> list[dict]:
    """One issue per finding, and one per file that could not be checked (a merge request
    would otherwise show a broken file as clean). Paths are from the repository root."""
    seen: dict[tuple, int] = {}
    issues = []

    def issue(path: str, code: str, description: str, severity: str, begin: int, end: int) -> None:
        # GitLab matches issues across commits by fingerprint: leave the line out, so a finding
        # keeps its identity when code above it moves; count repeats to keep them apart.
        identity = (path, code, description)
        seen[identity] = seen.get(identity, 0) + 1
        fingerprint = hashlib.sha256(json.dumps([*identity, seen[identity]]).encode()).hexdigest()
        issues.append({
            "type": "issue",
            "check_name": code,
            "description": description,
            "categories": ["Bug Risk"],
            "severity": severity,
            "fingerprint": fingerprint,
            "location": {"path": path, "lines": {"begin": begin, "end": end}},
        })

    for finding in findings:
        issue(context.relative(finding.path), finding.code, f"{finding.code} {finding.shown_message}",
              "major", finding.line, finding.end_line)
    for error in context.errors:
        issue(context.relative(error.path), CHECK_ERROR_CODE,
              error.as_finding_message, "critical", error.line or 1, error.line or 1)
    return issues
