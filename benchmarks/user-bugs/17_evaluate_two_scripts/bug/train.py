import argparse

import torch
import torch.nn.functional as F

from model import SmallCNN


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default="cnn.pt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SmallCNN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images = torch.randn(64, 1, 16, 16)
    labels = torch.randint(0, 10, (64,))
    for epoch in range(args.epochs):
        for i in range(0, 64, 16):
            x, y = images[i:i + 16].to(device), labels[i:i + 16].to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
