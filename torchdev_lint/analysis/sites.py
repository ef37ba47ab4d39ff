"""Where each rule could report, read from the stdlib tree that the project index parses
anyway: a file with no site of any rule in the run is never parsed by LibCST, the dearest
step of a check (most of a project's bytes hold no finding at all).

A site is a place where a rule's finding could be, never a finding: each test here accepts
everything its rule could flag (a superset of what the shared analysis in ``context.py``
would take for a tensor, an optimizer or a value on an accelerator), so skipping a file
without sites changes no finding, certain or possible. A rule names its kind of site in
``Rule.sites``.
"""

from __future__ import annotations

import ast
import sys

from torchdev_lint import pyast
from torchdev_lint.analysis import kinds

CUDA_STRING = "cuda-string"  # a string naming a CUDA device, or `current_device()`, read as a device
DISCARDED_MOVE = "discarded-move"  # `x.to(d)` as a statement, or a dropped comprehension of moves
LOADER_CALL = "loader-call"  # `torch.load` given no `map_location`
OPTIMIZER_CALL = "optimizer-call"  # a call that may build an optimizer
TENSOR_ATTRIBUTE = "tensor-attribute"  # a module's method storing what may be a tensor on `self`
FACTORY_IN_METHOD = "factory-in-method"  # a torch factory without `device=` in a module's method
NUMPY_CONVERSION = "numpy-conversion"  # a value that may be on an accelerator handed to NumPy
# A method's sites also name the classes around it, as `factory-in-method@Net`: a rule whose
# certain findings need the project to move (or build) modules of the class asks about those
# (`Rule.may_be_certain`).
IN_CLASS = "@"

RESULT_MOVES = frozenset({"to", "cuda", "cpu"})  # moves that return the moved tensor
_FACTORIES = frozenset(f"torch.{name}" for name in kinds.NEW_TENSOR_FACTORIES)
_STEP_METHODS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})
# Builtins that never return a tensor.
_PLAIN_BUILTINS = frozenset(
    "int float str bool len range list dict tuple set frozenset sorted isinstance hasattr type repr".split()
)
_NOT_TENSOR_COMPARISONS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
# Libraries whose results the analysis never takes for tensors (and whose names no project
# gives a module of its own): the standard library and common scientific ones.
_LIBRARIES = frozenset(sys.stdlib_module_names) - {"copy"} | frozenset(
    "numpy PIL cv2 yaml tensorflow pandas scipy matplotlib sklearn tqdm einops h5py skimage imageio "
    "wandb tensorboardX omegaconf hydra".split())
# Expressions that are never a tensor of their own, nor on an accelerator.
_PLAIN_VALUES = frozenset({
    ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Lambda,
})
_NEVER_TENSORS = _PLAIN_VALUES | {
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp, ast.Await, ast.Yield,
    ast.YieldFrom, ast.NamedExpr,
}
_DEPTH = 40  # expressions followed into one another before giving up (and answering "maybe")
_BUDGET = 20_000  # expressions one file's questions may visit (each more answers "maybe")


_UNKNOWN = None  # bound by a form not followed here (`global`, a walrus, a match): anything
_OPAQUE = ast.Pass()  # bound to what the analysis knows nothing of: a `def`, a `class`, `with ... as x`


