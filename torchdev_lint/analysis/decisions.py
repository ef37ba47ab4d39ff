"""Which device decision places a value: the facts of TDL013 (device-chosen-twice).

A program may decide where its tensors go in more than one place. A *decision* is an
expression that picks a device, classified by who decides:

- ``MACHINE``: the machine, whatever the user asked: ``"cuda" if torch.cuda.is_available()
  else "cpu"`` (in ``torch.device(...)`` or not), a name bound to one (a module-level
  ``device`` computed at import), a function of the file that returns one (``get_device()``),
  or a helper of the file that moves its argument to CUDA under ``if torch.cuda.is_available():``;
- ``USER``: the caller or the user: a device parameter (``device``, ``*_device``,
  ``map_location``), an option (``args.device``, ``opt.gpu``: a device word read from
  ``args``/``opt``/``cfg``/``config``/``hparams``...), a choice whose test reads an option or a
  parameter (``"cuda" if args.cuda else "cpu"``, ``"cpu" if args.cpu or not
  torch.cuda.is_available() else "cuda"``), ``self.device`` set from one of these;
- ``FIXED_GPU``: one GPU whatever the process: ``"cuda:0"``, ``torch.device("cuda", 0)``, ``.cuda(0)``;
- ``RANK_GPU``: the process's own GPU: ``f"cuda:{local_rank}"``, ``.cuda(args.local_rank)``;
- ``CURRENT_GPU``: the process's current GPU, whichever ``torch.cuda.set_device`` made it:
  ``"cuda"``, ``.cuda()``. It disagrees with no other decision (the code may have set it to
  either), but it places a value on an accelerator.

``MACHINE`` and ``USER`` disagree as soon as the user asks for another device than the
machine's pick (``--cpu`` on a machine with CUDA, ``device="cuda:1"``); ``FIXED_GPU`` and
``RANK_GPU`` disagree in every process but the first. A device read from a value
(``x.device``, ``next(model.parameters()).device``) follows that value and decides nothing.

A *placement* is where a value gets its device from a decision: a move (``.to(d)``,
``.cuda(i)``) or a torch factory's ``device=``, followed through names bound only to placed
values, ``self.<attr>`` assigned in any method of the class, the file's own functions (what
they return, their parameters read as the caller's arguments) and operations on a placed
value. What is not in the file is not followed: the answer is then None (no placement known).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchdev_lint.analysis import conditions, tree
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import Kind, moves_to_cpu

if TYPE_CHECKING:
    from torchdev_lint.analysis.context import FileContext

MACHINE, USER, FIXED_GPU, RANK_GPU, CURRENT_GPU = "machine", "user", "fixed-gpu", "rank-gpu", "current-gpu"
_DISAGREE = (frozenset({MACHINE, USER}), frozenset({FIXED_GPU, RANK_GPU}))
# Objects whose device attributes are options the user sets (`args.device`, `cfg.gpu`).
CONFIG_ROOTS = frozenset("args opt opts cfg config conf hparams hp options flags FLAGS settings".split())
_DEVICE_WORDS = frozenset({"device", "gpu", "cuda", "cpu"})
_RANK_WORDS = frozenset({"rank"})
# Methods whose result is not where the receiver is, or is not a tensor there.
_NOT_FOLLOWING = frozenset("to cuda cpu numpy item tolist type xpu mps parameters named_parameters "
                           "buffers state_dict size dim".split())
_MAX_DEPTH = 12
# Values followed for one question, and for one file per line of it: each call of a function
# of the file is followed with its own arguments, so helpers that call helpers several times
# (an SSIM loss) branch at every level; past these the question has no answer, and a file
# costs a bounded multiple of its size.
_MAX_FOLLOWED = 2000
_FOLLOWED_PER_LINE = 40


@dataclass(frozen=True)
class Decision:
    kind: str  # MACHINE, USER, FIXED_GPU or RANK_GPU
    node: cst.CSTNode  # where it is made
    what: str  # what it is, for the evidence


@dataclass(frozen=True)
class Placement:
    decision: Decision
    # (node, what it shows) from the value to the move or factory that placed it.
    steps: tuple[tuple[cst.CSTNode, str], ...]


@dataclass(frozen=True)
class Where:
    """Where an expression is read: the module, the function (None at module level) and,
    in a method, its class and the name of its ``self``. ``arguments``: a function reached
    through a call reads its parameters as the call's arguments, read where the call is."""

    module: cst.Module
    function: cst.FunctionDef | None = None
    klass: cst.ClassDef | None = None
    self_name: str | None = None
    arguments: dict = field(default_factory=dict, compare=False, hash=False)  # name -> (expr, Where)
    caller: Where | None = None


