"""A small programmatic entry point for tools built on the linter (the tracer, editors)."""

from __future__ import annotations

from pathlib import Path

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import config, files
from torchdev_lint.runner import check_source
from torchdev_lint.finding import FileError, Finding


def check_paths(
    paths: list[str], select: list[str] | None = None, ignore: list[str] | None = None
) -> tuple[list[Finding], list[FileError]]:
    """Lint files and directories with the nearest pyproject.toml's settings, like the CLI."""
    settings = config.load(config.find_pyproject(Path(paths[0]) if paths else Path.cwd()))
    rules = config.enabled_rules(select or settings.select, [*settings.ignore, *(ignore or [])])
    found, errors = files.discover(paths, settings.exclude, settings.root)
    findings: list[Finding] = []
    for path in found:
        source = files.read(path)
        if isinstance(source, FileError):
            errors.append(source)
            continue
        result = check_source(source, rules, settings)
        if result.error:
            errors.append(result.error)
        findings.extend(result.findings)
    return sorted(findings, key=Finding.sort_key), errors
