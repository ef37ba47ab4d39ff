"""Where results land: operations that create, copy, convert, script, serialize or index tensors
and modules, each printed as `name | answer` (see tests/trace/test_propagation.py).

The answer is the result's device (`cuda:0`, `cpu`), a few devices joined by `,` for a tuple, a
short value (a type string, a bool, `same` where the result is the operand itself), or
`ERR Type: first line of the message`. Run plainly on a machine with a GPU (`python
tests/trace/propagation_probe.py`), or traced with `torchdev-lint trace --mode sim --single-run`:
the two must print the same, except where test_propagation.py says the simulator differs.
"""
import copy
import io
import pickle
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
gpu = torch.device("cuda")


def g(*shape):
    return torch.randn(*shape, device=gpu)


def c(*shape):
    return torch.randn(*shape)


def answer(value) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.device)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return ",".join(str(v.device) for v in value)
    if isinstance(value, torch.device):
        return str(value)
    return repr(value)


def case(name, fn):
    try:
        text = answer(fn())
    except Exception as error:  # noqa: BLE001 - the answer is the error
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        text = f"ERR {type(error).__name__}: {message}"
    print(f"{name} | {text}", flush=True)


def same(out, x):
    return "same" if out is x else answer(out)


# -- creation --------------------------------------------------------------------------------
case("zeros device=cuda", lambda: torch.zeros(2, device="cuda"))
case("empty device=cuda:0", lambda: torch.empty(2, device="cuda:0"))
case("tensor(list) device=cuda", lambda: torch.tensor([1.0, 2.0], device="cuda"))
case("arange device=cuda", lambda: torch.arange(3, device="cuda"))
case("full device=cuda", lambda: torch.full((2,), 1.0, device="cuda"))
case("randn device=torch.device", lambda: torch.randn(2, device=gpu))
case("eye device=cuda", lambda: torch.eye(2, device="cuda"))
case("linspace device=cuda", lambda: torch.linspace(0, 1, 3, device="cuda"))
case("randperm device=cuda", lambda: torch.randperm(3, device="cuda"))
case("tril_indices device=cuda", lambda: torch.tril_indices(3, 3, device="cuda"))
case("empty_strided device=cuda", lambda: torch.empty_strided((2,), (1,), device="cuda"))
case("as_tensor(cpu, device=cuda)", lambda: torch.as_tensor(c(2), device="cuda"))
case("as_tensor(cuda) is the operand", lambda: (lambda x: same(torch.as_tensor(x), x))(g(2)))
case("as_tensor(list, device=cuda)", lambda: torch.as_tensor([1, 2], device="cuda"))
case("tensor(cuda tensor)", lambda: torch.tensor(g(2)))
case("tensor(cuda tensor, device=cpu)", lambda: torch.tensor(g(2), device="cpu"))
case("tensor(list of cuda 0-dim)", lambda: torch.tensor([g(1)[0], g(1)[0]]))
case("tensor(numpy, device=cuda)", lambda: torch.tensor(np.zeros(2), device="cuda"))
case("from_numpy", lambda: torch.from_numpy(np.zeros(2)))
case("zeros_like(cuda)", lambda: torch.zeros_like(g(2)))
case("ones_like(cuda, device=cpu)", lambda: torch.ones_like(g(2), device="cpu"))
case("ones_like(cpu, device=cuda)", lambda: torch.ones_like(c(2), device="cuda"))
case("empty_like(cuda)", lambda: torch.empty_like(g(2)))
case("rand_like(cuda)", lambda: torch.rand_like(g(2)))
case("randn_like(cuda)", lambda: torch.randn_like(g(2)))
case("full_like(cuda)", lambda: torch.full_like(g(2), 3.0))
case("randint_like(cuda)", lambda: torch.randint_like(g(2), 5))
case("cuda.new_zeros", lambda: g(2).new_zeros(3))
case("cuda.new_ones", lambda: g(2).new_ones(3))
case("cuda.new_empty", lambda: g(2).new_empty(3))
case("cuda.new_full", lambda: g(2).new_full((3,), 1.0))
case("cuda.new_tensor(list)", lambda: g(2).new_tensor([1.0]))
case("cuda.new_tensor(cpu tensor)", lambda: g(2).new_tensor(c(3)))
case("cuda.new_empty_strided", lambda: g(2).new_empty_strided((2,), (1,)))
case("cpu.new_zeros(device=cuda)", lambda: c(2).new_zeros(3, device="cuda"))
case("cuda.new_zeros(device=cpu)", lambda: g(2).new_zeros(3, device="cpu"))


