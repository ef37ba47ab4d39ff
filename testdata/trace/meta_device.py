"""The meta device standing in for a GPU, as demos on CPU-only machines use it: the simulated
GPU keeps it a device of its own, which refuses CPU tensors in its own words ("Tensor on
device cpu is not on the expected device meta!")."""
import torch
import torch.nn as nn


class Shift(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        offset = torch.ones(x.size(1))  # expect: TDL008
        return self.proj(x) + offset


model = Shift().to("meta")
print(model(torch.randn(2, 4, device="meta")).shape)
