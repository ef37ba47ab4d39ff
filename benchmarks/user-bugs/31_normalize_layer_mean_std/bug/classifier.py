import torch
import torch.nn as nn


class Normalize(nn.Module):
    """ImageNet-style input normalisation inside the model, so callers pass raw [0, 1] images."""

    def __init__(self, mean, std):
        super().__init__()
        self.mean = torch.tensor(mean).view(1, -1, 1, 1)  # BUG: cpu-attribute
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x):
        return (x - self.mean) / self.std


def make_model():
    return nn.Sequential(
        Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2),
    )


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = make_model().to(device)
    images = torch.rand(4, 3, 24, 24, device=device)
    print(model(images).softmax(-1))
