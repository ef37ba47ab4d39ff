import torch as T
import torch.nn as nn

DEBUG = True
dev = T.device("cuda" if T.cuda.is_available() else "cpu")
print("running on", dev)

net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
).to(dev)

# shape check with a random batch before training
if DEBUG:
    probe = T.randn(4, 3, 32, 32, device=dev)
    print(net(probe).shape)

opt = T.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
for it in range(5):
    xb = T.randn(16, 3, 32, 32, device=dev)
    yb = T.randint(0, 10, (16,), device=dev)
    loss = nn.functional.cross_entropy(net(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(it, f"{loss.item():.3f}")
