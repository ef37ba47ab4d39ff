"""TDL002: a hardcoded "cuda" device string fails where there is no GPU."""
import torch
import torch.nn as nn

device = "cuda"  # expect: TDL002
model = nn.Linear(4, 2).to(device)
print(model(torch.ones(3, 4).to(device)).sum().item())