def disagree(a: Decision, b: Decision) -> bool:
    """The two decisions can pick different devices in one run."""
    return frozenset({a.kind, b.kind}) in _DISAGREE


def where_of(ctx: FileContext) -> Where:
    """The place the traversal is at."""
    function = ctx.function
    method = ctx.method
    if method is not None and method[1] is function:
        return Where(ctx.ancestors[0], function, method[0].node, method[2])
    return Where(ctx.ancestors[0], function)


def _params(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def is_device_parameter(name: str) -> bool:
    return name == "map_location" or "device" in conditions.words(name)


def _option(expr: cst.BaseExpression) -> bool:
    """``args.device``, ``self.opt.cuda``, ``cfg.MODEL.DEVICE``: an attribute of an options object."""
    names = (dotted_name(expr) or "").split(".")
    if names and names[0] == "self":
        names = names[1:]
    return len(names) >= 2 and names[0] in CONFIG_ROOTS


def _method(ctx: FileContext, where: Where, name: str) -> tuple[cst.FunctionDef, Where] | None:
    """The function a call of ``name`` (``helper`` or ``self.helper``) runs, and where its body reads."""
    if name.startswith("self."):
        if where.klass is None or name.count(".") != 1:
            return None
        for statement in where.klass.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name[5:] and statement.params.params:
                return statement, Where(where.module, statement, where.klass, statement.params.params[0].name.value)
        return None
    function = _functions(ctx, where.module).get(name)
    return (function, Where(where.module, function)) if function is not None else None


def _functions(ctx: FileContext, module: cst.Module) -> dict[str, cst.FunctionDef]:
    """The module's top-level functions by name (read once per file)."""
    return ctx.once(("decisions: functions",), lambda: {
        s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)})


def _called(call: cst.Call, function: cst.FunctionDef, inner: Where, outer: Where) -> Where:
    """``inner`` with the function's parameters bound to the call's arguments."""
    arguments = {}
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for param, arg in zip(function.params.params[1 if inner.self_name else 0:], positional):
        arguments[param.name.value] = (arg.value, outer)
    for arg in call.args:
        if arg.keyword is not None:
            arguments[arg.keyword.value] = (arg.value, outer)
    return Where(inner.module, inner.function, inner.klass, inner.self_name, arguments, outer)


def _returns(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Return) and node.value is not None:
            found.append(node.value)
        return not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) or node is function

    tree.walk(function, enter)
    return found


def _attribute_sites(ctx: FileContext, klass: cst.ClassDef) -> dict[str, list[tuple[cst.BaseExpression, Where]]]:
    """``self.<attr> = value`` in the class's methods: attr -> [(value, where it is read)]."""

    def compute():
        sites: dict[str, list] = {}
        module = ctx.ancestors[0]
        for method in klass.body.body:
            if not isinstance(method, cst.FunctionDef) or not method.params.params:
                continue
            self_name = method.params.params[0].name.value
            where = Where(module, method, klass, self_name)
            for assign in tree.collect(method, cst.Assign, skip=(cst.Lambda,)):
                if len(assign.targets) != 1:
                    continue
                target = assign.targets[0].target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) \
                        and target.value.value == self_name:
                    sites.setdefault(target.attr.value, []).append((assign.value, where))
        return sites

    return ctx.once(("decisions: attributes", id(klass)), compute)


def _name_sites(ctx: FileContext, name: str, where: Where):
    """The values a name read at ``where`` is bound to: [(value, where)], a parameter
    (``("param", Param)``), or None when some binding is not a plain assignment."""
    scopes = [where] if where.function is None else [where, Where(where.module)]
    for scope in scopes:
        node = scope.function or scope.module
        sites = ctx.bindings(node).get(name)
        if not sites:
            continue
        if scope.function is not None:
            param = next((p for p in _params(scope.function) if p.name.value == name), None)
            if param is not None:
                return "param", param
        if all(_plain(s) for s in sites):
            return [(s.value, scope) for s in sites]
        return None
    return None


