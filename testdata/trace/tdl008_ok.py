"""TDL008, correct: the new tensor is made on the input's device."""
import torch
import torch.nn as nn


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        noise = torch.randn(x.shape, device=x.device)
        return self.fc(x + noise)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Noisy().to(device)
print(model(torch.randn(2, 4).to(device)).sum().item())
