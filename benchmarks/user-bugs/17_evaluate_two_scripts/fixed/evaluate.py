import argparse
import os

import torch

from model import SmallCNN


@torch.no_grad()
def evaluate(model, images, labels, device, batch_size=16):
    model.eval()
    correct = 0
    for i in range(0, len(images), batch_size):
        x = images[i:i + batch_size].to(device)
        y = labels[i:i + batch_size].to(device)
        correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(images)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", default="cnn.pt")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    model = SmallCNN()
    if os.path.isfile(args.weights):
        model.load_state_dict(torch.load(args.weights, map_location=device))
    else:
        print(f"{args.weights} not found: evaluating an untrained model")
    model.to(device)
    images = torch.randn(48, 1, 16, 16)
    labels = torch.randint(0, 10, (48,))
    print(f"accuracy: {evaluate(model, images, labels, device):.3f}")


if __name__ == "__main__":
    main()
