"""The pytest plugin (`pytest --simulate-gpu`), on a small project whose suite passes on a CPU.

Each run is a real `python -m pytest` in a child process (the plugin comes in through its
`pytest11` entry point, as for a user); this process never imports torch. A run costs seconds
(torch's import), so each distinct run happens once and the tests that read it share it.
"""

import importlib.metadata
import os
import re

import pytest

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.skipif(
    not any(e.value == "torchdev_lint.integrations.pytest_plugin"
            for e in importlib.metadata.entry_points(group="pytest11")),
    reason="the plugin's entry point is not installed (pip install -e .)")

MODEL = """\
import torch
import torch.nn as nn


class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        offset = torch.ones(4)
        return self.linear(x) + offset


class GoodScaler(Scaler):
    def forward(self, x):
        offset = torch.ones(4, device=x.device)
        return self.linear(x) + offset


def predict(model, batch):
    if torch.cuda.is_available():
        model = model.to("cuda")
        batch = batch.to("cuda")
    return model(batch)


def scores(model, batch):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = model.to(device)(batch.to(device))
    return out.detach().cpu().numpy()
"""

TESTS = """\
import pytest
import torch

from mypkg.model import GoodScaler, Scaler, predict, scores

HAS_CUDA = torch.cuda.is_available()


def test_gpu_branch():
    out = predict(Scaler(), torch.randn(2, 4))
    assert out.shape == (2, 4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_skipped_without_cuda():
    x = torch.randn(3, 4).cuda()
    w = torch.randn(4, 4)
    assert (x @ w).shape == (3, 4)


def test_correct_gpu_path():
    assert scores(GoodScaler(), torch.randn(2, 4)).shape == (2, 4)
    assert predict(GoodScaler(), torch.randn(2, 4)).device.type == ("cuda" if HAS_CUDA else "cpu")
"""


CONFTEST = """\
import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)
"""

TEST_DEVICES = """\
import torch

from mypkg.model import GoodScaler


def test_on_each_device(device):
    model = GoodScaler().to(device)
    assert model(torch.randn(2, 4, device=device)).device.type == device.type
"""

TEST_NUMPY = """\
import torch


def test_to_numpy():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(3).to(device)
    assert x.numpy().shape == (3,)
"""

TEST_UNSUPPORTED = """\
import os

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@needs_cuda
def test_second_gpu():
    torch.randn(2).to("cuda:1")


@needs_cuda
def test_nccl():
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("nccl", rank=0, world_size=1)


@needs_cuda
def test_gpu_only_package():
    # (not triton: it comes with the CUDA builds of torch, and imports without a GPU)
    import flash_attn  # noqa: F401


@needs_cuda
def test_cuda_generator_of_torch_C():
    torch.randn(2, device="cuda", generator=torch._C.Generator(device="cuda"))


@needs_cuda
def test_real_failure_still_fails():
    assert torch.randn(2, device="cuda").sum() == 12345
"""

TEST_CAUGHT = """\
import pytest
import torch


def test_expects_the_gpu_error():
    if torch.cuda.is_available():
        x = torch.randn(2, device="cuda")
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.randn(2)
"""

TEST_NEEDS_CUDA = """\
import torch


def test_silently_needs_cuda():
    x = torch.zeros(3).cuda()
    assert x.sum() == 0
"""

TEST_CUDA_BUILD = """\
import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


class AcceleratorError(RuntimeError):
    \"\"\"As torch 2.8+ names the real CUDA runtime's errors.\"\"\"


@needs_cuda
def test_driver_too_old():
    # what the default (CUDA) wheel of torch raises on a machine without a GPU driver
    raise RuntimeError("CUDA error: CUDA driver version is insufficient for CUDA runtime version")


@needs_cuda
def test_accelerator_error():
    raise AcceleratorError("CUDA error: no CUDA-capable device is detected")


@needs_cuda
def test_wrapped():
    try:
        raise AcceleratorError("unknown error")
    except AcceleratorError as error:
        raise ValueError("could not set up the kernels") from error


@needs_cuda
def test_a_real_failure():
    assert torch.ones(2, device="cuda").sum() == 3
"""

