import torch


def to_device(batch, device):
    """Move the tensors of a batch (a list or tuple) to `device`; other items stay as they are."""
    return [item.to(device) if isinstance(item, torch.Tensor) else item for item in batch]


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
