import argparse

import torch

from common import AutoEncoder, load_checkpoint


def main():
    parser = argparse.ArgumentParser(description="reconstruction error of a trained autoencoder")
    parser.add_argument("checkpoint")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu" if args.cpu or not torch.cuda.is_available() else "cuda")
    model, epoch = load_checkpoint(args.checkpoint, AutoEncoder(), device)
    x = torch.randn(64, 32, device=device)
    with torch.no_grad():
        print(f"epoch {epoch}: reconstruction MSE {torch.nn.functional.mse_loss(model(x), x).item():.4f}")


if __name__ == "__main__":
    main()