def _plain(site: cst.CSTNode) -> bool:
    """A plain assignment: to a name, or unpacked into names (``_, pred = torch.max(out, 1)``:
    each element is where the value is)."""
    if not isinstance(site, cst.Assign) or len(site.targets) != 1:
        return False
    target = site.targets[0].target
    return isinstance(target, cst.Name) or isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(e.value, cst.Name) and not isinstance(e, cst.StarredElement) for e in target.elements)


def _reassigned(ctx: FileContext, name: str, where: Where) -> list[tuple[cst.BaseExpression, Where]]:
    """The values a function assigns to its parameter ``name`` by plain assignments (none
    when some other statement binds it too)."""
    own = {id(p.name) for p in _params(where.function) if p.name.value == name}
    sites = [s for s in ctx.bindings(where.function).get(name, ()) if id(s) not in own]
    if not all(_plain(s) for s in sites):
        return []
    return [(s.value, where) for s in sites]


def _same(found: list) -> object | None:
    """The first answer when every answer is known and of one kind."""
    if not found or any(f is None for f in found):
        return None
    kinds = {f.kind if isinstance(f, Decision) else f.decision.kind for f in found}
    return found[0] if len(kinds) == 1 else None


def decision_of(ctx: FileContext, expr: cst.BaseExpression | None, where: Where, depth: int = 0) -> Decision | None:
    """Who picks the device ``expr`` names, read at ``where``; None when it follows a value
    (``x.device``), names the CPU, or is out of sight."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        if isinstance(value, str) and value.startswith("cuda:") and value[5:].isdigit():
            return Decision(FIXED_GPU, expr, f"`{value}` is one GPU in every process")
        if value == "cuda":
            return Decision(CURRENT_GPU, expr, '`"cuda"` is the current GPU')
        return None
    if isinstance(expr, cst.Integer):
        return Decision(FIXED_GPU, expr, f"GPU {expr.value} in every process")
    if isinstance(expr, cst.FormattedString):
        names = " ".join(code_of(p.expression) for p in expr.parts if isinstance(p, cst.FormattedStringExpression))
        if conditions.words(names) & _RANK_WORDS:
            return Decision(RANK_GPU, expr, f"`{code_of(expr)}` is each process's own GPU")
        return None
    if isinstance(expr, cst.IfExp):
        who = _test_kind(ctx, expr.test, where, depth + 1)
        if who == MACHINE:
            return Decision(MACHINE, expr, f"the machine decides: `{code_of(expr.test)}`")
        if who == USER:
            return Decision(USER, expr, f"the user decides: `{code_of(expr.test)}`")
        return None
    if isinstance(expr, cst.Call):
        return _call_decision(ctx, expr, where, depth)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "device" and not _option(expr) and not (
                isinstance(expr.value, cst.Name) and expr.value.value == where.self_name):
            return None  # `x.device`: follows x
        imported = _imported_machine(ctx, expr)  # `config.DEVICE` of a project module, not an option
        if imported is not None:
            return imported
        if _option(expr):
            said = conditions.words(expr.attr.value)
            if said & _RANK_WORDS:
                return Decision(RANK_GPU, expr, f"`{code_of(expr)}` is each process's own GPU")
            if said & _DEVICE_WORDS:
                return Decision(USER, expr, f"the user decides: option `{code_of(expr)}`")
            return None
        if isinstance(expr.value, cst.Name) and expr.value.value == where.self_name and where.klass is not None:
            sites = _attribute_sites(ctx, where.klass).get(expr.attr.value, [])
            found = _same([decision_of(ctx, value, at, depth + 1) for value, at in sites])
            return found
        return None
    if isinstance(expr, cst.Name):
        return _name_decision(ctx, expr, where, depth)
    return None


def _other_module(ctx, expr: cst.BaseExpression, question: str) -> str | None:
    """The dotted name of the other project module whose ``expr`` (an imported name) the
    project index's ``question`` (``machine_device``, ``machine_mover``) answers yes for."""
    index = ctx.index
    qualified = ctx.qualified_name(expr) if index is not None and ctx.path != "-" else None
    if not qualified or "." not in qualified or qualified.startswith("torch."):
        return None
    module = getattr(index, question)(qualified, ctx.path)
    return module if module is not None and module != index.module_of(ctx.path) else None


