from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint import fixes
from torchdev_lint.analysis import callees, kinds, moves, tree, uses
from torchdev_lint.analysis.evidence import kind_by_use
from torchdev_lint.analysis.guards import code_of, runs_on_cpu
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import (
    NEW_TENSOR_FACTORIES,
    NON_TENSOR_ATTRIBUTES,
    NON_TENSOR_METHODS,
    RANDOM_FACTORIES,
    Kind,
    annotation_says_tensor,
    keyed_by_strings,
    changes_dtype_only,
)
from torchdev_lint.analysis.sites import FACTORY_IN_METHOD, classes_of
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# Methods after which the factory's tensor is where it should be.
_MOVES = frozenset({"to", "cuda", "type_as"})
# Factories whose first argument is a size (`torch.zeros(())` is 0-dim).
_SIZE_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn"})
_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})
_NUMBER_CALLS = frozenset({"float", "int", "bool", "abs", "round", "min", "max", "len"})


@dataclass
class _Param:
    name: str
    tensor: bool  # the shared analysis says it is a tensor where the method starts
    certain: bool  # annotated as a tensor: no doubt left
    defaulted: bool  # has a default (`mask=None`): it may not be there


@dataclass
class _Factory:
    call: cst.Call
    name: str  # `zeros`, `arange`...
    # Each parameter of the method, in order: whether it is usable at the call as the
    # tensor input (still a tensor here, not shadowed by a nested function).
    usable: list[tuple[_Param, bool]]
    assigned: set[str]  # the names its statement assigns (`pe = torch.zeros(n)` -> {"pe"})


@dataclass
class _Method:
    node: cst.FunctionDef
    self_name: str | None
    params: list[_Param]
    positional: list[str]  # parameter names that take positional arguments, after self
    factories: list[_Factory] = field(default_factory=list)
    # `self.<name>(...)` calls made here: (name, positional args, keyword args, whether
    # the result is moved at once), each arg as (is a tensor here, its name if a plain name).
    calls: list[tuple[str, list[tuple[bool, str | None]], dict[str, tuple[bool, str | None]], bool]] = (
        field(default_factory=list)
    )


@dataclass
class _Class:
    node: cst.ClassDef
    cpu_only: bool  # defined in a test that never reaches an accelerator
    methods: dict[str, _Method] = field(default_factory=dict)


