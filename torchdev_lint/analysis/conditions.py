"""What a test says about the machine: is an accelerator present (or wanted) when it holds?

``if torch.cuda.is_available():`` guards its body, ``if not torch.cuda.is_available():``
guards its ``else:``, ``if args.cpu:`` guards neither branch for CUDA but ``if not args.cpu:``
guards its body. The evaluator reads a test by meaning, not by the words in its text:
each atom (an availability call, a user flag, a comparison of a device with ``"cuda"``...)
says what holds when it is true and when it is false, and ``not``/``and``/``or`` combine
those. Anything it does not understand is UNKNOWN, and UNKNOWN is not a guard.

Names are split into words (``use_cuda`` -> use, cuda; ``nGPU`` -> n, gpu), so ``output``
and ``input`` are not ``tpu``/``npu``, and ``timestamps`` is not ``mps``.

A device may be compared with a module constant (``_CPU_DEVICE = torch.device("cpu")``,
then ``if self.device == _CPU_DEVICE:``): a name bound once, by a top-level assignment, and
bound nowhere else in the file (no other assignment, loop, parameter, local, ``del``...) holds
that value wherever it is read, so it is read as the value.
"""

from __future__ import annotations

import collections
import enum
import re
from contextvars import ContextVar
from typing import Callable, Optional

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.devices import bind_sites, bindings
from torchdev_lint.analysis.imports import dotted_name


class Machine(enum.Enum):
    ACCELERATOR = "accelerator"  # an accelerator is present or wanted
    CPU = "cpu"  # none is, or the user asked for the CPU
    UNKNOWN = "unknown"


ACCELERATOR, CPU, UNKNOWN = Machine.ACCELERATOR, Machine.CPU, Machine.UNKNOWN

# Resolves a name to what it was imported as (``is_available`` -> ``torch.cuda.is_available``).
Qualifier = Callable[["cst.BaseExpression"], Optional[str]]

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
ACCELERATOR_WORDS = frozenset(
    """cuda gpu gpus ngpu ngpus cudnn nccl mps xpu npu hpu tpu accelerator accelerators
    multigpu triton""".split()
)
_CPU_WORDS = frozenset({"cpu", "cpus"})
# `no_cuda`, `disable_gpu`, `skip_cuda`: the flag asks for the CPU.
_NEGATING_WORDS = frozenset({"no", "not", "disable", "disabled", "without", "skip", "avoid"})
# Device names, and the collective backends that only run on accelerators (`nccl`, `hccl`).
# ROCm builds of PyTorch name their GPUs "cuda": a test suite's `torch_device == "rocm"`.
_ACCELERATOR_PREFIXES = ("cuda", "gpu", "mps", "xpu", "npu", "hpu", "tpu", "nccl", "hccl", "xccl",
                         "rocm")


def words(name: str) -> set[str]:
    """The lower-case words of an identifier or dotted name."""
    return {w.lower() for w in _WORDS.findall(name)}


def _name_of(expr: cst.BaseExpression, qualify: Qualifier | None) -> str | None:
    """The dotted name of a name, attribute, call, subscript (``opt["cuda"]`` -> opt.cuda)
    or the argument of ``len(...)``/``bool(...)``/``int(...)``/``str(...)``."""
    if isinstance(expr, cst.Call):
        inner = dotted_name(expr.func)
        if inner in ("len", "bool", "int", "str") and len(expr.args) == 1:
            return _name_of(expr.args[0].value, qualify)
        key = _key_read(expr)
        if key is not None:  # `config.get("use_cuda")`, `getattr(args, "no_cuda", False)`
            return key
        func = expr.func
    else:
        func = expr
    if isinstance(func, cst.Subscript) and len(func.slice) == 1:
        index = func.slice[0].slice
        base = _name_of(func.value, qualify) or ""
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return f"{base}.{index.value.evaluated_value}"
        return base or None
    if isinstance(func, cst.Attribute) and not isinstance(func.value, (cst.Name, cst.Attribute)):
        # `self.get_model().use_gpu`, `cfg["common"].cpu`: the last name says it.
        return func.attr.value
    if qualify is not None and isinstance(func, (cst.Name, cst.Attribute)):
        qualified = qualify(func)
        if qualified is not None:
            return qualified
    return dotted_name(func)


