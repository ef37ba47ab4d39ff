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
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import NON_TENSOR_ATTRIBUTES, NON_TENSOR_METHODS, changes_dtype_only

_MOVES = frozenset({"to", "cuda", "type_as"})
# Calls that only read, log or convert their argument to Python values.
_READERS = frozenset("""len print str repr int float bool isinstance format hash id type
    logging.info logging.debug logging.warning""".split())
_LOG_METHODS = frozenset({"log", "log_dict", "info", "debug", "warning", "add_scalar", "write"})
# Functions that want CPU data for the argument at that position or keyword.
_CPU_ARGUMENTS = {
    "pack_padded_sequence": (1, "lengths"),
    "bincount": (0, "input"),
}
# Keyword arguments that carry no tensor: an op given these alone mixes nothing.
_OPTION_KEYWORDS = frozenset("""dim dims axis dtype keepdim device layout requires_grad
    non_blocking batch_first enforce_sorted descending stable sorted return_counts""".split())


class Uses:
    """The uses of values computed inside ``function`` (a method)."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self.parents: dict[int, cst.CSTNode] = {}
        self.loads: dict[str, list[cst.Name]] = {}
        self.order: dict[int, int] = {}

        def enter(node: cst.CSTNode) -> bool:
            self.order[id(node)] = len(self.order)
            for child in tree.children(node):
                self.parents[id(child)] = node
            if isinstance(node, cst.Name):
                self.loads.setdefault(node.value, []).append(node)
            return not isinstance(node, (cst.FunctionDef, cst.ClassDef)) or node is function

        tree.walk(function, enter)

    def harmful(self, node: cst.CSTNode) -> bool:
        """Does the value of ``node`` (a CPU tensor) meet the module's tensors, leave the
        function, or get stored for later?"""
        return self._harmful(node, set())

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
        parent = self.parents.get(id(node))
        return (isinstance(parent, cst.AssignTarget) and parent.target is node) or (
            isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node
        )

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
        return True  # returned, yielded, stored, or a use we do not know

    def _attribute(self, attribute: cst.Attribute, seen: set[str]) -> bool:
        name = attribute.attr.value
        if name in NON_TENSOR_ATTRIBUTES:
            return False  # `.shape`, `.device`, `.dtype`
        call = self.parents.get(id(attribute))
        if not (isinstance(call, cst.Call) and call.func is attribute):
            return self._harmful(attribute, seen)  # `.T`, `.data`
        if name in _MOVES and not (name == "to" and changes_dtype_only(call)):
            return False  # moved before it is used
        if name in NON_TENSOR_METHODS:
            return False  # `.item()`, `.tolist()`, `.size()`
        return self._harmful(call, seen)  # `.float()`, `.unsqueeze(0)`: still on the CPU

    def _argument(self, arg: cst.Arg, seen: set[str]) -> bool:
        call = self.parents.get(id(arg))
        if not isinstance(call, cst.Call):
            return True
        name = dotted_name(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if name in _READERS or last in _LOG_METHODS:
            return False
        if last in _CPU_ARGUMENTS:
            position, keyword = _CPU_ARGUMENTS[last]
            positional = [a for a in call.args if a.keyword is None]
            if (arg.keyword is not None and arg.keyword.value == keyword) or (
                arg in positional and positional.index(arg) == position
            ):
                return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
            return False  # `x.to(cpu_tensor)`: names a device, mixes nothing
        others = [
            a.value for a in call.args
            if a is not arg and not (a.keyword is not None and a.keyword.value in _OPTION_KEYWORDS)
        ]
        if any(not _constant(o) for o in others):
            return True  # meets the other arguments (or a submodule's parameters)
        if not name.startswith(("torch.", "th.", "F.")):
            return True  # handed to code we do not follow
        return self._harmful(call, seen)  # `torch.sum(t)`: a CPU result

    def _operation(self, parent: cst.CSTNode, node: cst.CSTNode, seen: set[str]) -> bool:
        if isinstance(parent, cst.ComparisonTarget):
            if isinstance(parent.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                return False
            comparison = self.parents.get(id(parent))
            return not all(_constant(o) for o in _operands(comparison) if o is not node) or (
                self._harmful(comparison, seen)
            )
        operands = _operands(parent)
        if any(not _constant(o) for o in operands if o is not node):
            return True  # meets the other operand
        return self._harmful(parent, seen)

    def _element(self, element: cst.CSTNode, seen: set[str]) -> bool:
        container = self.parents.get(id(element))
        if container is None:
            return True
        siblings = [e.value for e in getattr(container, "elements", ()) if e is not element]
        if any(not _constant(s) for s in siblings):
            return True  # `torch.cat([x, t])`, `(h, c)` given to an LSTM
        return self._harmful(container, seen)

    def _assigned(self, assign: cst.Assign, seen: set[str]) -> bool:
        for target in assign.targets:
            if not isinstance(target.target, cst.Name):
                # `pe[:, 0] = t` copies into another tensor; anything else stores it
                if isinstance(target.target, cst.Subscript):
                    continue
                return True
            name = target.target.value
            if name in seen:
                continue
            seen.add(name)
            for load in self.loads.get(name, ()):
                if self._stored(load) or self._is_store_base(load):
                    continue
                if self._harmful(load, seen):
                    return True
        return False

    def _is_store_base(self, name: cst.Name) -> bool:
        """``pe`` in ``pe[:, 0] = ...``: written into, not read."""
        parent = self.parents.get(id(name))
        return isinstance(parent, cst.Subscript) and parent.value is name and self._stored(parent)


def attribute_meets_module(
    klass: cst.ClassDef, attr: str, skipped: set[str], before_store: bool = False
) -> bool:
    """Does some method of ``klass`` not in ``skipped`` (those that build the module) use
    ``self.<attr>`` harmfully? With ``before_store`` (a method sets the attribute again),
    only reads in such a method before its own first assignment count: recurrent state
    used and then replaced in ``forward``; a cache rebuilt before use is not the CPU
    tensor ``__init__`` made."""
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef) or method.name.value in skipped:
            continue
        params = [*method.params.posonly_params, *method.params.params]
        if not params:
            continue
        uses = Uses(method)
        self_name = params[0].name.value
        reads = uses.attribute_reads(self_name, attr)
        if before_store:
            stores = uses.attribute_stores(self_name, attr)
            reads = [r for r in reads if stores and uses.read_before_store(r, stores[0])]
        if any(uses.harmful(read) for read in reads):
            return True
    return False


def _operands(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation):
        return [node.left, node.right]
    if isinstance(node, cst.Comparison):
        return [node.left, *(c.comparator for c in node.comparisons)]
    return []


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