def _imported_machine(ctx, expr: cst.BaseExpression) -> Decision | None:
    """A device another module of the project lets the machine alone pick (``from config
    import DEVICE``, ``config.DEVICE``, ``get_device()``)."""
    module = _other_module(ctx, expr, "machine_device")
    if module is None:
        return None
    return Decision(MACHINE, expr, f"`{code_of(expr)}` of module `{module}` is picked by the machine alone: "
                                   "`torch.cuda.is_available()` decides")


def _name_decision(ctx, expr: cst.Name, where: Where, depth: int) -> Decision | None:
    name = expr.value
    if name in where.arguments:
        value, at = where.arguments[name]
        return decision_of(ctx, value, at, depth + 1)
    sites = _name_sites(ctx, name, where)
    if sites is None:
        return _imported_machine(ctx, expr)
    if isinstance(sites, tuple):
        param = sites[1]
        words = conditions.words(name)
        if where.caller is not None:  # reached through a call that does not pass it: its default
            return decision_of(ctx, param.default, Where(where.module), depth + 1) if param.default else None
        if words & _RANK_WORDS:
            return Decision(RANK_GPU, param, f"`{name}` is each process's own GPU")
        if is_device_parameter(name):
            return Decision(USER, param, f"the caller decides: parameter `{name}` of `{where.function.name.value}`")
        return None
    found = _same([decision_of(ctx, value, at, depth + 1) for value, at in sites])
    if found is None:
        return None
    bound = next(s for s in ctx.bindings((sites[0][1].function or where.module)).get(name)
                 if isinstance(s, cst.Assign) and s.value is sites[0][0])
    at_import = " at import" if sites[0][1].function is None else ""
    return Decision(found.kind, bound, f"`{name}` is chosen here{at_import}; {found.what}")


def _call_decision(ctx, call: cst.Call, where: Where, depth: int) -> Decision | None:
    name = ctx.qualified_name(call.func) or dotted_name(call.func) or ""
    if name == "torch.device" or (name.endswith(".device") and name.startswith("torch")):
        args = [a for a in call.args if a.keyword is None or a.keyword.value in ("type", "index", "device")]
        if len(args) >= 2 and isinstance(args[0].value, cst.SimpleString):
            index = args[1].value
            if isinstance(index, cst.Integer):
                return Decision(FIXED_GPU, call, f"`{code_of(call)}` is one GPU in every process")
            if conditions.words(code_of(index)) & _RANK_WORDS:
                return Decision(RANK_GPU, call, f"`{code_of(call)}` is each process's own GPU")
            return decision_of(ctx, index, where, depth + 1)
        return decision_of(ctx, args[0].value, where, depth + 1) if args else None
    target = _method(ctx, where, name)
    if target is None:
        return _imported_machine(ctx, call.func) if not call.args else None
    function, inner = target
    found = _same([decision_of(ctx, value, _called(call, function, inner, where), depth + 1)
                   for value in ctx.once(("decisions: returns", id(function)), lambda: _returns(function))])
    if found is None:
        return None
    return Decision(found.kind, found.node, f"`{name}()` returns it; {found.what}")


