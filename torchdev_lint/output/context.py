"""What a format may need beyond the findings: filled by the way in (the CLI), defaults for the rest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from torchdev_lint.finding import FileError, Finding


@dataclass
class OutputContext:
    errors: list[FileError] = field(default_factory=list)  # files that could not be checked
    # What CI formats (SARIF, GitLab, GitHub) show paths relative to: the repository root.
    root: Path = field(default_factory=Path.cwd)
    unsafe_fixes: bool = False  # `--fix` would apply unsafe fixes too: they count as fixable
    concise: bool = False  # text: one line per finding, no code frame
    color: bool = False
    show_evidence: bool = False  # text: the evidence steps under each finding
    hidden: int = 0  # possible findings the run did not show (`--preview` shows them)
    set_aside: int = 0  # of those, portability findings in code judged CUDA-only
    # The source line a finding starts on, for code frames (None when unknown).
    source_line: Callable[[Finding], str | None] = lambda finding: None

    def will_fix(self, finding: Finding) -> bool:
        """The finding's fix is one that `--fix` (as configured) applies."""
        fix = finding.fix
        return fix is not None and (self.unsafe_fixes or fix.applicability.value == "safe")

    def hidden_fix(self, finding: Finding) -> bool:
        """A fix exists but needs `--unsafe-fixes`."""
        return finding.fix is not None and not self.will_fix(finding)

    def relative(self, path: str) -> str:
        """``path`` from the repository root, where CI services place annotations; as given
        when it lies outside (or is standard input's name)."""
        candidate = Path(path)
        try:
            return candidate.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError):
            return candidate.as_posix()
