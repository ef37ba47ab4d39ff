import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def accuracy(output, target):
    return (output.argmax(dim=1) == target).float().mean().item() * 100


def train_one_epoch(model, loader, criterion, optimizer, device):
    model.train()
    for images, targets in loader:
        images, targets = images.to(device), targets.to(device)
        loss = criterion(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def validate(model, loader, criterion, device):
    model.eval()
    top1, n = 0.0, 0
    for images, targets in loader:
        images = images.to(device)
        targets = targets.to(device)
        output = model(images)
        top1 += accuracy(output, targets) * images.size(0)
        n += images.size(0)
    return top1 / n


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 5)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    train = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 5, (64,)))
    val = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 5, (32,)))
    for epoch in range(2):
        start = time.time()
        train_one_epoch(model, DataLoader(train, batch_size=16, shuffle=True), criterion, optimizer, device)
        acc = validate(model, DataLoader(val, batch_size=16), criterion, device)
        print(f"epoch {epoch}: val acc {acc:.1f}% ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
