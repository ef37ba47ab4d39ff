import os

import torch
import torch.nn as nn


def build_model():
    return nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 2))


class Predictor:
    """Scores transactions; the web app builds one per worker with device="cpu"."""

    def __init__(self, weights_path, device="cpu"):
        self.device = torch.device(device)
        self.model = build_model()
        if os.path.exists(weights_path):
            self.model.load_state_dict(torch.load(weights_path))  # BUG: load-without-map-location
        self.model.to(self.device).eval()

    @torch.no_grad()
    def score(self, features):
        x = torch.as_tensor(features, dtype=torch.float32, device=self.device)
        return torch.softmax(self.model(x), dim=-1)[:, 1].tolist()


if __name__ == "__main__":
    predictor = Predictor("fraud_model.pt", device=os.environ.get("DEVICE", "cpu"))
    print(predictor.score([[0.1] * 12, [-0.3] * 12]))
