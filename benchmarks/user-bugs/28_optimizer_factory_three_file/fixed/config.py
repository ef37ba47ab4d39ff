CONFIG = {
    "model": {"in_dim": 16, "hidden": 32, "out_dim": 4},
    "optim": {"name": "adagrad", "lr": 0.05},
    "train": {"steps": 8, "batch_size": 32},
    "device": "auto",
}
