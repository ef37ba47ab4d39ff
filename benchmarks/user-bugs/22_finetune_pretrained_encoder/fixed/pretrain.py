"""Pretrain an encoder with a denoising objective and save it for finetune.py."""
import torch
import torch.nn as nn

from modules import Encoder

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
encoder = Encoder().to(device)
decoder = nn.Linear(16, 40).to(device)
params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.Adam(params, lr=1e-3)
for step in range(20):
    x = torch.randn(32, 40, device=device)
    noisy = x + 0.3 * torch.randn_like(x)
    loss = nn.functional.mse_loss(decoder(encoder(noisy)), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save(encoder.state_dict(), "encoder_pretrained.pt")
print("pretraining loss", loss.item())
