"""TDL001, correct: the device follows what the machine has."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = torch.randn(3, 4).to(device)
print(model(x).sum().item())
