"""TDL009, correct: copy to the host first."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
with torch.no_grad():
    out = model(torch.randn(3, 4).to(device))
print(out.cpu().numpy())
