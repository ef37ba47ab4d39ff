from __future__ import annotations

import re

import libcst as cst

from torchdev_lint.analysis import kinds, moves, narrowing, receivers, tree
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.analysis.tree import collect
from torchdev_lint.analysis.sites import DISCARDED_MOVE, RESULT_MOVES
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid


class DiscardedToResult(Rule):
    """
    ## What it does
    Flags a statement whose whole value is `t.to(...)`, `t.cuda(...)` or `t.cpu()` where
    `t` is a tensor: a tensor built by a torch factory or op (or `Variable(...)`), a batch
    element from `for x, y in loader:`, a tensor input of `forward`/`training_step`, a
    name annotated as a tensor (`Tensor`, `torch.FloatTensor`, `Optional[Tensor]`,
    `Tensor | None`, `Union[Tensor, ...]`, `"torch.Tensor"`, `nn.Parameter`), a parameter
    the function uses only as a tensor (`x.view(...)`, `x.size(0)`, `x.shape`,
    `x.contiguous()`...), or a value computed from those. A parameter also used as a
    module (`x.eval()`, `x.parameters()`, or called) stays unknown.

    It does not flag receivers that are `nn.Module`s (`model.to(device)` moves the module in
    place and is correct), objects whose `.to` works in place (a tokenizer's
    `BatchEncoding`, a project's own class with a `to` method, a graph or data object the
    code indexes by an attribute no tensor has: DGL's `g.ndata["feat"]`, PyG's `batch.x[mask]`,
    even when it comes from a loader) or receivers of unknown type. Nor a move to the
    device the tensor is on already: `x.to(x.device)`, or `y.to(x.device)` right after
    `y = x` (or `y = x.long()`), with no branch between: the move does nothing.

    ## Why is this bad?
    Unlike `nn.Module.to`, `Tensor.to` is not in place: it returns a new tensor on the
    target device and leaves `t` where it was. The statement does the copy and throws it
    away, and the next op that mixes `t` with a tensor on the GPU fails with
    `Expected all tensors to be on the same device`, or the program silently computes
    on the CPU.

    ## Fix
    Assigns the result back to the receiver: `t = t.to(device)`, `self.t = self.t.to(device)`,
    `batch[k] = batch[k].to(device)`. A receiver that cannot be assigned to (the result of a
    call) gets no fix.

    Fix safety: safe. The move the statement asked for now takes effect. Unsafe when the
    receiver may be an object of a class the file defines with its own `to`/`cuda`/`cpu`
    (a `to` that moves in place and returns `None` would lose the object), and when it may
    be an `nn.Parameter`: a name bound to one, or `self.<attr>` of a module that makes it a
    Parameter, registers it by name or never assigns it (a parent class may). A module's
    parameter only takes a Parameter (`self.w = self.w.to(d)` raises `cannot assign
    'torch.cuda.FloatTensor' as parameter 'w'`), and a name rebound to the moved copy
    holds a non-leaf tensor an optimizer rejects. `self.w.data = self.w.data.to(d)` is how
    a parameter's data moves, and stays safe.

    ## Confidence
    Certain when the receiver is known to be a tensor: built by torch, an element of a batch
    from a loader (`batch[key]`, `v` of `batch.items()`), an annotated or tensor-used
    parameter, a parameter spread into a call with `**`, or one checked by
    `isinstance(x, torch.Tensor)` / `torch.is_tensor(x)` on the way (which `--show-evidence`
    names), the code goes on to use it as if it had moved (`model(images)` after
    `images.to(device)`; `return self` from a `to()` of its own), and something puts the
    rest of the computation on the device: a device the caller passes (a `device`
    parameter), a module's own code (its inputs and state follow the module), or another
    move in the function or at the module's top level (`model.to(device)`). That use is where
    the tensor left behind meets the device. A dropped `{k: v.to(device) for k, v in batch.items()}` is certain too.
    Possible when nothing else goes to the device (the tensor left behind meets only CPU
    values), when the value is an input of a module's method and only the module puts the
    rest on the device (by that convention its inputs arrive on the module's device, where
    the move does nothing; so does what the method computes from them, `F.unfold(x, p)`), when
    what puts values on the device is a data iterator given `device=` (torchtext's
    `BPTTIterator`: it places the batches, so a value drawn from them is there already),
    when the value is handed to a `DataParallel`, which moves its inputs itself, or
    is used as an index (a CPU index works on a tensor on any device), when
    nothing after the drop reads the value as it is in that function (a read that moves it again,
    `Variable(x).cuda()`, or reads another element, `images[1]` after `images[0]`, aside; an attribute set
    up in `__init__` and used elsewhere: whether it ever meets the device is out of sight),
    when the tensor was already placed on a device (`torch.randn(..., device=d)`, a kept
    move or cast to a CUDA tensor type, `x = x.type(torch.cuda.FloatTensor)`, a Parameter wrapping such a tensor, for a name or a `self.<attr>` the function
    assigns): the move may do nothing, when a dropped move to the CPU gets a value built there or
    computed only from values the code moved there (`emb = emb.cpu()`, then `sim = emb @ emb.t()`;
    `sim.to("cpu")` does nothing), and when only the dtype changes (`x.to(torch.float16)`,
    `mask.to(q.dtype)`): a dropped cast leaves the tensor on its device, so no device meets
    another there.

        ## When not to use
    Never: a discarded out-of-place move is always either a bug or dead code.
    """

    code = "TDL003"
    name = "discarded-to-result"
    sites = frozenset({DISCARDED_MOVE})
    message = "Result of a tensor move is discarded: `Tensor.to()` is not in place"
    fix_title = "Assign the result back"

    VALID = [
        Valid("import torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.to('cuda')\n"),
        Valid("class Net(nn.Module):\n    pass\nnet = Net()\nnet.to(device)\n"),
        Valid("import torch\nx = torch.zeros(3)\nx = x.to(device)\n"),
        # a DGL graph from the loader: `g.to(device)` moved its features in place (DGL 0.4)
        Valid("import torch\nfrom torch.utils.data import DataLoader\ndef run(data, net, device):\n"
              "    for g, target in DataLoader(data):\n        g.to(device)\n"
              "        g.gdata['std'] = g.gdata['std'].to(device)\n        net(g, target.to(device))\n"),
        Valid("batch = tokenizer(texts, return_tensors='pt')\nbatch.to(device)\n"),
        Valid("def f(thing):\n    thing.to(device)\n"),
        Valid("def evaluate(net, device):\n    net.eval()\n    net.to(device)\n"),
        Valid("from tensorflow import Tensor\ndef f(x: Tensor):\n    x.cpu()\n"),
        Valid("from transformers import AutoModel\nm = AutoModel.from_pretrained('x')\n"
              "m.to(device)\n"),
        Valid("class M(nn.Module):\n    def setup(self):\n        self.encoder.to(self.device)\n"
              "        super().to(self.device)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.randn(4, 4)\nx.to('cuda')\n",
            3, 1,
            "import torch\nx = torch.randn(4, 4)\nx = x.to('cuda')\n", possible=True,
        ),
        Invalid(
            "model.to(device)\nfor step, (images, labels) in enumerate(train_loader):\n"
            "    images.to(device)  # move the batch\n    loss = model(images)\n",
            3, 5,
            "model.to(device)\nfor step, (images, labels) in enumerate(train_loader):\n"
            "    images = images.to(device)  # move the batch\n    loss = model(images)\n",
        ),
        Invalid(  # possible: the pair's one read moves it again (`Variable(x).cuda()`); `pair[1]` is another element
            "model.cuda()\nfor pair, labels in train_loader:\n"
            "    pair[0].to(device)\n    right = pair[1]\n    left = Variable(pair[0]).cuda()\n",
            3, 5,
            "model.cuda()\nfor pair, labels in train_loader:\n"
            "    pair[0] = pair[0].to(device)\n    right = pair[1]\n    left = Variable(pair[0]).cuda()\n",
            possible=True,
        ),
        Invalid(  # possible: nothing in sight puts the model on the device
            "for step, (images, labels) in enumerate(train_loader):\n"
            "    images.to(device)\n    loss = model(images)\n",
            2, 5,
            "for step, (images, labels) in enumerate(train_loader):\n"
            "    images = images.to(device)\n    loss = model(images)\n", possible=True,
        ),
        Invalid(
            "import torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x, mask=None):\n"
            "        mask.cpu()\n        return x\n",
            4, 9,
            "import torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x, mask=None):\n"
            "        mask = mask.cpu()\n        return x\n", possible=True,
        ),
        Invalid(
            "import torch\nclass Buf:\n    def __init__(self):\n        self.w = torch.ones(2)\n"
            "    def move(self, d):\n        self.w.to(d)\n",
            6, 9,
            "import torch\nclass Buf:\n    def __init__(self):\n        self.w = torch.ones(2)\n"
            "    def move(self, d):\n        self.w = self.w.to(d)\n", possible=True,
        ),
        Invalid(
            "from typing import Optional\nfrom torch import Tensor\n\n"
            "def f(x: Optional[Tensor], device):\n    x.to(device)\n",
            5, 5,
            "from typing import Optional\nfrom torch import Tensor\n\n"
            "def f(x: Optional[Tensor], device):\n    x = x.to(device)\n", possible=True,
        ),
        Invalid(  # a module's parameter: assigning the moved copy back raises (unsafe)
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.zeros(2))\n"
            "    def place(self, d):\n        self.w.to(d)\n",
            8, 9,
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.zeros(2))\n"
            "    def place(self, d):\n        self.w = self.w.to(d)\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # possible: built on that device inside a Parameter (None in the other branch)
            "import torch\nimport torch.nn as nn\nclass Policy(nn.Module):\n"
            "    def __init__(self, n, device, learned):\n        super().__init__()\n"
            "        if learned:\n            self.std = nn.Parameter(torch.zeros(n, device=device))\n"
            "            self.std.to(device)\n        else:\n            self.std = None\n"
            "        self.opt = torch.optim.Adam([self.std])\n",
            8, 13,
            "import torch\nimport torch.nn as nn\nclass Policy(nn.Module):\n"
            "    def __init__(self, n, device, learned):\n        super().__init__()\n"
            "        if learned:\n            self.std = nn.Parameter(torch.zeros(n, device=device))\n"
            "            self.std = self.std.to(device)\n        else:\n            self.std = None\n"
            "        self.opt = torch.optim.Adam([self.std])\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # possible: a dropped cast leaves the tensor on its device
            "def attend(q, bias):\n    n = bias.size(0)\n    bias.to(q.dtype)\n    return q + bias\n",
            3, 5,
            "def attend(q, bias):\n    n = bias.size(0)\n    bias = bias.to(q.dtype)\n    return q + bias\n",
            possible=True,
        ),
        Invalid(  # possible: computed from the module's input, the patches are on its device already
            "import torch\nclass Chop(nn.Module):\n    def chop(self, x):\n"
            "        patches = torch.nn.functional.unfold(x, 4)\n        patches.cuda()\n        return self.body(patches)\n",
            5, 9,
            "import torch\nclass Chop(nn.Module):\n    def chop(self, x):\n"
            "        patches = torch.nn.functional.unfold(x, 4)\n        patches = patches.cuda()\n"
            "        return self.body(patches)\n",
            possible=True,
        ),
        Invalid(
            "def flatten(x, device):\n    n = x.size(0)\n    x.to(device)\n"
            "    return x.view(n, -1)\n",
            3, 5,
            "def flatten(x, device):\n    n = x.size(0)\n    x = x.to(device)\n"
            "    return x.view(n, -1)\n",
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return ".to(" in source or ".cuda(" in source or ".cpu(" in source

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, (cst.DictComp, cst.ListComp)):
            self._dropped_comprehension(call)
            return
        if not (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in RESULT_MOVES
        ):
            return
        receiver = call.func.value
        if self._to_own_device(receiver, call):
            return
        evidence = ()
        if self.ctx.value_by_use(receiver).kind is not Kind.TENSOR:
            check = narrowing.tensor_check(self.ctx.ancestors, receiver, self.ctx.qualified_name)
            if check is None:
                return
            evidence = ((check, f"`{code_of(receiver)}` is a tensor here: the code checks it"),)
        elif isinstance(receiver, cst.Name) and kinds.indexed_attribute(
                self.ctx.function or self.ctx.ancestors[0], receiver.value) is not None:
            return  # a DGL graph or a PyG batch from the loader: no tensor
        fix = None
        if isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript)) and not _dead_loop_copy(
            self.ctx.ancestors, receiver
        ):
            # A class of the file's own whose `to` returns None would be lost by the fix.
            own = receivers.may_be_projects(self.ctx, receiver, {"to", "cuda", "cpu"})
            # a Parameter cannot be replaced by the plain tensor `.to()` returns
            risky = own or receivers.may_be_parameter(self.ctx, receiver)
            fix = Fix(Applicability.UNSAFE if risky else Applicability.SAFE, [(node, _assign_back)])
        placed = call.func.attr.value != "cpu" and (
            self.ctx.value_by_use(receiver).maybe_accelerator or self._built_placed(receiver))
        if placed:
            # Built on, or moved to, a device already: the move may do nothing (dead code).
            evidence += ((receiver, f"`{code_of(receiver)}` is already placed on a device the "
                                    "code chose: the move may do nothing"),)
        elif kinds.moves_to_cpu(call) and self.ctx.value_by_use(receiver).on_cpu:
            placed = True  # computed from values the code put on the CPU: there already
            evidence += ((receiver, f"`{code_of(receiver)}` is on the CPU already (built there or computed "
                                    "from values moved there): the move does nothing"),)
        dtype_only = call.func.attr.value == "to" and kinds.changes_dtype_only(call)
        if dtype_only:
            evidence += ((call, "only the dtype changes: the tensor stays where it is, on its device"),)
        scope = self.ctx.function or self.ctx.ancestors[0]
        use = _used_after(scope, node, receiver, _container(self.ctx.ancestors, receiver))
        rest = self._rest_on_device(scope, call) if use is not None else None
        scattered = (self._scattered(scope, use) or self._indexes(scope, use)) if rest is not None else None
        if use is None:
            evidence += ((node, f"nothing after the dropped move reads `{code_of(receiver)}` here as it is (a read "
                                "that moves it again or only inspects it aside): "
                                "where it meets the device is out of sight"),)
        elif scattered is not None:
            evidence += scattered
        elif rest is None:
            evidence += ((use, f"`{code_of(receiver)}` is used here, but nothing in sight puts the rest of the "
                               "computation on the device: left on the CPU, it meets only CPU values"),)
        else:
            evidence += (rest, (use, f"`{code_of(receiver)}` is used here as if it had moved"))
        arrived = self._module_input(scope, receiver, rest, node) or self._batches_placed(rest)
        if arrived is not None:
            evidence += (arrived,)
        self.report(call, fix=fix, evidence=evidence,
                    certain=not placed and not dtype_only and rest is not None and scattered is None
                    and arrived is None)

    def _batches_placed(self, rest: tuple[cst.CSTNode, str] | None) -> tuple[cst.CSTNode, str] | None:
        """What puts values on the device is a data iterator given ``device=`` (torchtext's
        ``BucketIterator``, ``BPTTIterator``): it places the batches themselves, so a value
        drawn from them is there already, and the move does nothing."""
        other = rest[0] if rest is not None else None
        if not isinstance(other, cst.Call) or not (self.ctx.qualified_name(other.func) or "").startswith("torchtext."):
            return None
        return other, (f"`{code_of(other.func)}` places the batches it yields on the device: a value drawn from "
                       "them is there already, where the move does nothing")

    def _module_input(self, scope: cst.CSTNode, receiver: cst.BaseExpression,
                      rest: tuple[cst.CSTNode, str] | None, dropped: cst.Expr) -> tuple[cst.CSTNode, str] | None:
        """The value is an input of a module's method, and only the module puts the rest on the
        device: by that same convention its inputs arrive on the module's device, where the
        move does nothing. Where it fails, a caller passes a value from elsewhere: not shown.
        What the value is at the drop is what the bindings before it made (those after it
        count only inside a loop around it)."""
        if rest is None or rest[0] is not scope or not isinstance(scope, cst.FunctionDef):
            return None
        root = receiver
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not isinstance(root, cst.Name) or root.value == "self":
            return None
        star = scope.params.star_arg
        inputs = {p.name.value: p for p in (*scope.params.params, *scope.params.kwonly_params,
                                            *([star] if isinstance(star, cst.Param) else []))
                  if p.name.value != "self"}
        param = inputs.get(root.value)
        # bound again in the function: only as computed from the inputs (`x = torch.cat(x)`)
        sites = [s for s in self.ctx.bindings(scope).get(root.value, ()) if param is None or s is not param.name]
        sites = _reaching(self.ctx, sites, dropped)
        source = _computed_from(sites, root.value, inputs) if sites else param
        if source is None:
            return None
        if source.name.value == root.value:
            return source, (f"`{root.value}` is an input of `{scope.name.value}`: a module's inputs arrive on "
                            "its device, where the move does nothing; no caller is shown passing it from elsewhere")
        return source, (f"`{root.value}` is computed from `{source.name.value}`, an input of `{scope.name.value}`: "
                        "a module's inputs arrive on its device, and what is computed from them stays there, "
                        "where the move does nothing")

    def _rest_on_device(self, scope: cst.CSTNode, dropped: cst.Call) -> tuple[cst.CSTNode, str] | None:
        """What puts the rest of the computation on the device the dropped move names, so
        that the value left behind meets it: a device the caller passes (a ``device``
        parameter), a module's own code (its inputs and state follow the module), or another
        move in the function or at the module's top level (``model.to(device)``, a kept
        ``x = x.to(device)``). None when the code moves nothing else: everything stays on the
        CPU together, and nothing fails."""
        if isinstance(scope, cst.FunctionDef):
            param = next((p for p in [*scope.params.params, *scope.params.kwonly_params]
                          if _DEVICE_PARAMETER.search(p.name.value)), None)
            if param is not None:
                return param, f"the caller chooses the device (`{param.name.value}`): the rest of the values go there"
            info = self.ctx.enclosing_class
            if info is not None and info.is_module:
                return scope, f"`{info.name}.{scope.name.value}` is a module's code: its inputs and state follow the module"
        for where in dict.fromkeys((scope, self.ctx.ancestors[0])):
            other = next((c for c in self.ctx.once(("TDL003: moves", id(where)), lambda where=where: self._moves(where))
                          if c is not dropped), None)
            if other is not None:
                return other, f"`{code_of(other)}` puts values on the device"
        return None

    def _moves(self, where: cst.CSTNode) -> list[cst.Call]:
        """The moves to a device in ``where``'s own code that put something there: not a
        dropped move of a tensor (it puts nothing anywhere), but a module moved in place."""
        skip = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        body = where.body if isinstance(where, cst.FunctionDef) else where
        statements = {id(e.value) for e in tree.collect(body, cst.Expr, skip=skip)}
        return [other for other in tree.collect(body, cst.Call, skip=skip) if _moves_to_device(other) and not (
            id(other) in statements and isinstance(other.func, cst.Attribute)
            and self.ctx.value_by_use(other.func.value).kind is Kind.TENSOR)]

    def _scattered(self, scope: cst.CSTNode, use: cst.CSTNode) -> tuple | None:
        """The value is handed to a ``DataParallel``-wrapped module, which scatters its inputs
        to the devices of its copies itself: the dropped move was not needed."""
        found = self.ctx.once(("TDL003: handed", id(scope)), lambda: _handed_to(scope)).get(id(use))
        if found is not None and self.ctx.once(("TDL003: scatters", id(scope), code_of(found.func)),
                                               lambda: moves.scatters_inputs(scope, found.func)):
            return ((found, f"`{code_of(found.func)}` is a `DataParallel`: it moves its inputs itself"),)
        return None

    def _indexes(self, scope: cst.CSTNode, use: cst.CSTNode) -> tuple | None:
        """The value is used as an index (``data[r]``): indices on the CPU index a tensor on
        any device, so the value left behind fails nowhere there."""
        indexes = self.ctx.once(("TDL003: indexes", id(scope)),
                                lambda: {id(index.value): index for index in tree.collect(scope, cst.Index)})
        found = indexes.get(id(use))
        return None if found is None else (
            (found, f"`{code_of(use)}` is used as an index: a CPU index works on a tensor on any device"),)

    def _to_own_device(self, receiver: cst.BaseExpression, call: cst.Call) -> bool:
        """``x.to(x.device)``, or ``y.to(x.device)`` right after ``y = x`` (or ``y = x.long()``):
        the target is the device the tensor is on already, and the move does nothing."""
        if call.func.attr.value != "to":
            return False
        target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        if not (isinstance(target, cst.Attribute) and target.attr.value == "device"):
            return False
        source = code_of(target.value)
        if code_of(receiver) == source:
            return True
        value = self._assigned_just_before(receiver.value) if isinstance(receiver, cst.Name) else None
        return value is not None and _derived_in_place(value, source)

    def _assigned_just_before(self, name: str) -> cst.BaseExpression | None:
        """The value the simple statements just before this one, in its block, last assign to
        ``name`` (no branch or loop between: it is the value the statement sees)."""
        ancestors = self.ctx.ancestors
        line, block = (ancestors[-2], ancestors[-3]) if len(ancestors) >= 3 else (None, None)
        body = getattr(block, "body", None)
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(body, (list, tuple)):
            return None
        index = next((i for i, statement in enumerate(body) if statement is line), 0)
        for statement in reversed(body[:index]):
            if not isinstance(statement, cst.SimpleStatementLine):
                return None
            for small in reversed(statement.body):
                targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign)
                           else [small.target] if isinstance(small, (cst.AnnAssign, cst.AugAssign)) else [])
                if any(n.value == name for target in targets for n in collect(target, cst.Name)):
                    plain = isinstance(small, cst.Assign) and len(targets) == 1 and isinstance(targets[0], cst.Name)
                    return small.value if plain else None  # an unpacking or an update: out of sight
        return None

    def _built_placed(self, receiver: cst.BaseExpression) -> bool:
        """Every binding of the name in its scope (of ``self.<attr>`` in the function) but
        ``None`` gives it a device: ``device=`` (not the CPU) or a kept move, itself or wrapped in a
        Parameter, or derives it from the name itself with methods that keep the device
        (``mask = mask.unsqueeze(1).repeat(1, 3)``)."""
        scope = self.ctx.function or self.ctx.ancestors[0]
        if isinstance(receiver, cst.Name):
            sites = self.ctx.bindings(scope).get(receiver.value, [])
        elif isinstance(receiver, cst.Attribute) and self.ctx.function is not None:
            function = self.ctx.function
            assigned = self.ctx.once(("TDL003: attribute assignments", id(function)), lambda: _attribute_sites(function))
            sites = assigned.get(code_of(receiver), [])
        else:
            return False
        values = [self._unwrapped(site.value) if isinstance(site, cst.Assign) else None for site in sites
                  if not (isinstance(site, cst.Assign) and tree.is_none(site.value))]  # None has no `.to`
        placing = [isinstance(value, cst.Call) and _places(value) for value in values]
        return any(placing) and all(
            placed or value is not None and _derived_in_place(value, code_of(receiver))
            for value, placed in zip(values, placing))

    def _unwrapped(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """The tensor a ``nn.Parameter(...)`` wraps (it stays on that tensor's device)."""
        if isinstance(value, cst.Call) and value.args and value.args[0].keyword is None \
                and self.ctx.qualified_name(value.func) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return value.args[0].value
        return value

    def _dropped_comprehension(self, comp: cst.DictComp | cst.ListComp) -> None:
        """``{k: v.to(device) for k, v in batch.items()}`` as a statement: every moved
        tensor is dropped with the dict it was put in."""
        element = comp.value if isinstance(comp, cst.DictComp) else comp.elt
        if not (isinstance(element, cst.Call) and isinstance(element.func, cst.Attribute)
                and element.func.attr.value in RESULT_MOVES and comp.for_in.inner_for_in is None):
            return
        iterable = comp.for_in.iter
        source = (iterable.func.value if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute)
                  and iterable.func.attr.value in ("items", "values") else iterable)
        if self.ctx.value_by_use(source).kind is not Kind.BATCH:
            return
        self.report(element, evidence=(
            (comp, f"the moved tensors of `{code_of(source)}` go into a "
                   f"{'dict' if isinstance(comp, cst.DictComp) else 'list'} that nothing keeps"),))


