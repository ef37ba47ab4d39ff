"""A small classifier used by train.py."""
import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self, in_features: int = 8, classes: int = 3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, 16), nn.ReLU())
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.body(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def to_half(model):
    # An nn.Module moves in place: this is correct and must not be flagged.
    model.to(torch.float16)
    return model
