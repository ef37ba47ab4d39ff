"""TDL007's fix, run for real (torch CPU): submodules kept in a plain list or dict are
missing from `parameters()`/`state_dict()`, ignored by `.eval()` and left behind by
`model.to(...)`; wrapped in `nn.ModuleList`/`nn.ModuleDict` they are registered.

A dtype move goes through the same `Module._apply` as a device move, and the `meta`
device stands in for an accelerator: the forward of a model whose layers stayed on the
CPU fails with "... is not on the expected device", as a CPU/CUDA mix would."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

PROGRAM = ROOT / "testdata" / "rules" / "tdl007_before.py"


def run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


def test_sublayers_are_registered_after_the_fix(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    before = run(program)
    assert before.returncode != 0
    assert "is not on the expected device" in before.stderr
    assert "parameters: 20\n" in before.stdout  # the trunk only
    assert "state_dict: ['trunk.bias', 'trunk.weight']" in before.stdout
    assert "dropout training after eval(): [True, True]" in before.stdout
    assert "dtypes after .to(float64): torch.float32 torch.float32" in before.stdout

    # Unsafe: parameters() and state_dict() change, so the safe --fix leaves it alone.
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL007", "--fix", program)
    assert status == 1 and program.read_text() == PROGRAM.read_text(), out + err

    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL007", "--fix", "--unsafe-fixes", program)
    assert status == 0, out + err
    text = program.read_text()
    assert "self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])" in text
    assert "self.heads = nn.ModuleDict()" in text

    after = run(program)
    assert after.returncode == 0, after.stderr
    assert "parameters: 70\n" in after.stdout
    assert "'blocks.0.weight'" in after.stdout and "'heads.age.1.weight'" in after.stdout
    assert "dropout training after eval(): [False, False]" in after.stdout
    assert "dtypes after .to(float64): torch.float64 torch.float64" in after.stdout
    assert "meta forward: {'age': (3, 1), 'score': (3, 1)}" in after.stdout

    # Idempotent.
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL007", "--fix", "--unsafe-fixes", program)
    assert status == 0 and program.read_text() == text