def default_device():
    torch.set_default_device("cuda")
    try:
        return torch.zeros(2)
    finally:
        torch.set_default_device(None)


case("set_default_device(cuda); zeros", default_device)


def device_context():
    with torch.device("cuda"):
        return torch.ones(2)


case("with torch.device(cuda): ones", device_context)
case("Linear(device=cuda).weight", lambda: nn.Linear(2, 2, device="cuda").weight)

# -- copies ----------------------------------------------------------------------------------
case("cuda.clone()", lambda: g(2).clone())
case("torch.clone(cuda)", lambda: torch.clone(g(2)))
case("cuda.detach()", lambda: g(2).detach())
case("cuda.data", lambda: g(2).data)
case("cuda.contiguous() of a transpose", lambda: g(2, 3).t().contiguous())
case("copy.copy(cuda)", lambda: copy.copy(g(2)))
case("copy.deepcopy(cuda)", lambda: copy.deepcopy(g(2)))
case("copy.deepcopy(cuda view)", lambda: copy.deepcopy(g(4)[1:3]))
case("copy.deepcopy(cuda requires_grad)", lambda: copy.deepcopy(g(2).requires_grad_()))
case("copy.deepcopy(Parameter on cuda)", lambda: copy.deepcopy(nn.Parameter(g(2))))
case("copy.deepcopy({'a': cuda})['a']", lambda: copy.deepcopy({"a": g(2)})["a"])


def deepcopy_grad():
    x = g(2).requires_grad_()
    x.sum().backward()
    return copy.deepcopy(x).grad


case("copy.deepcopy(cuda with grad).grad", deepcopy_grad)


def deepcopy_shared():
    x = g(4)
    a, b = copy.deepcopy([x, x[1:]])
    a[1] = 7.0
    return f"{a.device} {b.device} {bool(b[0] == 7.0)}"


case("copy.deepcopy keeps storage sharing", deepcopy_shared)
case("deepcopy(cuda storage) device", lambda: copy.deepcopy(g(2).untyped_storage()).device)
case("cpu.copy_(cuda) stays", lambda: c(2).copy_(g(2)))
case("cuda.copy_(cpu) stays", lambda: g(2).copy_(c(2)))
case("empty_like(cuda).copy_(cpu)", lambda: torch.empty_like(g(2)).copy_(c(2)))
case("cuda[...] = cpu", lambda: (lambda x: (x.__setitem__(Ellipsis, c(2)), x)[1])(g(2)))
case("cuda.untyped_storage().device", lambda: g(2).untyped_storage().device)

