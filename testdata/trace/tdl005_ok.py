"""TDL005, correct: optimizers built after the move."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(3, 4).to(device)

first = nn.Linear(4, 2).to(device)
adam = torch.optim.Adam(first.parameters(), lr=0.1)
first(x).sum().backward()
adam.step()

second = nn.Linear(4, 2).to(device)
adagrad = torch.optim.Adagrad(second.parameters(), lr=0.1)
second(x).sum().backward()
adagrad.step()
print("trained")
