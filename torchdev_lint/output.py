"""Rendering findings: text (flake8-style), JSON, GitHub annotations and SARIF."""

from __future__ import annotations

import json
from pathlib import Path

from torchdev_lint import __version__
from torchdev_lint.finding import Finding
from torchdev_lint.rule import Rule

FORMATS = ("text", "json", "github", "sarif")


def text_line(finding: Finding) -> str:
    marker = " [*]" if finding.fixable else ""
    return f"{finding.location}: {finding.code}{marker} {finding.message}"


def render(findings: list[Finding], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([f.to_json() for f in findings], indent=2)
    if fmt == "github":
        return "\n".join(
            f"::error title=torchdev-lint ({f.code}),file={f.path},line={f.line},"
            f"col={f.column},endLine={f.end_line},endColumn={f.end_column}::"
            f"{f.code} {f.message}"
            for f in findings
        )
    if fmt == "sarif":
        return json.dumps(sarif(findings), indent=2)
    return "\n".join(text_line(f) for f in findings)


def sarif(findings: list[Finding]) -> dict:
    rules = [
        {
            "id": code,
            "name": cls.name,
            "shortDescription": {"text": cls.message},
            "fullDescription": {"text": cls.documentation().split("\n## ")[0].strip() or cls.message},
            "help": {"text": cls.documentation(), "markdown": cls.documentation()},
            "defaultConfiguration": {"level": "error"},
        }
        for code, cls in sorted(Rule.registry.items())
    ]
    results = [
        {
            "ruleId": f.code,
            "level": "error",
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": Path(f.path).as_posix()},
                        "region": {
                            "startLine": f.line,
                            "startColumn": f.column,
                            "endLine": f.end_line,
                            "endColumn": f.end_column,
                        },
                    }
                }
            ],
        }
        for f in findings
    ]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchdev-lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }


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
