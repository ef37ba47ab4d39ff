"""The language server, driven by a real LSP client (pygls's) over stdio in a subprocess:
diagnostics where the bug is, quick fixes and "fix all" that produce the fixed text, and the
project's pyproject.toml honoured.

The toy buffers have no CPU path, so their findings are possible since confidence tiers: the
server reads the tier from the file's settings, so each test's project asks for the preview
tier (`preview = true`)."""

import asyncio
import os
import sys

import pytest

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from conftest import ROOT  # noqa: E402

PREVIEW = "[tool.torchdev-lint]\npreview = true\n"
BUGGY = "import torch\n\nx = torch.zeros(3)\ny = x.cuda()\n"
FIXED = ('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
         "x = torch.zeros(3)\ny = x.to(device)\n")


def apply(text: str, edit: types.WorkspaceEdit) -> str:
    """What an editor does with a workspace edit: here, edits to one document."""
    (change,) = edit.document_changes
    lines = text.splitlines(keepends=True)

    def offset(position):  # the test texts are ASCII: UTF-16 units are characters
        return sum(len(line) for line in lines[: position.line]) + position.character

    for text_edit in sorted(change.edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(text_edit.range.start)] + text_edit.new_text + text[offset(text_edit.range.end):]
    return text


class Session:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.diagnostics: dict[str, asyncio.Queue] = {}

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.queue(params.uri).put_nowait(params.diagnostics)

    def queue(self, uri: str) -> asyncio.Queue:
        return self.diagnostics.setdefault(uri, asyncio.Queue())

    async def next_diagnostics(self, uri: str) -> list[types.Diagnostic]:
        return await asyncio.wait_for(self.queue(uri).get(), timeout=60)

    def open(self, path, text: str) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        return uri

    def change(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    async def actions(self, uri, range_, diagnostics=(), only=None) -> list[types.CodeAction]:
        return await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=range_,
            context=types.CodeActionContext(diagnostics=list(diagnostics), only=only)))


def in_server(tmp_path, scenario):
    """Run ``scenario(session)`` against ``torchdev-lint server`` started in ``tmp_path``."""

    async def main():
        client = LanguageClient("test-client", "1")
        session = Session(client)
        await client.start_io(sys.executable, "-m", "torchdev_lint", "server", cwd=str(tmp_path),
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            await client.initialize_async(types.InitializeParams(
                capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri()))
            client.initialized(types.InitializedParams())
            await scenario(session)
        finally:
            await asyncio.wait_for(client.shutdown_async(None), timeout=30)
            client.exit(None)
            await asyncio.wait_for(client.stop(), timeout=30)

    asyncio.run(main())


def test_diagnostic_quick_fix_and_clean_after_the_edit(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PREVIEW)

    async def scenario(session):
        uri = session.open(tmp_path / "train.py", BUGGY)
        (diagnostic,) = await session.next_diagnostics(uri)
        assert diagnostic.code == "TDL001" and diagnostic.source == "torchdev-lint"
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == (3, 4)
        assert (diagnostic.range.end.line, diagnostic.range.end.character) == (3, 12)
        assert diagnostic.code_description.href.endswith("/rules/TDL001.md")
        assert "`.cuda()`" in diagnostic.message

        actions = await session.actions(uri, diagnostic.range, [diagnostic])
        (action,) = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
        assert action.kind == types.CodeActionKind.QuickFix and action.is_preferred
        assert action.title == "TDL001: Use `.to(device)`"
        fixed = apply(BUGGY, action.edit)
        assert fixed == FIXED

        session.change(uri, 2, fixed)
        assert list(await session.next_diagnostics(uri)) == []

    in_server(tmp_path, scenario)


def test_unsafe_fix_is_labelled_and_fix_all_applies_the_safe_ones(tmp_path):
    text = ("import torch\n\ndevice = torch.device('cuda:1')\nx = torch.zeros(3).cuda()\n"
            "def load(p):\n    return torch.load(p)\n")
    (tmp_path / "pyproject.toml").write_text(PREVIEW)

    async def scenario(session):
        uri = session.open(tmp_path / "m.py", text)
        diagnostics = await session.next_diagnostics(uri)
        assert [d.code for d in diagnostics] == ["TDL002", "TDL001", "TDL004"]
        whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=6, character=0))
        quick = await session.actions(uri, diagnostics[1].range, [diagnostics[1]],
                                      only=[types.CodeActionKind.QuickFix])
        (unsafe,) = [a for a in quick if a.title.startswith("TDL001")]
        assert not unsafe.is_preferred and "unsafe" in unsafe.title
        assert "x = torch.zeros(3).to(device)\n" in apply(text, unsafe.edit)

        (fix_all,) = await session.actions(uri, whole, only=[types.CodeActionKind.SourceFixAll])
        assert fix_all.kind == "source.fixAll.torchdev-lint"
        fixed = apply(text, fix_all.edit)
        # TDL002's fix is safe: applied; TDL001's is unsafe: left for the user to choose.
        assert fixed.splitlines()[2:4] == [
            "device = torch.device('cuda:1' if torch.cuda.is_available() else 'cpu')",
            "x = torch.zeros(3).cuda()"]

    in_server(tmp_path, scenario)


