"""`pytest --simulate-gpu` on the shapes that made real suites fail falsely (issue 42).

kornia, torchmetrics and others, each made to choose CUDA, failed under the simulated GPU for
reasons a GPU does not have: a metric whose ``__eq__`` builds a new metric made the tracer recurse,
``copy.deepcopy`` dropped a buffer's device, ``type_as``/``type(x.type())`` left a tensor on the
CPU, TorchScript read the real device, a CPU kernel lacked the Half a GPU run uses. Each is a
few lines of a test here, run once in a child pytest (the plugin through its entry point, as for
a user; this process never imports torch). A library's own device check (kornia's "Patch and
homography must be on the same device") is a real GPU failure: it fails, and the summary counts
it as a device problem.
"""

import importlib.metadata
import os

import pytest

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.skipif(
    not any(e.value == "torchdev_lint.integrations.pytest_plugin"
            for e in importlib.metadata.entry_points(group="pytest11")),
    reason="the plugin's entry point is not installed (pip install -e .)")

LIBRARY = """\
import torch


def warp(patch, homography):
    if patch.device != homography.device:
        raise TypeError("Patch and homography must be on the same device")
    return patch * homography.sum()
"""

TESTS = """\
import copy

import pytest
import torch
import torch.nn as nn

from mylib.geometry import warp


class Metric(nn.Module):
    \"\"\"As torchmetrics' Metric: __eq__ builds another metric, __hash__ reads its state.\"\"\"

    def __init__(self):
        super().__init__()
        self._defaults = {}
        self._reductions = {}
        self.register_buffer("total", torch.zeros(2))

    def update(self, x):
        self.total += x

    def __eq__(self, other):
        return Metric()

    def __hash__(self):
        return hash((type(self).__name__, id(self)))


class Optim(torch.optim.SGD):
    def __eq__(self, other):
        raise AssertionError("an optimizer compared")

    def __hash__(self):
        return id(self)


def test_a_module_defining_eq():
    metric = Metric().cuda()
    metric.update(torch.ones(2, device="cuda"))


def test_an_optimizer_defining_eq():
    model = nn.Linear(2, 2)
    opt = Optim(model.parameters(), lr=0.1)
    model.cuda()
    model(torch.randn(3, 2, device="cuda")).sum().backward()
    opt.step()


def test_deepcopy_of_a_metric_keeps_its_device():
    metric = copy.deepcopy(Metric().cuda())
    metric.update(torch.ones(2, device="cuda"))


def test_an_ema_copy_of_a_model_with_batchnorm():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).cuda()
    ema = copy.deepcopy(model)
    ema(torch.randn(4, 2, device="cuda"))


def test_type_as():
    x = torch.zeros(2).type_as(torch.ones(2, device="cuda"))
    assert x.is_cuda
    x + torch.ones(2, device="cuda")


def test_type_of_a_type_string():
    ref = torch.ones(2, device="cuda")
    assert ref.type() == "torch.cuda.FloatTensor"
    torch.zeros(2).type(ref.type()) + ref


@torch.jit.script
def follow(x, y):
    return x.to(y.device) + torch.zeros(2, device=y.device) + y


class Follow(nn.Module):
    def forward(self, x):
        return x + torch.ones(2, device=x.device)


def test_a_scripted_function():
    assert follow(torch.zeros(2), torch.ones(2, device="cuda")).is_cuda


def test_a_scripted_and_a_traced_module():
    x = torch.ones(2, device="cuda")
    assert torch.jit.script(Follow())(x).is_cuda
    assert torch.jit.trace(Follow(), x)(x).is_cuda


def test_half_fft():
    torch.fft.rfft(torch.randn(8, device="cuda").half())


def test_half_lu_in_autocast():
    with torch.autocast("cuda", dtype=torch.float16):
        torch.linalg.lu_factor(torch.randn(3, 3, device="cuda").half())


def test_a_librarys_own_device_check():
    warp(torch.randn(2, device="cuda"), torch.eye(3))
"""


INDEX_DEVICE = """\
import torch

# torch resolves an index alone through its C++ accelerator registry, which the simulator cannot reach
DEVICE = torch.device(0) if torch.cuda.is_available() else torch.device("cpu")


def test_on_the_device():
    assert torch.zeros(2, device=DEVICE).is_cuda


def test_named_by_index_in_the_test():
    assert torch.zeros(2, device=torch.device(0)).is_cuda
"""


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """One `pytest --simulate-gpu` run of the sample project (a plain CPU run would fail every
    test at its first `.cuda()`: the suite is written for a GPU)."""
    root = tmp_path_factory.mktemp("suite")
    (root / "mylib").mkdir()
    (root / "mylib" / "__init__.py").write_text("")
    (root / "mylib" / "geometry.py").write_text(LIBRARY)
    (root / "tests").mkdir()
    (root / "tests" / "test_shapes.py").write_text(TESTS)
    (root / "tests" / "test_index_device.py").write_text(INDEX_DEVICE)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v",
                           "--simulate-gpu"], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


def _outcome(output: str, test: str, module: str = "test_shapes") -> str:
    for line in output.splitlines():
        if line.startswith(f"tests/{module}.py::{test} "):
            return line.split()[1]
    raise AssertionError(f"{test} not in the output:\n{output}")


@pytest.mark.parametrize("test", [
    "test_a_module_defining_eq", "test_an_optimizer_defining_eq", "test_deepcopy_of_a_metric_keeps_its_device",
    "test_an_ema_copy_of_a_model_with_batchnorm", "test_type_as", "test_type_of_a_type_string",
    "test_a_scripted_function", "test_a_scripted_and_a_traced_module"])
def test_what_a_gpu_runs_passes(simulated, test):
    assert _outcome(simulated, test) == "PASSED", simulated


@pytest.mark.parametrize(("test", "reason"), [
    ("test_half_fft", "not simulated: fft_rfft has no CPU Half kernel"),
    ("test_half_lu_in_autocast", "not simulated: lu has no CPU Half kernel")])
def test_a_cpu_kernel_missing_for_a_gpus_dtype_is_a_skip(simulated, test, reason):
    assert _outcome(simulated, test) == "SKIPPED", simulated
    assert any(line.startswith("SKIPPED") and reason in line for line in simulated.splitlines()), simulated
    assert f"tests/test_shapes.py::{test}: {reason}" in simulated


def test_a_librarys_device_check_is_a_device_problem(simulated):
    assert _outcome(simulated, "test_a_librarys_own_device_check") == "FAILED", simulated
    summary = simulated.split("torchdev-lint: device problems on the simulated GPU", 1)[1]
    assert "tests/test_shapes.py::test_a_librarys_own_device_check FAILED" in summary
    assert "mylib/geometry.py:6:" in summary and "TDL100 device-mismatch" in summary, summary
    assert "TypeError: Patch and homography must be on the same device at mylib/geometry.py:6 " \
           "(called from tests/test_shapes.py:" in summary, summary
    assert "1 device problem in 1 test" in summary, summary


def test_an_accelerator_named_by_index_alone_is_not_simulated(simulated):
    """`torch.device(0)` at import: the module's collection is a skip that says why, not an error."""
    assert "ERROR tests/test_index_device.py" not in simulated, simulated
    assert "error" not in simulated.splitlines()[-1], simulated
    assert any(line.startswith("SKIPPED") and "test_index_device.py" in line
               and "torch.device(0), an index alone" in line for line in simulated.splitlines()), simulated
