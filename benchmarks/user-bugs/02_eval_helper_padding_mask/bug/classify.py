import torch
import torch.nn as nn


class BagOfWords(nn.Module):
    def __init__(self, vocab_size=100, dim=32, num_classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, tokens, mask):
        h = self.embed(tokens) * mask.unsqueeze(-1)
        return self.out(h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1))


def make_batches(n_batches=4, batch_size=8, max_len=12):
    batches = []
    for _ in range(n_batches):
        lengths = torch.randint(3, max_len + 1, (batch_size,))
        tokens = torch.randint(1, 100, (batch_size, max_len))
        tokens[torch.arange(max_len)[None, :] >= lengths[:, None]] = 0
        batches.append((tokens, lengths, torch.randint(0, 3, (batch_size,))))
    return batches


def evaluate(model, batches, device, mask_padding=True):
    """Accuracy of `model` over `batches`, computed on `device`."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for tokens, lengths, labels in batches:
            tokens, lengths, labels = tokens.to(device), lengths.to(device), labels.to(device)
            if mask_padding:
                positions = torch.arange(tokens.size(1), device="cuda")  # BUG: hardcoded-cuda
                mask = (positions[None, :] < lengths[:, None]).float()
            else:
                mask = torch.ones_like(tokens, dtype=torch.float)
            pred = model(tokens, mask).argmax(dim=1)
            correct += (pred == labels).sum().item()
            total += labels.numel()
    return correct / total


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = BagOfWords().to(device)
    print("accuracy", evaluate(model, make_batches(), device))
