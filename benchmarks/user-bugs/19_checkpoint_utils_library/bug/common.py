"""Model and checkpoint helpers shared by train.py and infer.py."""
import os

import torch
import torch.nn as nn


class AutoEncoder(nn.Module):
    def __init__(self, dim=32, code=4):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, code))
        self.dec = nn.Sequential(nn.Linear(code, 16), nn.ReLU(), nn.Linear(16, dim))

    def forward(self, x):
        return self.dec(self.enc(x))


def save_checkpoint(model, optimizer, epoch, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"epoch{epoch:03d}.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, path)
    return path


def load_checkpoint(path, model, device):
    """Restore `model` from a checkpoint written by save_checkpoint and put it on `device`."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    state = torch.load(path)  # BUG: load-without-map-location
    model.load_state_dict(state["model"])
    return model.to(device), state["epoch"]
