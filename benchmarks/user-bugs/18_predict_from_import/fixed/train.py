import torch
from torch import nn

from nets import TextCNN

if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = TextCNN().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for step in range(10):
        ids = torch.randint(0, 120, (16, 20), device=device)
        target = torch.randint(0, 3, (16,), device=device)
        loss = nn.functional.cross_entropy(net(ids), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(net.state_dict(), "textcnn.pt")
    print("saved textcnn.pt, last loss", loss.item())
