"""TDL012 demo: a parameter that is not a parameter.

`nn.Parameter(t).double()` returns a plain tensor copy (a dtype change copies on any
machine, as `.cuda()` does on a GPU machine): the module does not register it, the optimizer
never sees it, and training leaves it where it started.
"""
import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n, dtype=torch.float32)).double()

    def forward(self, x):
        return x * self.gamma


torch.manual_seed(0)
model = Scale(3)
print("parameters:", [name for name, _ in model.named_parameters()])
print("leaf:", model.gamma.is_leaf)
optimizer = torch.optim.SGD(list(model.parameters()) or [torch.zeros(1, requires_grad=True)], lr=0.5)
x = torch.ones(3, dtype=torch.float64)
for _ in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - 2.0) ** 2).sum()
    loss.backward()
    optimizer.step()
print("gamma:", [round(v, 3) for v in model.gamma.tolist()])
