import torch


def to_device(batch, device):
    """Move the tensors of a batch (a list or tuple) to `device`; other items stay as they are."""
    for item in batch:
        if isinstance(item, torch.Tensor):
            item.to(device)  # BUG: discarded-move
    return batch


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
