"""Hostile notebooks: user text that looks like our own bookkeeping, sources that are not text,
other kernels, IPython lines continued with a backslash, errors located in the right cell."""

import json
from pathlib import Path

import pytest

CORPUS = Path("/work/corpus")


def code_cell(source):
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


def notebook(*cells, language="python"):
    return {
        "cells": list(cells),
        "metadata": {"kernelspec": {"name": "k", "display_name": "k", "language": language}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write(path, data):
    text = json.dumps(data, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def sources(path):
    return [cell["source"] for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]


# Lines that the old joined-text format used as bookkeeping, each placed in a cell of its own.
LOOKALIKES = [
    "# torchdev-lint: cell 1",
    "# torchdev-lint: cell 7",
    "pass  # torchdev-lint: magic 0",
    "pass  # torchdev-lint: magic 3",
    "pass",
]


@pytest.mark.parametrize("lookalike", LOOKALIKES)
def test_text_like_bookkeeping_is_only_text(tmp_path, run_cli, lookalike):
    first = ["import torch\n", "model = torch.nn.Linear(2, 2)\n"]
    second = [f"{lookalike}\n", "x = torch.zeros(3)\n", "y = x.cuda()\n", "%time z = 1"]
    path = tmp_path / "nb.ipynb"
    write(path, notebook(code_cell(first), code_cell(second)))
    status, out, err = run_cli("--isolated", "--preview", "--fix", "nb.ipynb", cwd=tmp_path)
    assert status == 0, out + err
    assert "Fixed 1 problem" in out
    assert sources(path) == [
        first[:1] + ['device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'] + first[1:],
        [f"{lookalike}\n", "x = torch.zeros(3)\n", "y = x.to(device)\n", "%time z = 1"],
    ]


def test_fix_lands_in_the_cell_of_the_line_it_fixes(tmp_path, run_cli):
    cells = [code_cell(f"import torch\nx{n} = torch.ones(1)\n") for n in range(4)]
    cells.append(code_cell("!pip install \\\n    tqdm\ny = x2.cuda()"))
    path = tmp_path / "nb.ipynb"
    write(path, notebook(*cells))
    status, out, err = run_cli("--isolated", "--preview", "--fix", "nb.ipynb", cwd=tmp_path)
    assert status == 0, out + err
    after = sources(path)
    assert after[1:4] == [f"import torch\nx{n} = torch.ones(1)\n" for n in range(1, 4)]
    assert after[4] == "!pip install \\\n    tqdm\ny = x2.to(device)"


def test_a_source_that_is_not_text_is_one_error_line(tmp_path, run_cli):
    write(tmp_path / "numbers.ipynb", notebook(code_cell([1, 2, 3])))
    write(tmp_path / "dict.ipynb", notebook(code_cell({"a": "b"})))
    (tmp_path / "bug.py").write_text("y = x.cuda()\n")
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2, err
    assert "bug.py:1:5: TDL001" in out
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err
    assert lines[0].startswith("torchdev-lint: dict.ipynb: error: ") and "cell 1" in lines[0]
    assert lines[1].startswith("torchdev-lint: numbers.ipynb: error: ") and "not text" in lines[1]


def test_a_notebook_in_another_language_is_skipped(tmp_path, run_cli):
    r_code = "library(torch)\nx <- torch_randn(3)$cuda()\nif (TRUE) { print(x) }\n"
    path = tmp_path / "analysis.ipynb"
    before = write(path, notebook(code_cell(r_code), language="R"))
    status, out, err = run_cli("--isolated", "--preview", "--fix", "analysis.ipynb", cwd=tmp_path)
    assert status == 0 and err == "", out + err
    assert path.read_text(encoding="utf-8") == before


MAGIC_CONTINUATIONS = [
    "!pip install \\\n    torch \\\n    tqdm",
    "%pip install --quiet \\\n  numpy",
    "files = !ls \\\n  -la",
    "%timeit -n 3 \\\n   sum(range(10))",
    "if True:\n    !echo \\\n  done",
]


@pytest.mark.parametrize("magic", MAGIC_CONTINUATIONS)
def test_magics_continued_with_a_backslash_are_masked(tmp_path, run_cli, magic):
    cells = [code_cell(magic + "\n"), code_cell("import torch\nx = torch.zeros(1)\ny = x.cuda()\n")]
    write(tmp_path / "nb.ipynb", notebook(*cells))
    status, out, err = run_cli("--isolated", "--preview", "nb.ipynb", cwd=tmp_path)
    assert status == 1 and err == "", err
    assert out.startswith("nb.ipynb:cell 2:3:5: TDL001")


@pytest.mark.parametrize(
    ("cell", "where"),
    [
        ("x = (\n", "cell 3:1:"),
        ("def f():\n    return 1\n  y = 2\n", "cell 3:3:"),
        ("a = 1\nb = 2 +\n", "cell 3:2:"),
        ("%time x = 1\ny = ]\n", "cell 3:2:"),
    ],
)
def test_a_syntax_error_names_its_cell_and_line(tmp_path, run_cli, cell, where):
    cells = [code_cell("import torch\n"), {"cell_type": "markdown", "metadata": {}, "source": "# x"},
             code_cell(cell), code_cell("z = 3\n")]
    write(tmp_path / "bad.ipynb", notebook(*cells))
    status, _, err = run_cli("--isolated", "--preview", "bad.ipynb", cwd=tmp_path)
    assert status == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"torchdev-lint: bad.ipynb:{where}") and "syntax error" in line


def test_every_corpus_notebook_is_checked(tmp_path, run_cli):
    notebooks = sorted(CORPUS.glob("*/**/*.ipynb"))
    if not notebooks:
        pytest.skip("the corpus repositories are not checked out here")
    status, out, err = run_cli("--isolated", "--preview", "--format", "json", *notebooks, cwd=tmp_path)
    assert "error" not in err, err
    assert status in (0, 1)
