"""`fix-device`: fixes spell the default device as CUDA-or-CPU or through `torch.accelerator`,
and reuse a project's own device helper where it has one. The scripts have no CPU path of
their own (their findings are possible), so the runs are in the preview tier."""

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
    status, _, err = run_cli("--isolated", "--preview", "--fix-device", "accelerator", "--fix", "train.py",
                             cwd=tmp_path)
    assert status == 0, err
    fixed = script.read_text()
    assert ('device = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            in fixed)
    assert "y = x.to(device)" in fixed
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "cpu"]  # this torch has no accelerator


def test_fix_device_from_pyproject_and_checked(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nfix-device = "accelerator"\npreview = true\n')
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
    _, out, _ = run_cli("--isolated", "--preview", "--unsafe-fixes", "--diff", "ds.py", "hf.py", "own.py",
                        cwd=tmp_path)
    assert "+y = x.to(get_accelerator().current_device_name())" in out
    assert "+    x = x.to(accelerator.device)" in out
    assert "+y = torch.zeros(2).to(device)" in out


HELPERS = '''\
import torch


def get_device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def cuda_device():  # always CUDA: reusing it would fix nothing
    return torch.device("cuda")


def device_of(rank):  # needs an argument
    return torch.device("cuda", rank)


def select(name="", verbose=True):  # resolves a requested device, and says so
    if verbose:
        print("selecting", name)
    return torch.device(name or "cpu")
'''
TRAIN = '''\
import torch

from .utils.device import get_device


def main():
    x = torch.zeros(2)
    return x.cuda()


y = torch.zeros(2).cuda()
print(main().device.type, y.device.type)
'''


def test_a_device_helper_of_the_package_is_reused(tmp_path, run_cli):
    """A helper defined in another module of the package (found by the project index) and
    imported where the fix lands is reused; one that is not imported, always CUDA, or takes
    parameters is not. The fixed program runs."""
    pkg = tmp_path / "pkg"
    (pkg / "utils").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "utils" / "__init__.py"):
        init.write_text("")
    (pkg / "utils" / "device.py").write_text(HELPERS)
    (pkg / "train.py").write_text(TRAIN)
    (pkg / "other.py").write_text(
        "import torch\n\nfrom .utils.device import cuda_device, device_of, select\n\ny = torch.zeros(2).cuda()\n")
    (tmp_path / "own.py").write_text(
        "import torch\n\n\ndef pick() -> torch.device:\n"
        '    return torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\n'
        "def main():\n    return torch.zeros(2).cuda()\n")
    status, _, err = run_cli("--isolated", "--preview", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert status == 0, err
    train = (pkg / "train.py").read_text()
    assert "    return x.to(get_device())\n" in train and "y = torch.zeros(2).to(get_device())\n" in train
    assert "device = torch.device" not in train
    other = (pkg / "other.py").read_text()
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in other
    assert "y = torch.zeros(2).to(device)\n" in other
    assert "    return torch.zeros(2).to(pick())\n" in (tmp_path / "own.py").read_text()
    done = subprocess.run([sys.executable, "-m", "pkg.train"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "cpu"]


def test_a_package_helper_is_not_used_before_it_is_imported(tmp_path, run_cli):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "device.py").write_text(HELPERS)
    source = ("import torch\n\ny = torch.zeros(2).cuda()\n\nfrom .device import get_device\n\n\n"
              "def f():\n    return torch.zeros(2).cuda()\n")
    (tmp_path / "pkg" / "late.py").write_text(source)
    _, out, _ = run_cli("--isolated", "--preview", "--no-cache", "--unsafe-fixes", "--diff", "pkg/late.py",
                        cwd=tmp_path)
    assert "+y = torch.zeros(2).to(device)" in out  # module level, above the import: our default
    assert "+    return torch.zeros(2).to(get_device())" in out  # runs after every import


def test_a_keyword_named_device_before_the_imports_is_no_read_of_it():
    # `config.setup(device="auto")` runs before `import torch`, but names a keyword: the
    # default `device` can still be defined after the import (the fix used to give up).
    import textwrap

    import torchdev_lint.rules  # noqa: F401
    from torchdev_lint.engine import lint_source
    from torchdev_lint.fixer import fix_file
    from torchdev_lint.rule import Rule

    code = textwrap.dedent("""\
        import config
        config.setup(device="auto")
        import torch
        x = torch.zeros(2).cuda()
    """)
    tdl001 = [Rule.registry["TDL001"]]
    fixed = fix_file(lint_source("t.py", code, tdl001, preview=True), unsafe=False).source
    assert fixed == code.replace("import torch\n", 'import torch\ndevice = torch.device("cuda" if '
                                 'torch.cuda.is_available() else "cpu")\n').replace(".cuda()", ".to(device)")
    # A real read of an unbound `device` (a star import's, say): no module-level default.
    reading = code.replace('config.setup(device="auto")', "config.setup(device)")
    fixed = fix_file(lint_source("t.py", reading, tdl001, preview=True), unsafe=False).source
    assert "\ndevice = " not in fixed
    assert 'x = torch.zeros(2).to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))' in fixed