TEST_SINGLE = """\
import pytest
import torch

from mypkg.model import Scaler, predict


@pytest.mark.simulate_gpu
def test_marked():
    assert torch.cuda.is_available()
    predict(Scaler(), torch.randn(2, 4))


def test_fixture(simulated_gpu):
    assert simulated_gpu.mode == "sim"
    x = torch.randn(2, device="cuda")
    assert x.is_cuda and str(x.device) == "cuda:0"
    assert [e["kind"] for e in simulated_gpu.events()] == ["cuda-request"]


def test_plain():
    assert not torch.cuda.is_available()
"""

TEST_UNITTEST = """\
import unittest

import torch

from mypkg.model import Scaler


class TestScaler(unittest.TestCase):
    @unittest.skipIf(not torch.cuda.is_available(), "no CUDA")
    def test_on_the_gpu(self):
        model = Scaler().cuda()
        self.assertEqual(model(torch.randn(2, 4, device="cuda")).shape, (2, 4))
"""

TEST_MODULE_TO = """\
import torch


def test_a_module_moved_by_keyword():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Linear(2, 2).to(dtype=torch.float64).to(device=device)
    assert model.weight.device.type == device
"""

TEST_SPARSE = """\
import torch


def test_sparse_on_the_gpu():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    s = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2), (2, 2), device=device)
    factor = torch.tensor([1.0, 2.0], device=device)
    assert (s._indices().float().t() @ factor).shape == (2,)
"""

TEST_COMPILE = """\
import torch


def test_compiled_on_the_cpu():
    double = torch.compile(lambda x: x * 2, backend="eager")
    assert double(torch.ones(2)).sum().item() == 4
"""

TEST_SILENT = """\
import torch


def test_discarded_move():
    x = torch.randn(3)
    x.to("cuda")
    assert x.sum().item() == x.sum().item()


def warm_up(model, optimizer):
    model(torch.randn(1, 2)).sum().backward()
    optimizer.step()


def test_state_left_behind():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    warm_up(model, optimizer)
    model.to("cuda")


def test_moved_right():
    x = torch.randn(3)
    x = x.to("cuda")
    assert x.is_cuda
"""

TEST_AUTOCAST = """\
import pytest
import torch
import torch.nn as nn

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@needs_cuda
def test_half_inputs_to_a_float_layer():
    model = nn.Linear(4, 2).cuda()
    with torch.amp.autocast("cuda"):
        out = model(torch.randn(3, 4, device="cuda").half())
    assert out.dtype == torch.float16


@needs_cuda
def test_decorated_bfloat16():
    model = nn.Linear(4, 2).cuda()

    @torch.autocast("cuda", dtype=torch.bfloat16)
    def forward(x):
        return model(x)

    assert forward(torch.randn(3, 4, device="cuda")).dtype == torch.bfloat16
    assert model(torch.randn(3, 4, device="cuda")).dtype == torch.float32  # autocast is over


@needs_cuda
def test_an_op_the_cpu_autocast_leaves_alone():
    with torch.amp.autocast("cuda"):
        out = torch.mv(torch.randn(3, 4, device="cuda").half(), torch.randn(4, device="cuda"))
    assert out.dtype == torch.float16


@needs_cuda
def test_a_dtype_bug_outside_autocast():
    torch.mv(torch.randn(3, 4, device="cuda").half(), torch.randn(4, device="cuda"))
"""

TEST_FAKE_TRACE = """\
import torch
from torch.fx.experimental.proxy_tensor import make_fx

needs_cuda = __import__("pytest").mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@needs_cuda
def test_a_trainable_weight_traced_with_fake_tensors():
    w = torch.randn(5, 4, device="cuda", requires_grad=True)
    assert len(list(make_fx(lambda w: w * 2, tracing_mode="fake")(w).graph.nodes)) == 3


@needs_cuda
def test_a_graph_replayed_on_the_device_it_was_traced_for():
    add_eye = lambda w: w + torch.eye(4, dtype=w.dtype, device=w.device)
    w = torch.randn(4, 4, device="cuda")
    assert make_fx(add_eye, tracing_mode="fake")(w)(w).device.type == "cuda"
"""

