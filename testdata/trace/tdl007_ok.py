"""TDL007, correct: nn.ModuleList registers the submodules."""
import torch
import torch.nn as nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Stack().to(device)
print(model(torch.randn(2, 4).to(device)).sum().item())
