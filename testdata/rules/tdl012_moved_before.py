"""TDL012 demo under the tracer: `nn.Parameter(t).double()` is a plain tensor attribute, so
`model.to(device)` leaves it on the CPU; on a GPU (or `torchdev-lint trace --mode sim`) the
forward mixes devices. After the fix it is a parameter that moves with the model."""
import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n)).double()

    def forward(self, x):
        return x * self.gamma


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Scale(3).to(device)
print("parameters:", len(list(model.parameters())))
print(model(torch.ones(3, dtype=torch.float64).to(device)).sum().item())
