"""Where results land on the simulated GPU, pinned: the answers of ``propagation_probe.py``.

The probe runs 200-odd operations that create, copy, convert, script, serialize or index tensors
and modules, and prints where each result lands (or the error). EXPECTED is what a real GPU
gives. No GPU was lent to the task that wrote these: every answer is **decided from torch's
documented behaviour and code** (torch 2.13: ``torch/csrc/utils/tensor_new.cpp`` for
``torch.tensor``/``new_*``, ``aten/src/ATen/native/TensorConversions.cpp`` for ``to``/``type_as``,
``torch/_tensor.py`` for ``__deepcopy__``/``type``/pickling, ``torch/nn/modules/module.py`` for
``_apply``/``load_state_dict``, ``torch/optim/adam.py`` for the optimizer's state,
``torch/jit`` for TorchScript), except the answers in OBSERVED, which a GPU printed for the
device mixes kept in the project's shared notes (NVIDIA H200, torch 2.11; see test_device_mix.py).
Run the probe plainly on a GPU machine (``python tests/trace/propagation_probe.py``) to check
them: the output must equal EXPECTED, plus DIFFERS' GPU answers.

The simulator's error is a subclass of the GPU's (``SimulatedDeviceError`` is a
``RuntimeError``): the comparison reads it as ``RuntimeError``.
"""

import pytest
from tracehelp import ROOT

PROBE = ROOT / "tests" / "trace" / "propagation_probe.py"

