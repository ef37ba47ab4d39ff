"""TDL004: a checkpoint saved on a GPU does not load on a machine without one.

Usage: python tdl004_bug.py [CHECKPOINT]; without one, it saves its own first.
"""
import os
import sys
import tempfile

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "linear.pt")
if not os.path.exists(path):
    torch.save(model.state_dict(), path)
state = torch.load(path)  # expect: TDL004
model.load_state_dict(state)
print(sorted(state))
