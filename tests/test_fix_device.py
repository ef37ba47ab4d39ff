"""`fix-device`: fixes spell the default device as CUDA-or-CPU or through `torch.accelerator`,
and reuse a project's own device helper where it has one."""

import subprocess
import sys

SCRIPT = """\
import torch

x = torch.zeros(2)
y = x.cuda()
z = x.cuda(0)
print(y.device.type, z.device.type)
"""


def test_accelerator_mode_writes_torch_accelerator_and_the_program_runs(tmp_path, run_cli):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    status, _, err = run_cli("--isolated", "--fix-device", "accelerator", "--fix", "train.py", cwd=tmp_path)
    assert status == 0, err
    fixed = script.read_text()
    assert ('device = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            in fixed)
    assert "y = x.to(device)" in fixed
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "cpu"]  # this torch has no accelerator


def test_fix_device_from_pyproject_and_checked(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nfix-device = "accelerator"\n')
    (tmp_path / "m.py").write_text(SCRIPT)
    _, out, _ = run_cli("--diff", "m.py", cwd=tmp_path)
    assert "+device = torch.accelerator.current_accelerator(check_available=True)" in out
    _, out, _ = run_cli("--diff", "--fix-device", "cuda-or-cpu", "m.py", cwd=tmp_path)
    assert '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in out
    status, _, err = run_cli("--fix-device", "gpu", "m.py", cwd=tmp_path)
    assert status == 2 and '--fix-device must be "cuda-or-cpu" or "accelerator", not \'gpu\'' in err
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nfix-device = "mps"\n')
    status, _, err = run_cli("m.py", cwd=tmp_path)
    assert status == 2 and "'fix-device' must be" in err


def test_a_project_device_helper_is_reused(tmp_path, run_cli):
    (tmp_path / "ds.py").write_text(
        "import torch\nfrom deepspeed.accelerator import get_accelerator\n\nx = torch.zeros(2)\ny = x.cuda()\n")
    (tmp_path / "hf.py").write_text(
        "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n\n\n"
        "def main():\n    x = torch.zeros(2)\n    x = x.cuda()\n")
    (tmp_path / "own.py").write_text(  # a function named like DeepSpeed's is not DeepSpeed's
        "import torch\n\n\ndef get_accelerator():\n    return 'x'\n\n\ny = torch.zeros(2).cuda()\n")
    _, out, _ = run_cli("--isolated", "--unsafe-fixes", "--diff", "ds.py", "hf.py", "own.py", cwd=tmp_path)
    assert "+y = x.to(get_accelerator().current_device_name())" in out
    assert "+    x = x.to(accelerator.device)" in out
    assert "+y = torch.zeros(2).to(device)" in out