# -- conversions -----------------------------------------------------------------------------
case("cuda.to(float64)", lambda: g(2).to(torch.float64))
case("cuda.double()", lambda: g(2).double())
case("cuda.half()", lambda: g(2).half())
case("cuda.long()", lambda: g(2).long())
case("cuda.bool()", lambda: g(2).bool())
case("cuda.to(cpu tensor)", lambda: g(2).to(c(2)))
case("cpu.to(cuda tensor)", lambda: c(2).to(g(2)))
case("cpu.to(other=cuda tensor)", lambda: c(2).to(other=g(2)))
case("cpu.type_as(cuda)", lambda: c(2).type_as(g(2)))
case("cuda.type_as(cpu)", lambda: g(2).type_as(c(2)))
case("cpu.type_as(cuda double) dtype", lambda: str(c(2).type_as(g(2).double()).dtype))
case("cuda.type_as(cuda) is the operand", lambda: (lambda x: same(x.type_as(g(1)), x))(g(2)))
case("cuda.type()", lambda: g(2).type())
case("cuda.long().type()", lambda: g(2).long().type())
case("cpu.type()", lambda: c(2).type())
case("cpu.type(cuda.type())", lambda: c(2).type(g(2).type()))
case("cpu.type('torch.cuda.DoubleTensor')", lambda: c(2).type("torch.cuda.DoubleTensor"))
case("cuda.type('torch.FloatTensor')", lambda: g(2).type("torch.FloatTensor"))
case("cpu.type(torch.cuda.FloatTensor)", lambda: c(2).type(torch.cuda.FloatTensor))
case("cuda.type(torch.float16)", lambda: g(2).type(torch.float16))
case("cuda.type(torch.float16) dtype", lambda: str(g(2).type(torch.float16).dtype))
case("cuda.cpu()", lambda: g(2).cpu())
case("cpu.cuda()", lambda: c(2).cuda())
case("cpu.cuda(0)", lambda: c(2).cuda(0))
case("cpu.to('cuda:0')", lambda: c(2).to("cuda:0"))
case("cpu.to(0)", lambda: c(2).to(0))
case("Linear.to(0).weight", lambda: nn.Linear(2, 2).to(0).weight)
case("torch.device(0)", lambda: torch.device(0))
case("cuda.to('cpu', non_blocking=True)", lambda: g(2).to("cpu", non_blocking=True))
case("cuda.to('cuda') is the operand", lambda: (lambda x: same(x.to("cuda"), x))(g(2)))
case("cuda.cuda() is the operand", lambda: (lambda x: same(x.cuda(), x))(g(2)))
case("cuda.to('cuda', copy=True)", lambda: (lambda x: same(x.to("cuda", copy=True), x))(g(2)))
case("cuda.to(device=cuda, dtype=half)", lambda: g(2).to(device="cuda", dtype=torch.half))
case("cuda.to(channels_last)", lambda: g(1, 2, 2, 2).to(memory_format=torch.channels_last))
case("cuda.view(int32)", lambda: g(2).view(torch.int32))
case("cuda.view_as(cpu)", lambda: g(2, 3).view_as(c(6)))
case("cuda.reshape_as(cpu)", lambda: g(2, 3).reshape_as(c(6)))
case("cuda.expand_as(cpu)", lambda: g(1).expand_as(c(3)))
case("view_as_real(cuda complex)", lambda: torch.view_as_real(g(2).to(torch.complex64)))
case("cuda.numpy()", lambda: g(2).numpy())
case("numpy.asarray(cuda)", lambda: np.asarray(g(2)))
case("cuda.cpu().numpy()", lambda: type(g(2).cpu().numpy()).__name__)
case("cuda.tolist()", lambda: type(g(2).tolist()).__name__)
case("cuda.item()", lambda: type(g(1).item()).__name__)
case("cuda.is_cuda", lambda: g(2).is_cuda)
case("cuda.is_cpu", lambda: g(2).is_cpu)
case("cuda.get_device()", lambda: g(2).get_device())
case("cpu.get_device()", lambda: c(2).get_device())
case("cuda.device.type", lambda: g(2).device.type)
case("torch.cuda.FloatTensor(2)", lambda: torch.cuda.FloatTensor(2))
case("isinstance(cuda, torch.cuda.FloatTensor)", lambda: isinstance(g(2), torch.cuda.FloatTensor))
case("isinstance(cpu, torch.cuda.FloatTensor)", lambda: isinstance(c(2), torch.cuda.FloatTensor))
case("cuda.new(2)", lambda: g(2).new(2))
case("cpu.pin_memory().is_pinned()", lambda: c(2).pin_memory().is_pinned())
case("cpu.pin_memory()", lambda: c(2).pin_memory())
case("repr(cuda) names the device", lambda: "device='cuda:0'" in repr(g(2)))

