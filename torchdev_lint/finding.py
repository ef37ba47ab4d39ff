"""What a check produces: findings, their fixes, and files that could not be checked."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the findings' data needs no LibCST at run time (the flake8 plugin imports it)
    import libcst as cst


class Applicability(enum.Enum):
    """How far a fix can be trusted (ruff's vocabulary).

    SAFE: behaviour on a machine with a GPU is unchanged; applied by ``--fix``.
    UNSAFE: the fix may change behaviour somewhere; applied only with ``--unsafe-fixes``.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"


class Confidence(enum.Enum):
    """How complete the evidence behind a finding is (docs/confidence.md).

    CERTAIN: the analysis saw the whole path: where the value is made, where it meets a
    device, and that nothing on the way makes the line correct. Shown by default.
    POSSIBLE: part of the path is out of sight (an unknown callee, a value from elsewhere),
    or the rule has not yet earned the default tier on code it was never tuned on. Shown
    with ``--preview``.
    """

    CERTAIN = "certain"
    POSSIBLE = "possible"


@dataclass(frozen=True)
class Evidence:
    """One step of why a finding holds: a place in the code and what it shows there."""

    path: str
    line: int
    column: int
    message: str
    cell: int | None = None

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "column": self.column,
                "message": self.message, "cell": self.cell}


# An edit rewrites one node: it receives the node as already updated by inner edits
# and returns its replacement, so fixes of nested findings compose.
Edit = Callable[["cst.CSTNode"], "cst.CSTNode"]


@dataclass
class Fix:
    applicability: Applicability
    edits: list[tuple[cst.CSTNode, Edit]]
    # Module-level definitions the edits rely on, added once after the imports by the fixer:
    # the default `device`, and `import torch` for code that names torch.
    needs_default_device: bool = False
    needs_torch: bool = False


_LINE_BREAKS = re.compile(r"[ \t]*[\r\n]+\s*")


@dataclass
class Finding:
    path: str
    line: int
    column: int  # 1-based, in characters
    end_line: int
    end_column: int  # 1-based, one past the last character
    code: str
    name: str
    message: str
    fix: Fix | None = None
    node: cst.CSTNode | None = field(default=None, repr=False, compare=False)
    cell: int | None = None  # in a notebook: the cell (1-based, all cells counted); lines are the cell's
    confidence: Confidence = Confidence.CERTAIN
    evidence: tuple[Evidence, ...] = ()
    # What runs on a (simulated) GPU showed about it (verdict_store.Verdict.to_json), or None.
    verdict: dict | None = None

    def __post_init__(self) -> None:
        # A message is one line in every output (text, flake8, GitHub): source code quoted
        # into it (a call spread over lines) is joined with single spaces.
        self.message = _LINE_BREAKS.sub(" ", self.message)

    @property
    def shown_message(self) -> str:
        """The message as every output shows it: a possible finding says so, and a verdict
        of the project's tests (docs/verdicts.md) is said too."""
        notes = ["possible"] if self.confidence is Confidence.POSSIBLE else []
        verdict = self.verdict or {}
        if verdict.get("status") == "confirmed":
            notes = [verdict["headline"]]  # "confirmed by tests/x.py::t on a simulated GPU"
        elif verdict.get("status") == "ran clean" and notes:
            notes.append(verdict["headline"])
        return self.message + (f" ({'; '.join(notes)})" if notes else "")

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    @property
    def location(self) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fixable": self.fixable,
            "fix_applicability": self.fix.applicability.value if self.fix else None,
            "cell": self.cell,
            "confidence": self.confidence.value,
            "evidence": [step.to_json() for step in self.evidence],
            # only where the project's tests recorded one (docs/verdicts.md)
            **({"verdict": self.verdict} if self.verdict is not None else {}),
        }


# The code of a file that could not be checked, where a format has only findings to show it.
CHECK_ERROR_CODE = "TDL000"


@dataclass
class FileError:
    """A file that could not be checked; rendered as one line naming file and problem."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None
    cell: int | None = None

    @property
    def as_finding_message(self) -> str:
        """The error where a format shows only findings (flake8, GitLab, GitHub), under
        ``CHECK_ERROR_CODE``."""
        return f"{CHECK_ERROR_CODE} torchdev-lint could not check this file: {self.message}"

    def __str__(self) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        where = self.path if self.line is None else f"{self.path}:{cell}{self.line}:{self.column}"
        return f"{where}: error: {self.message}"
