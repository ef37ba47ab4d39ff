import torch
from torch import nn


class DenoisingAE(nn.Module):
    def __init__(self, dim=20, code=6, noise_std=0.2):
        super().__init__()
        self.noise_std = noise_std
        self.encoder = nn.Sequential(nn.Linear(dim, 12), nn.ReLU(), nn.Linear(12, code))
        self.decoder = nn.Sequential(nn.Linear(code, 12), nn.ReLU(), nn.Linear(12, dim))

    def forward(self, x):
        if self.training:
            x = x + self.noise_std * torch.randn_like(x)
        return self.decoder(self.encoder(x))


def fit(model, data, device, epochs=2):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for x in data.split(50):
            x = x.to(device)
            loss = nn.functional.mse_loss(model(x), x)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return loss.item()


if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print("loss", fit(DenoisingAE(), torch.randn(200, 20), dev))
