"""TDL009 demo: `.numpy()` on a model's output that requires grad.

This fails on every machine: on a GPU with ``TypeError: can't convert cuda:0 device type
tensor to numpy``, on the CPU with ``RuntimeError: Can't call numpy() on Tensor that
requires grad``. The fix writes ``.detach().cpu().numpy()``, which runs on both.
"""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Linear(3, 2).to(device)
x = torch.randn(4, 3).to(device)
out = model(x)
out.sum().backward()
expected = out.tolist()
array = out.numpy()
assert array.tolist() == expected
print("ok", array.shape)
