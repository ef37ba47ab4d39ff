"""Matrix factorization for implicit feedback, trained with Adagrad."""
import torch
import torch.nn as nn


class MF(nn.Module):
    def __init__(self, n_users, n_items, k=8):
        super().__init__()
        self.P = nn.Embedding(n_users, k)
        self.Q = nn.Embedding(n_items, k)
        self.bu = nn.Embedding(n_users, 1)
        self.bi = nn.Embedding(n_items, 1)

    def forward(self, u, i):
        return (self.P(u) * self.Q(i)).sum(-1) + self.bu(u).squeeze(-1) + self.bi(i).squeeze(-1)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
OPTIMIZER = "adagrad"  # "sgd" for the dense baseline
n_users, n_items = 30, 40
ratings = torch.randint(0, 2, (n_users, n_items)).float()

model = MF(n_users, n_items)
model = model.to(device)
if OPTIMIZER == "adagrad":
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1, initial_accumulator_value=0.1)
else:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
ratings = ratings.to(device)

users = torch.arange(n_users, device=device).repeat_interleave(n_items)
items = torch.arange(n_items, device=device).repeat(n_users)
for epoch in range(5):
    pred = model(users, items)
    loss = nn.functional.binary_cross_entropy_with_logits(pred, ratings.flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch}: {loss.item():.4f}")
