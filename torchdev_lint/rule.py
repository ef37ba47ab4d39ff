"""The rule base class: one small class per rule carries its code, name, message,
documentation and the examples that both test and document it (Fixit's idea)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from torchdev_lint.finding import Fix

if TYPE_CHECKING:
    from torchdev_lint.analysis.context import FileContext


@dataclass(frozen=True)
class Valid:
    """Code the rule must not flag, in a file at ``path`` (a test's example is in a test file:
    pytest collects tests from those only)."""

    code: str
    path: str = "example.py"


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag at (line, column), 1-based; ``fixed`` is the code after ``--fix``
    (with ``--unsafe-fixes`` when ``unsafe``), or None when no fix is offered; ``possible``
    when the evidence is incomplete, so only ``--preview`` shows it (every example of a
    preview rule is)."""

    code: str
    line: int
    column: int
    fixed: str | None = None
    unsafe: bool = False
    possible: bool = False


class Rule:
    """A visitor over one file's tree. The engine calls ``visit_<Node>``/``leave_<Node>``
    methods during its single traversal, with ``self.ctx`` holding the shared analyses."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[str | None] = None
    opt_in: ClassVar[bool] = False  # enabled only when its code is selected by name
    # Every finding of a preview rule is POSSIBLE (shown with --preview): its first-look
    # precision (benchmarks/precision/) has not earned the default output.
    preview: ClassVar[bool] = False
    # The kinds of place its findings can be at (`analysis/sites.py`): a file holding none is
    # not parsed for it. None: anywhere its text prefilter (`wants`) lets through.
    sites: ClassVar[frozenset[str] | None] = None
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    registry: ClassVar[dict[str, type[Rule]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.code in Rule.registry:
            raise ValueError(f"duplicate rule code {cls.code}")
        Rule.registry[cls.code] = cls

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    @classmethod
    def wants(cls, source: str) -> bool:
        """Cheap text pre-check: False when the file cannot contain a finding of this rule."""
        return True

    @classmethod
    def may_be_certain(cls, index, path: str, found: frozenset[str]) -> bool:
        """Whether a finding of this rule in ``path``, whose sites are ``found``, could be
        certain, as the project ``index`` reads it: where none could, the default tier does
        not look (it would show none)."""
        return True

    @classmethod
    def documentation(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    def report(self, node: cst.CSTNode, message: str | None = None, fix: Fix | None = None, *,
               evidence=(), certain: bool = True, set_aside: bool = False) -> None:
        """``evidence``: (node, what it shows) steps saying why the finding holds;
        ``certain=False`` when part of that path is out of the analysis's sight;
        ``set_aside`` when only the code's unknown intent (no machine without CUDA shown)
        keeps it possible."""
        self.ctx.report(self, node, message or self.message, fix, evidence, certain and not self.preview,
                        set_aside)

    def end_of_file(self) -> None:
        """Called once after the traversal, for rules that decide with the whole file seen."""