def _test_kind(ctx, test: cst.BaseExpression, where: Where, depth: int) -> str | None:
    """Who a device choice's test reads: ``MACHINE`` (availability only), ``USER`` (an option
    or a parameter, with or without availability), or None."""
    if depth > _MAX_DEPTH:
        return None
    if conditions.machine_only(test):
        return MACHINE
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _test_kind(ctx, test.expression, where, depth + 1)
    if isinstance(test, cst.BooleanOperation):
        sides = {_test_kind(ctx, test.left, where, depth + 1), _test_kind(ctx, test.right, where, depth + 1)}
        return USER if USER in sides else (MACHINE if sides == {MACHINE} else None)
    if isinstance(test, cst.Comparison):
        return _test_kind(ctx, test.left, where, depth + 1)
    if isinstance(test, cst.Attribute):
        if _option(test):
            return USER
        if isinstance(test.value, cst.Name) and test.value.value == where.self_name and where.klass is not None:
            sites = _attribute_sites(ctx, where.klass).get(test.attr.value, [])
            kinds = {_test_kind(ctx, value, at, depth + 1) for value, at in sites}
            return kinds.pop() if len(kinds) == 1 else None
        return None
    if isinstance(test, cst.Name):
        if test.value in where.arguments:
            value, at = where.arguments[test.value]
            return _test_kind(ctx, value, at, depth + 1)
        sites = _name_sites(ctx, test.value, where)
        if isinstance(sites, tuple):
            return USER  # a parameter: the caller decides
        if sites:
            kinds = {_test_kind(ctx, value, at, depth + 1) for value, at in sites}
            return kinds.pop() if len(kinds) == 1 else None
    return None


