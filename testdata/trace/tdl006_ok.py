"""TDL006, correct: a buffer moves with the module."""
import torch
import torch.nn as nn


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("mask", torch.ones(4), persistent=False)

    def forward(self, x):
        return self.fc(x) * self.mask


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Masked().to(device)
print(model(torch.randn(2, 4).to(device)).sum().item())