def test_quick_fixes_one_at_a_time_are_as_safe_as_fix(tmp_path):
    """The first quick fix adds our default `device`; the next one reuses it, which is as
    safe as writing the default again: offered as safe, as `--fix` applies both."""
    text = "import torch\n\nx = torch.zeros(3)\ny = x.cuda()\nz = torch.ones(2).cuda()\n"
    (tmp_path / "pyproject.toml").write_text(PREVIEW)

    async def scenario(session):
        uri = session.open(tmp_path / "m.py", text)
        first = (await session.next_diagnostics(uri))[0]
        (action,) = await session.actions(uri, first.range, [first], only=[types.CodeActionKind.QuickFix])
        assert action.is_preferred and "unsafe" not in action.title
        once = apply(text, action.edit)
        session.change(uri, 2, once)
        (second,) = await session.next_diagnostics(uri)
        (action,) = await session.actions(uri, second.range, [second], only=[types.CodeActionKind.QuickFix])
        assert action.is_preferred and action.title == "TDL001: Use `.to(device)`"
        assert apply(once, action.edit).endswith("z = torch.ones(2).to(device)\n")

    in_server(tmp_path, scenario)


def test_fix_all_counts_unsafe_fixes_as_unsafe(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PREVIEW + "unsafe-fixes = true\n")
    text = "import torch\n\ndef load(p):\n    return torch.load(p)\n"

    async def scenario(session):
        uri = session.open(tmp_path / "m.py", text)
        assert [d.code for d in await session.next_diagnostics(uri)] == ["TDL004"]
        whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=4, character=0))
        (fix_all,) = await session.actions(uri, whole, only=[types.CodeActionKind.SourceFixAll])
        assert fix_all.title == "torchdev-lint: fix all (1 unsafe fix)"
        assert "map_location" in apply(text, fix_all.edit)

    in_server(tmp_path, scenario)


def test_the_files_pyproject_settings_apply(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PREVIEW + 'ignore = ["TDL004"]\n')
    text = "import torch\nstate = torch.load('a.pt')\nx = torch.zeros(2).cuda()\n"

    async def scenario(session):
        uri = session.open(tmp_path / "pkg" / "m.py", text)
        assert [d.code for d in await session.next_diagnostics(uri)] == ["TDL001"]

    (tmp_path / "pkg").mkdir()
    in_server(tmp_path, scenario)


def test_server_without_its_extra_says_what_to_install(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "pygls.py").write_text("raise ImportError('No module named pygls')\n")
    import subprocess

    for args in ([], ["--stdio"]):  # --stdio, which some editors pass, is accepted
        process = subprocess.run([sys.executable, "-m", "torchdev_lint", "server", *args], capture_output=True,
                                 text=True, env={**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"})
        # Not from PyPI, where torchdev-lint is not published: the extra's own packages.
        assert process.returncode == 2 and "the 'server' extra" in process.stderr
        assert "pip install 'pygls>=2,<3' lsprotocol" in process.stderr
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", "server", "--bogus"], capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.returncode == 2 and "unrecognized arguments: --bogus" in process.stderr