class _Frame:
    """A scope: the module's, a class body's or a function's (a lambda's too); its parameters
    and what it binds to which value."""

    def __init__(self, node: ast.AST, parent: _Frame | None, owner: _Frame | None = None) -> None:
        self.parent = parent  # the enclosing scope, class bodies left out (Python's rule)
        self.owner = owner  # for a method: its class's frame
        self.is_class = isinstance(node, ast.ClassDef)
        # a class with a base other than `object` may be an `nn.Module`
        self.module_like = self.is_class and any(not isinstance(b, ast.Name) or b.id != "object" for b in node.bases)
        self.in_module_method = (owner is not None and owner.module_like) or (
            parent is not None and parent.in_module_method)
        self.name = node.name if self.is_class else ""
        # the classes whose methods hold this scope, outermost first
        self.classes: tuple[str, ...] = (parent.classes if parent is not None else ()) + (
            (owner.name,) if owner is not None else ())
        self.bindings: dict[str, list[ast.expr | None]] = {}
        self.attributes: list[tuple[str, ast.expr]] = []  # what a method assigns to `self.<name>`
        self.registered: set[str] = set()  # a class's buffers and parameters registered by name
        self.params: set[str] = set()
        self.plain_params: set[str] = set()  # parameters the analysis never takes for tensors
        self.self_name = None
        self.step = False
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        every = [*positional, *args.kwonlyargs]
        self.params = {a.arg for a in every} | {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        if isinstance(node, ast.Lambda):
            self.plain_params = set(self.params)
            return
        if owner is not None and positional:
            self.self_name = positional[0].arg
        self.step = owner is not None and node.name in _STEP_METHODS  # Lightning moved its batch
        if owner is None or not owner.module_like or node.name != "forward":  # a module's `forward` takes tensors
            self.plain_params = {
                a.arg for a in every
                if a.annotation is None or not any(word in ast.unparse(a.annotation)
                                                   for word in ("Tensor", "Parameter", "Variable"))
            } - {self.self_name} | {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        if self.step and len(positional) > 1:
            self.plain_params.discard(positional[1].arg)  # the batch: its elements are tensors

    def bind(self, name: str, value: ast.expr | None) -> None:
        self.bindings.setdefault(name, []).append(value)

    def scope_of(self, name: str) -> _Frame | None:
        frame = self
        while frame is not None:
            if name in frame.bindings or name in frame.params:
                return frame
            frame = frame.parent
        return None


def of_tree(tree: ast.Module) -> frozenset[str] | None:
    """The kinds of site in the file, and for methods' sites each kind with the classes around
    them (``IN_CLASS``); None when a star import may bind any name (then the file's names
    cannot be resolved here)."""
    walk = _Walk()
    if not walk.run(tree):
        return None
    return walk.sites()


def classes_of(found: frozenset[str], kind: str) -> set[str]:
    """The classes around the sites of ``kind`` in ``found`` (``of_tree``'s answer)."""
    prefix = f"{kind}{IN_CLASS}"
    return {site[len(prefix):] for site in found if site.startswith(prefix)}


class _StarImport(Exception):
    """``from m import *``: any name may come from ``m``."""


# Fields that never hold a node a site depends on (operators, contexts, identifiers).
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "module", "level", "asname",
                           "kind", "is_async", "conversion", "type_comment", "type_ignores", "names"})
_CHILDREN: dict[type, tuple[str, ...]] = {ast.Constant: (), ast.Name: ()}


def _children(node: ast.AST, fields: tuple[str, ...]) -> list:
    found = []
    for name in fields:
        value = getattr(node, name)
        if type(value) is list:
            found.extend(value)
        elif value is not None:
            found.append(value)
    return found


