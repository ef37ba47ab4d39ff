"""TDL009 demo: `.numpy()` on tensors that live where the model lives.

On a machine with a GPU every `.numpy()` below raises
``TypeError: can't convert cuda:0 device type tensor to numpy``; on the CPU it runs.
After ``torchdev-lint --fix`` each one reads ``.cpu().numpy()`` and prints the same values.
"""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
inputs = torch.randn(5, 4)

with torch.no_grad():
    logits = model(inputs.to(device))
    probs = torch.softmax(logits, dim=1)
    _, predicted = torch.max(probs, 1)
    print("predicted", predicted.numpy().tolist())
    print("probs", probs.numpy().round(4).tolist())
    batch = {"x": inputs, "y": predicted}
    batch = {k: v.to(device) for k, v in batch.items()}
    print("x", batch["x"].numpy().round(4).tolist())
