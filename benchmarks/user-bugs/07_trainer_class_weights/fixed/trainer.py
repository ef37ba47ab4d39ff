import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    """Trains a classifier on imbalanced data with a class-weighted loss."""

    def __init__(self, model, device, class_counts=None, lr=1e-2):
        self.device = device
        self.model = model.to(device)
        if class_counts is not None:
            weights = 1.0 / torch.tensor(class_counts, dtype=torch.float)
            self.criterion = nn.CrossEntropyLoss(weight=(weights / weights.sum()).to(device))
        else:
            self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)

    def train_epoch(self, loader):
        self.model.train()
        running = 0.0
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            loss = self.criterion(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            running += loss.item()
        return running / len(loader)


if __name__ == "__main__":
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    labels = torch.cat([torch.zeros(80, dtype=torch.long), torch.ones(16, dtype=torch.long)])
    data = TensorDataset(torch.randn(96, 20), labels)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 2))
    trainer = Trainer(model, device, class_counts=[80, 16])
    for epoch in range(2):
        print(epoch, trainer.train_epoch(DataLoader(data, batch_size=32, shuffle=True)))
