"""Old-style CUDA tensor types, as GAN collections of the PyTorch 0.4 era write them."""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

cuda = True if torch.cuda.is_available() else False
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor

generator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
if cuda:
    generator.cuda()
z = Variable(Tensor(np.random.normal(0, 1, (5, 8))))
valid = Variable(Tensor(5, 1).fill_(1.0), requires_grad=False)
real = Variable(torch.randn(5, 4).type(Tensor))
loss = ((generator(z) - real) ** 2).mean() + valid.mean()
loss.backward()
print(real.type(), isinstance(z, torch.cuda.FloatTensor), real.is_cuda)
noise = torch.cuda.FloatTensor(5, 8).normal_()  # expect: TDL101
print(generator(noise).shape)
labels = torch.LongTensor([0, 1, 2]).type("torch.cuda.LongTensor")  # expect: TDL001
print(labels.type())
cpu_noise = torch.FloatTensor(5, 8).normal_()
print(generator(cpu_noise).shape)  # expect: TDL100
