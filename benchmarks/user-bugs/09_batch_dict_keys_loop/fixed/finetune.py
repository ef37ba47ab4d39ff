import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ReviewDataset(Dataset):
    def __init__(self, n=64, seq_len=16, vocab=200):
        self.ids = torch.randint(1, vocab, (n, seq_len))
        self.lengths = torch.randint(4, seq_len + 1, (n,))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        mask = (torch.arange(self.ids.size(1)) < self.lengths[i]).long()
        return {"input_ids": self.ids[i] * mask, "attention_mask": mask, "labels": self.labels[i]}


class SentimentModel(nn.Module):
    def __init__(self, vocab=200, dim=48):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.cls = nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return self.cls(h.sum(1) / attention_mask.sum(1, keepdim=True))


def train_epoch(model, loader, optimizer, device):
    model.train()
    for step, batch in enumerate(loader):
        for key in batch:
            if torch.is_tensor(batch[key]):
                batch[key] = batch[key].to(device)
        logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 2 == 0:
            print(f"step {step}: {loss.item():.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--lr", type=float, default=5e-3)
    args = parser.parse_args()
    model = SentimentModel().to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    train_epoch(model, DataLoader(ReviewDataset(), batch_size=16, shuffle=True), optimizer, args.device)
