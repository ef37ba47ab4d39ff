"""A training loop that never ends on its own: for --max-steps and --timeout.

`python long_training.py [plain|stubborn]`: by default it trains with SGD; `plain` updates
the weights by hand (no optimizer, so no optimizer steps to count); `stubborn` also swallows
every exception in the loop, so only the tracer's hard time limit can stop it.
"""
import sys

import torch
import torch.nn as nn

variant = sys.argv[1] if len(sys.argv) > 1 else "sgd"
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(8, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01) if variant == "sgd" else None
step = 0
while True:
    try:
        x = torch.randn(16, 8, device=device)
        loss = model(x).pow(2).mean()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None
        step += 1
    except BaseException:  # noqa: B036 - on purpose: a program that ignores being stopped
        if variant != "stubborn":
            raise