def _handed_to(scope: cst.CSTNode) -> dict[int, cst.Call]:
    """Each argument value of a call in ``scope``, by id, with the call it is handed to."""
    return {id(arg.value): call for call in tree.collect(scope, cst.Call) for arg in call.args}


# A parameter that carries the caller's device: `device`, `dev`, `target_device`.
_DEVICE_PARAMETER = re.compile(r"(?i)(?:^|_)(?:device|dev)$")


def _moves_to_device(call: cst.Call) -> bool:
    """``x.cuda()``, ``x.to(device)`` (not the CPU, not only a dtype), or a factory given a
    device other than the CPU."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda":
        return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to" and call.args:
        return not kinds.changes_dtype_only(call) and not moves.names_cpu(call.args[0].value)
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is not None and not moves.names_cpu(device)


def _container(ancestors, receiver: cst.BaseExpression) -> str | None:
    """``batch`` for a loop variable of ``for item in batch`` / ``for k, v in batch.items()``."""
    if not isinstance(receiver, cst.Name):
        return None
    for node in reversed(ancestors):
        if isinstance(node, cst.For) and receiver.value in {n.value for n in collect(node.target, cst.Name)}:
            iterable = node.iter
            if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
                iterable = iterable.func.value  # `batch.items()`
            return iterable.value if isinstance(iterable, cst.Name) else None
    return None


# Reads of a receiver that do not use it as if the dropped move had happened.
_NO_MEETING = kinds.NON_TENSOR_ATTRIBUTES | kinds.NON_TENSOR_METHODS | {"cpu", "to", "cuda"}


def _variable_of(node: cst.BaseExpression) -> cst.BaseExpression:
    """What ``Variable(x)`` wraps (autograd's old wrapper keeps the tensor's device); the node
    itself otherwise."""
    if isinstance(node, cst.Call) and len(node.args) == 1 and (dotted_name(node.func) or "").endswith("Variable"):
        return node.args[0].value
    return node


def _other_element(node: cst.Subscript, receiver: cst.BaseExpression) -> bool:
    """``node`` reads another constant element of the sequence ``receiver`` is an element of."""
    if not (isinstance(receiver, cst.Subscript) and code_of(node.value) == code_of(receiver.value)):
        return False
    index, other = (_constant_index(s) for s in (receiver, node))
    return index is not None and other is not None and index != other


def _constant_index(node: cst.Subscript) -> str | None:
    element = node.slice[0].slice if len(node.slice) == 1 else None
    return code_of(element.value) if isinstance(element, cst.Index) and isinstance(
        element.value, (cst.Integer, cst.SimpleString)) else None


def _used_after(scope: cst.CSTNode, statement: cst.Expr, receiver: cst.BaseExpression,
                container: str | None) -> cst.CSTNode | None:
    """The first read, after ``statement`` in ``scope``'s own code, of the value the dropped
    move was meant for: the receiver itself (``x``, ``self.mask``), the mapping a
    ``batch[key]`` belongs to or the sequence a loop variable comes from (``container``), or
    the object an attribute receiver belongs to when it is returned (``return self`` from a
    ``to()`` of the project's own)."""
    wanted = code_of(receiver)
    root = receiver.value if isinstance(receiver, (cst.Subscript, cst.Attribute)) else None
    root_code = code_of(root) if isinstance(root, cst.Name) else None
    if container is not None:
        root_code, receiver_holds = container, True
    else:
        receiver_holds = isinstance(receiver, cst.Subscript)
    seen = rebound = False
    found: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> bool:
        nonlocal seen, rebound
        if found or rebound:
            return False
        if node is statement:
            seen = True
            return False
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not scope:
            return False
        if not seen:
            return True
        if isinstance(node, cst.Assign) and any(code_of(t.target) == wanted for t in node.targets):
            tree.walk(node.value, enter)  # the value reads the receiver; then it is another one
            rebound = True
            return False
        if isinstance(node, cst.Del) and wanted in _deleted(node):
            rebound = True  # `del images`: freed, never read again as it is
            return False
        if isinstance(node, cst.Attribute) and node.attr.value in _NO_MEETING and code_of(_variable_of(node.value)) == wanted:
            return False  # `x.is_cuda`, `x.cpu()`, `Variable(x).cuda()`: inspects it or moves it again, as it is
        if isinstance(node, cst.Subscript) and container is None and _other_element(node, receiver):
            return False  # `images[1]` after a dropped `images[0].to(d)`: another element
        if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) and code_of(node) == wanted:
            found.append(node)
        elif receiver_holds and isinstance(node, cst.Name) and node.value == root_code:
            found.append(node)
        elif root_code is not None and isinstance(node, cst.Return) and node.value is not None \
                and code_of(node.value) == root_code:
            found.append(node)
        return not found

    tree.walk(scope, enter)
    return found[0] if found else None