EXPECTED = [
    ('zeros device=cuda', 'cuda:0'),
    ('empty device=cuda:0', 'cuda:0'),
    ('tensor(list) device=cuda', 'cuda:0'),
    ('arange device=cuda', 'cuda:0'),
    ('full device=cuda', 'cuda:0'),
    ('randn device=torch.device', 'cuda:0'),
    ('eye device=cuda', 'cuda:0'),
    ('linspace device=cuda', 'cuda:0'),
    ('randperm device=cuda', 'cuda:0'),
    ('tril_indices device=cuda', 'cuda:0'),
    ('empty_strided device=cuda', 'cuda:0'),
    ('as_tensor(cpu, device=cuda)', 'cuda:0'),
    ('as_tensor(cuda) is the operand', "'same'"),
    ('as_tensor(list, device=cuda)', 'cuda:0'),
    ('tensor(cuda tensor)', 'cuda:0'),
    ('tensor(cuda tensor, device=cpu)', 'cpu'),
    ('tensor(list of cuda 0-dim)', 'cpu'),
    ('tensor(numpy, device=cuda)', 'cuda:0'),
    ('from_numpy', 'cpu'),
    ('zeros_like(cuda)', 'cuda:0'),
    ('ones_like(cuda, device=cpu)', 'cpu'),
    ('ones_like(cpu, device=cuda)', 'cuda:0'),
    ('empty_like(cuda)', 'cuda:0'),
    ('rand_like(cuda)', 'cuda:0'),
    ('randn_like(cuda)', 'cuda:0'),
    ('full_like(cuda)', 'cuda:0'),
    ('randint_like(cuda)', 'cuda:0'),
    ('cuda.new_zeros', 'cuda:0'),
    ('cuda.new_ones', 'cuda:0'),
    ('cuda.new_empty', 'cuda:0'),
    ('cuda.new_full', 'cuda:0'),
    ('cuda.new_tensor(list)', 'cuda:0'),
    ('cuda.new_tensor(cpu tensor)', 'cuda:0'),
    ('cuda.new_empty_strided', 'cuda:0'),
    ('cpu.new_zeros(device=cuda)', 'cuda:0'),
    ('cuda.new_zeros(device=cpu)', 'cpu'),
    ('set_default_device(cuda); zeros', 'cuda:0'),
    ('with torch.device(cuda): ones', 'cuda:0'),
    ('Linear(device=cuda).weight', 'cuda:0'),
    ('cuda.clone()', 'cuda:0'),
    ('torch.clone(cuda)', 'cuda:0'),
    ('cuda.detach()', 'cuda:0'),
    ('cuda.data', 'cuda:0'),
    ('cuda.contiguous() of a transpose', 'cuda:0'),
    ('copy.copy(cuda)', 'cuda:0'),
    ('copy.deepcopy(cuda)', 'cuda:0'),
    ('copy.deepcopy(cuda view)', 'cuda:0'),
    ('copy.deepcopy(cuda requires_grad)', 'cuda:0'),
    ('copy.deepcopy(Parameter on cuda)', 'cuda:0'),
    ("copy.deepcopy({'a': cuda})['a']", 'cuda:0'),
    ('copy.deepcopy(cuda with grad).grad', 'cuda:0'),
    ('copy.deepcopy keeps storage sharing', "'cuda:0 cuda:0 True'"),
    ('cpu.copy_(cuda) stays', 'cpu'),
    ('cuda.copy_(cpu) stays', 'cuda:0'),
    ('empty_like(cuda).copy_(cpu)', 'cuda:0'),
    ('cuda[...] = cpu', 'cuda:0'),
    ('cuda.to(float64)', 'cuda:0'),
    ('cuda.double()', 'cuda:0'),
    ('cuda.half()', 'cuda:0'),
    ('cuda.long()', 'cuda:0'),
    ('cuda.bool()', 'cuda:0'),
    ('cuda.to(cpu tensor)', 'cpu'),
    ('cpu.to(cuda tensor)', 'cuda:0'),
    ('cpu.to(other=cuda tensor)', 'ERR TypeError: to() received an invalid combination of arguments - got (other=Tensor, ), but expected one of:'),
    ('cpu.type_as(cuda)', 'cuda:0'),
    ('cuda.type_as(cpu)', 'cpu'),
    ('cpu.type_as(cuda double) dtype', "'torch.float64'"),
    ('cuda.type_as(cuda) is the operand', "'same'"),
    ('cuda.type()', "'torch.cuda.FloatTensor'"),
    ('cuda.long().type()', "'torch.cuda.LongTensor'"),
    ('cpu.type()', "'torch.FloatTensor'"),
    ('cpu.type(cuda.type())', 'cuda:0'),
    ("cpu.type('torch.cuda.DoubleTensor')", 'cuda:0'),
    ("cuda.type('torch.FloatTensor')", 'cpu'),
    ('cpu.type(torch.cuda.FloatTensor)', 'cuda:0'),
    ('cuda.type(torch.float16)', 'cuda:0'),
    ('cuda.type(torch.float16) dtype', "'torch.float16'"),
    ('cuda.cpu()', 'cpu'),
    ('cpu.cuda()', 'cuda:0'),
    ('cpu.cuda(0)', 'cuda:0'),
    ("cpu.to('cuda:0')", 'cuda:0'),
    ('cpu.to(0)', 'cuda:0'),
    ('Linear.to(0).weight', 'cuda:0'),
    ("cuda.to('cpu', non_blocking=True)", 'cpu'),
    ("cuda.to('cuda') is the operand", "'same'"),
    ('cuda.cuda() is the operand', "'same'"),
    ("cuda.to('cuda', copy=True)", "'cuda:0'"),
    ('cuda.to(device=cuda, dtype=half)', 'cuda:0'),
    ('cuda.to(channels_last)', 'cuda:0'),
    ('cuda.view(int32)', 'cuda:0'),
    ('cuda.view_as(cpu)', 'cuda:0'),
    ('cuda.reshape_as(cpu)', 'cuda:0'),
    ('cuda.expand_as(cpu)', 'cuda:0'),
    ('view_as_real(cuda complex)', 'cuda:0'),
    ('cuda.numpy()', "ERR TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."),
    ('numpy.asarray(cuda)', "ERR TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."),
    ('cuda.cpu().numpy()', "'ndarray'"),
    ('cuda.tolist()', "'list'"),
    ('cuda.item()', "'float'"),
    ('cuda.is_cuda', 'True'),
    ('cuda.is_cpu', 'False'),
    ('cuda.get_device()', '0'),
    ('cpu.get_device()', '-1'),
    ('cuda.device.type', "'cuda'"),
    ('torch.cuda.FloatTensor(2)', 'cuda:0'),
    ('isinstance(cuda, torch.cuda.FloatTensor)', 'True'),
    ('isinstance(cpu, torch.cuda.FloatTensor)', 'False'),
    ('cuda.new(2)', 'cuda:0'),
    ('cpu.pin_memory().is_pinned()', 'True'),
    ('cpu.pin_memory()', 'cpu'),
    ('repr(cuda) names the device', 'True'),
    ('cuda[0]', 'cuda:0'),
    ('cuda[1:]', 'cuda:0'),
    ('cuda[None]', 'cuda:0'),
    ('cuda[cpu long]', 'cuda:0'),
    ('cuda[cpu bool]', 'cuda:0'),
    ('cuda[cuda long]', 'cuda:0'),
    ('cuda[list]', 'cuda:0'),
    ('cpu[cuda long]', 'ERR RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)'),
    ('cuda[cpu long] = 0', 'cuda:0'),
    ('cuda[cpu long] = cuda', 'cuda:0'),
    ('cuda.nonzero()', 'cuda:0'),
    ('torch.where(cuda cond)', 'cuda:0'),
    ('cuda.argmax()', 'cuda:0'),
    ('cuda.max(0)', 'cuda:0,cuda:0'),
    ('cuda.sort()', 'cuda:0,cuda:0'),
    ('cuda.topk(2)', 'cuda:0,cuda:0'),
    ('cuda.unique()', 'cuda:0'),
    ('torch.split(cuda)', 'cuda:0,cuda:0'),
    ('cuda.unbind()', 'cuda:0,cuda:0'),
    ('torch.meshgrid(cuda, cuda)', 'cuda:0,cuda:0'),
    ('masked_select(cuda, cuda mask)', 'cuda:0'),
    ('index_select(cuda, cuda idx)', 'cuda:0'),
    ('gather(cuda, cuda idx)', 'cuda:0'),
    ('cuda + 1', 'cuda:0'),
    ('cuda * 0-dim cpu', 'cuda:0'),
    ('0-dim cpu + 0-dim cuda', 'cuda:0'),
    ('cuda.sum()', 'cuda:0'),
    ('cuda @ cuda', 'cuda:0'),
    ('cuda + cpu', 'ERR RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!'),
    ('torch.stack([cuda, cuda])', 'cuda:0'),
    ('default_collate([cuda, cuda])', 'cuda:0'),
    ('pad_sequence([cuda, cuda])', 'cuda:0'),
    ('pack_padded_sequence data, batch_sizes', 'cuda:0,cpu'),
    ('one_hot(cuda)', 'cuda:0'),
    ('interpolate(cuda)', 'cuda:0'),
    ('fft.fft(cuda)', 'cuda:0'),
    ('linalg.inv(cuda)', 'cuda:0'),
    ('multinomial(cuda)', 'cuda:0'),
    ('distributions.Normal(cuda).sample()', 'cuda:0'),
    ('Generator(device=cuda)', 'cuda:0'),
    ('Linear.cuda().weight', 'cuda:0'),
    ('Linear.to(cuda).bias', 'cuda:0'),
    ('Linear.to(cuda tensor).weight', 'cuda:0'),
    ('Linear.type(torch.cuda.FloatTensor).weight', 'cuda:0'),
    ('Linear.cuda().half().weight', 'cuda:0'),
    ('Linear.cuda().cpu().weight', 'cpu'),
    ('Linear.to_empty(cuda).weight', 'cuda:0'),
    ('BatchNorm.cuda().running_mean', 'cuda:0'),
    ('BatchNorm.cuda().num_batches_tracked', 'cuda:0'),
    ('Linear.cuda() weight.grad', 'cuda:0'),
    ('register_buffer after .cuda()', 'cpu'),
    ('Parameter(cuda)', 'cuda:0'),
    ('Parameter(cpu).cuda()', 'cuda:0'),
    ('state_dict() of a cuda module', 'cuda:0'),
    ('load_state_dict(cpu) into cuda module', 'cuda:0'),
    ('load_state_dict(cpu, assign=True) into cuda module', 'cpu'),
    ('load_state_dict(cuda) into cpu module', 'cpu'),
    ('deepcopy(cuda module): weight, running_mean, num_batches_tracked', 'cuda:0,cuda:0,cuda:0'),
    ('EMA deepcopy of a cuda model runs', 'cuda:0'),
    ('module defining __eq__: .cuda().total', 'cuda:0'),
    ('module defining __eq__: deepcopy(.cuda()).total', 'cuda:0'),
    ('optimizer defining __eq__: step after .cuda()', 'cuda:0'),
    ('Adam state: exp_avg, step', 'cuda:0,cpu'),
    ('Adam.load_state_dict(cpu state) on cuda params', 'cuda:0'),
    ("GradScaler('cuda').scale(cuda)", 'cuda:0'),
    ('autocast(cuda) Linear', "'cuda:0 torch.float16'"),
    ('save/load cuda', 'cuda:0'),
    ('save/load cuda, map_location=cpu', 'cpu'),
    ('save/load cuda, map_location=lambda', 'cpu'),
    ('save/load cuda, map_location={cuda:0: cpu}', 'cpu'),
    ('save/load cpu, map_location=cuda', 'cuda:0'),
    ('save/load cpu, map_location=torch.device(cuda)', 'cuda:0'),
    ('save/load cuda state_dict', 'cuda:0'),
    ('save/load whole cuda module', 'cuda:0'),
    ('pickle cuda', 'cuda:0'),
    ('pickle cuda module buffer', 'cuda:0'),
    ('save/load weights_only=True', 'cuda:0'),
    ('jit.save/jit.load cuda module', 'cuda:0'),
    ('jit.save/jit.load cuda module, map_location=cpu', 'cpu'),
    ('script: x + 1', 'cuda:0'),
    ('script: x.device', 'cuda:0'),
    ('script: x.to(y.device) + y', 'cuda:0'),
    ('script: zeros(device=x.device) + x', 'cuda:0'),
    ('script: x.is_cuda', 'True'),
    ('script: x.cpu()', 'cpu'),
    ('script: cpu + cuda', 'ERR RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!'),
    ('script module .cuda(): forward', 'cuda:0'),
    ('script module .cuda() on a cpu input', 'ERR RuntimeError: The following operation failed in the TorchScript interpreter.'),
    ('script module then .cuda(): weight', 'cuda:0'),
    ('trace: x * 2 + ones(device=x.device)', 'cuda:0'),
    ('trace module .cuda(): forward', 'cuda:0'),
    ('trace module: cpu input, cuda module', 'ERR RuntimeError: The following operation failed in the TorchScript interpreter.'),
    ('torch.compile(fn)(cuda)', 'cuda:0'),
]

