from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint.analysis import callees, classes, moves, tree, uses
from torchdev_lint.analysis.classes import self_attribute
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import Kind, changes_dtype_only, moves_to_cpu, plain_literal
from torchdev_lint.analysis.project_index import MOVE_OVERRIDES
from torchdev_lint.analysis.sites import TENSOR_ATTRIBUTE, classes_of
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

_REGISTERED = frozenset({
    "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer",
    "torch.nn.parameter.Buffer", "torch.nn.UninitializedParameter",
    "torch.nn.UninitializedBuffer", "torch.nn.parameter.UninitializedParameter",
    "torch.nn.parameter.UninitializedBuffer",
})
# Methods that define how a module moves: attributes they touch are moved by hand.
# Moves of the attribute itself (`self.mask.to(x.device)`): the class places it by hand.
_ATTRIBUTE_MOVES = frozenset({"to", "cuda", "type_as", "to_device"})
# Attributes a framework moves itself: Lightning transfers `example_input_array` to the
# model's device before using it.
_FRAMEWORK_MOVED = frozenset({"example_input_array"})
_NUMBER_ANNOTATION = re.compile(r"(Optional\[)?(float|int|bool)(\]| \| None)?")
_SCALAR_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})
_SHAPE_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full",
                              "torch.rand", "torch.randn"})
# Methods that keep a tensor's number of dimensions (a 0-dim tensor stays 0-dim).
_DIM_KEEPING = frozenset(
    """float double half bfloat16 to log exp sqrt neg abs clone detach cpu cuda sigmoid tanh
    reciprocal requires_grad_ log_ exp_ fill_ mul add sub div pow clamp""".split()
)
_NON_FLOATING_DTYPES = frozenset(
    "bool long int int64 int32 int16 int8 uint8 short uint16 uint32 uint64".split()
)
_NON_FLOATING_METHODS = frozenset("bool long int byte short char".split())
_NON_FLOATING_FUNCTIONS = frozenset(
    """randint randperm tril_indices triu_indices argsort argmax argmin bucketize searchsorted
    nonzero eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_not
    logical_xor""".split()
)


@dataclass
class _Assignment:
    node: cst.Assign | cst.AnnAssign
    attr: str
    self_name: str
    method: str
    value: cst.BaseExpression | None
    kind: str  # "tensor", "none" or "other"
    origin: cst.BaseExpression | None = None  # the tensor's expression, names followed
    zero_dim: bool = False
    # built on the CPU here (a factory without `device=`, or ops on such tensors only): not
    # derived from a tensor the caller passed, whose device is the caller's
    on_cpu: bool = False


@dataclass
class _Class:
    node: cst.ClassDef
    is_module: bool
    calls: dict[str, set[str]] = field(default_factory=dict)  # method -> self methods called
    assignments: list[_Assignment] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)  # attributes moved by hand
    super_init: dict[int, cst.CSTNode] = field(default_factory=dict)  # id(stmt) -> init call
    # it holds parameters or submodules (`nn.Parameter(...)`, `self.fc = nn.Linear(...)`,
    # `register_buffer`): whoever trains or runs it on a device moves it
    holds_state: bool = False


