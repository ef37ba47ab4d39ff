"""TDL006's fix, run for real (torch CPU): tensors kept as plain module attributes are
left behind by `model.to(...)`; registered as non-persistent buffers they follow it.

A dtype move (`model.to(torch.float64)`) goes through the same `Module._apply` as a device
move, and the `meta` device stands in for an accelerator: a CPU tensor meeting a meta
tensor fails like a CPU tensor meeting a CUDA one ("... is not on the expected device")."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

PROGRAM = ROOT / "testdata" / "rules" / "tdl006_before.py"


def run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


def lines(stdout):
    return {line.split(":", 1)[0].split(" ", 1)[0]: line for line in stdout.splitlines()}


def test_attributes_follow_the_model_after_the_fix(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    before = run(program)
    # Before: the attributes stay float32 on the CPU and are no buffers; the forward on the
    # moved model fails on the device mismatch.
    assert before.returncode != 0
    assert "is not on the expected device" in before.stderr
    assert "'mean': 'torch.float32'" in before.stdout
    assert "buffers: []" in before.stdout
    assert "after .to('meta'): cpu cpu" in before.stdout

    # The safe fix registers the bool mask only (a dtype move cannot touch it); the float
    # attributes need --unsafe-fixes, because model.half() would now cast them too.
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL006", "--fix", program)
    assert status == 1, out + err  # two findings remain
    text = program.read_text()
    assert 'self.register_buffer("mask", torch.tril(torch.ones(n, n)).bool(), persistent=False)' in text
    assert "self.mean = torch.tensor(mean).view(1, -1)" in text
    assert run(program).returncode != 0

    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL006", "--fix", "--unsafe-fixes", program)
    assert status == 0, out + err
    text = program.read_text()
    assert 'self.register_buffer("mean", torch.tensor(mean).view(1, -1), persistent=False)' in text
    after = run(program)
    assert after.returncode == 0, after.stderr
    got, was = lines(after.stdout), lines(before.stdout)
    assert got["cpu"] == was["cpu"]  # same numbers on the CPU
    assert "'mean': 'torch.float64'" in after.stdout
    assert "buffers: ['0.mean', '0.std', '1.mask']" in after.stdout
    # persistent=False: checkpoints keep the same keys.
    assert got["state_dict"] == was["state_dict"]
    assert "after .to('meta'): meta meta" in after.stdout
    assert "meta forward meta (3, 3)" in after.stdout

    # Idempotent: nothing left, a second fix changes nothing.
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL006", "--fix", "--unsafe-fixes", program)
    assert status == 0 and program.read_text() == text
