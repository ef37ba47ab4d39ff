"""TDL006 demo: tensors kept as plain module attributes.

`model.to(device)` converts parameters and buffers only, so `mean`, `std` and `mask` stay
where they were made. On a GPU the first forward after `model.cuda()` fails with
"Expected all tensors to be on the same device"; without one the `meta` device plays the
accelerator (a CPU tensor meeting a meta tensor fails the same way), and a dtype move
shows the same `Module._apply` path leaving the attributes behind.
"""
import torch
import torch.nn as nn

ACCELERATOR = "cuda" if torch.cuda.is_available() else "meta"  # meta stands in for a GPU

class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.mean = torch.tensor(mean).view(1, -1)
        self.std = torch.tensor(std).view(1, -1)

    def forward(self, x):
        return (x - self.mean) / self.std


class CausalScores(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self._build_mask(n)

    def _build_mask(self, n):
        self.mask = torch.tril(torch.ones(n, n)).bool()

    def forward(self, x):
        h = self.proj(x)
        return (h @ h.transpose(-1, -2)).masked_fill(~self.mask, 0.0)


torch.manual_seed(0)
model = nn.Sequential(Normalize([0.5, 0.4, 0.3], [0.2, 0.2, 0.2]), CausalScores(3, 3))
x = torch.randn(3, 3)
print("cpu forward", round(model(x).sum().item(), 4))

model.to(torch.float64)
print("after .to(float64):", {
    "mean": str(model[0].mean.dtype), "mask": str(model[1].mask.dtype),
    "weight": str(model[1].proj.weight.dtype),
})
print("buffers:", sorted(name for name, _ in model.named_buffers()))
print("state_dict:", sorted(model.state_dict()))
model.to(torch.float32)

model.to(ACCELERATOR)
print(f"after .to({ACCELERATOR!r}):", model[0].mean.device, model[1].mask.device)
out = model(x.to(ACCELERATOR))
print(ACCELERATOR, "forward", out.device, tuple(out.shape))
