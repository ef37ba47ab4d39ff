"""TDL004, correct: map_location puts the storages where this machine can hold them.

Usage: python tdl004_ok.py [CHECKPOINT]; without one, it saves its own first.
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
state = torch.load(path, map_location=device)
model.load_state_dict(state)
print(sorted(state))
