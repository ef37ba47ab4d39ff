# %% [markdown]
# Train a small MLP on the two-moons-like data and save it for analyze_cells.py

# %%
import math

import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"

# %%
t = torch.rand(400) * math.pi
X = torch.cat([torch.stack([t.cos(), t.sin()], 1), torch.stack([1 - t.cos(), 0.5 - t.sin()], 1)])
y = torch.cat([torch.zeros(400), torch.ones(400)])

# %%
clf = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
opt = torch.optim.Adam(clf.parameters(), lr=1e-2)
for it in range(50):
    loss = nn.functional.binary_cross_entropy_with_logits(clf(X.to(device)).squeeze(1), y.to(device))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final loss", loss.item())

# %%
torch.save(clf.state_dict(), "moons_clf.pt")
