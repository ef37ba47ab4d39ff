import torch
import torch.nn as nn


class LogisticRegression(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.linear = nn.Linear(n_features, 1)

    def forward(self, x):
        return self.linear(x).squeeze(-1)


class OnlineLearner:
    """Updates a click model on each mini-batch of events as they arrive."""

    def __init__(self, n_features, lr=0.05, device="cpu"):
        self.model = LogisticRegression(n_features)
        self.opt = torch.optim.Adagrad(self.model.parameters(), lr=lr)  # BUG: optimizer-state-before-move
        self.device = torch.device(device)
        self.model.to(self.device)

    def update(self, x, clicked):
        x, clicked = x.to(self.device), clicked.to(self.device)
        loss = nn.functional.binary_cross_entropy_with_logits(self.model(x), clicked)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


if __name__ == "__main__":
    learner = OnlineLearner(10, device="cuda" if torch.cuda.is_available() else "cpu")
    for t in range(5):
        events = torch.randn(32, 10)
        print(t, learner.update(events, (events[:, 0] > 0).float()))
