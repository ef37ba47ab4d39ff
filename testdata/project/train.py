"""Train TinyNet on random data: `python train.py --epochs 1`."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from checkpoint import load_checkpoint, save_checkpoint
from model import TinyNet


def make_loader(samples: int = 64) -> DataLoader:
    inputs = torch.randn(samples, 8)
    targets = torch.randint(0, 3, (samples,))
    return DataLoader(TensorDataset(inputs, targets), batch_size=16, shuffle=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cuda", action="store_true", help="train on the GPU")
    parser.add_argument("--checkpoint", default="tinynet.pt")
    args = parser.parse_args()

    model = TinyNet()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    model.cuda()
    if args.cuda:
        model.cuda()  # guarded by the user's choice: fine

    if os.path.exists(args.checkpoint):
        load_checkpoint(args.checkpoint, model, optimizer)

    loss_fn = nn.CrossEntropyLoss()
    train_loader = make_loader()
    for epoch in range(args.epochs):
        for inputs, targets in train_loader:
            inputs.cuda()
            targets = targets.to(next(model.parameters()).device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    save_checkpoint(args.checkpoint, model, optimizer, args.epochs)


if __name__ == "__main__":
    main()
