"""Device mixes whose outcome a real GPU showed (NVIDIA H200, torch 2.11; see tests/trace/test_device_mix.py).

Each line of output is `name | OK` or `name | ExceptionType | first line of its message`.
Run plainly on a GPU machine, or traced with `--mode sim`: the two must print the same.
"""
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

gpu = torch.device("cuda")


def on_gpu(*shape):
    return torch.randn(*shape, device=gpu)


def on_cpu(*shape):
    return torch.randn(*shape)


def rnn(kind, input_on, hidden_on):
    module = getattr(nn, kind)(4, 5).to(gpu)
    x = torch.randn(3, 2, 4, device=input_on)
    if hidden_on is None:
        return module(x)
    h = torch.zeros(1, 2, 5, device=hidden_on)
    return module(x, (h, h.clone()) if kind == "LSTM" else h)


def step_after_move(optimizer):
    model = nn.Linear(3, 2)
    opt = optimizer(model.parameters())
    model.to(gpu)
    model(on_gpu(4, 3)).sum().backward()
    opt.step()


def load_gpu_checkpoint():
    buffer = io.BytesIO()
    torch.save(nn.Linear(2, 2).to(gpu).state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer)
    assert all(t.is_cuda for t in state.values())


def expect(condition):
    if not condition:
        raise AssertionError("not as on a GPU")


def lengths(device):
    return torch.tensor([3, 2], device=device)


