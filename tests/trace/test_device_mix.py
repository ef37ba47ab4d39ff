"""The simulated GPU raises where a real one raised, with its words.

``testdata/trace/device_mix.py`` runs the device mixes a real GPU was asked about (NVIDIA H200,
torch 2.11, output kept in the project's shared notes) and prints what each did. OBSERVED is what
the GPU printed; traced with ``--mode sim`` on a CPU-only machine, the program must print the
same: the same outcome, the same exception type (the simulator's is a subclass of it) and the
same message. The one liberty: the name of the CUDA wrapper, "(when checking argument in method
...)", which depends on the GPU's libraries for a convolution (cuDNN or not), may be left out.
"""

import re

import pytest
from tracehelp import DATA

OBSERVED = [
    ('add cpu+cuda',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('add cuda+cpu',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('mul 0-dim cpu * cuda',
     'OK'),
    ('add cuda + 0-dim cpu',
     'OK'),
    ('add 1-elem 1-dim cpu + cuda',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('matmul cpu@cuda',
     'RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:0, '
     'different from other tensors on cpu (when checking argument in method wrapper_CUDA_mm)'),
    ('mm cuda,cpu',
     'RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cpu, different '
     'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_mm)'),
    ('linear cuda weight cpu input',
     'RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, different '
     'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)'),
    ('linear cpu weight cuda input',
     'RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cuda:0, '
     'different from other tensors on cpu (when checking argument in method wrapper_CUDA_addmm)'),
    ('conv2d cuda weight cpu input',
     'RuntimeError: Expected all tensors to be on the same device, but got weight is on cuda:0, '
     'different from other tensors on cpu (when checking argument in method '
     'wrapper_CUDA___slow_conv2d_forward)'),
    ('numpy of cuda',
     "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
     "memory first."),
    ('numpy of cuda requires grad',
     "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
     "memory first."),
    ('index cuda by cpu long',
     'OK'),
    ('index cpu by cuda long',
     'RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)'),
    ('index cuda by cpu bool',
     'OK'),
    ('index cpu by cuda bool',
     'RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)'),
    ('index_select cuda, cpu idx',
     'RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA__index_select)'),
    ('gather cuda, cpu idx',
     'RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_gather)'),
    ('embedding cuda, cpu idx',
     'RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA__index_select)'),
    ('cross_entropy cuda logits cpu target',
     'RuntimeError: Expected all tensors to be on the same device, but got target is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA_nll_loss_forward)'),
    ('nll cuda logits cpu target',
     'RuntimeError: Expected all tensors to be on the same device, but got target is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA_nll_loss_forward)'),
    ('mse cuda, cpu',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('cat cpu,cuda',
     'RuntimeError: Expected all tensors to be on the same device, but got tensors is on cuda:0, '
     'different from other tensors on cpu (when checking argument in method wrapper_CUDA_cat)'),
    ('stack cuda,cpu',
     'RuntimeError: Expected all tensors to be on the same device, but got tensors is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)'),
    ('where cpu cond',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('where cuda cond, cpu other',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('masked_fill cuda, cpu mask',
     'RuntimeError: expected self and mask to be on the same device, but got mask on cpu and self on cuda:0'),
    ('copy_ cpu->cuda',
     'OK'),
    ('setitem cuda[...] = cpu',
     'OK'),
    ('lstm cuda, cpu hidden',
     'RuntimeError: Input and hidden tensors are not at the same device, found input tensor at '
     'cuda:0 and hidden tensor at cpu'),
    ('gru cuda, cpu hidden',
     'RuntimeError: Input and hidden tensors are not at the same device, found input tensor at '
     'cuda:0 and hidden tensor at cpu'),
    ('lstm cuda, cpu input',
     'RuntimeError: Input and parameter tensors are not at the same device, found input tensor at '
     'cpu and parameter tensor at cuda:0'),
    ('pack_padded lengths on cuda',
     "RuntimeError: 'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor"),
    ('pack_padded lengths on cpu',
     'OK'),
    ('adagrad state before to',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('adam built before to',
     'OK'),
    ('load cuda checkpoint, no map_location',
     'OK'),
    ('tensor(list of cuda scalars)',
     'OK'),
    ('cpu scalar tensor .item + cuda',
     'OK'),
    ('bmm cuda,cpu',
     'RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cpu, different '
     'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_bmm)'),
    ('einsum cuda,cpu',
     'RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cpu, different '
     'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_bmm)'),
    ('clamp cuda min cpu tensor',
     'RuntimeError: Expected all tensors to be on the same device, but got min is on cpu, different '
     'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_clamp_Tensor)'),
    ('cuda tensor to list',
     'OK'),
    ('torch.max cuda vs cpu',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('bincount cuda weights cpu',
     'RuntimeError: Expected all tensors to be on the same device, but got weights is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA__bincount)'),
    ('scatter_ cuda, cpu index',
     'RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA_scatter__src)'),
    ('index_add_ cuda, cpu index',
     'RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, '
     'different from other tensors on cuda:0 (when checking argument in method '
     'wrapper_CUDA_index_add_)'),
    ('arange cpu compare cuda',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    ('python float from cuda',
     'OK'),
    ('cuda_tensor.new_tensor(cpu)',
     'OK'),
    ('torch.from_numpy + cuda',
     'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, '
     'cuda:0 and cpu!'),
    # First derived from torch's own code (torchdev_lint/trace/kernels.py), then seen on a GPU too
    # (NVIDIA H200, torch 2.11, 2026-12-01):
    # PackedSequence refuses CUDA batch sizes in Python (the simulated .is_cuda answers it)
    ("pad_packed batch_sizes on cuda", "ValueError: batch_sizes should always be on CPU."),
    # a CUDA wrapper's device check has no exception for 0-dim CPU tensors (torchgen's gen_device_check)
    ("clamp cuda min 0-dim cpu",
     "RuntimeError: Expected all tensors to be on the same device, but got min is on cpu, different from "
     "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_clamp_Tensor)"),
    ("bucketize cuda, cpu boundaries",
     "RuntimeError: Expected all tensors to be on the same device, but got boundaries is on cpu, different "
     "from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_Tensor_bucketize)"),
    # ctc_loss copies its length tensors to the CPU itself (LossCTC.cpp)
    ("ctc_loss cuda, lengths cpu", "OK"),
    # TensorIterator ops (device_check: NoCheck) take a 0-dim CPU tensor
    ("where cuda, 0-dim cpu other", "OK"),
    # the lengths of a padded sequence are made from its batch sizes, on the CPU (PackedSequence.cpp)
    ("pad_packed gives cpu lengths", "OK"),
]

WRAPPER = re.compile(r" \(when checking argument in method \w+\)$")


def _printed(result) -> dict[str, str]:
    out = {}
    for line in result.program_output.splitlines():
        name, _, rest = line.partition(" | ")
        if rest:
            out[name] = rest.replace(" | ", ": ", 1)
    return out


@pytest.fixture
def printed(traced):
    result = traced("device-mix")
    assert result.report["runs"][0]["mode"] == "sim"
    return _printed(result)


@pytest.mark.traces("device-mix")
@pytest.mark.parametrize(("case", "gpu"), OBSERVED, ids=[c for c, _ in OBSERVED])
def test_the_simulator_does_what_the_gpu_did(case, gpu, printed):
    simulated = printed[case]
    assert (simulated == "OK") == (gpu == "OK"), (simulated, gpu)
    if gpu.startswith("ValueError"):  # torch's own Python check: only its first sentence is the point
        assert simulated.startswith(gpu), simulated
    elif simulated != gpu:
        assert "conv" in case and simulated == WRAPPER.sub("", gpu), (simulated, gpu)


@pytest.mark.traces("device-mix")
def test_a_refused_0_dim_cpu_operand_is_named_in_the_evidence(traced):
    result = traced("device-mix")
    source = (DATA / "device_mix.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if '"clamp cuda min 0-dim cpu"' in text)
    [mismatch] = result.at(line, "TDL100")
    assert "mixed cuda:0 and cpu tensors" in mismatch["evidence"]
    assert "the cpu operand (0-dim) is torch.tensor" in mismatch["evidence"], mismatch["evidence"]
