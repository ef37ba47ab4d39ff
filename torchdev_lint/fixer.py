"""Apply the fixes of one file's findings to its tree, and repeat until nothing changes.

Each fix is a set of node edits keyed by the original node; an edit receives the node as
already rewritten by edits inside it, so fixes of nested findings compose (a discarded,
unguarded ``x.cuda()`` becomes ``x = x.to(device)``). Definitions the edits rely on (a
module-level default device, ``import torch``) are added once, after the import that makes
them valid and before their first use; a fix that has no such place is not applied.

One pass can uncover or enable another fix, so ``fix_to_fixpoint`` applies passes until the
text stops changing (as ruff does), up to ``MAX_PASSES``: every way in (the command line, the
codemod, pre-commit) uses it, so one run leaves nothing that a second run would fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from torchdev_lint import placement
from torchdev_lint.analysis.devices import CUDA_OR_CPU
from torchdev_lint.engine import FileResult, on_large_stack, parse
from torchdev_lint.finding import Applicability, Finding, FileError

MAX_PASSES = 10


@dataclass
class FixOutcome:
    source: str  # the new text (the old one when nothing was fixed)
    fixed: list[Finding]
    error: FileError | None = None


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (
        unsafe or finding.fix.applicability is Applicability.SAFE
    )


@on_large_stack
def fix_file(result: FileResult, unsafe: bool = False) -> FixOutcome:
    """One pass: the file's text with every applicable fix applied."""
    source = result.source
    chosen = [f for f in result.findings if applicable(f, unsafe)]
    mode = result.context.fix_device if result.context is not None else CUDA_OR_CPU
    try:
        module = _apply(result.module, chosen, mode)
    except placement.NoPlace:
        # The check withholds these fixes already (placement.withhold_unplaceable); should
        # a combination of fixes still leave no place, the file is not broken for them.
        chosen = [f for f in chosen if not f.fix.needs_default_device]
        module = _apply(result.module, chosen, mode)
    if not chosen:
        return FixOutcome(source, [])
    try:
        new_source = module.code
    except RecursionError:  # checked, but writing the tree back recurses deeper than this Python allows
        return FixOutcome(source, [], FileError(result.path, "fix skipped: file too deeply nested to write back"))
    reparsed = parse(result.path, new_source)
    if isinstance(reparsed, FileError):
        return FixOutcome(
            source, [], FileError(result.path, f"fix skipped: it would not parse ({reparsed.message})")
        )
    return FixOutcome(new_source, chosen)


def fix_to_fixpoint(
    result: FileResult, relint: Callable[[str], FileResult], unsafe: bool = False,
    max_passes: int = MAX_PASSES,
) -> FixOutcome:
    """Fix, check the new text again (``relint``), and repeat until no fix changes it.
    Stopping at ``max_passes`` keeps what was fixed and says so."""
    fixed: list[Finding] = []
    current = result
    for _ in range(max_passes):
        outcome = fix_file(current, unsafe)
        if outcome.error is not None or outcome.source == current.source:
            return FixOutcome(current.source, fixed, outcome.error)
        fixed.extend(outcome.fixed)
        current = relint(outcome.source)
        if current.error is not None:  # pragma: no cover - fix_file reparsed it already
            return FixOutcome(outcome.source, fixed, current.error)
    return FixOutcome(current.source, fixed, FileError(
        result.path, f"fixes were still changing the file after {max_passes} passes; stopped there "
        "(what was fixed is kept: please report this file)"))


def _apply(module: cst.Module, chosen: list[Finding], mode: str) -> cst.Module:
    if not chosen:
        return module
    edits = [edit for finding in chosen for edit in finding.fix.edits]
    module = module.visit(placement.edit_applier()(edits))
    device = any(f.fix.needs_default_device for f in chosen)
    if device or any(f.fix.needs_torch for f in chosen):
        module = placement.add_definitions(module, device, mode)
    return module