class FactoryWithoutDeviceInForward(Rule):
    """
    ## What it does
    Flags a torch factory (`torch.zeros`, `ones`, `empty`, `full`, `arange`, `rand`,
    `randn`, `randint`, `randperm`, `eye`, `linspace`, `logspace`, `tensor`,
    `as_tensor`...) called without `device=` in the `forward` of an `nn.Module` subclass,
    or in a method that `forward` calls as `self.<method>(...)` (directly or through other
    such methods), while a tensor input is at hand: a tensor parameter of `forward`, or a
    parameter of the called method that `forward` passes a tensor to. A factory in a
    function nested in `forward` counts too.

    Only factories whose tensor meets the module's tensors are flagged: it is combined with
    another tensor in an op, handed to a submodule or to code not followed, returned, or
    stored (`self.cache = t`, `out.mask = t`), directly or through local names. A tensor
    only used as an index, for its shape, as a size or dimension (`x.reshape(G, -1)`,
    `y.repeat(G, 1)`: read as one integer, whatever the device), logged (`.item()`,
    `print`), moved before use, or given where PyTorch wants CPU data
    (`pack_padded_sequence` lengths, a CTC loss's lengths, `torch.bincount`) is left alone. Meeting Python numbers (a shape, `len()`, a parameter
    annotated `int`/`float`) or other tensors built on the CPU right there (CPU-only index
    arithmetic) mixes nothing; the result is followed on. A tensor handed to the project's
    own code (a method of the class, a function of the file or of a project file it
    imports, the `forward` of a submodule the class builds, as `self.rope = Rope(...)`) is
    followed inside it: harmless when that code moves it before any other use
    (`positions.to(device)`), followed on in the caller when it only reaches the result
    (a parameterless `Timesteps` projection whose result the caller moves), flagged
    otherwise. A returned tensor is followed to the calls the project makes of the
    method: a helper's calls in the file (`negs, _ = self.sample(y)` drops it;
    `self.blur.kernel()` from a class holding it), or, for a `forward`, the
    `self.<attr>(...)` calls of classes of the file that assign the module to that
    attribute. The class must be imported by no other project file, or be hidden in a
    function or a script's main block, or (for a method other than `forward`) no other
    project file may mention an attribute of its name (`m.sample(...)`, `getattr(m,
    "sample")`; a file's `self.sample` of its own method of that name does not count):
    callers out of sight, such as a library's users, are not seen. A returned tuple is followed element by
    element where the caller unpacks or indexes it; stored in an attribute of the class
    (`self.cache = t`), it is followed into every read of the attribute in the class (no
    read: stored for others, flagged). Copying it into another tensor (`p.data.copy_(t)`)
    is harmless. A name bound in one branch of an `if` is not followed into reads in the
    other branch or before the binding, unless a loop holds both. A 1-D tensor (`arange`,
    `torch.tensor` of a flat list of numbers or of a `list[float]` parameter) iterated by a
    `for` (directly or through `zip`) gives 0-dim rows, which mix with tensors anywhere
    (where they go next is not followed: a `torch.stack` of them is not seen). A tensor
    made in a list comprehension is followed as the list; one put in a dict of keyword
    arguments (`kwargs = {"sizes": t}`) is followed as keyword `sizes` of every call the
    dict is spread into (`block(h, **kwargs)`), the dict being otherwise only updated; one
    put in a dict whose other values (two or more) are all detached from autograd
    (`loss.detach().mean()`, `acc.item()`) is a record kept for logging, and left alone
    (a consumer that stacks the record's values is not seen). Into the project's code a tensor is
    followed through `for block in self.blocks` over an `nn.ModuleList` of one class, the
    twin call of gradient checkpointing (`wrapper(block, h, t)` beside `block(h, t)`), and a
    keyword that a submodule's `forward` swallows in `**kwargs` when its constructor was
    given objects (`Attention(processor=MyProcessor())`): it lands in each such object whose
    `__call__`/`forward` takes that keyword (an assumption about the submodule: it hands
    them what it does not know). A branch on a parameter the call fixes to a literal (a
    default it leaves alone, `use_real=True`) that cannot run is skipped, and a name
    rebound to a moved value (`cos = cos.to(x.device)`) no longer carries the CPU tensor
    after that statement. A `self.<attr>` every assignment of which is a number (a
    constant, a parameter annotated `float`) is no tensor, nor is a parameter read as
    `count or 0` (the author substitutes a number for a missing one; a tensor there would
    be tested for truth, which PyTorch refuses for more than one element). What the
    project's own function returns is on the CPU when every `return` gives a tensor built
    there without a device, moved to `"cpu"`, or kept in a cache on the function itself
    (`f.buf = torch.LongTensor().to(device)` with `device="cpu"` left at its default; the
    project's other calls are taken to agree on it): meeting it mixes nothing, as it
    does not for the sizes a tensor method takes (`t.expand(-1, self.k)`). Code is
    followed one file deep. A
    parameter that every caller in the class
    gives a tensor built on the CPU (`self.pad(torch.LongTensor(ids))`) is no GPU input.
    A value that also sizes or bounds a factory in the same statement
    (`torch.arange(end=half) / half`) is a number or a 0-dim tensor, which meets tensors
    anywhere. An input the method reads by string keys (`outputs["logits"]`, or one that
    yields such mappings: `for t in targets: t["boxes"]`) is no tensor: the rule does not
    take a device from it, and without another tensor input does not flag.

    It does not flag the `*_like` factories (they follow their input), a factory whose
    result is moved straight away (`torch.arange(n).to(x.device)`, `.to(x)`,
    `.float().cuda()`, `.type_as(x)`; a `.to(torch.float16)` that only changes the dtype
    does not count), one whose result is turned into a Python value at once
    (`torch.randint(0, n, (1,)).item()`), a 0-dim constant (`torch.tensor(0.5)`,
    `torch.tensor(-float("inf"))`, `torch.zeros(())`: PyTorch lets a 0-dim CPU tensor meet a
    GPU tensor), placeholders (`torch.empty(0)`, `torch.zeros([0])`) and dummies a kernel
    never reads (`torch.empty(1)`, `torch.empty([0])`), `torch.tensor(x)` of a tensor,
    calls that pass `device=`, `out=` or `**kwargs`, factories inside `with torch.device(...)`, forwards with no tensor input
    (`def forward(self)`, `def forward(self, n: int)`, `*args` only), code outside
    `nn.Module` subclasses, and a module class defined inside code that never reaches an
    accelerator, a `test*` function (taking only `self`) or a script's
    `if __name__ == "__main__":` block that names no device or accelerator and moves
    nothing with `.to(...)`: its tensors all stay on the CPU. A helper such code calls that
    moves the module itself is not seen.

    ## Why is this bad?
    A factory without `device=` builds its tensor on the default device, the CPU. On a
    CPU-only machine everything is on the CPU and the bug is invisible; once the model and
    its inputs move to a GPU, the first op that mixes the new tensor with them fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!`. Where it does not fail (the tensor only indexes, or is a
    CPU-side copy), it costs a host-to-device copy on every call.

    ## Fix
    Adds `device=<input>.device`, taking the device from the tensor input at hand
    (the first one, preferring inputs without a default). A 0-dim `torch.tensor(v)` whose
    data is one Python number read from a tensor (`x.size(1)`, `x.shape[0]`, `len(ids)`,
    `t.item()`) becomes `torch.full((), v, device=<input>.device)` instead: the same value
    and dtype (`full` infers it from `v` as `tensor` does), filled by a kernel on the
    device, where `torch.tensor(v, device=...)` copies from host memory, which
    synchronizes with the GPU and cannot be captured in a CUDA graph.

    Fix safety: safe when the factory is deterministic (`zeros`, `arange`, `tensor`...)
    and the input is surely a tensor (annotated as one, or its `.device` is read in the
    same method): the values are the same, only their device changes, to the one the
    tensor is combined with. Unsafe otherwise: a random factory draws different numbers
    from the GPU's generator than from the CPU's, and an unannotated parameter may not be
    a tensor at run time (a list, a dict, or `None` for a `mask=None` default).

    ## Confidence
    Certain when the analysis shows how the line fails: the CPU tensor meets a tensor computed
    from the method's inputs (an operator with them, a call handed both: `x + noise`,
    `self.rnn(x, (h0, c0))`) with no move between, it is not a 0-dim scalar, and the project
    moves modules of this class to a device (directly, as a submodule, through a function
    that builds or moves one). Possible otherwise: the factory's value is returned or handed
    to code out of sight (an object built from a third-party library, whose code may move
    it), or nothing in sight moves the module. See
    [confidence](../confidence.md).

    ## When not to use
    When a module deliberately computes on the CPU in `forward` (e.g. builds an index on
    the host for a CPU-side lookup). A factory on a branch that runs only without CUDA
    (the `else` of `torch.cuda.is_available()`) is not flagged: the input is on the CPU too.
    """

    code = "TDL008"
    name = "factory-without-device-in-forward"
    sites = frozenset({FACTORY_IN_METHOD})
    message = "Tensor factory in `forward` without `device=`: it builds its tensor on the CPU"
    fix_title = "Add `device=<input>.device`"

    @classmethod
    def may_be_certain(cls, index, path: str, found: frozenset[str]) -> bool:
        # certain only where the project moves modules of the class (`moves.module_moved_by_project`)
        return moves.any_moved_by_project(index, path, classes_of(found, FACTORY_IN_METHOD))

    VALID = [
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        return x + torch.zeros_like(x)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        pos = torch.arange(x.size(1)).to(x.device)\n"
              "        return x + pos\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        return x * torch.tensor(0.5)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Noise(nn.Module):\n"
              "    def forward(self):\n        return torch.randn(3)\n"),
        Valid("import torch\nclass Helper:\n    def forward(self, x):\n"
              "        return x + torch.ones(3)\n"),
        Valid("import torch\ndef forward(x):\n    return x + torch.ones(3)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n"
              "        return x + torch.ones(3, device=x.device, dtype=x.dtype)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x, n: int):\n"
              "        keep = torch.randint(0, n, (1,)).item()\n        return x[keep]\n"),
        # Its only uses are harmless: CPU lengths, a CPU histogram, a logged value, an index.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        lengths = torch.tensor([x.size(1)] * x.size(0))\n"
              "        return nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x, labels):\n        counts = torch.bincount(torch.tensor([1, 2]))\n"
              "        print(counts.max().item())\n        return x\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        order = torch.randperm(x.size(0))\n"
              "        return x[order]\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Attn(nn.Module):\n"
              "    def forward(self, q, mask=None):\n        if mask is None:\n"
              "            mask = torch.empty(1)\n"
              "        return kernel(q, mask, torch.empty([0]), no_masking=mask is None)\n"),
        # CPU-only arithmetic: it meets numbers and other CPU-made tensors, then indexes.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, y):\n        bsz, tsz, fsz = y.shape\n"
              "        idx = torch.randint(0, tsz, (bsz, 4)) + torch.arange(bsz).unsqueeze(1) * tsz\n"
              "        return y.view(-1, fsz)[idx.view(-1)]\n"),
        # Handed to a submodule whose `forward` moves it before any other use.
        Valid("import torch\nimport torch.nn as nn\nclass Rope(nn.Module):\n"
              "    def forward(self, positions, device):\n"
              "        return positions.to(device).float().cos()\n"
              "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.rope = Rope()\n    def forward(self, x):\n"
              "        return x * self.rope(torch.arange(x.size(1)), x.device)\n"),
        # The helper returns its CPU indices beside the gathered rows; its callers drop them.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, y):\n        rows, _ = self.sample(y)\n        return rows\n"
              "    def sample(self, y):\n        idx = torch.randint(0, y.shape[0], (4,))\n"
              "        return y[idx], idx\n"),
        # Iterated into 0-dim rows, which mix with tensors on any device.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, xs):\n        weights = torch.tensor([0.5, 0.5])\n"
              "        total = 0\n        for x, w in zip(xs, weights):\n"
              "            total = total + w * x\n        return total\n"),
        # A placeholder of the other branch than the one that mixes; it is only reduced.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x, w):\n        if w > 0:\n            extra = self.loss(x)\n"
              "            x = x + w * extra\n        else:\n            extra = torch.tensor([0.0])\n"
              "        return x, extra.mean()\n"),
        # A stub defined in a test that never reaches an accelerator.
        Valid("import torch\nimport torch.nn as nn\ndef test_shape():\n"
              "    class Stub(nn.Module):\n        def forward(self, x):\n"
              "            return x + torch.zeros(3)\n"
              "    assert Stub()(torch.rand(3)).shape == (3,)\n"),
        # The helper's tensor input is always built on the CPU by its caller.
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        return self.embed(self.pad(torch.LongTensor([1, 2])))\n"
              "    def pad(self, ids):\n        return torch.cat((ids, torch.zeros(4).long()))\n"),
        # Divided by the arange's own bound (a scalar), then moved to the input's device.
        Valid("import math\nimport torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def forward(self, t, dim):\n        half = dim // 2\n"
              "        freqs = torch.exp(-math.log(1e4) * torch.arange(half) / half).to(t.device)\n"
              "        return t[:, None] * freqs\n"),
        # A group size as a 0-dim tensor, only ever a size of the input's reshape and repeat.
        Valid("import torch\nimport torch.nn as nn\nclass Std(nn.Module):\n"
              "    def forward(self, x):\n        n, c = x.shape\n"
              "        g = torch.min(torch.as_tensor(self.group), torch.as_tensor(n))\n"
              "        return x.reshape(g, -1).std(dim=0).repeat(g, 1)\n"),
        # Both inputs are mappings (read by string keys): no tensor input to meet.
        Valid("import torch\nimport torch.nn as nn\nclass Matcher(nn.Module):\n"
              "    def forward(self, outputs, targets):\n"
              "        sizes = [len(t[\"boxes\"]) for t in targets]\n"
              "        return outputs[\"logits\"], torch.as_tensor(sizes)\n"),
        # A factor logged beside detached losses: the dict is a record, not computation.
        Valid("import torch\nimport torch.nn as nn\nclass Loss(nn.Module):\n"
              "    def forward(self, x, factor):\n        loss = x.mean() * factor\n"
              "        log = {\"loss\": loss.detach(), \"mean\": x.mean().item(), \"factor\": torch.tensor(factor)}\n"
              "        return loss, log\n"),
        # Negative sampling: drawn indices compared with a helper's CPU table and shifted
        # by an optional count (`pad or 0`, a number), then only an index.
        Valid("import torch\nimport torch.nn as nn\ndef positions(n):\n    return torch.arange(n)\n"
              "class Net(nn.Module):\n    def forward(self, y, pad=None):\n"
              "        high = y.shape[1] - (pad or 0)\n        idx = torch.randint(0, 4, (4,))\n"
              "        idx = idx + (idx >= positions(4)) * high\n        return y[idx]\n"),
        # Built on the branch that runs only without CUDA, where the input is on the CPU too.
        Valid("import torch\nimport torch.nn as nn\nclass RNN(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.gru = nn.GRU(4, 8)\n"
              "    def forward(self, x):\n        if torch.cuda.is_available():\n"
              "            h = torch.zeros(1, x.size(1), 8).cuda()\n        else:\n"
              "            h = torch.zeros(1, x.size(1), 8).cpu()\n"
              "        return self.gru(x, h)\n"
              "model = RNN().to(device)\n"),
    ]
    INVALID = [
        # Handed to activation checkpointing beside the input: the function it runs decides
        # whether they meet, out of sight (possible).
        Invalid("import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
                "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.block = nn.Linear(4, 4)\n"
                "    def forward(self, x):\n        dummy = torch.ones(1, requires_grad=True)\n"
                "        return checkpoint(self.block, x, dummy)\n"
                "model = Net().to(device)\n",
                9, 17,
                "import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
                "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.block = nn.Linear(4, 4)\n"
                "    def forward(self, x):\n        dummy = torch.ones(1, requires_grad=True, device=x.device)\n"
                "        return checkpoint(self.block, x, dummy)\n"
                "model = Net().to(device)\n",
                unsafe=True, possible=True),
        Invalid(  # certain: the model is moved to a device and the noise meets its input
            "import torch\nimport torch.nn as nn\nclass Denoiser(nn.Module):\n"
            "    def forward(self, x):\n        return x + 0.1 * torch.randn(x.shape)\n"
            "model = Denoiser().to(device)\n",
            5, 26,
            "import torch\nimport torch.nn as nn\nclass Denoiser(nn.Module):\n"
            "    def forward(self, x):\n        return x + 0.1 * torch.randn(x.shape, device=x.device)\n"
            "model = Denoiser().to(device)\n",
            unsafe=True,
        ),
        Invalid(  # divided by a bound of another statement, which may be a GPU tensor
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, t, dim):\n        half = dim // 2\n"
            "        freqs = (torch.arange(8) / half).to(t.device)\n        return t * freqs\n",
            6, 18,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, t, dim):\n        half = dim // 2\n"
            "        freqs = (torch.arange(8, device=t.device) / half).to(t.device)\n        return t * freqs\n",
            unsafe=False,
            possible=True,
        ),
        Invalid(  # handed to a method that mixes it with the input
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        return self.shift(x, torch.arange(x.size(1)))\n"
            "    def shift(self, h, pos):\n        return h + pos\n",
            5, 30,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return self.shift(x, torch.arange(x.size(1), device=x.device))\n"
            "    def shift(self, h, pos):\n        return h + pos\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(  # 0-dim data: a fill on the device (see Fix)
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x: torch.Tensor):\n"
            "        n = torch.tensor(x.size(1))\n        return torch.stack([x.sum(), n])\n",
            5, 13,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x: torch.Tensor):\n"
            "        n = torch.full((), x.size(1), device=x.device)\n"
            "        return torch.stack([x.sum(), n])\n",
            possible=True,
        ),
        Invalid(  # returned: the caller gets a CPU tensor next to the model's outputs
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        h = torch.zeros(x.size(0), 4)\n        return x, h\n",
            5, 13,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        h = torch.zeros(x.size(0), 4, device=x.device)\n"
            "        return x, h\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x: torch.Tensor):\n"
            "        pos = torch.arange(x.size(1))\n        return x + pos\n",
            5, 15,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x: torch.Tensor):\n"
            "        pos = torch.arange(x.size(1), device=x.device)\n        return x + pos\n",
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        return x + torch.ones(x.shape[-1])\n",
            5, 20,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x + torch.ones(x.shape[-1], device=x.device)\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch as T\nfrom torch import nn\nclass Dropish(nn.Module):\n"
            "    def forward(self, x, mask=None):\n        noise = T.rand(x.shape)\n"
            "        return x * noise\n",
            5, 17,
            "import torch as T\nfrom torch import nn\nclass Dropish(nn.Module):\n"
            "    def forward(self, x, mask=None):\n        noise = T.rand(x.shape, device=x.device)\n"
            "        return x * noise\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Causal(nn.Module):\n"
            "    def forward(self, x):\n        return self.mask(x) * x\n"
            "    def mask(self, h):\n        n = h.size(1)\n"
            "        return torch.tril(torch.ones(n, n, device=h.device)) + torch.eye(n)\n",
            8, 64,
            "import torch\nimport torch.nn as nn\nclass Causal(nn.Module):\n"
            "    def forward(self, x):\n        return self.mask(x) * x\n"
            "    def mask(self, h):\n        n = h.size(1)\n"
            "        return torch.tril(torch.ones(n, n, device=h.device)) + "
            "torch.eye(n, device=h.device)\n",
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Scale(nn.Module):\n"
            "    def forward(self, x):\n        w = torch.tensor([1.0, 2.0]).float()\n"
            "        return x * w\n",
            5, 13,
            "import torch\nimport torch.nn as nn\nclass Scale(nn.Module):\n"
            "    def forward(self, x):\n        w = torch.tensor([1.0, 2.0], device=x.device).float()\n"
            "        return x * w\n",
            unsafe=True,
            possible=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "forward" in source and "torch" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.classes: list[_Class] = []
        self.methods: list[_Method] = []  # the methods being visited, outermost class first
        self.resolver: callees.Callees | None = None

    def visit_Module(self, node: cst.Module) -> None:
        # One resolver for the file: building it reads every top-level statement, and
        # building one per class made a file of many classes quadratic.
        self.resolver = callees.of_file(self.ctx, node)

    # -- classes and their methods -------------------------------------------------------

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = self.ctx.enclosing_class
        if info is not None and info.node is node and info.is_module:
            self.classes.append(_Class(node, uses.cpu_only_scope(self.ctx.ancestors)))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        if self.classes and self.classes[-1].node is node:
            self._decide(self.classes.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        scopes = self.ctx.scopes
        if (
            not self.classes
            or len(scopes) < 2
            or scopes[-2].node is not self.classes[-1].node
        ):
            return
        scope = scopes[-1]
        params = node.params
        every = [*params.posonly_params, *params.params]
        if scope.self_name is not None:
            every = every[1:]
        positional = [p.name.value for p in every]
        described = [
            _describe(p, scope.values.get(p.name.value), self.ctx.qualified_name)
            for p in [*every, *params.kwonly_params]
        ]
        method = _Method(node, scope.self_name, described, positional)
        self.classes[-1].methods[node.name.value] = method
        self.methods.append(method)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.methods and self.methods[-1].node is node:
            self.methods.pop()

    # -- calls ---------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        if not self.methods or not self.classes:
            return
        method = self.methods[-1]
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == method.self_name
        ):
            method.calls.append((
                func.attr.value,
                [self._argument(a) for a in node.args if a.keyword is None and not a.star],
                {a.keyword.value: self._argument(a) for a in node.args if a.keyword is not None},
                self._settled(node) is True,
            ))
            return
        qualified = self.ctx.qualified_name(func) or ""
        head, _, name = qualified.rpartition(".")
        if head != "torch" or name not in NEW_TENSOR_FACTORIES:
            return
        if any(a.star == "**" or (a.keyword is not None and a.keyword.value in ("device", "out"))
               for a in node.args):
            return
        if self._harmless(node, name) or self._placed_by_context() or runs_on_cpu(
            self.ctx.ancestors, self.ctx.qualified_name
        ):
            return  # on a branch that runs only without CUDA, the CPU is where the rest is
        nested = self._nested_scopes(method)
        usable = []
        for param in method.params:
            visible = not any(param.name in self.ctx.bindings(scope) for scope in nested)
            here = self.ctx.lookup(param.name).kind
            usable.append((param, visible and here in (Kind.TENSOR, Kind.UNKNOWN)
                           and (here is Kind.TENSOR or not param.tensor)))
        method.factories.append(_Factory(node, name, usable, self._assigned_names()))

    def _argument(self, arg: cst.Arg) -> tuple[bool, str | None]:
        # A tensor the caller builds on the CPU (`torch.LongTensor(ids)`) is no input that
        # may be on a GPU: a factory meeting it stays where it is.
        is_tensor = self.ctx.value_of(arg.value).kind is Kind.TENSOR and not uses.made_on_cpu(
            arg.value, self.ctx.qualified_name
        )
        return is_tensor, arg.value.value if isinstance(arg.value, cst.Name) else None

    def _harmless(self, call: cst.Call, name: str) -> bool:
        """0-dim constants, copies of tensors, and results moved or turned into Python
        values straight away."""
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if name in kinds.DATA_FACTORIES and positional:
            data = positional[0]
            if _is_number(data) or self.ctx.value_of(data).kind is Kind.TENSOR:
                return True
        sizes = positional + [a.value for a in call.args if a.keyword and a.keyword.value == "size"]
        if any(  # no elements: `torch.zeros(())`, `torch.randint(0, n, ())` are 0-dim
            (isinstance(v, (cst.Tuple, cst.List)) and not v.elements)
            for v in sizes
        ) or (  # `torch.empty(0)`, `torch.zeros([0])`: a placeholder
            name in _SIZE_FACTORIES
            and len(positional) == (2 if name == "full" else 1)
            and _sizes(positional[0]) == ["0"]
        ) or (  # `torch.empty(1)`: uninitialized values nobody reads, a kernel's dummy
            name == "empty" and len(positional) == 1 and _sizes(positional[0]) in (["0"], ["1"])
        ):
            return True
        return self._settled(call) is not None or _indexes(self.ctx.ancestors, call)

    def _settled(self, call: cst.Call) -> bool | None:
        """What happens to the call's result straight away: True if it is moved
        (``.to(x.device)``, ``.to(x)``, ``.float().cuda()``, ``.type_as(x)``), False if it
        becomes something other than a tensor (``.item()``, ``.tolist()``, ``.dtype``),
        None if neither."""
        ancestors = self.ctx.ancestors
        index = next(i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is call)
        while index >= 1:
            attribute = ancestors[index - 1]
            if not isinstance(attribute, cst.Attribute) or attribute.value is not ancestors[index]:
                return None
            name = attribute.attr.value
            outer = ancestors[index - 2] if index >= 2 else None
            if not (isinstance(outer, cst.Call) and outer.func is attribute):
                return False if name in NON_TENSOR_ATTRIBUTES else None
            if name in NON_TENSOR_METHODS:
                return False
            if name in _MOVES and not (name == "to" and changes_dtype_only(outer)):
                return True
            index -= 2
        return None

    def _assigned_names(self) -> set[str]:
        """The names the enclosing assignment binds or stores into (``pe[:, 0] = ...``)."""
        for node in reversed(self.ctx.ancestors):
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                return {n for t in targets for n in _base_names(t)}
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return set()
        return set()

    def _placed_by_context(self) -> bool:
        """Inside ``with torch.device(...)`` (or ``with x.device:``) the default device is set."""
        for node in self.ctx.ancestors:
            if isinstance(node, cst.With):
                for item in node.items:
                    value = item.item
                    target = value.func if isinstance(value, cst.Call) else value
                    if (
                        self.ctx.qualified_name(target) == "torch.device"
                        or (dotted_name(target) or "").endswith(".device")
                    ):
                        return True
        return False

    def _nested_scopes(self, method: _Method) -> list[cst.CSTNode]:
        """Functions and lambdas between the method and the current node."""
        ancestors = self.ctx.ancestors
        start = next(i for i, node in enumerate(ancestors) if node is method.node)
        return [n for n in ancestors[start + 1:] if isinstance(n, (cst.FunctionDef, cst.Lambda))]

    # -- the decision, once the whole class is seen ---------------------------------------

    def _decide(self, klass: _Class) -> None:
        forward = klass.methods.get("forward")
        if forward is None or klass.cpu_only:
            return
        inputs = {"forward": {p.name for p in forward.params if p.tensor}}
        reached = ["forward"]
        changed = True
        while changed:  # follow `self.method(...)` calls, learning which arguments are tensors
            changed = False
            for caller_name in list(reached):
                caller = klass.methods[caller_name]
                for callee_name, positional, keywords, _ in caller.calls:
                    callee = klass.methods.get(callee_name)
                    if callee is None or callee_name == "forward":
                        continue
                    if callee_name not in inputs:
                        inputs[callee_name] = {p.name for p in callee.params if p.certain}
                        reached.append(callee_name)
                        changed = True
                    bound = list(zip(callee.positional, positional)) + list(keywords.items())
                    for param, (is_tensor, passed) in bound:
                        if param in inputs[callee_name]:
                            continue
                        if is_tensor or (passed is not None and passed in inputs[caller_name]
                                         and _unchanged(caller, passed, self.ctx)):
                            inputs[callee_name].add(param)
                            changed = True
        for method_name in reached:
            method = klass.methods[method_name]
            tensors = inputs[method_name]
            # Does every caller move what this method returns? (`self.weights(...).to(d)`)
            callers_move = method_name != "forward" and all(
                moved
                for caller in reached
                for callee, _, _, moved in klass.methods[caller].calls
                if callee == method_name
            )
            flow = _Flow(method.node) if method.factories else None
            followed = uses.Uses(method.node, self.resolver, klass.node) if method.factories else None
            # read by string keys (`outputs["logits"]`): a mapping, not a tensor with a device
            mappings = keyed_by_strings(method.node) if method.factories else set()
            for factory in method.factories:
                if factory.assigned and (
                    flow.moves_any(factory.assigned, callers_move) or flow.only_indexes(factory.assigned)
                ):
                    continue
                if not followed.harmful(factory.call):
                    continue  # never meets the module's tensors, leaves or is stored
                candidates = [
                    param for param, usable in factory.usable
                    if usable and param.name in tensors and param.name not in mappings
                    and (method_name == "forward" or _unchanged(method, param.name, self.ctx))
                ]
                if not candidates:
                    continue
                chosen = next((p for p in candidates if not p.defaulted), candidates[0])
                meeting = followed.meeting(factory.call, tensors)
                moved = moves.module_moved_by_project(self.ctx, klass.node)
                zero_dim = factory.name in kinds.DATA_FACTORIES and kinds.data_may_be_one_number(factory.call)
                path = None if meeting is None or moved is None or zero_dim else (
                    moved, (meeting, f"the CPU tensor meets `{method_name}`'s inputs here, which are on the "
                                     "module's device: on an accelerator this line fails"))
                self._report(factory, method, chosen, path)

    def _report(self, factory: _Factory, method: _Method, param: _Param, path: tuple | None) -> None:
        where = method.node.name.value
        message = (
            f"`torch.{factory.name}(...)` in `{where}` without `device=`: it builds its tensor "
            f"on the CPU while `{param.name}` may be on a GPU"
        )
        certain = param.certain or f"{param.name}.device" in code_of(method.node.body)
        # `device=x.device` only on what is known to have one: a list input would raise
        known = (certain or kind_by_use(method.node, param.name) == kinds.TENSOR
                 or _computed_with(method.node, param.name, self.ctx.qualified_name))
        safe = factory.name not in RANDOM_FACTORIES and certain and not param.defaulted
        device = fixes.expression(f"{param.name}.device")
        edit = (lambda updated: fixes.add_keyword(updated, "device", device))
        if factory.name == "tensor" and _scalar_data(factory.call):
            edit = (lambda updated: _full(updated, device))
        fix = Fix(Applicability.SAFE if safe else Applicability.UNSAFE, [(factory.call, edit)]) if known else None
        node = next((p for p in method.node.params.params if p.name.value == param.name), method.node)
        self.report(factory.call, message, fix=fix,
                    evidence=((node, f"`{param.name}` is an input of `{where}`: the tensors it meets arrive there"),
                              *(path or ())), certain=path is not None)


