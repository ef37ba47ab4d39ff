"""Which function of the project a call runs, so a value handed to it can be followed inside.

``uses.py`` follows a CPU tensor through one function; when the tensor is handed to a
call, whether it meets the module's tensors is decided by the code that receives it. A
rotary-embedding submodule that moves the positions it is given
(``frame_indices.to(device)``), or a parameterless ``Timesteps`` projection whose result
the caller moves, is harmless; only reading the callee tells. This module finds the callee:

- ``self.method(...)``: a method of the same class;
- ``self.layer(...)`` where the class assigns ``self.layer = Layer(...)``: ``Layer.forward``;
- ``helper(...)`` / ``module.helper(...)``: a function of this file, or of a project file
  this file imports from (found with the project index, parsed with LibCST on demand).

Code in another file is followed one file deep: from there, only calls into that same
file are resolved. The cache key of a file's findings includes the digests of the files it
imports from (``ProjectIndex.imported_digest``), and nothing further is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.classes import methods, self_attribute
from torchdev_lint.analysis.conditions import is_main_guard
from torchdev_lint.analysis.guards import code_of as code
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.project_index import regular_file_bytes

_PARSED: dict[str, tuple[str, cst.Module | None]] = {}  # path -> (digest, tree)
_PARSED_LIMIT = 32


@dataclass
class Target:
    """The function a call runs: skip its first parameter when ``bound`` (``self``)."""

    function: cst.FunctionDef
    bound: bool
    callees: Callees  # resolves the calls made inside it
    klass: cst.ClassDef | None


@dataclass
class Caller:
    """A call of a method, made in ``function`` (a method of ``klass``)."""

    function: cst.FunctionDef
    klass: cst.ClassDef
    call: cst.Call
    callees: Callees


class Callees:
    """Resolves calls made in one file (``module``, at ``path``).

    ``qualify`` gives the qualified name of an expression as that file's imports bind it;
    ``index`` is the project index (None: calls into other files are not followed);
    ``foreign`` is False for a file reached from another one (it is not left again)."""

    def __init__(self, module: cst.Module, path: str, qualify, index, foreign: bool = True) -> None:
        self.module = module
        self.path = path
        self.qualify = qualify
        self.index = index
        self.foreign = foreign
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        for statement in module.body:
            if isinstance(statement, cst.FunctionDef):
                self.functions[statement.name.value] = statement
            elif isinstance(statement, cst.ClassDef):
                self.classes[statement.name.value] = statement
        self.verdicts: dict[tuple[int, str], str] = {}  # what a callee does with a parameter
        self._others: dict[str, Callees | None] = {}  # resolvers of the files reached
        self._callers: dict[int, list[Caller] | None] = {}
        self._all_classes: list[cst.ClassDef] | None = None

    def target(self, call: cst.Call, klass: cst.ClassDef | None, self_name: str | None) -> Target | None:
        func = call.func
        if (
            klass is not None and self_name is not None and isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name) and func.value.value == self_name
        ):
            return self._member(klass, func.attr.value)
        if (  # `self.<attr>.<method>(...)`: a method of the submodule's class
            klass is not None and self_name is not None and isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name)
            and func.value.value.value == self_name
        ):
            built = _assigned_calls(klass, func.value.attr.value)
            return self._method_of(built[0].func, (func.attr.value,)) if len(built) == 1 else None
        if isinstance(func, cst.Name) and func.value in self.functions:
            return Target(self.functions[func.value], False, self, None)
        qualified = self.qualify(func)
        found = self._foreign(qualified) if qualified else None
        if found is None:
            return None
        callees, name = found
        function = callees.functions.get(name)
        return Target(function, False, callees, None) if function is not None else None

    def classes_of_file(self) -> list[cst.ClassDef]:
        """Every class of the file, nested ones included (walked once)."""
        if self._all_classes is None:
            self._all_classes = _classes(self.module)
        return self._all_classes

    def callers(self, function: cst.FunctionDef, klass: cst.ClassDef | None) -> list[Caller] | None:
        """Every call the project makes of the method ``function`` of ``klass`` (see
        ``_find_callers``), remembered per method."""
        if id(function) not in self._callers:
            self._callers[id(function)] = self._find_callers(function, klass)
        return self._callers[id(function)]

    def _find_callers(self, function: cst.FunctionDef, klass: cst.ClassDef | None) -> list[Caller] | None:
        """Every call of the method ``function`` of ``klass`` that the project makes, so
        what it returns can be followed there; None when some may be out of sight.

        ``forward`` runs where a class of this file calls ``self.<attr>(...)`` of an
        attribute it assigns ``klass(...)`` (and nothing else, and uses only so); another
        method runs where ``klass`` calls ``self.<method>(...)``. Every mention of the
        attribute or method must be such a call. The class must be imported by no other
        file of the project (the index tells), unless it is hidden in a function or a
        script's main block, or (for a method other than ``forward``) no other file
        mentions an attribute of the method's name (``ProjectIndex.mentioned_elsewhere``);
        without an index a helper method's callers are taken to be the file's own, a
        ``forward``'s are unknown."""
        if klass is None or function not in klass.body.body:
            return None
        name = function.name.value
        imported = self.index.imported_from(self.path) if self.index is not None else None
        seen_elsewhere = imported is None or "*" in imported or klass.name.value in imported
        if seen_elsewhere and not _hidden(self.module, klass) and (
            name == "forward"
            or (self.index is not None and self.index.mentioned_elsewhere(name, self.path) is not False)
        ):
            return None  # other files may call it
        found: list[Caller] = []
        elsewhere = 0  # `.<name>` calls that run another class's method
        for other in self.classes_of_file():
            built = {attr: _assigned_calls(other, attr) for attr in _attributes_assigned(other)}
            holders = {  # `self.<attr> = klass(...)`
                attr for attr, calls in built.items() if [code(c.func) for c in calls] == [klass.name.value]
            }
            if name != "forward":
                for attr, calls in built.items():
                    held = _held_calls(other, attr, name) if attr not in holders and len(calls) == 1 else None
                    found_class = self._class_of(calls[0].func) if held else None
                    if found_class is not None and found_class[1] is not klass:
                        elsewhere += len(held)
                if other is not klass and any(
                    isinstance(m, cst.FunctionDef) and m.name.value == name for m in other.body.body
                ):
                    elsewhere += len(_self_calls(other, name) or ())
            if name == "forward":
                for attr in holders:
                    calls = _self_calls(other, attr)
                    if calls is None:
                        return None  # mentioned other than as a call: it may run anywhere
                    found.extend(Caller(method, other, call, self) for method, call in calls)
                continue
            calls = _self_calls(other, name) if other is klass else []
            for attr in holders:
                held = _held_calls(other, attr, name)
                calls = None if held is None or calls is None else calls + held
            if calls is None:
                return None
            found.extend(Caller(method, other, call, self) for method, call in calls)
        if name != "forward":
            if _mentions(self.module, name) != len(found) + elsewhere:
                return None  # `.<name>` also appears where we do not follow it
            if not found and not _hidden(self.module, klass):
                return None  # no caller here; other files may call it
            return found  # none at all: a method of a hidden class nobody calls
        return found or None  # a module nobody here calls is called out of sight

    def _member(self, klass: cst.ClassDef, name: str) -> Target | None:
        """``self.<name>(...)``: the class's own method, or the ``forward`` of the one
        submodule the class assigns to that attribute."""
        methods = {m.name.value: m for m in klass.body.body if isinstance(m, cst.FunctionDef)}
        if name in methods:
            method = methods[name]
            static = any(dotted_name(d.decorator) == "staticmethod" for d in method.decorators)
            return Target(method, not static, self, klass)
        built = _assigned_calls(klass, name)
        if len(built) != 1:
            return None  # never assigned a constructor call, or given different ones
        return self._method_of(built[0].func, ("forward",))

    def _class_of(self, func: cst.BaseExpression) -> tuple[Callees, cst.ClassDef] | None:
        """The class a constructor call's ``func`` names, in this file or one it imports."""
        if isinstance(func, cst.Name) and func.value in self.classes:
            return self, self.classes[func.value]
        if isinstance(func, cst.Name):  # a class nested in a function or block, named once
            named = [c for c in self.classes_of_file() if c.name.value == func.value]
            if len(named) == 1:
                return self, named[0]
        qualified = self.qualify(func)
        found = self._foreign(qualified) if qualified else None
        if found is None or found[1] not in found[0].classes:
            return None
        return found[0], found[0].classes[found[1]]

    def _method_of(self, func: cst.BaseExpression, names: tuple[str, ...]) -> Target | None:
        """The first of the methods ``names`` of the class ``func`` names."""
        found = self._class_of(func)
        if found is None:
            return None
        callees, other = found
        methods = {m.name.value: m for m in other.body.body if isinstance(m, cst.FunctionDef)}
        method = next((methods[n] for n in names if n in methods), None)
        return Target(method, True, callees, other) if method is not None else None

    def element(self, klass: cst.ClassDef | None, self_name: str | None, iterable: cst.BaseExpression) -> Target | None:
        """``forward`` of the modules of ``self.<attr>``, iterated: the class assigns it one
        ``nn.ModuleList`` of constructor calls of one class (a list, or a comprehension)."""
        if not (
            klass is not None and isinstance(iterable, cst.Attribute) and isinstance(iterable.value, cst.Name)
            and iterable.value.value == self_name
        ):
            return None
        built = _assigned_calls(klass, iterable.attr.value, whole=True)
        if len(built) != 1 or not (self.qualify(built[0].func) or "").endswith("ModuleList") or len(built[0].args) != 1:
            return None
        items = built[0].args[0].value
        if isinstance(items, cst.ListComp):
            made = [items.elt]
        elif isinstance(items, cst.List):
            made = [e.value for e in items.elements]
        else:
            return None
        if not made or not all(isinstance(m, cst.Call) for m in made) or len({code(m.func) for m in made}) != 1:
            return None
        return self._method_of(made[0].func, ("forward",))

    def handlers(self, call: cst.Call, klass: cst.ClassDef | None, self_name: str | None, keyword: str) -> list[Target]:
        """For ``self.<attr>(..., keyword=v)``: the objects the class gave the submodule's
        constructor (``Attention(processor=MyProcessor())``) whose ``__call__`` or
        ``forward`` takes ``keyword``."""
        func = call.func
        if not (
            klass is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value == self_name
        ):
            return []
        built = _assigned_calls(klass, func.attr.value, whole=True)
        if len(built) != 1:
            return []  # built in more than one way: which objects it holds is not one answer
        found = []
        for arg in built[0].args:
            if isinstance(arg.value, cst.Call):
                target = self._method_of(arg.value.func, ("__call__", "forward"))
                params = target.function.params if target is not None else None
                if params is not None and keyword in {p.name.value for p in [*params.params, *params.kwonly_params]}:
                    found.append(target)
        return found

    def _foreign(self, qualified: str) -> tuple[Callees, str] | None:
        """The resolver of the project file defining ``qualified``, and the name there."""
        if self.index is None or not self.foreign:
            return None
        located = self.index.locate(qualified, self.path)
        if located is None:
            return None
        facts, name = located
        if os.path.abspath(facts.path) == os.path.abspath(self.path):
            return self, name
        if facts.path not in self._others:
            self._others[facts.path] = self._other(facts)
        other = self._others[facts.path]
        return (other, name) if other is not None else None

    def _other(self, facts) -> Callees | None:
        module = _parse(facts.path, facts.digest)
        if module is None:
            return None

        def qualify(expr: cst.BaseExpression) -> str | None:
            dotted = dotted_name(expr)
            if dotted is None:
                return None
            head, _, rest = dotted.partition(".")
            base = facts.names.get(head)
            if base is None:  # defined there, or a builtin or local name
                defined = head in facts.classes or head in facts.returns or head in facts.defined
                base = f"{facts.name}.{head}" if defined else head
            return f"{base}.{rest}" if rest else base

        return Callees(module, facts.path, qualify, self.index, foreign=False)


