"""TDL001: an unguarded `.cuda()` stops the program on a machine without a GPU."""
import torch
import torch.nn as nn

model = nn.Linear(4, 2).cuda()  # expect: TDL001
x = torch.randn(3, 4).to(next(model.parameters()).device)
print(model(x).sum().item())
