from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.kinds import OPTIMIZER_NAME, Kind
from torchdev_lint.analysis import tree
from torchdev_lint.analysis.tree import collect, walk
from torchdev_lint.analysis.sites import OPTIMIZER_CALL
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

_PARAMETER_METHODS = ("parameters", "named_parameters")
_MOVE_METHODS = ("to", "cuda", "to_empty")
_WATCHED_METHODS = ("step", "load_state_dict", *_MOVE_METHODS)
# torch.optim's optimizers that build per-parameter state when constructed (the others
# build it lazily at the first step).
_STATEFUL_CONSTRUCTORS = frozenset({"Adagrad"})
# Reads of an optimizer after the move that do not step it: saving its state, clearing
# gradients, reading the learning rate.
_HARMLESS_USES = frozenset({"state_dict", "zero_grad", "param_groups"})
# The `torch.__future__` switch under which `Module.to` makes new parameter objects.
_NEW_PARAMETERS_SWITCH = "set_overwrite_module_params_on_conversion(True)"


@dataclass
class _Optimizer:
    """An optimizer built from a model's parameters, waiting to see the model move."""

    call: cst.Call
    model: str  # the model expression's code, e.g. "model" or "self.net"
    name: str | None  # what the optimizer was assigned to
    scope: cst.CSTNode  # the function or module body it was built in
    ancestors: tuple[cst.CSTNode, ...]
    stepped: bool = False
    fixable: bool = True
    # What gives the optimizer state before the move: (node, what it shows). State built on
    # the parameters' old device stays there when the model moves.
    state: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    # Where the model moves before any step; the fix goes after the last of them.
    moves: list[tuple[cst.CSTNode, ...]] = field(default_factory=list)
    # Where the code uses the optimizer after the move (a `step()`, handed on, returned,
    # kept): where the state left behind meets the moved parameters. None: not in sight.
    used_after: cst.CSTNode | None = None
    reported: bool = False
    move: tuple | None = None  # (the move call, the model's code, what replaces its parameters)


@dataclass
class _Kept:
    """An optimizer a method keeps on the object before the model is moved, and what other
    methods do to it: (call, method) of state loads and of moves of its model."""

    optimizer: _Optimizer
    built_in: cst.FunctionDef
    state: list[tuple[cst.Call, cst.FunctionDef]] = field(default_factory=list)
    moves: list[tuple[cst.Call, cst.FunctionDef]] = field(default_factory=list)


