import argparse

import torch
import torch.nn.functional as F

from modules import Classifier


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--encoder", default="encoder_pretrained.pt", help="pretrained encoder weights")
    parser.add_argument("--freeze", action="store_true")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model = Classifier()
    if args.encoder:
        model.encoder.load_state_dict(torch.load(args.encoder))  # BUG: load-without-map-location
        if args.freeze:
            model.encoder.requires_grad_(False)
    model.to(device)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in range(args.steps):
        x = torch.randn(16, 40, device=device)
        y = torch.randint(0, 4, (16,), device=device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("fine-tuned, loss", loss.item())


if __name__ == "__main__":
    main()
