"""Which device expression a fix can use at a given point without binding errors.

Order of preference (RULES.md): a device variable or attribute already in scope
(``device``, ``self.device``, ``args.device``), then the ``.device`` of a tensor at hand,
then a device helper the project has (DeepSpeed's ``get_accelerator()``, Accelerate's
``accelerator.device``, its own ``get_device()``), then a module-level default added once
after the imports. A name is only used where it is bound: a local ``device`` assigned
*later* in the same function makes ``device`` an unbound local there, so the fix spells the
default out inline instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import keyed_by_strings

if TYPE_CHECKING:
    from torchdev_lint.analysis.context import FileContext

DEVICE_NAME = "device"
_CONFIG_OBJECTS = ("args", "opt", "opts", "cfg", "config", "hparams", "self.args", "self.cfg",
                   "self.config", "self.hparams", "accelerator", "self.accelerator", "fabric",
                   "self.fabric")


# `fix-device`: how a fix spells the default device it adds.
CUDA_OR_CPU, ACCELERATOR = "cuda-or-cpu", "accelerator"
FIX_DEVICES = (CUDA_OR_CPU, ACCELERATOR)


@dataclass(frozen=True)
class DeviceChoice:
    code: str  # the expression to write
    needs_default: bool = False  # the module-level default must be added
    ours: bool = False  # our default (spelled inline, or the module-level one)
    # The program's own variable, bound once to the default a fix writes (an earlier fix's):
    # using it is exactly as safe as writing the default again.
    holds_default: bool = False

    @property
    def inline(self) -> bool:
        """Our default, spelled out where it is used (it names torch)."""
        return self.ours and not self.needs_default

    @property
    def existing(self) -> bool:
        """An expression of the program's own, rather than our default."""
        return not self.ours


def default_expression(torch_name: str, mode: str = CUDA_OR_CPU) -> str:
    """The default device: CUDA when present, else the CPU; or, in ``accelerator`` mode,
    whatever accelerator this machine has (CUDA, MPS, XPU, ...), else the CPU.
    ``current_accelerator()`` alone answers what torch was *built* for (a CUDA build on a
    machine without a GPU says cuda); ``check_available=True`` asks the machine, and the
    answer is None on a CPU-only build or machine."""
    if mode == ACCELERATOR:
        return (f"{torch_name}.accelerator.current_accelerator(check_available=True) "
                f'or {torch_name}.device("cpu")')
    return f'{torch_name}.device("cuda" if {torch_name}.cuda.is_available() else "cpu")'


def default_device_definition(torch_name: str, mode: str = CUDA_OR_CPU) -> str:
    return f"{DEVICE_NAME} = {default_expression(torch_name, mode)}"


def inline_default(torch_name: str, mode: str = CUDA_OR_CPU) -> DeviceChoice:
    expression = default_expression(torch_name, mode)
    return DeviceChoice(f"({expression})" if mode == ACCELERATOR else expression, ours=True)


def bindings(scope: cst.CSTNode) -> dict[str, list[cst.CSTNode]]:
    """Names bound directly in one scope's body (not in nested functions or classes), each
    with its binding sites: the node after which the name is bound (an assignment binds
    once its value is computed)."""
    names: dict[str, list[cst.CSTNode]] = {}

    def enter(node: cst.CSTNode) -> bool:
        if node is scope:  # a function's or class's own name is bound in the scope around it
            if not isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                bind_sites(node, names)
            return True
        bind_sites(node, names)
        return type(node).__name__ not in _SCOPES

    tree.walk(scope, enter)
    return names


def bind_sites(node: cst.CSTNode, names: dict[str, list[cst.CSTNode]]) -> None:
    """Add the names ``node`` binds in the scope around it to ``names``, with their sites
    (``bindings``). A dict lookup per node (an ``isinstance`` on LibCST's classes costs more),
    by class name: LibCST runs only once a file is parsed (``lazy.py``)."""
    binder = _BINDERS.get(type(node).__name__)
    if binder is not None:
        binder(node, names)


def _bind(target: cst.CSTNode, names: dict[str, list[cst.CSTNode]], site: cst.CSTNode | None = None) -> None:
    if isinstance(target, cst.Name):
        names.setdefault(target.value, []).append(site or target)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _bind(element.value, names, site)
    elif isinstance(target, cst.StarredElement):
        _bind(target.value, names, site)


def _bind_import(node: cst.ImportAlias, names: dict[str, list[cst.CSTNode]]) -> None:
    bound = node.asname.name if node.asname else node.name
    while isinstance(bound, cst.Attribute):
        bound = bound.value
    _bind(bound, names)


def _bind_assign(node: cst.Assign, names: dict[str, list[cst.CSTNode]]) -> None:
    for target in node.targets:
        _bind(target.target, names, node)


def _bind_with(node: cst.WithItem, names: dict[str, list[cst.CSTNode]]) -> None:
    if node.asname is not None:
        _bind(node.asname.name, names)


