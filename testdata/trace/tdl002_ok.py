"""TDL002, correct: the device string depends on what the machine has."""
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(4, 2).to(device)
print(model(torch.ones(3, 4).to(device)).sum().item())
