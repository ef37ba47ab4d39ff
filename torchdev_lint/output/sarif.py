"""``--format sarif``: SARIF 2.1.0, for code-scanning services (GitHub, GitLab, Azure).

Paths are percent-encoded URIs relative to ``%SRCROOT%`` (the repository root, given in
``originalUriBaseIds``), so results stay valid when the checkout moves; files that could not
be checked are reported as tool execution notifications, not dropped."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from urllib.parse import quote

from torchdev_lint import __version__
from torchdev_lint.finding import FileError, Finding
from torchdev_lint.output.context import OutputContext
from torchdev_lint.rule import Rule

SRCROOT = "%SRCROOT%"


def render(findings: list[Finding], context: OutputContext) -> str:
    return json.dumps(sarif(findings, context), indent=2)


@functools.cache
def docs_url() -> str | None:
    """Where the documentation is published: the package's `Documentation` URL
    (``[project.urls]`` in pyproject.toml), if it has one."""
    from importlib import metadata  # slow to import: only SARIF output needs it

    try:
        urls = metadata.metadata("torchdev-lint").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation":
            return url.strip().rstrip("/")
    return None


def help_uri(code: str) -> str | None:
    """A rule's published page: SARIF's ``helpUri`` and the language server's link."""
    base = docs_url()
    return f"{base}/rules/{code}.md" if base else None


def artifact(path: str, root: Path) -> dict:
    """An artifactLocation: relative to %SRCROOT% when under it, else an absolute file URI."""
    resolved = Path(path).resolve()
    try:
        relative = resolved.relative_to(root.resolve())
    except ValueError:
        return {"uri": resolved.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}


def _rule(code: str, cls: type[Rule]) -> dict:
    documentation = cls.documentation()
    rule = {
        "id": code,
        "name": cls.name,
        "shortDescription": {"text": cls.message},
        "fullDescription": {"text": documentation.split("\n## ")[0].strip() or cls.message},
        "help": {"text": documentation, "markdown": documentation},
        "defaultConfiguration": {"level": "error"},
    }
    uri = help_uri(code)
    if uri:
        rule["helpUri"] = uri
    return rule


# Device problems a test found on a simulated GPU that no rule predicted (docs/verdicts.md): not
# rules of the linter, but results need a rule to point at.
RUNTIME_RULES = {
    "TDL100": ("device-mismatch", "An operation mixed devices on a (simulated) GPU, and no static finding predicted it"),
    "TDL101": ("fails-without-gpu", "A CUDA request failed on a machine without a GPU, and no static finding "
                                    "predicted it"),
}


def _runtime_rule(code: str) -> dict:
    name, text = RUNTIME_RULES[code]
    return {"id": code, "name": name, "shortDescription": {"text": text},
            "fullDescription": {"text": text + " (found by the project's tests: docs/verdicts.md)."},
            "defaultConfiguration": {"level": "error"}}


def _region(line: int, column: int, end_line: int | None = None, end_column: int | None = None) -> dict:
    region = {"startLine": line, "startColumn": column}
    if end_line is not None:
        region.update(endLine=end_line, endColumn=end_column)
    return region


def _location(path: str, root: Path, region: dict | None, cell: int | None) -> dict:
    physical = {"artifactLocation": artifact(path, root)}
    if region:
        physical["region"] = region
    location = {"physicalLocation": physical}
    if cell is not None:
        # SARIF has no notebook cells: name the cell; lines are counted within it.
        location["logicalLocations"] = [{"name": f"cell {cell}", "kind": "notebookCell"}]
    return location


def _notification(error: FileError, root: Path) -> dict:
    region = _region(error.line, error.column or 1) if error.line else None
    return {
        "level": "error",
        "message": {"text": f"{error.path}: {error.message}"},
        "locations": [_location(error.path, root, region, error.cell)],
    }


def sarif(findings: list[Finding], context: OutputContext | None = None) -> dict:
    context = context or OutputContext()
    rules = [_rule(code, cls) for code, cls in sorted(Rule.registry.items())]
    runtime = sorted({f.code for f in findings if f.code in RUNTIME_RULES and f.code not in Rule.registry})
    rules += [_runtime_rule(code) for code in runtime]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": "error",
            "message": {"text": f.message + (f" ({f.verdict['headline']})" if (f.verdict or {}).get("status") ==
                                             "confirmed" else "")},
            "locations": [_location(f.path, context.root,
                                    _region(f.line, f.column, f.end_line, f.end_column), f.cell)],
            "relatedLocations": [
                {**_location(step.path, context.root, _region(step.line, step.column), step.cell),
                 "id": number, "message": {"text": step.message}}
                for number, step in enumerate(f.evidence)
            ],
            "properties": {"confidence": f.confidence.value,
                           **({"verdict": f.verdict} if f.verdict is not None else {})},
        }
        for f in findings
    ]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "torchdev-lint", "version": __version__, "rules": rules}},
                "originalUriBaseIds": {SRCROOT: {"uri": context.root.resolve().as_uri().rstrip("/") + "/"}},
                "invocations": [{
                    "executionSuccessful": not context.errors,
                    "toolExecutionNotifications": [_notification(e, context.root) for e in context.errors],
                }],
                "results": results,
            }
        ],
    }
