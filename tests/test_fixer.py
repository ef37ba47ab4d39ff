"""`--fix` as editors and pre-commit rely on it: one run reaches the fixpoint, added definitions
never come before the import they need, and `--fix -` is a pure filter."""

import io
import json
import subprocess
import sys

import libcst as cst
import pytest

from torchdev_lint import cli
from torchdev_lint.output import text as output_text
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.fixer import MAX_PASSES, fix_to_fixpoint
from torchdev_lint.rule import Rule

LATE_IMPORT = '''\
"""A script whose imports are not all at the top."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

x = torch.zeros(2)
y = x.cuda()
print(y.device.type)
'''
USED_BEFORE_IMPORT = "import numpy as np\n\nb = np.zeros(2).cuda()\nimport torch\n"
CUDA = "import torch\nx = torch.zeros(3)\ny = x.cuda()\n"


def run(monkeypatch, tmp_path, capsys, *args, stdin=None):
    """The fixer's mechanics on toy scripts with no CPU path: their findings are possible,
    so the runs are in the preview tier."""
    monkeypatch.chdir(tmp_path)
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    status = cli.main(["--isolated", "--no-cache", "--preview", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_default_device_goes_after_a_late_import_torch(tmp_path, monkeypatch, capsys):
    script = tmp_path / "late.py"
    script.write_text(LATE_IMPORT)
    run(monkeypatch, tmp_path, capsys, "--fix", "late.py")
    fixed = script.read_text()
    assert fixed.index('device = torch.device("cuda" if') > fixed.index("import torch")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu"]


def test_no_fix_when_the_default_device_has_no_valid_place(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.py").write_text(USED_BEFORE_IMPORT)
    status, out, _ = run(monkeypatch, tmp_path, capsys, "--fix", "m.py")
    assert status == 1
    assert (tmp_path / "m.py").read_text() == USED_BEFORE_IMPORT
    assert "Fixed 0 problems, 1 remaining." in out
    assert "(no automatic fix here: it would read `device` before torch is imported)" in out


# Code that runs before a late `import torch`: a fix there may use neither the default
# `device` nor `torch` (the indexed `.cuda(0)` becomes `torch.cuda.is_available()`).
UNPLACEABLE = [
    USED_BEFORE_IMPORT,
    "import numpy as np\n\nb = np.zeros(2).cuda(0)\nimport torch\n",
    "import numpy as np\n\nif np.ones(1).any():\n    b = np.zeros(2).cuda()\nimport torch as T\n",
]


@pytest.mark.parametrize("source", UNPLACEABLE)
def test_a_fix_with_no_valid_place_is_not_marked_fixable(tmp_path, monkeypatch, capsys, source):
    """`[*]` (and JSON's `fixable`) only on what `--fix` changes: a fix the fixer would
    have to withhold is no fix at all."""
    (tmp_path / "m.py").write_text(source)
    status, out, _ = run(monkeypatch, tmp_path, capsys, "--output-format", "concise", "m.py")
    assert status == 1
    assert "[*]" not in out and "[~]" not in out and "fixable" not in out
    _, out, _ = run(monkeypatch, tmp_path, capsys, "--format", "json", "m.py")
    assert [f["fixable"] for f in json.loads(out)] == [False]
    run(monkeypatch, tmp_path, capsys, "--fix", "--unsafe-fixes", "m.py")
    assert (tmp_path / "m.py").read_text() == source


def test_a_fix_after_the_late_import_is_still_offered(tmp_path, monkeypatch, capsys):
    """Only the fixes before the late import lose their fix: code after it keeps its `[*]`."""
    source = USED_BEFORE_IMPORT + "c = torch.zeros(2).cuda()\n"
    (tmp_path / "m.py").write_text(source)
    _, out, _ = run(monkeypatch, tmp_path, capsys, "--output-format", "concise", "m.py")
    lines = out.splitlines()
    assert lines[0].startswith("m.py:3:5: TDL001 `.cuda()`") and lines[1].startswith("m.py:5:5: TDL001 [*]")
    run(monkeypatch, tmp_path, capsys, "--fix", "m.py")
    assert (tmp_path / "m.py").read_text() == (
        "import numpy as np\n\nb = np.zeros(2).cuda()\nimport torch\n"
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "c = torch.zeros(2).to(device)\n")


# A module written to load without torch: it imports torch only under a condition.
OPTIONAL_TORCH = [
    "from .utils import is_torch_available\n\nif is_torch_available():\n    import torch\n\n\n"
    "def place(model):\n    model.to(torch.cuda.current_device())\n",
    "try:\n    import torch\nexcept ImportError:\n    torch = None\n\n\n"
    "def place(model):\n    return model.cuda()\n",
    "def place(model):\n    import torch\n\n    return model.to('cuda')\n",
]


@pytest.mark.parametrize("source", OPTIONAL_TORCH)
def test_a_fix_that_would_import_torch_at_the_top_of_an_optional_torch_module_is_unsafe(
        tmp_path, monkeypatch, capsys, source):
    """A top-level `import torch` (and a default device built at import time) would make
    the module fail to load where torch is missing, which its guarded import allows."""
    (tmp_path / "m.py").write_text(source)
    _, out, _ = run(monkeypatch, tmp_path, capsys, "--format", "json", "m.py")
    assert [(f["line"], f["fix_applicability"]) for f in json.loads(out)] == [
        (len(source.splitlines()), "unsafe")]
    run(monkeypatch, tmp_path, capsys, "--fix", "m.py")
    assert (tmp_path / "m.py").read_text() == source
    run(monkeypatch, tmp_path, capsys, "--fix", "--unsafe-fixes", "m.py")
    assert "import torch\ndevice = " in (tmp_path / "m.py").read_text() or "torch.cuda.is_available()" in (
        tmp_path / "m.py").read_text()


def test_a_module_that_imports_torch_at_the_top_keeps_its_safe_fix(tmp_path, monkeypatch, capsys):
    source = "import torch\n\n\ndef place(model):\n    import torch.nn\n    return model.cuda()\n"
    (tmp_path / "m.py").write_text(source)
    _, out, _ = run(monkeypatch, tmp_path, capsys, "--format", "json", "m.py")
    assert [f["fix_applicability"] for f in json.loads(out)] == ["safe"]


@pytest.fixture
def chain_rules():
    """Two rules where fixing one creates work for the next (`aaa` -> `bbb` -> `ccc`), and
    one whose fix never settles (`ping` <-> `pong`)."""

    def renaming(rule_code, old, new):
        class Renaming(Rule):
            code, name, message = rule_code, f"rename-{old}", f"`{old}` should be `{new}`"

            def visit_Name(self, node):
                if node.value == old:
                    edit = (node, lambda n: n.with_changes(value=new))
                    self.report(node, fix=Fix(Applicability.SAFE, [edit]))

        return Renaming  # registered by the base class

    made = [renaming("TDL901", "aaa", "bbb"), renaming("TDL902", "bbb", "ccc"),
            renaming("TDL903", "ping", "pong"), renaming("TDL904", "pong", "ping")]
    yield made
    for rule in made:
        Rule.registry.pop(rule.code)


def fixpoint(text, rules):
    relint = lambda new: lint_source("m.py", new, rules)  # noqa: E731
    return fix_to_fixpoint(relint(text), relint)


def test_fixes_are_applied_until_nothing_changes(chain_rules, tmp_path, monkeypatch, capsys):
    outcome = fixpoint("aaa = 1\n", chain_rules[:2])
    assert outcome.source == "ccc = 1\n" and outcome.error is None
    assert [f.code for f in outcome.fixed] == ["TDL901", "TDL902"]
    (tmp_path / "m.py").write_text("aaa = 1\n")
    status, out, _ = run(monkeypatch, tmp_path, capsys, "--select", "TDL901,TDL902", "--fix", "m.py")
    assert (tmp_path / "m.py").read_text() == "ccc = 1\n"
    assert status == 0 and out.strip().endswith("Fixed 2 problems, 0 remaining.")


def test_a_fix_that_never_settles_stops_with_a_message(chain_rules):
    outcome = fixpoint("ping = 1\n", chain_rules[2:])
    assert len(outcome.fixed) == MAX_PASSES
    assert f"still changing the file after {MAX_PASSES} passes" in outcome.error.message


def test_fix_dash_prints_only_the_fixed_source(tmp_path, monkeypatch, capsys):
    status, out, err = run(monkeypatch, tmp_path, capsys, "--fix", "-", stdin=CUDA)
    assert out == CUDA.replace("x.cuda()", "x.to(device)").replace(
        "import torch\n", 'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n')
    assert "Fixed 1 problem, 0 remaining." in err
    status, out, err = run(monkeypatch, tmp_path, capsys, "--fix", "-", stdin="x = 1\n")
    assert (status, out) == (0, "x = 1\n")
    status, out, err = run(monkeypatch, tmp_path, capsys, "--fix", "--stdin-filename", "m.py", "-",
                           stdin="import torch\nstate = torch.load(p)\n")
    assert (status, out) == (1, "import torch\nstate = torch.load(p)\n")  # only an unsafe fix: nothing changes
    assert "m.py:2:9: TDL004 [~]" in err


def test_fix_dash_keeps_a_notebook_valid_json(tmp_path, monkeypatch, capsys):
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": ["import torch\n", "x = torch.zeros(2)\n", "y = x.cuda()"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1) + "\n"
    status, out, _ = run(monkeypatch, tmp_path, capsys, "--fix", "--stdin-filename", "nb.ipynb", "-", stdin=text)
    assert "".join(json.loads(out)["cells"][0]["source"]).endswith("y = x.to(device)")


def test_stdin_filename_alone_reads_stdin(tmp_path, monkeypatch, capsys):
    (tmp_path / "other.py").write_text(CUDA)  # in the working directory: must not be linted
    status, out, _ = run(monkeypatch, tmp_path, capsys, "--stdin-filename", "mine.py", "--format", "concise",
                         stdin="x = y.cuda()\n")
    assert status == 1
    assert out.splitlines()[0].startswith("mine.py:1:5: TDL001")
    assert "other.py" not in out


def test_the_code_frame_of_stdin_quotes_the_text_read(tmp_path, monkeypatch, capsys):
    """An editor sends its unsaved buffer with the file's name: the frame under a finding
    quotes that buffer, not the file of that name on disk."""
    (tmp_path / "m.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    monkeypatch.setattr(output_text, "use_color", lambda stream: False)
    _, out, _ = run(monkeypatch, tmp_path, capsys, "--stdin-filename", "m.py",
                    stdin="import torch\nx=torch.zeros(1).cuda()\n")
    assert out.splitlines()[:4] == [
        "m.py:2:3: TDL001 [*] `.cuda()` hardcodes a CUDA device: this line fails on machines without one"
        " (possible)",
        "  |", "2 | x=torch.zeros(1).cuda()", "  |   ^^^^^^^^^^^^^^^^^^^^^"]


def test_a_fix_inside_an_f_string_keeps_to_its_quotes(tmp_path, monkeypatch, capsys):
    """Megatron-FSDP's message: the `"cpu"` a fix adds inside `{...}` of a double-quoted
    f-string must not reuse `"` (a syntax error before Python 3.12)."""
    source = ("import torch\n\nprint(\n    f\"{torch.device(f'cuda:{torch.cuda.current_device()}')}, \"\n)\n")
    (tmp_path / "m.py").write_text(source)
    run(monkeypatch, tmp_path, capsys, "--fix", "--unsafe-fixes", "m.py")
    fixed = (tmp_path / "m.py").read_text()
    assert "if torch.cuda.is_available() else 'cpu')}, \"" in fixed and 'else "cpu"' not in fixed
    compile(fixed, "m.py", "exec")
