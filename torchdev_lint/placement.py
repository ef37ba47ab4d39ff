"""Where the names a fix introduces are bound: the module-level default ``device`` and
``import torch``.

A definition the fixer adds goes after the import that makes it valid and before its
first use; in a file whose imports are not all at the top, code that runs at import time
may come before ``import torch``. A fix that would read ``device`` or ``torch`` there has no
valid place: it is withheld when the file is checked (``withhold_unplaceable``), so what is
marked fixable is what ``--fix`` really changes, and the fixer adds definitions with the
same rule (``add_definitions``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.devices import DEVICE_NAME, default_device_definition, reads
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.finding import Applicability, Finding


@functools.cache
def edit_applier() -> type:
    """The transformer that applies fixes' edits, each keyed by the original node it
    rewrites (a class made on first use: the command line runs LibCST only once a file is
    parsed)."""

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


class NoPlace(Exception):
    """The default device cannot be defined after torch is imported and before its first use."""


def is_import(statement: cst.CSTNode) -> bool:
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


@dataclass(frozen=True)
class Place:
    torch_name: str  # the name torch is bound to (``torch`` when it must be imported)
    imported: bool  # a module-level ``import torch`` exists (else the fixer adds one)
    position: int  # the index in the module body where definitions go


def place(module: cst.Module) -> Place:
    """After the leading imports (and docstring), and after the first module-level
    ``import torch`` wherever it is."""
    position = 0
    for index, statement in enumerate(module.body):
        if is_import(statement):
            position = index + 1
        elif index == 0 and _is_docstring(statement):
            position = 1
        elif position:
            break
    found = _torch_import(module)
    if found is None:
        return Place("torch", False, position)
    name, index = found
    return Place(name, True, max(position, index + 1))


def _torch_import(module: cst.Module) -> tuple[str, int] | None:
    """The name a module-level ``import torch`` binds, and the index of that statement
    (the first one, wherever it is: imports are not always at the top)."""
    for index, statement in enumerate(module.body):
        if is_import(statement):
            for imported in statement.body:
                if isinstance(imported, cst.Import):
                    for alias in imported.names:
                        name, bound = alias.evaluated_name, alias.evaluated_alias
                        if name == "torch" or (name.startswith("torch.") and bound is None):
                            return bound or "torch", index
    return None


def _early(module: cst.Module, where: Place) -> list[cst.CSTNode]:
    """The statements before the place that run code (not imports, not the docstring)."""
    return [s for s in module.body[:where.position] if not is_import(s) and not _is_docstring(s)]


def _introduces(statement: cst.CSTNode, edited: cst.CSTNode, where: Place, device: bool) -> bool:
    """The edited statement reads, at import time, a name that is bound only later:
    ``torch`` (where it did not before), or the default ``device``."""
    if where.imported and reads(edited, where.torch_name) and not reads(
        statement, where.torch_name
    ):
        return True
    return device and reads(edited, DEVICE_NAME)


def withhold_unplaceable(module: cst.Module, findings: list[Finding]) -> None:
    """Drop the fixes that would read ``torch`` or the default ``device`` before the place
    where they are bound, saying why in the finding's message (no ``[*]``, nothing for
    ``--fix`` to try). Cheap in the usual file, whose imports come first: nothing runs
    before the place."""
    where = place(module)
    early = _early(module, where)
    fixed = [f for f in findings if f.fix is not None]
    if not where.imported and fixed and _imports_torch_inside(module):
        _unsafe_where_torch_is_added(fixed)
    if not early or not fixed:
        return

    def breaks(chosen: list[Finding]) -> bool:
        applier = edit_applier()([edit for f in chosen for edit in f.fix.edits])
        device = any(f.fix.needs_default_device for f in chosen)
        return any(_introduces(s, s.visit(applier), where, device) for s in early)

    if not breaks(fixed):  # one look at all of them first: the answer is usually no
        return
    for finding in fixed:
        if breaks([finding]):
            name = DEVICE_NAME if finding.fix.needs_default_device else where.torch_name
            finding.fix = None
            finding.message += f" (no automatic fix here: it would read `{name}` before torch is imported)"


def _imports_torch_inside(module: cst.Module) -> bool:
    """The module imports torch only inside a block or a function (``if
    is_torch_available(): import torch``, ``try: import torch``): it is written to load
    where torch is missing."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.Import):
            found = found or any((dotted_name(a.name) or "").split(".")[0] == "torch" for a in node.names)
        elif isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
            found = found or (dotted_name(node.module) or "").split(".")[0] == "torch"
        return not found

    for statement in module.body:
        if is_import(statement):
            top = found
            tree.walk(statement, enter)
            if found and not top:
                return False  # `from torch import nn` at the top: torch is a dependency
        else:
            tree.walk(statement, enter)
    return found


def _unsafe_where_torch_is_added(fixed: list[Finding]) -> None:
    """A fix that adds ``import torch`` (or the default ``device``, built when the module
    loads) at the top of such a module would make it fail to load without torch: not safe."""
    for finding in fixed:
        if finding.fix.needs_torch or finding.fix.needs_default_device:
            finding.fix.applicability = Applicability.UNSAFE


def add_definitions(module: cst.Module, device: bool, mode: str) -> cst.Module:
    """``import torch`` when the module lacks it (after the leading imports), and
    ``device = torch.device(...)`` when asked for: after the statement that imports torch,
    and before anything that runs at import time reads ``device``."""
    where = place(module)
    new = []
    if not where.imported:
        new.append(cst.parse_statement("import torch", config=module.config_for_parsing))
    if device:
        if any(reads(s, DEVICE_NAME) for s in _early(module, where)):
            raise NoPlace(f"`{DEVICE_NAME}` is used before `import {where.torch_name}`")
        new.append(cst.parse_statement(default_device_definition(where.torch_name, mode),
                                       config=module.config_for_parsing))
    body = list(module.body)
    body[where.position:where.position] = new
    return module.with_changes(body=body)