# Printed by a real GPU for the same operation (device_mix_h200_torch2.11.txt, in the shared
# notes): case -> the observed line it matches.
OBSERVED = {
    "cuda + cpu": "add cuda+cpu: RuntimeError: Expected all tensors to be on the same device, but found at least "
                  "two devices, cuda:0 and cpu!",
    "cuda * 0-dim cpu": "mul 0-dim cpu * cuda: OK",
    "cuda[cpu long]": "index cuda by cpu long: OK",
    "cuda[cpu bool]": "index cuda by cpu bool: OK",
    "cpu[cuda long]": "index cpu by cuda long: RuntimeError: indices should be either on cpu or on the same device "
                      "as the indexed tensor (cpu)",
    "cuda.copy_(cpu) stays": "copy_ cpu->cuda: OK",
    "cuda[...] = cpu": "setitem cuda[...] = cpu: OK",
    "tensor(list of cuda 0-dim)": "tensor(list of cuda scalars): OK",
    "cuda.new_tensor(cpu tensor)": "cuda_tensor.new_tensor(cpu): OK (its sum with a cuda tensor ran: on cuda)",
    "save/load cuda state_dict": "load cuda checkpoint, no map_location: OK, loaded on cuda:0",
    "cuda.numpy()": "numpy of cuda: TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() "
                    "to copy the tensor to host memory first.",
    "cuda.tolist()": "cuda tensor to list: OK",
    "from_numpy": "torch.from_numpy + cuda: RuntimeError: Expected all tensors to be on the same device... "
                  "(from_numpy gives a cpu tensor)",
}