class _Walk:
    """One pass over the tree, gathering what the sites are then decided from."""

    def __init__(self) -> None:
        self.aliases: dict[str, set[str]] = {}  # name -> what it may stand for (imports, `x = a.b`)
        self.calls: list[tuple[ast.Call, _Frame]] = []
        self.cuda_strings: list[ast.Constant] = []
        # strings no device is read from: compared (`device.type == "cuda"`), documentation, or
        # given to a call or keyword that takes no device (`help="cuda or cpu"`, `s.replace("cuda:", "")`)
        self.quiet: set[int] = set()
        self.assigned: set[int] = set()  # Name targets whose value an assignment recorded
        self.methods: list[_Frame] = []
        self.found: set[str] = set()
        self.attribute_values: dict[str, list] | None = None  # `self.<name>` -> (method, value) assigned
        self.optimizer_holders: dict[object, bool] = {}  # a name's or attribute's answer, once
        # the file's top-level functions -> the positions and names of their device parameters
        self.device_parameters: dict[str, tuple[set[int], set[str]]] = {}

    def run(self, tree: ast.Module) -> bool:
        try:
            self._scope(tree.body, _Frame(tree, None))
        except _StarImport:
            return False
        return True

    def _scope(self, nodes: list, frame: _Frame) -> None:
        """Walk one scope's nodes; each scope nested in it is walked by a call of its own."""
        stack = list(nodes)
        pop, push, extend = stack.pop, stack.append, stack.extend
        calls, assigned = self.calls, self.assigned
        while stack:
            node = pop()
            kind = type(node)
            fields = _CHILDREN.get(kind)
            if fields is None:
                if not isinstance(node, ast.AST):
                    continue  # a name in `global x`, a missing default
                fields = _CHILDREN[kind] = tuple(f for f in kind._fields if f not in _NOT_CHILDREN)
            if kind is ast.Name:
                if type(node.ctx) is ast.Store and id(node) not in assigned:
                    frame.bind(node.id, _UNKNOWN)
                continue
            if kind is ast.Call:
                calls.append((node, frame))
                if frame.owner is not None:
                    _note_registered(node, frame)
            elif kind is ast.Constant:
                if type(node.value) is str and node.value.startswith("cuda"):
                    self.cuda_strings.append(node)
                continue
            elif kind is ast.Compare:
                for operand in (node.left, *node.comparators):
                    self._quiet(operand)
            elif kind is ast.Expr:
                self.quiet.add(id(node.value))  # a docstring
                if _discards_move(node.value):
                    self.found.add(DISCARDED_MOVE)
            elif kind is ast.Assign or kind is ast.AnnAssign:
                self._assignment(node, frame)
            elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
                _bind_all(node.target, node.iter, frame, assigned)  # each element of what it iterates
            elif kind is ast.AugAssign:
                _bind_all(node.target, node.value, frame, assigned)
            elif kind is ast.withitem:
                if node.optional_vars is not None:
                    _bind_all(node.optional_vars, _OPAQUE, frame, assigned)
            elif kind is ast.Import or kind is ast.ImportFrom:
                self._import(node)
                continue
            elif kind is ast.ClassDef or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                frame.bind(node.name, _OPAQUE)
                if kind is ast.FunctionDef and frame.parent is None:
                    self._note_device_parameters(node)
                scope = frame.parent if frame.is_class else frame  # class bodies do not enclose methods
                inner = _Frame(node, scope, owner=frame if frame.is_class and kind is not ast.ClassDef else None)
                if inner.owner is not None:
                    self.methods.append(inner)
                self._scope(_children(node, fields), inner)
                continue
            elif kind is ast.Lambda:
                self._scope(_children(node, fields), _Frame(node, frame.parent if frame.is_class else frame))
                continue
            for name in fields:
                value = getattr(node, name)
                if type(value) is list:
                    extend(value)
                elif value is not None:
                    push(value)

    def _note_device_parameters(self, function: ast.FunctionDef) -> None:
        params = [*function.args.posonlyargs, *function.args.args]
        names = {a.arg for a in (*params, *function.args.kwonlyargs) if kinds.names_a_device(a.arg)}
        if names:
            self.device_parameters[function.name] = ({i for i, a in enumerate(params) if a.arg in names}, names)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                head = alias.name.split(".")[0]
                self.aliases.setdefault(alias.asname or head, set()).add(alias.name if alias.asname else head)
            elif alias.name == "*":
                raise _StarImport
            else:
                base = f"{node.module}." if node.module and not node.level else "."
                self.aliases.setdefault(alias.asname or alias.name, set()).add(base + alias.name)

    def _assignment(self, node: ast.Assign | ast.AnnAssign, frame: _Frame) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        if frame.owner is not None and len(targets) == 1 and _on_self(targets[0], frame):
            frame.attributes.append((targets[0].attr, value))
        dotted = pyast.dotted(value)
        for target in targets:
            _bind_all(target, value, frame, self.assigned)  # `a, b = x.chunk(2)`: each part of the value
            if isinstance(target, ast.Name) and dotted is not None:  # `load = torch.load`: an alias
                self.aliases.setdefault(target.id, set()).add(dotted)

    def _quiet(self, value: ast.expr) -> None:
        self.quiet.add(id(value))
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
            self.quiet.update(id(e) for e in value.elts)

    # -- deciding ------------------------------------------------------------------------

    def sites(self) -> frozenset[str]:
        found = self.found
        names = _Names(self.aliases)
        values = _Values(names)
        if self.cuda_strings:
            for call, _ in self.calls:
                self._quiet_arguments(call, names)
            if any(id(string) not in self.quiet for string in self.cuda_strings):
                found.add(CUDA_STRING)
        for call, frame in self.calls:
            found.update(self._call_sites(call, frame, names, values))
        # `self.<name>` may be a tensor where a class registers it, or assigns it something
        # that may be one (asked again until nothing is added)
        values.attributes = {attr for m in self.methods for attr, _ in m.attributes}
        state = set().union(*(m.owner.registered for m in self.methods))
        while True:
            more = {attr for m in self.methods for attr, value in m.attributes
                    if attr not in state and values.maybe_tensor(value, m, state, top=True)}
            if not more:
                break
            state |= more
        for method in self.methods:
            if method.owner.module_like and any(values.maybe_tensor(value, method, state, top=True)
                                                for _, value in method.attributes):
                found.add(TENSOR_ATTRIBUTE)
                found.update(f"{TENSOR_ATTRIBUTE}{IN_CLASS}{name}" for name in method.classes)
        return frozenset(found)

    def _quiet_arguments(self, call: ast.Call, names: _Names) -> None:
        # `inference(model, image, "cuda")` of the file's `def inference(model, x, device)`
        taken = self.device_parameters.get(call.func.id) if isinstance(call.func, ast.Name) else None
        for keyword in call.keywords:
            if keyword.arg is not None and keyword.arg not in _DEVICE_KEYWORDS and (
                    taken is None or keyword.arg not in taken[1]):
                self._quiet(keyword.value)
        # `.to(d)`, `torch.device(d)`, `set_default_device(d)`, `Generator(d)`, `load(f, d)`, and
        # the movers `move_to(x, d)`, `to_device(x, d)`..., by any name the file gives them
        if pyast.dotted(call.func) is not None and not any(
                "to" in last or "device" in last.lower() or last in ("load", "Generator")
                for last in (q.rpartition(".")[2] for q in names.qualified(call.func))):
            for index, arg in enumerate(call.args):
                if taken is None or index not in taken[0] or any(isinstance(a, ast.Starred) for a in call.args):
                    self._quiet(arg)

    def _call_sites(self, call: ast.Call, frame: _Frame, names: _Names, values: _Values) -> set[str]:
        func = call.func
        found = set()
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        qualified = names.qualified(func)
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        spread = any(k.arg is None for k in call.keywords)  # `**kwargs`
        keywords = {k.arg for k in call.keywords}
        if last == "current_device":
            found.add(CUDA_STRING)
        if isinstance(func, ast.Call) or _names_optimizer(last) or any(
                _names_optimizer(q.rpartition(".")[2]) for q in qualified) or self._holds_optimizer(func, frame):
            found.add(OPTIMIZER_CALL)
        if qualified & kinds.TORCH_LOADERS and len(positional) == len(call.args) < 2 and not spread \
                and "map_location" not in keywords:
            found.add(LOADER_CALL)
        if frame.in_module_method and qualified & _FACTORIES and not spread and not keywords & {"device", "out"}:
            found.add(FACTORY_IN_METHOD)
            found.update(f"{FACTORY_IN_METHOD}{IN_CLASS}{name}" for name in frame.classes)
        if last == "numpy" and not positional and "force" not in keywords:
            if values.placed(func.value, frame):
                found.add(NUMPY_CONVERSION)
        elif positional and any(q.startswith("cv2.") or q in kinds.NUMPY_CONVERTERS for q in qualified):
            if any(values.placed(arg, frame) for arg in positional):
                found.add(NUMPY_CONVERSION)
        return found

    def _holds_optimizer(self, func: ast.expr, frame: _Frame, depth: int = 0) -> bool:
        """``cls(params)`` of a name or ``self`` attribute bound to an optimizer class
        (``cls = torch.optim.Adam``, ``getattr(torch.optim, name)``, another such name)."""
        if isinstance(func, ast.Name):
            scope = frame.scope_of(func.id)
            if scope is None:
                return False
            key, bound = (id(scope), func.id), [(scope, v) for v in scope.bindings.get(func.id, ())]
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == _self_of(frame):
            if self.attribute_values is None:
                self.attribute_values = {}
                for method in self.methods:
                    for attr, value in method.attributes:
                        self.attribute_values.setdefault(attr, []).append((method, value))
            key, bound = func.attr, self.attribute_values.get(func.attr, ())
        else:
            return False
        known = self.optimizer_holders.get(key)
        if known is None:
            self.optimizer_holders[key] = False  # a cycle of names adds nothing
            known = self.optimizer_holders[key] = depth < _DEPTH and any(
                self._optimizer_class(v, scope, depth + 1) for scope, v in bound)
        return known

    def _optimizer_class(self, value, frame: _Frame, depth: int) -> bool:
        """What the analysis may take for an optimizer class: one named, ``getattr(...)``, a
        name bound to one, or a choice between two."""
        if isinstance(value, ast.IfExp):
            return self._optimizer_class(value.body, frame, depth) and self._optimizer_class(value.orelse, frame, depth)
        if isinstance(value, ast.Call):
            return (pyast.dotted(value.func) or "").endswith("getattr")
        if isinstance(value, ast.Name):
            return _names_optimizer(value.id) or self._holds_optimizer(value, frame, depth)
        if isinstance(value, ast.Attribute):
            return _names_optimizer(value.attr) or self._holds_optimizer(value, frame, depth)
        return False


