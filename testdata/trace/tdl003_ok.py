"""TDL003, correct: the moved batch is kept."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
for x, y in loader:
    x = x.to(device)
    y = y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    print(loss.item())