# -- indexing and results of reductions --------------------------------------------------------
case("cuda[0]", lambda: g(3)[0])
case("cuda[1:]", lambda: g(3)[1:])
case("cuda[None]", lambda: g(3)[None])
case("cuda[cpu long]", lambda: g(3)[torch.tensor([0, 2])])
case("cuda[cpu bool]", lambda: g(3)[torch.tensor([True, False, True])])
case("cuda[cuda long]", lambda: g(3)[torch.tensor([0, 2], device="cuda")])
case("cuda[list]", lambda: g(3)[[0, 1]])
case("cpu[cuda long]", lambda: c(3)[torch.tensor([0, 2], device="cuda")])
case("cuda[cpu long] = 0", lambda: (lambda x: (x.__setitem__(torch.tensor([0]), 0.0), x)[1])(g(3)))
case("cuda[cpu long] = cuda", lambda: (lambda x: (x.__setitem__(torch.tensor([0, 1]), g(2)), x)[1])(g(3)))
case("cuda.nonzero()", lambda: g(3).nonzero())
case("torch.where(cuda cond)", lambda: torch.where(g(3) > 0))
case("cuda.argmax()", lambda: g(3).argmax())
case("cuda.max(0)", lambda: tuple(g(2, 3).max(0)))
case("cuda.sort()", lambda: tuple(g(3).sort()))
case("cuda.topk(2)", lambda: tuple(g(3).topk(2)))
case("cuda.unique()", lambda: g(3).unique())
case("torch.split(cuda)", lambda: torch.split(g(4), 2))
case("cuda.unbind()", lambda: g(2, 2).unbind())
case("torch.meshgrid(cuda, cuda)", lambda: torch.meshgrid(g(2), g(2), indexing="ij"))
case("masked_select(cuda, cuda mask)", lambda: g(3).masked_select(g(3) > 0))
case("index_select(cuda, cuda idx)", lambda: g(3).index_select(0, torch.tensor([0], device="cuda")))
case("gather(cuda, cuda idx)", lambda: g(2, 2).gather(1, torch.zeros(2, 1, dtype=torch.long, device="cuda")))
case("cuda + 1", lambda: g(2) + 1)
case("cuda * 0-dim cpu", lambda: g(2) * torch.tensor(2.0))
case("0-dim cpu + 0-dim cuda", lambda: torch.tensor(1.0) + g(1)[0])
case("cuda.sum()", lambda: g(2).sum())
case("cuda @ cuda", lambda: g(2, 2) @ g(2, 2))
case("cuda + cpu", lambda: g(2) + c(2))
case("torch.stack([cuda, cuda])", lambda: torch.stack([g(2), g(2)]))
case("default_collate([cuda, cuda])", lambda: torch.utils.data.default_collate([g(2), g(2)]))
case("pad_sequence([cuda, cuda])", lambda: nn.utils.rnn.pad_sequence([g(2), g(3)]))
case("pack_padded_sequence data, batch_sizes",
     lambda: (lambda p: (p.data, p.batch_sizes))(nn.utils.rnn.pack_padded_sequence(g(3, 2, 4), torch.tensor([3, 2]))))
case("one_hot(cuda)", lambda: F.one_hot(torch.tensor([0, 1], device="cuda")))
case("interpolate(cuda)", lambda: F.interpolate(g(1, 1, 4), scale_factor=2.0))
case("fft.fft(cuda)", lambda: torch.fft.fft(g(4)))
case("fft.rfft(cuda half)", lambda: torch.fft.rfft(g(8).half()))
case("linalg.inv(cuda)", lambda: torch.linalg.inv(torch.eye(2, device="cuda")))
case("multinomial(cuda)", lambda: torch.multinomial(torch.ones(3, device="cuda"), 2))
case("distributions.Normal(cuda).sample()", lambda: torch.distributions.Normal(g(2), 1.0).sample())
case("Generator(device=cuda)", lambda: torch.Generator(device="cuda").device)

# -- modules and optimizers ----------------------------------------------------------------------
case("Linear.cuda().weight", lambda: nn.Linear(2, 2).cuda().weight)
case("Linear.to(cuda).bias", lambda: nn.Linear(2, 2).to("cuda").bias)
case("Linear.to(cuda tensor).weight", lambda: nn.Linear(2, 2).to(g(1)).weight)
case("Linear.type(torch.cuda.FloatTensor).weight", lambda: nn.Linear(2, 2).type(torch.cuda.FloatTensor).weight)
case("Linear.cuda().half().weight", lambda: nn.Linear(2, 2).cuda().half().weight)
case("Linear.cuda().cpu().weight", lambda: nn.Linear(2, 2).cuda().cpu().weight)
case("Linear.to_empty(cuda).weight", lambda: nn.Linear(2, 2).to_empty(device="cuda").weight)
case("BatchNorm.cuda().running_mean", lambda: nn.BatchNorm1d(2).cuda().running_mean)
case("BatchNorm.cuda().num_batches_tracked", lambda: nn.BatchNorm1d(2).cuda().num_batches_tracked)