def _key_read(call: cst.Call) -> str | None:
    """``owner.key`` for a read of a setting by its name: ``owner.get("key", ...)`` or
    ``getattr(owner, "key", ...)``."""
    args = [a.value for a in call.args if a.keyword is None]
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "get" and args \
            and isinstance(args[0], cst.SimpleString):
        return f"{dotted_name(call.func.value) or 'setting'}.{args[0].evaluated_value}"
    if isinstance(call.func, cst.Name) and call.func.value == "getattr" and len(args) >= 2 \
            and isinstance(args[1], cst.SimpleString):
        return f"{dotted_name(args[0]) or 'setting'}.{args[1].evaluated_value}"
    return None


def _subject(expr: cst.BaseExpression, qualify: Qualifier | None) -> Machine:
    """What a name says when it is true: ``use_cuda`` -> ACCELERATOR, ``args.cpu`` and
    ``no_cuda`` -> CPU, anything else (``device``: only a comparison tells) UNKNOWN.
    Only the last part of a dotted name counts, except for the module path of a call
    (``torch.cuda.is_available()``)."""
    name = _name_of(expr, qualify)
    if name is None:
        return UNKNOWN
    head, _, last = name.rpartition(".")
    said = words(last)
    if isinstance(expr, cst.Call) and dotted_name(expr.func) not in ("len", "bool", "int", "str"):
        said |= words(head)  # torch.cuda.is_available(), torch.backends.mps.is_available()
    if said & ACCELERATOR_WORDS:
        return CPU if said & _NEGATING_WORDS else ACCELERATOR
    if said & _CPU_WORDS:
        return UNKNOWN if said & _NEGATING_WORDS else CPU
    return UNKNOWN


def module_constants(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """The names a top-level ``NAME = value`` binds that no other code of the file binds,
    in any scope: each always holds its value where it is read. None in a file with a
    ``from m import *``, which may bind any name. An option a script's top level sets once
    (``args.cuda = not args.no_cuda and torch.cuda.is_available()``), assigned nowhere else in
    the file, holds its value too (from where it is set on: a script's tests come after)."""
    assigned: dict[str, cst.BaseExpression] = {}
    options: dict[str, cst.BaseExpression] = {}
    after_star: set[str] = set()  # bound after every star import: the import cannot rebind it
    top_stars = 0
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    after_star.clear()
                    top_stars += 1
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target = small.targets[0].target
                    if isinstance(target, cst.Name):
                        assigned[target.value] = small.value
                        after_star.add(target.value)
                    elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) \
                            and target.value.value in assigned:
                        options[dotted_name(target)] = small.value
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    if isinstance(small.target, cst.Name):
                        assigned[small.target.value] = small.value
    if not assigned:
        return {}  # an option's object (`args`) is bound here too
    counts: dict[str, int] = {}
    star = [0]
    sites: dict[str, list[cst.CSTNode]] = {}  # every scope's `bindings`, in one walk

    def count(name: str, times: int = 1) -> None:
        counts[name] = counts.get(name, 0) + times

    def enter(node: cst.CSTNode) -> bool:
        bind_sites(node, sites)
        if isinstance(node, cst.Del):
            for name in _names_in(node.target):
                count(name)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            for name in _names_in(node.name.name):
                count(name)
        elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
            count(node.name.value)
        elif isinstance(node, cst.MatchMapping) and node.rest is not None:
            count(node.rest.value)
        elif isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
            star[0] += 1  # binds names nobody can see here
        return True

    tree.walk(module, enter)
    for name, bound in sites.items():
        count(name, len(bound))
    # a star import may bind any name (but not one bound after it at the top level, nor an
    # attribute of the file's own `args`)
    constants = {name: value for name, value in assigned.items()
                 if counts.get(name) == 1 and (not star[0] or star[0] == top_stars and name in after_star)}
    if options:
        sets = collections.Counter(
            dotted_name(t) for node in tree.collect(module, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign))
            for t in [node.target] if isinstance(t, cst.Attribute))
        constants.update((name, value) for name, value in options.items() if sets[name] == 1)
    return constants


def never_runs(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """``node`` sits in a branch its file's constants rule out: the body of ``if FLAG:`` (or
    ``elif FLAG:``) with ``FLAG = False`` set once at the top level and nowhere else, or the
    ``else`` of ``if FLAG:`` with ``FLAG = True``; the same with a flag its function binds once
    (``_local_constant``). Code that never runs fails nowhere."""
    constants = _constants.get()
    if constants is None:
        return False
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, cst.If) and child is not parent.test and isinstance(parent.test, cst.Name):
            name = parent.test.value
            value = constants.get(name) or _local_constant(name, parent, parents)
            if isinstance(value, cst.Name) and value.value in ("True", "False"):
                if (child is parent.body) == (value.value == "False"):
                    return True
        child, parent = parent, parents.get(id(parent))
    return False


