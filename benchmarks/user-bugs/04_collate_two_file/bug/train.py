import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from data import SensorWindows, collate

device = "cuda" if torch.cuda.is_available() else "cpu"

model = nn.Sequential(
    nn.Conv1d(6, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 4)
).to(device)
loader = DataLoader(SensorWindows(), batch_size=16, shuffle=True, collate_fn=collate)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(2):
    for signals, labels in loader:
        signals, labels = signals.to(device), labels.to(device)
        loss = loss_fn(model(signals), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss={loss.item():.3f}")