def _computed_with(function: cst.FunctionDef, name: str, qualify) -> bool:
    """``x * w``, ``torch.cat([x, pad])``: the input is computed with as a tensor is; a list
    that the function only measures and indexes (``len(data_list)``, ``data_list[0]``) is not."""
    found = False

    def named(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.List, cst.Tuple)):
            return any(named(e.value) for e in expr.elements)
        return isinstance(expr, cst.Name) and expr.value == name

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.Modulo):
            found = found or named(node.left) or named(node.right)
        if isinstance(node, cst.Call) and (qualify(node.func) or "").startswith("torch."):
            found = found or any(named(arg.value) for arg in node.args)
        return not found

    tree.walk(function.body, enter)
    return found


def _scalar_data(call: cst.Call) -> bool:
    """``torch.tensor(x.size(1))``, ``torch.tensor(len(ids))``, ``torch.tensor(t.item())``:
    the data is one Python number, the tensor 0-dim (spelled ``torch.tensor``, so it can
    become ``torch.full``)."""
    data = next((a.value for a in call.args if a.keyword is None), None)
    if not isinstance(call.func, cst.Attribute) or data is None:
        return False
    if isinstance(data, cst.Subscript):  # `x.shape[1]`
        return isinstance(data.value, cst.Attribute) and data.value.attr.value == "shape"
    if isinstance(data, cst.Call):
        name = dotted_name(data.func) or ""
        return name == "len" or name.rsplit(".", 1)[-1] in ("item", "size", "numel", "dim") and (
            name != "size" or bool(data.args)
        )
    return False


