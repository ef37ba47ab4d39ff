"""Jupyter notebooks: code cells checked as one module, positions per cell, magics masked,
fixes written back into the cells without disturbing the rest of the JSON.

The toy cells have no CPU path, so their findings are possible since confidence tiers: the
tests run in the preview tier (`--preview`)."""

import json

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n", "x.cuda() in prose"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
         "source": ["%matplotlib inline\n", "import torch\n", "!pip install tqdm"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["x = torch.zeros(3)\n", "x.cuda()\n", "state = torch.load('w.pt')\n", "x?"]},
        {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [],
         "source": ["%%bash\n", "python -c 'y.cuda()'"]},
        {"cell_type": "code", "execution_count": 4, "metadata": {}, "outputs": [],
         "source": "model.cuda()  # noqa: TDL001\ny = x.cuda()"},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 — café"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def write_notebook(path, data=NOTEBOOK):
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def test_findings_are_located_by_cell(tmp_path, run_cli):
    write_notebook(tmp_path / "train.ipynb")
    status, out, err = run_cli("--isolated", "--preview", "--format", "json", "train.ipynb", cwd=tmp_path)
    assert status == 1, err
    found = [(f["cell"], f["line"], f["column"], f["code"]) for f in json.loads(out)]
    assert found == [
        (3, 2, 1, "TDL001"), (3, 2, 1, "TDL003"), (3, 3, 9, "TDL004"), (5, 2, 5, "TDL001"),
    ]
    _, out, _ = run_cli("--isolated", "--preview", "train.ipynb", cwd=tmp_path)
    assert out.startswith("train.ipynb:cell 3:2:1: TDL001")


def test_fix_rewrites_only_the_code_it_fixes(tmp_path, run_cli):
    path = tmp_path / "train.ipynb"
    before = write_notebook(path)
    status, out, _ = run_cli("--isolated", "--preview", "--fix", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert status == 0 and "Fixed 4 problems, 0 remaining." in out
    after = path.read_text(encoding="utf-8")
    cells = json.loads(after)["cells"]
    assert cells[1]["source"] == [
        "%matplotlib inline\n", "import torch\n",
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "!pip install tqdm",
    ]
    assert cells[2]["source"] == [
        "x = torch.zeros(3)\n", "x = x.to(device)\n", "state = torch.load('w.pt', map_location=\"cpu\")\n", "x?",
    ]
    assert cells[3] == NOTEBOOK["cells"][3]
    assert cells[4]["source"] == "model.cuda()  # noqa: TDL001\ny = x.to(device)"
    # Everything else is byte for byte as it was.
    changed = [l for l in after.splitlines() if l not in before.splitlines()]
    assert len(changed) == 4 and "café" in after
    assert run_cli("--isolated", "--preview", "--fix", "train.ipynb", cwd=tmp_path)[0] == 0
    assert path.read_text(encoding="utf-8") == after


def test_broken_notebook_is_one_error_line(tmp_path, run_cli):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "bug.py").write_text("x = y.cuda()\n")
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2 and "bug.py:1:5: TDL001" in out
    (line,) = [l for l in err.splitlines() if "broken.ipynb" in l]
    assert "not a valid notebook" in line


