"""Write the state of an nn.Linear(4, 2) as a GPU machine would save it (storages tagged
``cuda:0``), without a GPU and without the tracer: ``python gpu_checkpoint.py OUT``. The
tracer's tests load it as a checkpoint that came from elsewhere."""
import sys

import torch
import torch.nn as nn

# A tagger of higher priority than torch's own names every storage's location 'cuda:0'.
torch.serialization.register_package(1, lambda storage: "cuda:0", lambda storage, location: None)
torch.save(nn.Linear(4, 2).state_dict(), sys.argv[1])
