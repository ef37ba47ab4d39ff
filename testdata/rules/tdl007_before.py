"""TDL007 demo: submodules kept in a plain list and a plain dict.

`nn.Module` registers submodules assigned directly as attributes only. The layers in
`self.blocks` and `self.heads` are missing from `parameters()` (an optimizer never trains
them) and `state_dict()` (a checkpoint does not save them), `.eval()` leaves their dropout
on, and `model.to(...)` leaves them behind: a dtype move shows it, and on a GPU (or,
without one, the `meta` device standing in for it) the forward fails with a device mix.
"""
import torch
import torch.nn as nn

ACCELERATOR = "cuda" if torch.cuda.is_available() else "meta"  # meta stands in for a GPU

class MultiTask(nn.Module):
    def __init__(self, dim, tasks):
        super().__init__()
        self.trunk = nn.Linear(dim, dim)
        self.blocks = [nn.Linear(dim, dim) for _ in range(2)]
        self.heads = {}
        for task in tasks:
            self.heads[task] = nn.Sequential(nn.Dropout(0.5), nn.Linear(dim, 1))

    def forward(self, x):
        h = self.trunk(x)
        for block in self.blocks:
            h = torch.relu(block(h))
        return {task: head(h) for task, head in self.heads.items()}


torch.manual_seed(0)
model = MultiTask(4, ["age", "score"])
print("parameters:", sum(p.numel() for p in model.parameters()))
print("state_dict:", sorted(model.state_dict()))
model.eval()
print("dropout training after eval():", [head[0].training for head in model.heads.values()])

model.to(torch.float64)
print("dtypes after .to(float64):", model.blocks[0].weight.dtype, model.heads["age"][1].weight.dtype)
model.to(torch.float32)

model.to(ACCELERATOR)
out = model(torch.randn(3, 4, device=ACCELERATOR))
print(ACCELERATOR, "forward:", {task: tuple(value.shape) for task, value in out.items()})
