"""``--format sarif``: SARIF 2.1.0, for code-scanning services."""

from __future__ import annotations

import json
from pathlib import Path

from torchdev_lint import __version__
from torchdev_lint.finding import Finding
from torchdev_lint.output.context import OutputContext
from torchdev_lint.rule import Rule


def render(findings: list[Finding], context: OutputContext) -> str:
    return json.dumps(sarif(findings), indent=2)


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
