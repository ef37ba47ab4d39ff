"""TDL013: a data helper moves batches to CUDA whenever it is there; `--cuda` moves the model.

Without `--cuda` on a machine with CUDA (or the simulated GPU), the model stays on the CPU and
the batches go to CUDA."""
import argparse

import torch
import torch.nn as nn


def to_device(batch):
    if torch.cuda.is_available():
        batch = batch.cuda()
    return batch


parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
args = parser.parse_args()
model = nn.Linear(3, 2).to("cuda" if args.cuda else "cpu")
for step in range(2):
    out = model(to_device(torch.randn(4, 3)))  # expect: TDL013
    print(out.sum().item())
