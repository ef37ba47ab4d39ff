"""TDL004: a program that writes its checkpoint with CUDA location tags itself (as a file from a
GPU machine has them), then loads it without map_location. Plainly run on a machine without a
GPU, the load raises; that the same run wrote the file excuses nothing.

Usage: python tdl004_own_tags.py CHECKPOINT
"""
import sys

import torch
import torch.nn as nn



def save_as_on_a_gpu(state, path):
    """Name every storage's location cuda:0, whatever its device (restoring is left to torch)."""
    torch.serialization.register_package(1, lambda storage: "cuda:0", lambda storage, location: None)
    torch.save(state, path)


save_as_on_a_gpu(nn.Linear(4, 2).state_dict(), sys.argv[1])
state = torch.load(sys.argv[1])  # expect: TDL004
print(sorted(state))