def _deleted(statement: cst.Del) -> set[str]:
    """The code of each name or attribute a ``del`` statement unbinds."""
    target = statement.target
    targets = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
    return {code_of(t) for t in targets}


def _reaching(ctx, sites: list[cst.CSTNode], dropped: cst.Expr) -> list[cst.CSTNode]:
    """The bindings that may reach the dropped statement: those above it, and any inside a
    loop that holds it."""
    module = ctx.ancestors[0]
    line = ctx.line_of(dropped, module)
    loops = [a for a in ctx.ancestors if isinstance(a, (cst.For, cst.While))]
    return [s for s in sites if ctx.line_of(s, module) < line or any(tree.contains(loop, s) for loop in loops)]


def _computed_from(sites: list[cst.CSTNode], name: str, inputs: dict[str, cst.Param]) -> cst.Param | None:
    """The input a local is computed from: every binding assigns it an expression whose data
    comes from an input or the local itself (``_data_root``) and that names no device
    (``x_unfold = F.unfold(x, p)``, then ``x_unfold = x_unfold.view(...)``; not
    ``self.table[:x.size(1)]``, whose data is the module's). None otherwise."""
    found = None
    for site in sites:
        if not isinstance(site, cst.Assign) or any(_names_a_device(c) for c in tree.collect(site.value, cst.Call)):
            return None
        root = _data_root(site.value)
        if root != name and root not in inputs:
            return None
        found = found or inputs.get(root)
    return found


