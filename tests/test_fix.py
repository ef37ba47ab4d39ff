"""--fix: before/after pairs for each fix shape, and the guarantees on files (formatting,
encoding, newlines, mode, atomic writes, idempotence, --diff)."""

import os
import stat
import textwrap

import libcst
import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.config import enabled_rules
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_file
from torchdev_lint.trace.text import NO_GPU_ERROR
from conftest import gpu_available

ALL = enabled_rules(["TDL001", "TDL003", "TDL004", "TDL005"], [])
DEFAULT = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'


def fixed(source: str, unsafe: bool = False) -> str:
    return fix_file(lint_source("m.py", source, ALL, preview=True), unsafe).source


PAIRS = [
    pytest.param(
        "import torch\nself.model.cuda()\n",
        "import torch\n" + DEFAULT + "self.model.to(device)\n",
        id="attribute-receiver",
    ),
    pytest.param(
        "import torch\nx = batch['image'].cuda()\n",
        "import torch\n" + DEFAULT + "x = batch['image'].to(device)\n",
        id="subscript-receiver",
    ),
    pytest.param(
        "import torch\nx = torch.zeros(3)\nx.cuda()\n",
        "import torch\n" + DEFAULT + "x = torch.zeros(3)\nx = x.to(device)\n",
        id="tdl001-and-tdl003-on-one-line",
    ),
    pytest.param(
        # `y` is read again in the loop: assigning back is no dead copy
        "import torch\nfor step, (x, y) in enumerate(loader):\n    y.cuda(non_blocking=True)\n    print(y)\n",
        "import torch\n" + DEFAULT + "for step, (x, y) in enumerate(loader):\n"
        "    y = y.to(device, non_blocking=True)\n    print(y)\n",
        id="discarded-batch-element-with-keyword",
    ),
    pytest.param(
        "import torch\nx = y.cuda(  # keep this comment\n    non_blocking=True,\n)\n",
        "import torch\n" + DEFAULT + "x = y.to(  # keep this comment\n    device,\n    non_blocking=True,\n)\n",
        id="multiline-call-with-comment",
    ),
    pytest.param(
        '"""Docstring."""\nfrom __future__ import annotations\n\nimport os\nimport torch as T\n\n'
        "net = Net().cuda()\n",
        '"""Docstring."""\nfrom __future__ import annotations\n\nimport os\nimport torch as T\n'
        'device = T.device("cuda" if T.cuda.is_available() else "cpu")\n\nnet = Net().to(device)\n',
        id="alias-and-docstring",
    ),
    pytest.param(
        "net = Net().cuda()\n",
        "import torch\n" + DEFAULT + "net = Net().to(device)\n",
        id="adds-import-torch",
    ),
    pytest.param(
        "x = y.cuda(1)\n",
        'import torch\nx = y.to(1 if torch.cuda.is_available() else "cpu")\n',
        id="kept-index-adds-import-torch",
    ),
    pytest.param(
        "import torch.nn as nn\ndef main(x):\n    y = x.cuda()\n    device = 'cpu'\n    return y\n",
        'import torch.nn as nn\nimport torch\ndef main(x):\n'
        '    y = x.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))\n'
        "    device = 'cpu'\n    return y\n",
        id="inline-default-adds-import-torch",
    ),
    pytest.param(
        "import torch\n\ndef outer():\n    device = torch.device('cuda:1')\n\n    def inner(x):\n"
        "        return x.cuda()\n    return inner\n",
        "import torch\n\ndef outer():\n    device = torch.device('cuda:1')\n\n    def inner(x):\n"
        "        return x.to(device)\n    return inner\n",
        id="nested-function-uses-enclosing-device",
    ),
    pytest.param(
        "import torch\nclass Runner:\n\tdef __init__(self):\n\t\tself.device = 'cuda'\n"
        "\tdef run(self, x):\n\t\treturn x.cuda()\n",
        "import torch\nclass Runner:\n\tdef __init__(self):\n\t\tself.device = 'cuda'\n"
        "\tdef run(self, x):\n\t\treturn x.to(self.device)\n",
        id="tabs-and-self-device",
    ),
    pytest.param(
        "import torch\ndef main(args):\n    state = torch.load(\n        args.path,  # the checkpoint\n    )\n",
        "import torch\ndef main(args):\n    state = torch.load(\n        args.path,  # the checkpoint\n"
        '        map_location="cpu",\n    )\n',
        id="load-multiline-comment",
    ),
    pytest.param(
        "import torch\ndef main(args):\n    model = Net()\n    opt = torch.optim.Adagrad(model.parameters())\n"
        "    print(opt)\n    model.to(args.device)\n",
        "import torch\ndef main(args):\n    model = Net()\n    model.to(args.device)\n"
        "    opt = torch.optim.Adagrad(model.parameters())\n    print(opt)\n",
        id="optimizer-read-in-between-the-move-goes-first",
    ),
    pytest.param(
        "import torch\ndef main(args):\n    model = Net()\n    opt = torch.optim.Adagrad(model.parameters())\n"
        "    print(opt)\n    args.device = pick()\n    model.to(args.device)\n",
        "import torch\ndef main(args):\n    model = Net()\n    opt = torch.optim.Adagrad(model.parameters())\n"
        "    print(opt)\n    args.device = pick()\n    model.to(args.device)\n",
        id="optimizer-read-and-device-set-in-between-is-not-moved",
    ),
]


