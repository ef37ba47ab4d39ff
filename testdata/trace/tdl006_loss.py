"""A class-balanced loss keeps its per-class weights as a plain tensor attribute and indexes
them with the labels. The training script moves the model and each batch, never the loss
(it has no parameters): on a GPU, CPU weights indexed by CUDA labels raise. A buffer would
not help, since nothing moves the loss; moving the weights to the labels' device at the use does.
"""
import torch
import torch.nn as nn


class ClassBalancedLoss(nn.Module):
    def __init__(self, counts, beta=0.999):
        super().__init__()
        weights = (1 - beta) / (1 - beta ** torch.tensor(counts, dtype=torch.float))
        self.beta = weights / weights.sum()

    def forward(self, logits, labels):
        weights = self.beta[labels]  # expect: TDL006
        loss = nn.functional.cross_entropy(logits, labels, reduction="none")
        return (loss * weights).mean()


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(8, 3).to(device)
criterion = ClassBalancedLoss([10, 20, 30])
for x, y in [(torch.randn(4, 8), torch.tensor([0, 1, 2, 1]))]:
    x, y = x.to(device), y.to(device)
    loss = criterion(model(x), y)
    loss.backward()