def _names_a_device(call: cst.Call) -> bool:
    """``x.to(d)``, ``x.cuda()``, ``x.cpu()`` or a ``device=``: the result's device is chosen here."""
    return (isinstance(call.func, cst.Attribute) and call.func.attr.value in RESULT_MOVES) or any(
        a.keyword is not None and a.keyword.value == "device" for a in call.args)


def _data_root(expr: cst.BaseExpression) -> str | None:
    """The name whose data an expression computes on: the receiver of a method chain or a
    subscript, the first argument of a function (``F.unfold(x, ...)``, ``torch.cat(xs)``)."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and (dotted_name(expr.func) or "").split(".")[0] not in _FUNCTION_HOLDERS:
            expr = expr.func.value  # `x.view(...)`, `F.unfold(x).transpose(0, 2)`
        elif isinstance(expr, cst.Call) and expr.args:
            expr = expr.args[0].value  # `F.unfold(x, p)`, `torch.cat(x)`
        else:
            return None


# Modules whose functions compute on their first argument: `F.unfold(x)`,
# `torch.nn.functional.unfold(x)` compute on `x`.
_FUNCTION_HOLDERS = frozenset({"torch", "F", "nn", "functional", "np", "numpy", "math"})


def _places(call: cst.Call) -> bool:
    """``torch.randn(..., device=d)`` with ``d`` not the CPU, or ``x.to(d)``/``x.cuda()``."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda"):
        return call.func.attr.value == "cuda" or not (
            call.args and "cpu" in code_of(call.args[0].value))
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is not None and "cpu" not in code_of(device)


