"""A checkpoint saved and loaded back by the same run: no bug on any machine.

Usage: python checkpoint_roundtrip.py CHECKPOINT
"""
import sys

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
torch.save(model.state_dict(), sys.argv[1])
state = torch.load(sys.argv[1])  # expect not confirmed: TDL004
model.load_state_dict(state)
print(sorted(state))
with open(sys.argv[1] + ".file", "wb") as handle:
    torch.save(model.state_dict(), handle)
with open(sys.argv[1] + ".file", "rb") as handle:
    state = torch.load(handle)  # expect not confirmed: TDL004
