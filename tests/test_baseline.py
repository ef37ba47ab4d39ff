"""Adopting the linter on a project with many findings: `--add-noqa` writes a baseline,
`# torchdev-lint: noqa` turns a file off, TDL090 finds noqa codes that no longer suppress anything.

The toy sources here have no CPU path, so their findings are possible since confidence tiers:
the tests run in the preview tier (`--preview`)."""

from torchdev_lint.noqa import add_noqa

SOURCE = '''\
import torch
x = torch.zeros(2).cuda()  # keep me
y = torch.load(
    "a.pt",
)
z = x.cuda()  # noqa: TDL003
w = torch.zeros(2).cuda()  # noqa
'''


def test_add_noqa_writes_a_baseline_that_silences_everything(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    status, _, err = run_cli("--isolated", "--preview", "--add-noqa", "m.py", cwd=tmp_path)
    assert status == 0 and "Added 3 noqa directives." in err
    assert path.read_text() == SOURCE.replace("# keep me", "# keep me  # noqa: TDL001").replace(
        '    "a.pt",\n)', '    "a.pt",\n)  # noqa: TDL004').replace("# noqa: TDL003", "# noqa: TDL001, TDL003")
    status, out, _ = run_cli("--isolated", "--preview", "m.py", cwd=tmp_path)
    assert status == 0 and out.startswith("All checks passed")
    # what a baseline keeps: TDL003 on `z = ...` is no longer needed
    status, out, _ = run_cli("--isolated", "--preview", "--extend-select", "TDL090", "--format", "concise", "m.py",
                             cwd=tmp_path)
    assert status == 1
    assert out.splitlines()[0] == "m.py:6:15: TDL090 Unused `noqa` code TDL003: it suppresses nothing here"


def test_add_noqa_keeps_line_endings_and_existing_codes():
    text, added = add_noqa("x = 1\r\ny = 2  # noqa: E501\r\n", {1: {"TDL001"}, 2: {"TDL004"}})
    assert added == 2
    assert text == "x = 1  # noqa: TDL001\r\ny = 2  # noqa: E501, TDL004\r\n"


def test_file_level_noqa(tmp_path, run_cli):
    (tmp_path / "off.py").write_text("# torchdev-lint: noqa\nimport torch\nx = torch.zeros(2).cuda()\n")
    (tmp_path / "some.py").write_text(
        "# torchdev-lint: noqa: TDL004\nimport torch\nx = torch.zeros(2).cuda()\ns = torch.load(p)\n")
    # inside a statement it is an ordinary comment, not a file-level switch
    (tmp_path / "not.py").write_text("import torch\nx = torch.zeros(2).cuda()  # torchdev-lint: noqa\n")
    status, out, _ = run_cli("--isolated", "--preview", "--format", "concise", "off.py", "some.py", "not.py",
                             cwd=tmp_path)
    assert [line.split(":")[0] + " " + line.split()[1] for line in out.splitlines() if "TDL" in line] == [
        "not.py TDL001", "some.py TDL001"]


def test_unused_noqa_is_opt_in_and_only_judges_rules_that_ran(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("import torch\ns = torch.load(p)  # noqa: TDL004\nx = 1  # noqa: TDL001\n")
    assert run_cli("--isolated", "m.py", cwd=tmp_path)[0] == 0  # not in the default selection
    status, out, _ = run_cli("--isolated", "--select", "TDL004,TDL090", "--format", "concise", "m.py", cwd=tmp_path)
    assert status == 0, out  # TDL001 did not run: its code is not judged
    status, out, _ = run_cli("--isolated", "--extend-select", "TDL090", "--format", "concise", "m.py", cwd=tmp_path)
    assert out.splitlines()[0] == "m.py:3:8: TDL090 Unused `noqa` code TDL001: it suppresses nothing here"


def test_add_noqa_on_stdin_prints_the_result_and_leaves_the_file_alone(tmp_path, run_cli):
    """As `--fix -`: an editor sends the buffer with the file's name; the file on disk
    (another text) is not touched."""
    on_disk = "import torch\nx = torch.zeros(2).cuda()\n"
    (tmp_path / "m.py").write_text(on_disk)
    buffer = "import torch\n\n\ny = torch.load('a.pt')\n"
    status, out, err = run_cli("--isolated", "--preview", "--add-noqa", "--stdin-filename", "m.py", "-",
                               input=buffer, cwd=tmp_path)
    assert status == 0 and "Added 1 noqa directive." in err
    assert out == buffer.replace("('a.pt')\n", "('a.pt')  # noqa: TDL004\n")
    assert (tmp_path / "m.py").read_text() == on_disk
    status, out, _ = run_cli("--isolated", "--preview", "--add-noqa", "-", input="x = 1\n", cwd=tmp_path)
    assert (status, out) == (0, "x = 1\n")


def test_add_noqa_writes_into_notebook_cells_around_magics(tmp_path, run_cli):
    import json

    cells = [["%load_ext autoreload\n", "!pip install torch \\\n", "    numpy\n", "import torch"],
             ["x = torch.zeros(2).cuda()\n", "%time y = x + 1\n", "s = torch.load(\n", "    'a.pt')"]]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": source} for source in cells],
                "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
                "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    status, _, err = run_cli("--isolated", "--preview", "--add-noqa", "nb.ipynb", cwd=tmp_path)
    assert status == 0 and "Added 2 noqa directives." in err
    written = json.loads(path.read_text())
    assert written["cells"][0]["source"] == cells[0]
    assert written["cells"][1]["source"] == [
        "x = torch.zeros(2).cuda()  # noqa: TDL001\n", "%time y = x + 1\n", "s = torch.load(\n",
        "    'a.pt')  # noqa: TDL004"]
    status, out, _ = run_cli("--isolated", "--preview", "nb.ipynb", cwd=tmp_path)
    assert status == 0 and out.startswith("All checks passed"), out