def grad_after_backward():
    m = nn.Linear(2, 2).cuda()
    m(g(3, 2)).sum().backward()
    return m.weight.grad


case("Linear.cuda() weight.grad", grad_after_backward)


def buffer_after_move():
    m = nn.Linear(2, 2).cuda()
    m.register_buffer("extra", torch.zeros(2))
    return m.extra


case("register_buffer after .cuda()", buffer_after_move)
case("Parameter(cuda)", lambda: nn.Parameter(g(2)))
case("Parameter(cpu).cuda()", lambda: nn.Parameter(c(2)).cuda())
case("state_dict() of a cuda module", lambda: nn.Linear(2, 2).cuda().state_dict()["weight"])


def load_cpu_into_cuda(assign=False):
    m = nn.Linear(2, 2).cuda()
    m.load_state_dict(nn.Linear(2, 2).state_dict(), assign=assign)
    return m.weight


case("load_state_dict(cpu) into cuda module", load_cpu_into_cuda)
case("load_state_dict(cpu, assign=True) into cuda module", lambda: load_cpu_into_cuda(True))


def load_cuda_into_cpu():
    m = nn.Linear(2, 2)
    m.load_state_dict(nn.Linear(2, 2).cuda().state_dict())
    return m.weight


case("load_state_dict(cuda) into cpu module", load_cuda_into_cpu)


def deepcopy_module():
    m = copy.deepcopy(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).cuda())
    return m[0].weight, m[1].running_mean, m[1].num_batches_tracked


case("deepcopy(cuda module): weight, running_mean, num_batches_tracked", deepcopy_module)


def ema_copy():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).cuda()
    ema = copy.deepcopy(model)
    return ema(g(4, 2))


case("EMA deepcopy of a cuda model runs", ema_copy)


