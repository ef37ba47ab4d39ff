from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn


@dataclass
class Batch:
    tokens: torch.Tensor
    tags: torch.Tensor
    mask: Optional[torch.Tensor] = None

    def to(self, device):
        self.tokens = self.tokens.to(device)
        self.tags = self.tags.to(device)
        if self.mask is not None:
            self.mask = self.mask.to(device)
        return self


def random_batch(batch_size=8, seq_len=10, vocab=60, ntags=5):
    lengths = torch.randint(2, seq_len + 1, (batch_size,))
    mask = torch.arange(seq_len)[None, :] < lengths[:, None]
    return Batch(torch.randint(0, vocab, (batch_size, seq_len)), torch.randint(0, ntags, (batch_size, seq_len)), mask)


class Tagger(nn.Module):
    def __init__(self, vocab=60, dim=32, ntags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, ntags)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return self.out(h)


def masked_loss(logits, tags, mask):
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), tags, reduction="none")
    return (loss * mask).sum() / mask.sum()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Tagger().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        batch = random_batch().to(device)
        loss = masked_loss(model(batch.tokens), batch.tags, batch.mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
