"""TDL005: an optimizer built before `model.to(device)`.

With torch's default flags the parameters keep their identity through the move, so an
optimizer without state follows it (first case: harmless at run time). When the move makes
new parameters, the optimizer keeps updating the old ones and training silently does nothing
(second case). Adagrad builds its state in its constructor, on the CPU, and the state stays
there (third case: a crash at the first step).
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

torch.__future__.set_overwrite_module_params_on_conversion(True)
replaced = nn.Linear(4, 2)
sgd = torch.optim.SGD(replaced.parameters(), lr=0.1)  # expect: TDL005
replaced.to(device)
replaced(x).sum().backward()
sgd.step()
torch.__future__.set_overwrite_module_params_on_conversion(False)

second = nn.Linear(4, 2)
adagrad = torch.optim.Adagrad(second.parameters(), lr=0.1)  # expect: TDL005
second.to(device)
second(x).sum().backward()
adagrad.step()
print("trained")