class EqualsBuilds(nn.Module):
    """A module whose __eq__ builds another module (torchmetrics' Metric.__eq__ does)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self._defaults = {}
        self._reductions = {}
        self.register_buffer("total", torch.zeros(2))

    def __eq__(self, other):
        return EqualsBuilds()

    def __hash__(self):
        return hash((type(self).__name__, id(self)))


case("module defining __eq__: .cuda().total", lambda: EqualsBuilds().cuda().total)
case("module defining __eq__: deepcopy(.cuda()).total", lambda: copy.deepcopy(EqualsBuilds().cuda()).total)


class EqualsOptimizer(torch.optim.SGD):
    def __eq__(self, other):
        raise AssertionError("an optimizer compared")

    def __hash__(self):
        return hash((type(self).__name__, id(self)))


def equals_optimizer():
    m = nn.Linear(2, 2)
    opt = EqualsOptimizer(m.parameters(), lr=0.1)
    m.cuda()
    m(g(3, 2)).sum().backward()
    opt.step()
    return m.weight


case("optimizer defining __eq__: step after .cuda()", equals_optimizer)


def adam_state():
    m = nn.Linear(2, 2).cuda()
    opt = torch.optim.Adam(m.parameters())
    m(g(3, 2)).sum().backward()
    opt.step()
    state = opt.state[m.weight]
    return state["exp_avg"], state["step"]


case("Adam state: exp_avg, step", adam_state)


def optimizer_load_state():
    cpu_model = nn.Linear(2, 2)
    cpu_opt = torch.optim.Adam(cpu_model.parameters())
    cpu_model(c(3, 2)).sum().backward()
    cpu_opt.step()
    m = nn.Linear(2, 2).cuda()
    opt = torch.optim.Adam(m.parameters())
    opt.load_state_dict(cpu_opt.state_dict())
    return opt.state[m.weight]["exp_avg"]


case("Adam.load_state_dict(cpu state) on cuda params", optimizer_load_state)
case("GradScaler('cuda').scale(cuda)", lambda: torch.amp.GradScaler("cuda").scale(g(2).sum()))


def autocast_linear():
    with torch.autocast("cuda", dtype=torch.float16):
        out = nn.Linear(2, 2).cuda()(g(3, 2))
    return f"{out.device} {out.dtype}"


case("autocast(cuda) Linear", autocast_linear)

# -- serialization ---------------------------------------------------------------------------------


def round_trip(obj, **load):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False, **load)


case("save/load cuda", lambda: round_trip(g(2)))
case("save/load cuda, map_location=cpu", lambda: round_trip(g(2), map_location="cpu"))
case("save/load cuda, map_location=lambda", lambda: round_trip(g(2), map_location=lambda s, loc: s))
case("save/load cuda, map_location={cuda:0: cpu}", lambda: round_trip(g(2), map_location={"cuda:0": "cpu"}))
case("save/load cpu, map_location=cuda", lambda: round_trip(c(2), map_location="cuda"))
case("save/load cpu, map_location=torch.device(cuda)", lambda: round_trip(c(2), map_location=gpu))
case("save/load cuda state_dict", lambda: round_trip(nn.Linear(2, 2).cuda().state_dict())["weight"])
case("save/load whole cuda module", lambda: round_trip(nn.BatchNorm1d(2).cuda()).running_mean)
case("pickle cuda", lambda: pickle.loads(pickle.dumps(g(2))))
case("pickle cuda module buffer", lambda: pickle.loads(pickle.dumps(nn.BatchNorm1d(2).cuda())).running_mean)


def save_weights_only():
    buffer = io.BytesIO()
    torch.save({"w": g(2)}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)["w"]


case("save/load weights_only=True", save_weights_only)


def jit_round_trip(**load):
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(nn.Linear(2, 2).cuda()), buffer)
    buffer.seek(0)
    return torch.jit.load(buffer, **load).weight


case("jit.save/jit.load cuda module", jit_round_trip)
case("jit.save/jit.load cuda module, map_location=cpu", lambda: jit_round_trip(map_location="cpu"))

# -- TorchScript and compiled code -----------------------------------------------------------------


@torch.jit.script
def script_add(x):
    return x + 1


@torch.jit.script
def script_device(x):
    return x.device


@torch.jit.script
def script_follow(x, y):
    return x.to(y.device) + y


@torch.jit.script
def script_factory(x):
    return torch.zeros(3, device=x.device) + x


@torch.jit.script
def script_is_cuda(x):
    return x.is_cuda


@torch.jit.script
def script_cpu(x):
    return x.cpu()


case("script: x + 1", lambda: script_add(g(3)))
case("script: x.device", lambda: script_device(g(3)))
case("script: x.to(y.device) + y", lambda: script_follow(c(3), g(3)))
case("script: zeros(device=x.device) + x", lambda: script_factory(g(3)))
case("script: x.is_cuda", lambda: script_is_cuda(g(3)))
case("script: x.cpu()", lambda: script_cpu(g(3)))
case("script: cpu + cuda", lambda: script_follow(c(3), g(3)) + script_add(c(3)))


@torch.jit.script
def script_mix(x, y):
    return x + y


case("script: a mix inside a scripted function", lambda: script_mix(c(3), g(3)))


class Follow(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x):
        return self.linear(x) + torch.ones(3, device=x.device)


case("script module .cuda(): forward", lambda: torch.jit.script(Follow().cuda())(g(2, 3)))
case("script module .cuda() on a cpu input", lambda: torch.jit.script(Follow().cuda())(c(2, 3)))
case("script module then .cuda(): weight", lambda: torch.jit.script(Follow()).cuda().linear.weight)
case("trace: x * 2 + ones(device=x.device)",
     lambda: torch.jit.trace(lambda x: x * 2 + torch.ones(3, device=x.device), g(3))(g(3)))
case("trace module .cuda(): forward", lambda: torch.jit.trace(Follow().cuda(), g(2, 3))(g(2, 3)))
case("trace module: cpu input, cuda module", lambda: torch.jit.trace(Follow().cuda(), g(2, 3))(c(2, 3)))
case("torch.compile(fn)(cuda)", lambda: torch.compile(lambda x: x * 2)(g(2)))
print("DONE", torch.__version__, flush=True)
