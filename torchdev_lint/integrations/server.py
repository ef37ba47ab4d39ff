"""``torchdev-lint server``: a language server over stdio, built on pygls and lsprotocol.

It adapts what the command line does to an open editor buffer: the settings of the
``pyproject.toml`` that governs the file, the per-file entry point, and the fixer. It
publishes diagnostics when a document is opened or saved, and shortly after the typing
stops; it offers each fix as a quick fix (safe ones preferred, unsafe ones labelled) and
all safe fixes at once as a ``source.fixAll`` action.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from torchdev_lint import __version__, api, config
from torchdev_lint.engine import FileResult
from torchdev_lint.finding import Applicability, Confidence, Finding
from torchdev_lint.fixer import fix_file, fix_to_fixpoint
from torchdev_lint.output.sarif import help_uri
from torchdev_lint.rule import Rule

DEBOUNCE = 0.3  # seconds of quiet after an edit before the buffer is checked again
_CHECKOUT_DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.torchdev-lint"


@dataclass
class _Checked:
    version: int | None
    result: FileResult
    settings: config.Settings
    relint: Callable[[str], FileResult]


class TorchDevLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("torchdev-lint", __version__)
        self.linter = api.Linter()
        self.checked: dict[str, _Checked] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}

    def check(self, uri: str) -> _Checked | None:
        """Check the buffer as it is now (once per version), with its file's settings and its
        package's project index, as the command line would check the file."""
        document = self.workspace.get_text_document(uri)
        known = self.checked.get(uri)
        if known is not None and known.version == document.version:
            return known
        path = Path(document.path)
        try:
            settings = self.linter.settings_for(document.path)
        except config.UsageError as error:
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, str(error)))
            return None
        relint = self.linter.relint(document.path)
        if config.excluded(settings, path, defaults=False):
            result = FileResult(document.path, document.source)  # excluded: nothing to say
        else:
            result = relint(document.source)
            # The verdicts of the project's tests (docs/verdicts.md), while the buffer is the
            # text they ran: an edit forgets them, as a changed file does.
            self.linter.apply_verdicts(result, document.source)
        known = self.checked[uri] = _Checked(document.version, result, settings, relint)
        return known

    def publish(self, uri: str) -> None:
        self.pending.pop(uri, None)
        known = self.check(uri)
        if known is None:
            return
        document = self.workspace.get_text_document(uri)
        diagnostics = [_diagnostic(document, f) for f in known.result.findings]
        error = known.result.error
        if error is not None:
            line, column = (error.line or 1) - 1, (error.column or 1) - 1
            diagnostics.append(types.Diagnostic(
                range=document.range_to_client_units(ServerTextRange(
                    ServerTextPosition(line, column), ServerTextPosition(line, column + 1))),
                message=f"torchdev-lint could not check this file: {error.message}",
                severity=types.DiagnosticSeverity.Error, source="torchdev-lint"))
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=document.version, diagnostics=diagnostics))

    def schedule(self, uri: str, delay: float) -> None:
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self.pending[uri] = asyncio.get_running_loop().call_later(delay, self.publish, uri)


def _range(document: TextDocument, finding: Finding) -> types.Range:
    return document.range_to_client_units(ServerTextRange(
        ServerTextPosition(finding.line - 1, finding.column - 1),
        ServerTextPosition(finding.end_line - 1, finding.end_column - 1)))


def rule_page(code: str) -> str:
    """The rule's documentation page: under the package's published documentation when it
    declares one (as SARIF's helpUri does), else the page in this source checkout."""
    return help_uri(code) or (_CHECKOUT_DOCS / f"{code}.md").as_uri()


