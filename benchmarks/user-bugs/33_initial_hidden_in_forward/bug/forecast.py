import argparse

import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, n_features=3, hidden=24, layers=1):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.rnn = nn.LSTM(n_features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, state=None):
        if state is None:
            h0 = torch.zeros(self.layers, x.size(0), self.hidden)  # BUG: factory-in-forward
            state = (h0, torch.zeros_like(h0))
        out, _ = self.rnn(x, state)
        return self.head(out[:, -1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    model = Forecaster().to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    series = torch.randn(200, 3).cumsum(0)
    windows = series.unfold(0, 12, 1).transpose(1, 2)
    for epoch in range(2):
        x = windows[:-1].to(args.device)
        y = series[12:, 0:1].to(args.device)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(epoch, loss.item())
