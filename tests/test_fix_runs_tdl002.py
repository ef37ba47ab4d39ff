"""TDL002's fix, run for real on a machine without a GPU: a program with "cuda" typed in as its
device crashes here ("Torch not compiled with CUDA enabled" on a CPU build, "Found no NVIDIA
driver" on a CUDA build); after `torchdev-lint --fix`
(safe fixes only) it trains, saves, loads and evaluates on the CPU."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, gpu_available
from torchdev_lint.trace.text import NO_GPU_ERROR

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
    pytest.mark.skipif(gpu_available(), reason="crashes only on a machine without a GPU"),
]

PROGRAM = ROOT / "testdata" / "rules" / "tdl002_before.py"


def run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


def test_program_crashes_without_cuda_and_runs_after_the_fix(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    before = run(program)
    assert before.returncode != 0
    assert NO_GPU_ERROR.search(before.stderr), before.stderr

    status, out, _ = run_cli("--isolated", "--preview", "--select", "TDL002", program)
    assert status == 1
    assert out.count("TDL002") == 5

    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL002", "--fix", program)
    assert status == 0, out + err
    assert "Fixed 5 problems, 0 remaining." in out
    fixed = (tmp_path / "program.py").read_text()
    # One default device, added once after the imports and used for the plain "cuda"s;
    # the "cuda:0" index and the module-level setting are kept behind an availability check.
    assert fixed.count('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")') == 1
    assert 'torch.randn(n, 4, device=device)' in fixed
    assert 'nn.Linear(4, 2).to(device)' in fixed
    assert 'torch.load(path, map_location=device)' in fixed
    assert '.to("cuda:0" if torch.cuda.is_available() else "cpu")' in fixed
    assert 'EVAL_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in fixed

    after = run(program)
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith("ok loss=")

    # Fixing again changes nothing.
    run_cli("--isolated", "--preview", "--select", "TDL002", "--fix", program)
    assert (tmp_path / "program.py").read_text() == fixed
