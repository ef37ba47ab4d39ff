# %% [markdown]
# Load the classifier from train_cells.py and look at its decision boundary

# %%
import os

import torch as T
import torch.nn as nn

device = "cuda" if T.cuda.is_available() else "cpu"
clf = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
if os.path.exists("moons_clf.pt"):
    clf.load_state_dict(T.load("moons_clf.pt", map_location=device))
else:
    print("no saved weights: run train_cells.py first")
clf.to(device).eval()

# %%
xs = T.linspace(-1.5, 2.5, 40)
ys = T.linspace(-1.0, 1.5, 30)
grid = T.cartesian_prod(xs, ys).to(device)
with T.no_grad():
    p = T.sigmoid(clf(grid)).view(40, 30).cpu()
print("fraction of the plane classified as class 1:", (p > 0.5).float().mean().item())
