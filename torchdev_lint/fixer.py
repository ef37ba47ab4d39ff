"""Apply the fixes of one file's findings to its tree, as one transformation.

Each fix is a set of node edits keyed by the original node; an edit receives the node as
already rewritten by edits inside it, so fixes of nested findings compose (a discarded,
unguarded ``x.cuda()`` becomes ``x = x.to(device)``). Definitions the edits rely on (a
module-level default device, ``import torch``) are added once, after the imports.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchdev_lint.analysis.devices import default_device_definition
from torchdev_lint.engine import FileResult, parse
from torchdev_lint.finding import Applicability, Finding, FileError


@dataclass
class FixOutcome:
    source: str  # the new text (the old one when nothing was fixed)
    fixed: list[Finding]
    error: FileError | None = None


class _ApplyEdits(cst.CSTTransformer):
    def __init__(self, edits) -> None:
        super().__init__()
        self.edits: dict[int, list] = {}
        for node, edit in edits:
            self.edits.setdefault(id(node), []).append(edit)

    def on_leave(self, original_node, updated_node):
        for edit in self.edits.get(id(original_node), ()):
            updated_node = edit(updated_node)
        return updated_node


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (
        unsafe or finding.fix.applicability is Applicability.SAFE
    )


def fix_file(result: FileResult, unsafe: bool = False) -> FixOutcome:
    """The file's text with every applicable fix applied."""
    source = result.source
    chosen = [f for f in result.findings if applicable(f, unsafe)]
    if not chosen:
        return FixOutcome(source, [])
    edits = [edit for finding in chosen for edit in finding.fix.edits]
    module = result.module.visit(_ApplyEdits(edits))
    device = any(f.fix.needs_default_device for f in chosen)
    if device or any(f.fix.needs_torch for f in chosen):
        module = _add_definitions(module, device)
    new_source = module.code
    reparsed = parse(result.path, new_source)
    if isinstance(reparsed, FileError):
        return FixOutcome(
            source, [], FileError(result.path, f"fix skipped: it would not parse ({reparsed.message})")
        )
    return FixOutcome(new_source, chosen)


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


def _torch_imported_as(module: cst.Module) -> str | None:
    """The name ``import torch`` binds at module level, if any."""
    for statement in module.body:
        if _is_import(statement):
            for imported in statement.body:
                if isinstance(imported, cst.Import):
                    for alias in imported.names:
                        name, bound = alias.evaluated_name, alias.evaluated_alias
                        if name == "torch" or (name.startswith("torch.") and bound is None):
                            return bound or "torch"
    return None


def _add_definitions(module: cst.Module, device: bool) -> cst.Module:
    """After the leading imports: ``import torch`` when the module lacks it, and
    ``device = torch.device(...)`` when ``device`` is asked for."""
    body = list(module.body)
    position = 0
    for index, statement in enumerate(body):
        if _is_import(statement):
            position = index + 1
        elif index == 0 and _is_docstring(statement):
            position = 1
        elif position:
            break
    torch_name = _torch_imported_as(module)
    new = []
    if torch_name is None:
        torch_name = "torch"
        new.append(cst.parse_statement("import torch", config=module.config_for_parsing))
    if device:
        new.append(cst.parse_statement(default_device_definition(torch_name),
                                       config=module.config_for_parsing))
    body[position:position] = new
    return module.with_changes(body=body)