FILES = {
    "fx/test_fake_trace.py": TEST_FAKE_TRACE,
    "mypkg/__init__.py": "",
    "mypkg/model.py": MODEL,
    "tests/conftest.py": CONFTEST,
    "tests/test_model.py": TESTS,
    "tests/test_devices.py": TEST_DEVICES,
    "tests/test_numpy.py": TEST_NUMPY,
    "tests/test_unsupported.py": TEST_UNSUPPORTED,
    "tests/test_caught.py": TEST_CAUGHT,
    "cpuonly/test_needs_cuda.py": TEST_NEEDS_CUDA,  # fails on a CPU: only the cpu-only run takes it
    "cpuonly/test_compile.py": TEST_COMPILE,
    "unit/test_unittest_style.py": TEST_UNITTEST,
    "unit/test_module_to.py": TEST_MODULE_TO,
    "unit/test_sparse.py": TEST_SPARSE,
    "single/test_single.py": TEST_SINGLE,
    "cudabuild/test_cuda_build.py": TEST_CUDA_BUILD,
    "silent/test_silent.py": TEST_SILENT,
    "amp/test_autocast.py": TEST_AUTOCAST,
}
_RUNS: dict = {}
@pytest.fixture(autouse=True)
def _plain_inner_runs(monkeypatch):
    """The inner runs are plain pytest runs, even when this file runs on an xdist worker: every
    process a test starts inherits the PYTEST_XDIST_* variables xdist sets in its workers."""
    for name in list(os.environ):
        if name.startswith("PYTEST_XDIST_"):
            monkeypatch.delenv(name)


def run(pytester, *args, ini: str = "", env: tuple = ()):
    """`pytest ARGS` on the sample project (once per distinct ARGS, ini and extra environment)."""
    key = (args, ini, env)
    if key not in _RUNS:
        pytester.makepyprojecttoml(f'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n{ini}')
        for name, text in FILES.items():
            path = pytester.path / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        saved = {name: os.environ.get(name) for name, _ in env}
        os.environ.update(dict(env))
        try:
            _RUNS[key] = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", *args)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return _RUNS[key]


def test_without_the_option_nothing_changes(pytester):
    result = run(pytester)
    result.assert_outcomes(passed=5, skipped=6)
    result.stdout.no_fnmatch_line("torchdev-lint:*")
    result.stdout.no_fnmatch_line("*simulated GPU*")
    result.stdout.fnmatch_lines(["tests/test_devices.py .*"])


