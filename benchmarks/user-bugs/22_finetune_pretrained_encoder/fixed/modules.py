import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, dim=40, hidden=32, out=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, out))

    def forward(self, x):
        return self.body(x)


class Classifier(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.encoder(x))
