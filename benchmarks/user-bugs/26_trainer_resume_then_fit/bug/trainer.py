import os

import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, lr=1e-3, device=None, ckpt_path="trainer.ckpt"):
        self.model = model
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=1e-2)  # BUG: optimizer-state-before-move
        self.ckpt_path = ckpt_path
        self.epoch = 0

    def save(self):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "epoch": self.epoch}, self.ckpt_path)

    def resume(self):
        if not os.path.exists(self.ckpt_path):
            return False
        state = torch.load(self.ckpt_path, map_location="cpu")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = state["epoch"]
        return True

    def fit(self, data, epochs):
        self.model.to(self.device)
        loss_fn = nn.MSELoss()
        for _ in range(epochs):
            self.epoch += 1
            for x, y in data:
                x, y = x.to(self.device), y.to(self.device)
                loss = loss_fn(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {self.epoch}: {loss.item():.4f}")
            self.save()
