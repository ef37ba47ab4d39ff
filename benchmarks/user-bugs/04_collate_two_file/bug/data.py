import torch
from torch.utils.data import Dataset


class SensorWindows(Dataset):
    """Random multichannel sensor windows with an activity label."""

    def __init__(self, n=96, channels=6, length=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, channels, length, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"signal": self.x[i], "label": int(self.y[i])}


def collate(samples):
    signals = torch.stack([s["signal"] for s in samples]).cuda()  # BUG: hardcoded-cuda
    labels = torch.tensor([s["label"] for s in samples]).cuda()  # BUG: hardcoded-cuda
    return signals, labels
