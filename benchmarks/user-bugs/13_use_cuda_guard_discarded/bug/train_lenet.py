import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="LeNet on random digits")
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
use_cuda = not args.no_cuda and torch.cuda.is_available()


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 60)
        self.fc2 = nn.Linear(60, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.view(x.size(0), -1))))


model = LeNet()
if use_cuda:
    model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
loader = DataLoader(TensorDataset(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))), batch_size=16)

for epoch in range(args.epochs):
    for batch_idx, (data, target) in enumerate(loader):
        if use_cuda:
            data.cuda()  # BUG: discarded-move
            target = target.cuda()
        data, target = Variable(data), Variable(target)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        print("epoch {} batch {} loss {:.4f}".format(epoch, batch_idx, loss.item()))
