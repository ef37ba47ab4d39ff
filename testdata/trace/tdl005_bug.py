"""TDL005: an optimizer built before `model.to(device)`.

With torch's default flags the parameters keep their identity through the move, so an
optimizer without state follows it (first case: harmless at run time). Adagrad builds its
state in its constructor, on the CPU, and the state stays there (second case: a real bug).
"""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(3, 4).to(device)

first = nn.Linear(4, 2)
adam = torch.optim.Adam(first.parameters(), lr=0.1)  # expect not confirmed: TDL005
first.to(device)
first(x).sum().backward()
adam.step()

second = nn.Linear(4, 2)
adagrad = torch.optim.Adagrad(second.parameters(), lr=0.1)  # expect: TDL005
second.to(device)
second(x).sum().backward()
adagrad.step()
print("trained")