CASES = {
    "add cpu+cuda": lambda: on_cpu(3) + on_gpu(3),
    "add cuda+cpu": lambda: on_gpu(3) + on_cpu(3),
    "mul 0-dim cpu * cuda": lambda: torch.tensor(2.0) * on_gpu(3),
    "add cuda + 0-dim cpu": lambda: on_gpu(3) + torch.tensor(2.0),
    "add 1-elem 1-dim cpu + cuda": lambda: on_gpu(3) + torch.ones(1),
    "matmul cpu@cuda": lambda: on_cpu(2, 3) @ on_gpu(3, 2),
    "mm cuda,cpu": lambda: torch.mm(on_gpu(2, 3), on_cpu(3, 2)),
    "linear cuda weight cpu input": lambda: nn.Linear(3, 2).to(gpu)(on_cpu(4, 3)),
    "linear cpu weight cuda input": lambda: nn.Linear(3, 2)(on_gpu(4, 3)),
    "conv2d cuda weight cpu input": lambda: nn.Conv2d(3, 4, 3).to(gpu)(on_cpu(1, 3, 8, 8)),
    "numpy of cuda": lambda: on_gpu(3).numpy(),
    "numpy of cuda requires grad": lambda: on_gpu(3).requires_grad_().numpy(),
    "index cuda by cpu long": lambda: on_gpu(5)[torch.tensor([0, 2])],
    "index cpu by cuda long": lambda: on_cpu(5)[torch.tensor([0, 2], device=gpu)],
    "index cuda by cpu bool": lambda: on_gpu(3)[torch.tensor([True, False, True])],
    "index cpu by cuda bool": lambda: on_cpu(3)[torch.tensor([True, False, True], device=gpu)],
    "index_select cuda, cpu idx": lambda: on_gpu(5).index_select(0, torch.tensor([0, 2])),
    "gather cuda, cpu idx": lambda: on_gpu(2, 3).gather(1, torch.tensor([[0], [1]])),
    "embedding cuda, cpu idx": lambda: nn.Embedding(10, 4).to(gpu)(torch.tensor([1, 2])),
    "cross_entropy cuda logits cpu target": lambda: F.cross_entropy(on_gpu(4, 3), torch.tensor([0, 1, 2, 0])),
    "nll cuda logits cpu target": lambda: F.nll_loss(on_gpu(4, 3).log_softmax(1), torch.tensor([0, 1, 2, 0])),
    "mse cuda, cpu": lambda: F.mse_loss(on_gpu(3), on_cpu(3)),
    "cat cpu,cuda": lambda: torch.cat([on_cpu(2), on_gpu(2)]),
    "stack cuda,cpu": lambda: torch.stack([on_gpu(2), on_cpu(2)]),
    "where cpu cond": lambda: torch.where(torch.tensor([True, False]), on_gpu(2), on_gpu(2)),
    "where cuda cond, cpu other": lambda: torch.where(torch.tensor([True, False], device=gpu), on_gpu(2), on_cpu(2)),
    "masked_fill cuda, cpu mask": lambda: on_gpu(3).masked_fill(torch.tensor([True, False, True]), 0.0),
    "copy_ cpu->cuda": lambda: on_gpu(3).copy_(on_cpu(3)),
    "setitem cuda[...] = cpu": lambda: on_gpu(3).__setitem__(slice(None), on_cpu(3)),
    "lstm cuda, cpu hidden": lambda: rnn("LSTM", gpu, "cpu"),
    "gru cuda, cpu hidden": lambda: rnn("GRU", gpu, "cpu"),
    "lstm cuda, cpu input": lambda: rnn("LSTM", "cpu", None),
    "pack_padded lengths on cuda": lambda: nn.utils.rnn.pack_padded_sequence(on_gpu(3, 2, 4), lengths(gpu)),
    "pack_padded lengths on cpu": lambda: nn.utils.rnn.pack_padded_sequence(on_gpu(3, 2, 4), lengths("cpu")),
    "adagrad state before to": lambda: step_after_move(torch.optim.Adagrad),
    "adam built before to": lambda: step_after_move(torch.optim.Adam),
    "load cuda checkpoint, no map_location": load_gpu_checkpoint,
    "tensor(list of cuda scalars)": lambda: torch.tensor([on_gpu(1)[0], on_gpu(1)[0]]),
    "cpu scalar tensor .item + cuda": lambda: on_gpu(3) + on_cpu(1).item(),
    "bmm cuda,cpu": lambda: torch.bmm(on_gpu(2, 3, 4), on_cpu(2, 4, 5)),
    "einsum cuda,cpu": lambda: torch.einsum("ij,jk->ik", on_gpu(2, 3), on_cpu(3, 2)),
    "clamp cuda min cpu tensor": lambda: on_gpu(3).clamp(min=on_cpu(3)),
    "cuda tensor to list": lambda: on_gpu(3).tolist(),
    "torch.max cuda vs cpu": lambda: torch.max(on_gpu(3), on_cpu(3)),
    "bincount cuda weights cpu": lambda: torch.bincount(torch.tensor([0, 1, 1], device=gpu), weights=on_cpu(3)),
    "scatter_ cuda, cpu index": lambda: torch.zeros(3, device=gpu).scatter_(0, torch.tensor([0, 1]), on_gpu(2)),
    "index_add_ cuda, cpu index": lambda: torch.zeros(3, device=gpu).index_add_(0, torch.tensor([0, 1]), on_gpu(2)),
    "arange cpu compare cuda": lambda: torch.arange(3) < on_gpu(3),
    "python float from cuda": lambda: float(on_gpu(1)),
    "cuda_tensor.new_tensor(cpu)": lambda: on_gpu(3).new_tensor(on_cpu(3)) + on_gpu(3),
    "torch.from_numpy + cuda": lambda: torch.from_numpy(on_cpu(3).numpy()) + on_gpu(3),
    # first decided from torch's kernels (see torchdev_lint/trace/kernels.py), then run on a GPU too
    "pad_packed batch_sizes on cuda": lambda: nn.utils.rnn.pad_packed_sequence(
        nn.utils.rnn.PackedSequence(on_gpu(5, 4), lengths(gpu))),
    "clamp cuda min 0-dim cpu": lambda: on_gpu(3).clamp(min=torch.tensor(0.0)),
    "bucketize cuda, cpu boundaries": lambda: torch.bucketize(on_gpu(3), torch.tensor([0.0, 1.0])),
    "ctc_loss cuda, lengths cpu": lambda: F.ctc_loss(on_gpu(6, 2, 5).log_softmax(2), torch.tensor([[1, 2], [3, 4]], device=gpu),
                                                     torch.tensor([6, 6]), torch.tensor([2, 2])),
    "where cuda, 0-dim cpu other": lambda: torch.where(on_gpu(2) > 0, on_gpu(2), torch.tensor(0.0)),
    "pad_packed gives cpu lengths": lambda: expect(nn.utils.rnn.pad_packed_sequence(
        nn.utils.rnn.pack_padded_sequence(on_gpu(3, 2, 4), lengths("cpu")))[1].device.type == "cpu"),
}

for name, case in CASES.items():
    try:
        case()
    except Exception as error:  # noqa: BLE001 - what the device says is the output
        first = (str(error).strip().splitlines() or [""])[0]
        kind = next(k for k in type(error).__mro__ if k.__module__ == "builtins")  # the simulator's are subclasses
        print(f"{name} | {kind.__name__} | {first}")
    else:
        print(f"{name} | OK")