def _local_constant(name: str, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.BaseExpression | None:
    """The value of ``name`` in the function around ``node`` when the function binds it once,
    by a plain assignment, and declares it neither global nor nonlocal (``SHOW = False`` before
    ``if SHOW:``): every read there sees that value."""
    function = parents.get(id(node))
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = parents.get(id(function))
    if function is None:
        return None
    sites = bindings(function).get(name, ())
    if len(sites) != 1 or not isinstance(sites[0], cst.Assign) or len(sites[0].targets) != 1 \
            or not isinstance(sites[0].targets[0].target, cst.Name):
        return None
    declared = any(name in (n.name.value for n in d.names)
                   for d in tree.collect(function, (cst.Global, cst.Nonlocal)))
    return None if declared else sites[0].value


def _names_in(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    return []


class _Constants:
    """The constants of the file being checked, read on the first question about a name;
    ``imported(name)``: the device string a project module binds the name to, when the file
    imports it from there (``ProjectIndex.imported_constant``)."""

    def __init__(self, module: cst.Module, imported: Callable[[str], str | None] | None = None) -> None:
        self.module = module
        self.imported = imported
        self.values: dict[str, cst.BaseExpression] | None = None
        self.sites: dict[str, list[cst.CSTNode]] | None = None  # bound other than by an import
        self.aliased: dict[str, list[cst.CSTNode]] = {}  # bound by an import

    def get(self, name: str) -> cst.BaseExpression | None:
        if self.values is None:
            self.values = module_constants(self.module)
        value = self.values.get(name)
        if value is None and self.imported is not None and name not in self.values:
            text = self.imported(name)
            self.values[name] = value = cst.SimpleString(repr(text)) \
                if text is not None and self._only_imported(name) else None
        return value

    def _only_imported(self, name: str) -> bool:
        """Nothing in the file binds ``name`` but its import (in any scope), if any."""
        if self.sites is None:
            self.sites, self.aliased = {}, {}
            tree.walk(self.module, lambda node: bind_sites(node, self.aliased if isinstance(node, cst.ImportAlias)
                                                            else self.sites) or True)
        return name not in self.sites and len(self.aliased.get(name, ())) <= 1


# The module of the file being checked (set by FileContext as it enters it; per thread).
_constants: ContextVar[_Constants | None] = ContextVar("torchdev_lint_constants", default=None)


def constant_value(name: str) -> cst.BaseExpression | None:
    """The value a top-level constant of the file being checked holds (``module_constants``)."""
    constants = _constants.get()
    return constants.get(name) if constants is not None else None


def remember_module(module: cst.Module | None, imported: Callable[[str], str | None] | None = None) -> None:
    """Names in tests of ``module`` may be its constants, or device strings it imports
    (``imported``) (None: no file, no constants)."""
    _constants.set(_Constants(module, imported) if module is not None else None)


def device_named(expr: cst.BaseExpression, depth: int = 0) -> Machine:
    """What a device value names (one a device is compared with, bound to a name, handed to a
    constructor): ``"cuda:0"``, ``torch.device("cuda")``,
    ``DeviceType.CUDA``, ``("cuda", "xpu")`` -> ACCELERATOR; ``"cpu"`` -> CPU; a module
    constant bound to one of these, what its value names."""
    if isinstance(expr, cst.Name):
        constants = _constants.get()
        value = constants.get(expr.value) if constants is not None and depth < 4 else None
        return device_named(value, depth + 1) if value is not None else UNKNOWN
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        found = {device_named(e.value, depth) for e in expr.elements}
        return found.pop() if len(found) == 1 else UNKNOWN
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("device") and expr.args:
        return device_named(expr.args[0].value, depth)
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        if isinstance(text, bytes):
            return UNKNOWN
        text = text.lower()
    elif isinstance(expr, cst.Attribute) and expr.attr.value.lower() in (*_ACCELERATOR_PREFIXES, "cpu"):
        text = expr.attr.value.lower()  # DeviceType.CUDA
    else:
        return UNKNOWN
    if text == "cpu":
        return CPU
    if text.startswith(_ACCELERATOR_PREFIXES):
        return ACCELERATOR
    return UNKNOWN


def _names_cpu(expr: cst.BaseExpression) -> bool:
    """A tuple, list or set of device names that includes the CPU."""
    return isinstance(expr, (cst.Tuple, cst.List, cst.Set)) and any(
        device_named(e.value) is CPU for e in expr.elements
    )


def _flip(machine: Machine) -> Machine:
    return {ACCELERATOR: CPU, CPU: ACCELERATOR}.get(machine, UNKNOWN)


def _unlike(named: Machine) -> Machine:
    """Where a device is not the one a comparison names: not the CPU is an accelerator, but
    not CUDA (or not one of some accelerators) may be the CPU or another GPU (MPS, XPU)."""
    return ACCELERATOR if named is CPU else UNKNOWN


def integer_value(expr: cst.BaseExpression) -> int | None:
    """An integer literal's value (``-1`` too), else None."""
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
    ):
        return -int(expr.expression.evaluated_value)
    return None


def _count_test(op: cst.BaseCompOp, n: int) -> tuple[Machine, Machine]:
    """``count OP n`` for a count of GPUs (or a GPU index, where -1 means none): what
    holds when it is true and when it is false. ``> 0``, ``>= 1``, ``>= 0``, ``!= -1``
    mean one is there, ``== 0`` and ``< 0`` that none is; ``> 1`` says nothing when false,
    nor does ``== 1``."""
    if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)):
        least = n + 1 if isinstance(op, cst.GreaterThan) else n  # the smallest count it allows
        if least < 0:
            return UNKNOWN, UNKNOWN
        return (ACCELERATOR, CPU) if least <= 1 else (ACCELERATOR, UNKNOWN)
    if isinstance(op, (cst.LessThan, cst.LessThanEqual)):
        most = n - 1 if isinstance(op, cst.LessThan) else n  # the largest count it allows
        return (CPU, ACCELERATOR) if most in (-1, 0) else (UNKNOWN, UNKNOWN)
    if isinstance(op, (cst.Equal, cst.NotEqual)) and n in (0, -1):
        return (CPU, ACCELERATOR) if isinstance(op, cst.Equal) else (ACCELERATOR, CPU)
    if isinstance(op, (cst.Equal, cst.NotEqual)) and n > 0:
        # `args.ngpu == 1`: that many GPUs (or GPU number n) are there; otherwise, perhaps more
        return (ACCELERATOR, UNKNOWN) if isinstance(op, cst.Equal) else (UNKNOWN, ACCELERATOR)
    return UNKNOWN, UNKNOWN


