"""Moves that copy: which method calls give a *new* tensor on another device (or dtype), and
which values start on the CPU whatever the program does later.

``Tensor.to``/``.cuda()``/``.half()`` return the tensor itself when nothing changes (a CPU
tensor moved to the CPU) and a copy otherwise. The copy of an ``nn.Parameter`` is a plain
tensor computed from it: not a leaf, not a Parameter. Code that runs on a CPU machine
therefore works, and breaks where the device (or dtype) really changes. TDL010 and TDL012
ask these questions.
"""

from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import kinds
from torchdev_lint.analysis.conditions import words
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.tree import collect

PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Methods that return a copy on an accelerator (or in another dtype than float32).
_DEVICE_COPIES = frozenset({"cuda", "xpu", "mps", "npu", "hpu"})
_DTYPE_COPIES = frozenset({"half", "bfloat16", "double"})
# `.to(torch.float32)` on a float32 tensor returns it unchanged.
_DEFAULT_DTYPES = frozenset({"float", "float32"})
_CPU_GENERATOR = "torch.Generator"


def is_parameter_call(ctx, expr: cst.BaseExpression | None) -> bool:
    """``nn.Parameter(...)`` (under any import name)."""
    return isinstance(expr, cst.Call) and ctx.qualified_name(expr.func) in PARAMETER_CLASSES


def moved_new_parameter(ctx, expr: cst.BaseExpression) -> bool:
    """``nn.Parameter(t).cuda()``: a copying move of a Parameter built right there."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and copying_move(expr) is not None and is_parameter_call(ctx, expr.func.value))


def copying_move(call: cst.Call) -> str | None:
    """The method of ``x.<method>(...)`` when it returns a copy of a float32 CPU tensor on a
    machine with an accelerator: ``.cuda()``, ``.to(device)``, ``.half()``; None for
    ``.cpu()``, ``.float()``, ``.to(torch.float32)`` and anything else."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method in _DEVICE_COPIES or (method in _DTYPE_COPIES and not call.args):
        return method
    if method != "to" or not call.args or kinds.moves_to_cpu(call):
        return None
    if kinds.changes_dtype_only(call):
        dtype = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "dtype"), None)
        last = dtype.attr.value if isinstance(dtype, cst.Attribute) else (
            dtype.value if isinstance(dtype, cst.Name) else None)
        return None if last in _DEFAULT_DTYPES or last == "dtype" or last is None else method
    first = call.args[0]
    if first.keyword is None and isinstance(first.value, (cst.Name, cst.Attribute)) and not any(
        a.keyword is not None and a.keyword.value == "device" for a in call.args
    ):
        # `.to(other)` with a tensor argument, or `.to(dtype_var)`: not certainly a device.
        name = dotted_name(first.value) or ""
        if not _device_words(name):
            return None
    return method


def _device_words(name: str) -> bool:
    """``device``, ``self.device``, ``args.gpu``, ``local_rank``: a name that holds a device."""
    said = words(name.rpartition(".")[2])
    return bool(said & {"device", "dev", "cuda", "gpu", "rank", "accelerator", "devices"})


def names_cpu(expr: cst.BaseExpression | None) -> bool:
    """``"cpu"``, ``torch.device("cpu")``, ``cpu_device``: a device expression that says CPU."""
    if expr is None:
        return False
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return isinstance(value, str) and value.split(":")[0] == "cpu"
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("device") and expr.args:
        return names_cpu(expr.args[0].value)
    name = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    return name is not None and "cpu" in name.rpartition(".")[2].lower()


def keyword_argument(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def is_cpu_generator(ctx, expr: cst.BaseExpression | None) -> bool:
    """``torch.Generator()`` or ``torch.Generator(device="cpu")``, also with a seeding chain
    (``torch.Generator().manual_seed(0)``): a generator whose state lives on the CPU."""
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value == "manual_seed"):
        expr = expr.func.value
    if not isinstance(expr, cst.Call) or ctx.qualified_name(expr.func) != _CPU_GENERATOR:
        return False
    device = keyword_argument(expr, "device")
    positional = next((a for a in expr.args if a.keyword is None), None)
    chosen = device.value if device is not None else positional.value if positional is not None else None
    return chosen is None or names_cpu(chosen)


_LEGACY_CPU_CLASSES = frozenset(f"torch.{name}" for name in kinds.TENSOR_CLASSES if name != "Tensor")


