"""Data-parallel training the way nanoGPT does it: a DDP run when torchrun sets RANK.

`torchrun --standalone --nproc_per_node=2 ddp_train.py`, or `python ddp_train.py` alone.
"""
import os

import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

backend = "nccl"  # a setting, as in nanoGPT's configurator
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend=backend)  # expect: TDL101
    local_rank = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{local_rank}"  # expect: TDL002
    torch.cuda.set_device(device)
else:
    device = "cuda" if torch.cuda.is_available() else "cpu"

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
if ddp:
    model = DDP(model, device_ids=[local_rank])
raw = model.module if ddp else model
optimizer = torch.optim.SGD(raw.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(4, 8).to(device)
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
print(f"ddp={ddp} loss={loss.item():.4f}")
if ddp:
    destroy_process_group()
