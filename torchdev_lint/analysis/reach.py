"""Which code of a file runs in the run that makes a CPU choice.

A CPU choice (``"cuda" if torch.cuda.is_available() else "cpu"``, a ``--no-cuda`` option)
shows that the file runs without CUDA, but only the code that runs in the same run runs
there: the function (or the module's top level) that makes the choice and the code that
uses it, the code that reads the name, attribute or option it binds, and everything those
name (call, build, hand on as a callback), down the file's own functions and classes, but
not what they name only in a branch that needs CUDA (``if torch.cuda.is_available(): main()``)
or that the file's constant flags rule out (``if evaluation: ... sys.exit(0)`` under
``evaluation = True`` leaves the training loop after it unrun). A
helper nothing there names runs where its other callers run (importers, out of this file),
not where this choice does: a hardcoded ``.cuda()`` in it is not shown to fail.

Scopes are the module's top level and each function; a method is reached through
``self.<name>``, or once its class is built on the path: the methods that run on their own
(``__init__``, ``forward``, a trainer's hooks) and those the path reads as an attribute
(``m.fit()``) of whatever object.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Callable, Sequence

import libcst as cst

from torchdev_lint.analysis import conditions
from torchdev_lint.analysis.guards import is_exit
from torchdev_lint.analysis.tree import children

# Methods that run without the code naming them once their class is built: Python's own
# (`__init__`, `__call__`, `__getitem__`), a module's `forward`, the hooks a trainer calls
# (Lightning's `training_step`, `configure_optimizers`, `on_train_epoch_end`...).
RUNS_ON_ITS_OWN = re.compile(r"__\w+__|forward|setup|teardown|prepare_data|backward|configure_\w+|\w+_step"
                              r"|\w+_dataloader|on_\w+|\w+_epoch_end|optimizer_zero_grad")
# Step: a node and what it shows, as ``Rule.report(evidence=...)`` takes it.
Step = tuple["cst.CSTNode", str]
# Who holds parsed options (`args = parser.parse_args()`, `opt`, `cfg`): `args.no_cuda`
# reads the `--no-cuda` choice.
OPTION_HOLDERS = frozenset({"args", "arg", "opt", "opts", "options", "flags", "FLAGS", "config", "cfg",
                             "hparams", "hp", "params"})
_PARSE = frozenset({"parse_args", "parse_known_args"})


# Nodes whose children may run only on some machines (a branch, code after an early exit), by
# class name: LibCST runs only once a file is parsed (``lazy.py``).
_BRANCHING = frozenset({"If", "IfExp", "While", "BooleanOperation", "Module", "IndentedBlock"})


@dataclass
class _Scope:
    node: cst.CSTNode  # a FunctionDef or the Module
    klass: cst.ClassDef | None = None  # for a method
    names: set[str] = field(default_factory=set)  # names it reads or binds
    self_attrs: set[str] = field(default_factory=set)  # `self.<name>` it uses
    attributes: set[str] = field(default_factory=set)  # `<name>.<attr>` it uses, as code
    attribute_names: set[str] = field(default_factory=set)  # the `<attr>` of every `x.<attr>` in it


@dataclass
class _Choice:
    step: Step
    scope: _Scope
    names: set[str] = field(default_factory=set)  # the module-level names it binds
    attributes: set[str] = field(default_factory=set)  # `args.device`, `args.no_cuda`: read as code
    whole_class: bool = False  # bound to `self.<name>`: the object carries it


class Reach:
    """The scopes of one file and how they name each other; ``path(scope)`` answers."""

    def __init__(self, module: cst.Module, is_choice: Callable[[cst.CSTNode], str | None],
                 needs_cuda: Callable[[cst.CSTNode, cst.CSTNode], bool] = lambda parent, child: False,
                 dies_without_cuda: Callable[[cst.FunctionDef, cst.ClassDef | None], bool] = lambda f, k: False,
                 ) -> None:
        """``needs_cuda(parent, child)``: ``child`` runs only where CUDA is (``if
        torch.cuda.is_available(): main()``), so nothing in it runs in a choice's CPU run.
        ``dies_without_cuda(function, its class)``: the function always runs code that needs
        CUDA, so a CPU choice made in it is no CPU run."""
        self.module = module
        self._needs_cuda = needs_cuda
        self._dies_without_cuda = dies_without_cuda
        self.scopes: dict[int, _Scope] = {}
        self.functions: dict[str, list[_Scope]] = {}  # plain functions by name
        self.methods: dict[int, dict[str, list[_Scope]]] = {}  # class -> name -> methods
        self.classes: dict[str, list[cst.ClassDef]] = {}
        self.owners: dict[str, list[cst.ClassDef]] = {}  # method name -> the classes defining it
        self.choices: list[_Choice] = []
        self.holders = set(OPTION_HOLDERS)
        self._flags: dict[str, bool] | None = None
        self._read(is_choice)
        self._paths: dict[int, dict[int, _Scope | None]] = {}

    def _read(self, is_choice) -> None:
        top = self.scopes[id(self.module)] = _Scope(self.module)
        stack: list[tuple[cst.CSTNode, _Scope, cst.ClassDef | None, tuple[cst.BaseExpression, ...]]] = [
            (self.module, top, None, ())]
        while stack:
            node, scope, klass, targets = stack.pop()
            kind = type(node)
            if kind is cst.FunctionDef:  # its name is a definition, not a use
                inner = self.scopes[id(node)] = _Scope(node, klass)
                if klass is not None:
                    self.methods.setdefault(id(klass), {}).setdefault(node.name.value, []).append(inner)
                    if klass not in self.owners.setdefault(node.name.value, []):
                        self.owners[node.name.value].append(klass)
                else:
                    self.functions.setdefault(node.name.value, []).append(inner)
                stack += [(child, inner, None, ()) for child in reversed(children(node)) if child is not node.name]
                continue
            if kind is cst.ClassDef:
                self.classes.setdefault(node.name.value, []).append(node)
                stack += [(child, scope, node, ()) for child in reversed(children(node)) if child is not node.name]
                continue
            if kind is cst.Name:
                scope.names.add(node.value)
            elif kind is cst.Arg and node.keyword is not None:  # `device="cuda:0"` names a parameter
                stack += [(child, scope, klass, targets) for child in reversed(children(node)) if child is not node.keyword]
                continue
            elif kind is cst.Attribute:
                scope.attribute_names.add(node.attr.value)
                owner = node.value.attr if isinstance(node.value, cst.Attribute) else node.value
                if isinstance(owner, cst.Name):  # `args.no_cuda`, `self.args.no_cuda`
                    if owner is node.value and owner.value in ("self", "cls"):
                        scope.self_attrs.add(node.attr.value)
                    scope.attributes.add(f"{owner.value}.{node.attr.value}")
            elif kind is cst.Assign or kind is cst.AnnAssign:
                targets = tuple(t.target for t in node.targets) if kind is cst.Assign else (node.target,)
                if isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute) \
                        and node.value.func.attr.value in _PARSE:
                    self.holders.update(t.value for t in targets if isinstance(t, cst.Name))
            if kind in (cst.IfExp, cst.If, cst.Call, cst.Assign):
                why = is_choice(node)
                if why is not None and not (scope.node is not self.module
                                            and self._dies_without_cuda(scope.node, scope.klass)):
                    self.choices.append(self._choice(node, why, scope, targets))
            below = children(node)
            if kind.__name__ in _BRANCHING:
                below = [child for child in self._run_by_flags(node, below) if not self._needs_cuda(node, child)]
            stack += [(child, scope, klass, targets) for child in reversed(below)]

    def _run_by_flags(self, node: cst.CSTNode, below: list[cst.CSTNode]) -> list[cst.CSTNode]:
        """The parts of ``node`` that the file's constant flags let run (``evaluation = True``
        at the top, set nowhere else): not the branch of ``if evaluation:`` the flag rules
        out, nor the statements after an ``if evaluation: ... sys.exit(0)``."""
        if self._flags is None:
            self._flags = {name: value.value == "True" for name, value in conditions.module_constants(self.module).items()
                           if isinstance(value, cst.Name) and value.value in ("True", "False")}
        if not self._flags:
            return below
        if isinstance(node, cst.If) and isinstance(node.test, cst.Name) and node.test.value in self._flags:
            holds = self._flags[node.test.value]
            return [child for child in below if not (child is node.body and not holds or child is node.orelse and holds)]
        for at, statement in enumerate(below):
            if isinstance(statement, cst.If) and isinstance(statement.test, cst.Name) \
                    and self._flags.get(statement.test.value) is True and isinstance(statement.body, cst.IndentedBlock) \
                    and statement.body.body and is_exit(statement.body.body[-1]):
                return below[:at + 1]
        return below

    def _choice(self, node: cst.CSTNode, why: str, scope: _Scope, targets) -> _Choice:
        choice = _Choice((node, why), scope)
        if isinstance(node, cst.If):  # `if torch.cuda.is_available(): device = ... else: device = "cpu"`
            targets = tuple(t.target for assign in _assignments(node) for t in assign.targets)
        if isinstance(node, cst.Call):  # `add_argument("--no-cuda", ...)`: read as `args.no_cuda`
            for dest in _option_dests(node):
                choice.attributes.update(f"{holder}.{dest}" for holder in self.holders)
        for target in targets:
            if isinstance(target, cst.Name) and scope.node is self.module:
                choice.names.add(target.value)
            elif isinstance(target, cst.Attribute):
                if isinstance(target.value, cst.Name) and target.value.value == "self":
                    choice.whole_class = True
                else:  # `args.device = ...`, `self.opt.device = ...`: read as `args.device`, `opt.device`
                    owner = target.value.attr if isinstance(target.value, cst.Attribute) else target.value
                    if isinstance(owner, cst.Name):
                        choice.attributes.add(f"{owner.value}.{target.attr.value}")
        return choice

    def _seeds(self, choice: _Choice) -> list[_Scope]:
        """The scopes that run the choice or read what it binds, and, up the file's calls,
        the scopes that run those: the run the choice is made in."""
        seeds = [choice.scope]
        if choice.whole_class and choice.scope.klass is not None:
            seeds += [s for group in self.methods.get(id(choice.scope.klass), {}).values() for s in group]
        for scope in self.scopes.values():
            if choice.names & scope.names or choice.attributes & scope.attributes:
                seeds.append(scope)
        # up: who names a seed runs it, and runs what it returns
        todo, seen = list(seeds), {id(s.node) for s in seeds}
        while todo:
            scope = todo.pop()
            for caller in self._callers(scope):
                if id(caller.node) not in seen:
                    seen.add(id(caller.node))
                    seeds.append(caller)
                    todo.append(caller)
        return seeds

    def _callers(self, scope: _Scope) -> list[_Scope]:
        node = scope.node
        if node is self.module:
            return []
        name = node.name.value
        if scope.klass is not None:  # a method: its class's other methods by `self.name`, and its builders
            methods = [s for group in self.methods.get(id(scope.klass), {}).values() for s in group]
            found = [s for s in methods if name in s.self_attrs]
            built = scope.klass.name.value
            return found + [s for s in self.scopes.values() if built in s.names and s.klass is not scope.klass]
        return [s for s in self.scopes.values() if name in s.names and s is not scope]

    def _callees(self, scope: _Scope) -> list[_Scope]:
        """The functions ``scope`` names and the methods of its own class it uses by
        ``self.<name>``; the classes it builds run what ``_reached`` says."""
        found: list[_Scope] = []
        for name in scope.names:
            found += self.functions.get(name, ())
        if scope.klass is not None:
            own = self.methods.get(id(scope.klass), {})
            for name in scope.self_attrs:
                found += own.get(name, ())
        return found

    def path(self, node: cst.CSTNode) -> tuple[Step, ...] | None:
        """How a choice of the file reaches the scope ``node`` (a FunctionDef or the Module):
        the choice, and the chain of scopes that name each other down to it; None when no
        choice's run reaches it."""
        for choice in self.choices:
            key = id(choice.step[0])
            if key not in self._paths:
                self._paths[key] = self._reached(choice)
            reached = self._paths[key]
            if id(node) in reached:
                return (choice.step, *self._chain(reached, node))
        return None

    def _reached(self, choice: _Choice) -> dict[int, _Scope | None]:
        """The scopes the choice's run reaches, each with the scope that reaches it. Building
        a class runs what runs on its own (``__init__``, ``forward``, a framework's hooks); its
        other methods run where a reached scope uses an attribute of that name (``m.fit()``),
        whichever object it is read from."""
        reached: dict[int, _Scope | None] = {}
        todo = []
        built: set[int] = set()
        used: dict[str, _Scope] = {}  # attribute names the reached scopes read, and who reads each

        def reach(callee: _Scope, by: _Scope | None) -> None:
            if id(callee.node) not in reached:
                reached[id(callee.node)] = by
                todo.append(callee)

        for seed in self._seeds(choice):
            reach(seed, None)
        while todo:
            scope = todo.pop(0)
            for callee in self._callees(scope):
                reach(callee, scope)
            for name in scope.attribute_names:
                if name in used:
                    continue
                used[name] = scope
                for klass in self.owners.get(name, ()):
                    if id(klass) in built:
                        for method in self.methods[id(klass)][name]:
                            reach(method, scope)
            for name in scope.names:
                for klass in self.classes.get(name, ()):
                    if id(klass) in built:
                        continue
                    built.add(id(klass))
                    for method_name, group in self.methods.get(id(klass), {}).items():
                        if RUNS_ON_ITS_OWN.fullmatch(method_name) or method_name in used:
                            for method in group:
                                reach(method, scope if RUNS_ON_ITS_OWN.fullmatch(method_name) else used[method_name])
        return reached

    def _chain(self, reached: dict[int, _Scope | None], node: cst.CSTNode) -> list[Step]:
        steps: list[Step] = []
        scope = self.scopes[id(node)]
        while reached.get(id(scope.node)) is not None and len(steps) < 8:
            by = reached[id(scope.node)]
            where = "the top level" if by.node is self.module else f"`{by.node.name.value}`"
            steps.append((scope.node, f"`{scope.node.name.value}` runs there: {where} uses it"))
            scope = by
        return steps[::-1]


def innermost_scope(ancestors: Sequence[cst.CSTNode]) -> cst.CSTNode:
    """The function the innermost node of ``ancestors`` runs in, or the module."""
    return next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), ancestors[0])


def _assignments(node: cst.If) -> list[cst.Assign]:
    found = []
    for block in (node.body, node.orelse):
        while isinstance(block, (cst.If, cst.Else)):
            block = block.body
        if isinstance(block, cst.IndentedBlock):
            found += [small for line in block.body if isinstance(line, cst.SimpleStatementLine)
                      for small in line.body if isinstance(small, cst.Assign)]
    return found


def _option_dests(call: cst.Call) -> list[str]:
    """Where ``add_argument`` stores its option: ``dest=``, else the long name with ``-``
    as ``_`` (``--no-cuda`` -> ``no_cuda``)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
            return [str(arg.value.evaluated_value)]
    names = [str(a.value.evaluated_value) for a in call.args
             if a.keyword is None and isinstance(a.value, cst.SimpleString)]
    longs = [n for n in names if n.startswith("--")] or names
    return [longs[0].lstrip("-").replace("-", "_")] if longs else []
