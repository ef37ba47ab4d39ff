"""CUDA generators on the simulated GPU: each case printed as `name | answer` (see
tests/trace/test_generators.py). The answer is a device, a short value, or `ERR Type: message`.

The two device mismatches a GPU refuses stop nothing here (each case catches its error), and
each sits on a line of its own, marked `# mismatch`: the trace must report it there.
"""
import copy
import pickle

import torch
from probe_cases import case


def rounded(t):
    return [round(v, 4) for v in t.cpu().tolist()]


gen = torch.Generator(device="cuda")

# -- a CUDA generator --------------------------------------------------------------------------
case("Generator(device='cuda').device", lambda: gen)
case("Generator(device='cuda:0').device", lambda: torch.Generator(device="cuda:0"))
case("Generator(device=torch.device('cuda')).device", lambda: torch.Generator(device=torch.device("cuda")))
case("Generator('cuda') positional", lambda: torch.Generator("cuda"))
case("Generator(device='cuda:1')", lambda: torch.Generator(device="cuda:1"))
case("isinstance(cuda generator, torch.Generator)", lambda: isinstance(gen, torch.Generator))
case("cuda.default_generators[0].device", lambda: torch.cuda.default_generators[0])
case("manual_seed returns the generator", lambda: gen.manual_seed(1) is gen)
case("deepcopy(cuda generator).device", lambda: copy.deepcopy(gen))
case("pickle(cuda generator).device", lambda: pickle.loads(pickle.dumps(gen)))
case("cuda generator draws as a CPU one",
     lambda: rounded(torch.randn(2, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))))
case("same seed, same draws", lambda: torch.equal(
    torch.rand(3, device="cuda", generator=torch.Generator(device="cuda").manual_seed(4)),
    torch.rand(3, device="cuda", generator=torch.Generator(device="cuda").manual_seed(4))))
case("get_state/set_state replays", lambda: (lambda s: torch.equal(
    torch.randn(3, device="cuda", generator=gen), (gen.set_state(s), torch.randn(3, device="cuda", generator=gen))[1])
)(gen.get_state()))

# -- random ops given it, on the simulated GPU ---------------------------------------------------
case("randn(device='cuda', generator=cuda)", lambda: torch.randn(3, device="cuda", generator=gen))
case("randperm(generator=cuda, device='cuda')", lambda: torch.randperm(5, generator=gen, device="cuda"))
case("rand(x.shape, device=x.device, generator=cuda)",
     lambda: (lambda x: torch.rand(x.shape, device=x.device, generator=gen))(torch.zeros(2, device="cuda")))
case("randint(device='cuda', generator=cuda)", lambda: torch.randint(0, 9, (3,), device="cuda", generator=gen))
case("cuda.normal_(generator=cuda)", lambda: torch.empty(3, device="cuda").normal_(generator=gen))
case("cuda.uniform_(generator=cuda)", lambda: torch.empty(3, device="cuda").uniform_(generator=gen))
case("nn.init.normal_(cuda, generator=cuda)",
     lambda: torch.nn.init.normal_(torch.empty(3, device="cuda"), generator=gen))
case("multinomial(cuda, generator=cuda)", lambda: torch.multinomial(torch.ones(4, device="cuda"), 2, generator=gen))
case("bernoulli(cuda, generator=cuda)", lambda: torch.bernoulli(torch.full((3,), 0.5, device="cuda"), generator=gen))
case("default_generators[0] in a cuda op",
     lambda: torch.randn(2, device="cuda", generator=torch.cuda.default_generators[0]))
torch.cuda.manual_seed(11)
case("cuda.manual_seed seeds default_generators[0]", lambda: torch.cuda.default_generators[0].initial_seed())
case("cuda.initial_seed after cuda.manual_seed", lambda: torch.cuda.initial_seed())
torch.manual_seed(12)
case("torch.manual_seed seeds the CUDA generators too", lambda: torch.cuda.default_generators[0].initial_seed())

# -- device mismatches a GPU refuses --------------------------------------------------------------
case("randn(generator=cuda) on the CPU",
     lambda: torch.randn(3, generator=gen))  # mismatch: cpu factory, cuda generator
case("randn(device='cuda', generator=cpu)",
     lambda: torch.randn(3, device="cuda", generator=torch.Generator()))  # mismatch: cuda factory, cpu generator
case("cpu.normal_(generator=cuda)", lambda: torch.empty(3).normal_(generator=gen))
case("cuda.normal_(generator=cpu)", lambda: torch.empty(3, device="cuda").normal_(generator=torch.Generator()))
case("randperm(generator=cuda) on the CPU", lambda: torch.randperm(4, generator=gen))
case("randperm(device='cuda', generator=cpu)", lambda: torch.randperm(4, device="cuda", generator=torch.Generator()))

# -- code without a CUDA generator: as before ------------------------------------------------------
case("type(torch.Generator()) is torch._C.Generator", lambda: type(torch.Generator()) is torch._C.Generator)
case("Generator(device='cpu').device", lambda: torch.Generator(device="cpu"))
case("isinstance(default_generator, torch.Generator)", lambda: isinstance(torch.default_generator, torch.Generator))
case("cpu generator draws", lambda: rounded(torch.randn(2, generator=torch.Generator().manual_seed(0))))
case("cpu generator in a cpu randperm", lambda: torch.randperm(4, generator=torch.Generator().manual_seed(0)).tolist())
case("pickle(cpu generator)", lambda: type(pickle.loads(pickle.dumps(torch.Generator()))) is torch._C.Generator)
case("deepcopy(cpu generator)", lambda: type(copy.deepcopy(torch.Generator())) is torch._C.Generator)
torch.manual_seed(0)
case("torch.manual_seed(0); randn(device='cuda'): the CPU's stream", lambda: rounded(torch.randn(2, device="cuda")))
torch.cuda.manual_seed(5)
torch.manual_seed(0)
case("cuda.manual_seed leaves the CPU's stream", lambda: rounded(torch.randn(2)))
print("DONE", flush=True)
