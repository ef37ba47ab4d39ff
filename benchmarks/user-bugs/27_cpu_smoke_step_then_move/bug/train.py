import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def smoke_test(model, optimizer, batch):
    """One optimisation step, so shape or loss errors show up before the long run."""
    dev = next(model.parameters()).device
    x, y = (t.to(dev) for t in batch)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"smoke test ok (loss {loss.item():.3f})")


def main(epochs=2, run_smoke_test=True):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(128, 5), torch.randn(128, 1)), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(5, 32), nn.SiLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)  # BUG: optimizer-state-before-move
    if run_smoke_test:
        smoke_test(model, optimizer, next(iter(loader)))
    model.to(device)
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