# Where the simulator still differs from a GPU: case -> (the GPU's answer, the simulator's, why).
# The simulator's answer is pinned, so that a change shows.
DIFFERS = {
    "cuda.untyped_storage().device": (
        "cuda:0", "cpu",
        "a storage's own .device is not simulated (torch's storage code reads it to allocate copies)"),
    "deepcopy(cuda storage) device": (
        "cuda:0", "cpu",
        "the copy is on the simulated device (its tensors are), but a storage's own .device says cpu"),
    "torch.device(0)": (
        "cuda:0", "ERR RuntimeError: Cannot access accelerator device when none is available.",
        "an index alone asks torch's C++ accelerator registry, which a CPU build lacks (.to(0), Module.to(0), "
        "device=0 are simulated)"),
    "script: a mix inside a scripted function": (
        "ERR RuntimeError: The following operation failed in the TorchScript interpreter.",
        "ERR RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "a scripted function runs as its Python source: the error is the same, without the interpreter's "
        "traceback around it (a GPU's message ends with the same words)"),
    "fft.rfft(cuda half)": (
        "cuda:0", "ERR RuntimeError: Unsupported dtype Half",
        "the CPU has no Half FFT kernel: pytest --simulate-gpu skips such a test as not simulated"),
}


def _normal(answer: str) -> str:
    return answer.replace("ERR SimulatedDeviceError:", "ERR RuntimeError:")