def test_the_plugin_imports_no_torch_unless_asked(pytester):
    pytester.makepyfile(test_light="""
        import sys

        def test_no_torch():
            assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules)
            assert "torchdev_lint.integrations.pytest_simulation" not in sys.modules
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    loaded = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trace-config")
    loaded.stdout.fnmatch_lines(["*torchdev_lint.integrations.pytest_plugin*"])


# `--simulate-gpu tests`: the bare flag before a path must leave the path a path.
SIM = ("--simulate-gpu", "tests", "-v")


def test_simulated_gpu_outcomes(pytester):
    result = run(pytester, *SIM)
    # (a) and (b) fail, (c) passes; the cuda parameter appears; .numpy() of a CUDA tensor fails;
    # NCCL runs as gloo in a world of one (the tracer's choice); three things the simulator
    # cannot do are skipped; a real failure stays a failure
    result.assert_outcomes(passed=5, failed=4, skipped=3)
    result.stdout.fnmatch_lines_random([
        "tests/test_model.py::test_gpu_branch FAILED*",
        "tests/test_model.py::test_skipped_without_cuda FAILED*",
        "tests/test_model.py::test_correct_gpu_path PASSED*",
        "tests/test_numpy.py::test_to_numpy FAILED*",
        "tests/test_unsupported.py::test_real_failure_still_fails FAILED*",
    ])


def test_a_gpu_only_branch_fails_with_the_finding_that_predicted_it(pytester):
    result = run(pytester, *SIM)
    result.stdout.fnmatch_lines([
        "*torchdev-lint: the simulated GPU's evidence*",
        "mypkg/model.py:11:18: TDL008 factory-without-device-in-forward (the static finding that predicted it)",
        "    torch.ones at mypkg/model.py:11 made a cpu tensor (no device=); it then met cuda:0 and cpu "
        "tensors in aten.add at mypkg/model.py:12*",
    ])
    out = result.stdout.str()
    assert "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!" in out
    # the traceback reads as the program's own: it ends at the line that mixed the devices
    assert re.search(r"^mypkg/model.py:12: SimulatedDeviceError$", out, re.M)
    assert "trace/sim.py" not in out and "trace/modes.py" not in out


def test_a_test_skipped_without_cuda_runs_and_says_where_each_device_came_from(pytester):
    run(pytester, *SIM).stdout.fnmatch_lines([
        "tests/test_model.py:18:13: TDL100 device-mismatch (no static finding predicted it)",
        "    aten.mm at tests/test_model.py:18 mixed cuda:0 and cpu tensors: the cuda:0 operand (3x4) got "
        "its device from .cuda() at tests/test_model.py:16; the cpu operand (4x4) is torch.randn at "
        "tests/test_model.py:17, created without device=*",
    ])


def test_a_unittest_test_case_fails_at_its_own_line_too(pytester):
    result = run(pytester, "--simulate-gpu", "unit")
    result.assert_outcomes(failed=1, passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "mypkg/model.py:12: SimulatedDeviceError",
        "*torchdev-lint: the simulated GPU's evidence*",
        "mypkg/model.py:11:18: TDL008 factory-without-device-in-forward *",
    ])
    assert "trace/sim.py" not in result.stdout.str()


def test_a_module_moved_with_a_device_keyword_is_on_the_simulated_gpu(pytester):
    run(pytester, "--simulate-gpu", "unit").stdout.fnmatch_lines(["unit/test_module_to.py .*"])


def test_a_mismatch_with_a_sparse_tensor_is_a_skip_not_a_failure(pytester):
    result = run(pytester, "--simulate-gpu", "unit")
    result.stdout.fnmatch_lines([
        "SKIPPED ?1? unit/test_sparse.py:8: sparse tensors are not simulated: the simulated GPU does not track "
        "their device"])
    # nor a device problem: the mismatch may be the simulator's own
    assert "unit/test_sparse.py::test_sparse_on_the_gpu SKIPPED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["1 device problem in 1 test *", "1 test skipped: the simulated GPU cannot run them"])


def test_conftest_and_module_level_checks_see_the_simulated_gpu(pytester):
    run(pytester, *SIM).stdout.fnmatch_lines_random([
        "tests/test_devices.py::test_on_each_device?cpu? PASSED*",
        "tests/test_devices.py::test_on_each_device?cuda? PASSED*",
    ])


def test_numpy_of_a_cuda_tensor_fails_with_the_line(pytester):
    run(pytester, *SIM).stdout.fnmatch_lines([
        "*TypeError: can't convert cuda:0 device type tensor to numpy*",
        "tests/test_numpy.py:7:12: TDL009 numpy-on-accelerator (the static finding that predicted it)",
        "    .numpy() at tests/test_numpy.py:7 ran on a cuda:0 tensor*",
    ])


def test_the_summary_lists_problems_per_test(pytester):
    result = run(pytester, *SIM)
    result.stdout.fnmatch_lines([
        "*torchdev-lint: device problems on the simulated GPU*",
        "tests/test_model.py::test_gpu_branch FAILED",
        "  mypkg/model.py:11:18: TDL008 *",
        "tests/test_model.py::test_skipped_without_cuda FAILED",
        "  tests/test_model.py:18:13: TDL100 *",
        "tests/test_numpy.py::test_to_numpy FAILED",
        "  tests/test_numpy.py:7:12: TDL009 *",
        "4 device problems in 4 tests (2 predicted by a static finding), 12 tests run on a simulated GPU*",
    ])
    # a device error the test expects (as it would on a GPU) passes, and is listed
    result.stdout.fnmatch_lines([
        "tests/test_caught.py::test_expects_the_gpu_error PASSED",
        "  tests/test_caught.py:9:13: TDL100 device-mismatch (no static finding predicted it)",
    ])
    summary = result.stdout.str().split("device problems on the simulated GPU")[1]
    assert "test_correct_gpu_path" not in summary
    assert "test_real_failure_still_fails" not in summary  # it failed, but not for its devices


def test_what_the_simulator_cannot_do_is_a_skip_with_the_reason(pytester):
    run(pytester, *SIM).stdout.fnmatch_lines_random([
        "SKIPPED [1] tests/test_unsupported.py:11: the simulated GPU has one device (cuda:0): code for "
        "several GPUs is not simulated",
        "SKIPPED [1] tests/test_unsupported.py:24: needs flash_attn, a package for real GPUs that is not installed "
        "here",
        "3 tests skipped: the simulated GPU cannot run them",
    ])
    # a CUDA generator made by torch._C's own class (torch.Generator(device="cuda") is simulated):
    # a CPU build of torch has no CUDA to make one; a CUDA build without a GPU reaches the real
    # CUDA runtime, which raises
    assert re.search(r"^SKIPPED \[1\] tests/test_unsupported.py:29: (this CUDA API \(a CUDA generator of "
                     r"torch._C's own class or made before the simulation, legacy torch.cuda tensor types\) is not "
                     r"simulated|this test reached the real CUDA runtime, which the "
                     r"simulated GPU does not replace)", run(pytester, *SIM).stdout.str(), re.M)


def test_ini_setting_and_its_off_switch(pytester):
    run(pytester, ini="simulate_gpu = true\n").assert_outcomes(passed=5, failed=4, skipped=3)
    run(pytester, "--simulate-gpu=off", ini="simulate_gpu = true\n").assert_outcomes(passed=5, skipped=6)


def test_cpu_only_mode_raises_on_every_cuda_request(pytester):
    result = run(pytester, "--simulate-gpu=cpu-only", "tests", "cpuonly")
    # torch.compile still works on the CPU (the tracer's one-process DDP answers dynamo's question)
    result.assert_outcomes(passed=6, skipped=6, failed=1)
    result.stdout.fnmatch_lines([
        "E   *AssertionError: Torch not compiled with CUDA enabled",
        "*torchdev-lint: CUDA requests on a machine without a GPU*",
        "cpuonly/test_needs_cuda.py::test_silently_needs_cuda FAILED",
        "  cpuonly/test_needs_cuda.py:5:9: TDL001 hardcoded-cuda-call (the static finding that predicted it)",
        "      on a machine without a GPU, .cuda() at cpuonly/test_needs_cuda.py:5 raises AssertionError: Torch "
        "not compiled with CUDA enabled*",
    ])


def test_marker_and_fixture_simulate_single_tests(pytester):
    result = run(pytester, "single")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*torchdev-lint: device problems on the simulated GPU*",
        "single/test_single.py::test_marked FAILED",
        "  mypkg/model.py:11:18: TDL008 *",
    ])


def test_a_confirmed_bug_that_raises_nothing_warns_at_its_line(pytester):
    result = run(pytester, "--simulate-gpu", "silent")
    result.assert_outcomes(passed=3, warnings=2)
    result.stdout.fnmatch_lines([
        "*warnings summary*",
        "silent/test_silent.py::test_discarded_move",
        "  silent/test_silent.py:6: SimulatedGPUWarning: TDL003 discarded-to-result: .to(cuda:0) at "
        "silent/test_silent.py:6 produced a new tensor on cuda:0 that was dropped; the tensor stayed on cpu",
        '    x.to("cuda")',
        "",
        "silent/test_silent.py::test_state_left_behind",
        "  silent/test_silent.py:17: SimulatedGPUWarning: TDL005 optimizer-before-to: the SGD built at "
        "silent/test_silent.py:17 already held state (momentum_buffer) when Linear.to(cuda:0) at "
        "silent/test_silent.py:19 moved its parameters from cpu to cuda:0: the state stayed on cpu",
    ])
    # the summary lists them under tests that passed
    result.stdout.fnmatch_lines([
        "*torchdev-lint: device problems on the simulated GPU*",
        "silent/test_silent.py::test_discarded_move PASSED",
        "  silent/test_silent.py:6:5: TDL003 *",
    ])
    assert "test_moved_right" not in result.stdout.str().split("warnings summary")[1]


def test_strict_mode_fails_a_test_whose_bug_raised_nothing(pytester):
    result = run(pytester, "silent", ini="simulate_gpu = true\nsimulate_gpu_strict = true\n")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_discarded_move _*",
        "torchdev-lint: this test passed, but a device bug that raises nothing here was confirmed*",
        "silent/test_silent.py:6:5: TDL003 discarded-to-result (the static finding that predicted it)",
    ])
    result.stdout.fnmatch_lines(["*_ test_state_left_behind _*", "torchdev-lint: this test passed, *",
                                 "silent/test_silent.py:17:17: TDL005 optimizer-before-to *"])


def test_warnings_as_errors_fail_it_too(pytester):
    result = run(pytester, "--simulate-gpu", "silent", "-W",
                 "error::torchdev_lint.integrations.pytest_plugin.SimulatedGPUWarning")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def xdist_run(pytester, *args, env: tuple = ()):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    return run(pytester, "-p", "xdist", "-n", "2", *args, env=env)


def test_each_xdist_worker_simulates_and_the_summary_comes_once(pytester):
    result = xdist_run(pytester, "--simulate-gpu", "--simulate-gpu-strict", "tests", "silent", "-v")
    # the same outcomes as in one process, the silent bugs failed by the strict option
    result.assert_outcomes(passed=6, failed=6, skipped=3)
    out = result.stdout.str()
    assert out.count("torchdev-lint: every test runs on a simulated GPU") == 1
    assert out.count("torchdev-lint: device problems on the simulated GPU") == 1
    summary = out.split("torchdev-lint: device problems on the simulated GPU")[1]
    for test in ("tests/test_model.py::test_gpu_branch FAILED", "tests/test_model.py::test_skipped_without_cuda FAILED",
                 "tests/test_numpy.py::test_to_numpy FAILED", "tests/test_caught.py::test_expects_the_gpu_error PASSED",
                 "silent/test_silent.py::test_discarded_move FAILED"):
        assert summary.count(test + "\n") == 1, test
    result.stdout.fnmatch_lines([
        "6 device problems in 6 tests (4 predicted by a static finding), 15 tests run on a simulated GPU*",
        "3 tests skipped: the simulated GPU cannot run them",
    ])
    assert out.count("torchdev-lint: the simulated GPU's evidence") == 3  # test_gpu_branch, ..._without_cuda, numpy
    result.stdout.fnmatch_lines_random([
        "*tests/test_devices.py::test_on_each_device?cuda? *",
        "SKIPPED ?1? tests/test_unsupported.py:11: the simulated GPU has one device*",
    ])


def test_marked_tests_on_xdist_workers_reach_the_summary(pytester):
    result = xdist_run(pytester, "single")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert out.count("single/test_single.py::test_marked FAILED\n") == 1


def test_real_cuda_runtime_errors_are_skips_on_a_cuda_build_without_a_gpu(pytester):
    """The default torch wheel is a CUDA build: on a machine without a GPU, what reaches the real
    CUDA runtime raises its errors (torch.AcceleratorError on torch 2.8+), which the simulated
    GPU cannot replace: a skip with the reason, not a failure."""
    result = run(pytester, "--simulate-gpu", "cudabuild")
    result.assert_outcomes(failed=1, skipped=3)
    reason = "this test reached the real CUDA runtime, which the simulated GPU does not replace"
    out = result.stdout.str()
    for line in (14, 19, 27):
        assert f"SKIPPED [1] cudabuild/test_cuda_build.py:{line}: {reason}" in out, line
    result.stdout.fnmatch_lines(["cudabuild/test_cuda_build.py:32: AssertionError"])  # still a failure


def test_cuda_autocast_is_simulated_and_what_it_cannot_be_is_a_labelled_skip(pytester):
    """autocast("cuda") casts on the simulated GPU as on a real one (the CPU's autocast, same dtype):
    no false dtype failure. A dtype error under it that the CPU's list of ops leaves (torch.mv) is a
    skip that says why; the same error outside autocast stays a failure."""
    result = run(pytester, "--simulate-gpu", "amp", "-v")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines_random([
        "amp/test_autocast.py::test_half_inputs_to_a_float_layer PASSED*",
        "amp/test_autocast.py::test_decorated_bfloat16 PASSED*",
        "amp/test_autocast.py::test_a_dtype_bug_outside_autocast FAILED*",
        "SKIPPED [1] amp/test_autocast.py:31: autocast('cuda') is simulated by the CPU's autocast, which casts "
        "a different list of ops than a GPU's: this dtype error may be the simulator's",
    ])


def test_fake_tracing_on_the_simulated_gpu_runs_and_what_it_bakes_in_is_a_labelled_skip(pytester):
    """make_fx's fake tensors are made from the CPU tensors that hold the values: a trainable
    weight traces (a fake CUDA leaf would abort the process in autograd); a graph that bakes in
    the device it was traced on meets the GPU input when replayed: a skip that says why."""
    result = run(pytester, "--simulate-gpu", "fx", "-v")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines_random([
        "fx/test_fake_trace.py::test_a_trainable_weight_traced_with_fake_tensors PASSED*",
        "SKIPPED ?1? fx/test_fake_trace.py:*: fake tensors (make_fx, torch.export) are traced on the CPU by the "
        "simulated GPU, so a traced graph holds the CPU's devices: this device error may be the simulator's",
    ])


def test_an_inner_run_inheriting_xdist_worker_variables_is_no_worker(pytester):
    """A pytest run started by a test of an xdist worker inherits PYTEST_XDIST_WORKER and its
    kin: it still simulates and prints its own summary (a worker's config has `workerinput`)."""
    env = (("PYTEST_XDIST_WORKER", "gw3"), ("PYTEST_XDIST_TESTRUNUID", "0" * 32), ("PYTEST_XDIST_WORKER_COUNT", "4"))
    result = run(pytester, "--simulate-gpu", "silent", env=env)
    result.assert_outcomes(passed=3, warnings=2)
    result.stdout.fnmatch_lines(["*torchdev-lint: device problems on the simulated GPU*",
                                 "silent/test_silent.py::test_discarded_move PASSED"])
    marked = run(pytester, "single", env=env)
    marked.assert_outcomes(passed=2, failed=1)
    marked.stdout.fnmatch_lines(["*torchdev-lint: device problems on the simulated GPU*"])


def test_an_inner_xdist_run_inheriting_worker_variables_still_distributes(pytester):
    env = (("PYTEST_XDIST_WORKER", "gw1"), ("PYTEST_XDIST_TESTRUNUID", "1" * 32), ("PYTEST_XDIST_WORKER_COUNT", "2"))
    result = xdist_run(pytester, "single", env=env)
    result.assert_outcomes(passed=2, failed=1)
    assert result.stdout.str().count("single/test_single.py::test_marked FAILED\n") == 1


def test_a_torch_test_case_whose_setup_skips_super_keeps_the_simulation(pytester):
    # torch's TestCase.tearDown pops the torch-function modes pushed since setUp saved the
    # stack's length; without super().setUp() it compared with 0 and popped the simulator's
    # own mode: the first test failed ("mode stack was leaked"), later ones ran unsimulated
    # and the session crashed when the plugin popped its mode at the end
    pytester.makepyfile(test_torch_case="""
        import torch
        from torch.testing._internal.common_utils import TestCase

        class T(TestCase):
            def setUp(self):
                self.x = torch.ones(2)

            def test_a_cpu(self):
                self.assertEqual(self.x.sum().item(), 2.0)

            def test_b_cuda(self):
                self.assertEqual(self.x.to("cuda").device.type, "cuda")
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--simulate-gpu", "-rs")
    result.assert_outcomes(passed=2)
    assert "empty mode stack" not in result.stderr.str() + result.stdout.str()


def test_a_test_that_chooses_a_device_the_module_level_decision_ignores_reports_tdl013(pytester):
    # issue 40's detector: the package picks its device at import by the machine alone, the
    # test asks for the CPU through the constructor; on the simulated GPU they disagree
    pytester.makepyfile(detector="""
        import torch
        import torch.nn as nn

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        class Detector:
            def __init__(self, device="cpu"):
                self.model = nn.Linear(3, 2).to(device)
                self.mean = torch.tensor([0.5, 0.5, 0.5]).to(DEVICE)

            def __call__(self, x):
                return self.model(x - self.mean)
    """, test_detector="""
        import torch
        from detector import Detector


        def test_detect_on_the_cpu():
            assert Detector(device="cpu")(torch.zeros(4, 3)).shape == (4, 2)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--simulate-gpu", "-rs")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "detector.py:13:16: TDL013 device-chosen-twice (the static finding that predicted it)" in out
    assert "the two device decisions disagreed in this run" in out
