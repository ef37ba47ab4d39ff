"""TDL010 demo: a class-weighted loss that is never moved.

`nn.CrossEntropyLoss` keeps `weight` as a buffer. The model and batches go to the device, the
loss stays on the CPU: on a CPU machine this trains; on a GPU (or under
`torchdev-lint trace --mode sim`) the first loss raises "Expected all tensors to be on the
same device".
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2)
model.to(device)
criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4).to(device)
    y = (x[:, 0] > 0).long()
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", round(float(loss), 4))
