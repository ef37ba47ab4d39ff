"""TDL002: the device typed in as a string. Every "cuda" below works on a GPU machine and
raises `AssertionError: Torch not compiled with CUDA enabled` on a CPU-only one.
`torchdev-lint --fix` makes it run on both."""

import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

EVAL_DEVICE = "cuda"


def make_batch(n):
    x = torch.randn(n, 4, device="cuda")
    y = torch.randint(0, 2, (n,)).to("cuda:0")
    return x, y


def main():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to(torch.device("cuda"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x, y = make_batch(16)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.pt")
        torch.save(model.state_dict(), path)
        state = torch.load(path, map_location="cuda")
    model.load_state_dict(state)
    model.to(EVAL_DEVICE).eval()
    with torch.no_grad():
        x, y = make_batch(64)
        accuracy = (model(x).argmax(1) == y).float().mean()
    print(f"ok loss={loss.item():.4f} accuracy={accuracy.item():.2f}")


if __name__ == "__main__":
    main()
