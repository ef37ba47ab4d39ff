"""Every way in gives one answer. A project whose findings need the project index (a module
class derives from a base class in another file) and whose pyproject.toml ignores a code and
a code per file: the command line, flake8, the language server (a real LSP client over
stdio), the Python API and the LibCST codemod report the same findings and make the same
fixes. A file too complex to check is one TDL000 everywhere, never findings inside it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402

from test_server import in_server  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHDEV_LINT_DAEMON": "0"}

PYPROJECT = """\
[tool.torchdev-lint]
preview = true
ignore = ["TDL009"]
per-file-ignores = { "pkg/legacy.py" = ["TDL001"] }
"""
# flake8 keeps its own selection (docs/integrations.md): the same settings, flake8's way.
FLAKE8 = ["--select", "TDL", "--tdl-preview", "--extend-ignore", "TDL009",
          "--per-file-ignores", "pkg/legacy.py:TDL001"]

BASE = """\
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
"""
MODEL = """\
import torch

from pkg.base import Base


class Model(Base):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(3)
        self.heads = [torch.nn.Linear(3, 3) for _ in range(2)]

    def forward(self, x):
        noise = torch.zeros(3)
        return self.heads[0](x * self.scale + noise)


def run(batch):
    model = Model().cuda()
    out = model(batch.cuda())
    return out.detach().numpy()
"""
LEGACY = """\
import torch

x = torch.zeros(2)
x.cuda()
y = torch.ones(2).to("cuda")
"""
# More adjacent string literals than LibCST parses (limits.py), and a bug after them.
GENERATED = "import torch\ntable = (" + " ".join(['"a"'] * 3100) + ")\nx = torch.zeros(1).cuda()\n"

EXPECTED = [
    ("pkg/generated.py", 2, 10, "TDL000"),
    ("pkg/legacy.py", 4, 1, "TDL003"),
    ("pkg/legacy.py", 5, 22, "TDL002"),
    ("pkg/model.py", 9, 9, "TDL006"),  # these three need Base from pkg/base.py
    ("pkg/model.py", 10, 9, "TDL007"),
    ("pkg/model.py", 13, 17, "TDL008"),
    ("pkg/model.py", 18, 13, "TDL001"),
    ("pkg/model.py", 19, 17, "TDL001"),
]
CHECKED = ["pkg/generated.py", "pkg/legacy.py", "pkg/model.py"]


def make_project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    for name, text in {"__init__": "", "base": BASE, "model": MODEL, "legacy": LEGACY,
                       "generated": GENERATED}.items():
        (root / "pkg" / f"{name}.py").write_text(text)
    return root


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "project")


def tool(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchdev_lint", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, env=ENV, timeout=300)


def test_cli_json_and_flake8_agree(project):
    process = tool("--format", "json", ".", cwd=project)
    assert process.returncode == 2, process.stderr
    found = sorted((f["path"], f["line"], f["column"], f["code"]) for f in json.loads(process.stdout))
    assert "pkg/generated.py:2:10: error: too complex to check" in process.stderr
    assert found == [row for row in EXPECTED if row[3] != "TDL000"]

    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", *FLAKE8, "."], cwd=project,
                            capture_output=True, text=True, env=ENV, timeout=300)
    assert flake8.returncode == 1, flake8.stderr
    rows = []
    for line in flake8.stdout.splitlines():
        path, row, column, rest = line.split(":", 3)
        rows.append((os.path.normpath(path), int(row), int(column), rest.split()[0]))
    assert sorted(rows) == EXPECTED


def test_the_api_agrees_with_the_cli(project, monkeypatch):
    from torchdev_lint import api

    monkeypatch.chdir(project)
    findings, errors = api.check_paths(["."])
    assert sorted((f.path, f.line, f.column, f.code) for f in findings) == [
        row for row in EXPECTED if row[3] != "TDL000"]
    assert [(e.path, e.line) for e in errors] == [("pkg/generated.py", 2)]
    # One file's text, as an editor holds it: its package's index and its settings apply.
    assert [(f.line, f.code) for f in api.check_source(MODEL, str(project / "pkg" / "model.py"))] == [
        (row[1], row[3]) for row in EXPECTED if row[0] == "pkg/model.py"]
    assert api.check_source(LEGACY, str(project / "pkg" / "legacy.py"), preview=False) == []


def test_the_language_server_agrees_and_fixes_as_fix_does(project, tmp_path):
    fixed = make_project(tmp_path / "fixed")
    assert tool("--fix", ".", cwd=fixed).returncode == 2  # the complex file stays unchecked
    published, fixes = {}, {}

    async def scenario(session):
        for name in CHECKED:
            uri = session.open(project / name, (project / name).read_text())
            diagnostics = await session.next_diagnostics(uri)
            published[name] = diagnostics
            everything = types.Range(types.Position(0, 0), types.Position(10_000, 0))
            actions = await session.actions(uri, everything, only=[types.CodeActionKind.SourceFixAll])
            fixes[name] = actions

    in_server(project, scenario)
    from torchdev_lint import api

    for name in CHECKED[1:]:  # the API fixes as --fix does (the complex file: ValueError)
        assert api.fix_source((project / name).read_text(), str(project / name)) == (fixed / name).read_text()
    with pytest.raises(ValueError, match="too complex to check"):
        api.fix_source(GENERATED, str(project / "pkg" / "generated.py"))
    rows = sorted(
        (name, d.range.start.line + 1, d.range.start.character + 1, d.code or "TDL000")
        for name, diagnostics in published.items() for d in diagnostics)
    assert rows == EXPECTED
    assert published["pkg/generated.py"][0].message.startswith("torchdev-lint could not check this file")
    for name in CHECKED:
        original = (project / name).read_text()
        after = (fixed / name).read_text()
        if after == original:
            assert not fixes[name]
            continue
        (action,) = fixes[name]
        (change,) = action.edit.document_changes
        assert _apply(original, change.edits) == after


def _apply(text: str, edits) -> str:
    lines = text.splitlines(keepends=True)

    def offset(position):
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def test_the_codemod_fixes_what_fix_fixes(tmp_path):
    """(pkg/generated.py is left out: LibCST's own command fails to parse it before any
    codemod runs.)"""
    by_cli, by_codemod = make_project(tmp_path / "cli"), make_project(tmp_path / "codemod")
    tool("--fix", ".", cwd=by_cli)
    process = subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format", "--hide-progress",
         "torchdev_lint.codemod.FixDevicePlacement", "pkg/model.py", "pkg/legacy.py"],
        cwd=by_codemod, capture_output=True, text=True, env=ENV, timeout=300)
    assert process.returncode == 0, process.stderr
    assert (by_cli / "pkg" / "model.py").read_text() != MODEL  # there was something to fix
    for name in CHECKED:
        assert (by_codemod / name).read_text() == (by_cli / name).read_text(), name
    # The configuration held: the preview tier's fixes were made (`preview = true`), and
    # TDL001's was not in pkg/legacy.py (per-file-ignores).
    legacy = (by_codemod / "pkg" / "legacy.py").read_text()
    assert "x.cuda()" in legacy and 'to("cuda")' not in legacy
