"""A warm run (issue 28, item 3): an unchanged tree is answered by one cache entry, without
reading any file or the project index; any change to a checked file or to a file the index
would read falls back to each file's own entry. Work is counted, never timed."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from torchdev_lint import cli, files, runner
from torchdev_lint.analysis import project_index

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "import torch.nn as nn\n\nclass Base(nn.Module):\n    pass\n",
    "pkg/model.py": "import torch\nfrom .base import Base\n\nclass Net(Base):\n"
                    "    def forward(self, x):\n        return x.cuda()\n",
    "pkg/load.py": "import torch\n\nstate = torch.load('w.pt')\nstate2 = torch.load('w.pt').cuda()\n",
}


def write(path: Path, text: str) -> None:
    """Written a minute ago: a file modified in the last two seconds is never answered by
    the whole-run entry (it may change again within the file system's clock tick)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    then = time.time() - 60
    os.utime(path, (then, then))


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    for name, text in FILES.items():
        write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def counts(monkeypatch) -> Counter:
    """How often files are read for checking, and how often the index is read."""
    found: Counter = Counter()
    read, index = files.read, runner._read_index
    monkeypatch.setattr(files, "read", lambda path: found.update(["file"]) or read(path))
    monkeypatch.setattr(runner, "_read_index", lambda *a: found.update(["index"]) or index(*a))
    return found


def run(*argv: str, paths=("pkg",)) -> list[dict]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["--isolated", "--preview", "--format", "json", "-j", "1", "--cache-dir", "cache", *argv, *paths])
    data = json.loads(out.getvalue())
    return data if isinstance(data, list) else data["findings"]


def test_an_unchanged_tree_reads_nothing(work, counts):
    first = run()
    assert counts["file"] >= 3 and counts["index"] == 1
    counts.clear()
    assert run() == first and first
    assert counts == Counter()  # no file read for checking, no index


def test_a_changed_file_falls_back_to_each_files_entry(work, counts):
    first = run()
    counts.clear()
    model = work / "pkg" / "model.py"
    write(model, model.read_text() + "\nextra = torch.zeros(2).cuda()\n")
    after = run()
    assert counts["index"] == 1 and len(after) == len(first) + 1
    counts.clear()
    assert run() == after and counts == Counter()  # and the new state is answered whole again


def test_a_neighbour_the_index_reads_counts_as_a_change(work, counts):
    """Only pkg/model.py is checked, but its base class comes from pkg/base.py."""
    run(paths=["pkg/model.py"])
    counts.clear()
    run(paths=["pkg/model.py"])
    assert counts == Counter()
    write(work / "pkg" / "base.py", "class Base:\n    pass\n")  # no longer a module
    run(paths=["pkg/model.py"])
    assert counts["index"] == 1


def test_a_file_modified_just_now_is_looked_at_again(work, counts):
    run()
    run()
    model = work / "pkg" / "model.py"
    model.write_text(model.read_text().replace("x.cuda()", "x.cpu() "))  # same size, now
    counts.clear()
    after = run()
    assert counts["file"] >= 3 and not any(f["path"].endswith("model.py") for f in after)
    counts.clear()
    run()
    assert counts["file"] >= 3  # still recent: no whole-run entry was stored


def test_other_settings_are_another_run(work, counts):
    run()
    counts.clear()
    run("--select", "TDL001")
    assert counts["file"] >= 3


def test_the_lazy_index_answers_like_the_index(work):
    from torchdev_lint.cache import Cache

    paths = [str(p) for p in sorted((work / "pkg").glob("*.py"))]
    lazy = runner.build_index(paths, Cache(work / "cache", "test"))
    eager = runner.build_index(paths, None)
    assert isinstance(lazy, runner.LazyIndex) and isinstance(eager, project_index.ProjectIndex)
    for path in paths:
        assert lazy.facts_for(path) == eager.facts_for(path)
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(lazy)), project_index.ProjectIndex)


def test_per_file_ignores_hold_in_the_whole_run_entry(work, counts):
    write(work / "pyproject.toml", '[tool.torchdev-lint]\npreview = true\nper-file-ignores = {"pkg/load.py" = ["TDL004"]}\n')

    def lint() -> list[tuple[str, str]]:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli.main(["--format", "json", "-j", "1", "--cache-dir", "cache", "pkg"])
        data = json.loads(out.getvalue())
        return sorted((Path(f["path"]).name, f["code"]) for f in (data if isinstance(data, list) else data["findings"]))

    first = lint()
    assert ("load.py", "TDL001") in first and ("load.py", "TDL004") not in first
    counts.clear()
    assert lint() == first and counts == Counter()
