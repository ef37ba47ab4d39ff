"""TDL013: a detector module chooses its device at import; the application passes its own.

Run with `--cpu` on a machine with CUDA (or the simulated GPU): the model and the input go
to the CPU, the mean tensor to CUDA, and they meet in `__call__`."""
import argparse

import torch
import torch.nn as nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Detector:
    def __init__(self, device="cpu"):
        self.model = nn.Linear(3, 2).to(device)
        self.mean = torch.tensor([0.5, 0.5, 0.5]).to(DEVICE)

    def __call__(self, x):
        return self.model(x - self.mean)  # expect: TDL013


parser = argparse.ArgumentParser()
parser.add_argument("--cpu", action="store_true")
args = parser.parse_args()
device = "cpu" if args.cpu else "cuda"
detector = Detector(device=device)
print(detector(torch.randn(4, 3, device=device)).sum().item())
