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

import functools
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.devices import CUDA_OR_CPU, DEVICE_NAME, default_device_definition
from torchdev_lint.engine import FileResult, on_large_stack, parse
from torchdev_lint.finding import Applicability, Finding, FileError

MAX_PASSES = 10


@dataclass
class FixOutcome:
    source: str  # the new text (the old one when nothing was fixed)
    fixed: list[Finding]
    error: FileError | None = None
    # Findings whose fix was withheld, with why (said to the user, not an error).
    withheld: list[tuple[Finding, str]] = field(default_factory=list)


@functools.cache
def _edit_applier() -> type:
    """The transformer that applies edits keyed by original node (a class made on first use:
    the command line runs LibCST only once a file is parsed)."""

    class ApplyEdits(cst.CSTTransformer):
        def __init__(self, edits) -> None:
            super().__init__()
            self.edits: dict[int, list] = {}
            for node, edit in edits:
                self.edits.setdefault(id(node), []).append(edit)

        def on_leave(self, original_node, updated_node):
            for edit in self.edits.get(id(original_node), ()):
                updated_node = edit(updated_node)
            return updated_node

    return ApplyEdits


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (
        unsafe or finding.fix.applicability is Applicability.SAFE
    )


class _NoPlace(Exception):
    """The default device cannot be defined after torch is imported and before its first use."""


@on_large_stack
def fix_file(result: FileResult, unsafe: bool = False) -> FixOutcome:
    """One pass: the file's text with every applicable fix applied."""
    source = result.source
    chosen = [f for f in result.findings if applicable(f, unsafe)]
    withheld = []
    mode = result.context.fix_device if result.context is not None else CUDA_OR_CPU
    try:
        module = _apply(result.module, chosen, mode)
    except _NoPlace as why:
        withheld = [(f, str(why)) for f in chosen if f.fix.needs_default_device]
        chosen = [f for f in chosen if not f.fix.needs_default_device]
        module = _apply(result.module, chosen, mode)
    if not chosen:
        return FixOutcome(source, [], withheld=withheld)
    new_source = module.code
    reparsed = parse(result.path, new_source)
    if isinstance(reparsed, FileError):
        return FixOutcome(
            source, [], FileError(result.path, f"fix skipped: it would not parse ({reparsed.message})")
        )
    return FixOutcome(new_source, chosen, withheld=withheld)


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
            return FixOutcome(current.source, fixed, outcome.error, outcome.withheld)
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
    module = module.visit(_edit_applier()(edits))
    device = any(f.fix.needs_default_device for f in chosen)
    if device or any(f.fix.needs_torch for f in chosen):
        module = _add_definitions(module, device, mode)
    return module


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _torch_import(module: cst.Module) -> tuple[str, int] | None:
    """The name a module-level ``import torch`` binds, and the index of that statement
    (the first one, wherever it is: imports are not always at the top)."""
    for index, statement in enumerate(module.body):
        if _is_import(statement):
            for imported in statement.body:
                if isinstance(imported, cst.Import):
                    for alias in imported.names:
                        name, bound = alias.evaluated_name, alias.evaluated_alias
                        if name == "torch" or (name.startswith("torch.") and bound is None):
                            return bound or "torch", index
    return None


def reads_at_import(statement: cst.CSTNode, name: str) -> bool:
    """Whether executing this module-level statement reads ``name``: function and lambda
    bodies run later, but decorators, default values and class bodies run now."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if found:
            return False
        if isinstance(node, cst.FunctionDef):
            for part in [*node.decorators, *_defaults(node.params)]:
                tree.walk(part, enter)
            return False
        if isinstance(node, cst.Lambda):
            for part in _defaults(node.params):
                tree.walk(part, enter)
            return False
        if isinstance(node, cst.Attribute):
            tree.walk(node.value, enter)  # `x.device` reads x, not `device`
            return False
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return False  # `from torch import device as D` names it, reads nothing
        if isinstance(node, cst.Name) and node.value == name:
            found = True
        return True

    tree.walk(statement, enter)
    return found


def _defaults(params: cst.Parameters) -> list[cst.CSTNode]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return [p.default for p in every if p.default is not None]


def _add_definitions(module: cst.Module, device: bool, mode: str) -> cst.Module:
    """``import torch`` when the module lacks it (after the leading imports), and
    ``device = torch.device(...)`` when asked for: after the statement that imports torch,
    and before anything that runs at import time reads ``device``."""
    body = list(module.body)
    position = 0
    for index, statement in enumerate(body):
        if _is_import(statement):
            position = index + 1
        elif index == 0 and _is_docstring(statement):
            position = 1
        elif position:
            break
    found = _torch_import(module)
    new = []
    if found is None:
        torch_name = "torch"
        new.append(cst.parse_statement("import torch", config=module.config_for_parsing))
    else:
        torch_name, index = found
        position = max(position, index + 1)
    if device:
        used = next((s for s in body[:position] if reads_at_import(s, DEVICE_NAME)), None)
        if used is not None:
            line = module.code_for_node(used).strip().splitlines()[0]
            raise _NoPlace(f"`{DEVICE_NAME}` is used (`{line}`) before `import {torch_name}`, "
                           f"so no place can define it")
        new.append(cst.parse_statement(default_device_definition(torch_name, mode),
                                       config=module.config_for_parsing))
    body[position:position] = new
    return module.with_changes(body=body)
