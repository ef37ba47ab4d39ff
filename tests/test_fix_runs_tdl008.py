"""TDL008's fix, run for real. A CPU-only machine cannot put a model on a GPU, and on the
CPU a factory without `device=` is harmless, so the program also runs its model on the
`meta` device, which (like CUDA) refuses to mix its tensors with CPU tensors and (like
CUDA) accepts 0-dim CPU scalars. Before the fix the meta run fails with the mismatch;
after `--fix --unsafe-fixes` every flagged factory carries `device=<input>.device`, the
meta run works and the CPU run prints the same values as before."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

PROGRAM = ROOT / "testdata" / "rules" / "tdl008_before.py"


def run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


def test_forward_mixes_devices_before_and_runs_after_the_fix(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    before = run(program)
    assert before.returncode != 0
    assert "Tensor on device cpu is not on the expected device meta!" in before.stderr
    cpu_line = before.stdout.splitlines()[0]
    assert cpu_line.startswith("cpu sum=")

    # The deterministic factory on an annotated input is a safe fix; the random one and
    # the one on an unannotated helper parameter are unsafe.
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL008", "--fix", program)
    assert "Fixed 1 problem, 2 remaining." in out, out + err
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL008", "--fix", "--unsafe-fixes", program)
    assert status == 0, out + err
    fixed = (tmp_path / "program.py").read_text()
    assert "torch.arange(x.size(1), device=x.device)" in fixed
    assert 'torch.full((size, size), float("-inf"), device=h.device)' in fixed
    assert "torch.randn(x.shape, device=x.device)" in fixed
    assert "torch.tensor(8.0).sqrt()" in fixed  # 0-dim: not flagged, not changed

    after = run(program)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == [cpu_line, "meta shape=(2, 5, 8)"]

    # Nothing left, and fixing again changes nothing.
    status, out, _ = run_cli("--isolated", "--preview", "--select", "TDL008", program)
    assert status == 0, out
    run_cli("--isolated", "--preview", "--select", "TDL008", "--fix", "--unsafe-fixes", program)
    assert (tmp_path / "program.py").read_text() == fixed