def _printed(result) -> dict[str, str]:
    out = {}
    for line in result.program_output.splitlines():
        name, sep, rest = line.partition(" | ")
        if sep:
            out[name] = rest
    return out


@pytest.fixture
def printed(traced):
    result = traced("propagation")
    assert result.report["runs"][0]["mode"] == "sim"
    assert "DONE" in result.program_output, result.program_output[-2000:]
    return _printed(result)


def test_the_probe_asks_about_at_least_100_operations():
    cases = [line for line in PROBE.read_text().splitlines() if line.startswith("case(")]
    assert len(cases) >= 100, len(cases)
    names = [name for name, _ in EXPECTED]
    assert len(names) == len(set(names))
    assert not set(names) & set(DIFFERS)
    assert set(OBSERVED) <= set(names)


@pytest.mark.traces("propagation")
def test_every_printed_operation_has_an_expected_answer(printed):
    assert set(printed) == {name for name, _ in EXPECTED} | set(DIFFERS)


@pytest.mark.traces("propagation")
@pytest.mark.parametrize(("case", "gpu"), EXPECTED, ids=[name for name, _ in EXPECTED])
def test_the_simulator_puts_the_result_where_a_gpu_does(case, gpu, printed):
    assert _normal(printed[case]) == gpu


@pytest.mark.traces("propagation")
@pytest.mark.parametrize("case", sorted(DIFFERS))
def test_known_differences_are_pinned(case, printed):
    _gpu, simulated, _why = DIFFERS[case]
    assert _normal(printed[case]).startswith(simulated)