def parameter_for(target: Target, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of ``target`` that receives ``arg`` of ``call``; None when it cannot
    be told (``*args`` before it, or it lands in ``*args``/``**kwargs``)."""
    params = target.function.params
    positional = [*params.posonly_params, *params.params]
    if target.bound:
        positional = positional[1:]
    if arg.keyword is not None:
        names = {p.name.value for p in [*params.params, *params.kwonly_params]}
        return arg.keyword.value if arg.keyword.value in names else None
    if arg.star:
        return None
    index = 0
    for other in call.args:
        if other is arg:
            break
        if other.star:
            return None
        if other.keyword is None:
            index += 1
    return positional[index].name.value if index < len(positional) else None


def _classes(module: cst.Module) -> list[cst.ClassDef]:
    """Every class of the file, nested ones included."""
    found: list[cst.ClassDef] = []
    tree.walk(module, lambda node: found.append(node) if isinstance(node, cst.ClassDef) else True)
    return found


def _attributes_assigned(klass: cst.ClassDef) -> set[str]:
    """The names of ``self.<attr> = ...`` targets in the class's methods."""
    names: set[str] = set()

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Attribute):
            names.add(node.target.attr.value)
        return True

    tree.walk(klass.body, enter)
    return names


def _self_calls(klass: cst.ClassDef, attr: str) -> list[tuple[cst.FunctionDef, cst.Call]] | None:
    """The ``self.<attr>(...)`` calls in the methods of ``klass``; None when a method
    mentions ``self.<attr>`` otherwise than by calling it or assigning it (it is handed
    on, so it may run anywhere)."""
    found: list[tuple[cst.FunctionDef, cst.Call]] = []
    for method, self_name in methods(klass):
        calls: list[cst.Call] = []
        others = 0

        def enter(node: cst.CSTNode) -> bool:
            nonlocal others
            if isinstance(node, cst.AssignTarget) and self_attribute(node.target, self_name) == attr:
                return False
            if isinstance(node, cst.Call) and self_attribute(node.func, self_name) == attr:
                calls.append(node)
                for child in tree.children(node):
                    if child is not node.func:
                        tree.walk(child, enter)
                return False
            if self_attribute(node, self_name) == attr:
                others += 1
            return True

        tree.walk(method.body, enter)
        if others:
            return None
        found.extend((method, call) for call in calls)
    return found