def test_syntax_error_in_a_cell_names_the_cell(tmp_path, run_cli):
    data = {**NOTEBOOK, "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch\n"]},
                                  {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x = (\n"]}]}
    write_notebook(tmp_path / "bad.ipynb", data)
    status, _, err = run_cli("--isolated", "bad.ipynb", cwd=tmp_path)
    assert status == 2 and "bad.ipynb:cell 2:" in err and "syntax error" in err


def test_a_timed_cell_is_python_and_its_fix_keeps_the_magic(tmp_path, run_cli):
    data = {**NOTEBOOK, "cells": [
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
         "source": ["%%time\n", "import torch\n", "y = torch.zeros(3).cuda()"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["%%writefile train.py\n", "x = torch.zeros(3).cuda()"]},
    ]}
    write_notebook(tmp_path / "timed.ipynb", data)
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL001", "--format", "json",
                               "timed.ipynb", cwd=tmp_path)
    assert status == 1, err
    assert [(f["cell"], f["line"], f["column"]) for f in json.loads(out)] == [(1, 3, 5)]
    run_cli("--isolated", "--preview", "--select", "TDL001", "--fix", "timed.ipynb", cwd=tmp_path)
    cells = json.loads((tmp_path / "timed.ipynb").read_text(encoding="utf-8"))["cells"]
    assert cells[0]["source"][0] == "%%time\n" and ".cuda()" not in "".join(cells[0]["source"])
    assert cells[1]["source"] == data["cells"][1]["source"]


def _cells(*sources):
    return {**NOTEBOOK, "cells": [{"cell_type": "code", "execution_count": i, "metadata": {}, "outputs": [],
                                   "source": source} for i, source in enumerate(sources, 1)]}


CHOICE = "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\nw = torch.ones(2).to(device)\n"
MAIN = "def main():\n    x = torch.ones(2).cuda()\n    print(x)\n\n"


def test_a_function_the_notebook_calls_only_where_cuda_is_does_not_run_in_its_cpu_run(tmp_path, run_cli):
    guarded = "if __name__ == '__main__':\n    if torch.cuda.is_available():\n        main()\n" \
              "    else:\n        print('needs a GPU')\n"
    for name, call, expected in (("guarded", guarded, []), ("plain", "main()\n", [(2, 2, 9)])):
        write_notebook(tmp_path / f"{name}.ipynb", _cells(CHOICE, MAIN + call))
        status, out, err = run_cli("--isolated", "--select", "TDL001", "--format", "json", f"{name}.ipynb",
                                   cwd=tmp_path)
        assert [(f["cell"], f["line"], f["column"]) for f in json.loads(out)] == expected, (name, err)


def test_a_notebook_device_that_each_function_shadows_places_nothing(tmp_path, run_cli):
    cells = ['import torch\ndevice = "cuda"\n',
             'def train(model, device="cuda" if torch.cuda.is_available() else "cpu"):\n'
             '    return model.to(device)\n',
             'train(torch.nn.Linear(2, 2))\n']
    write_notebook(tmp_path / "train.ipynb", {**NOTEBOOK, "cells": [
        {"cell_type": "code", "execution_count": i, "metadata": {}, "outputs": [], "source": c}
        for i, c in enumerate(cells, 1)]})
    _, out, _ = run_cli("--isolated", "--preview", "--format", "json", "train.ipynb", cwd=tmp_path)
    assert [(f["cell"], f["line"], f["confidence"]) for f in json.loads(out)] == [(1, 2, "possible")]
    # the same notebook whose function reads the global: the CUDA string places the model
    cells[1] = cells[1].replace('(model, device=', '(model, dev=')
    write_notebook(tmp_path / "train.ipynb", {**NOTEBOOK, "cells": [
        {"cell_type": "code", "execution_count": i, "metadata": {}, "outputs": [], "source": c}
        for i, c in enumerate(cells, 1)]})
    _, out, _ = run_cli("--isolated", "--preview", "--format", "json", "train.ipynb", cwd=tmp_path)
    assert [(f["cell"], f["line"], f["confidence"]) for f in json.loads(out)] == [(1, 2, "certain")]


def test_a_notebook_that_asks_its_host_for_a_gpu_is_written_for_cuda(tmp_path, run_cli):
    # the same cells: a CPU fallback, then a hardcoded `.cuda()` that the fallback's run reaches
    cells = _cells(CHOICE, "x = torch.ones(2).cuda()\nprint(x + w)\n")
    runtimes = {
        "plain": ({}, "certain"),
        "colab": ({"accelerator": "GPU", "colab": {"provenance": []}}, "possible"),
        "colab_type": ({"colab": {"gpuType": "T4"}}, "possible"),
        "kaggle": ({"kaggle": {"accelerator": "nvidiaTeslaT4"}}, "possible"),
        "kaggle_none": ({"kaggle": {"accelerator": "none"}}, "certain"),
    }
    for name, (metadata, confidence) in runtimes.items():
        write_notebook(tmp_path / f"{name}.ipynb", {**cells, "metadata": {**NOTEBOOK["metadata"], **metadata}})
        _, out, err = run_cli("--isolated", "--preview", "--select", "TDL001", "--format", "json", f"{name}.ipynb",
                              cwd=tmp_path)
        assert [(f["cell"], f["line"], f["confidence"]) for f in json.loads(out)] == [(2, 1, confidence)], (name, err)
    # the user says it must run without CUDA: the runtime the notebook asked for does not matter
    _, out, _ = run_cli("--isolated", "--target-devices", "cpu,cuda", "--select", "TDL001", "--format", "json",
                        "colab.ipynb", cwd=tmp_path)
    assert [f["confidence"] for f in json.loads(out)] == ["certain"]
    # the default output sets it aside, and says so
    status, out, _ = run_cli("--isolated", "--select", "TDL001", "colab.ipynb", cwd=tmp_path)
    assert status == 0 and "1 of them in code judged CUDA-only" in out


def test_a_notebook_class_is_not_the_project_class_of_the_same_name(tmp_path, run_cli):
    # models/layers.py has its own `Scale`, which the project moves to a GPU; the notebook's
    # `Scale` is another class: what decides is whether the notebook moves it
    (tmp_path / "models").mkdir()
    (tmp_path / "models/__init__.py").write_text("")
    (tmp_path / "models/layers.py").write_text(
        "import torch\nimport torch.nn as nn\nclass Scale(nn.Module):\n    def forward(self, x):\n"
        "        return x\nnet = Scale().to('cuda')\n")
    define = ("import torch\nimport torch.nn as nn\nclass Scale(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.offset = torch.zeros(2)\n"
              "    def forward(self, x):\n        return x + self.offset\n")
    for use, confidence in (("s = Scale()\nprint(s(torch.ones(2)))\n", "possible"),
                            ("s = Scale().to('cuda')\nprint(s(torch.ones(2, device='cuda')))\n", "certain")):
        write_notebook(tmp_path / "explore.ipynb", _cells(define, use))
        _, out, err = run_cli("--isolated", "--preview", "--select", "TDL006", "--format", "json", ".",
                              cwd=tmp_path)
        found = [(f["path"], f["confidence"]) for f in json.loads(out)]
        assert found == [("explore.ipynb", confidence)], (use, err)
