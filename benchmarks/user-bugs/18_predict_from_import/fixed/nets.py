import torch
import torch.nn as nn


class TextCNN(nn.Module):
    def __init__(self, vocab=120, dim=24, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList([nn.Conv1d(dim, 16, k) for k in (2, 3, 4)])
        self.fc = nn.Linear(48, classes)

    def forward(self, ids):
        h = self.emb(ids).transpose(1, 2)
        pooled = [torch.relu(conv(h)).max(dim=2).values for conv in self.convs]
        return self.fc(torch.cat(pooled, dim=1))
