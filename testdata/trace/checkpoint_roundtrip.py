"""A checkpoint saved and loaded back by the same run: no bug on any machine.

The saves happen in helpers, which the static round-trip check does not follow: only the
traced run shows where the loaded files came from. Usage: python checkpoint_roundtrip.py CHECKPOINT
"""
import sys

import torch
import torch.nn as nn


def save(state, path):
    torch.save(state, path)


def save_to_file(state, path):
    with open(path, "wb") as handle:
        torch.save(state, handle)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
save(model.state_dict(), sys.argv[1])
state = torch.load(sys.argv[1])  # expect not confirmed: TDL004
model.load_state_dict(state)
print(sorted(state))
save_to_file(model.state_dict(), sys.argv[1] + ".file")
with open(sys.argv[1] + ".file", "rb") as handle:
    state = torch.load(handle)  # expect not confirmed: TDL004