# Keywords that may be given a device (TDL002 reads no other keyword).
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "type"})


class _Names:
    """What a dotted name may stand for: each way the file imports or aliases its head."""

    def __init__(self, aliases: dict[str, set[str]]) -> None:
        self.aliases = aliases
        self.memo: dict[str, set[str]] = {}

    def qualified(self, node: ast.expr) -> set[str]:
        dotted = pyast.dotted(node)
        if dotted is None:
            return set()
        known = self.memo.get(dotted)
        if known is None:
            known = self.memo[dotted] = self._qualified(dotted)
        return known

    def _qualified(self, dotted: str) -> set[str]:
        head, _, rest = dotted.partition(".")
        bases = self.aliases.get(head)
        if not bases:
            return {dotted}
        out = set()
        for base in bases:
            out.add(f"{base}.{rest}" if rest else base)
            # one more step for an alias of an alias (`T = torch` then `load = T.load`)
            inner, _, tail = base.partition(".")
            if inner != head:
                for root in self.aliases.get(inner, ()):
                    out.add(".".join(part for part in (root, tail, rest) if part))
        return out

    def imported(self, name: str) -> bool:
        return name in self.aliases


class _Values:
    """Whether an expression may be what the analysis takes for a tensor (TDL006) or for a
    value on an accelerator (TDL009). Each answer errs towards "maybe"."""

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.following: set[tuple] = set()  # names whose bindings are being followed
        self.placed_names: set[tuple[int, str]] = set()  # names found to be maybe placed
        self.attributes: set[str] = set()  # every `self.<name>` some method assigns
        self.budget = _BUDGET

    # -- may it be a tensor the method makes? (TDL006) -------------------------------------

    def maybe_tensor(self, value: ast.expr, frame: _Frame, state: set[str], top: bool = False) -> bool:
        """Not a literal, a display, a class built (a layer), a builtin's or a library's result
        (not torch's, not the project's), a parameter stored as given, nor another attribute of
        ``self`` stored as it is. ``state``: the attributes of ``self`` that may be tensors."""
        self.budget -= 1
        if self.budget < 0:
            return True
        kind = type(value)
        if kind is ast.Name:
            return self._name_maybe_tensor(value.id, frame, state, top)
        if kind is ast.Attribute:
            if isinstance(value.value, ast.Name) and value.value.id == _self_of(frame):
                return not top and value.attr in state
            return self.maybe_tensor(value.value, frame, state)
        if kind is ast.Call:
            return self._call_maybe_tensor(value, frame, state)
        if kind is ast.BinOp:
            return self.maybe_tensor(value.left, frame, state) or self.maybe_tensor(value.right, frame, state)
        if kind is ast.UnaryOp:
            return not isinstance(value.op, ast.Not) and self.maybe_tensor(value.operand, frame, state)
        if kind is ast.Compare:
            return len(value.ops) == 1 and not isinstance(value.ops[0], _NOT_TENSOR_COMPARISONS) and (
                self.maybe_tensor(value.left, frame, state) or self.maybe_tensor(value.comparators[0], frame, state))
        if kind is ast.Subscript:
            return self.maybe_tensor(value.value, frame, state)
        if kind is ast.IfExp:
            return self.maybe_tensor(value.body, frame, state) and self.maybe_tensor(value.orelse, frame, state)
        return kind not in _NEVER_TENSORS

    def _name_maybe_tensor(self, name: str, frame: _Frame, state: set[str], top: bool) -> bool:
        scope = frame.scope_of(name)
        if scope is None:
            return False  # imported, or a builtin: never a tensor the analysis knows of
        top = top and scope is frame  # the method's own names are followed to what they hold
        if name in scope.params and not top and name not in scope.plain_params:
            return True  # annotated as a tensor, or a `forward`'s input
        key = (id(scope), name, top)
        if key in self.following:
            return False  # `x = x.float()`: a cycle adds nothing to what the other bindings say
        self.following.add(key)
        found = any(v is _UNKNOWN or (v is not _OPAQUE and self.maybe_tensor(v, scope, state, top))
                    for v in scope.bindings.get(name, ()))
        self.following.discard(key)
        return found

    def _call_maybe_tensor(self, call: ast.Call, frame: _Frame, state: set[str]) -> bool:
        func = call.func
        if isinstance(func, ast.Call):
            return True  # `Net()(x)`: a module's output
        head = _head(func)
        if head is None:
            if isinstance(func, ast.Attribute):  # `torch.tensor(m).view(1, -1)`: a method of a computed value
                return self.maybe_tensor(func.value, frame, state)
            return False  # `self.layers[0](x)`, a lambda called: what the analysis never follows
        scope = frame.scope_of(head)
        if scope is None:
            if not self.names.imported(head):
                return False  # a builtin's result
            return self._imported_maybe_tensor(call, frame, state)
        if isinstance(func, ast.Name):
            # a model held in a name (its output), or `self(x)`; not the file's own function or
            # class, nor a parameter (the caller's callable)
            return head == _self_of(frame) or any(v is not _OPAQUE for v in scope.bindings.get(head, ()))
        if isinstance(func.value, ast.Name) and func.value.id == _self_of(frame):
            return func.attr in self.attributes or func.attr in state  # `self.encoder(x)`
        return self.maybe_tensor(func.value, frame, state)  # a tensor's method: `x.float()`

    def _imported_maybe_tensor(self, call: ast.Call, frame: _Frame, state: set[str]) -> bool:
        qualified = self.names.qualified(call.func)
        if "copy.deepcopy" in qualified:
            return bool(call.args) and self.maybe_tensor(call.args[0], frame, state)
        torch = [q for q in qualified if q.startswith("torch.")]
        if torch:
            return any(kinds.is_tensor_function(q) or kinds.is_variable_class(q) for q in torch)
        last = (pyast.dotted(call.func) or "").rpartition(".")[2]
        if last[:1].isupper() and "Tensor" not in last and "Variable" not in last:
            return False  # a class: a layer or an object, not a tensor
        # a function of the project (it may return a tensor), not of a library
        return any(q.startswith(".") or q.partition(".")[0] not in _LIBRARIES for q in qualified)

    # -- may it be on an accelerator? (TDL009) --------------------------------------------

    def placed(self, value: ast.expr, frame: _Frame, depth: int = 0) -> bool:
        """Whether ``value`` may be on an accelerator: only moves, ``device=``, a module's
        output or state, a Lightning step's batch, and what is computed from them are."""
        self.budget -= 1
        if depth > _DEPTH or self.budget < 0:
            return True
        kind = type(value)
        if kind in _PLAIN_VALUES:
            return False
        if kind is ast.Name:
            return self._name_placed(value.id, frame, depth + 1)
        if kind is ast.Attribute:
            if isinstance(value.value, ast.Name) and value.value.id == _self_of(frame):
                return True  # module state, or what a method stored
            return self.placed(value.value, frame, depth + 1)
        if kind is ast.Subscript or kind is ast.Starred:
            return self.placed(value.value, frame, depth + 1)
        if kind is ast.Call:
            return self._call_placed(value, frame, depth + 1)
        if kind is ast.BinOp:
            return self.placed(value.left, frame, depth + 1) or self.placed(value.right, frame, depth + 1)
        if kind is ast.UnaryOp:
            return self.placed(value.operand, frame, depth + 1)
        if kind is ast.IfExp:
            return self.placed(value.body, frame, depth + 1) or self.placed(value.orelse, frame, depth + 1)
        if kind is ast.Compare:
            return any(self.placed(v, frame, depth + 1) for v in (value.left, *value.comparators))
        if kind is ast.BoolOp:
            return any(self.placed(v, frame, depth + 1) for v in value.values)
        if kind is ast.ListComp or kind is ast.SetComp or kind is ast.GeneratorExp:
            return self.placed(value.elt, frame, depth + 1)
        if kind is ast.DictComp:
            return self.placed(value.value, frame, depth + 1)
        return True

    def _name_placed(self, name: str, frame: _Frame, depth: int) -> bool:
        scope = frame.scope_of(name)
        if scope is None:
            # an imported name is the library's; anything else unseen (a builtin, a global set
            # elsewhere) may hold anything
            return not self.names.imported(name)
        if name in scope.params and scope.step:
            return True
        key = (id(scope), name)
        if key in self.placed_names:
            return True
        if key in self.following:
            return False  # `im = cv2.resize(im, ...)`: a cycle adds nothing to what its other bindings say
        self.following.add(key)
        placed = any(v is _UNKNOWN or (v is not _OPAQUE and self.placed(v, scope, depth))
                     for v in scope.bindings.get(name, ()))
        self.following.discard(key)
        if placed:
            self.placed_names.add(key)
        return placed

    def _call_placed(self, call: ast.Call, frame: _Frame, depth: int) -> bool:
        func = call.func
        if any(k.arg is None or k.arg == "device" for k in call.keywords):
            return True  # `torch.zeros(n, device=d)`
        if isinstance(func, ast.Attribute):
            if func.attr == "cpu":
                return False
            if func.attr in kinds.MOVE_METHODS or func.attr == "type":
                return True
            if isinstance(func.value, ast.Name) and func.value.id == _self_of(frame):
                return True  # `self.encoder(x)`: a submodule's output
            receiver = self.placed(func.value, frame, depth)
        elif isinstance(func, ast.Name):
            scope = frame.scope_of(func.id)
            if scope is not None and any(v is not _OPAQUE for v in scope.bindings.get(func.id, ())):
                return True  # a model held in a name: its output
            receiver = False
        else:
            return True
        # what a call computes from values on an accelerator is there too
        return receiver or any(self.placed(arg, frame, depth) for arg in call.args) or any(
            self.placed(k.value, frame, depth) for k in call.keywords)


