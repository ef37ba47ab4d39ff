import argparse

import torch

from common import AutoEncoder, save_checkpoint

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--ckpt-dir", default="checkpoints")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = AutoEncoder().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randn(256, 32)
for epoch in range(args.epochs):
    for x in data.split(32):
        x = x.to(device)
        loss = torch.nn.functional.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("saved", save_checkpoint(model, optimizer, epoch, args.ckpt_dir))
