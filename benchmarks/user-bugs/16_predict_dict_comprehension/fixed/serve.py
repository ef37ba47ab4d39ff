import torch
import torch.nn as nn


class Ranker(nn.Module):
    def __init__(self, n_users=20, n_items=50, dim=16):
        super().__init__()
        self.users = nn.Embedding(n_users, dim)
        self.items = nn.Embedding(n_items, dim)

    def forward(self, user_ids, item_ids):
        return (self.users(user_ids) * self.items(item_ids)).sum(-1)


@torch.inference_mode()
def predict(model, batch, device):
    model.eval()
    batch = {k: v.to(device) for k, v in batch.items()}
    scores = model(**batch)
    return scores.topk(3).indices.cpu()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Ranker().to(device)
    request = {"user_ids": torch.full((50,), 4), "item_ids": torch.arange(50)}
    print("top items:", predict(model, request, device).tolist())
