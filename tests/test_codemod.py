"""The fixes run as a LibCST codemod command, through libcst.tool itself.

The toy sources have no CPU path, so their findings are possible since confidence tiers: the
codemod runs in the preview tier (its `--preview`)."""

import subprocess
import sys

from conftest import ROOT


def run_codemod(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format", "--hide-progress",
         "torchdev_lint.codemod.FixDevicePlacement", *args, str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )


def test_codemod_applies_safe_fixes(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nx = torch.zeros(3)\nx.cuda()  # move\nstate = torch.load(p)\n")
    process = run_codemod(tmp_path, "--preview")
    assert process.returncode == 0, process.stderr
    assert path.read_text() == (
        "import torch\n"
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "x = torch.zeros(3)\nx = x.to(device)  # move\nstate = torch.load(p)\n"
    )


def test_codemod_unsafe_fixes_option(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nstate = torch.load(p)\n")
    assert run_codemod(tmp_path, "--preview", "--unsafe-fixes").returncode == 0
    assert path.read_text() == 'import torch\nstate = torch.load(p, map_location="cpu")\n'
