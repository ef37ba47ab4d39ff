"""``--format gitlab``: GitLab's code-quality report (a JSON list of issues), shown in merge
requests when a job saves it as ``artifacts:reports:codequality``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext


def render(findings: list[Finding], context: OutputContext) -> str:
    return json.dumps(report(findings, context.root), indent=2)


def report(findings: list[Finding], root: Path) -> list[dict]:
    seen: dict[tuple, int] = {}
    issues = []
    for finding in findings:
        path = _relative(finding.path, root)
        # GitLab matches issues across commits by fingerprint: leave the line out, so a finding
        # keeps its identity when code above it moves; count repeats to keep them apart.
        identity = (path, finding.code, finding.message)
        seen[identity] = seen.get(identity, 0) + 1
        fingerprint = hashlib.sha256(json.dumps([*identity, seen[identity]]).encode()).hexdigest()
        issues.append({
            "type": "issue",
            "check_name": finding.code,
            "description": f"{finding.code} {finding.shown_message}",
            "categories": ["Bug Risk"],
            "severity": "major",
            "fingerprint": fingerprint,
            "location": {"path": path, "lines": {"begin": finding.line, "end": finding.end_line}},
        })
    return issues


def _relative(path: str, root: Path) -> str:
    """GitLab wants paths from the repository root: the run's root when it is one."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(root.resolve())
        except ValueError:
            pass
    return candidate.as_posix()