def _held_calls(klass: cst.ClassDef, attr: str, name: str) -> list[tuple[cst.FunctionDef, cst.Call]] | None:
    """The ``self.<attr>.<name>(...)`` calls in the methods of ``klass``; None when
    ``self.<attr>`` is handed on (only calls of it and of its methods are allowed)."""
    found: list[tuple[cst.FunctionDef, cst.Call]] = []
    for method, self_name in methods(klass):
        allowed: set[int] = set()
        bad = False

        def enter(node: cst.CSTNode) -> bool:
            nonlocal bad
            if isinstance(node, cst.AssignTarget) and self_attribute(node.target, self_name) == attr:
                return False
            if isinstance(node, cst.Call):
                func = node.func
                if self_attribute(func, self_name) == attr:
                    allowed.add(id(func))
                elif isinstance(func, cst.Attribute) and self_attribute(func.value, self_name) == attr:
                    allowed.add(id(func.value))
                    if func.attr.value == name:
                        found.append((method, node))
            elif self_attribute(node, self_name) == attr and id(node) not in allowed:
                bad = True
            return True

        tree.walk(method.body, enter)
        if bad:
            return None
    return found


def _mentions(module: cst.Module, name: str) -> int:
    """How many ``<x>.<name>`` attribute expressions the file holds."""
    count = 0

    def enter(node: cst.CSTNode) -> bool:
        nonlocal count
        if isinstance(node, cst.Attribute) and node.attr.value == name:
            count += 1
        return True

    tree.walk(module, enter)
    return count


