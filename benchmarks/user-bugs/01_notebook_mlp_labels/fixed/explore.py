# Quick experiment: does a small MLP learn the synthetic digits?
# (cells pasted from a notebook; run top to bottom)
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)

# %% data
X = torch.randn(256, 64)
y = (X[:, :10].argmax(1) + X[:, 10:20].argmax(1)) % 10

# %% model
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

# %% train
for epoch in range(3):
    perm = torch.randperm(len(X))
    for i in range(0, len(X), 64):
        idx = perm[i:i + 64]
        xb = X[idx].to(device)
        yb = y[idx].to(device)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")

# %% accuracy
with torch.no_grad():
    acc = (model(X.to(device)).argmax(1).cpu() == y).float().mean()
print("train accuracy", acc.item())
