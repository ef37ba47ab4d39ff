"""Write a TinyNet checkpoint that looks saved on a GPU (storages tagged ``cuda:0``), on a
machine without one: ``python make_gpu_checkpoint.py OUT`` from testdata/project.

Loading it without ``map_location`` on a CPU-only machine fails exactly as a real GPU
checkpoint does ("Attempting to deserialize object on a CUDA device ...").
"""
import sys

import torch
import torch.serialization

from model import TinyNet

# A tagger of higher priority than torch's own names every storage's location 'cuda:0'.
torch.serialization.register_package(1, lambda storage: "cuda:0", lambda storage, location: None)

model = TinyNet()
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 0}, sys.argv[1])
