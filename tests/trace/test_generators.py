"""CUDA generators on the simulated GPU: the answers of ``generator_probe.py``, pinned.

``torch.Generator(device="cuda")`` is a CPU generator that reports the simulated device: it
seeds and draws as a CPU generator does (the CPU's stream, not a GPU's Philox one: values differ
from a real GPU's), and random ops refuse a generator of the other device type as a GPU's kernels
do (ATen's ``check_generator``: "Expected a 'cpu' device type for generator but found 'cuda'").
Code that makes no CUDA generator behaves as before.
"""

import pytest
from tracehelp import ROOT, printed_cases

PROBE = ROOT / "tests" / "trace" / "generator_probe.py"
CPU_GEN = "ERR RuntimeError: Expected a 'cpu' device type for generator but found 'cuda'"
CUDA_GEN = "ERR RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'"
SEEDED_0 = "[1.541, -0.2934]"  # torch.randn(2) after seeding 0, on the CPU

EXPECTED = {
    # a CUDA generator
    "Generator(device='cuda').device": "cuda:0",
    "Generator(device='cuda:0').device": "cuda:0",
    "Generator(device=torch.device('cuda')).device": "cuda:0",
    "Generator('cuda') positional": "cuda:0",
    "Generator(device='cuda:1')": "ERR RuntimeError: CUDA error: invalid device ordinal",  # one simulated GPU
    "isinstance(cuda generator, torch.Generator)": "True",
    "cuda.default_generators[0].device": "cuda:0",
    "manual_seed returns the generator": "True",
    "deepcopy(cuda generator).device": "cuda:0",
    "pickle(cuda generator).device": "cuda:0",
    "cuda generator draws as a CPU one": SEEDED_0,  # not a GPU's values: the CPU's stream
    "same seed, same draws": "True",
    "get_state/set_state replays": "True",
    # random ops given it, on the simulated GPU
    "randn(device='cuda', generator=cuda)": "cuda:0",
    "randperm(generator=cuda, device='cuda')": "cuda:0",
    "rand(x.shape, device=x.device, generator=cuda)": "cuda:0",
    "randint(device='cuda', generator=cuda)": "cuda:0",
    "cuda.normal_(generator=cuda)": "cuda:0",
    "cuda.uniform_(generator=cuda)": "cuda:0",
    "nn.init.normal_(cuda, generator=cuda)": "cuda:0",
    "multinomial(cuda, generator=cuda)": "cuda:0",
    "bernoulli(cuda, generator=cuda)": "cuda:0",
    "default_generators[0] in a cuda op": "cuda:0",
    "cuda.manual_seed seeds default_generators[0]": "11",
    "cuda.initial_seed after cuda.manual_seed": "11",
    "torch.manual_seed seeds the CUDA generators too": "12",
    # device mismatches, in a GPU's words
    "randn(generator=cuda) on the CPU": CPU_GEN,
    "randn(device='cuda', generator=cpu)": CUDA_GEN,
    "cpu.normal_(generator=cuda)": CPU_GEN,
    "cuda.normal_(generator=cpu)": CUDA_GEN,
    "randperm(generator=cuda) on the CPU": CPU_GEN,
    "randperm(device='cuda', generator=cpu)": CUDA_GEN,
    # code without a CUDA generator: as before
    "type(torch.Generator()) is torch._C.Generator": "True",
    "Generator(device='cpu').device": "cpu",
    "isinstance(default_generator, torch.Generator)": "True",
    "cpu generator draws": SEEDED_0,
    "cpu generator in a cpu randperm": "[0, 1, 3, 2]",
    "pickle(cpu generator)": "True",
    "deepcopy(cpu generator)": "True",
    "torch.manual_seed(0); randn(device='cuda'): the CPU's stream": SEEDED_0,
    "cuda.manual_seed leaves the CPU's stream": SEEDED_0,
}


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(PROBE.read_text().splitlines(), 1) if f"# mismatch: {marker}" in text)


@pytest.fixture
def result(traced):
    result = traced("generators")
    assert result.report["runs"][0]["mode"] == "sim"
    assert "DONE" in result.program_output, result.program_output[-2000:]
    return result


@pytest.mark.traces("generators")
def test_every_case_is_printed_and_expected(result):
    assert set(printed_cases(result)) == set(EXPECTED)


@pytest.mark.traces("generators")
@pytest.mark.parametrize(("case", "gpu"), EXPECTED.items(), ids=list(EXPECTED))
def test_a_cuda_generator_behaves_as_on_a_gpu(case, gpu, result):
    assert printed_cases(result)[case] == gpu


@pytest.mark.traces("generators")
@pytest.mark.parametrize("marker", ["cpu factory, cuda generator", "cuda factory, cpu generator"])
def test_a_generator_mismatch_is_a_device_mismatch_at_its_line(marker, result):
    line = _line(marker)
    [finding] = result.at(line, "TDL100")
    assert finding["status"] == "confirmed"
    assert f"aten.randn at tests/trace/generator_probe.py:{line}" in finding["evidence"], finding["evidence"]
    assert "cuda:0" in finding["evidence"] and "cpu" in finding["evidence"]
