import argparse
import glob

import torch

from train import make_model


def load_members(pattern, device):
    members = []
    for path in sorted(glob.glob(pattern)):
        ckpt = torch.load(path, map_location=device)
        model = make_model()
        model.load_state_dict(ckpt["model"])
        members.append(model.to(device).eval())
        print(f"{path}: seed {ckpt['seed']}, final loss {ckpt['loss']:.3f}")
    return members


@torch.no_grad()
def ensemble_predict(members, x):
    return torch.stack([m(x).softmax(-1) for m in members]).mean(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pattern", default="member_*.pt")
    parser.add_argument("--cpu", action="store_true", help="evaluate on the CPU")
    args = parser.parse_args()
    device = torch.device("cpu") if args.cpu else torch.device("cuda")
    members = load_members(args.pattern, device)
    x = torch.randn(100, 8, device=device)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    print("ensemble accuracy", (ensemble_predict(members, x).argmax(1) == y).float().mean().item())
