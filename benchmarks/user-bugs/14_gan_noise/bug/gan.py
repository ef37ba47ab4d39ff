import torch
import torch.nn as nn

Z_DIM = 16


def make_models(data_dim=2):
    G = nn.Sequential(nn.Linear(Z_DIM, 64), nn.ReLU(), nn.Linear(64, data_dim))
    D = nn.Sequential(nn.Linear(data_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    return G, D


def train_step(G, D, real, opt_g, opt_d, device, z=None):
    bce = nn.BCEWithLogitsLoss()
    real = real.to(device)
    ones = torch.ones(real.size(0), 1, device=device)
    zeros = torch.zeros(real.size(0), 1, device=device)

    if z is None:
        z = torch.randn(real.size(0), Z_DIM)
        z.to(device)  # BUG: discarded-move
    fake = G(z)

    d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()

    g_loss = bce(D(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    return d_loss.item(), g_loss.item()


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    G, D = make_models()
    G.to(device)
    D.to(device)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    ring = torch.randn(512, 2)
    ring = ring / ring.norm(dim=1, keepdim=True)
    for it in range(4):
        batch = ring[torch.randint(0, len(ring), (64,))]
        print(it, train_step(G, D, batch, opt_g, opt_d, device))
