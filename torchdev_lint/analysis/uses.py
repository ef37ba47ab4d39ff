"""Where a CPU tensor goes inside one function: does it ever meet the module's tensors?

A tensor built on the CPU inside a module (a plain attribute made in ``__init__``, a factory
without ``device=`` in ``forward``) only fails on a GPU when it meets a tensor that follows
the module (an input, a parameter, a submodule's output) in an op, is returned, or is
stored where others will use it. It is harmless when every use moves it first
(``.to(x.device)``), reads its shape or length, turns it into Python values (``.item()``,
``print``), indexes with it or into it, or hands it where PyTorch wants CPU data
(``pack_padded_sequence`` lengths, ``torch.bincount``). This module follows the value from
its node up through the expressions and local names that carry it, and answers whether
any use is harmful. Unknown uses count as harmful: silence must be earned.
"""

from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.conditions import integer_value, is_main_guard, never_runs, words
from torchdev_lint.analysis.callees import Callees, Target, parameter_for
from torchdev_lint.analysis.classes import methods
from torchdev_lint.analysis.guards import code_of as code
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.moves import keyword_argument, names_cpu
from torchdev_lint.analysis.kinds import (
    LOG_METHODS,
    NEW_TENSOR_FACTORIES,
    NON_TENSOR_ATTRIBUTES,
    NON_TENSOR_METHODS,
    TENSOR_CLASSES,
    changes_dtype_only,
    moves_to_cpu,
)

_MOVES = frozenset({"to", "cuda", "type_as"})
# Tensor methods whose result is not where their receiver is, or may be 0-dim (`x.sum()`).
_NOT_KEEPING_PLACE = frozenset({"to", "cuda", "type", "type_as", "xpu", "mps", "new_tensor", "item", "tolist",
                                "sum", "mean", "max", "min", "prod", "norm", "std", "var", "all", "any"})
# Factories that copy the data they are given (their first argument) onto ``device=``.
_PLACING_COPIES = frozenset({"torch.as_tensor", "torch.tensor", "torch.asarray"})
# Calls that only read, log or convert their argument to Python values.
_READERS = frozenset("""len print str repr int float bool isinstance format hash id type
    logging.info logging.debug logging.warning""".split())
# Builtins that pair or collect their arguments without computing with them: what meets is
# in the code that reads the pairs (`for row, n in zip(self.table, lengths)`).
_COLLECTORS = frozenset({"zip", "enumerate", "list", "tuple", "iter", "reversed"})
# Calls that hand their tensor arguments on to a function they run (activation
# checkpointing): whether those meet is up to that function, out of sight.
_FORWARDERS = frozenset({"checkpoint", "checkpoint_sequential"})
# Functions that want (or take) CPU data for the arguments at these positions or keywords.
_CPU_ARGUMENTS = {
    "pack_padded_sequence": ((1, "lengths"),),
    "bincount": ((0, "input"),),
    "reshape_from_tensor_shape": ((1, "shape"),),  # torch.onnx.operators: a CPU shape tensor
    # the CTC loss reads its lengths on the CPU, whatever device the log-probabilities are on
    "ctc_loss": ((2, "input_lengths"), (3, "target_lengths")),
}
# Functions whose argument at that position or keyword is a size (`F.pad(x, [dx // 2, ...])`,
# `F.interpolate(x, size=s)`): a tensor there is read as integers, on whatever device it is.
_SIZE_ARGUMENTS = {"pad": (1, "pad"), "interpolate": (1, "size"), "upsample": (1, "size"),
                   "adaptive_avg_pool2d": (1, "output_size"), "adaptive_max_pool2d": (1, "output_size")}
# Tensor methods whose positional arguments are sizes or dimensions: a tensor given there is
# read as one integer (`x.reshape(G, -1)` with `G` a 0-dim tensor), on whatever device it is,
# so it mixes no devices.
_SIZE_METHODS = frozenset("""view reshape expand repeat tile new_zeros new_ones new_empty permute
    transpose flatten unflatten split chunk roll""".split())
# Functions whose result is a CPU tensor whatever their input (a shape as a tensor).
_CPU_RESULTS = frozenset({"torch.onnx.operators.shape_as_tensor", "torch._shape_as_tensor"})
# Calls that give a Python number (or string), never a tensor.
_NUMBER_RESULTS = frozenset({"len", "int", "float", "bool", "str"})
# Reductions that, called with no dimension, give a 0-dim tensor: PyTorch lets a 0-dim CPU
# tensor meet tensors on any device.
_FULL_REDUCTIONS = frozenset("sum mean prod max min amax amin norm all any std var median nansum".split())
_DIM_KEYWORDS = frozenset({"dim", "axis", "dims"})
# Methods that give a tuple of tensors: the pieces are where the tensor is.
_PIECES = frozenset({"chunk", "split", "unbind"})
_NUMBER_ANNOTATIONS = frozenset({"int", "float", "bool", "str"})
_MAX_CALL_DEPTH = 6  # calls followed into callees, nested
_MAX_WEIGHED = 40  # names weighed through each other's bindings at once
# Keyword arguments that carry no tensor: an op given these alone mixes nothing.
_OPTION_KEYWORDS = frozenset("""dim dims axis dtype keepdim device layout requires_grad
    non_blocking batch_first enforce_sorted descending stable sorted return_counts""".split())
# Factories whose arguments (sizes, bounds, fill values; not data) take only numbers or
# 0-dim tensors, and the keywords that name those arguments.
_SCALAR_TAKERS = frozenset("""torch.arange torch.range torch.linspace torch.logspace torch.zeros
    torch.ones torch.empty torch.full torch.rand torch.randn torch.randint torch.randperm
    torch.eye range""".split())
_SCALAR_KEYWORDS = frozenset("start end step steps size n m low high fill_value".split())


def _sizes(call: cst.Call, arg: cst.Arg) -> bool:
    """``arg`` is the size argument of ``call`` (``_SIZE_ARGUMENTS``)."""
    return given_as(call, arg, _SIZE_ARGUMENTS.get((dotted_name(call.func) or "").rsplit(".", 1)[-1]))


def _cpu_taker(call: cst.Call, last: str) -> str:
    """The ``_CPU_ARGUMENTS`` entry of ``call``: by its function's name, or ``ctc_loss`` for
    a CTC loss module called (``nn.CTCLoss()(...)``, ``self.ctc(...)``)."""
    built = dotted_name(call.func.func) if isinstance(call.func, cst.Call) else None
    if (built or "").endswith("CTCLoss") or "ctc" in last.lower():
        return "ctc_loss"
    return last


def given_as(call: cst.Call, arg: cst.Arg, where: tuple[int, str] | None) -> bool:
    """``arg`` is the argument of ``call`` at ``where``'s position or keyword."""
    if where is None:
        return False
    position, keyword = where
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return (arg.keyword is not None and arg.keyword.value == keyword) or (
        arg in positional and positional.index(arg) == position)


