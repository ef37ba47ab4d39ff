import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils import count_parameters, to_device


def main(epochs=2):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    print(f"{count_parameters(model)} trainable parameters")
    data = TensorDataset(torch.randn(128, 10), torch.randn(128, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for batch in DataLoader(data, batch_size=32, shuffle=True):
            x, y = to_device(batch, device)
            loss = nn.functional.smooth_l1_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
