"""torch.func transforms and fake tracing on the GPU, as curvature libraries' test suites run
them: ``clean`` runs on a GPU (and on the simulated one) without a device problem; ``bug``
multiplies by a CPU tensor inside ``jacrev``, which fails on a real GPU."""

import sys
from functools import partial

import torch
from torch.func import functional_call, jacrev, jvp, vmap
from torch.fx.experimental.proxy_tensor import make_fx

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
pred = torch.randn(2, 3, device=device)
target = torch.randn(2, 3, device=device)
loss = torch.nn.MSELoss()
# forward over reverse: the tensors torch.func wraps keep their device
_, hvp = jvp(jacrev(lambda p: loss(p, target)), (pred,), (torch.randn_like(pred),))

model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3)).to(device)
biases = {name: p.detach().clone() for name, p in model.named_parameters() if "bias" in name}
x = torch.randn(8, 5, device=device)
ones = {name: torch.ones_like(b) for name, b in biases.items()}
out, tangent = jvp(lambda b: functional_call(model, b, (x,)), (biases,), (ones,))

weight = torch.randn(5, 4)  # a CPU constant the traced function captures: fake tracing makes it fake
graph = partial(make_fx, tracing_mode="fake", _allow_non_fake_inputs=True)(lambda a: a @ weight)(torch.randn(3, 5))
# the same on the GPU, with a leaf that requires grad
leaf = torch.randn(5, 4, device=device, requires_grad=True)
on_gpu = partial(make_fx, tracing_mode="fake", _allow_non_fake_inputs=True)(lambda a: a @ leaf)(x[:3])
# a factory inside vmap inside a fake trace takes the device of the tensor it was handed
per_row = lambda row: torch.zeros(2, *row.shape, device=row.device)  # noqa: E731
batched = make_fx(lambda a: vmap(per_row)(a.sin()) + 1, tracing_mode="fake")(torch.randn(3, 4))
assert batched(torch.randn(3, 4)).device.type == "cpu"

if sys.argv[1:] == ["bug"]:
    scale = torch.randn(2, 3)
    jacrev(lambda p: (p * scale).sum())(pred)
print("ran", tuple(hvp.shape), tuple(tangent.shape), len(graph.graph.nodes), len(on_gpu.graph.nodes))
