"""A clean, realistic training script: nothing in it may be reported as a device bug.

DataLoader with worker processes, BatchNorm, Adam, an LR scheduler, gradient clipping,
a checkpoint saved and loaded back, and an evaluation that goes through `.cpu().numpy()`.
Usage: python clean_training.py [--epochs N] [--workers N] [--checkpoint PATH]
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Blobs(Dataset):
    def __init__(self, n=96, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 10, generator=generator)
        self.y = (self.x[:, 0] + self.x[:, 1] > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.bn = nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, 2)
        self.register_buffer("scale", torch.ones(32))

    def forward(self, x):
        h = F.relu(self.bn(self.fc1(x))) * self.scale
        noise = torch.zeros_like(h)
        return self.fc2(h + noise)


def evaluate(model, loader, device):
    model.eval()
    predictions, labels = [], []
    with torch.no_grad():
        for x, y in loader:
            logits = model(x.to(device))
            predictions.append(logits.argmax(dim=1).cpu().numpy())
            labels.append(y.numpy())
    model.train()
    return float(np.mean(np.concatenate(predictions) == np.concatenate(labels)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train = DataLoader(Blobs(), batch_size=16, shuffle=True, num_workers=args.workers,
                       pin_memory=torch.cuda.is_available())
    test = DataLoader(Blobs(48, seed=1), batch_size=16, num_workers=0)

    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(args.epochs):
        for x, y in train:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}")

    path = args.checkpoint or os.path.join(tempfile.mkdtemp(), "clean.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    restored = Net().to(device)
    state = torch.load(path, map_location=device)
    restored.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    print(f"accuracy {evaluate(restored, test, device):.3f}")


if __name__ == "__main__":
    main()
