"""What a format may need beyond the findings: filled by the way in (the CLI), defaults for the rest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchdev_lint.finding import FileError


@dataclass
class OutputContext:
    errors: list[FileError] = field(default_factory=list)  # files that could not be checked
    root: Path = field(default_factory=Path.cwd)  # what paths are shown relative to (SARIF)
