"""Correct code using much of torch's API surface: no device error may be reported for it.

A regression test for the simulator's device rules (a false mismatch here is a simulator bug).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(2, 5, 8, device=device)

attention = nn.MultiheadAttention(8, 2, batch_first=True).to(device)
attention(x, x, x, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool, device=device))
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2).to(device)
encoder(x)
with torch.no_grad():
    encoder.eval()(x)
lstm = nn.LSTM(8, 4, batch_first=True).to(device)
lstm(pack_padded_sequence(x, torch.tensor([5, 3]), batch_first=True))
F.scaled_dot_product_attention(x, x, x)
F.interpolate(torch.randn(1, 3, 4, 4, device=device), scale_factor=2)
nn.Conv2d(3, 4, 3).to(device)(torch.randn(1, 3, 8, 8, device=device))
embedding = nn.Embedding(10, 4).to(device)
embedding(torch.tensor([1, 2], device=device))
F.one_hot(torch.tensor([1, 2], device=device), 4).sum()
log_probs = torch.randn(6, 2, 5, device=device).log_softmax(2)
F.ctc_loss(log_probs, torch.randint(1, 5, (2, 3), device=device), torch.tensor([6, 6]), torch.tensor([3, 3]))
torch.where(x > 0, x, 0.0) + torch.tensor(2.0)
x[torch.tensor([0])].sum() + x[x > 0].sum()
x.new_zeros(3) + torch.zeros_like(x[0, 0, :3]) + torch.as_tensor([1.0, 2.0, 3.0], device=device)
torch.bincount(torch.tensor([1, 2, 2], device=device)).sum()
torch.multinomial(torch.rand(3, device=device), 2)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 2 + torch.ones(t.shape, device=t.device)

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


leaf = torch.randn(3, device=device, requires_grad=True)
Double.apply(leaf).sum().backward()

model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 1)).to(device)
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler(device.type)
for _ in range(2):
    with torch.autocast(device.type, enabled=device.type == "cuda"):
        loss = compiled(x).float().mean()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
print("surface ok", loss.item())
