"""Hardcoded CUDA as a machine without a GPU meets it: where a device defined on one line is
used, a load that fails at its own line, and CUDA requests that no rule predicts."""
import argparse
import os
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")  # a command-line default: no static finding
args = parser.parse_args()

device = "cuda"  # expect: TDL002
model = nn.Linear(4, 2).to(args.device)  # expect: TDL101
batch = torch.ones(3, 4).pin_memory()  # expect: TDL101
print(model(batch.to(args.device)).sum().item())  # expect: TDL101
print(torch.zeros(2, device=device))  # uses: device
path = os.path.join(tempfile.mkdtemp(), "weights.pt")
torch.save(nn.Linear(4, 2).state_dict(), path)
state = torch.load(path, map_location="cuda")  # expect: TDL002
print(sorted(state))