@pytest.mark.parametrize("before, after", PAIRS)
def test_fix_pairs(before, after):
    result = fixed(before, unsafe=True)
    assert result == after
    libcst.parse_module(result)
    assert fixed(result, unsafe=True) == result  # idempotent


def test_safe_fixes_only_by_default():
    source = "import torch\ndevice = 'cuda'\nmodel = Net()\nstate = torch.load(p)\nx = y.cuda()\n"
    # Reusing the program's own `device` is unsafe, and so is map_location here.
    assert fixed(source) == source
    assert "map_location=device" in fixed(source, unsafe=True)


def test_unbound_local_device_is_never_used():
    source = "import torch\ndef main(x):\n    x = x.cuda()\n    device = torch.device('cpu')\n    return x\n"
    result = fixed(source)
    assert "x.to(device)" not in result
    compiled = {}
    exec(compile(result.replace("import torch\n", ""), "m.py", "exec"), {"torch": _FakeTorch()}, compiled)


class _FakeTorch:
    """Just enough of torch to execute a fixed function without importing torch."""

    class cuda:  # noqa: N801
        @staticmethod
        def is_available():
            return False

    @staticmethod
    def device(name):
        return name


# -- files: the CLI's --fix and --diff --------------------------------------------------------
# The toy scripts below have no CPU path, so their findings are possible: the runs are in the
# preview tier (--preview), which fixes them as the default tier fixes certain ones.

BUGGY = "import torch\n\n\nx = torch.zeros(3)  # data\nx.cuda()\n"