def placement_of(ctx: FileContext, expr: cst.BaseExpression | None, where: Where,
                 depth: int = 0) -> Placement | None:
    """The decision that placed the value of ``expr`` read at ``where``, and the steps from
    the value to the move or factory; None when none is in sight. Each expression is
    followed once per place it is read from (a name bound several times, read through
    chains of rebindings, would otherwise be followed once per path)."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    memo = ctx.once(("decisions: placements",), dict)
    followed = memo["followed"] = 0 if depth == 0 else memo.get("followed", 0) + 1
    spent = memo["spent"] = memo.get("spent", 0) + 1
    if followed > _MAX_FOLLOWED or spent > _FOLLOWED_PER_LINE * max(ctx.source.count("\n"), 500):
        return None
    # a name is followed the same way wherever it is read in a scope (its bindings, not the read)
    what = ("name", expr.value) if isinstance(expr, cst.Name) else id(expr)
    key = (what, id(where.module), id(where.function), id(where.klass), where.self_name,
           id(where.arguments) if where.arguments else None)
    if key not in memo:  # (`where` is kept with the answer: its `arguments` stay alive, their id unique)
        memo[key] = (where, None)  # a value reached again while it is followed places nothing more
        memo[key] = (where, _placement_of(ctx, expr, where, depth))
    return memo[key][1]


def _placement_of(ctx: FileContext, expr: cst.BaseExpression, where: Where, depth: int) -> Placement | None:
    if isinstance(expr, cst.Call):
        return _call_placement(ctx, expr, where, depth)
    if isinstance(expr, cst.Name):
        if expr.value in where.arguments:
            value, at = where.arguments[expr.value]
            return placement_of(ctx, value, at, depth + 1)
        sites = _name_sites(ctx, expr.value, where)
        if isinstance(sites, tuple):  # a parameter: placed where the function moves it (`x = x.to(device)`)
            sites = _reassigned(ctx, expr.value, where)
        if sites is None:  # `for x in loader:` as well: only a move under an `if` can say where x is
            sites = _self_moves(ctx, expr.value, where)
        if not sites:
            return None
        found = [placement_of(ctx, value, at, depth + 1) for value, at in sites]
        if all(f is None for f in found):  # built unplaced: a module may be moved in place
            return _moved_in_place(ctx, expr.value, sites[0][1], depth)
        return _same(found) or _guarded_rebinding(expr.value, sites, found)
    if isinstance(expr, cst.Attribute):
        if isinstance(expr.value, cst.Name) and expr.value.value == where.self_name and where.klass is not None:
            sites = _attribute_sites(ctx, where.klass).get(expr.attr.value, [])
            return _same([placement_of(ctx, value, at, depth + 1) for value, at in sites])
        return None
    if isinstance(expr, cst.BinaryOperation):
        left = placement_of(ctx, expr.left, where, depth + 1)
        right = placement_of(ctx, expr.right, where, depth + 1)
        if left is not None and right is not None and disagree(left.decision, right.decision):
            return None  # a meeting of its own: reported there
        return left or right
    if isinstance(expr, cst.Subscript):
        return placement_of(ctx, expr.value, where, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return placement_of(ctx, expr.expression, where, depth + 1)
    if isinstance(expr, cst.DictComp):  # `{k: v.to(device) for k, v in batch.items()}`
        return placement_of(ctx, expr.value, where, depth + 1)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return placement_of(ctx, expr.elt, where, depth + 1)
    return None


def _device_argument(call: cst.Call, position: bool) -> cst.BaseExpression | None:
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
        if position and index == 0 and arg.keyword is None and not arg.star:
            return arg.value
    return None


def _call_placement(ctx, call: cst.Call, where: Where, depth: int) -> Placement | None:
    func = call.func
    imported = _imported_mover(ctx, call)
    if imported is not None:
        return imported
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in ("to", "cuda"):
            device = _device_argument(call, position=True)
            decision = decision_of(ctx, device, where, depth + 1) if device is not None else None
            if device is None and method == "cuda":
                decision = Decision(CURRENT_GPU, call, "`.cuda()` puts it on the current GPU")
            if decision is not None and decision.kind == CURRENT_GPU:
                decision = _guard_decision(ctx, call, where, depth) or decision
            if decision is None:
                return None
            return Placement(decision, ((call, f"`{code_of(call)}` places the value there"),))
        if method not in _NOT_FOLLOWING and not (
                isinstance(func.value, cst.Name) and func.value.value == where.self_name):
            name = ctx.qualified_name(func) or ""
            if not name.startswith("torch."):  # `x.float()`, `self.mean.unsqueeze(0)`: where the receiver is
                return placement_of(ctx, func.value, where, depth + 1)
    name = ctx.qualified_name(func) or dotted_name(func) or ""
    if name.startswith("torch."):
        device = _device_argument(call, position=False)
        if device is None:  # `torch.softmax(out, 1)`: computed where its tensors are
            return _from_inputs(ctx, call, where, depth, f"`{code_of(call.func)}(...)`")
        decision = decision_of(ctx, device, where, depth + 1)
        if decision is not None:
            return Placement(decision, ((call, f"`{code_of(call.func)}(...)` builds the value there"),))
        return None
    target = _method(ctx, where, name)
    if target is None:
        if isinstance(func, (cst.Name, cst.Attribute)):
            # a placed module's output: where the module is (or the call fails there)
            module = placement_of(ctx, func, where, depth + 1)
            if module is not None and not _moved_back(ctx, func, where):
                return Placement(module.decision, ((call, f"`{code_of(func)}` computes it"), *module.steps))
            kind = ctx.value_of(func).kind
            if kind is Kind.MODULE or (kind is Kind.UNKNOWN and ctx.qualified_name(func) is None
                                       and _bound_here(ctx, func, where)):
                # a module (or a model handed in) computes where its inputs are; not a
                # function a star import brings, whose body decides
                return _from_inputs(ctx, call, where, depth, f"`{code_of(func)}`")
        return None
    function, inner = target
    moved = _moves_when_available(ctx, function)
    if moved is not None:
        test, move = moved
        decision = Decision(MACHINE, test, f"the machine decides: `{name}` moves to CUDA whenever "
                                           f"`{code_of(test)}`")
        return Placement(decision, ((call, f"`{name}(...)` places the value there"),
                                    (move, "this move runs whenever CUDA is present")))
    bound = _called(call, function, inner, where)
    returned = ctx.once(("decisions: returns", id(function)), lambda: _returns(function))
    found = _same([placement_of(ctx, value, bound, depth + 1) for value in returned])
    if found is None:
        return None
    return Placement(found.decision, ((call, f"`{name}(...)` returns the value"), *found.steps))


def _guards(ctx, scope: cst.CSTNode) -> dict[int, cst.BaseExpression]:
    """Each call of ``scope`` that an ``if`` body holds -> the innermost such ``if``'s test."""

    def compute():
        found: dict[int, cst.BaseExpression] = {}
        for branch in tree.collect(scope, cst.If, skip=(cst.Lambda,)):  # pre-order: inner ones last
            for call in tree.collect(branch.body, cst.Call, skip=(cst.Lambda, cst.FunctionDef)):
                found[id(call)] = branch.test
        return found

    return ctx.once(("decisions: guards", id(scope)), compute)