class Uses:
    """The uses of values computed inside ``function`` (a method, or any function when its
    parameter is followed from a caller). ``callees`` resolves the calls made there, so a
    value handed to one is followed inside it; ``klass`` is the class holding a method."""

    def __init__(
        self,
        function: cst.FunctionDef,
        callees: Callees | None = None,
        klass: cst.ClassDef | None = None,
        depth: int = 0,
        constants: dict[str, object] | None = None,
    ) -> None:
        self.function = function
        # parameters whose value the followed call fixes (a literal, or a default it
        # leaves alone): branches they rule out are not run
        self.constants = constants or {}
        self.callees = callees
        self.klass = klass
        self.depth = depth
        self.qualify = callees.qualify if callees is not None else dotted_name
        params = function.params
        ordered = [*params.posonly_params, *params.params]
        self.self_name = ordered[0].name.value if klass is not None and ordered else None
        self.params = {p.name.value: p for p in [*ordered, *params.kwonly_params]}
        self.parents: dict[int, cst.CSTNode] = {}
        self.loads: dict[str, list[cst.Name]] = {}
        self.order: dict[int, int] = {}
        # name -> the values bound to it here, each with whether it is unpacked from the
        # value (``a, b = v``); None for a binding whose value is not known (a loop target).
        self.bindings: dict[str, list[tuple[cst.BaseExpression, bool] | None]] = {}
        self.nested: set[str] = set()  # names that nested functions and classes mention
        self.moving: dict[str, list[cst.CSTNode]] = {}  # name -> assignments binding it moved
        self.loops: dict[str, list[cst.BaseExpression]] = {}  # loop name -> what it iterates
        self.calls: list[cst.Call] = []
        self.returns: list[cst.Return] = []
        self.yields = False
        # `f.<attr> = value` inside `f`: a cache kept on the function object
        self.own_attributes: dict[str, list[cst.BaseExpression | None]] = {}
        self._cpu_built: dict[str, bool] = {}  # method name -> `returns_cpu_built` of it
        self.carry = False  # following a parameter: reaching `return` carries it out
        self.carried = False
        self._weighing: set[str] = set()
        self.origin: set[str] = set()  # the parameter followed from a caller

        def enter(node: cst.CSTNode) -> bool:
            self.order[id(node)] = len(self.order)
            for child in tree.children(node):
                self.parents[id(child)] = node
            if isinstance(node, cst.Name):
                if not _names_something_else(node, self.parents.get(id(node))):
                    self.loads.setdefault(node.value, []).append(node)
            elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
                self._bind(node)
            elif isinstance(node, (cst.For, cst.CompFor)):
                self._bind_unknown(node.target)
                if isinstance(node.target, cst.Name):
                    self.loops.setdefault(node.target.value, []).append(node.iter)
                elif (  # `for i, block in enumerate(self.blocks)`
                    isinstance(node.target, cst.Tuple) and len(node.target.elements) == 2
                    and isinstance(node.target.elements[1].value, cst.Name)
                    and isinstance(node.iter, cst.Call) and dotted_name(node.iter.func) == "enumerate"
                    and len(node.iter.args) == 1
                ):
                    self.loops.setdefault(node.target.elements[1].value.value, []).append(node.iter.args[0].value)
            elif isinstance(node, cst.Call):
                self.calls.append(node)
            elif isinstance(node, cst.Return):
                self.returns.append(node)
            elif isinstance(node, cst.Yield):
                self.yields = True
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                self._bind_unknown(node.asname.name)
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node is not function:
                tree.walk(node, lambda inner: self.nested.add(inner.value) if isinstance(inner, cst.Name) else True)
                return False
            return True

        tree.walk(function, enter)
        self.constants = {k: v for k, v in self.constants.items() if k not in self.bindings and k not in self.nested}

    def _bind(self, node) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        value = node.value
        if value is None:
            return  # `x: int`
        for target in targets:
            if (
                isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == self.function.name.value
            ):
                stored = None if isinstance(node, cst.AugAssign) else value
                self.own_attributes.setdefault(target.attr.value, []).append(stored)
            elif isinstance(target, cst.Name):
                self.bindings.setdefault(target.value, []).append((value, False))
                if isinstance(node, cst.Assign) and _moves(value):
                    self.moving.setdefault(target.value, []).append(node)
            elif isinstance(target, (cst.Tuple, cst.List)):
                values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
                for position, element in enumerate(target.elements):
                    if isinstance(element.value, cst.Name):
                        self.bindings.setdefault(element.value.value, []).append((value, True))
                        if isinstance(node, cst.Assign) and len(values) == len(target.elements) and _moves(
                            values[position].value
                        ):
                            self.moving.setdefault(element.value.value, []).append(node)
                    else:
                        self._bind_unknown(element.value)

    def _bind_unknown(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bindings.setdefault(target.value, []).append(None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_unknown(element.value)

    def harmful(self, node: cst.CSTNode) -> bool:
        """Does the value of ``node`` (a CPU tensor) meet the module's tensors, leave the
        function, or get stored for later?"""
        return self._harmful(node, set())

    def parameter(self, name: str) -> str:
        """What the function does with the value its caller gives parameter ``name``:
        "harmless" (it never meets another tensor unmoved), "carried" (it reaches the
        result, which the caller must follow) or "harmful". Uses after a top-level
        rebinding of the name (``pos = pos.to(device)``) see another value."""
        if name in self.nested:
            return "harmful"  # a closure uses it: not followed
        self.carry, self.carried, self.origin = True, False, {name}
        cut = next(
            (n for n in self.loads.get(name, ())
             if self._stored(n) and self._top_level(n)), None,
        )
        for load in self._live_loads(name):
            if cut is not None and not self.read_before_store(load, cut):
                continue
            if self._harmful(load, set()):
                return "harmful"
        return "carried" if self.carried else "harmless"

    # -- the meeting point: where a CPU value meets the caller's tensors -------------------

    def meeting(self, node: cst.CSTNode, inputs: set[str]) -> cst.CSTNode | None:
        """Where the value of ``node`` (a tensor on the CPU) meets a tensor computed from the
        parameters ``inputs`` (the caller's data, on whatever device the module was moved
        to): an operator with it, a call handed both, an index into the CPU tensor made from
        it. None where the analysis cannot show one: a move first, a size read, a value that
        leaves the function, a branch the file's constants rule out."""
        found = self._meeting(node, inputs, 0)
        return None if found is None or never_runs(found, self.parents) else found

    def _meeting(self, node: cst.CSTNode, inputs: set[str], depth: int) -> cst.CSTNode | None:
        parent = self.parents.get(id(node))
        if parent is None or depth > 8:
            return None
        step = depth + 1
        if isinstance(parent, cst.Subscript):
            if parent.value is not node:
                return None  # an index: PyTorch takes CPU indices for tensors anywhere
            if any(isinstance(e.slice, cst.Index) and self.from_inputs(e.slice.value, inputs) for e in parent.slice):
                return parent  # a CPU tensor indexed by indices on the device raises
            if all(isinstance(e.slice, cst.Index) and integer_value(e.slice.value) is not None for e in parent.slice):
                return None  # `self.std[0]`: an element, perhaps 0-dim, which mixes with tensors anywhere
            return self._meeting(parent, inputs, step)  # a slice of it is on the CPU too
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = self.parents.get(id(parent))
            method = parent.attr.value
            if not (isinstance(call, cst.Call) and call.func is parent) or method in _MOVES \
                    or method in NON_TENSOR_METHODS or method in ("type", "new_tensor"):
                return None  # `.shape`, `.to(x.device)`, `.size(0)`
            if any(self.from_inputs(a.value, inputs) for a in call.args if a.keyword is None):
                return call if method not in _SIZE_METHODS else self._meeting(call, inputs, step)
            return self._meeting(call, inputs, step)
        if isinstance(parent, cst.ComparisonTarget):
            node, parent = parent, self.parents.get(id(parent))
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison)):
            operands = [parent.left, *(c.comparator for c in parent.comparisons)] \
                if isinstance(parent, cst.Comparison) else [parent.left, parent.right]
            if any(self.from_inputs(o, inputs) for o in operands if o is not node and not tree.contains(o, node)):
                return parent
            return self._meeting(parent, inputs, step)
        if isinstance(parent, cst.UnaryOperation):
            return self._meeting(parent, inputs, step)
        if isinstance(parent, (cst.Element, cst.Arg)):
            return self._handed(parent, inputs, step)
        if isinstance(parent, cst.AugAssign) and parent.value is node:
            return parent if self.from_inputs(parent.target, inputs) else None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            after = self.order[id(parent)]
            for load in self.loads.get(parent.targets[0].target.value, ()):
                if self.order[id(load)] > after:
                    found = self._meeting(load, inputs, step)
                    if found is not None:
                        return found
        return None

    def _handed(self, part: cst.Element | cst.Arg, inputs: set[str], step: int) -> cst.CSTNode | None:
        """The value is an element of a tuple or list, or an argument: it meets what the
        same call (or the call the container is handed to) is also given."""
        container = self.parents.get(id(part))
        if isinstance(part, cst.Element):
            if not isinstance(container, (cst.Tuple, cst.List)):
                return None
            siblings = [e.value for e in container.elements if e is not part]
            holder = self.parents.get(id(container))
            if isinstance(holder, cst.Arg) and any(self.from_inputs(v, inputs) for v in siblings):
                call = self.parents.get(id(holder))
                return call if isinstance(call, cst.Call) and self._combines(call) else None
            return self._meeting(container, inputs, step)
        if not isinstance(container, cst.Call) or not self._combines(container) or _sizes(container, part):
            return None
        others = [a.value for a in container.args if a is not part and a.keyword is None]
        receiver = container.func.value if isinstance(container.func, cst.Attribute) else None
        if any(self.from_inputs(v, inputs) for v in others) or (
            receiver is not None and self.from_inputs(receiver, inputs)
        ):
            return container
        return None

    def _combines(self, call: cst.Call) -> bool:
        """A call that computes with its tensor arguments together: a torch function, a
        submodule, a tensor method; not a move, a logger, a builtin that reads or pairs them, nor a
        function of the project (what it does with them is in its body: a shape test first,
        say), where the values are handed on, not shown to meet."""
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        return name not in _MOVES and name not in _READERS and name not in LOG_METHODS \
            and name not in _FORWARDERS and not (isinstance(func, cst.Name) and name in _COLLECTORS) \
            and name not in ("append", "extend", "insert", "add", "update", "setdefault", "get") \
            and not (self.callees is not None and self.callees.target(call, self.klass, self.self_name) is not None) \
            and not self._library_object(func)

    def _library_object(self, func: cst.BaseExpression) -> bool:
        """``self.loss_fn`` that the class builds from a third-party library
        (``self.loss_fn = AngularLoss()`` of pytorch_metric_learning): what it does with
        its arguments is the library's code (which may move labels to the embeddings' device),
        not shown to meet. Not torch's modules, nor the project's."""
        index = self.callees.index if self.callees is not None else None
        if index is None or self.klass is None or not (
                isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value == self.self_name):
            return False
        built = [assign.value for assign in tree.collect(self.klass, cst.Assign)
                 if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Attribute)
                 and assign.targets[0].target.attr.value == func.attr.value]
        if not built or not all(isinstance(value, cst.Call) for value in built):
            return False
        for value in built:
            qualified = self.qualify(value.func) or ""
            module = qualified.rpartition(".")[0]
            if not module or qualified.split(".")[0] in ("torch", "torchvision", "torchaudio") \
                    or index.is_project_module(module, self.callees.path):
                return False
        return True

    def from_inputs(self, expr: cst.BaseExpression, inputs: set[str], depth: int = 0) -> bool:
        """Is ``expr`` a tensor computed from the parameters ``inputs`` (where the caller's
        data is)? Not a size, a device or a number read from them (``x.size(0)``,
        ``x.shape``, ``len(x)``), nor an attribute of the module."""
        if depth > 6:
            return False
        step = depth + 1
        if isinstance(expr, cst.Name):
            if expr.value in inputs:
                return True
            return any(bound is not None and self.from_inputs(bound[0], inputs, step)
                       for bound in self.bindings.get(expr.value, ()))
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NON_TENSOR_ATTRIBUTES:
                return False
            return not (isinstance(expr.value, cst.Name) and expr.value.value == self.self_name) \
                and self.from_inputs(expr.value, inputs, step)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in _READERS:
                return False
            if isinstance(func, cst.Attribute):
                if func.attr.value in NON_TENSOR_METHODS or moves_to_cpu(expr):
                    return False  # not a tensor, or one on the CPU whatever the inputs' device
                if self._returns_cpu_built(func):
                    return False  # `self.gaussian_map(gx, ...)` builds its result on the CPU
                if self.from_inputs(func.value, inputs, step):
                    return True
            return any(self.from_inputs(a.value, inputs, step) for a in expr.args if a.keyword is None)
        if isinstance(expr, cst.Subscript):
            return self.from_inputs(expr.value, inputs, step)
        if isinstance(expr, cst.BinaryOperation):
            return self.from_inputs(expr.left, inputs, step) or self.from_inputs(expr.right, inputs, step)
        if isinstance(expr, cst.UnaryOperation):
            return self.from_inputs(expr.expression, inputs, step)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self.from_inputs(e.value, inputs, step) for e in expr.elements)
        return False

    def _returns_cpu_built(self, func: cst.Attribute) -> bool:
        """``self.<method>`` of the class, whose every return is built on the CPU
        (``returns_cpu_built``)."""
        if self.klass is None or not (isinstance(func.value, cst.Name) and func.value.value == self.self_name):
            return False
        name = func.attr.value
        if name not in self._cpu_built:  # asked at every call of it that `from_inputs` meets
            method = next((m for m, _ in methods(self.klass) if m.name.value == name), None)
            self._cpu_built[name] = method is not None and returns_cpu_built(method, self.qualify)
        return self._cpu_built[name]

    def _top_level(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a statement of the function's own body (no branch or loop)?"""
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, cst.BaseSuite):
            node, parent = parent, self.parents.get(id(parent))
        return parent is not None and self.parents.get(id(parent)) is self.function

    def attribute_reads(self, self_name: str, attr: str) -> list[cst.Attribute]:
        """``self.<attr>`` reads in the function (stores excluded), in source order."""
        reads = []
        for name in self.loads.get(self_name, ()):
            parent = self.parents.get(id(name))
            if (
                isinstance(parent, cst.Attribute)
                and parent.value is name
                and parent.attr.value == attr
                and not self._stored(parent)
            ):
                reads.append(parent)
        return reads

    def attribute_stores(self, self_name: str, attr: str) -> list[cst.Attribute]:
        return [
            self.parents[id(n)] for n in self.loads.get(self_name, ())
            if isinstance(self.parents.get(id(n)), cst.Attribute)
            and self.parents[id(n)].attr.value == attr
            and self._stored(self.parents[id(n)])
        ]

    def read_before_store(self, read: cst.CSTNode, store: cst.CSTNode) -> bool:
        """Python evaluates an assignment's value before storing it: a read inside the
        storing statement (``self.h = f(self.h)``) comes first."""
        statement = self.parents.get(id(store))
        while statement is not None and not isinstance(statement, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            statement = self.parents.get(id(statement))
        node = read
        while node is not None:
            if node is statement:
                return True
            node = self.parents.get(id(node))
        return self.order[id(read)] < self.order[id(store)]

    # -- the walk up ---------------------------------------------------------------------

    def _stored(self, node: cst.CSTNode) -> bool:
        """Is ``node`` an assignment's target, or a name unpacked into by one?"""
        parent = self.parents.get(id(node))
        if isinstance(parent, cst.Element) and isinstance(node, cst.Name):
            container = self.parents.get(id(parent))
            return isinstance(container, (cst.Tuple, cst.List)) and self._stored(container)
        return (isinstance(parent, cst.AssignTarget) and parent.target is node) or (
            isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr))
            and parent.target is node
        ) or (isinstance(parent, cst.AsName) and parent.name is node)

    def _harmful(self, node: cst.CSTNode, seen: set[str]) -> bool:
        parent = self.parents.get(id(node))
        if parent is None:
            return True
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._attribute(parent, seen)
        if isinstance(parent, cst.Subscript):
            return self._harmful(parent, seen) if parent.value is node else False
        if isinstance(parent, (cst.Index, cst.SubscriptElement, cst.Slice)):
            return False  # an index: PyTorch takes CPU indices for tensors anywhere
        if isinstance(parent, cst.Arg):
            return self._argument(parent, seen)
        if isinstance(parent, (cst.ListComp, cst.GeneratorExp)) and parent.elt is node:
            return self._harmful(parent, seen)  # `[torch.tensor(u.shape) for u in xs]`: a list of them
        if isinstance(parent, cst.DictElement) and parent.value is node:
            return self._keyword_value(parent, seen)
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node and self._rows_0_dim(node):
            return False  # `for w in weights`: 0-dim rows, welcome next to tensors anywhere
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget)):
            return self._operation(parent, node, seen)
        if isinstance(parent, cst.UnaryOperation):
            return self._harmful(parent, seen)
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            return self._element(parent, seen)
        if isinstance(parent, cst.IfExp):
            return parent.test is not node and self._harmful(parent, seen)
        if isinstance(parent, (cst.If, cst.While, cst.Assert, cst.BooleanOperation, cst.Expr)):
            return False
        if isinstance(parent, cst.Assign):
            return self._assigned(parent, seen)
        if isinstance(parent, cst.AugAssign):
            return True  # `attn += mask`: meets the target
        if isinstance(parent, cst.Return):
            return self._returned(None)
        return True  # yielded, stored, or a use we do not know

    def _returned(self, position: int | None) -> bool:
        """The value leaves the function (at ``position`` of a returned tuple): following a
        parameter, the caller follows the call's result; otherwise it is harmful unless
        every caller the project has (``Callees.callers``) uses the result harmlessly."""
        if self.carry:
            self.carried = True
            return False
        callers = (
            self.callees.callers(self.function, self.klass)
            if self.callees is not None and self.depth < _MAX_CALL_DEPTH else None
        )
        if callers is None:
            return True  # to code we cannot see
        for caller in callers:
            uses = Uses(caller.function, caller.callees, caller.klass, self.depth + 1)
            if uses.result_harmful(caller.call, position):
                return True
        return False

    def result_harmful(self, call: cst.Call, position: int | None) -> bool:
        """Is the result of ``call`` (or its element ``position``, when the callee returns
        a tuple) used harmfully here? ``a, _ = f()`` follows ``a`` alone, ``f()[1]`` the
        element, anything else the whole result."""
        parent = self.parents.get(id(call))
        if position is not None and isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            names = _unpacked_names(parent.targets[0].target)
            target = parent.targets[0].target
            if names is not None and isinstance(target, (cst.Tuple, cst.List)):
                if len(names) != len(target.elements) or position >= len(names):
                    return True
                return self._names_harmful([names[position]], set(), parent)
        if position is not None and isinstance(parent, cst.Subscript) and parent.value is call:
            index = parent.slice[0].slice if len(parent.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                return int(index.value.value) == position and self._harmful(parent, set())
        return self._harmful(call, set())

    def _attribute(self, attribute: cst.Attribute, seen: set[str]) -> bool:
        name = attribute.attr.value
        if name in NON_TENSOR_ATTRIBUTES:
            return False  # `.shape`, `.device`, `.dtype`
        call = self.parents.get(id(attribute))
        if not (isinstance(call, cst.Call) and call.func is attribute):
            return self._harmful(attribute, seen)  # `.T`, `.data`
        if name in _MOVES and not (name == "to" and changes_dtype_only(call)):
            return False  # moved before it is used
        if name in NON_TENSOR_METHODS and name not in _PIECES:
            return False  # `.item()`, `.tolist()`, `.size()`
        if name in _FULL_REDUCTIONS and not any(
            a.keyword is None or a.keyword.value in _DIM_KEYWORDS for a in call.args
        ):
            return False  # `.sum()`: a 0-dim tensor, welcome next to tensors on any device
        return self._harmful(call, seen)  # `.float()`, `.unsqueeze(0)`: still on the CPU

    def _argument(self, arg: cst.Arg, seen: set[str]) -> bool:
        call = self.parents.get(id(arg))
        if not isinstance(call, cst.Call):
            return True
        name = dotted_name(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if name in _READERS or last in LOG_METHODS:
            return False
        if name == "zip" and isinstance(self.parents.get(id(call)), (cst.For, cst.CompFor)) and (
            self.parents[id(call)].iter is call and self._rows_0_dim(arg.value)
        ):
            return False  # `for x, w in zip(xs, weights)`: 0-dim rows
        if _sizes(call, arg):
            return False  # `F.pad(x, [dx // 2, dx - dx // 2])`: sizes, read as integers
        if any(given_as(call, arg, where) for where in _CPU_ARGUMENTS.get(_cpu_taker(call, last), ())):
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
            return False  # `x.to(cpu_tensor)`: names a device, mixes nothing
        if self._placed_copy(call, arg):
            return False  # `torch.as_tensor(mean, device=x.device)`: a copy on the device
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "copy_" and arg.keyword is None:
            return False  # `p.data.copy_(t)`: copied into a tensor that keeps its device
        landings = self._landings(call, arg) if self.callees is not None else None
        if landings:  # the project's own code: what does it do with the value?
            verdicts = {self._verdict(target, param, inner) for target, param, inner in landings}
            return "harmful" in verdicts or ("carried" in verdicts and self._harmful(call, seen))
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SIZE_METHODS and arg.keyword is None:
            return False  # `x.reshape(G, -1)` (not the project's own method): a size
        others = [
            a.value for a in call.args
            if a is not arg and not (a.keyword is not None and a.keyword.value in _OPTION_KEYWORDS)
        ]
        if any(not self._beside(o) for o in others):
            return True  # meets the other arguments (or a submodule's parameters)
        if not name.startswith(("torch.", "th.", "F.")):
            return True  # handed to code we do not follow
        return self._harmful(call, seen)  # `torch.sum(t)`: a CPU result

    def _placed_copy(self, call: cst.Call, arg: cst.Arg) -> bool:
        """``arg`` is the data of a factory that copies it onto a device other than the CPU."""
        if arg.keyword is not None or not call.args or call.args[0] is not arg \
                or (self.qualify(call.func) or "") not in _PLACING_COPIES:
            return False
        device = keyword_argument(call, "device")
        return device is not None and not names_cpu(device.value)

    def _landings(
        self, call: cst.Call, arg: cst.Arg, spread: cst.Arg | None = None,
    ) -> list[tuple[Target, str, cst.Call]] | None:
        """The functions of the project ``arg`` of ``call`` reaches, each with its
        parameter there and the call that fixes the others; None when one is not known.

        - a call ``Callees.target`` resolves;
        - ``block(...)`` for a loop ``for block in self.blocks`` over a ``ModuleList`` of
          one class: that class's ``forward``;
        - ``wrapper(block, a, b)`` where the function also calls ``block(a, b)`` itself
          (the two branches of gradient checkpointing): what that call does;
        - a keyword that the called submodule's ``forward`` takes in ``**kwargs``, when
          its constructor was given objects (``Attention(processor=MyProcessor())``):
          every such object of the project whose ``__call__``/``forward`` takes that
          keyword (the submodule hands them what it does not know: it may only spread
          ``**kwargs`` into calls, or filter it by key). At least one must."""
        callees = self.callees
        target = callees.target(call, self.klass, self.self_name)
        func = call.func
        if target is None and isinstance(func, cst.Name):
            iterated = self.loops.get(func.value, [])
            if len(iterated) == 1 and len(self.bindings.get(func.value, ())) == 1:
                target = callees.element(self.klass, self.self_name, iterated[0])
        if target is None:
            twin = self._twin(call, spread or arg)
            if twin is None:
                return None
            return self._landings(twin[0], arg, twin[1]) if spread is not None else self._landings(*twin)
        param = parameter_for(target, call, arg)
        if param is not None:
            return [(target, param, call)]
        keyword = arg.keyword.value if arg.keyword is not None else None
        star = target.function.params.star_kwarg
        if keyword is None or not isinstance(star, cst.Param) or not _only_passes_on(target.function, star.name.value):
            return None
        handlers = callees.handlers(call, self.klass, self.self_name, keyword)
        return [(handler, keyword, None) for handler in handlers] if handlers else None

    def _twin(self, call: cst.Call, arg: cst.Arg) -> tuple[cst.Call, cst.Arg] | None:
        """``wrapper(block, a, b)`` and, elsewhere in the function, ``block(a, b)``: that
        call, and the argument there that stands where ``arg`` does."""
        args = call.args
        if not args or arg is args[0] or args[0].keyword is not None or args[0].star:
            return None
        head = code(args[0].value)
        if arg.star == "**":  # `wrapper(block, h, **kwargs)` beside `block(h, **kwargs)`
            for other in self.calls:
                spread = next((a for a in other.args if a.star == "**" and code(a.value) == code(arg.value)), None)
                if other is not call and code(other.func) == head and spread is not None:
                    return other, spread
            return None
        if any(a.keyword is not None or a.star for a in args[:args.index(arg) + 1]):
            return None
        wanted = [code(a.value) for a in args[1:args.index(arg) + 1]]
        for other in self.calls:
            given = other.args[:len(wanted)]
            if (
                other is not call and code(other.func) == head and len(given) == len(wanted)
                and all(a.keyword is None and not a.star for a in given)
                and [code(a.value) for a in given] == wanted
            ):
                return other, given[-1]
        return None

    def _verdict(self, target: Target, param: str, call: cst.Call | None = None) -> str:
        """``Uses.parameter`` of the callee, remembered per resolver; a call cycle or a
        chain too deep decides "harmful"."""
        constants = _constants(target, call) if call is not None else {}
        key = (id(target.function), param, tuple(sorted((k, repr(v)) for k, v in constants.items())))
        verdicts = target.callees.verdicts
        if key not in verdicts:
            if self.depth >= _MAX_CALL_DEPTH:
                return "harmful"
            verdicts[key] = "harmful"
            inner = Uses(target.function, target.callees, target.klass, self.depth + 1, constants)
            verdicts[key] = inner.parameter(param)
        return verdicts[key]

    def _operation(self, parent: cst.CSTNode, node: cst.CSTNode, seen: set[str]) -> bool:
        if isinstance(parent, cst.ComparisonTarget):
            if isinstance(parent.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                return False
            comparison = self.parents.get(id(parent))
            return not all(self._beside(o) for o in _operands(comparison) if o is not node) or (
                self._harmful(comparison, seen)
            )
        operands = _operands(parent)
        if any(not self._beside(o) and not self._scalar_here(o, parent) for o in operands if o is not node):
            return True  # meets the other operand
        return self._harmful(parent, seen)

    def _scalar_here(self, expr: cst.BaseExpression, operation: cst.CSTNode) -> bool:
        """``torch.arange(end=half) / half``: ``expr`` also sizes or bounds a factory in the
        statement that computes ``operation``, so wherever the program runs at all it is a
        number or a 0-dim tensor (factories take nothing else there), and a 0-dim tensor meets
        tensors on any device. Only in one statement that binds no name inside (no walrus,
        no comprehension), so both places read the same value."""
        if not _pure(expr):
            return False
        statement = operation
        while statement is not None and not isinstance(statement, cst.BaseSmallStatement):
            statement = self.parents.get(id(statement))
        if statement is None:
            return False
        wanted, found, binds = code(expr), False, False

        def enter(node: cst.CSTNode) -> bool:
            nonlocal found, binds
            if isinstance(node, (cst.NamedExpr, cst.CompFor, cst.Lambda)):
                binds = True
            elif isinstance(node, cst.Call) and (self.qualify(node.func) or "") in _SCALAR_TAKERS:
                for arg in node.args:
                    if arg.star or (arg.keyword is not None and arg.keyword.value not in _SCALAR_KEYWORDS):
                        continue
                    value = arg.value
                    sizes = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
                    found = found or any(code(v) == wanted for v in sizes)
            return not binds

        tree.walk(statement, enter)
        return found and not binds

    def _element(self, element: cst.CSTNode, seen: set[str]) -> bool:
        container = self.parents.get(id(element))
        if container is None:
            return True
        if self._stored(container):
            return False  # `a, b = ...`: a target, not a use
        if isinstance(container, cst.Tuple) and isinstance(self.parents.get(id(container)), cst.Return) and not any(
            isinstance(e, cst.StarredElement) for e in container.elements
        ):  # `return h, t`: packed for the caller, meeting nothing here
            return self._returned(container.elements.index(element))
        siblings = [e.value for e in getattr(container, "elements", ()) if e is not element]
        if any(not self._beside(s) for s in siblings):
            return True  # `torch.cat([x, t])`, `(h, c)` given to an LSTM
        return self._harmful(container, seen)

    def _assigned(self, assign: cst.Assign, seen: set[str]) -> bool:
        for target in assign.targets:
            names = _unpacked_names(target.target)
            if names is None:
                # `pe[:, 0] = t` copies into another tensor; anything else stores it
                if isinstance(target.target, cst.Subscript):
                    continue
                if self._kept(target.target):
                    continue
                return True
            if self._names_harmful(names, seen, assign):
                return True
        return False

    def _keyword_value(self, element: cst.DictElement, seen: set[str]) -> bool:
        """``kwargs = {"grid": t}``, later ``block(h, **kwargs)``: the value is followed as
        keyword ``grid`` of each call the dict is spread into. The dict may also be
        updated (``kwargs.update(...)``) or read at other keys; any other use of it is
        harmful. A dict whose other values are all cut from autograd is a record for
        logging (``_record``): what becomes of it is no computation."""
        key = element.key
        container = self.parents.get(id(element))
        if isinstance(container, cst.Dict) and _record(container, element):
            return False
        assign = self.parents.get(id(container))
        if not (
            isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str)
            and isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return True
        name = assign.targets[0].target.value
        if name in self.nested:
            return True
        for load in self._live_loads(name):
            if not self._may_see(assign, load):
                continue
            parent = self.parents.get(id(load))
            if isinstance(parent, cst.Attribute) and parent.attr.value == "update" and isinstance(
                self.parents.get(id(parent)), cst.Call
            ):
                continue  # `kwargs.update(temb=...)`: adds others
            if isinstance(parent, cst.Arg) and parent.star == "**":
                call = self.parents.get(id(parent))
                keyword = cst.Arg(value=load, keyword=cst.Name(key.evaluated_value))
                landings = self._landings(call, keyword, parent) if isinstance(call, cst.Call) else None
                if not landings:
                    return True
                verdicts = {self._verdict(target, param, inner) for target, param, inner in landings}
                if "harmful" in verdicts or ("carried" in verdicts and self._harmful(call, seen)):
                    return True
                continue
            return True
        return False

    def _rows_0_dim(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a name every binding of which is a 1-D tensor (``torch.tensor`` of a
        flat list of numbers or of a parameter annotated ``list[float]``, ``arange``...)?
        Its rows, iterated, are 0-dim."""
        if not isinstance(expr, cst.Name) or expr.value in self.nested:
            return False
        bound = self.bindings.get(expr.value)
        return bool(bound) and all(b is not None and not b[1] and self._one_dim(b[0]) for b in bound)

    def _one_dim(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        head, _, last = (self.qualify(value.func) or "").rpartition(".")
        if head != "torch":
            return False
        if last in ("arange", "linspace", "logspace", "randperm"):
            return True
        data = value.args[0].value if value.args and value.args[0].keyword is None else None
        if last not in ("tensor", "as_tensor") or data is None:
            return False
        if isinstance(data, cst.BinaryOperation) and isinstance(data.operator, cst.Multiply):
            data = data.left if isinstance(data.left, cst.List) else data.right  # `[v] * n`
        if isinstance(data, cst.List):
            return all(_scalar(e.value) for e in data.elements)
        param = self.params.get(data.value) if isinstance(data, cst.Name) else None
        return param is not None and param.annotation is not None and _flat_number_list(param.annotation.annotation)

    def _kept(self, target: cst.BaseExpression) -> bool:
        """``self.<attr> = t``: harmless when the class reads the attribute somewhere and
        every read is harmless (what others do with it is theirs, as for TDL006)."""
        if not (
            isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
            and target.value.value == self.self_name and self.klass is not None
            and self.depth < _MAX_CALL_DEPTH
        ):
            return False
        read = False
        for method, self_name in methods(self.klass):
            uses = Uses(method, self.callees, self.klass, self.depth + 1)
            reads = uses.attribute_reads(self_name, target.attr.value)
            read = read or bool(reads)
            if any(uses.harmful(r) for r in reads):
                return False
        return read

    def _names_harmful(self, names: list[str], seen: set[str], binding: cst.CSTNode | None = None) -> bool:
        """Is a value bound to ``names`` (by the statement ``binding``) used harmfully
        through their loads?"""
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            for load in self._live_loads(name):
                if (binding is None or self._may_see(binding, load)) and self._harmful(load, seen):
                    return True
        return False

    def _may_see(self, binding: cst.CSTNode, load: cst.CSTNode) -> bool:
        """Can ``load`` run after ``binding``? Not when it comes earlier in the source, or
        sits in the other branch of an ``if``, with no loop around both."""
        above: dict[int, cst.CSTNode] = {}
        node = binding
        while node is not None:
            above[id(node)] = node
            node = self.parents.get(id(node))
        child, common = load, self.parents.get(id(load))
        while common is not None and id(common) not in above:
            child, common = common, self.parents.get(id(common))
        node = common
        while node is not None and node is not self.function:
            if isinstance(node, (cst.For, cst.While, cst.CompFor)):
                return True  # a later turn of the loop
            node = self.parents.get(id(node))
        if common is binding or common is None:
            return False  # read by the binding statement itself, before it stores
        if isinstance(common, cst.If):
            side = binding
            while self.parents.get(id(side)) is not common:
                side = self.parents.get(id(side))
            if {id(side), id(child)} == {id(common.body), id(common.orelse)}:
                return False  # `if ...: t = ... else: use(t)`
        return self.order[id(load)] > self.order[id(binding)]

    def _live_loads(self, name: str) -> list[cst.Name]:
        """The reads of ``name`` that may see a value bound to it here: not stores, not in
        a branch the followed call's constants rule out, and not after a statement that
        rebinds it to a moved value (``cos = cos.to(x.device)``) on every path."""
        return [
            load for load in self.loads.get(name, ())
            if not (self._stored(load) or self._is_store_base(load) or self._dead(load))
            and not any(self._dominates(move, load) for move in self.moving.get(name, ()))
        ]

    def _dead(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a branch of an ``if`` that the constants rule out?"""
        if not self.constants:
            return False
        child, parent = node, self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, cst.If) and child is not parent.test:
                holds = _evaluate(parent.test, self.constants)
                if holds is not None and holds != (child is parent.body):
                    return True
            child, parent = parent, self.parents.get(id(parent))
        return False

    def _dominates(self, assign: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Does the statement of ``assign`` run before ``node`` on every path: it comes
        earlier in a block that holds ``node``?"""
        statement = self.parents.get(id(assign))
        suite = self.parents.get(id(statement))
        if not isinstance(statement, cst.SimpleStatementLine) or suite is None:
            return False
        body = list(getattr(suite, "body", ()))
        child, parent = node, self.parents.get(id(node))
        while parent is not None:
            if parent is suite:
                return child in body and body.index(child) > body.index(statement)
            child, parent = parent, self.parents.get(id(parent))
        return False

    def _is_store_base(self, name: cst.Name) -> bool:
        """``pe`` in ``pe[:, 0] = ...``: written into, not read."""
        parent = self.parents.get(id(name))
        return isinstance(parent, cst.Subscript) and parent.value is name and self._stored(parent)

    # -- what else is surely where the followed value is ----------------------------------

    def _beside(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` surely no tensor (a Python number), or a tensor on the device of the
        followed value: the CPU. So it is the followed parameter, built without a device
        (``torch.arange(n)``, ``torch.LongTensor(ids)``), on such a tensor's device
        (``device=t.device``), or computed from such values only, along every binding of
        the names it reads. Meeting it mixes nothing across devices."""
        if _constant(expr):
            return True
        if isinstance(expr, cst.Name):
            return self._name_beside(expr.value)
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Name) and expr.value.value == self.self_name and self.klass is not None:
                return _number_attribute(self.klass, expr.attr.value)
            if isinstance(expr.value, cst.Name) and expr.value.value == self.function.name.value:
                return self._own_attribute_beside(expr.attr.value)
            return expr.attr.value in NON_TENSOR_ATTRIBUTES or (
                expr.attr.value in ("T", "mT", "real", "imag") and self._beside(expr.value)
            )
        if isinstance(expr, cst.Subscript):
            return self._beside(expr.value)
        if isinstance(expr, (cst.BinaryOperation, cst.Comparison)):
            return all(self._beside(o) for o in _operands(expr))
        if isinstance(expr, cst.UnaryOperation):
            return self._beside(expr.expression)
        if isinstance(expr, cst.BooleanOperation):
            return self._optional_number(expr) or (self._beside(expr.left) and self._beside(expr.right))
        if isinstance(expr, cst.IfExp):
            return self._beside(expr.body) and self._beside(expr.orelse)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(self._beside(e.value) for e in expr.elements)
        if isinstance(expr, cst.Call):
            return self._call_beside(expr)
        return False

    def _optional_number(self, expr: cst.BooleanOperation) -> bool:
        """``count or 0`` of a parameter: the author reads the parameter as an optional
        number, substituting a number for a missing one. A tensor there would be tested
        for truth, which PyTorch refuses for every tensor of more than one element, so
        where the program works the value is a number (a one-element tensor is the only
        exception, and no way to pass a count)."""
        left, right = expr.left, expr.right
        return (
            isinstance(expr.operator, cst.Or) and isinstance(right, (cst.Integer, cst.Float))
            and isinstance(left, cst.Name) and left.value in self.params and not self.bindings.get(left.value)
            and left.value not in self.nested
        )

    def _own_attribute_beside(self, attr: str) -> bool:
        """``buffered_arange.buf``, a cache the function keeps on itself: every value the
        function stores there is surely on the CPU. The cache outlives the call, so this
        takes the project's calls to agree with the one followed on the parameters those
        values read (``device="cpu"`` left at its default)."""
        stored = self.own_attributes.get(attr)
        key = f"{self.function.name.value}.{attr}"
        if not stored or key in self._weighing:
            return bool(stored)  # a store being weighed: the others decide
        self._weighing.add(key)
        try:
            return all(value is not None and self._beside(value) for value in stored)
        finally:
            self._weighing.discard(key)

    def returns_beside(self) -> bool:
        """Does every ``return`` of the function give a value surely on the CPU (or no
        tensor)? A generator, or a path that falls off the end, does not count."""
        return bool(self.returns) and not self.yields and all(
            r.value is not None and self._beside(r.value) for r in self.returns
        )

    def _name_beside(self, name: str) -> bool:
        if name in self._weighing:
            return True  # a binding being weighed: the others decide
        if name in self.origin and not self.bindings.get(name):
            return True  # the parameter being followed, never rebound
        param = self.params.get(name)
        if name in self.constants:
            return True  # a literal the followed call gives (or leaves at its default)
        if param is not None:
            annotation = param.annotation
            return annotation is not None and dotted_name(annotation.annotation) in _NUMBER_ANNOTATIONS
        bound = self.bindings.get(name)
        if not bound or name in self.nested or len(self._weighing) >= _MAX_WEIGHED:
            return False  # a global, an import, changed by a closure, or too long a chain
        self._weighing.add(name)
        try:
            return all(b is not None and self._binding_beside(b[0], b[1]) for b in bound)
        finally:
            self._weighing.discard(name)

    def _binding_beside(self, value: cst.BaseExpression, unpacked: bool) -> bool:
        if unpacked and isinstance(value, cst.Attribute) and value.attr.value == "shape":
            return True  # `b, t, c = x.shape`: numbers
        if unpacked and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
            value.func.attr.value == "size" and not value.args
        ):
            return True  # `b, t = x.size()`
        return self._beside(value)

    def _call_beside(self, call: cst.Call) -> bool:
        qualified = self.qualify(call.func) or dotted_name(call.func) or ""
        head, _, last = qualified.rpartition(".")
        arguments = [a.value for a in call.args]
        if qualified in _NUMBER_RESULTS or qualified in _CPU_RESULTS or qualified.startswith("math."):
            return True
        if head == "torch" and (last in NEW_TENSOR_FACTORIES or last in TENSOR_CLASSES):
            return self._made_here(call)
        if isinstance(call.func, cst.Attribute) and not qualified.startswith("torch."):
            method = call.func.attr.value
            if method == "cpu" or (method in NON_TENSOR_METHODS and method not in _PIECES):
                return True
            if method == "to" and self._names_cpu(call):
                return True  # `.to("cpu")`, `.to(device)` with `device="cpu"` given
            if method in _MOVES:
                return False
            if method in _SIZE_METHODS and all(a.keyword is None and not a.star for a in call.args):
                return self._beside(call.func.value)  # `t.expand(-1, n)`: sizes move nothing
            if self._returns_beside(call):
                return True  # the project's own method, returning CPU tensors
            return self._beside(call.func.value) and all(self._beside(a) for a in arguments)
        if qualified.startswith("torch.") or qualified in ("abs", "min", "max", "sum", "round"):
            return all(self._beside(a) for a in arguments)  # an op on such values only
        return self._returns_beside(call)

    def _names_cpu(self, call: cst.Call) -> bool:
        """``x.to("cpu")``, or ``x.to(device)`` where the followed call fixes ``device``
        to ``"cpu"``."""
        where = next(
            (a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None
        )
        if isinstance(where, cst.SimpleString):
            return where.evaluated_value == "cpu"
        return isinstance(where, cst.Name) and self.constants.get(where.value) == "cpu"

    def _returns_beside(self, call: cst.Call) -> bool:
        """A function of the project (``Callees.target``) every ``return`` of which gives a
        value surely on the CPU, given what this call passes: ``make_positions(n)`` that
        returns ``torch.arange(n)``. Remembered per resolver, like parameter verdicts."""
        if self.callees is None or self.depth >= _MAX_CALL_DEPTH or any(a.star for a in call.args):
            return False
        target = self.callees.target(call, self.klass, self.self_name)
        if target is None:
            return False
        constants = _constants(target, call)
        key = (id(target.function), "<returns>", tuple(sorted((k, repr(v)) for k, v in constants.items())))
        verdicts = target.callees.verdicts
        if key not in verdicts:
            verdicts[key] = "harmful"  # a cycle: not known
            inner = Uses(target.function, target.callees, target.klass, self.depth + 1, constants)
            verdicts[key] = "beside" if inner.returns_beside() else "harmful"
        return verdicts[key] == "beside"

    def _made_here(self, call: cst.Call) -> bool:
        """A factory without ``device=`` (the CPU), with ``device="cpu"``, or with the
        followed value's own device (``device=t.device``)."""
        for arg in call.args:
            if arg.star == "**" or (arg.keyword is not None and arg.keyword.value == "out"):
                return False
            if arg.keyword is not None and arg.keyword.value == "device":
                value = arg.value
                if isinstance(value, cst.SimpleString):
                    return value.evaluated_value == "cpu"
                return (
                    isinstance(value, cst.Attribute) and value.attr.value == "device"
                    and isinstance(value.value, cst.Name) and self._name_beside(value.value.value)
                )
        return True


def made_on_cpu(expr: cst.BaseExpression, qualify) -> bool:
    """``torch.LongTensor(ids)``, ``torch.zeros(n).long()``: a tensor built right here on
    the CPU (a factory without ``device=``, or with ``"cpu"``), through methods that keep
    its device. Where it is handed on, it is no input that may be on a GPU."""
    while (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
        and not (qualify(expr.func) or "").startswith("torch.")
    ):
        method = expr.func.attr.value
        if method == "cpu":
            return True
        if method in _MOVES or (method in NON_TENSOR_METHODS and method not in _PIECES):
            return False
        expr = expr.func.value
    if not isinstance(expr, cst.Call):
        return False
    head, _, last = (qualify(expr.func) or "").rpartition(".")
    if head != "torch" or (last not in NEW_TENSOR_FACTORIES and last not in TENSOR_CLASSES):
        return False
    device = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value in ("device", "out")), None)
    if any(a.star == "**" for a in expr.args):
        return False
    return device is None or (isinstance(device, cst.SimpleString) and device.evaluated_value == "cpu")


def _names_something_else(name: cst.Name, parent: cst.CSTNode | None) -> bool:
    """``x.name``, ``f(name=...)``, ``def f(name)``, ``def name``: not a use of a variable."""
    return (
        (isinstance(parent, cst.Attribute) and parent.attr is name)
        or (isinstance(parent, cst.Arg) and parent.keyword is name)
        or (isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef)) and parent.name is name)
    )


