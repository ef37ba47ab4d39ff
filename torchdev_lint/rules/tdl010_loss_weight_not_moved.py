from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchdev_lint.analysis import kinds, moves, tree
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# torch.nn losses that keep a tensor argument as a buffer: its keywords, and which one
# the first positional argument is.
_WEIGHTED_LOSSES = {
    "CrossEntropyLoss": "weight", "NLLLoss": "weight", "NLLLoss2d": "weight", "BCELoss": "weight",
    "BCEWithLogitsLoss": "weight", "MultiLabelSoftMarginLoss": "weight", "MultiMarginLoss": None,
}
_TENSOR_KEYWORDS = ("weight", "pos_weight")
_MOVES = frozenset({"to", "cuda", "xpu", "mps"})
_DEFAULT_DEVICE_SETTERS = ("set_default_device", "set_default_tensor_type")
# Calls that may move what they are given (`accelerator.prepare(model, criterion)`).
_MOVING_WORDS = ("device", "cuda", "prepare", "gpu")


@dataclass
class _Criterion:
    call: cst.Call  # the loss's construction
    weight: cst.CSTNode  # where its tensor argument is built on the CPU
    target: str  # what it is assigned to: `criterion`, `self.loss_fn`
    ancestors: tuple[cst.CSTNode, ...]