def test_fix_rewrites_and_reports(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    status, out, _ = run_cli("--isolated", "--preview", "--fix", "m.py", cwd=tmp_path)
    assert status == 0
    assert out.strip().endswith("Fixed 2 problems, 0 remaining.")
    assert path.read_text() == "import torch\n" + DEFAULT + "\n\nx = torch.zeros(3)  # data\nx = x.to(device)\n"
    # A second run changes nothing and finds nothing.
    status, out, _ = run_cli("--isolated", "--preview", "--fix", "m.py", cwd=tmp_path)
    assert status == 0 and "Fixed 0 problems, 0 remaining." in out


def test_fix_reports_what_remains(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("import torch\nstate = torch.load(p)\nx = y.cuda()\n")
    status, out, _ = run_cli("--isolated", "--preview", "--fix", "m.py", cwd=tmp_path)
    assert status == 1
    assert "m.py:3:9: TDL004 [~]" in out  # the unsafe fix was not applied, nor marked as if it would be
    assert out.strip().endswith("Fixed 1 problem, 1 remaining.")


def test_diff_writes_nothing(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    status, out, err = run_cli("--isolated", "--preview", "--diff", "m.py", cwd=tmp_path)
    assert status == 1
    assert "-x.cuda()\n+x = x.to(device)\n" in out and out.startswith("--- a/m.py\n+++ b/m.py\n")
    assert path.read_text() == BUGGY
    assert "Would fix 2 problems." in err
    (tmp_path / "clean.py").write_text("x = 1\n")
    assert run_cli("--isolated", "--preview", "--diff", "clean.py", cwd=tmp_path)[0] == 0


def test_crlf_bom_and_mode_are_kept(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\nx = torch.zeros(3)\r\nx.cuda()\r\n")
    os.chmod(path, 0o750)
    assert run_cli("--isolated", "--preview", "--fix", "m.py", cwd=tmp_path)[0] == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert data.count(b"\r\n") == data.count(b"\n") == 4
    assert data.endswith(b"x = x.to(device)\r\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    # no temporary file left behind (the result cache is a directory of its own, not a leftover)
    assert sorted(os.listdir(tmp_path)) == [".torchdev_lint_cache", "m.py"]


def test_latin1_file_stays_latin1(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nimport torch\nname = 'café'\nx = y.cuda()\n".encode("latin-1"))
    assert run_cli("--isolated", "--preview", "--fix", "m.py", cwd=tmp_path)[0] == 0
    text = path.read_bytes().decode("latin-1")
    assert "name = 'café'" in text and "x = y.to(device)" in text


def test_read_only_file_is_an_error_and_untouched(tmp_path, run_cli):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    os.chmod(path, 0o444)
    (tmp_path / "other.py").write_text(BUGGY)
    status, out, err = run_cli("--isolated", "--preview", "--fix", ".", cwd=tmp_path)
    assert status == 2
    assert "m.py: error: fix not written: file is read-only" in err
    assert path.read_text() == BUGGY
    assert "x = x.to(device)" in (tmp_path / "other.py").read_text()


def test_fix_that_would_break_the_file_changes_nothing(tmp_path, monkeypatch):
    from torchdev_lint import fixes

    monkeypatch.setattr(fixes, "move_call", lambda call, device, keep=(): libcst.Name("lambda"))
    result = fix_file(lint_source("m.py", "import torch\nx = y.cuda()\n", ALL, preview=True))
    assert result.source == "import torch\nx = y.cuda()\n" and result.fixed == []
    assert "would not parse" in result.error.message


@pytest.mark.skipif(gpu_available(), reason="crashes only on a machine without a GPU")
def test_runnable_project_crashes_before_and_trains_after_fix(tmp_path, run_cli):
    """testdata/project on a machine without a GPU (a CPU build of torch, or a CUDA build that
    finds no driver): `.cuda()` and a GPU-saved checkpoint crash it;
    after `--fix --unsafe-fixes` it loads the checkpoint and trains."""
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    project = tmp_path / "project"
    shutil.copytree(ROOT / "testdata" / "project", project)
    env = {**os.environ, "PYTHONPATH": str(project)}
    subprocess.run([sys.executable, str(ROOT / "testdata" / "make_gpu_checkpoint.py"), "tinynet.pt"],
                   cwd=project, check=True, env=env)
    train = [sys.executable, "train.py", "--epochs", "1"]
    before = subprocess.run(train, cwd=project, capture_output=True, text=True)
    assert before.returncode != 0 and NO_GPU_ERROR.search(before.stderr), before.stderr
    run_cli("--isolated", "--preview", "--fix", "--unsafe-fixes", ".", cwd=project)
    after = subprocess.run(train, cwd=project, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert "epoch 0: loss" in after.stdout
