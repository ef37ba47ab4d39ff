import argparse

import torch
import torch.nn as nn


def make_model():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def train_seed(seed, device, steps=15):
    torch.manual_seed(seed)
    model = make_model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        x = torch.randn(64, 8, device=device)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save({"model": model.state_dict(), "seed": seed, "loss": loss.item()}, f"member_{seed}.pt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for seed in args.seeds:
        train_seed(seed, device)