_SCOPES = frozenset({"FunctionDef", "ClassDef", "Lambda"})
_BINDERS: dict[str, Callable[[cst.CSTNode, dict], None]] = {
    "FunctionDef": lambda node, names: _bind(node.name, names),
    "ClassDef": lambda node, names: _bind(node.name, names),
    "Assign": _bind_assign,
    "AnnAssign": lambda node, names: _bind(node.target, names, node),
    "AugAssign": lambda node, names: _bind(node.target, names, node),
    "NamedExpr": lambda node, names: _bind(node.target, names, node),
    "For": lambda node, names: _bind(node.target, names),
    "CompFor": lambda node, names: _bind(node.target, names),
    "WithItem": _bind_with,
    "Param": lambda node, names: _bind(node.name, names),
    "ImportAlias": _bind_import,
}


def _bound_before(ctx: FileContext, sites: list[cst.CSTNode], use: cst.CSTNode) -> bool:
    use_at = ctx.positions[use].start
    for site in sites:
        bound_at = ctx.positions[site].end
        if (bound_at.line, bound_at.column) <= (use_at.line, use_at.column):
            return True
    return False


def device_expression(
    ctx: FileContext, ancestors: Sequence[cst.CSTNode], use: cst.CSTNode, moved: str | None = None
) -> DeviceChoice:
    """The device expression for a fix at ``use``; ``moved`` names the value being moved,
    whose own ``.device`` is no answer."""
    torch_name = ctx.torch_name
    mode = ctx.fix_device
    functions = [a for a in reversed(ancestors) if isinstance(a, (cst.FunctionDef, cst.Lambda))]
    in_function = bool(functions)
    for function in functions:
        local = ctx.bindings(function)
        if DEVICE_NAME in local:
            if _bound_before(ctx, local[DEVICE_NAME], use) or _is_param(function, DEVICE_NAME):
                return DeviceChoice(DEVICE_NAME, holds_default=_holds_default(local[DEVICE_NAME]))
            return inline_default(torch_name, mode)  # `device` is an unbound local here
    method_class = _method_class(ancestors)
    if method_class is not None and _class_has_device(ctx, method_class):
        return DeviceChoice("self.device")
    module_names = ctx.bindings(ancestors[0])
    if DEVICE_NAME in module_names and (
        in_function or _bound_before(ctx, module_names[DEVICE_NAME], use)
    ):
        return DeviceChoice(DEVICE_NAME, holds_default=_holds_default(module_names[DEVICE_NAME]))
    for obj in _CONFIG_OBJECTS:
        head = obj.split(".")[0]
        if ctx.mentions(f"{obj}.device") and _bound_anywhere(ctx, head, functions, module_names):
            return DeviceChoice(f"{obj}.device")
    tensor = _tensor_parameter(functions[0], avoid=moved) if functions else None
    if tensor is not None and method_class is not None:
        return DeviceChoice(f"{tensor}.device")
    if DEVICE_NAME in module_names:
        # A module-level `device` exists but is assigned after this point.
        return inline_default(torch_name, mode)
    helper = _device_helper(ctx, functions, module_names) or _project_helper(
        ctx, functions, module_names, use)
    if helper is not None:
        return DeviceChoice(helper)
    if _reads_unbound(ctx, ancestors[0]):
        return inline_default(torch_name, mode)  # a module-level default would shadow it
    return DeviceChoice(DEVICE_NAME, needs_default=True, ours=True)


def _holds_default(sites: list[cst.CSTNode]) -> bool:
    """``device`` is bound once, to the default a fix writes (an earlier fix's, say)."""
    if len(sites) != 1 or not isinstance(sites[0], cst.Assign):
        return False
    value = sites[0].value
    written = _spelling(cst.Module([]).code_for_node(value))
    return any(written == _spelling(default_expression(torch_name, mode))
               for torch_name in _torch_spellings(value) for mode in FIX_DEVICES)


def _torch_spellings(value: cst.BaseExpression) -> set[str]:
    """The name the expression calls torch by (``torch``, ``T``): the head of its call."""
    head = value.func if isinstance(value, cst.Call) else value
    while isinstance(head, (cst.Attribute, cst.Call)):
        head = head.value if isinstance(head, cst.Attribute) else head.func
    return {head.value} if isinstance(head, cst.Name) else set()


def _spelling(code: str) -> str:
    return "".join(code.split()).replace("'", '"')


def _reads_unbound(ctx: FileContext, module: cst.Module) -> bool:
    """The file reads a ``device`` that none of its scopes binds (one a star import
    brings, say): a module-level default would change what those reads see."""
    return ctx.once(("devices: reads unbound",), lambda: _unbound_read(ctx, module))


def _unbound_read(ctx: FileContext, scope: cst.CSTNode) -> bool:
    """A read of ``device`` in ``scope`` (which does not bind it) or in a nested function
    that does not bind it either. Decorators and defaults are read in the enclosing scope."""
    body = scope.body if isinstance(scope, (cst.FunctionDef, cst.Lambda)) else scope
    return reads(body, DEVICE_NAME, lambda function: (
        DEVICE_NAME not in ctx.bindings(function) and _unbound_read(ctx, function)))


