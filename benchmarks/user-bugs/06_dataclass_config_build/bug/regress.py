from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    in_features: int = 8
    hidden: int = 32
    lr: float = 1e-2
    steps: int = 30
    batch_size: int = 32
    device: str = "cuda" if torch.cuda.is_available() else "cpu"


class Regressor(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def build(cfg: Config):
    model = Regressor(cfg.in_features, cfg.hidden).cuda()  # BUG: hardcoded-cuda
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    return model, optimizer


def train(cfg: Config):
    model, optimizer = build(cfg)
    true_w = torch.randn(cfg.in_features, device=cfg.device)
    for step in range(cfg.steps):
        x = torch.randn(cfg.batch_size, cfg.in_features, device=cfg.device)
        y = x @ true_w + 0.1 * torch.randn(cfg.batch_size, device=cfg.device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(step, round(loss.item(), 4))
    return model


if __name__ == "__main__":
    train(Config())