def _comparison(node: cst.Comparison, qualify: Qualifier | None) -> tuple[Machine, Machine]:
    if len(node.comparisons) != 1:
        return UNKNOWN, UNKNOWN
    target = node.comparisons[0]
    op, left, right = target.operator, node.left, target.comparator
    if isinstance(op, (cst.Is, cst.IsNot)) and isinstance(right, cst.Name) and right.value == "None":
        # `args.gpu is not None`: a GPU was given.
        said = _subject(left, qualify)
        if said is ACCELERATOR:
            return (ACCELERATOR, CPU) if isinstance(op, cst.IsNot) else (CPU, ACCELERATOR)
        return UNKNOWN, UNKNOWN
    if isinstance(op, (cst.In, cst.NotIn)):
        # `"cuda" in str(device)`, `device.type in ("cuda", "xpu")`
        value = device_named(left) if isinstance(left, cst.SimpleString) else device_named(right)
        if value is UNKNOWN and _names_cpu(right):
            # `flag in ("cpu", "mps")` is false: not the CPU, so an accelerator.
            pair = (UNKNOWN, ACCELERATOR)
        elif value is UNKNOWN:
            return UNKNOWN, UNKNOWN
        else:
            pair = (value, _unlike(value))
        return pair if isinstance(op, cst.In) else pair[::-1]
    if isinstance(op, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        value = device_named(right)
        if value is UNKNOWN:
            value = device_named(left)
        if value is UNKNOWN and (_names_nccl(left) or _names_nccl(right)):
            # `get_backend() == Backend.NCCL`: NCCL runs on GPUs only; another backend says nothing
            return (ACCELERATOR, UNKNOWN) if isinstance(op, (cst.Equal, cst.Is)) else (UNKNOWN, ACCELERATOR)
        if value is not UNKNOWN:
            pair = (value, _unlike(value))
            return pair if isinstance(op, (cst.Equal, cst.Is)) else pair[::-1]
    if _subject(left, qualify) is ACCELERATOR:
        n = integer_value(right)
        if n is not None:
            return _count_test(op, n)
        if isinstance(op, cst.GreaterThan):
            # `torch.cuda.device_count() > local_rank`: more GPUs than some index.
            return ACCELERATOR, UNKNOWN
    return UNKNOWN, UNKNOWN


def _names_nccl(expr: cst.BaseExpression) -> bool:
    """``"nccl"`` or ``torch.distributed.Backend.NCCL``: the process-group backend of GPUs."""
    if isinstance(expr, cst.SimpleString):
        return str(expr.evaluated_value).lower() == "nccl"
    return isinstance(expr, cst.Attribute) and expr.attr.value.lower() == "nccl"


def _compared_with_bool(test: cst.Comparison) -> tuple[cst.BaseExpression, bool] | None:
    """``x == True``/``x is False``/``x != False``: the flag ``x`` and the value the test
    holds it to; None for any other comparison."""
    if len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    right = target.comparator
    if not (isinstance(right, cst.Name) and right.value in ("True", "False")):
        return None
    value = right.value == "True"
    if isinstance(target.operator, (cst.Equal, cst.Is)):
        return test.left, value
    if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
        return test.left, not value
    return None


def _both(a: Machine, b: Machine) -> Machine:
    """What holds when two facts both hold."""
    if a is UNKNOWN:
        return b
    if b is UNKNOWN or a is b:
        return a
    return UNKNOWN  # contradictory: dead code, or a test we misread


def _either(a: Machine, b: Machine) -> Machine:
    """What holds when at least one of two facts holds."""
    return a if a is b else UNKNOWN


def implies(test: cst.BaseExpression, holds: bool = True, qualify: Qualifier | None = None) -> Machine:
    """What is known about the machine when ``test`` evaluates to ``holds``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return implies(test.expression, not holds, qualify)
    if isinstance(test, cst.BooleanOperation):
        left = implies(test.left, holds, qualify)
        right = implies(test.right, holds, qualify)
        conjunction = isinstance(test.operator, cst.And) == holds
        if conjunction and holds and (_availability(test.left) or _availability(test.right)):
            return ACCELERATOR  # `wish and torch.cuda.is_available()`: the machine has one
        if conjunction and ACCELERATOR in (left, right):
            # `use_cuda and not x.is_cuda`: both hold, so the machine has one (what the other
            # side reads as the CPU is where a value is, not what the machine lacks)
            return ACCELERATOR
        return _both(left, right) if conjunction else _either(left, right)
    if isinstance(test, cst.Comparison):
        flag = _compared_with_bool(test)
        if flag is not None:  # `args.cpu == False` reads as `not args.cpu`
            subject, value = flag
            return implies(subject, holds == value, qualify)
        when_true, when_false = _comparison(test, qualify)
        return when_true if holds else when_false
    if (
        isinstance(test, cst.Call)
        and isinstance(test.func, cst.Attribute)
        and test.func.attr.value == "startswith"
        and test.args
    ):  # str(device).startswith("cuda")
        value = device_named(test.args[0].value)
        return value if holds else _unlike(value)
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        said = _subject(test, qualify)
        if said is UNKNOWN and isinstance(test, cst.Attribute):
            return _option(test, holds, qualify)
        return said if holds else _flip(said)
    return UNKNOWN


_resolving: ContextVar[frozenset[str]] = ContextVar("torchdev_lint_resolving", default=frozenset())


def _option(test: cst.Attribute, holds: bool, qualify: Qualifier | None) -> Machine:
    """``args.mixmode`` that the script's top level set once from a test: that test."""
    name = dotted_name(test)
    constants = _constants.get()
    value = constants.get(name) if constants is not None and name else None
    if value is None or name in _resolving.get() or len(_resolving.get()) > 3:
        return UNKNOWN
    token = _resolving.set(_resolving.get() | {name})  # `args.x = args.x and ...` reads the option itself
    try:
        return implies(value, holds, qualify)
    finally:
        _resolving.reset(token)


def _availability(expr: cst.BaseExpression) -> bool:
    """``torch.cuda.is_available()`` or ``torch.cuda.device_count()``: a fact of the machine,
    not a wish of the user's."""
    return isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] in (
        "is_available", "device_count") and bool(words(dotted_name(expr.func) or "") & ACCELERATOR_WORDS)


def machine_only(test: cst.BaseExpression) -> bool:
    """The test asks the machine and nothing else: availability calls joined by
    ``not``/``and``/``or`` (``torch.cuda.is_available()``, ``torch.cuda.device_count() > 0``).
    ``args.cuda and torch.cuda.is_available()`` also reads the user's wish: not machine only."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return machine_only(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return machine_only(test.left) and machine_only(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _availability(test.left) and integer_value(test.comparisons[0].comparator) is not None
    return _availability(test)


def string_test(text: str) -> cst.BaseExpression | None:
    """The expression of a test written as a string (``pytest.mark.skipif("not cuda")``)."""
    try:
        return cst.parse_expression(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None


def is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"``: the block runs when the file is a script, never on import."""
    return (
        isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__"
        and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.SimpleString)
        and test.comparisons[0].comparator.evaluated_value == "__main__"
    )