def _full(updated: cst.Call, device: cst.BaseExpression) -> cst.Call:
    """``torch.tensor(v, dtype=d)`` -> ``torch.full((), v, dtype=d, device=...)``: a fill on
    the device, where ``torch.tensor(v, device=...)`` copies from host memory."""
    shape = cst.Arg(cst.Tuple([]), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    full = updated.with_changes(
        func=updated.func.with_changes(attr=cst.Name("full")), args=[shape, *updated.args]
    )
    return fixes.add_keyword(full, "device", device)


class _Flow(tree.Reader):
    """Where values go inside one method, by name: which names are computed from which,
    which are moved to a device, which are returned. Enough to see that a tensor built on
    the CPU is moved before it leaves (``pe = torch.zeros(n, d); ...; self.pe = pe.to(x.device)``)."""

    def __init__(self, method: cst.FunctionDef) -> None:
        self.sources: list[tuple[set[str], set[str]]] = []  # (targets, names in the value)
        self.moved: set[str] = set()
        self.returned: set[str] = set()
        self.loads: dict[str, int] = {}  # every occurrence of a name, minus plain stores
        self.indexes: dict[str, int] = {}  # occurrences as an index: `x[:, r]`
        self.read(method.body)

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = {n for t in node.targets for n in _base_names(t.target)}
        self.sources.append((targets, _names_in(node.value)))
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.loads[target.target.value] = self.loads.get(target.target.value, 0) - 1

    def visit_Name(self, node: cst.Name) -> None:
        self.loads[node.value] = self.loads.get(node.value, 0) + 1

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        if isinstance(node.slice, cst.Index) and isinstance(node.slice.value, cst.Name):
            name = node.slice.value.value
            self.indexes[name] = self.indexes.get(name, 0) + 1

    def only_indexes(self, names: set[str]) -> bool:
        """Every use of ``names`` indexes another tensor: PyTorch takes CPU index tensors
        for tensors on any device."""
        return bool(names) and all(
            self.indexes.get(n, 0) > 0 and self.indexes[n] == self.loads.get(n, 0) for n in names
        )

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.sources.append((_base_names(node.target), _names_in(node.value)))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.returned |= _names_in(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MOVES and not (
            func.attr.value == "to" and changes_dtype_only(node)
        ):
            self.moved |= _base_names(func.value)

    def moves_any(self, names: set[str], returns_are_moved: bool) -> bool:
        """Is anything computed from ``names`` moved (or returned to callers that move it)?"""
        reached = set(names)
        grew = True
        while grew:
            grew = False
            for targets, used in self.sources:
                if used & reached and not targets <= reached:
                    reached |= targets
                    grew = True
        return bool(reached & self.moved) or (returns_are_moved and bool(reached & self.returned))


def _sizes(expr: cst.BaseExpression) -> list[str] | None:
    """The literal sizes of ``0``, ``[0]``, ``(1,)``; None if any is not a literal."""
    elements = [e.value for e in expr.elements] if isinstance(expr, (cst.List, cst.Tuple)) else [expr]
    if not all(isinstance(e, cst.Integer) for e in elements):
        return None
    return [e.value for e in elements]


def _indexes(ancestors, call: cst.Call) -> bool:
    """``lprobs[torch.tensor(banned)] = -inf``: the call is an index of a subscript."""
    index = next(i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is call)
    return index >= 3 and isinstance(ancestors[index - 1], cst.Index) and isinstance(
        ancestors[index - 3], cst.Subscript
    )


def _base_names(target: cst.BaseExpression) -> set[str]:
    """The variable an assignment target or a method receiver stands for: ``pe`` for
    ``pe``, ``pe[:, 0]``, ``pe.unsqueeze(0)``; ``self.pe`` for ``self.pe``."""
    while True:
        if isinstance(target, cst.Subscript):
            target = target.value
        elif isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute):
            target = target.func.value
        else:
            break
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _base_names(e.value)}
    name = dotted_name(target)
    return {name} if name else set()


