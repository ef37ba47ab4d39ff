import argparse

import numpy as np
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        return nn.functional.normalize(self.net(x), dim=-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="embeddings.npy")
    parser.add_argument("--format", choices=["npy", "pt"], default="npy")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu" if args.cpu or not torch.cuda.is_available() else "cuda")

    encoder = Encoder().to(device).eval()
    items = torch.randn(100, 30)
    chunks = []
    for batch in items.split(25):
        emb = encoder(batch.to(device)).detach()
        if args.format == "npy":
            chunks.append(emb.numpy())  # BUG: numpy-on-gpu
        else:
            chunks.append(emb.cpu())
    if args.format == "npy":
        np.save(args.out, np.concatenate(chunks))
    else:
        torch.save(torch.cat(chunks), args.out)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