def _head(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _self_of(frame: _Frame) -> str | None:
    while frame is not None:
        if frame.self_name is not None:
            return frame.self_name
        frame = frame.parent
    return None


def _bind_all(target: ast.expr, value: ast.expr, frame: _Frame, assigned: set[int]) -> None:
    """Bind each name in ``target`` to ``value`` (a part of it, for an unpacking)."""
    if isinstance(target, ast.Name):
        assigned.add(id(target))
        frame.bind(target.id, value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bind_all(element, value, frame, assigned)
    elif isinstance(target, ast.Starred):
        _bind_all(target.value, value, frame, assigned)


def _note_registered(call: ast.Call, method: _Frame) -> None:
    """``self.register_buffer("pe", pe)``: ``self.pe`` is the module's state, a tensor."""
    func = call.func
    if (isinstance(func, ast.Attribute) and func.attr in ("register_buffer", "register_parameter")
            and isinstance(func.value, ast.Name) and func.value.id == method.self_name and call.args
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        method.owner.registered.add(call.args[0].value)


def _names_optimizer(name: str) -> bool:
    """An optimizer class (``AdamW``) or a name holding one (``optimizer_cls``)."""
    return (kinds.OPTIMIZER_NAME.search(name) is not None and name[:1].isupper()) or kinds.names_optimizer_class(name)


def _discards_move(value: ast.expr) -> bool:
    if isinstance(value, (ast.ListComp, ast.DictComp)):
        if len(value.generators) != 1:
            return False
        value = value.elt if isinstance(value, ast.ListComp) else value.value
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in RESULT_MOVES)


def _on_self(target: ast.expr, method: _Frame) -> bool:
    return (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == method.self_name)


