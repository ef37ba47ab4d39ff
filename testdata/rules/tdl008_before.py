"""TDL008: tensors built in `forward` without `device=`. On the CPU nothing shows; on any
other device the forward mixes the CPU tensor with the inputs and fails. A CPU-only
machine has no GPU, so the `meta` device stands in for one: like CUDA, it refuses to mix
its tensors with CPU tensors ("Tensor on device cpu is not on the expected device meta!")
and, like CUDA, accepts 0-dim CPU scalars. Where there is a GPU, the program uses it. `torchdev-lint --fix --unsafe-fixes` makes the
forward run on both, with the same values on the CPU."""

import torch
import torch.nn as nn

ACCELERATOR = "cuda" if torch.cuda.is_available() else "meta"

class TinyAttention(nn.Module):
    def __init__(self, dim=8, max_len=16):
        super().__init__()
        self.pos = nn.Embedding(max_len, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.size(1))
        h = x + self.pos(positions)
        scores = h @ h.transpose(1, 2) / torch.tensor(8.0).sqrt()  # 0-dim: fine anywhere
        scores = scores + self.causal_mask(h)
        return self.proj(scores.softmax(-1) @ h)

    def causal_mask(self, h):
        size = h.size(1)
        mask = torch.full((size, size), float("-inf"))
        return torch.triu(mask, diagonal=1)


class Jitter(nn.Module):
    def forward(self, x):
        return x + 0.01 * torch.randn(x.shape)


def run(device):
    torch.manual_seed(0)
    model = nn.Sequential(TinyAttention(), Jitter()).to(device)
    x = torch.randn(2, 5, 8).to(device)
    return model(x)


if __name__ == "__main__":
    out = run("cpu")
    print(f"cpu sum={out.sum().item():.6f}", flush=True)
    out = run(ACCELERATOR)
    print(f"{ACCELERATOR} shape={tuple(out.shape)}")
