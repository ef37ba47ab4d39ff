"""TDL013: `--device` decides where the model goes; a helper builds its tensors wherever CUDA is.

Run with `--device cpu` on a machine with CUDA (or the simulated GPU)."""
import argparse

import torch
import torch.nn as nn


def get_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def positions(n):
    return torch.arange(n, dtype=torch.float32, device=get_device()).unsqueeze(1)


parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = parser.parse_args()
model = nn.Linear(1, 2).to(args.device)
x = torch.ones(5, 1, device=args.device)
print((model(x) + model(positions(5))).sum().item())  # expect: TDL013