def _hidden(module: cst.Module, klass: cst.ClassDef) -> bool:
    """Is ``klass`` out of other files' reach: defined in a function, or under
    ``if __name__ == "__main__":`` (importing the file does not run it)?"""
    parents: dict[int, cst.CSTNode] = {}

    def enter(node: cst.CSTNode) -> bool:
        for child in tree.children(node):
            parents[id(child)] = node
        return True

    tree.walk(module, enter)
    node = parents.get(id(klass))
    while node is not None:
        if isinstance(node, cst.FunctionDef) or (
            isinstance(node, cst.If) and is_main_guard(node.test)
        ):
            return True
        node = parents.get(id(node))
    return False


def _assigned_calls(klass: cst.ClassDef, attr: str, whole: bool = False) -> list[cst.Call]:
    """The distinct constructor calls a class assigns to ``self.<attr>``, told apart by
    what they call (by their whole code with ``whole``: their arguments matter); none when
    it also assigns something else there."""
    found: dict[str, cst.Call] = {}
    other = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal other
        if isinstance(node, cst.Assign):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and t.attr.value == attr and isinstance(t.value, cst.Name):
                    if isinstance(node.value, cst.Call):
                        found[code(node.value if whole else node.value.func)] = node.value
                    else:
                        other = True
            return False
        return not isinstance(node, cst.BaseExpression)

    tree.walk(klass.body, enter)
    return [] if other else list(found.values())


def _parse(path: str, digest: str) -> cst.Module | None:
    """The LibCST tree of a project file, parsed once per run and process."""
    cached = _PARSED.get(path)
    if cached is not None and cached[0] == digest:
        return cached[1]
    data = regular_file_bytes(path)
    try:
        module = cst.parse_module(data) if data is not None else None
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        module = None
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[path] = (digest, module)
    return module


def of_file(ctx, module: cst.Module | None) -> Callees | None:
    """The resolver of the file a rule visits (``module``, its tree)."""
    return Callees(module, ctx.path, ctx.qualified_name, ctx.index) if module is not None else None