# Methods whose result may sit on another device than the tensor's.
_LEAVES_DEVICE = frozenset({"to", "cpu", "cuda", "numpy", "tolist", "item", "pin_memory"})


def _attribute_sites(function: cst.FunctionDef) -> dict[str, list[cst.Assign]]:
    """Each attribute target (``self.std``) -> the single-target assignments to it in the function."""
    found: dict[str, list[cst.Assign]] = {}
    for assign in tree.collect(function, cst.Assign):
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Attribute):
            found.setdefault(code_of(assign.targets[0].target), []).append(assign)
    return found


def _derived_in_place(value: cst.BaseExpression, name: str) -> bool:
    """``name.unsqueeze(2).repeat(1, 1, k, k)`` (``name`` as the code spells it): a chain of method calls on ``name`` that
    keeps its device (a reshape, a repeat, arithmetic), none of them a move."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in _LEAVES_DEVICE:
            return False
        value = value.func.value
    return isinstance(value, (cst.Name, cst.Attribute)) and code_of(value) == name


def _dead_loop_copy(ancestors, receiver: cst.BaseExpression) -> bool:
    """``for k, v in d.items(): v.to(device)`` with ``v`` not read again in the loop:
    assigning back would move a copy nobody reads (``d[k]`` stays), so no fix is offered."""
    if not isinstance(receiver, cst.Name):
        return False
    loop = next((a for a in reversed(ancestors) if isinstance(a, cst.For)), None)
    if loop is None or receiver.value not in {n.value for n in collect(loop.target, cst.Name)}:
        return False
    body = list(loop.body.body)
    statement = next((a for a in ancestors if any(a is s for s in body)), None)  # the loop's own statement
    after = body[body.index(statement) + 1:] if statement is not None else []
    return not any(receiver.value in {n.value for n in collect(s, cst.Name)} for s in after)


def _assign_back(updated: cst.Expr) -> cst.Assign:
    return cst.Assign(
        targets=[cst.AssignTarget(target=updated.value.func.value)],
        value=updated.value,
        semicolon=updated.semicolon,
    )
