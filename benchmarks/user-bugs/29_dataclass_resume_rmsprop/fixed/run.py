import os
from dataclasses import dataclass

import torch
from torch import nn, optim


@dataclass
class Cfg:
    checkpoint: str = "policy.pt"
    epochs: int = 2
    lr: float = 1e-3
    device: str = "cuda" if torch.cuda.is_available() else "cpu"


class Policy(nn.Module):
    def __init__(self, obs=4, actions=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs, 32), nn.Tanh(), nn.Linear(32, actions))

    def forward(self, obs):
        return torch.log_softmax(self.net(obs), dim=-1)


def maybe_resume(cfg, model, opt):
    if not os.path.exists(cfg.checkpoint):
        return 0
    ckpt = torch.load(cfg.checkpoint, map_location="cpu")
    model.load_state_dict(ckpt["policy"])
    opt.load_state_dict(ckpt["opt"])
    return ckpt["epoch"]


def main(cfg: Cfg):
    policy = Policy().to(cfg.device)
    opt = optim.RMSprop(policy.parameters(), lr=cfg.lr, alpha=0.99)
    start = maybe_resume(cfg, policy, opt)
    for epoch in range(start, start + cfg.epochs):
        obs = torch.randn(64, 4, device=cfg.device)
        actions = torch.randint(0, 2, (64,), device=cfg.device)
        returns = torch.randn(64, device=cfg.device)
        logp = policy(obs).gather(1, actions[:, None]).squeeze(1)
        loss = -(logp * returns).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.save({"policy": policy.state_dict(), "opt": opt.state_dict(), "epoch": epoch + 1}, cfg.checkpoint)
        print(f"epoch {epoch}: loss {loss.item():+.4f}")


if __name__ == "__main__":
    main(Cfg())
