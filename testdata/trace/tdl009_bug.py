"""TDL009: `.numpy()` of a tensor on an accelerator raises a TypeError."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
with torch.no_grad():
    out = model(torch.randn(3, 4).to(device))
print(out.numpy())  # expect: TDL009
