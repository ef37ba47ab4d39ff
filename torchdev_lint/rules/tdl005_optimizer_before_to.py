from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.kinds import OPTIMIZER_NAME, Kind
from torchdev_lint.analysis import tree
from torchdev_lint.analysis.tree import walk
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

_PARAMETER_METHODS = ("parameters", "named_parameters")


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
    # Where the model moves before any step; the fix goes after the last of them.
    moves: list[tuple[cst.CSTNode, ...]] = field(default_factory=list)


class OptimizerBeforeTo(Rule):
    """
    ## What it does
    Flags an optimizer (`torch.optim.*`, or a class named like an optimizer from a known
    optimizer package, also when the class is held in a variable: `opt_class =
    torch.optim.AdamW`, an `optimizer_cls` parameter, `getattr(torch.optim, name)`) built
    from `M.parameters()`, `M.named_parameters()`, param groups or a `filter(...)` of them
    (directly or through a name: `params = list(M.parameters())`), when the same function
    or module body later moves `M` with `M.to(...)` or `M.cuda()` and no `opt.step()`
    happens in between.

    It does not flag optimizers built after the move, moves of another model, a move in
    another function, or a move after training (e.g. `model.cpu()` before export, after
    `opt.step()` ran).

    ## Why is this bad?
    The PyTorch docs say to move a model before building its optimizer. With default flags
    `Module.to` keeps each `Parameter` object and swaps its data, so SGD and Adam happen to
    keep working; but any optimizer state that exists before the move (Adagrad builds it in
    its constructor, a `load_state_dict` or `step()` before the move builds it too) stays
    on the old device and the first `step()` fails with a device mismatch. With
    `torch.__future__.set_swap_module_params_on_conversion(True)` or modules that replace
    their parameters, the optimizer keeps updating tensors the model no longer uses.

    ## Fix
    Moves the optimizer construction, and statements that only depend on it (such as a
    scheduler built from it), to just after the move, when they are statements of the same
    block and nothing in between reads them or changes what they read. Otherwise (also
    when the parameters were gathered in a name before the move) the finding is reported
    without a fix.

    Fix safety: unsafe. Statements are reordered; code in between with side effects that
    the construction relied on cannot be fully ruled out.

    ## When not to use
    When the optimizer is known to keep no state until its first step and the project
    never swaps parameters on conversion.
    """

    code = "TDL005"
    name = "optimizer-before-to"
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
        Invalid(
            "from torch import optim\ndef main(net):\n"
            "    opt = optim.AdamW([{'params': net.parameters()}], lr=1e-3)\n"
            "    print(opt)\n    net = net.to(device)\n",
            3, 11,
            None,
        ),
        Invalid(
            "import torch\nclass Trainer:\n    def setup(self):\n"
            "        self.opt = torch.optim.SGD(filter(lambda p: p.requires_grad, "
            "self.model.parameters()), lr=0.1)\n        self.model.cuda()\n",
            4, 20,
            "import torch\nclass Trainer:\n    def setup(self):\n        self.model.cuda()\n"
            "        self.opt = torch.optim.SGD(filter(lambda p: p.requires_grad, "
            "self.model.parameters()), lr=0.1)\n",
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
        Invalid(
            "import torch\ndef main(model, name):\n"
            "    opt = getattr(torch.optim, name)(model.parameters(), lr=0.1)\n"
            "    model.to(device)\n    return opt\n",
            3, 11,
            "import torch\ndef main(model, name):\n    model.to(device)\n"
            "    opt = getattr(torch.optim, name)(model.parameters(), lr=0.1)\n    return opt\n",
            unsafe=True,
        ),
        Invalid(
            "def main(model, optimizer_cls):\n    params = list(model.parameters())\n"
            "    opt = optimizer_cls(params, lr=0.1)\n    model.cuda()\n    return opt\n",
            3, 11,
            None,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "parameters()" in source and (".to(" in source or ".cuda(" in source)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.pending: list[_Optimizer] = []
        self.moved: list[_Optimizer] = []  # the reported ones
        self.reordered: Counter = Counter()  # reported ones per block (by id), once all are seen
        # `params = list(model.parameters())`: per function (or module) body, the names
        # that hold one model's parameters.
        self.parameter_lists: dict[int, dict[str, str]] = {}

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
            lists = self.parameter_lists.get(id(self._scope()), {})
            model = _model_of_parameters(node, lists)
            if model is not None:
                # Parameters gathered in a name earlier: moving the construction alone would
                # leave that list behind the move, so no fix is offered.
                self.pending.append(
                    _Optimizer(node, model, _assigned_name(self.ctx.ancestors), self._scope(),
                               tuple(self.ctx.ancestors),
                               fixable=_model_of_parameters(node, {}) is not None)
                )
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method not in ("step", "to", "cuda"):
            return
        receiver = code_of(func.value)
        if method == "step":
            stepped = {receiver} | {code_of(a.value) for a in node.args}
            for optimizer in self.pending:
                if optimizer.name in stepped:
                    optimizer.stepped = True
        elif method in ("to", "cuda") and self.ctx.value_of(func.value).kind is not Kind.TENSOR:
            scope = self._scope()
            for optimizer in self.pending:
                if optimizer.model != receiver or optimizer.scope is not scope or optimizer.stepped:
                    continue
                optimizer.moves.append(tuple(self.ctx.ancestors))
                if len(optimizer.moves) == 1:
                    self.moved.append(optimizer)
                    self.report(
                        optimizer.call,
                        f"Optimizer built from `{receiver}` parameters before "
                        f"`{code_of(node)}` moves the model: build it after the move",
                        fix=lambda o=optimizer: _reorder_fix(o, self.reordered),
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
        self.pending = [o for o in self.pending if o.scope is not node]

    def end_of_file(self) -> None:
        # Fixes are built after this: each asks whether its block has another reordering,
        # counted once here rather than by a look at every other report (quadratic).
        self.reordered.update(id(_block_of(o.ancestors)) for o in self.moved)


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
