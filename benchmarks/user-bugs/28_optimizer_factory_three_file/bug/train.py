import torch
import torch.nn as nn

from config import CONFIG
from optim_utils import build_optimizer, resolve_device


def build_model(cfg):
    return nn.Sequential(nn.Linear(cfg["in_dim"], cfg["hidden"]), nn.ReLU(), nn.Linear(cfg["hidden"], cfg["out_dim"]))


def main(cfg=CONFIG):
    device = resolve_device(cfg["device"])
    model = build_model(cfg["model"])
    optimizer = build_optimizer(model, cfg["optim"])  # BUG: optimizer-state-before-move
    model = model.to(device)
    for step in range(cfg["train"]["steps"]):
        x = torch.randn(cfg["train"]["batch_size"], cfg["model"]["in_dim"], device=device)
        y = torch.randint(0, cfg["model"]["out_dim"], (x.size(0),), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("done, loss", loss.item())


if __name__ == "__main__":
    main()
