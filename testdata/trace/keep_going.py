"""Several planted device bugs: with --keep-going one traced run finds all of them.

Each line marked `bug:` is where a bug starts (the code of the rule that predicts it, or
TDL100 for a mismatch no rule predicts).
"""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.offset = torch.zeros(2)  # bug: TDL006

    def forward(self, x):
        return self.fc(x) + self.offset


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
for x, y in loader:
    x.to(device)  # bug: TDL003
    out = model(x)

path = os.path.join(tempfile.mkdtemp(), "net.pt")
torch.save(model.state_dict(), path)
model.load_state_dict(torch.load(path))  # round trip: TDL004

with torch.no_grad():
    scores = model(torch.ones(2, 4).to(device))
print(scores.numpy())  # bug: TDL009

features = torch.from_numpy(np.ones((3, 4), dtype=np.float32))
print(model(features).shape)  # bug: TDL100