def _guard_decision(ctx, call: cst.Call, where: Where, depth: int) -> Decision | None:
    """A move to CUDA only where an ``if`` says so: the machine decides under
    ``if torch.cuda.is_available():``, the user under ``if args.cuda:`` (the value stays on
    the CPU otherwise); ``if config.FLIP_TEST:`` is about something else."""
    test = _guards(ctx, where.function or where.module).get(id(call))
    if test is None or isinstance(test, cst.UnaryOperation) or "cpu" in conditions.words(code_of(test)):
        return None
    kind = _test_kind(ctx, test, where, depth + 1)
    if kind == MACHINE and conditions.implies(test) is conditions.ACCELERATOR:
        return Decision(MACHINE, test, f"the machine decides: `{code_of(test)}` moves it to CUDA")
    if kind == USER and conditions.words(code_of(test)) & _DEVICE_WORDS:  # not a feature flag
        return Decision(USER, test, f"the user decides: `{code_of(test)}` moves it to CUDA")
    return None


def _self_move(value: cst.BaseExpression, name: str) -> bool:
    """``x.cuda()``, ``x.to(device)``: ``name`` moved and bound again."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
        and value.func.attr.value in ("to", "cuda") and isinstance(value.func.value, cst.Name) \
        and value.func.value.value == name


def _self_moves(ctx, name: str, where: Where) -> list[tuple[cst.BaseExpression, Where]] | None:
    """The ``x = x.cuda()`` bindings of ``name`` in the scope, with a None for each binding of
    another shape (a loop's target), or None when there is no such move."""
    node = where.function or where.module
    sites = ctx.bindings(node).get(name) or ()
    moves = [(s.value, where) for s in sites if _plain(s) and _self_move(s.value, name)]
    if not moves:
        return None
    return moves + [(None, where) for s in sites if not (_plain(s) and _self_move(s.value, name))]


def _guarded_rebinding(name: str, sites: list, found: list) -> Placement | None:
    """``x = batch`` then ``if args.cuda: x = x.cuda()``: where the guard's decision puts x
    (the CPU when it does not move it)."""
    moved = [f for (value, _), f in zip(sites, found) if f is not None and _self_move(value, name)]
    if not moved or len(moved) != sum(f is not None for f in found) \
            or any(f.decision.kind not in (MACHINE, USER) for f in moved):
        return None
    return _same(moved)


def _moved_in_place(ctx, name: str, where: Where, depth: int) -> Placement | None:
    """``model.cuda()`` / ``model.to(device)`` as a statement of the scope that binds
    ``model`` (``where``): modules move in place."""
    scope = where.function or where.module
    moves = ctx.once(("decisions: moves in place", id(scope)), lambda: _in_place_moves(scope))
    calls = moves.get(name)
    if not calls:
        return None
    found = _same([_call_placement(ctx, call, where, depth + 1) for call in calls])
    if found is None:
        return None
    return Placement(found.decision, ((calls[0], f"`{code_of(calls[0])}` moves `{name}` in place"),
                                      *found.steps[1:]))


def _in_place_moves(scope: cst.Module | cst.FunctionDef) -> dict[str, list[cst.Call]]:
    moves: dict[str, list[cst.Call]] = {}
    body = scope if isinstance(scope, cst.Module) else scope.body
    for statement in tree.collect(body, cst.Expr, skip=(cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        call = statement.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in (
                "to", "cuda") and isinstance(call.func.value, cst.Name):
            moves.setdefault(call.func.value.value, []).append(call)
    return moves


def _moved_back(ctx, module: cst.BaseExpression, where: Where) -> bool:
    """The code moves ``module`` (a name or ``self.x``) to the CPU somewhere in the scope
    where it is read (``dec.cpu()`` before plotting): where it computes depends on the
    order, which a placement does not follow."""
    scope = where.function or where.module
    moved = ctx.once(("decisions: moved to the CPU", id(scope)), lambda: {
        dotted_name(call.func.value) for call in tree.collect(scope, cst.Call)
        if isinstance(call.func, cst.Attribute) and moves_to_cpu(call)})
    name = dotted_name(module)
    return name is not None and name in moved


def _bound_here(ctx, func: cst.BaseExpression, where: Where) -> bool:
    """``func`` is an attribute (``self.net``) or a name the file binds, in the function
    or at the top level (a parameter, an assignment): not one a star import may bring."""
    if not isinstance(func, cst.Name):
        return True
    scopes = [s for s in (where.function, where.module) if s is not None]
    return any(func.value in ctx.bindings(scope) for scope in scopes)


def _from_inputs(ctx, call: cst.Call, where: Where, depth: int, what: str) -> Placement | None:
    """Where a computation puts its result: where its first placed positional input is."""
    for arg in call.args:
        placed = placement_of(ctx, arg.value, where, depth + 1) if arg.keyword is None else None
        if placed is not None:
            return Placement(placed.decision, ((call, f"{what} computes it from an input placed there"),
                                               *placed.steps))
    return None


def _imported_mover(ctx, call: cst.Call) -> Placement | None:
    """A call of another project module's function that moves what it is given to CUDA
    whenever the machine has it (``from utils import to_var``)."""
    module = _other_module(ctx, call.func, "machine_mover")
    if module is None:
        return None
    decision = Decision(MACHINE, call, f"the machine decides: `{code_of(call.func)}` of module `{module}` moves "
                                       "to CUDA whenever `torch.cuda.is_available()`")
    return Placement(decision, ((call, f"`{code_of(call.func)}(...)` places the value there"),))


def _moves_when_available(ctx, function: cst.FunctionDef) -> tuple[cst.BaseExpression, cst.Call] | None:
    """``if torch.cuda.is_available(): x = x.cuda()`` (or ``.to("cuda")``) in the function: a
    helper that puts what it is given on CUDA whenever the machine has it."""

    def compute():
        for branch in tree.collect(function, cst.If, skip=(cst.Lambda,)):
            if not conditions.machine_only(branch.test) or conditions.implies(branch.test) is not conditions.ACCELERATOR:
                continue
            for call in tree.collect(branch.body, cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute):
                    continue
                if func.attr.value == "cuda" and not call.args:
                    return branch.test, call
                device = _device_argument(call, position=True) if func.attr.value == "to" else None
                if isinstance(device, cst.SimpleString) and device.evaluated_value == "cuda":
                    return branch.test, call
        return None

    return ctx.once(("decisions: moves when available", id(function)), compute)


def passed(ctx: FileContext, param: cst.Param, module: cst.Module) -> list[Decision | None]:
    """What the file's calls pass for ``param`` of the function that declares it (a function of
    the module, or the ``__init__`` of a class of the module, called by the class's name): one
    answer per call, None where the call passes nothing known (or nothing, and the default
    is unknown). Empty when the file never calls it."""

    def compute():
        owner = _declaring(module, param)
        if owner is None:
            return []
        function, name, skip = owner
        index = next((i for i, p in enumerate(function.params.params) if p is param), None)
        found = []
        calls = ctx.once(("decisions: calls by name",), lambda: _calls_by_name(module))
        for call in calls.get(name, ()):
            where = Where(module)
            value = next((a.value for a in call.args if a.keyword is not None
                          and a.keyword.value == param.name.value), None)
            if value is None and index is not None:
                positional = [a for a in call.args if a.keyword is None and not a.star]
                if len(positional) > index - skip >= 0:
                    value = positional[index - skip].value
            value = value if value is not None else param.default
            found.append(decision_of(ctx, value, where) if value is not None else None)
        return found

    return ctx.once(("decisions: passed", id(param)), compute)


def _declaring(module: cst.Module, param: cst.Param) -> tuple[cst.FunctionDef, str, int] | None:
    """The function declaring ``param``, the name it is called by, and how many leading
    parameters a call does not pass (``self``)."""
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and any(p is param for p in _params(statement)):
            return statement, statement.name.value, 0
        if isinstance(statement, cst.ClassDef):
            for method in statement.body.body:
                if isinstance(method, cst.FunctionDef) and method.name.value == "__init__" and any(
                        p is param for p in _params(method)):
                    return method, statement.name.value, 1
    return None


def _calls_by_name(module: cst.Module) -> dict[str, list[cst.Call]]:
    calls: dict[str, list[cst.Call]] = {}
    for call in tree.collect(module, cst.Call):
        name = dotted_name(call.func)
        if name is not None:
            calls.setdefault(name, []).append(call)
    return calls