class LossWeightNotMoved(Rule):
    """
    ## What it does
    Flags a loss module built with a tensor argument that is made on the CPU
    (`nn.CrossEntropyLoss(weight=torch.tensor([...]))`, `nn.BCEWithLogitsLoss(pos_weight=...)`,
    the `weight` of `NLLLoss`, `BCELoss`, `MultiLabelSoftMarginLoss`, `MultiMarginLoss`;
    a name bound once to such a tensor counts, so does a legacy `torch.FloatTensor([...])`),
    or an instance of the file's own loss module (a module class named for a loss or
    criterion) that registers such a tensor as a buffer and never moves it itself,
    when the file calls it on data that is on a device (a model's output in a file that moves
    its model, a batch moved with `.to(device)`) and never moves it: no `criterion.to(...)` or
    `.cuda()` anywhere in the file, no `torch.set_default_device`, no call that may move it
    (`accelerator.prepare(..., criterion)`, `to_device(criterion)`).

    It does not flag weights built on the device (`torch.tensor(w, device=device)`,
    `w.to(device)`, `.cuda()`), a weight of unknown origin (a parameter), a criterion that
    is an attribute of an `nn.Module` (`self.loss = nn.CrossEntropyLoss(weight=w)` in a
    module's `__init__`: a submodule, which `model.to()` moves), construction under
    `with torch.device(...)`, a criterion the file never calls on data that may be on a
    device, or one it moves.

    ## Why is this bad?
    A loss keeps its `weight`/`pos_weight` as a buffer; only `criterion.to(device)` moves it.
    On a CPU machine everything is on the CPU and the script works; on a GPU the first loss
    raises a device mismatch: `RuntimeError: Expected all tensors to be on the same device,
    but got weight is on cpu, different from other tensors on cuda:0 (when checking argument
    in method wrapper_CUDA_nll_loss_forward)` for `CrossEntropyLoss`/`NLLLoss`, the same
    complaint from `binary_cross_entropy_with_logits` for `BCEWithLogitsLoss`.
    `torchdev-lint trace --mode sim` confirms it: the weight's factory, and the operation in
    the loss where it met the device.

    ## Fix
    Where the same block moved a model before the loss is built (`model.to(device)` or
    `model = Net().to(device)`, `model.cuda()`, not inside an `if`), appends the same move
    to the construction: `nn.CrossEntropyLoss(weight=w).to(device)`. Otherwise the finding
    has no fix: build the weight on the device the code uses
    (`torch.tensor(w, device=device)`) or move the criterion where the model is moved.

    Fix safety: unsafe. The criterion then lives on the model's device; code elsewhere that
    calls it on CPU tensors (an evaluation on the CPU) would now fail the same way.

    ## At run time
    `torchdev-lint trace` confirms it when the loss's CPU weight meets the other device's
    tensors where the loss is called, and refutes it when the loss only ever saw CPU data
    ([trace](../trace.md)).

    ## When not to use
    When the criterion only ever sees CPU tensors.
    """

    code = "TDL010"
    preview = True  # new: first-look precision not measured on enough findings yet
    name = "loss-weight-not-moved"
    message = "Loss built with a CPU weight tensor and called on device data, but never moved"
    fix_title = "Move the loss to the device the model is moved to"

    VALID = [
        Valid("import torch\nimport torch.nn as nn\nmodel = Net().to(device)\n"
              "w = torch.tensor([1.0, 3.0], device=device)\ncriterion = nn.CrossEntropyLoss(weight=w)\n"
              "for x, y in loader:\n    loss = criterion(model(x.to(device)), y.to(device))\n"),
        Valid("import torch\nimport torch.nn as nn\nmodel = Net().to(device)\n"
              "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))\n"
              "criterion.to(device)\n"
              "for x, y in loader:\n    loss = criterion(model(x.to(device)), y.to(device))\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n"
              "        self.loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))\n"
              "    def forward(self, x, y):\n        return self.loss(self.fc(x), y)\n"
              "model = Net().to(device)\n"),
        Valid("import torch\nimport torch.nn as nn\n"
              "criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))\n"
              "model = nn.Linear(4, 1)\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"),
        Valid("import torch\nimport torch.nn as nn\ntorch.set_default_device('cuda')\n"
              "criterion = nn.NLLLoss(weight=torch.ones(10))\nmodel = Net().to(device)\n"
              "loss = criterion(model(x.to(device)), y.to(device))\n"),
        Valid("import torch.nn as nn\ndef build(weight):\n    return nn.CrossEntropyLoss(weight=weight)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = Net().to(device)\n"
            "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 5.0]))\n"
            "for x, y in loader:\n    x, y = x.to(device), y.to(device)\n"
            "    loss = criterion(model(x), y)\n",
            6, 13,
            "import torch\nimport torch.nn as nn\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = Net().to(device)\n"
            "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 5.0])).to(device)\n"
            "for x, y in loader:\n    x, y = x.to(device), y.to(device)\n"
            "    loss = criterion(model(x), y)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\n"
            "def train(model, loader, criterion, device):\n"
            "    for x, y in loader:\n        out = model(x.to(device))\n"
            "        criterion(out, y.to(device)).backward()\n\n"
            "def main():\n    pos = torch.FloatTensor([3.0])\n"
            "    loss_fn = nn.BCEWithLogitsLoss(pos_weight=pos)\n"
            "    model = Net()\n    model.cuda()\n    train(model, loader, loss_fn, 'cuda')\n"
            "    model.eval()\n    print(loss_fn(model(batch.cuda()), target))\n",
            11, 15,
            None,
        ),
        # A weight from one number is 0-dim: it mixes with the inputs on any device.
        Invalid(
            "import torch\nfrom torch import nn\npos_weight = 3.0\n"
            "loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_weight))\n"
            "model = nn.Linear(4, 1).cuda()\nprint(loss_fn(model(x.cuda()), y.cuda()))\n",
            4, 11,
            None,
            possible=True,
        ),
        Invalid(
            "import numpy as np\nimport torch\nimport torch.nn as nn\n"
            "class Trainer:\n    def __init__(self, model, counts):\n"
            "        self.model = model.cuda()\n"
            "        w = torch.from_numpy(1.0 / np.asarray(counts)).float()\n"
            "        self.criterion = nn.NLLLoss(w)\n"
            "    def step(self, x, y):\n        return self.criterion(self.model(x.cuda()), y.cuda())\n",
            8, 26,
            "import numpy as np\nimport torch\nimport torch.nn as nn\n"
            "class Trainer:\n    def __init__(self, model, counts):\n"
            "        self.model = model.cuda()\n"
            "        w = torch.from_numpy(1.0 / np.asarray(counts)).float()\n"
            "        self.criterion = nn.NLLLoss(w).cuda()\n"
            "    def step(self, x, y):\n        return self.criterion(self.model(x.cuda()), y.cuda())\n",
            unsafe=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "Loss(" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.criteria: list[_Criterion] = []
        self.moved: set[str] = set()  # receivers of a move anywhere in the file
        self.device_calls: dict[str, cst.Call] = {}  # callee code -> first call on device data
        self.default_device = False
        # (block id, statement index, move) of models moved by a plain statement
        self.model_moves: list[tuple[int, int, cst.Call]] = []
        # The file's loss modules that keep a CPU buffer: class name -> where it is built.
        self.buffer_classes: dict[str, cst.CSTNode] = {}
        self.loss_names: set[str] = set()  # last names of what the file binds a loss to

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.ctx.qualified_name(func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _DEFAULT_DEVICE_SETTERS:
            self.default_device = True
            return
        if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in _WEIGHTED_LOSSES:
            self._construction(node, qualified.rsplit(".", 1)[-1])
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "register_buffer":
            self._buffer(node)
            return
        if isinstance(func, cst.Name) and func.value in self.buffer_classes:
            self._assigned(node, self.buffer_classes[func.value])
            return
        if isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
            receiver = code_of(func.value)
            self.moved.add(receiver)
            if moves.copying_move(node) and self._is_model(func.value):
                self._model_move(node)
            return
        name = code_of(func) if isinstance(func, (cst.Name, cst.Attribute)) else ""
        if name and any(w in name.lower() for w in _MOVING_WORDS):
            for arg in node.args:
                self.moved.add(code_of(arg.value))
        # Only calls of names a loss may be bound to are weighed (asking where every call's
        # arguments are made a 5,000-line file five times slower).
        if name and name.rpartition(".")[2] in self.loss_names and name not in self.device_calls and node.args and any(
            self.ctx.value_of(a.value).maybe_accelerator for a in node.args if a.keyword is None
        ):
            self.device_calls[name] = node

    def visit_Module(self, node: cst.Module) -> None:
        self.loss_names = _loss_names(node)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            if isinstance(item.item, cst.Call) and self.ctx.qualified_name(item.item.func) == "torch.device":
                self.default_device = True  # `with torch.device("cuda"):` builds there

    def _construction(self, node: cst.Call, loss: str) -> None:
        weight = next((a.value for a in node.args
                       if a.keyword is not None and a.keyword.value in _TENSOR_KEYWORDS), None)
        if weight is None and _WEIGHTED_LOSSES[loss] and node.args and node.args[0].keyword is None:
            weight = node.args[0].value
        built = moves.made_on_cpu(self.ctx, weight)
        if built is None:
            return
        if isinstance(self.ctx.ancestors[-2], cst.Attribute):
            return  # `nn.CrossEntropyLoss(weight=w).to(device)`, or a method of it
        self._assigned(node, built)

    def _assigned(self, node: cst.Call, built: cst.CSTNode) -> None:
        """Remember the loss ``node`` when it is assigned to a name or attribute, unless that
        is an attribute of a module (a submodule, which `model.to()` moves)."""
        parent = self.ctx.ancestors[-2]
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return
        target = code_of(parent.targets[0].target)
        method = self.ctx.method
        if method is not None and target.startswith(method[2] + ".") and method[0].is_module:
            return
        self.criteria.append(_Criterion(node, built, target, tuple(self.ctx.ancestors)))

    def _buffer(self, node: cst.Call) -> None:
        """``self.register_buffer("w", torch.tensor([...]))`` in a module class whose name
        says it is a loss, and that never moves the buffer itself."""
        method = self.ctx.method
        if method is None or len(node.args) < 2 or not isinstance(node.args[0].value, cst.SimpleString):
            return
        info, _, self_name = method
        name = node.args[0].value.evaluated_value
        if not (info.is_module and code_of(node.func.value) == self_name and isinstance(name, str)
                and any(w in info.name.lower() for w in ("loss", "criterion"))):
            return
        built = moves.made_on_cpu(self.ctx, node.args[1].value)
        if built is None:
            return
        text = code_of(info.node)
        if any(f".{name}.{m}(" in text for m in ("to", "cuda", "type_as")) or f".{name}.device" in text:
            return  # the class moves it (or builds on its device) itself
        self.buffer_classes[info.name] = built

    def _is_model(self, expr: cst.BaseExpression) -> bool:
        """A module, or something of unknown kind that the code calls a model or net."""
        kind = self.ctx.value_of(expr).kind
        if kind is Kind.MODULE:
            return True
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        named = code_of(expr) + (" " + code_of(parent.targets[0].target)
                                 if isinstance(parent, cst.Assign) else "")
        return kind is Kind.UNKNOWN and any(w in named.lower() for w in ("model", "net"))

    def _model_move(self, node: cst.Call) -> None:
        statement, block = _statement_and_block(self.ctx.ancestors)
        if block is not None:
            self.model_moves.append((id(block), block.body.index(statement), node))

    def end_of_file(self) -> None:
        if self.default_device:
            return
        for criterion in self.criteria:
            target = criterion.target
            last = target.rpartition(".")[2]
            if target in self.moved or last in self.moved or any(
                m.rpartition(".")[2] == last for m in self.moved
            ):
                continue
            used = self.device_calls.get(target) or self.device_calls.get(last) or next(
                (c for n, c in self.device_calls.items() if n.rpartition(".")[2] == last), None)
            if used is None:
                continue
            zero_dim = self._may_be_zero_dim(criterion.weight)
            self.report(
                criterion.call,
                f"`{target}` keeps a weight built on the CPU and is called on data on a device, "
                f"but is never moved: on a GPU the loss raises a device mismatch; "
                f"build the weight with `device=` or call `{target}.to(device)`",
                fix=lambda c=criterion: self._fix(c),
                evidence=[(criterion.weight, "the weight tensor is built on the CPU here" + (
                              ", perhaps from one number: a 0-dim tensor mixes with tensors on any device"
                              if zero_dim else "")),
                          (used, "the loss is called here on data that may be on a device")],
                certain=not zero_dim,
            )

    def _may_be_zero_dim(self, weight: cst.CSTNode) -> bool:
        """``pos_weight=torch.tensor(w)`` of a value that may be one number: a 0-dim tensor,
        which the loss mixes with tensors on any device."""
        qualified = self.ctx.qualified_name(weight.func) if isinstance(weight, cst.Call) else None
        return qualified is not None and qualified.startswith("torch.") and qualified[6:] in kinds.DATA_FACTORIES \
            and kinds.data_may_be_one_number(weight)

    def _fix(self, criterion: _Criterion) -> Fix | None:
        statement, block = _statement_and_block(criterion.ancestors)
        if block is None:
            return None
        index = block.body.index(statement)
        before = [m for b, i, m in self.model_moves if b == id(block) and i < index]
        if not before:
            return None
        move = before[-1]
        method = move.func.attr.value
        if method == "to":
            device = move.args[0].value
            if move.args[0].keyword is not None or not isinstance(device, (cst.Name, cst.Attribute, cst.SimpleString)):
                return None
            args = [cst.Arg(value=device)]
        elif method == "cuda" and not move.args:
            args = []
        else:
            return None

        def edit(updated: cst.Call) -> cst.CSTNode:
            return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name(method)), args=args)

        return Fix(Applicability.UNSAFE, [(criterion.call, edit)])


def _loss_names(module: cst.Module) -> set[str]:
    """The last names (``criterion`` for ``self.criterion``) of what the file assigns a
    weighted torch loss or a class named for a loss to: the only callees whose calls can be
    the loss meeting device data, whatever the names of the parameters it passes through."""
    names: set[str] = set()
    for node in tree.collect(module, cst.Assign):
        value = node.value
        while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
               and isinstance(value.func.value, cst.Call)):
            value = value.func.value  # `nn.CrossEntropyLoss(...).to(device)`
        if not isinstance(value, cst.Call):
            continue
        callee = (code_of(value.func) if isinstance(value.func, (cst.Name, cst.Attribute)) else "").rpartition(".")[2]
        if callee in _WEIGHTED_LOSSES or any(w in callee.lower() for w in ("loss", "criterion")):
            for target in node.targets:
                names.add(code_of(target.target).rpartition(".")[2])
    return names


def _statement_and_block(ancestors) -> tuple[cst.CSTNode | None, cst.CSTNode | None]:
    """The statement holding the innermost node, and the block (module or indented body)
    that holds that statement directly; no block for a statement inside an ``if``."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(child, cst.BaseStatement) or isinstance(child, cst.SimpleStatementLine):
            if isinstance(parent, cst.Module):
                return child, parent
            if isinstance(parent, cst.IndentedBlock):
                owner = next(a for a, b in zip(ancestors, ancestors[1:]) if b is parent)
                return (child, parent) if isinstance(owner, cst.FunctionDef) else (child, None)
            return child, None
    return None, None
