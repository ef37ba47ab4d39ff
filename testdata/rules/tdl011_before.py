"""TDL011 demo: every rank of a torchrun job on GPU 0.

`torchrun --nproc-per-node=2 tdl011_before.py`: each process joins the group and reads its
LOCAL_RANK, but `.cuda()` and `torch.device("cuda")` mean the *current* device, which is GPU 0
until the process sets one. Both ranks put their model and batches on GPU 0: NCCL stops with
"Duplicate GPU detected", or GPU 0 runs out of memory. With one process it works.
`torchdev-lint trace` runs it as two ranks on two simulated GPUs and shows both on cuda:0.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = nn.Linear(4, 2).cuda()
device = torch.device("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(local_rank)
for step in range(3):
    x = torch.randn(8, 4, device=device)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"rank {dist.get_rank()} of {dist.get_world_size()} (local {local_rank}): loss {loss.item():.4f} on {x.device}")
dist.destroy_process_group()
