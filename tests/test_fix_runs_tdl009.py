"""TDL009's fix, run for real (torch CPU): `.numpy()` on a tensor that may live on an
accelerator gets `.cpu()` (and `.detach()` where it may require grad) before it.

A CPU-only machine cannot show the GPU's TypeError, so the tests show what can be shown
here: the fixed program has `.cpu()` before every `.numpy()`, still runs and prints the
same values; and where the tensor requires grad, the program that failed before (on the
CPU too) runs after the fix."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("numpy") is None,
    reason="needs torch and numpy",
)

PROGRAMS = ROOT / "testdata" / "rules"


def run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


def fix(path, run_cli):
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL009", "--fix", "--unsafe-fixes", path)
    assert status == 0, out + err
    return path.read_text()


def test_fixed_program_moves_to_the_cpu_first_and_prints_the_same(tmp_path, run_cli):
    program = shutil.copy(PROGRAMS / "tdl009_before.py", tmp_path / "program.py")
    before = run(program)
    assert before.returncode == 0, before.stderr
    fixed = fix(tmp_path / "program.py", run_cli)
    # Every `.numpy()` on the model's outputs or on the moved batch now copies to the host
    # first; no-grad code needs no `.detach()`.
    code = fixed.split('"""', 2)[2]  # after the docstring
    assert code.count(".cpu().numpy()") == 3
    assert ".detach()" not in code
    assert 'batch["x"].cpu().numpy()' in fixed
    after = run(program)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout
    # Nothing left to find, and fixing again changes nothing.
    status, out, _ = run_cli("--isolated", "--preview", "--select", "TDL009", program)
    assert status == 0, out
    assert fix(program, run_cli) == fixed


def test_output_that_requires_grad_is_detached(tmp_path, run_cli):
    program = shutil.copy(PROGRAMS / "tdl009_grad_before.py", tmp_path / "program.py")
    before = run(program)
    assert before.returncode != 0
    assert "requires grad" in before.stderr
    fixed = fix(tmp_path / "program.py", run_cli)
    assert "array = out.detach().cpu().numpy()" in fixed
    after = run(program)
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith("ok")