def _names_in(expr: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            dotted = dotted_name(node)
            if dotted:
                names.add(dotted)

    expr.visit(_Names())
    return names


def _describe(param: cst.Param, value, qualify) -> _Param:
    annotation = param.annotation
    return _Param(
        name=param.name.value,
        tensor=value is not None and value.kind is Kind.TENSOR,
        # `torch.FloatTensor`, `"torch.Tensor"`, `Optional[Tensor]` (the default decides
        # whether it may be missing)
        certain=annotation is not None and annotation_says_tensor(annotation.annotation, qualify),
        defaulted=param.default is not None,
    )


def _unchanged(method: _Method, name: str, ctx) -> bool:
    """``name`` is only bound as the method's parameter (nothing reassigns it)."""
    return len(ctx.bindings(method.node).get(name, ())) <= 1


def _is_number(expr: cst.BaseExpression) -> bool:
    """A Python number: the data of a 0-dim tensor."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False")
    if isinstance(expr, cst.UnaryOperation):
        return _is_number(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _is_number(expr.left) and _is_number(expr.right)
    if isinstance(expr, cst.Attribute):  # `math.pi`, `torch.pi`, `np.e`
        return expr.attr.value in _CONSTANTS or (dotted_name(expr) or "").startswith("math.")
    if isinstance(expr, cst.Call):
        name = dotted_name(expr.func) or ""
        return name in _NUMBER_CALLS or name.startswith("math.")
    return False
