import torch


def build_optimizer(model, cfg):
    name = cfg["name"].lower()
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"])
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=cfg["lr"])
    raise ValueError(f"unknown optimizer {name}")


def resolve_device(name):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