def reads(node: cst.CSTNode, name: str, inside=None) -> bool:
    """Evaluating ``node`` reads the variable ``name``: not as an attribute (``x.device``),
    a keyword (``f(device=...)``), a parameter or an import. A function or lambda defined
    there runs later: its decorators and default values are read now, its body only as far
    as ``inside(function)`` says."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if found:
            return False
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            outer = [*getattr(node, "decorators", ()), *(p.default for p in _every_param(node.params) if p.default)]
            for part in outer:
                tree.walk(part, enter)
            found = found or (inside is not None and inside(node))
            return False
        if isinstance(node, cst.Attribute):
            tree.walk(node.value, enter)  # `x.device` reads x
            return False
        if isinstance(node, cst.Arg):
            tree.walk(node.value, enter)  # `f(device=...)` names a keyword
            return False
        if isinstance(node, (cst.Param, cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            return False
        if isinstance(node, cst.Name) and node.value == name:
            found = True
        return True

    tree.walk(node, enter)
    return found


def _every_param(params: cst.Parameters) -> list[cst.Param]:
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _is_param(function: cst.CSTNode, name: str) -> bool:
    return any(p.name.value == name for p in _every_param(function.params))


def _bound_anywhere(ctx: FileContext, name: str, functions, module_names) -> bool:
    if name == "self":
        return bool(functions)
    return name in module_names or any(name in ctx.bindings(f) for f in functions)


def _method_class(ancestors: Sequence[cst.CSTNode]) -> cst.ClassDef | None:
    """The class of the innermost enclosing function, if that function is a method."""
    for index in range(len(ancestors) - 1, 1, -1):
        if isinstance(ancestors[index], cst.FunctionDef):
            owner = ancestors[index - 2]
            return owner if isinstance(owner, cst.ClassDef) else None
    return None


def _class_has_device(ctx: FileContext, node: cst.ClassDef) -> bool:
    """``self.device`` exists: assigned in the class, or inherited from Lightning. Read once
    per class: fixes ask for each finding, and a class may have thousands."""
    return ctx.once(("devices: class has self.device", id(node)), lambda: _assigns_device(node))


def _assigns_device(node: cst.ClassDef) -> bool:
    if any("LightningModule" in (dotted_name(b.value) or "") for b in node.bases):
        return True
    found = []

    class _Finder(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            if (
                attribute.attr.value == DEVICE_NAME
                and isinstance(attribute.value, cst.Name)
                and attribute.value.value == "self"
            ):
                found.append(attribute)

        def visit_Assign(self, assign: cst.Assign) -> bool:
            for target in assign.targets:
                target.target.visit(self)
            return False

        def visit_FunctionDef(self, function: cst.FunctionDef) -> bool:
            if function.name.value == DEVICE_NAME:
                found.append(function)  # a `device` property
            return True

        def visit_Expr(self, expr: cst.Expr) -> bool:
            return False

    node.visit(_Finder())
    return bool(found)


def _tensor_parameter(function: cst.CSTNode, avoid: str | None) -> str | None:
    """The first tensor input of ``forward``: a tensor whose device is at hand (not one read
    by string keys, a mapping: ``kinds.keyed_by_strings``)."""
    if not isinstance(function, cst.FunctionDef) or function.name.value != "forward":
        return None
    params = function.params.params[1:]
    mappings = keyed_by_strings(function)
    for param in params:
        if param.default is None and param.name.value != avoid and param.name.value not in mappings:
            return param.name.value
    return None


def _device_helper(ctx: FileContext, functions, module_names) -> str | None:
    """A project's own way to name its device, reused rather than adding ours: DeepSpeed's
    ``get_accelerator()``, or Hugging Face Accelerate's ``accelerator = Accelerator(...)``."""
    if ctx.imports.local_name_for("deepspeed.accelerator.get_accelerator") == "get_accelerator":
        return "get_accelerator().current_device_name()"
    accelerate = ctx.imports.local_name_for("accelerate.Accelerator")
    if accelerate is not None and ctx.mentions(f"accelerator = {accelerate}(") and _bound_anywhere(
        ctx, "accelerator", functions, module_names
    ):
        return "accelerator.device"
    return None


def _project_helper(ctx: FileContext, functions, module_names, use: cst.CSTNode) -> str | None:
    """A device helper of the project (``def get_device()`` returning a ``torch.device``, as
    the project index tells: ``ProjectIndex.returns``), defined in this file or imported at
    module level, bound where the fix runs; reused rather than adding our default. Never
    inside the helper itself."""
    index = ctx.index
    if index is None:
        return None
    own = index.module_of(ctx.path)
    inside = {f.name.value for f in functions if isinstance(f, cst.FunctionDef)}
    for name, sites in sorted(module_names.items()):
        if name in inside or not (functions or _bound_before(ctx, sites, use)) or any(
            name in ctx.bindings(f) for f in functions
        ):
            continue  # the helper's own body, not bound yet, or shadowed by a local
        qualified = ctx.imports.qualified_name(cst.Name(name)) or (f"{own}.{name}" if own else None)
        if qualified is not None and index.returns(qualified, ctx.path) == "device":
            return f"{name}()"
    return None