class UnregisteredTensorAttribute(Rule):
    """
    ## What it does
    Flags, in an `nn.Module` subclass, `self.attr = <tensor>` in `__init__` (or in a method
    `__init__` calls as `self.method()`) where the value is a tensor built by a torch
    factory or op (`torch.ones(...)`, `torch.tril(...) == 0`, `torch.tensor([...])`) and
    neither an `nn.Parameter` nor registered with `register_buffer`. One finding per
    attribute, at its first such assignment.

    Only attributes whose value meets the module's tensors once the module is built are
    flagged: some method (other than those building the module) mixes it with another
    tensor in an op (`x * self.mask`, `torch.cat([x, self.pad])`, an argument next to
    other tensors or given to a submodule), returns it, or stores it elsewhere. Uses that
    move it first (`self.mask.to(x.device)`), index with it (`x[:, self.order]`), read its
    shape or length, log it (`.item()`, `print`), reduce it whole to a 0-dim tensor
    (`.sum()`), or give it where PyTorch wants CPU data (`pack_padded_sequence` lengths,
    `torch.bincount`) are harmless. Handed to the project's own code (a method, a function
    of the file or of a project file it imports, a submodule's `forward`), it is followed
    inside, as TDL008 does, as is a returned value into the calls the file makes of the
    method (`self.blur.kernel()` in another class): copied into parameters (`.copy_(t)`),
    copied onto a device (`torch.as_tensor(mean, device=x.device)`), or kept in an attribute of that class whose every read is harmless, it is harmless. A
    method nobody calls, of a class no other file can reach (in a function, or under
    `if __name__ == "__main__":`), returns to no one. An attribute that a
    method assigns again (recurrent state, a cache) is flagged when that method uses the
    `__init__` value before replacing it.

    It does not flag tensors built on a device chosen by hand (`device=...` other than
    `"cpu"`, `.to(device)`, `.cuda()`: an inference engine's preallocated buffers),
    `nn.Parameter(...)`/`nn.Buffer(...)`, `register_buffer`, 0-dim
    constants (`torch.tensor(0.5)`, `torch.tensor(scale)` with a number `scale`,
    `torch.zeros(())`), non-tensor values, values passed in as parameters (they may be
    `Parameter`s, which `nn.Module` registers itself), assignments outside `__init__`
    (e.g. caches filled in `forward`), and attributes the class moves by hand
    (`self.mask.to(x.device)`, or an `_apply`/`to` override in the file that names them),
    or that a move override of another project file assigns (a model's `_apply` that moves
    its detection head's `stride`: `m.stride = fn(m.stride)`).

    ## Why is this bad?
    `model.to(device)`, `model.cuda()` and `model.half()` only convert the module's
    parameters and buffers. A tensor kept as a plain attribute stays on the CPU, and the
    first op mixing it with the moved input fails with `Expected all tensors to be on the
    same device, but found at least two devices, cuda:0 and cpu!`. It is also missing
    from `state_dict()` and from what `DataParallel` replicates. (A 0-dim tensor is the
    exception: PyTorch lets a CPU scalar take part in CUDA ops.)

    ## Fix
    Replaces the assignment with
    `self.register_buffer("attr", <tensor>, persistent=False)` (and does the same for the
    attribute's other assignments in `__init__` and the methods it calls, `None` included,
    so registration never meets a plain attribute of that name). `persistent=False` keeps
    the tensor out of `state_dict()`, so checkpoints saved before and after the fix load
    either way. A tensor built with `requires_grad=True` was meant to be trained: the
    finding suggests `nn.Parameter` and offers no fix. An assignment made before
    `super().__init__()` gets no fix (buffers cannot be registered before it).

    Where the class holds no parameters or submodules and the project builds modules of it
    and moves none of them (a loss made beside the model), a buffer would stay on the CPU
    with its module: the finding is then at the line that fails, where the attribute meets the
    method's inputs (`weights = self.beta[labels]`), and the fix moves it to their device
    there (`self.beta.to(labels.device)[labels]`; unsafe: a copy per call, and the operand
    must be a tensor). When the operand is not a plain name, attribute or subscript of them,
    no fix is offered.

    Fix safety: safe when the tensor is known not to be floating point (a `bool` or
    integer mask or index: `dtype=torch.bool`, `.bool()`, a comparison, `torch.randint`,
    `torch.tensor([1, 2])`) and every assignment of the attribute in the class is a tensor
    or `None`: the only changes are the move the code needed and the buffer's listing in
    `buffers()`. Unsafe otherwise: `model.half()`/`model.to(torch.float64)` now also cast
    a floating-point buffer (a float32 table, e.g. rotary frequencies, becomes float16),
    and a later assignment of a non-tensor to a buffer raises `TypeError`.

    ## Confidence
    Certain when the analysis shows how the line fails: the attribute is built on the CPU here
    (a factory without `device=`, or ops on such tensors only; not 0-dim), a method reads it
    where it meets a tensor computed from the method's inputs (an operator with them, a call
    handed both, an index into it made from them) with no move
    between, and the project moves modules of this class to a device (`.to(device)` or
    `.cuda()` of one, of a module that holds one, of what a function building one returns, or
    a parameter of a function that moves it). Possible otherwise: the attribute is handed on
    or returned, other project code sets it on objects of its own (`m.prune_mask = ...` in a
    pruning loop: the methods may meet that value), or nothing in sight moves the module. `--show-evidence` prints the three
    steps. See [confidence](../confidence.md).

    ## When not to use
    When the class deliberately keeps the tensor on the CPU (a lookup table indexed with
    CPU indices) and never lets it meet the module's inputs.
    """

    code = "TDL006"
    name = "unregistered-tensor-attribute"
    sites = frozenset({TENSOR_ATTRIBUTE})
    message = "Tensor kept as a plain module attribute: `model.to()` leaves it behind; register it as a buffer"
    fix_title = "Use `register_buffer(..., persistent=False)`"

    @classmethod
    def may_be_certain(cls, index, path: str, found: frozenset[str]) -> bool:
        # certain only where the project moves modules of the class (`moves.module_moved_by_project`)
        return moves.any_moved_by_project(index, path, classes_of(found, TENSOR_ATTRIBUTE))

    VALID = [
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.w = nn.Parameter(torch.randn(3))\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.register_buffer('mask', torch.ones(3))\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def __init__(self, scale=0.5):\n        super().__init__()\n"
              "        self.eps = torch.tensor(1e-6)\n        self.scale = torch.tensor(scale)\n"),
        Valid("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n"
              "        super().__init__()\n        self.n = n\n        self.sizes = [n, 2 * n]\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def forward(self, x):\n        self.cache = torch.zeros_like(x)\n"
              "        return x\n"),
        Valid("import torch\nclass Helper:\n    def __init__(self):\n"
              "        self.table = torch.arange(10)\n"),
        # Replaced at once by a tensor placed by hand: the CPU one is never kept.
        Valid("import torch\nimport torch.nn as nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
              "class Loss(nn.Module):\n    def __init__(self, std, k):\n        super().__init__()\n"
              "        self.std = torch.from_numpy(std).float()\n"
              "        self.std = torch.cat([self.std] * k).to(device)\n"
              "    def forward(self, x):\n        return x / self.std\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.mask = torch.ones(4)\n    def forward(self, x):\n"
              "        return x * self.mask.to(x.device)\n"),
        # Only harmless uses: an index, shape and length reads, logging, CPU-only arguments.
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.order = torch.tensor([2, 0, 1])\n"
              "    def forward(self, x):\n        return x[:, self.order]\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.table = torch.arange(10)\n    def forward(self, x):\n"
              "        print(self.table.sum().item(), len(self.table))\n"
              "        return x.view(-1, self.table.shape[0])\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.lengths = torch.tensor([3, 2])\n    def forward(self, x):\n"
              "        return nn.utils.rnn.pack_padded_sequence(x, self.lengths, batch_first=True)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Linear(nn.Module):\n"
              "    def __init__(self, n, device):\n        super().__init__()\n"
              "        self._output = torch.empty(n, device=device)\n"
              "    def forward(self, x):\n        return torch.mm(x, x, out=self._output)\n"),
        # A full reduction is 0-dim: PyTorch lets a 0-dim CPU tensor meet any device's.
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.p = torch.rand(3, 3)\n"
              "    def forward(self, x):\n        return x * self.p.sum()\n"),
        # Handed to a function that moves it before any other use.
        Valid("import torch\nimport torch.nn as nn\ndef place(t, like):\n    return t.to(like.device)\n"
              "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.table = torch.arange(4)\n"
              "    def forward(self, x):\n        return x * place(self.table, x)\n"),
        # Returned to the one caller in the file, which copies it into its parameters.
        Valid("import torch\nimport torch.nn as nn\nclass Blur(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.conv = nn.Conv2d(1, 1, 3)\n        self.k = torch.ones(3, 3)\n"
              "    def forward(self, x):\n        return self.conv(x)\n"
              "    def kernel(self):\n        return self.k\n"
              "    def load(self, k):\n        self.conv.weight.data.copy_(k)\n"
              "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.blur = Blur()\n        self.blur.load(self.blur.kernel())\n"
              "    def forward(self, x):\n        return self.blur(x)\n"),
    ]
    INVALID = [
        Invalid(  # certain: the model is moved to a device and the mean meets its input in `forward`
            "import torch\nfrom torch import nn\nclass Norm(nn.Module):\n"
            "    def __init__(self, mean):\n        super().__init__()\n"
            "        self.mean = torch.tensor(mean).view(1, 3, 1, 1)\n"
            "    def forward(self, x):\n        return x - self.mean\n"
            "model = nn.Sequential(Norm([0.5, 0.4, 0.4]), nn.Conv2d(3, 8, 3)).to(device)\n",
            6, 9,
            "import torch\nfrom torch import nn\nclass Norm(nn.Module):\n"
            "    def __init__(self, mean):\n        super().__init__()\n"
            '        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), '
            "persistent=False)\n"
            "    def forward(self, x):\n        return x - self.mean\n"
            "model = nn.Sequential(Norm([0.5, 0.4, 0.4]), nn.Conv2d(3, 8, 3)).to(device)\n",
            unsafe=True,
        ),
        Invalid(  # possible: computed from a tensor passed in, it is on the caller's device
            "import torch\nfrom torch import nn\nclass GCN(nn.Module):\n"
            "    def __init__(self, A):\n        super().__init__()\n        self.A = A\n"
            "        self.mask = torch.ceil(self.A * 0.001)\n"
            "    def forward(self, x):\n        return torch.where(self.mask > 0, x, -x)\n"
            "model = GCN(adjacency).to(device)\n",
            7, 9,
            "import torch\nfrom torch import nn\nclass GCN(nn.Module):\n"
            "    def __init__(self, A):\n        super().__init__()\n        self.A = A\n"
            '        self.register_buffer("mask", torch.ceil(self.A * 0.001), persistent=False)\n'
            "    def forward(self, x):\n        return torch.where(self.mask > 0, x, -x)\n"
            "model = GCN(adjacency).to(device)\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(  # handed to a function that mixes it with the input
            "import torch\nimport torch.nn as nn\ndef mix(t, like):\n    return t * like\n"
            "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.table = torch.arange(4)\n"
            "    def forward(self, x):\n        return mix(self.table, x)\n",
            8, 9,
            "import torch\nimport torch.nn as nn\ndef mix(t, like):\n    return t * like\n"
            "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            '        self.register_buffer("table", torch.arange(4), persistent=False)\n'
            "    def forward(self, x):\n        return mix(self.table, x)\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(  # recurrent state: used by `forward` before it replaces it
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.h = torch.zeros(1, 4)\n    def forward(self, x):\n"
            "        self.h = torch.tanh(x + self.h).detach()\n        return self.h\n",
            6, 9,
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            '        self.register_buffer("h", torch.zeros(1, 4), persistent=False)\n'
            "    def forward(self, x):\n"
            "        self.h = torch.tanh(x + self.h).detach()\n        return self.h\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(  # returned to the caller, who mixes it with what the model computes
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.k = torch.ones(3, 3) / 9\n    def kernel(self):\n        return self.k\n",
            6, 9,
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            '        self.register_buffer("k", torch.ones(3, 3) / 9, persistent=False)\n'
            "    def kernel(self):\n        return self.k\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Masked(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n"
            "        self.mask = torch.tril(torch.ones(n, n)).bool()  # causal\n"
            "    def forward(self, x):\n        return x.masked_fill(~self.mask, 0)\n",
            7, 9,
            "import torch\nimport torch.nn as nn\n\nclass Masked(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n"
            '        self.register_buffer("mask", torch.tril(torch.ones(n, n)).bool(), '
            "persistent=False)  # causal\n"
            "    def forward(self, x):\n        return x.masked_fill(~self.mask, 0)\n",
            possible=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass Norm(nn.Module):\n"
            "    def __init__(self, mean):\n        super().__init__()\n"
            "        self.mean = torch.tensor(mean).view(1, 3, 1, 1)\n"
            "    def forward(self, x):\n        return x - self.mean\n",
            6, 9,
            "import torch\nfrom torch import nn\nclass Norm(nn.Module):\n"
            "    def __init__(self, mean):\n        super().__init__()\n"
            '        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), '
            "persistent=False)\n"
            "    def forward(self, x):\n        return x - self.mean\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch as T\nimport torch.nn as nn\nclass Rope(nn.Module):\n"
            "    def __init__(self, dim):\n        super().__init__()\n        self._build(dim)\n"
            "    def _build(self, dim):\n        self.inv_freq = None\n"
            "        freqs = 1.0 / (10000 ** (T.arange(0, dim, 2) / dim))\n"
            "        self.inv_freq = freqs\n"
            "    def forward(self, t):\n        return T.outer(t, self.inv_freq)\n",
            10, 9,
            "import torch as T\nimport torch.nn as nn\nclass Rope(nn.Module):\n"
            "    def __init__(self, dim):\n        super().__init__()\n        self._build(dim)\n"
            '    def _build(self, dim):\n        self.register_buffer("inv_freq", None, '
            "persistent=False)\n"
            "        freqs = 1.0 / (10000 ** (T.arange(0, dim, 2) / dim))\n"
            '        self.register_buffer("inv_freq", freqs, persistent=False)\n'
            "    def forward(self, t):\n        return T.outer(t, self.inv_freq)\n",
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Scaler(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.weight = torch.ones(8, requires_grad=True)\n"
            "    def forward(self, x):\n        return x * self.weight\n",
            6, 9,
            None,
            possible=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Head(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.idx: torch.Tensor = torch.tensor([0, 2, 4])\n"
            "    def forward(self, x):\n        return x.index_select(1, self.idx)\n",
            6, 9,
            "import torch\nimport torch.nn as nn\nclass Head(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            '        self.register_buffer("idx", torch.tensor([0, 2, 4]), persistent=False)\n'
            "    def forward(self, x):\n        return x.index_select(1, self.idx)\n",
            possible=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "torch" in source and "__init__" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.classes: list[_Class] = []
        self.by_node: dict[int, _Class] = {}
        self.handled_in_file: set[str] = set()  # attributes an `_apply`/`to` override touches
        self.module: cst.Module | None = None
        self.resolver: callees.Callees | None = None
        # Per method: local name -> the expression last assigned to it.
        self.locals: dict[int, dict[str, cst.BaseExpression]] = {}

    # -- collection during the traversal ---------------------------------------------

    def _method(self) -> tuple[_Class, cst.FunctionDef, str] | None:
        """The class (its state here), method and self name, inside a method."""
        method = self.ctx.method
        if method is None:
            return None
        info, function, self_name = method
        state = self.by_node.get(id(info.node))
        if state is None:
            state = self.by_node[id(info.node)] = _Class(info.node, info.is_module)
            self.classes.append(state)
        return state, function, self_name

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in MOVE_OVERRIDES and self.ctx.enclosing_class is not None:
            for attribute in _attribute_names(node):
                self.handled_in_file.add(attribute)

    def visit_Call(self, node: cst.Call) -> None:
        where = self._method()
        if where is None:
            return
        state, function, self_name = where
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        receiver = func.value
        called = classes.self_call(node, self_name)
        if called is not None:
            state.calls.setdefault(function.name.value, set()).add(called)
        elif func.attr.value in _ATTRIBUTE_MOVES:
            # `self.mask.to(x.device)`, `self.ids.unsqueeze(0).expand(b, -1).to(device)`
            attr = self_attribute(_chain_start(receiver), self_name)
            if attr is not None:
                state.moved.add(attr)
        if func.attr.value in ("register_buffer", "register_parameter", "add_module") \
                and self_attribute(func, self_name) is not None:
            state.holds_state = True
        if func.attr.value == "type_as":  # `idx.type_as(self.table)`: follows the table's device
            for arg in node.args:
                attr = self_attribute(arg.value, self_name)
                if attr is not None:
                    state.moved.add(attr)
        if func.attr.value == "__init__" and function.name.value == "__init__":
            statement = _statement(self.ctx.ancestors)
            if statement is not None:
                state.super_init[id(statement)] = statement

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.ancestors[-2]
        # `torch.arange(n, device=volume.bbox_min.device)`, `.to(self.table.device)`: the
        # code places what it computes where the tensor is, by hand.
        if node.attr.value == "device" and isinstance(node.value, cst.Attribute):
            ancestors = self.ctx.ancestors
            if len(ancestors) > 2 and isinstance(parent, cst.Arg) and parent.value is node:
                call = ancestors[-3]
                if (parent.keyword is not None and parent.keyword.value == "device") or (
                    isinstance(call, cst.Call)
                    and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value == "to"
                ):
                    self.handled_in_file.add(node.value.attr.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        where = self._method()
        if where is None:
            return
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.locals.setdefault(id(where[1]), {})[target.target.value] = node.value
        if len(node.targets) == 1:
            self._assignment(where, node, node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        where = self._method()
        if where is not None and node.value is not None:
            self._assignment(where, node, node.target, node.value)

    def _assignment(self, where, node, target, value) -> None:
        state, function, self_name = where
        if not (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == self_name
        ):
            return
        origin = self._origin(function, value)
        if isinstance(value, cst.Name) and value.value == "None":
            kind = "none"
        elif moves.moved_new_parameter(self.ctx, origin):
            kind = "other"  # TDL012's bug: a buffer would freeze what was meant to train
        elif self.ctx.value_of(value).kind is Kind.TENSOR and not self._not_ours(
            function, origin, self_name
        ):
            kind = "tensor"
        else:
            kind = "other"
        if kind == "other" and (
                isinstance(origin, cst.Call) and self.ctx.qualified_name(origin.func) in _REGISTERED
                or self.ctx.value_of(value).kind is Kind.MODULE):
            state.holds_state = True
        assignment = _Assignment(node, target.attr.value, self_name, function.name.value,
                                 value, kind, origin)
        if kind == "tensor":
            assignment.zero_dim = self._zero_dim(function, origin)
            assignment.on_cpu = self.ctx.value_of(value).on_cpu
        state.assignments.append(assignment)

    # -- what the value is --------------------------------------------------------------

    def _origin(self, function, value: cst.BaseExpression) -> cst.BaseExpression:
        """The expression behind ``value``, following the method's local names."""
        local = self.locals.get(id(function), {})
        seen = 0
        while isinstance(value, cst.Name) and value.value in local and seen < 10:
            value, seen = local[value.value], seen + 1
        return value

    def _root(self, function, expr: cst.BaseExpression) -> cst.BaseExpression:
        """What a chain of method calls, subscripts and local names starts from:
        ``mask`` in ``mask.clone().detach()[0]``; a library call is a root itself."""
        for _ in range(50):
            expr = self._origin(function, expr)
            if isinstance(expr, cst.Call):
                if self.ctx.qualified_name(expr.func) is not None or not isinstance(
                    expr.func, cst.Attribute
                ):
                    return expr
                expr = expr.func.value
            elif isinstance(expr, cst.Subscript):
                expr = expr.value
            else:
                return expr
        return expr

    def _not_ours(self, function, origin: cst.BaseExpression, self_name: str) -> bool:
        """A tensor this assignment does not create as a plain attribute: an
        ``nn.Parameter``/``nn.Buffer`` (which ``nn.Module`` registers itself), a value passed
        in as a parameter (it may be a ``Parameter``, and the caller chose its device), or
        an alias of another attribute (reported where that one is made)."""
        if isinstance(origin, cst.Call) and self.ctx.qualified_name(origin.func) in _REGISTERED:
            return True
        root = self._root(function, origin)
        if isinstance(root, cst.Call) and self.ctx.qualified_name(root.func) in _REGISTERED:
            return True  # `nn.Parameter(w).float()`: the Parameter itself (same dtype) or its copy
        if isinstance(root, cst.Name):
            return any(p.name.value == root.value for p in _params(function))
        return isinstance(root, cst.Attribute) and self_attribute(root, self_name) is not None

    def _scalar(self, function, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A Python number: a literal, arithmetic on numbers, ``float(...)``, ``math.pi``,
        or a name bound to one (a parameter with a number default, a local literal)."""
        if depth > 5:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return self._scalar(function, expr.expression, depth + 1)
        if isinstance(expr, cst.IfExp):  # `1.0 if factor is None else factor`
            return self._scalar(function, expr.body, depth + 1) or self._scalar(
                function, expr.orelse, depth + 1
            )
        if isinstance(expr, cst.BinaryOperation):
            return self._scalar(function, expr.left, depth + 1) and self._scalar(
                function, expr.right, depth + 1
            )
        if isinstance(expr, cst.Call):
            name = dotted_name(expr.func) or ""
            return name in ("float", "int", "abs", "round") or name.startswith(
                ("math.", "np.log", "np.exp", "np.sqrt", "numpy.log")
            )
        if isinstance(expr, cst.Attribute):
            return dotted_name(expr) in ("math.pi", "math.e", "np.pi", "numpy.pi", "math.inf")
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False"):
                return True
            local = self.locals.get(id(function), {})
            if expr.value in local:
                return self._scalar(function, local[expr.value], depth + 1)
            for param in _params(function):
                if param.name.value == expr.value:
                    annotation = param.annotation
                    if annotation is not None and _NUMBER_ANNOTATION.fullmatch(
                        code_of(annotation.annotation)
                    ):
                        return True
                    return param.default is not None and self._scalar(function, param.default, depth + 1)
        return False

    def _zero_dim(self, function, origin: cst.BaseExpression | None, depth: int = 0) -> bool:
        if not isinstance(origin, cst.Call) or depth > 10:  # `x = x.float()` refers to itself
            return False
        func = origin.func
        qualified = self.ctx.qualified_name(func) or ""
        positional = [a for a in origin.args if a.keyword is None]
        if qualified in _SCALAR_FACTORIES:
            return bool(positional) and (
                qualified == "torch.scalar_tensor" or self._scalar(function, positional[0].value)
            )
        if qualified in _SHAPE_FACTORIES:
            return bool(positional) and isinstance(positional[0].value, (cst.Tuple, cst.List)) and (
                not positional[0].value.elements
            )
        if isinstance(func, cst.Attribute) and func.attr.value in _DIM_KEEPING:
            return self._zero_dim(function, self._origin(function, func.value), depth + 1)
        return False

    def _non_floating(self, function, origin: cst.BaseExpression | None) -> bool:
        """The tensor is known to be bool or integer: dtype casts leave it alone."""
        if isinstance(origin, cst.Comparison):
            return True
        if not isinstance(origin, cst.Call):
            return False
        for arg in origin.args:
            if arg.keyword is not None and arg.keyword.value == "dtype":
                return _dtype_name(arg.value) in _NON_FLOATING_DTYPES
        func = origin.func
        if isinstance(func, cst.Attribute):
            if func.attr.value in _NON_FLOATING_METHODS:
                return True
            if func.attr.value in ("to", "type") and origin.args and origin.args[0].keyword is None:
                return _dtype_name(origin.args[0].value) in _NON_FLOATING_DTYPES
        qualified = self.ctx.qualified_name(func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _NON_FLOATING_FUNCTIONS:
            return True
        if qualified in ("torch.tensor", "torch.as_tensor", "torch.LongTensor",
                         "torch.BoolTensor", "torch.IntTensor"):
            if qualified != "torch.tensor" and qualified != "torch.as_tensor":
                return True
            return bool(origin.args) and _integer_literals(origin.args[0].value)
        return False

    # -- decisions --------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node  # calls made here are resolved against it

    def end_of_file(self) -> None:
        self.resolver = callees.of_file(self.ctx, self.module)
        for state in self.classes:
            if state.is_module:
                self._decide(state)

    def _decide(self, state: _Class) -> None:
        reachable = classes.reachable(state.calls, ["__init__"])
        in_init = [a for a in state.assignments if a.method in reachable]
        # Set again at run time (a cache rebuilt in `forward` where the input is): the value
        # from `__init__` is a placeholder.
        runtime = {a.attr for a in state.assignments if a.method not in reachable and a.kind != "none"}
        reported: set[str] = set()
        for assignment in in_init:
            attr = assignment.attr
            if assignment.kind != "tensor" or attr in reported:
                continue
            reported.add(attr)  # one finding per attribute, at its first tensor assignment
            last = [a for a in in_init if a.attr == attr and a.method == assignment.method][-1]
            if last is not assignment and self._unconditional(state, last) and (
                    (last.kind == "other" and self._no_tensor(last.value)) or _placed(last.origin)):
                # what the module keeps is made before use: something else (`self.bands =
                # self.bands.tolist()`) or a tensor placed by hand (`self.std = torch.cat([self.std]
                # * k).to(device)`)
                continue
            if (
                assignment.zero_dim
                or _placed(assignment.origin)
                or attr in state.moved
                or attr in self.handled_in_file
                or moves.moved_by_override(self.ctx, attr)
                or attr in _FRAMEWORK_MOVED
                # Used once the module is built, where it meets the module's tensors (for an
                # attribute a method sets again, only before it does).
                or not uses.attribute_meets_module(
                    state.node, attr, reachable, attr in runtime, self.resolver
                )
            ):
                continue
            self._report(state, assignment, in_init, reachable)

    def _failure_path(self, state: _Class, first: _Assignment, reachable: set[str]) -> tuple | None:
        """The steps by which the attribute fails: it meets the method's inputs (on the
        device the module is moved to) at a line the analysis shows, and the project moves
        the module to an accelerator. None where either is out of sight."""
        if not first.on_cpu:
            return None  # `torch.ceil(self.A * k)` of a tensor passed in: on the caller's device
        if moves.replaced_from_outside(self.ctx, first.attr):
            return None  # what the methods meet may be the value other code put there
        meeting = uses.attribute_meeting(state.node, first.attr, reachable, self.resolver)
        moved = moves.module_moved_by_project(self.ctx, state.node)
        if meeting is None or moved is None:
            return None
        node, method = meeting
        return (
            (first.node, f"`{first.self_name}.{first.attr}` is built on the CPU and kept as a plain attribute"),
            moved,
            (node, f"it meets `{method.name.value}`'s inputs here, which are on the module's device: "
                   "on an accelerator this line fails"),
        )

    @staticmethod
    def _unconditional(state: _Class, assignment: _Assignment) -> bool:
        """The assignment is a statement of its method's own body (no branch around it)."""
        method = next((m for m in state.node.body.body
                       if isinstance(m, cst.FunctionDef) and m.name.value == assignment.method), None)
        body = method.body.body if method is not None and isinstance(method.body, cst.IndentedBlock) else ()
        return any(isinstance(s, cst.SimpleStatementLine) and assignment.node in s.body for s in body)

    def _no_tensor(self, value: cst.BaseExpression) -> bool:
        """Certainly not a plain tensor: a Python value (``.tolist()``, ``.item()``, a literal)
        or a registered one (``nn.Parameter(self.w)``)."""
        if plain_literal(value):
            return True
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        return (isinstance(func, cst.Attribute) and func.attr.value in ("tolist", "item", "numpy")) or (
            self.ctx.qualified_name(func) in _REGISTERED)

    def _report(self, state: _Class, first: _Assignment, in_init: list[_Assignment], reachable: set[str]) -> None:
        attr = first.attr
        path = self._failure_path(state, first, reachable)
        if _requires_grad(first.origin):
            self.report(
                first.node,
                f"`{first.self_name}.{attr}` is a tensor that requires grad kept as a plain "
                "attribute: it is neither moved by `model.to()` nor in `parameters()`; "
                "make it an `nn.Parameter`",
                evidence=path or (), certain=path is not None,
            )
            return
        if path is None and self._report_at_the_use(state, first, reachable):
            return
        others = [a for a in state.assignments if a.attr == attr]
        rewritten = [a for a in in_init if a.attr == attr and a.kind in ("tensor", "none")]
        message = (
            f"`{first.self_name}.{attr}` is a tensor kept as a plain module attribute: "
            "`model.to()` leaves it behind; register it as a buffer"
        )
        evidence = path if path is not None else ((state.node, f"`{state.node.name.value}` is an nn.Module: "
                                                   "`model.to()` moves its parameters, buffers and submodules only"),)
        if path is None and moves.replaced_from_outside(self.ctx, attr):
            evidence += ((first.node, f"project code sets `.{attr}` on objects other than `self`: what the "
                                      "methods meet may be the value it puts there"),)
        self.report(first.node, message, fix=lambda: self._fix(state, first, others, rewritten),
                    evidence=evidence, certain=path is not None)

    def _report_at_the_use(self, state: _Class, first: _Assignment, reachable: set[str]) -> bool:
        """A module without parameters or submodules that the project builds and never moves
        (a loss made beside the model): a buffer would stay on the CPU with it, so the line
        that fails is where the attribute meets the method's inputs, and the cure is a move
        there. Reported so; False where the module may be moved or no meeting is in sight."""
        if state.holds_state or not first.on_cpu or moves.replaced_from_outside(self.ctx, first.attr):
            # a module with parameters or submodules is moved by whoever runs it (a buffer
            # follows); a value derived from a tensor passed in is on the caller's device
            return False
        unmoved = moves.module_built_unmoved(self.ctx, state.node)
        meeting = uses.attribute_meeting(state.node, first.attr, reachable, self.resolver) if unmoved else None
        if meeting is None:
            return False
        node, method = meeting
        read, other = _read_and_other(node, first.attr)
        name = f"{first.self_name}.{first.attr}"
        fix = None
        if read is not None:
            fix = lambda: Fix(Applicability.UNSAFE, [(read, _moved_like(other))])  # noqa: E731
        self.report(
            node,
            f"`{name}` stays on the CPU with its module, which nothing moves, and meets "
            f"`{method.name.value}`'s inputs here: move it to their device here",
            fix=fix,
            evidence=(
                (first.node, f"`{name}` is built on the CPU and kept as a plain attribute"),
                unmoved,
                (node, f"it meets `{method.name.value}`'s inputs here: where they are on an accelerator, "
                       "this line fails"),
            ),
            certain=False,
        )
        return True

    def _fix(self, state, first, others, rewritten) -> Fix | None:
        positions = self.ctx.positions
        for statement in state.super_init.values():
            # Buffers cannot be registered before `super().__init__()` has run.
            if first.method == "__init__" and _before(positions, first.node, statement):
                return None
        if any(a.kind == "other" and plain_literal(a.value) for a in others):
            return None  # a list, number or string assigned elsewhere: not a buffer
        if any(_passed_in(state, a) for a in rewritten):
            return None  # the caller may pass an nn.Parameter: a buffer would stop its training
        safe = all(a.kind in ("tensor", "none") for a in others) and all(
            self._non_floating_assignment(state, a) for a in others if a.kind == "tensor"
        )
        edits = [(a.node, _register(a.self_name, a.attr)) for a in rewritten]
        return Fix(Applicability.SAFE if safe else Applicability.UNSAFE, edits)

    def _non_floating_assignment(self, state: _Class, assignment: _Assignment) -> bool:
        function = next(
            (f for f in state.node.body.body
             if isinstance(f, cst.FunctionDef) and f.name.value == assignment.method),
            None,
        )
        return function is not None and self._non_floating(function, assignment.origin)


def _register(self_name: str, attr: str):
    def edit(updated: cst.Assign | cst.AnnAssign) -> cst.Expr:
        call = cst.Call(
            func=cst.Attribute(value=cst.Name(self_name), attr=cst.Name("register_buffer")),
            args=[
                cst.Arg(cst.SimpleString(f'"{attr}"'), comma=_comma()),
                cst.Arg(updated.value, comma=_comma()),
                cst.Arg(
                    cst.Name("False"),
                    keyword=cst.Name("persistent"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                          whitespace_after=cst.SimpleWhitespace("")),
                ),
            ],
        )
        return cst.Expr(value=call, semicolon=updated.semicolon)

    return edit


def _read_and_other(meeting: cst.CSTNode, attr: str) -> tuple[cst.Attribute | None, cst.BaseExpression | None]:
    """In a meeting node, the read of ``<self>.<attr>`` and the operand it meets, when both
    are direct parts of it (``self.beta[labels[idx]]``, ``x - self.mean``) and the operand
    can be read twice (names, attributes, subscripts of them); (None, None) otherwise."""
    def is_read(expr) -> bool:
        return isinstance(expr, cst.Attribute) and expr.attr.value == attr and isinstance(expr.value, cst.Name)

    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
    if isinstance(meeting, cst.Subscript) and len(meeting.slice) == 1 and isinstance(meeting.slice[0].slice, cst.Index):
        pairs.append((meeting.value, meeting.slice[0].slice.value))
    elif isinstance(meeting, cst.BinaryOperation):
        pairs += [(meeting.left, meeting.right), (meeting.right, meeting.left)]
    elif isinstance(meeting, cst.Call):
        values = [a.value for a in meeting.args if a.keyword is None and not a.star]
        if isinstance(meeting.func, cst.Attribute):
            values.insert(0, meeting.func.value)
        pairs += [(a, b) for a in values for b in values if a is not b]
    for read, other in pairs:
        if is_read(read) and _readable_twice(other):
            return read, other
    return None, None


def _readable_twice(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return _readable_twice(expr.value)
    if isinstance(expr, cst.Subscript):
        return _readable_twice(expr.value) and all(
            isinstance(e.slice, cst.Index) and _readable_twice(e.slice.value) for e in expr.slice)
    return False


def _moved_like(other: cst.BaseExpression):
    """``self.beta`` -> ``self.beta.to(<other>.device)``."""
    def edit(updated: cst.BaseExpression) -> cst.Call:
        device = cst.Attribute(value=other.deep_clone(), attr=cst.Name("device"))
        return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("to")), args=[cst.Arg(device)])

    return edit


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _chain_start(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``self.a`` for ``self.a.view(1, -1)[0].float()``."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return expr


def _params(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _attribute_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    def enter(child: cst.CSTNode) -> bool:
        if isinstance(child, cst.Attribute):
            names.add(child.attr.value)
        return True

    tree.walk(node, enter)
    return names


def _statement(ancestors) -> cst.CSTNode | None:
    for node in reversed(ancestors):
        if isinstance(node, cst.BaseStatement):
            return node
    return None


def _before(positions, node: cst.CSTNode, other: cst.CSTNode) -> bool:
    if positions is None:
        return False
    return (positions[node].start.line, positions[node].start.column) < (
        positions[other].start.line, positions[other].start.column
    )


def _placed(origin: cst.BaseExpression | None) -> bool:
    """Built on a device chosen by hand (``device=get_accelerator().current_device()``,
    ``.to(device)``, ``.cuda()``), not on the CPU: preallocated buffers of inference
    engines. ``device="cpu"`` is no placement."""
    while isinstance(origin, cst.Call):
        func = origin.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and not (
            func.attr.value == "to" and changes_dtype_only(origin)
        ):
            return not moves_to_cpu(origin)
        for arg in origin.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                return not (isinstance(arg.value, cst.SimpleString) and "cpu" in arg.value.value)
        origin = func.value if isinstance(func, cst.Attribute) else None
    return False


def _requires_grad(origin: cst.BaseExpression | None) -> bool:
    while isinstance(origin, cst.Call):
        for arg in origin.args:
            if (
                arg.keyword is not None
                and arg.keyword.value == "requires_grad"
                and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
            ):
                return True
        func = origin.func
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_":
            return not (origin.args and isinstance(origin.args[0].value, cst.Name)
                        and origin.args[0].value.value == "False")
        origin = func.value if isinstance(func, cst.Attribute) else None
    return False


def _dtype_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


def _integer_literals(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(_integer_literals(e.value) for e in expr.elements)
    if isinstance(expr, cst.UnaryOperation):
        return _integer_literals(expr.expression)
    return isinstance(expr, cst.Integer) or (
        isinstance(expr, cst.Name) and expr.value in ("True", "False")
    )


def _passed_in(state: _Class, assignment: _Assignment) -> bool:
    """The value may be the very object the caller passed: ``self.w = weight``,
    ``torch.as_tensor(weight)`` (which returns a tensor argument itself), either branch of
    ``weight if weight is not None else ...``."""
    method = next((s for s in state.node.body.body
                   if isinstance(s, cst.FunctionDef) and s.name.value == assignment.method), None)
    if method is None:
        return False
    params = {p.name.value for p in [*method.params.params, *method.params.kwonly_params]}

    def may_be(value: cst.BaseExpression | None) -> bool:
        if isinstance(value, cst.Name):
            return value.value in params
        if isinstance(value, cst.IfExp):
            return may_be(value.body) or may_be(value.orelse)
        if isinstance(value, cst.BooleanOperation):
            return may_be(value.left) or may_be(value.right)
        if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] in (
            "as_tensor", "asarray"
        ):
            return bool(value.args) and may_be(value.args[0].value)
        return False

    return may_be(assignment.value)