def made_on_cpu(ctx, expr: cst.BaseExpression | None, depth: int = 0) -> cst.CSTNode | None:
    """Where ``expr`` builds a tensor that is certainly on the CPU: a factory without
    ``device=`` (and what tensor methods other than moves make of it), a legacy constructor
    (``torch.FloatTensor([...])``), or a name bound once, in the scope being visited, to one
    of those. None when it may be anywhere else."""
    if expr is None or depth > 3:
        return None
    if isinstance(expr, cst.Name):
        for scope in (ctx.function, ctx.ancestors[0]):
            sites = ctx.bindings(scope).get(expr.value) if scope is not None else None
            if sites:
                site = sites[0]
                if len(sites) == 1 and isinstance(site, cst.Assign) and len(site.targets) == 1:
                    return made_on_cpu(ctx, site.value, depth + 1)
                return None
        return None
    if ctx.value_of(expr).on_cpu:
        return expr
    root = expr
    while (isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute)
           and ctx.qualified_name(root.func) not in _LEGACY_CPU_CLASSES):
        if root.func.attr.value in ("to", "cuda", "xpu", "mps", "type", "type_as", "new_tensor"):
            return None
        root = root.func.value
    if isinstance(root, cst.Call) and ctx.qualified_name(root.func) in _LEGACY_CPU_CLASSES:
        return expr
    return None


def module_moved_by_project(ctx, klass: cst.ClassDef) -> tuple[cst.CSTNode, str] | None:
    """An evidence step when the project moves modules of class ``klass`` to a device other
    than the CPU (``ProjectIndex.moved_to_device``): what puts the rest on an accelerator.
    None where nothing in sight does, or where the project sets torch's default device to
    the accelerator (``set_default_tensor_type(torch.cuda.HalfTensor)``): the "CPU" tensors
    of the module are built there too."""
    name = klass.name.value
    index = ctx.index if ctx.index is not None and _indexed(ctx) else _one_file_index(ctx)
    if index is None or not any_moved_by_project(index, ctx.path, {name}):
        return None
    return klass.name, (f"the project moves `{name}` modules to a device (`.to(device)`/`.cuda()` of one, "
                        "of a module holding one, or of what a function building one returns)")


def any_moved_by_project(index, path: str, names: set[str]) -> bool:
    """``module_moved_by_project``'s question for the classes ``names`` of ``path``, asked of
    the index alone: before the file is parsed, whether any of them could answer it."""
    return any(index.moved_to_device(name, path) for name in names) and index.default_device() is None


def moved_by_override(ctx, attribute: str) -> bool:
    """A move override of another project file assigns ``attribute`` (YOLO's model moves its
    head's ``stride`` in ``_apply``): the attribute follows the module's moves."""
    return ctx.index is not None and ctx.index.moved_by_override(attribute)


def replaced_from_outside(ctx, attribute: str) -> bool:
    """Project code sets ``attribute`` on objects other than ``self`` (a pruning loop's
    ``module.prune_mask = (module.weight.abs() > t).float()``): what the class built there may
    not be what its methods meet."""
    return ctx.index is not None and ctx.index.replaced_from_outside(attribute)


def module_built_unmoved(ctx, klass: cst.ClassDef) -> tuple[cst.CSTNode, str] | None:
    """An evidence step when the project builds modules of class ``klass`` (a loss made in the
    training script) and moves none of them: whatever the module keeps stays on the CPU, so a
    CPU tensor it holds meets the inputs' device at its use, buffer or not. None otherwise."""
    name = klass.name.value
    index = ctx.index if ctx.index is not None and _indexed(ctx) else _one_file_index(ctx)
    if index is None or not index.builds(name) or index.moved_to_device(name, ctx.path) \
            or index.default_device() is not None:
        return None
    return klass.name, (f"the project builds `{name}` modules and moves none of them: what they keep stays on "
                        "the CPU, a buffer too")


def _indexed(ctx) -> bool:
    """The project index holds the checked file: not a notebook, whose classes no other file
    can import (a class of the same name elsewhere is another class), nor stdin."""
    return ctx.path.endswith(".py") and ctx.index.holds(ctx.path)


def _one_file_index(ctx):
    """The project index of the checked file alone, for a check run without one (the API on
    a string) or of a file it does not hold (a notebook): what the file itself moves. Built
    once per file, on the first question."""
    from torchdev_lint.analysis import project_index

    def build():
        index = project_index.ProjectIndex()
        path = "<stdin>.py" if ctx.path == "-" else ctx.path if ctx.path.endswith(".py") else f"{ctx.path}.py"
        index.add(path, ctx.source)  # the index reads Python files: a notebook's code cells as one
        return index

    return ctx.once(("one-file index",), build)


# Wrappers that scatter their inputs to the devices of the module's copies themselves.
_SCATTERING = frozenset({"DataParallel"})


def scatters_inputs(scope: cst.CSTNode, callee: cst.BaseExpression) -> bool:
    """``callee`` (``model``) is bound in ``scope``'s code to a ``DataParallel`` wrapper,
    which moves the inputs it is called with to its copies' devices."""
    wanted = dotted_name(callee)
    if wanted is None:
        return False
    return any(
        any(dotted_name(t.target) == wanted for t in assign.targets)
        and any((dotted_name(c.func) or "").rsplit(".", 1)[-1] in _SCATTERING for c in collect(assign.value, cst.Call))
        for assign in collect(scope, cst.Assign))
