"""The project index keeps to the parser's budget (issue 28, item 4): naming one file costs
that file, not the generated module beside it. Work is counted (which texts the stdlib
parser and the depth scan see), never timed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchdev_lint import cache, cli, limits, runner
from torchdev_lint.analysis import project_index

BAD = """
import torch
from .messages_pb2 import Request

model = torch.nn.Linear(2, 2)
model.cuda()
"""


def generated(megabytes: float) -> str:
    """A protobuf-like generated module of about ``megabytes``."""
    line = "FIELD_{n} = _descriptor.FieldDescriptor(name='field_{n}', index={n}, number={n}, type=9)\n"
    count = int(megabytes * 1e6 / len(line.format(n=10_000)))
    return "from google.protobuf import descriptor as _descriptor\n" + "".join(line.format(n=n) for n in range(count))


def deep() -> str:
    """Small, but an expression past the parser's depth budget."""
    return "x = " + " + ".join(["a"] * (limits.MAX_CHAIN + 50)) + "\n"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "bad.py").write_text(textwrap.dedent(BAD))
    (tmp_path / "src" / "messages_pb2.py").write_text(generated(5))
    (tmp_path / "src" / "deep.py").write_text(deep())
    (tmp_path / "src" / "helpers.py").write_text("import torch\n\ndef ones():\n    return torch.ones(2)\n")
    (tmp_path / "good.py").write_text("import torch\n\nprint(torch.ones(2))\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def seen(monkeypatch) -> dict[str, list[int]]:
    """The sizes of the texts the index's parser and the depth scan were handed."""
    found: dict[str, list[int]] = {"parse": [], "measure": []}
    parse, measure, by_statements = project_index.ast.parse, limits._measure, limits._measure_statements

    def counted_parse(source, *args, **kwargs):
        found["parse"].append(len(source))
        return parse(source, *args, **kwargs)

    def counted_measure(source):
        found["measure"].append(len(source))
        return measure(source)

    def counted_by_statements(source, lines):
        found["measure"].append(len(source))
        return by_statements(source, lines)

    monkeypatch.setattr(project_index.ast, "parse", counted_parse)
    monkeypatch.setattr(limits, "_measure", counted_measure)
    monkeypatch.setattr(limits, "_measure_statements", counted_by_statements)
    monkeypatch.setattr(limits, "_MEASURED", {})
    return found


def findings(argv: list[str], capsys) -> list[tuple[str, str]]:
    cli.main(["--format", "json", "--isolated", "--preview", "-j", "1", *argv])
    data = json.loads(capsys.readouterr().out)
    return sorted((Path(f["path"]).name, f["code"]) for f in (data if isinstance(data, list) else data["findings"]))


@pytest.mark.parametrize("cached", [False, True])
def test_a_generated_sibling_is_never_parsed(tree, seen, capsys, cached):
    argv = ["--cache-dir", str(tree / "cache")] if cached else ["--no-cache"]
    assert ("bad.py", "TDL001") in findings([*argv, "src/bad.py", "good.py"], capsys)
    big = (tree / "src" / "messages_pb2.py").stat().st_size
    assert big > 4e6
    assert seen["parse"] and max(seen["parse"]) < limits.MAX_INDEX_BYTES  # the index read the rest
    assert max(seen["measure"]) < limits.MAX_INDEX_BYTES  # nor scanned for depth


def test_a_generated_sibling_is_never_read(tree, monkeypatch):
    read = []
    real = project_index.regular_file_bytes
    monkeypatch.setattr(project_index, "regular_file_bytes", lambda path: read.append(path) or real(path))
    for store in (None, cache.Cache(tree / "cache", "test")):
        index = runner.build_index(["src/bad.py", "good.py"], store)
        assert not any(path.endswith("_pb2.py") for path in read)
        assert "_pb2" in " ".join(index.skipped)


def test_over_budget_files_give_no_facts_and_say_so_once(tree, seen):
    said: list[str] = []
    index = runner.build_index(["src/bad.py", "good.py"], None, say=said.append)
    assert sorted(Path(p).name for p in index.skipped) == ["deep.py", "messages_pb2.py"]
    assert len(said) == 2 and any("MB, over the index's budget" in s for s in said)
    assert any("too complex" in s for s in said)
    assert index.locate("src.messages_pb2.Request", str(tree / "src" / "bad.py")) is None
    assert index.locate("src.helpers.ones", str(tree / "src" / "bad.py")) is not None
    # the generated module costs a stat: over the size budget, never read nor parsed; the deep
    # file is parsed by CPython (which keeps to its own limits), then measured, and left out
    assert len(generated(5)) not in seen["parse"]
    assert len(deep()) in seen["measure"]


def test_verbose_names_each_file_left_out_of_the_index_once(tree, capsys):
    cli.main(["-v", "--isolated", "--no-cache", "-j", "1", "src/bad.py", "good.py"])
    said = [line for line in capsys.readouterr().err.splitlines() if "not indexed" in line]
    assert sorted(Path(line.split(": ")[1]).name for line in said) == ["deep.py", "messages_pb2.py"]
    cli.main(["--isolated", "--no-cache", "-j", "1", "src/bad.py", "good.py"])
    assert "not indexed" not in capsys.readouterr().err


def test_the_lint_does_not_scan_again_what_the_index_scanned(tree, seen, capsys):
    findings(["--no-cache", "src/bad.py"], capsys)
    bad = len((tree / "src" / "bad.py").read_text())
    assert seen["measure"].count(bad) == 1


def test_facts_reach_the_cache_as_they_are_read(tree, monkeypatch):
    """A run killed half-way (a pre-commit hook's timeout) leaves the next run the files it
    got through: each file's facts are stored as soon as they are read."""
    store = cache.Cache(tree / "cache", "test")
    read = []
    real = project_index.read_facts

    def interrupted(path, source=None):
        if len(read) == 2:
            raise KeyboardInterrupt
        read.append(path)
        return real(path, source)

    monkeypatch.setattr(project_index, "read_facts", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.build_index(["src/bad.py", "good.py"], store).read()  # read on first need
    first = list(read)
    read.clear()
    monkeypatch.setattr(project_index, "read_facts", lambda path, source=None: read.append(path) or real(path, source))
    runner.build_index(["src/bad.py", "good.py"], store).read()
    assert len(first) == 2 and not set(first) & set(read)
    read.clear()
    runner.build_index(["src/bad.py", "good.py"], store).read()
    assert read == []  # everything, the deep file's verdict too, comes from the cache


def test_the_lint_does_not_parse_again_what_the_index_parsed(tree, seen, capsys):
    """A file no rule wants still gets a syntax check: the index's parse of the same text."""
    plain = tree / "src" / "plain.py"
    plain.write_text("import os\n\nprint(os.sep)\n")
    findings(["--no-cache", str(plain)], capsys)
    assert seen["parse"].count(len(plain.read_text())) == 1


def test_the_default_tier_does_not_look_for_preview_findings(tmp_path, monkeypatch, capsys):
    """Every finding of a preview rule is possible, so only ``--preview`` runs those rules."""
    from torchdev_lint.rule import Rule

    asked = []
    for cls in Rule.registry.values():
        monkeypatch.setattr(cls, "wants", classmethod(lambda cls, source, real=cls.wants: asked.append(cls) or real(source)))
    path = tmp_path / "model.py"
    path.write_text("import torch\n\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    for tier in ([], ["--preview"]):
        asked.clear()
        cli.main(["--isolated", "--no-cache", "-q", *tier, str(path)])
        capsys.readouterr()
        assert any(cls.preview for cls in asked) == bool(tier)
        codes = {cls.code for cls in asked}
        # the default rules
        assert {"TDL001", "TDL002", "TDL003", "TDL004", "TDL005", "TDL006", "TDL008"} <= codes
        # TDL007 and TDL012 are preview rules: asked only in the preview tier
        preview = {"TDL007", "TDL012"}
        assert codes & preview == (preview if tier else set())


_PLAIN = "import torch\n\n\ndef f(x):\n    '''Doc (with brackets) and words.'''\n    return x + 1\n"


@pytest.mark.parametrize("text", [
    _PLAIN,
    _PLAIN + "y = " + " + ".join(["x"] * 600) + "\n",  # an operator chain
    _PLAIN + "ok = " + " and ".join(["x"] * 600) + "\nz = 1\n",  # keyword operators only
    _PLAIN + "def g():\n    s = (" + " ".join(["'a'"] * 3100) + ")\n",  # adjacent strings
    _PLAIN + "t = " + "(" * 150 + "1" + ")" * 150 + "\n",  # deep, within CPython's limit
    _PLAIN + "w = [\n" + "    x.a.b,\n" * 400 + "]\n",  # long, nothing deep
    _PLAIN.replace("\n", "\r\n") + "q = " + " + ".join(["x"] * 600) + "\r\n",  # Windows lines
], ids=["plain", "chain", "keywords", "strings", "brackets", "long-list", "crlf"])
def test_measuring_between_statements_finds_what_the_whole_scan_finds(text):
    """The index scans only the stretches between statement starts that could pass a limit:
    the answer (where, what) is the whole scan's."""
    from torchdev_lint import pyast

    tree = pyast.parse(text)
    assert tree is not None
    assert limits._measure_statements(text, pyast.statement_lines(tree)) == limits._measure(text)