def _diagnostic(document: TextDocument, finding: Finding) -> types.Diagnostic:
    """A possible finding (shown when the file's settings ask for the preview tier) is a
    hint, as the CLI marks it; its evidence steps are related locations."""
    confirmed = (finding.verdict or {}).get("status") == "confirmed"  # by the project's tests
    possible = finding.confidence is Confidence.POSSIBLE and not confirmed
    return types.Diagnostic(
        range=_range(document, finding),
        message=finding.shown_message,
        severity=types.DiagnosticSeverity.Information if possible else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=rule_page(finding.code)),
        source="torchdev-lint",
        related_information=[
            types.DiagnosticRelatedInformation(
                location=types.Location(uri=document.uri, range=types.Range(
                    types.Position(step.line - 1, step.column - 1), types.Position(step.line - 1, step.column - 1))),
                message=step.message)
            for step in finding.evidence if step.path == finding.path
        ] or None,
    )


def _edit(document: TextDocument, new: str) -> types.WorkspaceEdit:
    """The buffer's text becoming ``new``, as one edit of the span that differs."""
    old = document.source
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    edit = types.TextEdit(
        range=types.Range(document.client_position_at_offset(start),
                          document.client_position_at_offset(len(old) - end)),
        new_text=new[start:len(new) - end],
    )
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=document.version)
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=[edit])])


server = TorchDevLintServer()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TorchDevLintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TorchDevLintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TorchDevLintServer, params: types.DidSaveTextDocumentParams) -> None:
    # Settings or another module's classes may have changed too: check every buffer again.
    ls.linter.forget()
    ls.checked.clear()
    for uri in list(ls.workspace.text_documents):
        ls.schedule(uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TorchDevLintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    waiting = ls.pending.pop(uri, None)
    if waiting is not None:
        waiting.cancel()
    ls.checked.pop(uri, None)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]),
)
def code_action(ls: TorchDevLintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    known = ls.check(uri)
    if known is None:
        return []
    document = ls.workspace.get_text_document(uri)
    only = params.context.only

    def wanted(kind: str) -> bool:  # `only: ["source.fixAll"]` asks for ours too
        return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

    actions = []
    if wanted(types.CodeActionKind.QuickFix):
        for finding in known.result.findings:
            if finding.fix is not None and _overlaps(_range(document, finding), params.range):
                actions.append(_quick_fix(document, known.result, finding))
    if wanted(FIX_ALL) and any(f.fix is not None for f in known.result.findings):
        outcome = fix_to_fixpoint(known.result, known.relint, unsafe=known.settings.unsafe_fixes)
        if outcome.error is None and outcome.fixed:
            actions.append(types.CodeAction(
                title=f"torchdev-lint: fix all ({_count_fixes(outcome.fixed)})",
                kind=FIX_ALL, edit=_edit(document, outcome.source)))
    return [action for action in actions if action is not None]


def _count_fixes(fixed: list[Finding]) -> str:
    """``2 safe fixes``, ``1 safe fix, 1 unsafe fix``: what fix-all applies, as it is."""
    unsafe = sum(f.fix.applicability is not Applicability.SAFE for f in fixed)
    counts = [(len(fixed) - unsafe, "safe"), (unsafe, "unsafe")]
    return ", ".join(f"{n} {kind} fix{'es' if n != 1 else ''}" for n, kind in counts if n)


def _quick_fix(document: TextDocument, result: FileResult, finding: Finding) -> types.CodeAction | None:
    outcome = fix_file(replace(result, findings=[finding]), unsafe=True)
    if outcome.error is not None or not outcome.fixed:
        return None
    safe = finding.fix.applicability is Applicability.SAFE
    what = Rule.registry[finding.code].fix_title or "apply the fix"
    title = f"{finding.code}: {what}" + ("" if safe else " (unsafe fix: review the change)")
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[_diagnostic(document, finding)],
        is_preferred=safe,
        edit=_edit(document, outcome.source),
    )


def _overlaps(a: types.Range, b: types.Range) -> bool:
    key = lambda p: (p.line, p.character)  # noqa: E731
    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def main() -> int:
    server.start_io()
    return 0