def _unpacked_names(target: cst.BaseExpression) -> list[str] | None:
    """The names an assignment target binds (``a``, ``a, b``); None for anything else."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Name) for e in target.elements):
        return [e.value.value for e in target.elements]
    return None


def attribute_meets_module(
    klass: cst.ClassDef, attr: str, skipped: set[str], before_store: bool = False,
    callees: Callees | None = None,
) -> bool:
    """Does some method of ``klass`` not in ``skipped`` (those that build the module) use
    ``self.<attr>`` harmfully? With ``before_store`` (a method sets the attribute again),
    only reads in such a method before its own first assignment count: recurrent state
    used and then replaced in ``forward``; a cache rebuilt before use is not the CPU
    tensor ``__init__`` made. ``callees`` follows the attribute into the calls it is
    handed to."""
    for method, self_name in methods(klass):
        if method.name.value in skipped:
            continue
        uses = Uses(method, callees, klass)
        reads = uses.attribute_reads(self_name, attr)
        if before_store:
            stores = uses.attribute_stores(self_name, attr)
            reads = [r for r in reads if stores and uses.read_before_store(r, stores[0])]
        if any(uses.harmful(read) for read in reads):
            return True
    return False


def tensor_inputs(function: cst.FunctionDef) -> set[str]:
    """The parameters of a method (not ``self``) that may carry the caller's tensors: no
    default but ``None``, no annotation naming a number, a string or a flag."""
    params = function.params
    ordered = [*params.posonly_params, *params.params][1:] + list(params.kwonly_params)
    return {
        p.name.value for p in ordered
        if (p.default is None or (isinstance(p.default, cst.Name) and p.default.value == "None"))
        and not (p.annotation is not None and code(p.annotation.annotation) in _NUMBER_ANNOTATIONS)
    }


def attribute_meeting(
    klass: cst.ClassDef, attr: str, skipped: set[str], callees: Callees | None = None,
) -> tuple[cst.CSTNode, cst.FunctionDef] | None:
    """Where ``self.<attr>``, read in a method of ``klass`` not in ``skipped``, meets a
    tensor computed from that method's inputs (``Uses.meeting``): the meeting node and the
    method. None when no read shows one."""
    for method, self_name in methods(klass):
        if method.name.value in skipped:
            continue
        inputs = tensor_inputs(method)
        if not inputs:
            continue
        uses = Uses(method, callees, klass)
        for read in uses.attribute_reads(self_name, attr):
            found = uses.meeting(read, inputs)
            if found is not None:
                return found, method
    return None


def _operands(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation):
        return [node.left, node.right]
    if isinstance(node, cst.Comparison):
        return [node.left, *(c.comparator for c in node.comparisons)]
    return []


def _pure(expr: cst.BaseExpression) -> bool:
    """Names, attributes and numbers combined by operators: reading it twice in one
    statement gives the same value."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Attribute):
        return _pure(expr.value)
    if isinstance(expr, cst.BinaryOperation):
        return _pure(expr.left) and _pure(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _pure(expr.expression)
    return False


def _constant(expr: cst.BaseExpression) -> bool:
    """A Python constant: a 0-dim value cannot pull a tensor across devices."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False", "None")
    if isinstance(expr, cst.Attribute):  # `torch.long`, `math.pi`
        return (dotted_name(expr) or "").startswith(("torch.", "math.", "np.", "numpy."))
    if isinstance(expr, cst.UnaryOperation):
        return _constant(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _constant(expr.left) and _constant(expr.right)
    return False


def _moves(value: cst.BaseExpression) -> bool:
    """``t.to(x.device)``, ``t.cuda()``: a value on the device it is moved to."""
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _MOVES and not (value.func.attr.value == "to" and changes_dtype_only(value))
    )


def _literal(expr: cst.BaseExpression) -> tuple[bool, object]:
    """(True, value) for ``True``/``False``/``None``, a number or a string."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return True, {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.Integer):
        return True, int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(
        expr.expression, cst.Integer
    ):
        return True, -int(expr.expression.value, 0)
    if isinstance(expr, cst.SimpleString):
        return True, expr.evaluated_value
    return False, None


def _constants(target: Target, call: cst.Call) -> dict[str, object]:
    """The parameters of ``target`` that ``call`` fixes to a literal: given one, or left
    at a literal default (nothing unpacked into the call). The callee must not rebind
    them; ``Uses`` checks its own bindings."""
    params = target.function.params
    positional = [*params.posonly_params, *params.params][1 if target.bound else 0:]
    if any(a.star for a in call.args):
        return {}
    given: dict[str, cst.BaseExpression] = {}
    plain = [a for a in call.args if a.keyword is None]
    for param, a in zip(positional, plain):
        given[param.name.value] = a.value
    for a in call.args:
        if a.keyword is not None:
            given[a.keyword.value] = a.value
    constants: dict[str, object] = {}
    for param in [*positional, *params.kwonly_params]:
        value = given.get(param.name.value, param.default)
        if value is not None:
            known, literal = _literal(value)
            if known:
                constants[param.name.value] = literal
    return constants


def _evaluate(test: cst.BaseExpression, constants: dict[str, object]) -> bool | None:
    """The truth of ``test`` given ``constants`` (``flag``, ``not flag``, ``n == 2``,
    ``mode != "a"``); None when it depends on anything else."""
    if isinstance(test, cst.Name) and test.value in constants:
        return bool(constants[test.value])
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _evaluate(test.expression, constants)
        return None if inner is None else not inner
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        comparison = test.comparisons[0]
        known, literal = _literal(comparison.comparator)
        if test.left.value in constants and known:
            if isinstance(comparison.operator, (cst.Equal, cst.Is)):
                return constants[test.left.value] == literal
            if isinstance(comparison.operator, (cst.NotEqual, cst.IsNot)):
                return constants[test.left.value] != literal
    return None


def _number_attribute(klass: cst.ClassDef, attr: str) -> bool:
    """Does every method of ``klass`` that assigns ``self.<attr>`` give it a Python number:
    a constant, or a parameter annotated ``int``/``float``/``bool``?"""
    values: list[tuple[cst.BaseExpression, cst.FunctionDef]] = []
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue

        def enter(node: cst.CSTNode, method=method) -> bool:
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    if any(isinstance(n, cst.Attribute) and n.attr.value == attr for n in _flat(target)):
                        values.append((node.value if not isinstance(node, cst.AugAssign) else None, method))
            return True

        tree.walk(method.body, enter)
    if not values:
        return False
    for value, method in values:
        if value is None:
            return False
        if _constant(value) and not isinstance(value, cst.SimpleString):
            continue
        params = {p.name.value: p for p in [*method.params.params, *method.params.kwonly_params]}
        param = params.get(value.value) if isinstance(value, cst.Name) else None
        if param is None or param.annotation is None or dotted_name(param.annotation.annotation) not in (
            "int", "float", "bool"
        ):
            return False
    return True


def _record(container: cst.Dict, element: cst.DictElement) -> bool:
    """``{"loss": loss.detach().mean(), "acc": acc.item(), "scale": t}``: two or more other
    values, every one detached from autograd (``.detach()``, ``.item()``, ``.tolist()``
    somewhere along its chain of methods). Code keeps such values to report them, not to
    compute with them, so a CPU tensor among them is reported, not mixed (a consumer that
    stacks the record's values is not seen)."""
    others = [e for e in container.elements if e is not element]
    return len(others) >= 2 and all(isinstance(e, cst.DictElement) and _detached(e.value) for e in others)


def _detached(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ("detach", "item", "tolist"):
            return True
        expr = expr.func.value
    return False


def _flat(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _flat(e.value)]
    return [target]


# Words of names and strings through which a test reaches an accelerator.
_ACCELERATOR_WORDS = frozenset("cuda gpu gpus mps xpu npu hpu device devices accelerator accelerators".split())


def cpu_only_scope(ancestors) -> bool:
    """Is the innermost function or block around the last of ``ancestors`` (a class being
    defined) code that never reaches an accelerator: a ``test*`` function that takes
    nothing but ``self`` (no fixture or parameter hands it a device), or a script's
    ``if __name__ == "__main__":`` block, in which nothing, decorators included, names a
    device (``"cuda"``, ``device``, ``.cuda()``, ``accelerator=``) or moves anything
    (``.to(...)``)? A module class defined there can only run there, on the CPU. A helper
    it calls that moves the module itself is not seen."""
    for node in reversed(ancestors[:-1]):
        if isinstance(node, cst.FunctionDef):
            params = node.params
            return (
                node.name.value.startswith("test")
                and [p.name.value for p in [*params.posonly_params, *params.params]] in ([], ["self"])
                and not (params.kwonly_params or isinstance(params.star_arg, cst.Param) or params.star_kwarg)
                and not _names_an_accelerator(node)
            )
        if isinstance(node, cst.If) and is_main_guard(node.test):
            return not _names_an_accelerator(node)
        if isinstance(node, cst.ClassDef):
            return False
    return False


def _names_an_accelerator(root: cst.CSTNode) -> bool:
    reached = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal reached
        text = None
        if isinstance(node, cst.Name):
            text = node.value
        elif isinstance(node, cst.SimpleString):
            text = str(node.evaluated_value)
        if text is not None and (words(text) & _ACCELERATOR_WORDS or text == "to"):
            reached = True
        return not reached

    tree.walk(root, enter)
    return reached

def _scalar(expr: cst.BaseExpression) -> bool:
    """A list element that is one number (or a 0-dim value): a constant, or an arithmetic
    result no sequence gives (``1 / n``, ``-x``); ``a + b`` may join lists."""
    if _constant(expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return isinstance(expr.operator, (cst.Divide, cst.Power, cst.Subtract, cst.FloorDivide))
    return isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus)


def _flat_number_list(annotation: cst.BaseExpression) -> bool:
    """``list[float]``, ``List[int]``, ``list[float] | None``, ``Optional[list[float]]``."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [annotation.left, annotation.right]
        return any(_flat_number_list(s) for s in sides) and all(
            _flat_number_list(s) or (isinstance(s, cst.Name) and s.value == "None") for s in sides
        )
    if not isinstance(annotation, cst.Subscript) or len(annotation.slice) != 1:
        return False
    inner = annotation.slice[0].slice
    if not isinstance(inner, cst.Index):
        return False
    head = (dotted_name(annotation.value) or "").rsplit(".", 1)[-1]
    if head == "Optional":
        return _flat_number_list(inner.value)
    return head in ("list", "List") and dotted_name(inner.value) in ("float", "int")



def _only_passes_on(function: cst.FunctionDef, name: str) -> bool:
    """Does ``function`` use its ``**name`` only by spreading it into calls
    (``self.processor(self, h, **name)``), reading its keys (``[k for k, _ in
    name.items()]``), or rebuilding it filtered by key (``name = {k: v for k, v in
    name.items() if k in wanted}``)? Then a keyword it takes there reaches only those
    calls."""
    uses = Uses(function)
    for load in uses.loads.get(name, ()):
        parent = uses.parents.get(id(load))
        if isinstance(parent, cst.Arg) and parent.star == "**" or uses._stored(load):
            continue
        call = uses.parents.get(id(parent))
        if not (
            isinstance(parent, cst.Attribute) and parent.attr.value in ("items", "keys")
            and isinstance(call, cst.Call) and not call.args
        ):
            return False
        if parent.attr.value == "keys":
            continue
        loop = uses.parents.get(id(call))
        comprehension = uses.parents.get(id(loop))
        if not (
            isinstance(loop, cst.CompFor) and loop.iter is call and isinstance(loop.target, cst.Tuple)
            and len(loop.target.elements) == 2 and isinstance(loop.target.elements[1].value, cst.Name)
            and isinstance(comprehension, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp))
        ):
            return False
        value = loop.target.elements[1].value.value
        if isinstance(comprehension, cst.DictComp):
            assign = uses.parents.get(id(comprehension))
            if (
                isinstance(assign, cst.Assign) and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name) and assign.targets[0].target.value == name
                and isinstance(comprehension.value, cst.Name) and comprehension.value.value == value
                and not _mentions_name(comprehension.key, value)
                and not any(_mentions_name(i.test, value) for i in loop.ifs)
            ):
                continue  # filtered by key into the same dict
            return False
        if _mentions_name(comprehension.elt, value) or any(_mentions_name(i.test, value) for i in loop.ifs):
            return False  # the values are used
    return True


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    found = False

    def enter(inner: cst.CSTNode) -> bool:
        nonlocal found
        found = found or (isinstance(inner, cst.Name) and inner.value == name)
        return not found

    tree.walk(node, enter)
    return found


def returns_cpu_built(function: cst.FunctionDef, qualify) -> bool:
    """Every ``return`` of ``function`` gives a tensor built from a factory without
    ``device=`` (``torch.arange(w).repeat(h, 1)``, then torch ops and arithmetic on it), and
    no move on the way: a CPU tensor with elements. A tensor of the inputs it was mixed with
    can only have been 0-dim (or the function itself failed), so the result is on the CPU
    wherever its arguments came from."""
    bound: dict[str, list[cst.BaseExpression | None]] = {}
    returns: list[cst.BaseExpression | None] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not function:
            return False
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    bound.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name):
            bound.setdefault(node.target.value, []).append(None)  # changed in place: not followed
        elif isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
            for name in tree.collect(node.target, cst.Name):  # a loop's items: not followed
                bound.setdefault(name.value, []).append(None)
        elif isinstance(node, cst.Return):
            returns.append(node.value)
        return True

    tree.walk(function, enter)

    def built(expr: cst.BaseExpression | None, depth: int) -> bool:
        if expr is None or depth > 24:  # a chain of ops, or a name bound to itself (`x = x * 2`)
            return False
        if isinstance(expr, cst.Name):
            values = bound.get(expr.value)
            return bool(values) and all(built(v, depth + 1) for v in values)
        if isinstance(expr, cst.BinaryOperation):
            return built(expr.left, depth + 1) or built(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return built(expr.expression, depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        name = qualify(expr.func) or ""
        head, _, last = name.rpartition(".")
        if head == "torch" and last in NEW_TENSOR_FACTORIES and last not in ("tensor", "as_tensor", "asarray"):
            return keyword_argument(expr, "device") is None
        if isinstance(expr.func, cst.Attribute) and head != "torch":
            return expr.func.attr.value not in _NOT_KEEPING_PLACE and built(expr.func.value, depth + 1)
        # `torch.exp(x)`, `torch.pow(x - y, 2)`: torch's ops on a CPU tensor with elements
        return head == "torch" and last not in _NOT_KEEPING_PLACE and any(
            built(a.value, depth + 1) for a in expr.args if a.keyword is None)

    return bool(returns) and all(built(value, 0) for value in returns)
