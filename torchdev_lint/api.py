"""A small programmatic entry point for tools built on the linter (the tracer, editors)."""

from __future__ import annotations

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import config, files
from torchdev_lint.runner import check_source
from torchdev_lint.finding import FileError, Finding
from torchdev_lint.rule import Rule


def check_paths(
    paths: list[str], select: list[str] | None = None, ignore: list[str] | None = None,
    preview: bool | None = None,
) -> tuple[list[Finding], list[FileError]]:
    """Lint files and directories, each with the settings that govern it, like the CLI.
    ``preview``: True or False overrides the configured tier (docs/confidence.md)."""
    resolver = config.Resolver(config.Overrides(select=select, ignore=ignore or [], preview=preview))
    rules = [cls for _, cls in sorted(Rule.registry.items())]
    found, errors = files.discover(paths or ["."], resolver)
    findings: list[Finding] = []
    for path in found:
        source = files.read(path)
        if isinstance(source, FileError):
            errors.append(source)
            continue
        result = check_source(source, rules, resolver)
        if result.error:
            errors.append(result.error)
        findings.extend(result.findings)
    return sorted(findings, key=Finding.sort_key), errors
