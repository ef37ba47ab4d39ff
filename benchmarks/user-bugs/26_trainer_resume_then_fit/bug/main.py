import argparse

import torch
import torch.nn as nn

from trainer import Trainer

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--resume", action="store_true")
parser.add_argument("--device", default=None)
args = parser.parse_args()

model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
trainer = Trainer(model, device=args.device)
if args.resume and trainer.resume():
    print("resumed from epoch", trainer.epoch)
data = [(torch.randn(16, 6), torch.randn(16, 1)) for _ in range(4)]
trainer.fit(data, args.epochs)
