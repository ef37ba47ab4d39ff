"""TDL011 demo, fixed: each rank sets its own device from LOCAL_RANK before it picks "cuda".

The same torchrun script as tdl011_before.py with the rule's fix: `torch.cuda.set_device(local_rank)`
right after the rank is read, so `.cuda()` and `torch.device("cuda")` mean GPU `local_rank`.
`torchdev-lint trace` runs it as two ranks on two simulated GPUs: rank 0 on cuda:0, rank 1 on cuda:1.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
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