class OptimizerBeforeTo(Rule):
    """
    ## What it does
    Flags an optimizer (`torch.optim.*`, or a class named like an optimizer from a known
    optimizer package, also when the class is held in a variable: `opt_class =
    torch.optim.AdamW`, an `optimizer_cls` parameter, `getattr(torch.optim, name)`) built
    from `M.parameters()`, `M.named_parameters()`, param groups or a `filter(...)` of them
    (directly or through a name: `params = list(M.parameters())`), when the same function
    or module body later moves `M` with `M.to(...)`, `M.cuda()` or `M.to_empty(...)` and no
    `opt.step()` happens in between.

    A trainer class counts too: an optimizer a method keeps on the object
    (`self.opt = Adam(self.model.parameters())` in `__init__`), whose state another method
    loads (`resume`) while a third moves the model (`fit`): the resume-then-fit order fails.

    It does not flag optimizers built after the move, moves of another model, a move in
    another function (outside such a class), or a move after training (e.g. `model.cpu()`
    before export, after `opt.step()` ran).

    ## Why is this bad?
    `Module.to` keeps each `Parameter` object and swaps its data, so an optimizer built
    before the move updates the moved parameters, but any **state** it holds before the move
    stays on the old device: a resume's `optimizer.load_state_dict(...)` casts the loaded
    state to the parameters' device of that moment, and `Adagrad` builds its state in its
    constructor. The first `step()` after the move then mixes devices and fails. A move that
    makes **new parameter objects** (`to_empty`, an XLA device, or
    `torch.__future__.set_overwrite_module_params_on_conversion(True)`) leaves the optimizer
    updating tensors the model no longer uses: training silently does nothing.

    ## Confidence
    Certain when the analysis sees the failure path: state given to the optimizer before the
    move (`load_state_dict`, a stateful constructor, a step), or a move that makes new
    parameters, and a use of the optimizer after the move where the two meet (a `step()`, the
    training function it is handed to, the caller it is returned to, the object it is kept
    on). Otherwise possible (`--preview`): the optimizer holds no state yet and keeps working,
    or the model moves once training is over (for inference) and nothing steps again, or the
    move puts the model where it already is (the code that built the optimizer made the same
    move first, or called the method that moves it, its only caller, before building the
    optimizer; a save that takes the model to the CPU and back), or the method that moves
    the model builds the optimizer again after its move (the stale state goes with the old
    one), or the code moves the loaded state itself (a loop over `optimizer.state` that
    moves what it holds, also through an object it handed the optimizer to, or a helper of
    the project handed the optimizer that has such a loop: `optimizer_to(self.opt, device)`); the order
    is still the one PyTorch documents. `--show-evidence` names the state, the move
    and the use.

    ## Fix
    Moves the model's move to just before the optimizer is built, when it is one statement
    (`model.to(device)`, `model = model.to(device)`) of the same block and nothing in between
    rebinds the model or what the move reads: the state loaded afterwards lands on the
    parameters' new device. Otherwise moves the optimizer construction, and statements that
    only depend on it (a scheduler built from it), to just after the move, when nothing in
    between reads them or changes what they read. Otherwise (also when the parameters were
    gathered in a name before the move) the finding is reported without a fix.

    Fix safety: unsafe. Statements are reordered; code in between with side effects that
    depend on where the model is cannot be fully ruled out.

    ## When not to use
    When the optimizer is known to keep no state until its first step and the project
    never makes new parameters on conversion.
    """

    code = "TDL005"
    name = "optimizer-before-to"
    sites = frozenset({OPTIMIZER_CALL})
    message = "Optimizer built from the model's parameters before the model is moved"
    fix_title = "Build the optimizer after the move"

    VALID = [
        Valid("import torch\nmodel = Net().to(device)\nopt = torch.optim.Adam(model.parameters())\n"),
        Valid("import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "other.to(device)\n"),
        Valid("import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "for x in data:\n    opt.step()\nmodel.cpu()\nmodel.to('cpu')\n"),
        Valid("import torch\ndef build(model):\n    return torch.optim.SGD(model.parameters())\n"
              "def run(model):\n    model.to(device)\n"),
        Valid("import torch\ndef main(model, other):\n    params = list(other.parameters())\n"
              "    opt = torch.optim.SGD(params, lr=0.1)\n    model.cuda()\n"),
        # A trainer whose resume moves the model before it loads the optimizer's state.
        Valid("import torch\nclass Trainer:\n    def __init__(self, model):\n        self.model = model\n"
              "        self.opt = torch.optim.Adam(self.model.parameters())\n"
              "    def resume(self, state, device):\n        self.model.to(device)\n"
              "        self.opt.load_state_dict(state)\n"),
        # A resume in the documented order: moved, then built, then its state loaded.
        Valid("import torch\ndef resume(model, path, device):\n    model.to(device)\n"
              "    opt = torch.optim.Adam(model.parameters())\n"
              "    opt.load_state_dict(torch.load(path, map_location=device)['opt'])\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n\nmodel = Net()\noptimizer = torch.optim.Adagrad(model.parameters(), lr=0.01)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\nmodel.to(device)\n"
            "train(model, optimizer, scheduler)\n",
            4, 13,
            "import torch\n\nmodel = Net()\nmodel.to(device)\n"
            "optimizer = torch.optim.Adagrad(model.parameters(), lr=0.01)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
            "train(model, optimizer, scheduler)\n",
            unsafe=True,
        ),
        # A resume: the loaded state lands on the CPU, the parameters then move.
        Invalid(
            "import torch\ndef resume(model, path, device):\n"
            "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
            "    ckpt = torch.load(path, map_location='cpu')\n"
            "    model.load_state_dict(ckpt['model'])\n"
            "    optimizer.load_state_dict(ckpt['optimizer'])\n"
            "    # to the GPU\n    model = model.to(device)\n    return model, optimizer\n",
            3, 17,
            "import torch\ndef resume(model, path, device):\n"
            "    # to the GPU\n    model = model.to(device)\n"
            "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
            "    ckpt = torch.load(path, map_location='cpu')\n"
            "    model.load_state_dict(ckpt['model'])\n"
            "    optimizer.load_state_dict(ckpt['optimizer'])\n    return model, optimizer\n",
            unsafe=True,
        ),
        # A wrapper built in `__init__`.
        Invalid(
            "import torch\nclass Trainer:\n    def __init__(self, model, state):\n"
            "        self.model = model\n        self.opt = torch.optim.Adam(self.model.parameters())\n"
            "        self.opt.load_state_dict(state)\n        self.model.cuda()\n",
            5, 20,
            "import torch\nclass Trainer:\n    def __init__(self, model, state):\n"
            "        self.model = model\n        self.model.cuda()\n"
            "        self.opt = torch.optim.Adam(self.model.parameters())\n"
            "        self.opt.load_state_dict(state)\n",
            unsafe=True,
        ),
        # A helper of the file loads the optimizer's state before the move.
        Invalid(
            "import torch\ndef maybe_resume(path, model, opt):\n    ckpt = torch.load(path, map_location='cpu')\n"
            "    opt.load_state_dict(ckpt['opt'])\n"
            "def main(path, device):\n    model = Net()\n    opt = torch.optim.RMSprop(model.parameters())\n"
            "    maybe_resume(path, model, opt)\n    model = model.to(device)\n    train(model, opt)\n",
            7, 11,
            "import torch\ndef maybe_resume(path, model, opt):\n    ckpt = torch.load(path, map_location='cpu')\n"
            "    opt.load_state_dict(ckpt['opt'])\n"
            "def main(path, device):\n    model = Net()\n    model = model.to(device)\n"
            "    opt = torch.optim.RMSprop(model.parameters())\n    maybe_resume(path, model, opt)\n"
            "    train(model, opt)\n",
            unsafe=True,
        ),
        # A trainer: built in `__init__`, its state loaded by `resume`, the model moved by `fit`.
        Invalid(
            "import torch\nclass Trainer:\n    def __init__(self, model):\n        self.model = model\n"
            "        self.opt = torch.optim.Adam(self.model.parameters())\n"
            "    def resume(self, state):\n        self.opt.load_state_dict(state)\n"
            "    def fit(self, device):\n        self.model.to(device)\n        self.opt.step()\n",
            5, 20,
            None,
        ),
        # `to_empty` makes new parameters: the optimizer would update the old ones.
        Invalid(
            "import torch\ndef build(model):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model.to_empty(device='cuda')\n    return opt\n",
            3, 11,
            "import torch\ndef build(model):\n    model.to_empty(device='cuda')\n"
            "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    return opt\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\ndef main(args):\n    model = Net()\n"
            "    opt = torch.optim.Adagrad(model.parameters())\n    model.to(device)\n"
            "    if args.cuda:\n        model.cuda()\n    train(model, opt)\n",
            4, 11,
            "import torch\ndef main(args):\n    model = Net()\n    model.to(device)\n"
            "    if args.cuda:\n        model.cuda()\n"
            "    opt = torch.optim.Adagrad(model.parameters())\n    train(model, opt)\n",
            unsafe=True,
        ),
        # No state before the move: the optimizer keeps working, the order is fragile.
        Invalid(
            "from torch import optim\ndef main(net):\n"
            "    opt = optim.AdamW([{'params': net.parameters()}], lr=1e-3)\n"
            "    print(opt)\n    net = net.to(device)\n",
            3, 11,
            "from torch import optim\ndef main(net):\n    net = net.to(device)\n"
            "    opt = optim.AdamW([{'params': net.parameters()}], lr=1e-3)\n    print(opt)\n",
            unsafe=True, possible=True,
        ),
        Invalid(
            "import torch\ndef main(model, name):\n"
            "    opt = getattr(torch.optim, name)(model.parameters(), lr=0.1)\n"
            "    model.to(device)\n    return opt\n",
            3, 11,
            "import torch\ndef main(model, name):\n    model.to(device)\n"
            "    opt = getattr(torch.optim, name)(model.parameters(), lr=0.1)\n    return opt\n",
            unsafe=True, possible=True,
        ),
        Invalid(
            "def main(model, optimizer_cls):\n    params = list(model.parameters())\n"
            "    opt = optimizer_cls(params, lr=0.1)\n    model.cuda()\n    return opt\n",
            3, 11,
            None, possible=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "parameters()" in source and any(f".{m}(" in source for m in _MOVE_METHODS)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.pending: list[_Optimizer] = []
        self.moved: list[_Optimizer] = []  # the reported ones
        # moved ones per scope (by id), reported once the scope has been read
        self.unreported: dict[int, list[_Optimizer]] = {}
        self.reordered: Counter = Counter()  # reported ones per block (by id), once all are seen
        # `params = list(model.parameters())`: per function (or module) body, the names
        # that hold one model's parameters.
        self.parameter_lists: dict[int, dict[str, str]] = {}
        # Optimizers a method keeps on the object (`self.opt = Adam(self.model.parameters())`),
        # for the methods that load their state or move the model: per class (by id).
        self.kept: dict[int, list[_Kept]] = {}
        self.module: cst.Module | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node

    def _scope(self) -> cst.CSTNode:
        return self.ctx.function or self.ctx.ancestors[0]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        # The callee's name says "optimizer" (or it is computed: `getattr(torch.optim, n)(...)`)
        # before the (costlier) value analysis is asked.
        name = (func.attr.value if isinstance(func, cst.Attribute)
                else func.value if isinstance(func, cst.Name) else "")
        if (
            (
                OPTIMIZER_NAME.search(name)
                or "opt" in name.lower()
                or isinstance(func, cst.Call)
                or (isinstance(func, cst.Name) and self.ctx.lookup(name).kind is Kind.OPTIMIZER_CLASS)
            )
            and self.ctx.value_of(node).kind is Kind.OPTIMIZER
        ):
            self._built(node, name)
            return
        if self.pending and isinstance(func, cst.Name):
            self._handed(node, func.value)
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method not in _WATCHED_METHODS:
            return
        receiver = code_of(func.value)
        if method == "step":
            stepped = {receiver} | {code_of(a.value) for a in node.args}
            for optimizer in self.pending:
                if optimizer.name in stepped and not optimizer.moves:
                    optimizer.stepped = True
        elif method == "load_state_dict":
            self._kept_call(node, receiver, "state")
            for optimizer in self.pending:
                if optimizer.name == receiver and not optimizer.moves:
                    optimizer.state.append(
                        (node, f"`{code_of(node)}` gives the optimizer state on the parameters' "
                               "device of the moment"))
        elif self.ctx.value_of(func.value).kind is not Kind.TENSOR:
            self._kept_call(node, receiver, "moves")
            self._moved(node, receiver, method)

    def visit_Name(self, node: cst.Name) -> None:
        if self.pending:
            self._used(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.pending:
            self._used(node)

    def _used(self, node: cst.Name | cst.Attribute) -> None:
        """A read of a moved-after optimizer other than saving or clearing it: the step, the
        training function it is handed to, the caller it is returned to."""
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _HARMLESS_USES:
            return
        if isinstance(parent, cst.AssignTarget):
            return
        code = None
        for optimizer in self.pending:
            if optimizer.moves and optimizer.used_after is None and optimizer.name is not None:
                code = code or code_of(node)
                if code == optimizer.name:
                    optimizer.used_after = node

    def _kept_call(self, call: cst.Call, receiver: str, what: str) -> None:
        """Another method of the class loads a kept optimizer's state or moves its model."""
        method = self.ctx.method
        if method is None:
            return
        for kept in self.kept.get(id(method[0].node), ()):
            if method[1] is kept.built_in:
                continue
            if what == "state" and receiver == kept.optimizer.name and not any(
                    m is method[1] for _, m in kept.moves):
                kept.state.append((call, method[1]))
            elif what == "moves" and receiver == kept.optimizer.model:
                kept.moves.append((call, method[1]))

    def _handed(self, call: cst.Call, callee_name: str) -> None:
        """``maybe_resume(cfg, model, opt)``: a function of this file handed a waiting
        optimizer that loads state into it or steps it gives it state before the move."""
        callee = self._functions().get(callee_name)
        if callee is None:
            return
        params = [p.name.value for p in callee.params.params]
        for optimizer in self.pending:
            if optimizer.name is None or optimizer.moves or optimizer.scope is not self._scope():
                continue
            if _moves_in_arguments(call, optimizer.model):
                continue  # `train(model.to(device), opt)`: the arguments move it before the callee steps
            for position, arg in enumerate(call.args):
                if code_of(arg.value) != optimizer.name or arg.star:
                    continue
                param = arg.keyword.value if arg.keyword is not None else (
                    params[position] if position < len(params) else None)
                used = param and _state_call(callee, param)
                if used:
                    optimizer.state.append(
                        (call, f"`{callee_name}` gives the optimizer state (`{param}.{used}()`) on the "
                               "parameters' device of the moment"))

    def _functions(self) -> dict[str, cst.FunctionDef]:
        module = self.ctx.ancestors[0]
        return self.ctx.once(("TDL005 functions", id(module)), lambda: {
            s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)})

    def _built(self, node: cst.Call, name: str) -> None:
        lists = self.parameter_lists.get(id(self._scope()), {})
        model = _model_of_parameters(node, lists)
        if model is None:
            return
        # Parameters gathered in a name earlier: moving the construction alone would
        # leave that list behind the move, so that fix is not offered.
        optimizer = _Optimizer(node, model, _assigned_name(self.ctx.ancestors), self._scope(),
                               tuple(self.ctx.ancestors),
                               fixable=_model_of_parameters(node, {}) is not None)
        qualified = self.ctx.qualified_name(node.func) or name
        if qualified.rsplit(".", 1)[-1] in _STATEFUL_CONSTRUCTORS:
            optimizer.state.append(
                (node, f"`{qualified.rsplit('.', 1)[-1]}` builds its state in its constructor, "
                       "on the parameters' device of the moment"))
        self.pending.append(optimizer)

    def _moved(self, node: cst.Call, receiver: str, method: str) -> None:
        scope = self._scope()
        for optimizer in self.pending:
            if optimizer.model != receiver or optimizer.scope is not scope or optimizer.stepped:
                continue
            optimizer.moves.append(tuple(self.ctx.ancestors))
            if len(optimizer.moves) > 1:
                continue
            self.moved.append(optimizer)
            self.unreported.setdefault(id(scope), []).append(optimizer)
            optimizer.move = (node, receiver, _replaces_parameters(self.ctx, node, method))

    def _report(self, optimizer: _Optimizer) -> None:
        """Once the optimizer's scope is read: certain when state (or new parameters) meets
        the moved model at a use of the optimizer after the move."""
        if optimizer.reported or not optimizer.moves:
            return
        optimizer.reported = True
        node, receiver, replaces = optimizer.move
        move = code_of(node)
        if optimizer.state:
            evidence = [*optimizer.state, (node, f"`{move}` moves the parameters; the "
                        "state stays behind and the next `step()` mixes devices")]
        elif replaces:
            evidence = [(node, f"`{move}` {replaces}: the optimizer keeps updating the "
                        "old ones")]
        else:
            evidence = [(node, f"`{move}` keeps each parameter object and swaps its data, "
                        "and the optimizer holds no state yet: it updates the moved "
                        "parameters (a bug once state is loaded or built before the move)")]
        meets = optimizer.used_after
        if meets is None and optimizer.name is not None and "." in optimizer.name:
            meets = optimizer.call  # kept on the object: its other methods step it
        if meets is not None:
            evidence.append((meets, f"`{code_of(meets)}` is used after the move: where the two meet"))
        elif optimizer.state or replaces:
            evidence.append((node, "nothing in sight uses the optimizer after the move (training may "
                                   "be over): possible"))
        placed = _places_state(self.ctx, self.module, optimizer.scope, optimizer.name) \
            if optimizer.name and optimizer.state else None
        if placed is not None:
            meets = None
            evidence.append((placed, f"the code moves `{optimizer.name}.state` itself: the state goes where the "
                                     "parameters go"))
        elif optimizer.state and not replaces:
            already = _moved_before(optimizer.scope, optimizer.call, node)
            if already is not None:
                meets = None
                evidence.append(already)
        self.report(
            optimizer.call,
            f"Optimizer built from `{receiver}` parameters before "
            f"`{move}` moves the model: build it after the move",
            fix=lambda o=optimizer: _hoist_move_fix(o, self.reordered) or _reorder_fix(o, self.reordered),
            evidence=evidence,
            certain=bool(optimizer.state or replaces) and meets is not None,
        )

    def leave_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            lists = self.parameter_lists.setdefault(id(self._scope()), {})
            model = (
                _model_of_parameters_in(node.value, lists)
                if isinstance(node.value, (cst.Call, cst.List, cst.ListComp, cst.Tuple, cst.Name))
                else None
            )
            if model is not None:
                lists[node.targets[0].target.value] = model
            else:
                lists.pop(node.targets[0].target.value, None)
        # Rebinding the model (other than by its move) means later moves are of another model.
        if not self.pending:
            return
        targets = {code_of(t.target) for t in node.targets}
        value = node.value
        is_move = isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
            code_of(value.func.value) in targets
        )
        if not is_move:
            self.pending = [o for o in self.pending if o.model not in targets]

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        for optimizer in self.unreported.pop(id(node), ()):
            self._report(optimizer)
        for optimizer in self.pending:
            method = self.ctx.method
            if (optimizer.scope is node and not optimizer.moves and method is not None
                    and optimizer.name is not None and optimizer.name.startswith(method[2] + ".")):
                self.kept.setdefault(id(method[0].node), []).append(_Kept(optimizer, node))
        self.pending = [o for o in self.pending if o.scope is not node]

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        for kept in self.kept.pop(id(node), ()):
            if kept.state and kept.moves:
                optimizer, (move, mover_def) = kept.optimizer, kept.moves[0]
                state, state_def = kept.state[0]
                mover, loader = mover_def.name.value, state_def.name.value
                evidence = [(state, f"`{loader}` gives the optimizer state on the parameters' device of the moment"),
                            (move, f"`{mover}` moves the parameters afterwards when it runs after "
                                   f"`{loader}`; the state stays behind and the next `step()` mixes devices")]
                already = _already_there(move, mover_def, kept.built_in, optimizer.call) or _mover_ran_first(
                    node, mover_def, kept.built_in, optimizer.call) or _rebuilt_after(
                    move, mover_def, kept.built_in, optimizer.name)
                placer = next(((d, found) for d in (state_def, mover_def) if optimizer.name
                               and (found := _places_state(self.ctx, self.module, d, optimizer.name)) is not None), None)
                if already is None and placer is not None:
                    already = (placer[1], f"`{placer[0].name.value}` moves `{optimizer.name}.state` itself: the "
                                          "state goes where the parameters go")
                self.report(
                    optimizer.call,
                    f"Optimizer built from `{optimizer.model}` parameters before "
                    f"`{code_of(move)}` in `{mover}` moves the model: build it after the move",
                    evidence=evidence + [already] if already else evidence, certain=already is None,
                )

    def end_of_file(self) -> None:
        for optimizers in self.unreported.values():  # those of the module's own code
            for optimizer in optimizers:
                self._report(optimizer)
        # Fixes are built after this: each asks whether its block has another reordering,
        # counted once here rather than by a look at every other report (quadratic).
        self.reordered.update(id(_block_of(o.ancestors)) for o in self.moved)


def _already_there(move: cst.Call, mover: cst.FunctionDef, built_in: cst.FunctionDef,
                   optimizer: cst.Call) -> tuple[cst.CSTNode, str] | None:
    """The later move puts the model where it already was when the state was loaded: the
    method that built the optimizer made the same move before building it
    (``self.encoder.cuda()`` twice under one flag), or the mover takes the model to the CPU
    first and brings it back (``head.cpu(); torch.save(...); head.cuda()``). The state and
    the parameters end on one device: no failure is shown."""
    earlier = _moved_before(built_in, optimizer, move)
    if earlier is not None:
        return earlier
    receiver = code_of(move.func.value)
    for call in collect(mover.body, cst.Call):
        if call is move:
            break
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "cpu" and code_of(call.func.value) == receiver:
            return call, f"`{mover.name.value}` takes the model to the CPU first and brings it back: a round trip " \
                         "that leaves the parameters where the state is"
    return None


def _rebuilt_after(move: cst.Call, mover: cst.FunctionDef, built_in: cst.FunctionDef,
                   optimizer: str | None) -> tuple[cst.CSTNode, str] | None:
    """The method that moves the model builds the optimizer again after its move
    (``self.model.to(self.device)`` then ``self._setup_optimizer()``, or a new
    ``self.optimizer = ...``): the state left behind goes with the optimizer it replaces."""
    after = False
    for node in collect(mover.body, (cst.Call, cst.Assign)):
        if node is move:
            after = True
        elif after and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and code_of(node.func.value) == "self" and node.func.attr.value == built_in.name.value:
            return node, f"`{mover.name.value}` builds the optimizer again after its move: the state left " \
                         "behind goes with the optimizer it replaces"
        elif after and isinstance(node, cst.Assign) and optimizer is not None \
                and any(code_of(t.target) == optimizer for t in node.targets):
            return node, f"`{mover.name.value}` builds a new `{optimizer}` after its move: the state left " \
                         "behind goes with the optimizer it replaces"
    return None


def _mover_ran_first(klass: cst.ClassDef, mover: cst.FunctionDef, built_in: cst.FunctionDef,
                     optimizer: cst.Call) -> tuple[cst.CSTNode, str] | None:
    """The method that moves the model is called once in the class, by the method that builds
    the optimizer and before it does (``self.build_model()`` then ``self.optimizer =
    Adam(...)`` in ``__init__``): its move ran before the optimizer existed, not after the
    state was loaded."""
    name = mover.name.value
    mentions = [a for a in collect(klass, cst.Attribute) if a.attr.value == name]
    if len(mentions) != 1:
        return None
    for call in collect(built_in.body, cst.Call):
        if call is optimizer or tree.contains(call, optimizer):
            return None
        if call.func is mentions[0]:
            return call, (f"`{name}` runs only here, in `{built_in.name.value}` before the optimizer is built: the "
                          "model had moved before the optimizer took its parameters")
    return None


def _moves_in_arguments(call: cst.Call, model: str) -> bool:
    """An argument of ``call`` moves ``model`` (``train(model=net.to(device), ...)``): Python
    evaluates it, and so moves the parameters, before the callee runs."""
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value in _MOVE_METHODS
               and code_of(c.func.value) == model
               for arg in call.args for c in collect(arg.value, cst.Call))


def _moved_before(scope: cst.CSTNode, optimizer: cst.Call, move: cst.Call) -> tuple[cst.CSTNode, str] | None:
    """The same move of the model (``model.to(device)``, or ``model = DataParallel(model).to(device)``)
    runs in ``scope`` before the optimizer is built: the later move leaves the parameters
    where they are."""
    receiver, method = code_of(move.func.value), move.func.attr.value
    arguments = [code_of(a) for a in move.args]
    found: list[tuple[cst.CSTNode, str]] = []
    done = False

    def same(call: cst.BaseExpression) -> bool:
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
            and call.func.attr.value == method and [code_of(a) for a in call.args] == arguments

    def enter(node: cst.CSTNode) -> bool:
        nonlocal done
        if done or found:
            return False
        if node is optimizer:
            done = True
            return False
        if same(node) and code_of(node.func.value) == receiver or isinstance(node, cst.Assign) and same(
                node.value) and any(code_of(t.target) == receiver for t in node.targets):
            found.append((node, f"`{receiver}` was moved the same way before the optimizer was built: the later "
                                 "move leaves the parameters where the state is"))
        return True

    walk(scope, enter)
    return found[0] if found else None


def _places_state(ctx, module: cst.Module, scope: cst.CSTNode, optimizer: str,
                  depth: int = 0) -> cst.For | cst.Call | None:
    """A loop over ``<optimizer>.state`` that moves what it holds (``state[k] = v.cuda()``),
    also through a name the optimizer is handed to (``trainer.optimizer = optimizer``), or a
    call handing the optimizer to a function of the project that has such a loop
    (``optimizer_to(self.optimizer, device)``): the code puts the optimizer's state on the
    device itself."""
    names = {optimizer} | {code_of(t.target) for a in collect(scope, cst.Assign)
                           if code_of(a.value) == optimizer for t in a.targets}
    for loop in collect(scope, cst.For):
        iterated = code_of(loop.iter)
        if any(iterated.startswith(f"{name}.state.") or iterated == f"{name}.state" for name in names):
            if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("to", "cuda")
                   for c in collect(loop.body, cst.Call)):
                return loop
    for call in collect(scope, cst.Call):
        handed = [i for i, a in enumerate(call.args) if a.keyword is None and code_of(a.value) in names]
        if handed and _moves_state_at(ctx, module, call.func, depth) in handed:
            return call
    return None


def _moves_state_at(ctx, module: cst.Module, func: cst.BaseExpression, depth: int) -> int | None:
    """The position of the optimizer whose state the function ``func`` names moves: a
    top-level function of this file, or of another module (``ModuleFacts.state_movers``)."""
    if isinstance(func, cst.Name) and depth == 0:
        own = next((d for d in module.body if isinstance(d, cst.FunctionDef) and d.name.value == func.value), None)
        if own is not None:
            params = [p.name.value for p in (*own.params.posonly_params, *own.params.params)]
            return next((i for i, p in enumerate(params) if _places_state(ctx, module, own, p, depth + 1)), None)
    qualified = ctx.qualified_name(func)
    return ctx.index.moves_optimizer_state(qualified, ctx.path) if qualified and ctx.index is not None else None


def _state_call(function: cst.FunctionDef, param: str) -> str | None:
    """``load_state_dict`` or ``step`` when ``function`` calls it on its parameter ``param``."""
    for call in tree.collect(function, cst.Call):
        func = call.func
        if (isinstance(func, cst.Attribute) and func.attr.value in ("load_state_dict", "step")
                and isinstance(func.value, cst.Name) and func.value.value == param):
            return func.attr.value
    return None


def _replaces_parameters(ctx, move: cst.Call, method: str) -> str | None:
    """How ``move`` makes new parameter objects (which an optimizer built before it never
    sees), or None when it swaps the data of the existing ones (``Module.to``'s default)."""
    if method == "to_empty":
        return "makes new parameter objects"
    if ctx.mentions(_NEW_PARAMETERS_SWITCH):
        return f"makes new parameter objects (the file calls `{_NEW_PARAMETERS_SWITCH}`)"
    if any("xla" in code_of(a.value).lower() for a in move.args):
        return "moves to an XLA device, which makes new parameter objects"
    return None


def _model_of_parameters(call: cst.Call, lists: dict[str, str]) -> str | None:
    """``model`` for ``Optim(model.parameters())``, param groups, ``filter(...)``, or a
    name that holds them (``params = list(model.parameters())``)."""
    first = next((a for a in call.args if a.keyword is None or a.keyword.value == "params"), None)
    return None if first is None else _model_of_parameters_in(first.value, lists)


def _model_of_parameters_in(expr: cst.BaseExpression, lists: dict[str, str]) -> str | None:
    """The one model whose parameters ``expr`` is built from, if there is one."""
    found: list[str] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _PARAMETER_METHODS:
                found.append(code_of(func.value))
        elif isinstance(node, cst.Name) and node.value in lists:
            found.append(lists[node.value])
        return True

    walk(expr, enter)
    return found[0] if len(set(found)) == 1 else None


def _assigned_name(ancestors) -> str | None:
    for node in reversed(ancestors):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            return code_of(node.targets[0].target)
        if isinstance(node, (cst.BaseStatement, cst.FunctionDef)):
            break
    return None


def _statement_in(block: cst.CSTNode, ancestors) -> int | None:
    """The index in ``block`` (a Module or IndentedBlock) of the statement that holds the
    innermost of ``ancestors``, or None when that node is not inside ``block``."""
    for depth, node in enumerate(ancestors[:-1]):
        if node is block:
            statement = ancestors[depth + 1]
            return next(i for i, s in enumerate(block.body) if s is statement)
    return None


def _block_of(ancestors) -> cst.CSTNode | None:
    """The statement block directly holding the innermost node's statement."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(child, cst.BaseStatement):
            return parent if isinstance(parent, (cst.Module, cst.IndentedBlock)) else None
    return None


class _Names(tree.Reader):
    """What one statement reads and which names it assigns."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> bool:
        for target in node.targets:
            self.writes.add(code_of(target.target))
        self.read(node.value)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.reads.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.reads.add(code_of(node))


def _names(statement: cst.CSTNode) -> _Names:
    visitor = _Names()
    visitor.read(statement)
    return visitor


def _hoist_move_fix(optimizer: _Optimizer, reordered: Counter) -> Fix | None:
    """Move the model's one move (``model.to(device)`` or ``model = model.to(device)``) to just
    before the optimizer is built, so that the optimizer, and any state loaded into it, sees
    the parameters where they will be used. Only when the move is a statement of the same
    block and nothing in between rebinds the model or what the move reads."""
    if len(optimizer.moves) != 1 or not optimizer.fixable:
        return None
    block = _block_of(optimizer.ancestors)
    if block is None or reordered[id(block)] > 1 or _block_of(optimizer.moves[0]) is not block:
        return None
    first = _statement_in(block, optimizer.ancestors)
    last = _statement_in(block, optimizer.moves[0])
    if first is None or last is None or not _is_move_statement(block.body[last], optimizer.model):
        return None
    move = _names(block.body[last])
    reads = move.reads - {optimizer.model}
    for statement in block.body[first:last]:
        names = _names(statement)
        if names.writes & (reads | {optimizer.model}):
            return None

    def hoist(updated: cst.CSTNode) -> cst.CSTNode:
        body = list(updated.body)
        body.insert(first, body.pop(last))  # with its own comments
        return updated.with_changes(body=body)

    return Fix(Applicability.UNSAFE, [(block, hoist)])


def _is_move_statement(statement: cst.CSTNode, model: str) -> bool:
    """``model.to(...)``, ``model.cuda(...)`` or ``model = model.to(...)`` alone on a line."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    small = statement.body[0]
    if isinstance(small, cst.Assign):
        if [code_of(t.target) for t in small.targets] != [model]:
            return False
        call = small.value
    elif isinstance(small, cst.Expr):
        call = small.value
    else:
        return False
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("to", "cuda") and code_of(call.func.value) == model)


def _reorder_fix(optimizer: _Optimizer, reordered: Counter) -> Fix | None:
    """Move the optimizer's statement (and its dependents) to just after the last move.
    ``reordered``: how many reported optimizers each block (by id) holds."""
    if optimizer.name is None or not optimizer.fixable:
        return None
    block = _block_of(optimizer.ancestors)
    if block is None or reordered[id(block)] > 1:
        return None  # two reorderings of one block would not compose: leave it to the user
    first = _statement_in(block, optimizer.ancestors)
    last = _statement_in(block, optimizer.moves[-1])
    if last is None:
        return None
    statements = [_names(s) for s in block.body]
    moved_names = {optimizer.name}
    moved = [first]
    reads_of_moved = set(statements[first].reads)
    for index in range(first + 1, last):
        statement = statements[index]
        if statement.reads & moved_names:
            if not statement.writes or statement.writes & reads_of_moved:
                return None  # something in between uses the optimizer
            moved.append(index)
            moved_names |= statement.writes
            reads_of_moved |= statement.reads
    for index in range(first + 1, last + 1):
        if index in moved:
            continue
        statement = statements[index]
        if statement.writes & (reads_of_moved - {optimizer.model}) or statement.writes & moved_names:
            return None  # something in between changes what the construction reads, or rebinds it
        if statement.reads & moved_names:
            return None

    def reorder(updated: cst.CSTNode) -> cst.CSTNode:
        body = list(updated.body)
        kept = [s for i, s in enumerate(body) if i not in moved]
        insert_at = kept.index(body[last]) + 1
        kept[insert_at:insert_at] = [body[i] for i in moved]
        return updated.with_changes(body=kept)

    return Fix(Applicability.UNSAFE, [(block, reorder)])
