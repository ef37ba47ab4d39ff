"""The project index: what the other files of a project define, read once per run.

The per-file analysis sees one file; a model class whose ``nn.Module`` base is defined in
another file (fairseq's ``FairseqEncoder``), a helper that returns a tensor, or ``torch``
bound by ``from .common import *`` are unknown to it. Before linting, every file of the
run (and the rest of each one's package) is read with the stdlib ``ast`` (about 15 times
cheaper than LibCST) to record, per module: its imports (relative ones resolved), its star
imports, its classes with their bases, what its functions return, the files its
``torch.save`` calls write and where it names a device. Questions are answered lazily and
remembered.

The index is plain data (dicts, lists, strings): it pickles for worker processes and the
cache, and ``facts_for(path)`` says what one file's findings can depend on.
"""

from __future__ import annotations

import ast
import bisect
import collections
import hashlib
import itertools
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from torchdev_lint import limits, pyast
from torchdev_lint.analysis import classes, kinds, reach, requirements, run_order, sites

_MAX_DEPTH = 20  # re-export chains longer than this are not followed
# Code that names these may put tensors on an accelerator (Lightning and Accelerate place
# models themselves); code that never does runs where torch's default device is, the CPU.
# Found with `str.find` (a regex scan of every file of a project costs more than its parse).
_DEVICE_WORDS = ("cuda", "device", "xpu", "accelerat", "lightning", ".to(")
_MPS = re.compile(r"\bmps\b")
_MAX_BINDINGS = 4  # `path = ...` links followed to learn a saved file's name
_MAX_NESTING = 50  # operations inside one path expression
# What a call that may write a file is named after (`save_checkpoint`, `hf_hub_download`).
# `_read_files` looks only around them (and `load(`), found in the lower-cased text first:
# walking every function's tree would cost twice the parse.
_FILE_WORDS = ("save", "dump", "write", "download", "copy", "move", "export", "link", "rename")
_WRITER_WORDS = re.compile("|".join(_FILE_WORDS), re.IGNORECASE)
# Where a module may reach another module's method: `x.name`, `getattr(x, "name")`. Each
# starts with a literal, which keeps the scan of a whole project near 1% of its parse.
_ATTRIBUTE = re.compile(r"\.[ \t]*([A-Za-z_]\w*)")
_GETATTR = re.compile(r"""getattr\([^"'\n]*["']([A-Za-z_]\w*)["']""")
_SELF_ATTRIBUTE = re.compile(r"self\.([A-Za-z_]\w*)")
_QUALIFIED_ATTRIBUTE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\.[ \t]*([A-Za-z_]\w*)")
# What may start a process group other than `init_process_group(backend="nccl")`: a CPU
# backend named anywhere, or a launcher that picks the backend itself (gloo on a CPU).
_OTHER_GROUPS = ("gloo", "Accelerator", "lightning", "init_distributed", "device_mesh")
# Methods of a module class that PyTorch calls on every move (`_apply`) or that move it; an
# override of one that assigns an attribute moves that attribute with the module.
MOVE_OVERRIDES = frozenset({"_apply", "to", "cuda", "cpu", "type", "half", "float", "double"})
# `module.prune_mask = ...`, `net.head.grid = ...` at the start of a line: an attribute set on
# another object than `self` (not an item of it, not a comparison)
_REPLACED = re.compile(r"^[ \t]*(?!self\.|cls\.)[A-Za-z_]\w*(?:\.\w+)*\.(\w+)[ \t]*=(?!=)", re.MULTILINE)
_MOVE_OVERRIDE = re.compile(r"def[ \t]+(?:" + "|".join(sorted(MOVE_OVERRIDES)) + r")[ \t]*\(")


@dataclass
class ModuleFacts:
    name: str  # dotted module name (`fairseq.models.transformer`; a script's stem)
    path: str
    names: dict[str, str] = field(default_factory=dict)  # imported name -> qualified name
    # the imported names its code never reads (`unread_imports`): importing a class it never
    # builds does not run that class's code
    unread_imports: list[str] = field(default_factory=list)
    stars: list[str] = field(default_factory=list)  # modules imported with `*`
    classes: dict[str, list[str]] = field(default_factory=dict)  # class -> qualified bases
    # function -> "tensor", "module", "device" (a device helper), or "call:<qualified>"
    # (returns what that call builds)
    returns: dict[str, str] = field(default_factory=dict)
    defined: list[str] = field(default_factory=list)  # other names assigned at top level
    public: list[str] | None = None  # `__all__`
    # the names (`file_name_shape`) of the files its `torch.save` calls write, and of those
    # other calls may write (`np.save`, `accelerator.save`, `shutil.copy`, a download)
    saves: list[str] = field(default_factory=list)
    # the attribute or key that ends the path of each of its `torch.save` calls
    # (`args.filepath` -> "filepath", `cfg["ckpt"]` -> "ckpt"): a save of a path an object
    # carries, matched by what the object calls it (`saved_path_tails`)
    saved_tails: list[str] = field(default_factory=list)
    other_writes: list[str] = field(default_factory=list)
    # the names of the files its `torch.load` calls without `map_location` read ("{}":
    # unknown): what they hold is on the devices it was saved from
    loads: list[str] = field(default_factory=list)
    names_devices: bool = False  # its text names a device somewhere (`names_devices`)
    # top-level defs whose text names a device or loads something (`device_defs`)
    device_defs: list[str] = field(default_factory=list)
    # the names it defines with `def` (methods too), and the attribute names it mentions
    # (`x.name`, `"name"`) other than `self.name` of a name it defines: where its code
    # may call another module's method (`attributes`)
    defs: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    # the process groups it may open: "nccl" for `init_process_group("nccl")`, "other" for
    # any other backend or launcher (`process_groups`)
    groups: list[str] = field(default_factory=list)
    # where it shows a CPU path (`cpu_path`): "line N" of a `"cpu"` literal or of a def taking
    # a device or `map_location`; "" when it shows none
    cpu_path: str = ""
    # where its own code chooses the CPU to run on (`cpu_choice`): "line N" of a device choice
    # with a CPU branch (`"cuda" if ... else "cpu"`) or of a CPU command-line option
    # (`--cpu`, `--no-cuda`, `--device`); "" when it shows none
    cpu_choice: str = ""
    # its top-level functions and classes that make such a choice, "name:line" (`cpu_choice_defs`)
    cpu_choice_defs: list[str] = field(default_factory=list)
    # its `torch.save` calls of weights (not of an optimizer's, scheduler's or scaler's state),
    # as "cpu:N" when the saving function moves tensors to the CPU before line N
    # (`state_dict[k] = v.cpu()`, `model.cpu()`), "plain:N" otherwise, then ":A|B" where the
    # saved module is an instance of the project's classes A or B (`weight_saves`)
    weight_saves: list[str] = field(default_factory=list)
    # each top-level class -> the attributes its methods assign on `self` (its parts, by name)
    class_parts: dict[str, list[str]] = field(default_factory=dict)
    # its top-level functions and classes whose code calls `torch.save` (`saving_defs`): a
    # call of one may write any file it is handed the name of
    saving_defs: list[str] = field(default_factory=list)
    # its functions and methods that need CUDA whenever they run (`cuda_defs`): a call of
    # one, from any module, runs only where CUDA is
    cuda_defs: list[str] = field(default_factory=list)
    # for each of its other functions and methods (by name, one list per definition), the
    # names of the calls it makes whenever it runs (`def_calls`): a call of a function that
    # needs CUDA makes the caller need it too, however deep (`ProjectIndex.needs_cuda_def`)
    def_calls: dict[str, list[list[str]]] = field(default_factory=dict)
    # the same for its top-level code (a `__main__` block included): a script whose run calls
    # a function that needs CUDA does not run without CUDA, whatever device choice it shows
    top_calls: list[str] = field(default_factory=list)
    # the names called in expressions its code moves to a device other than the CPU
    # (`Net(...).to(device)`, `model = build(cfg)` then `model.cuda()`), and for each of its
    # top-level classes the names its `__init__` calls (its submodules): which modules the
    # project puts on an accelerator (`ProjectIndex.moved_to_device`)
    moved_calls: list[str] = field(default_factory=list)
    # its functions' parameters that they move to a device (function -> positions), and the
    # calls it hands a module it builds to ("callee:position:maker"): `fit(Net(), data)`
    moved_params: dict[str, list[int]] = field(default_factory=dict)
    # it sets torch's default device or tensor type to an accelerator's
    # (`set_default_device(device)`, `set_default_tensor_type(torch.cuda.HalfTensor)`): factories
    # without `device=` build there ("line N"; "" when it does not)
    default_device: str = ""
    # the CUDA extensions it builds (`cpp_extension.load(name=..., sources=[...".cu"])`,
    # `CUDAExtension("pkg._C", ...)`), by name: code that imports one, or this module that
    # holds one, calls CUDA kernels (`ProjectIndex.cuda_extension_imported`)
    cuda_extensions: list[str] = field(default_factory=list)
    # what its functions import when they run (`def get_backend(): from .backend import _backend`):
    # a lazily built extension is reached this way
    lazy_imports: list[str] = field(default_factory=list)
    # its code calls `.cuda()` outside any test for a device (`unguarded_cuda`); and, in
    # the code an import runs (its functions, its top level but for the `__main__` block),
    # shows no CPU path: code written for CUDA only (`ProjectIndex.cuda_only_import`)
    unguarded_cuda: bool = False
    cuda_only: bool = False
    # its top level (a `__main__` block included) stops the run without CUDA: "line N" of
    # `if torch.cuda.is_available(): ... else: sys.exit()`, `if not ...: raise`, `assert
    # torch.cuda.is_available()` ("" when it does not); every run it starts or is imported by
    # needs CUDA (`ProjectIndex.stopped_without_cuda`)
    stops_without_cuda: str = ""
    # every module its top level imports, under an `if` or `try` too (`import_classification`'s
    # `if args.backbone == ...: from approaches import bert_cnn as approach`): who may start a
    # run that reaches a module (`ProjectIndex.stopped_without_cuda`)
    top_imports: list[str] = field(default_factory=list)
    # it does work when run (a `__main__` block, or a call or loop as a top-level statement):
    # a module nothing imports starts runs only if it does (`ProjectIndex.stopped_without_cuda`)
    runs_code: bool = False
    # a library that drives NVIDIA GPUs only (apex, TensorRT...) it must import when imported:
    # at its top level, or in a `try` whose `except ImportError` raises; code importing this
    # module needs CUDA too (`ProjectIndex.gpu_library_imported`)
    gpu_library: str = ""
    # the modules its top level imports outside any `try` or `if`: it cannot be imported
    # without them (`ProjectIndex.missing_import`)
    required_imports: list[str] = field(default_factory=list)
    # the names those imports take from a module, "module:name" (`from data import Loader`):
    # the file fails when imported if the module binds no such name
    required_names: list[str] = field(default_factory=list)
    # its top-level names bound once, in the whole file, to a device's string (`cpu_device =
    # "cpu"`): what a file importing them compares a device with (`device_constants`)
    device_constants: dict[str, str] = field(default_factory=dict)
    # every name its top level binds, in any block (`for`, `with`, `try`, unpacking, `global`
    # in a function: `top_bindings`); None when it may bind names no reading lists (a module
    # `__getattr__`, `globals()`, `exec`): any name may be there
    top_bindings: list[str] | None = field(default_factory=list)
    handed: list[str] = field(default_factory=list)
    # its top-level names and argument-less functions whose device the machine alone picks
    # (`DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, `def
    # get_device(): return ...` the same): one decision every importer shares, which a
    # user's choice elsewhere can contradict (TDL013, `ProjectIndex.machine_device`)
    machine_devices: list[str] = field(default_factory=list)
    # its top-level functions that move what they are given to CUDA whenever the machine has
    # it (`def to_var(x): if torch.cuda.is_available(): x = x.cuda()`): the machine's decision
    # again, wherever they are called (TDL013, `ProjectIndex.machine_mover`)
    machine_movers: list[str] = field(default_factory=list)
    # of the names it imports that name a device (`from config import CUDA_DEVICE`), by
    # qualified name: those it reads only under a test for CUDA (`if torch.cuda.is_available():
    # return CUDA_DEVICE`, `CUDA_DEVICE if torch.cuda.is_available() else "cpu"`) or in a
    # comparison, and those it reads anywhere else (`device_reads`)
    guarded_devices: list[str] = field(default_factory=list)
    unguarded_devices: list[str] = field(default_factory=list)
    init_calls: dict[str, list[str]] = field(default_factory=dict)
    # its top-level functions that move the state of an optimizer they are handed,
    # "name:position" (`def optimizer_to(optim, device): for p in optim.state.values(): ...
    # p.data = p.data.to(device)`): a call of one puts the state where the parameters went
    # (`state_movers`, `ProjectIndex.moves_optimizer_state`)
    state_movers: list[str] = field(default_factory=list)
    # its top-level `nn.Module` classes that keep no tensors, each with the `__init__`
    # parameters it keeps on `self`, "position:name" (`plain_modules`,
    # `ProjectIndex.plain_module`): `DiceLoss(2).cuda()` moves nothing
    plain_modules: dict[str, list[str]] = field(default_factory=dict)
    # its top-level functions' and classes' (their own `__init__`'s) parameters, as
    # "positional|*|keyword-only|**" with "=" after a name that has a default (`signatures`):
    # a call that cannot bind to them raises TypeError (`ProjectIndex.unbindable`)
    signatures: dict[str, str] = field(default_factory=dict)
    # attributes a method of ``MOVE_OVERRIDES`` assigns (`m.stride = fn(m.stride)` in `_apply`)
    override_moved: list[str] = field(default_factory=list)
    # attributes its code assigns on an object other than `self` (`module.prune_mask = mask`
    # in a pruning loop): the object's class does not own what that attribute holds
    replaced: list[str] = field(default_factory=list)
    # each call it makes, with its scope and its place in the scope's blocks (`run_order.read`):
    # which calls of a run come before a load (`ProjectIndex.saved_earlier_in_every_run`)
    run_calls: list[str] = field(default_factory=list)
    # its functions with an `if` on a parameter (`run_order.read`): a branch no caller's
    # literal takes never runs (`ProjectIndex.calls_of`)
    flag_scopes: list[str] = field(default_factory=list)
    digest: str = ""  # of the file's bytes: code that follows calls into it depends on them
    # the kinds of place a rule could report at (`sites.of_tree`); None: not known, check all
    sites: tuple[str, ...] | None = None
    # why the file was not read (over the budget of `limits.py`): it contributes no facts
    skipped: str = ""

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)


def module_name(path: str) -> tuple[str, bool]:
    """The dotted name a file is imported under, and whether it is in a package: walk up
    while the directory holds an ``__init__.py``."""
    directory, base = os.path.split(os.path.abspath(path))
    stem = base.rsplit(".", 1)[0]
    parts = [] if stem == "__init__" else [stem]
    in_package = False
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        in_package = True
        directory, package = os.path.split(directory)
        parts.insert(0, package)
        if not package:
            break
    return ".".join(parts), in_package


def package_root(path: str) -> str:
    """The directory of the outermost package holding ``path`` (its own directory for a
    script): what to index so that a file's imports resolve."""
    directory = os.path.dirname(os.path.abspath(path))
    top = directory
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        top = directory
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return top


def python_files(directory: str) -> list[str]:
    """The ``.py`` files under a package directory (recursively), or what a script can
    import: the files beside it and the packages in its directory (``import model.model``
    from ``deblur.py`` finds ``model/``), so that a script checked alone (pre-commit,
    flake8, an editor) sees the trainer that saves what it loads, as a run over the whole
    folder does."""
    if not os.path.isfile(os.path.join(directory, "__init__.py")):
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return []
        beside = [e.path for e in entries if e.name.endswith(".py") and e.is_file()]
        packages = [e.path for e in entries if not e.name.startswith(".") and e.is_dir()
                    and os.path.isfile(os.path.join(e.path, "__init__.py"))]
        return beside + [f for package in packages for f in python_files(package)]
    found = []
    for current, subdirs, names in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        found.extend(os.path.join(current, n) for n in sorted(names) if n.endswith(".py"))
    return found




def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The module ``from <level dots><target> import ...`` names, seen from ``module``."""
    parts = module.split(".") if module else []
    keep = len(parts) - level + (1 if is_package else 0)
    base = parts[:max(keep, 0)]
    if target:
        base.append(target)
    return ".".join(base)


class _Reader:
    """One pass over a module's top-level statements (and class bodies)."""

    def __init__(self, facts: ModuleFacts, is_package_init: bool, asks_cuda: bool = True) -> None:
        self.facts = facts
        self.is_init = is_package_init
        self.asks_cuda = asks_cuda  # the text tests `cuda.is_available()` somewhere

    def qualify(self, node: ast.expr) -> str | None:
        dotted = pyast.dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.facts.names.get(head)
        if base is None:
            base = f"{self.facts.name}.{head}" if self.facts.name else head
        return f"{base}.{rest}" if rest else base

    def read(self, tree: ast.Module) -> None:
        for statement in tree.body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        facts = self.facts
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    facts.names[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    facts.names[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = (
                _absolute(facts.name, self.is_init, node.level, node.module)
                if node.level else (node.module or "")
            )
            for alias in node.names:
                if alias.name == "*":
                    facts.stars.append(source)
                else:
                    facts.names[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            facts.classes[node.name] = [q for q in map(self.qualify, node.bases) if q]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            returned = "device" if self.device_helper(node) else self.returns(node)
            if returned is not None:
                facts.returns[node.name] = returned
            else:
                facts.defined.append(node.name)
            arguments = node.args
            returns = [r.value for r in _own_returns(node)]
            if not (arguments.posonlyargs or arguments.args or arguments.kwonlyargs or node.decorator_list) \
                    and returns and all(self.machine_choice(r) for r in returns):
                facts.machine_devices.append(node.name)
            if self.asks_cuda and (arguments.posonlyargs or arguments.args) and _moves_when_available(node):
                facts.machine_movers.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and self.machine_choice(node.value):
                facts.machine_devices.append(targets[0].id)
            for target in targets:
                if isinstance(target, ast.Name):
                    if target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        facts.public = [
                            e.value for e in node.value.elts
                            if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        ]
                    else:
                        facts.defined.append(target.id)
        elif isinstance(node, (ast.If, ast.Try)):
            # `try: import torch` / `if TYPE_CHECKING:`: imports and definitions inside count.
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                for inner in block:
                    self.statement(inner)
            for handler in getattr(node, "handlers", []):
                for inner in handler.body:
                    self.statement(inner)

    def device_helper(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A project's own way to name its device, for fixes to reuse (``get_device()``):
        undecorated, without parameters, every return a ``torch.device`` (annotated so, or built
        by ``torch.device(...)``, a ternary of them, ``current_accelerator() or ...``), and
        not always a hardcoded CUDA one."""
        if isinstance(function, ast.AsyncFunctionDef) or function.decorator_list:
            return False  # a decorator changes what a call does (a pytest fixture can't be called)
        args = function.args
        if args.posonlyargs or args.args or args.kwonlyargs:
            return False  # a resolver of a requested device, often with side effects (yolov5's select_device)
        annotated = function.returns is not None and self._annotation(function.returns) == "torch.device"
        if function.returns is not None and not annotated:
            return False
        found = [self._device_kind(r.value) for r in _own_returns(function)]
        if not found or "cuda" in found and len(set(found)) == 1:
            return False
        return annotated or None not in found

    def machine_choice(self, value: ast.expr | None) -> bool:
        """``"cuda" if torch.cuda.is_available() else "cpu"``, in ``torch.device(...)`` or not."""
        if isinstance(value, ast.Call) and self.qualify(value.func) == "torch.device" and len(value.args) == 1 \
                and not value.keywords:
            value = value.args[0]
        return isinstance(value, ast.IfExp) and _asks_cuda(value.test)

    def _annotation(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parsed = pyast.parse(node.value, mode="eval")
            if parsed is None:
                return None
            node = parsed.body
        return self.qualify(node)

    def _device_kind(self, value: ast.expr | None) -> str | None:
        """"cuda" for ``torch.device("cuda...")``, "device" for another device expression."""
        if isinstance(value, ast.IfExp):
            both = {self._device_kind(value.body), self._device_kind(value.orelse)}
            return None if None in both else ("cuda" if both == {"cuda"} else "device")
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
            # `torch.accelerator.current_accelerator(...) or torch.device("cpu")`
            return "device" if self._device_kind(value.values[-1]) is not None else None
        if not isinstance(value, ast.Call) or self.qualify(value.func) != "torch.device":
            return None
        first = value.args[0] if value.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("cuda"):
            return "cuda"
        return "device"

    def returns(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        """"tensor", "module" or "call:<qualified>" when the function clearly returns one."""
        annotation = function.returns
        if annotation is not None:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                text = annotation.value
            else:
                text = pyast.dotted(annotation) or ""
            last = text.rsplit(".", 1)[-1]
            if last in kinds.TENSOR_CLASSES:
                return "tensor"
            qualified = self.qualify(annotation) if pyast.dotted(annotation) else None
            if qualified and kinds.is_module_class(qualified) and last in ("Module", "Sequential"):
                return "module"
            return None
        found: set[str] = set()
        for node in _own_returns(function):
            value = node.value
            if not isinstance(value, ast.Call):
                return None
            qualified = self.qualify(value.func)
            if qualified is None:
                return None
            found.add("tensor" if kinds.is_tensor_function(qualified) else f"call:{qualified}")
        return found.pop() if len(found) == 1 else None


def _own_returns(function: ast.AST):
    """The ``return`` statements of a function, not of functions nested in it (statements
    only: a return is never inside an expression)."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(node, name, None)
                if isinstance(block, list):
                    stack.extend(block)


_PRINTF = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]")
_FIELD = re.compile(r"\{[^{}]*\}")
_PLACEHOLDERS = re.compile(r"(?:\{\})+")
_PATH_WRAPPERS = frozenset({"str", "Path", "os.fspath", "pathlib.Path", "PurePath", "pathlib.PurePath"})


def file_name_shape(expr: ast.expr, resolve, depth: int = 0) -> str | None:
    """The name of the file a path expression names, with ``{}`` for the parts only known
    when it runs: ``f"{out}/f0_{rank}_{n}.pt"`` and ``os.path.join(d, f"f0_{r}_{n}.pt")``
    both give ``f0_{}_{}.pt``. ``resolve(name)`` gives the one value a local name was
    assigned, if any. None when nothing of the name is written in the code (``{}.pt``)."""
    text = _PLACEHOLDERS.sub("{}", _path_text(expr, resolve, depth))
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    return name if re.search(r"[A-Za-z0-9]", _stem(name).replace("{}", "")) else None


_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,5}$")


def _stem(name: str) -> str:
    """A file name without its suffixes: ``{}.pth.tar`` -> ``{}``, ``ckpt_{}.pt`` -> ``ckpt_{}``."""
    while _SUFFIX.search(name) and _SUFFIX.sub("", name):
        name = _SUFFIX.sub("", name)
    return name


def path_template(expr: ast.expr, resolve) -> str:
    """The whole path a path expression names, with ``{}`` for the parts only known when it
    runs: ``'{}.pkl'.format(epoch)``, ``f"{epoch}.pkl"`` and ``'%d.pkl' % epoch`` all give
    ``{}.pkl``."""
    return _PLACEHOLDERS.sub("{}", _path_text(expr, resolve, 0)).replace("\\", "/")


def template_names(template: str, name: str) -> bool:
    """``name`` is one of the files ``template`` (``path_template``) names: the same text, or
    the template's literal parts in order with anything in place of each ``{}``
    (``07_{}_{}_epochs.pth`` names ``07_effnetb2_data_10_epochs.pth``). A template whose
    stem spells nothing but its placeholders (``{}.pth``) names no particular file."""
    if template == name:
        return True
    if "{}" not in template or not re.search(r"[A-Za-z0-9]", _stem(template).replace("{}", "")):
        return False
    pattern = ".+".join(re.escape(part) for part in template.split("{}"))
    return re.fullmatch(pattern, name) is not None


def _path_text(expr: ast.expr, resolve, depth: int, nesting: int = 0) -> str:
    if nesting > _MAX_NESTING:
        return "{}"  # `"a" + "b" + ...` thousands deep: no file name is spelled so
    nesting += 1
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in expr.values)
    if isinstance(expr, ast.BinOp):
        left, right = _path_text(expr.left, resolve, depth, nesting), _path_text(expr.right, resolve, depth, nesting)
        if isinstance(expr.op, ast.Div):
            return f"{left}/{right}"  # pathlib
        if isinstance(expr.op, ast.Add):
            return left + right
        if isinstance(expr.op, ast.Mod) and isinstance(expr.left, ast.Constant):
            return _PRINTF.sub("{}", left)
    if isinstance(expr, ast.Call):
        func = pyast.dotted(expr.func) or ""
        # `'{}.pkl'.format(epoch)`: a method of a literal, which has no dotted name
        last = expr.func.attr if isinstance(expr.func, ast.Attribute) else func.rsplit(".", 1)[-1]
        args = [a for a in expr.args if not isinstance(a, ast.Starred)]
        if last == "format" and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Constant):
            return _FIELD.sub("{}", str(expr.func.value.value))
        if func in ("os.path.join", "osp.join", "path.join") or last == "joinpath":
            parts = [expr.func.value] if last == "joinpath" else []
            return "/".join(_path_text(a, resolve, depth, nesting) for a in [*parts, *args])
        if func in _PATH_WRAPPERS and len(args) == 1 and not expr.keywords:
            return _path_text(args[0], resolve, depth, nesting)
    if isinstance(expr, ast.Name) and depth < _MAX_BINDINGS:
        value = resolve(expr.id)
        if value is not None:
            return _path_text(value, resolve, depth + 1, nesting)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self" \
            and depth < _MAX_BINDINGS:
        value = resolve(f"self.{expr.attr}")
        if value is not None:
            return _path_text(value, resolve, depth + 1, nesting)
    return "{}"


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


# Fields that hold only the parser's singletons (``Load``, ``Add``, ``Eq``): no reader of
# the index looks at them as nodes, and they are a third of a tree's nodes.
_SINGLETON_FIELDS = frozenset(("ctx", "op", "ops"))
_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))`` less the singletons of ``_SINGLETON_FIELDS``,
    without its generator per field; kept on the node, since the facts walk a tree several
    times (the list is shared: callers must not change it)."""
    found = node.__dict__.get("_children")
    if found is not None:
        return found
    fields = _FIELDS.get(type(node))
    if fields is None:
        fields = _FIELDS[type(node)] = tuple(f for f in node._fields if f not in _SINGLETON_FIELDS)
    found = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            found += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            found.append(value)
    node._children = found  # type: ignore[attr-defined]
    return found


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first) over ``_children``."""
    todo = collections.deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(_children(node))
        yield node


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a module's or function's own code (class bodies included), not of
    functions or lambdas defined in it (they are scopes of their own)."""
    nodes = []
    stack = list(_children(scope))
    while stack:
        node = stack.pop()
        nodes.append(node)
        if not isinstance(node, _SCOPES):
            stack.extend(_children(node))
    return nodes


def _scopes_at(tree: ast.Module, lines: set[int]) -> list[ast.AST]:
    """The innermost function (or the module) around each of ``lines``, found through
    statements only."""
    functions = []
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack.extend(block)
    owner: dict[int, ast.AST] = {}  # line -> innermost function: inner ones start later
    for function in sorted(functions, key=lambda f: f.lineno):
        for line in range(function.lineno, (function.end_lineno or function.lineno) + 1):
            owner[line] = function
    found = {id(s): s for s in (owner.get(line, tree) for line in lines)}
    return list(found.values())


def _read_files(reader: _Reader, tree: ast.Module, lines: set[int]) -> tuple[list[str], list[str], list[str]]:
    """The file names (``file_name_shape``) the module's ``torch.save`` calls write, those
    of the path arguments of other calls named like writers, and those its ``torch.load``
    calls without ``map_location`` read (``{}`` when unknown)."""
    saves: dict[str, None] = {}  # ordered sets
    others: dict[str, None] = {}
    loads: list[str] = []
    classes: dict[str, dict] = {}  # `_self_attributes`, read on the first question
    for scope in _scopes_at(tree, lines):
        calls = []
        single = {}  # `path = <value>`: the value of that one name
        assigned: dict[str, list[ast.expr | None]] = {}
        for node in _own_nodes(scope):  # an assignment comes before the names it binds
            kind = type(node)
            if kind is ast.Call:
                calls.append(node)
            elif kind is ast.Name:
                if type(node.ctx) is ast.Store:  # every binding: loops, `with ... as`, unpacking, valueless
                    assigned.setdefault(node.id, []).append(single.get(id(node)))
            elif kind is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                single[id(node.targets[0])] = node.value
        if not isinstance(scope, ast.Module):
            for arg in _walk(scope.args):
                if isinstance(arg, ast.arg):
                    assigned.setdefault(arg.arg, []).append(None)

        def resolve(name: str, assigned=assigned, scope=scope) -> ast.expr | None:
            if name.startswith("self."):  # an attribute of the method's object: set once in its class
                values = _self_attributes(tree, classes).get(id(scope), {}).get(name[5:], [])
            else:
                values = assigned.get(name, [])
            return values[0] if len(values) == 1 else None

        for node in calls:
            qualified = reader.qualify(node.func)
            if qualified in kinds.TORCH_LOADERS:
                if len(node.args) < 2 and all(k.arg != "map_location" for k in node.keywords):
                    path = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "f"), None)
                    shape = file_name_shape(path, resolve) if path is not None else None
                    loads.append(shape or "{}")
                continue
            if qualified in kinds.TORCH_SAVERS:
                path = _saved_file(node)
                found, paths = saves, [path] if path is not None else []
            elif _WRITER_WORDS.search(pyast.dotted(node.func) or ""):
                found, paths = others, [*node.args, *(k.value for k in node.keywords)]
            else:
                continue
            for path in paths:
                shape = file_name_shape(path, resolve)
                if shape is not None:
                    found[shape] = None
    return list(saves), list(others), loads


def _self_attributes(tree: ast.Module, memo: dict) -> dict[int, dict[str, list[ast.expr]]]:
    """For each method of the module's top-level classes (by id), the values its class's
    methods assign to ``self.<attr>`` (``self.best_weights_path = weights_dir / "best"``), by
    attribute: what a save of ``self.best_weights_path`` writes."""
    if "by method" not in memo:
        by_method: dict[int, dict[str, list[ast.expr]]] = {}
        for klass in tree.body:
            if not isinstance(klass, ast.ClassDef):
                continue
            methods = [m for m in klass.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            values: dict[str, list[ast.expr]] = {}
            for method in methods:
                for node in _own_nodes(method):
                    if isinstance(node, ast.Assign) and len(node.targets) == 1:
                        target = node.targets[0]
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                and target.value.id == "self":
                            values.setdefault(target.attr, []).append(node.value)
            for method in methods:
                by_method[id(method)] = values
        memo["by method"] = by_method
    return memo["by method"]


_COMMENT_LINES = re.compile(r"(?m)^[ \t]*#.*$")


def attributes(tree: ast.Module, text: str, imported: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The functions and methods a module defines (at the top level and in class
    bodies), and the attribute names its text mentions where it may reach another
    module's method of that name: ``x.name``, ``getattr(x, "name")``, but not
    ``self.name`` of a name it defines itself (its own method, or an override), nor an
    attribute of a library module it imports (``torch.load`` calls no project ``load``;
    ``imported``: its imported names, local -> qualified). Strings count too (the answer
    errs towards "mentioned"), but not a line that is only a comment (a call left commented
    out calls nothing)."""
    text = _COMMENT_LINES.sub("", text)
    defined: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.ClassDef, ast.If, ast.Try)):
            todo.extend(node.body)
            todo.extend(getattr(node, "orelse", []))
    mentioned = collections.Counter(_ATTRIBUTE.findall(text))
    own = collections.Counter(
        m.group(1) for m in _SELF_ATTRIBUTE.finditer(text)
        if m.group(1) in defined and (m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_."))
    )
    libraries = _library_names(imported or {})
    of_libraries = collections.Counter(
        m.group(2) for m in _QUALIFIED_ATTRIBUTE.finditer(text) if m.group(1) in libraries) if libraries else {}
    reached = {n for n, count in mentioned.items() if own[n] + of_libraries.get(n, 0) < count}
    return sorted(defined), sorted(reached.union(_GETATTR.findall(text)))


def process_groups(tree: ast.Module, text: str) -> list[str]:
    """One entry per process group the module may open: "nccl" for an
    ``init_process_group`` whose backend is the literal ``"nccl"``, "other" for any other
    call of it and for a text that names another backend or a launcher that chooses one
    (``_OTHER_GROUPS``)."""
    groups = ["other"] if any(word in text for word in _OTHER_GROUPS) else []
    if "init_process_group" not in text:
        return groups
    for node in _walk(tree):
        if isinstance(node, ast.Call) and (pyast.dotted(node.func) or "").rsplit(".", 1)[-1] == "init_process_group":
            backend = next((k.value for k in node.keywords if k.arg == "backend"), node.args[0] if node.args else None)
            nccl = isinstance(backend, ast.Constant) and backend.value == "nccl"
            groups.append("nccl" if nccl else "other")
    return groups


_CPU_PATH = re.compile(
    r"""["']cpu(?::0)?["']|\bdef\s+\w+\s*\([^)]*\b(?:device|map_location|\w+_device)\b\s*[:=,)]"""
    r"""|\w(?<!\bself)\.device\b(?!\s*=(?!=)|\s*\()""")


_CPU_CHOICE = re.compile(  # `--device` with `type=int` takes GPU indices (`portability._gpu_indices`)
    r"""else\s+(?:torch\.device\(\s*)?["']cpu["']|["']--(cpu|no[-_]cuda|use[-_]cpu|device)["'](?![^)]*type\s*=\s*int\b)"""
    r"""|else\s*:[ \t]*(?:#[^\n]*)?\n(?P<assigned>[ \t]*[\w.]+\s*=\s*(?:torch\.device\(\s*)?["']cpu["'])""")


# A test of where a tensor already is: a device chosen on it follows the data
# (`z.get_device() if z.get_device() != -1 else "cpu"`), not the machine.
FOLLOWS_A_TENSOR = re.compile(r"\.get_device\(\)|\.is_cuda\b|\.device\.type\b")


def cpu_choice(text: str, lines: "_Lines") -> str:
    """Where the module chooses the CPU to run on: a device choice with a CPU branch or an
    option that turns CUDA off or picks the device ("line N"); "" when it shows none. The
    text-level counterpart of ``portability``'s file-level choice, for the files that import
    a module. A choice bound to a name nothing reads is boilerplate, not a choice."""
    first = next(_cpu_choices(text, lines), None)
    return f"line {first}" if first is not None else ""


def _named_choices(tree: ast.Module, code: str, choices: list[int], needing: list[str]) -> list[int]:
    """The CPU choices at lines ``choices`` that are not in a function nothing in the file
    names (``def _get_device(self)`` whose one call is commented out: ``code`` is the text
    without comments; only a private one, ``_name``, counts: a public one may be what other
    modules call), nor in one of ``needing`` (``cuda_defs``): a choice followed by ``assert
    device.type == "cuda"`` is no CPU path."""
    unnamed = [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name in needing or (
                   node.name.startswith("_") and not node.name.startswith("__")
                   and len(re.findall(rf"\b{node.name}\b", code)) == 1))]
    return [line for line in choices if not any(start <= line <= end for start, end in unnamed)]


def cpu_choice_defs(tree: ast.Module, choices: set[int]) -> list[str]:
    """The module's top-level functions whose code makes one of the CPU choices at the lines
    ``choices`` (``def run(net, loader): ... .to("cuda:0" if torch.cuda.is_available() else
    "cpu")``), and classes whose body does, outside their methods (a configuration class's
    ``device = torch.device("cuda:0" if ... else "cpu")``; a model's own default device, chosen
    in its ``__init__``, is no choice of the run that builds it), each "name:line" of its first:
    a script that calls or builds one runs where it chooses, as with a helper of its own."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            methods = [(m.lineno, m.end_lineno or m.lineno) for m in node.body
                       if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))] if isinstance(node, ast.ClassDef) else []
            inside = [line for line in choices if node.lineno <= line <= (node.end_lineno or node.lineno)
                      and not any(start <= line <= end for start, end in methods)]
            if inside:
                found.append(f"{node.name}:{min(inside)}")
    return found


def _cpu_choices(text: str, lines: "_Lines") -> Iterator[int]:
    """The line of each CPU choice ``cpu_choice`` counts, in order."""
    if "cpu" not in text and "--device" not in text or feeds_data_parallel(text):
        return
    unread: set[str] = set()  # options already found unread: one search each
    names: frozenset[str] | None = None
    for found in _CPU_CHOICE.finditer(text):
        if found.group(1) is not None:  # an option: counts when the script reads it
            option = "--" + found.group(1)
            if option not in unread and reads_option(text, option):
                yield lines.of(found.start())
            unread.add(option)
            continue
        # the line that binds the choice: the `else:` branch's own line for an if statement
        start = found.start("assigned") if found.group("assigned") else text.rfind("\n", 0, found.start()) + 1
        if _REPORTS.match(text, start):
            continue  # `print("running on", "cuda" if ... else "cpu")`: shown, not chosen
        if not found.group("assigned") and FOLLOWS_A_TENSOR.search(text, start, found.start()):
            continue  # `"cuda" if x.is_cuda else "cpu"`: where the data is, no machine chosen
        bound = _BOUND.match(text, start)
        if bound is not None and places_data(bound.group(1)):
            continue
        if bound is not None and names is None:
            names = read_names(text)
        if bound is None or bound.group(1) in names and not only_maps_loads(text, bound.group(1)):
            yield lines.of(found.start())


_REPORTS = re.compile(rf"[ \t]*(?:print|[\w.]+\.(?:{'|'.join(sorted(kinds.LOG_METHODS))}))\(")
_LIST_LOADER = re.compile(r"\bDataListLoader\s*\(")


def is_test_path(path: str) -> bool:
    """A file of a test suite: ``test_*.py``, ``*_test.py``, ``conftest.py``, or any file
    under a ``tests/`` folder (the tests' helpers and fixtures)."""
    path = path.replace("\\", "/")
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or "/tests/" in f"/{path}"


def feeds_data_parallel(text: str) -> bool:
    """The module batches graphs with torch_geometric's ``DataListLoader``, whose Python
    lists only torch_geometric's multi-GPU ``DataParallel`` takes: its run needs GPUs, and a
    CPU choice beside it is boilerplate."""
    return "torch_geometric" in text and _LIST_LOADER.search(text) is not None


def reads_option(text: str, option: str, dest: str | None = None) -> bool:
    """The script reads the command-line option ``option`` (``--no-cuda``) after parsing:
    ``args.no_cuda``, ``opt["no_cuda"]``, ``getattr(args, "no_cuda")``; ``dest`` when the
    option names it. A ``--cuda`` parsed and never read chooses nothing."""
    dest = dest or option.lstrip("-").replace("-", "_")
    return re.search(rf"\.{dest}\b(?!\s*[(.])(?!\s*=[^=])|(?<!dest=)[\"']{dest}[\"']", text) is not None


_BOUND = re.compile(r"[ \t]*(\w+)\s*=[^=]")
# Words of names for where a program keeps data, not where it runs.
_DATA_PLACES = frozenset({"gather", "storage", "store", "offload", "cache", "output", "outputs", "result",
                          "results", "save", "buffer", "data"})


def places_data(name: str) -> bool:
    """``gather_device = "cpu" if gather_on_cpu else "cuda"``: a device named for where data
    is kept (gathered, stored, offloaded, cached; Gaussian Splatting's ``data_device`` for its
    images), not a choice of where the code runs."""
    return not _DATA_PLACES.isdisjoint(w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name))


def read_names(text: str) -> frozenset[str]:
    """The names the source reads somewhere, in one pass: occurrences in its code (not in a
    comment or a plain string such as ``"--device"``; an f-string's fields count) that are
    not an attribute (``x.device``), a keyword or an assignment (``device=...``)."""
    return frozenset(_READ_NAME.findall(_code_only(text)))


# Comments and string literals; a prefix with `f` marks an f-string, whose fields are code.
_NOT_CODE = re.compile(r"#[^\n]*|(?P<prefix>\b[rRbBuUfF]{1,2})?(?:'\'\'(?:\\.|[^\\])*?'\'\'|\"\"\"(?:\\.|[^\\])*?\"\"\""
                       r"|'(?:\\.|[^\\'\n])*'|\"(?:\\.|[^\\\"\n])*\")")


def unread_imports(text: str, names: dict[str, str]) -> list[str]:
    """The names of ``names`` (what the module imports) that its text mentions nowhere but in
    its import statements (``from model import Seq2Seq, Seq2SeqAttention`` where only
    ``Seq2SeqAttention(...)`` is built), in one pass over the text. A mention in a comment,
    a string or as an attribute counts as a read: the cheap side of the doubt."""
    mentioned = set(_WORD.findall(_IMPORT_STATEMENT.sub(" ", text)))
    return sorted(local for local in names if local not in mentioned)


_WORD = re.compile(r"[A-Za-z_]\w*")
_IMPORT_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.MULTILINE)


def _without_comments(text: str) -> str:
    """``text`` with each comment blanked by as many spaces (offsets and lines kept)."""
    return _NOT_CODE.sub(lambda m: " " * len(m.group(0)) if m.group(0)[0] == "#" else m.group(0), text)


def _code_only(text: str) -> str:
    """``text`` with its comments and plain strings blanked (f-strings kept)."""
    return _NOT_CODE.sub(lambda m: m.group(0) if "f" in (m.group("prefix") or "").lower() else " ", text)


_READ_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?!\w)(?!\s*=[^=])")


def only_maps_loads(text: str, name: str) -> bool:
    """Every read of ``name`` in the source is ``map_location=name``: the device it holds
    only tells ``torch.load`` where to put a checkpoint, and places nothing the code runs on
    (the code moves its model with ``.cuda()``)."""
    code = _code_only(text)  # the reads `read_names` counts: none in comments or plain strings
    reads = [m for m in _READ_NAME.finditer(code) if m.group(1) == name]
    return bool(reads) and all(re.search(r"map_location\s*=\s*$", code[max(0, m.start() - 40):m.start()])
                               for m in reads)


def cpu_path(text: str, lines: "_Lines") -> str:
    """Where the module shows that its code can run on the CPU: a ``"cpu"`` literal (a
    ``"cuda" if ... else "cpu"`` choice, ``map_location="cpu"``), a function that takes
    the device (``def build(cfg, device)``, ``map_location=None``) or code that follows the
    device of a value (``x.to(self.pixel_mean.device)``; not ``self.device``, which a class
    may set from a literal); "" when it shows none."""
    if not ("cpu" in text or "device" in text or "map_location" in text):
        return ""
    for found in _CPU_PATH.finditer(text):
        if not _MAPS_TO.search(text, max(0, found.start() - 40), found.start()):
            return f"line {lines.of(found.start())}"
    return ""


# `map_location="cpu"`, `map_location=torch.device("cpu")`: where a file's tensors land, which
# code that only runs on CUDA also chooses (to load on the CPU first), not a CPU path.
_MAPS_TO = re.compile(r"map_location\s*=\s*(?:torch\.)?(?:device\(\s*)?$")


_NOT_WEIGHTS = re.compile(r"optim|sched|scaler", re.IGNORECASE)


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _moves_to_cpu(node: ast.AST) -> bool:
    """``node`` moves something to the CPU: ``.cpu()``, ``.to("cpu")``, ``.to(torch.device("cpu"))``,
    ``.to(device="cpu")``."""
    return any(isinstance(n, ast.Call) and _is_cpu_move(n) for n in _walk(node))


def _is_cpu_move(call: ast.Call) -> bool:
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr == "cpu":
        return not call.args
    if call.func.attr != "to":
        return False
    first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    return first is not None and _cpu_value(first)


def weight_saves(reader: "_Reader", tree: ast.Module, lines: set[int]) -> list[str]:
    """The module's ``torch.save`` calls of weights, each "cpu:<line>" when what it saves was
    moved to the CPU first: in the saved expression (``{k: v.cpu() ...}``,
    ``model.cpu().state_dict()``), by an earlier assignment to the saved name
    (``state_dict[key] = param.cpu()``) or a ``model.cpu()`` statement on it; else
    "plain:<line>". A ``.cpu()`` of something else (a metric) says nothing. Then
    ":<classes>" when the save writes one module whose classes the scope shows
    (``saved_model_classes``). Only the scopes around ``lines`` (those that may call a saver)
    are read."""
    found: list[str] = []
    for scope in _scopes_at(tree, lines):
        nodes = _own_nodes(scope)
        saves = [n for n in nodes if type(n) is ast.Call and n.args and reader.qualify(n.func) in kinds.TORCH_SAVERS
                 and not _NOT_WEIGHTS.search(_root_name(n.args[0]) or "")]
        if not saves:
            continue
        moved: list[tuple[str, int]] = []  # (name, line) moved to the CPU
        for node in nodes:
            if isinstance(node, ast.Assign) and _moves_to_cpu(node.value):
                moved += [(name, node.lineno) for t in node.targets if (name := _root_name(t)) is not None]
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _is_cpu_move(node.value):
                name = _root_name(node.value.func.value)
                if name is not None:
                    moved.append((name, node.lineno))
        bound = run_order.assigned_values(nodes)
        for save in saves:
            root = _root_name(save.args[0])
            cpu = _moves_to_cpu(save.args[0]) or any(n == root and line <= save.lineno for n, line in moved)
            classes = saved_model_classes(save.args[0], bound, reader.qualify)
            found.append(f"{'cpu' if cpu else 'plain'}:{save.lineno}" + (f":{'|'.join(classes)}" if classes else ""))
    return found


def save_entry(entry: str) -> tuple[str, int, list[str]]:
    """A ``weight_saves`` entry as (kind, line, the saved module's classes or [])."""
    kind, line, classes = (entry.split(":") + [""])[:3]
    return kind, int(line), classes.split("|") if classes else []


# calls that hand back the module they are given or called on: a move, a mode, a wrapper
_SAME_MODULE = frozenset({"cuda", "to", "cpu", "float", "half", "double", "train", "eval", "state_dict"})
_WRAPPERS = frozenset({"DataParallel", "DistributedDataParallel"})


def saved_model_classes(saved: ast.expr, bound: dict[str, list[ast.expr]],
                        qualify: Callable[[ast.expr], str | None]) -> list[str]:
    """The project classes the one module a save writes is an instance of
    (``torch.save(net.state_dict(), path)`` after ``net = VGGRefineDet(...)``, through
    ``.cuda()``, ``nn.DataParallel(...)`` and names bound to it in the scope); [] when the
    save writes anything else or a value the scope does not show the making of (a parameter,
    ``self.model``): a checkpoint of a whole model has keys its parts' own do not."""
    classes: set[str] = set()
    todo, names, steps = [saved], set(), 0
    while todo and steps < 32:
        node, steps = todo.pop(), steps + 1
        if isinstance(node, ast.Name):
            values = bound.get(node.id)
            if not values:
                return []
            if node.id not in names:  # `net = net.to(device)`: its values, once
                names.add(node.id)
                todo.extend(values)
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if name in _WRAPPERS:
                if not node.args:
                    return []
                todo.append(node.args[0])
            elif name in _SAME_MODULE and isinstance(node.func, ast.Attribute):
                todo.append(node.func.value)
            elif name[:1].isupper() and not (qualify(node.func) or "").startswith("torch."):
                classes.add(name)
            else:
                return []
        elif isinstance(node, ast.Dict) and node is saved:
            # `{"model": net.state_dict(), "optimizer": ..., "epoch": epoch}`: its one module
            modules = [v for k, v in zip(node.keys, node.values)
                       if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict"
                       and not _NOT_WEIGHTS.search(_root_name(v) or "")
                       and not (isinstance(k, ast.Constant) and _NOT_WEIGHTS.search(str(k.value)))]
            if len(modules) != 1:
                return []
            todo.append(modules[0])
        else:
            return []
    return sorted(classes) if not todo else []


def class_parts(tree: ast.Module, text: str) -> dict[str, list[str]]:
    """Each top-level class -> the attributes its code assigns on ``self`` (``self.base =
    vgg(...)``): the parts a state dict of one of its instances keeps under "<part>."."""
    lines = text.splitlines()
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            segment = "\n".join(lines[node.lineno - 1:node.end_lineno or node.lineno])
            parts = sorted(set(_SELF_PART.findall(segment)))
            if parts:
                found[node.name] = parts
    return found


_SELF_PART = re.compile(r"^\s*self\.(\w+)\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)


def saving_defs(reader: "_Reader", tree: ast.Module, lines: set[int]) -> list[str]:
    """The module's top-level functions and classes whose call runs ``torch.save``
    (``def save_model(model, target_dir, model_name): torch.save(..., target_dir / model_name)``;
    a class whose ``__init__`` saves: building an agent in a loop saves nothing when only its
    ``save`` method writes); only those that span one of ``lines`` (that may call a saver)
    are read."""
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and any(_first_line(node) <= line <= (node.end_lineno or node.lineno) for line in lines)
            and any(type(n) is ast.Call and reader.qualify(n.func) in kinds.TORCH_SAVERS
                    for part in _run_when_called(node) for n in _walk(part))]


def _run_when_called(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.AST]:
    """The code a call of ``node`` runs: a function's body; for a class, its ``__init__`` and
    the statements of its body that are not other methods."""
    if not isinstance(node, ast.ClassDef):
        return [node]
    return [part for part in node.body if not isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef))
            or part.name == "__init__"]


def state_movers(tree: ast.Module) -> list[str]:
    """The module's top-level functions with a loop over ``<param>.state`` (or its
    ``.values()``/``.items()``) that moves what it holds, as "name:position" of the param."""
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        for loop in (n for n in _walk(node) if isinstance(n, (ast.For, ast.AsyncFor))):
            iterated = loop.iter.func.value if isinstance(loop.iter, ast.Call) and isinstance(
                loop.iter.func, ast.Attribute) else loop.iter
            owner = pyast.dotted(iterated) or ""
            if owner.endswith(".state") and owner[:-6] in params and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("to", "cuda")
                    for c in _walk(loop)):
                found.append(f"{node.name}:{params.index(owner[:-6])}")
                break
    return found


_REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module", "setattr",
                        "__setattr__"})


def signatures(tree: ast.Module) -> dict[str, str]:
    """The parameters of the module's top-level functions, and of its classes' own
    ``__init__`` (less ``self``; not a decorated class, a dataclass's ``__init__`` is made for
    it, nor one with a ``__new__``, which may take other arguments), each
    "positional|*|keyword-only|**"."""
    found = {}
    for node in tree.body:
        function = node
        if isinstance(node, ast.ClassDef):
            if node.decorator_list or any(isinstance(m, ast.FunctionDef) and m.name == "__new__" for m in node.body):
                continue
            function = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if not isinstance(function, ast.FunctionDef) or function.decorator_list:
            continue
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args][1 if function is not node else 0:]
        first_default = len(positional) - len(arguments.defaults)
        names = [a.arg + ("=" if i >= first_default else "") for i, a in enumerate(positional)]
        keyword = [a.arg + ("" if d is None else "=") for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)]
        found[node.name] = "|".join((",".join(names), "*" if arguments.vararg else "", ",".join(keyword),
                                     "**" if arguments.kwarg else ""))
    return found


def unbound(signature: str, positional: int, keywords: list[str]) -> str | None:
    """Why a call with ``positional`` arguments and ``keywords`` cannot bind to
    ``signature`` (``signatures``' form), or None when it can."""
    params, star, keyword_only, double_star = signature.split("|")
    names = [p for p in params.split(",") if p]
    only = [k for k in keyword_only.split(",") if k]
    if positional > len(names) and not star:
        return f"takes {len(names)} positional arguments, not {positional}"
    known = {n.rstrip("=") for n in (*names, *only)}
    unknown = next((k for k in keywords if k not in known), None)
    if unknown is not None and not double_star:
        return f"has no parameter `{unknown}`"
    missing = next((n for n in names[positional:] + only if not n.endswith("=") and n not in keywords), None)
    if missing is not None:
        return f"needs `{missing}`, which the call does not pass"
    return None


def plain_modules(reader: "_Reader", tree: ast.Module) -> dict[str, list[str]]:
    """The module's top-level classes deriving ``nn.Module`` alone that keep no tensors: the
    body holds only methods (and a docstring), no method registers anything, and what the
    methods set on ``self`` is plain (``_plain``: a literal, a container display) or, in
    ``__init__``, one of its parameters without a default or with a plain one
    (``self.n_classes = n_classes``). Class -> "position:name"
    of those parameters (position -1: keyword-only): an instance holds no parameter, buffer or
    submodule when its construction gives them plain values (``DiceLoss(2)``), so its
    ``.cuda()`` moves nothing."""
    found = {}
    for klass in tree.body:
        if not (isinstance(klass, ast.ClassDef) and len(klass.bases) == 1 and not klass.keywords
                and reader.qualify(klass.bases[0]) == "torch.nn.Module"):
            continue
        kept: set[str] = set()
        if all(_keeps_plain_values(statement, kept) for statement in klass.body):
            found[klass.name] = sorted(kept)
    return found


def _keeps_plain_values(statement: ast.stmt, kept: set[str]) -> bool:
    """``statement`` of a class body is a docstring, ``pass`` or a method that sets only
    plain values on ``self`` (``plain_modules``); adds the ``__init__`` parameters it keeps."""
    if isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
        return True
    if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False  # class attributes, nested classes: perhaps tensors
    positional = [a.arg for a in (*statement.args.posonlyargs, *statement.args.args)]
    if not positional:
        return False
    defaults = dict(zip(positional[len(positional) - len(statement.args.defaults):], statement.args.defaults))
    defaults.update((a.arg, d) for a, d in zip(statement.args.kwonlyargs, statement.args.kw_defaults) if d is not None)
    parameters = {name: i - 1 for i, name in enumerate(positional) if i} | {
        a.arg: -1 for a in statement.args.kwonlyargs}
    self_name = positional[0]
    for node in _walk(statement):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in _REGISTERS:
                return False
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == self_name
                           for t in _walk(target)):
                    continue
                value = node.value
                if not isinstance(target, ast.Attribute) or value is None:
                    return False  # `self.a, self.b = ...`, `self.x: Tensor`
                if _plain(value):
                    continue
                name = value.id if isinstance(value, ast.Name) else None
                if (statement.name != "__init__" or isinstance(node, ast.AugAssign) or name not in parameters
                        or (name in defaults and not _plain(defaults[name]))):
                    return False
                kept.add(f"{parameters[name]}:{name}")
    return True


def _plain(node: ast.expr) -> bool:
    """A value a module does not register: a number, string, bool or None (a negative
    number too), or a container display (a plain list of modules is not registered either)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                             ast.SetComp))


def override_moved(tree: ast.Module) -> list[str]:
    """The attributes that a move override of a class assigns: YOLO's ``_apply`` moves the
    detection head's ``stride`` and ``grid`` with the model (``m.stride = fn(m.stride)``),
    so they follow the module wherever the head's own class is defined."""
    found: set[str] = set()
    for klass in _walk(tree):
        if not isinstance(klass, ast.ClassDef):
            continue
        for method in klass.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name in MOVE_OVERRIDES:
                for node in _walk(method):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                        node, (ast.AugAssign, ast.AnnAssign)) else []
                    found.update(t.attr for t in targets if isinstance(t, ast.Attribute))
    return sorted(found)


def _first_line(node: ast.stmt) -> int:
    """Where a definition starts: its first decorator, else its own line."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


_CUDA_TENSOR_TYPE = re.compile(r"torch\.cuda\.\w*Tensor$")
_CHOOSING_WORDS = ("cuda", "gpu", "device", "available")


def _definitions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's top-level functions and the methods of its top-level classes."""
    functions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return functions + [method for node in tree.body if isinstance(node, ast.ClassDef)
                        for method in node.body if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _device_branches(node: ast.AST) -> list[list[ast.AST]] | None:
    """The branches of an ``if``/conditional expression/``while`` that tests for a device
    (what runs on one machine and not the other); None for any other node."""
    if isinstance(node, (ast.If, ast.IfExp, ast.While)) and _mentions(node.test, _CHOOSING_WORDS):
        return ([node.body, node.orelse] if isinstance(node, ast.If)
                else [[node.body], [node.orelse]] if isinstance(node, ast.IfExp) else [[]])
    return None


def cuda_defs(reader: "_Reader", tree: ast.Module, lines: set[int]) -> list[str]:
    """The names of the module's functions and methods (of its top-level classes) whose own
    code, outside any ``if`` that tests for a device, builds a ``torch.cuda.*Tensor``, calls a
    ``torch.cuda`` function that raises without CUDA, or asserts CUDA is available: WaveGlow's
    ``infer`` allocates ``torch.cuda.FloatTensor`` on both branches of a dtype test; a setup
    function that exits or raises when ``torch.cuda.is_available()`` is false; and the
    classes whose ``__init__`` does (a data prefetcher that opens a ``torch.cuda.Stream``).
    Only functions that span one of ``lines`` (those that name ``cuda.``) are walked."""
    from torchdev_lint.analysis.requirements import NEEDS_CUDA

    ordered = sorted(lines)

    def spans_cuda(node) -> bool:
        at = bisect.bisect_left(ordered, node.lineno)
        return at < len(ordered) and ordered[at] <= (node.end_lineno or node.lineno)

    def needs(node: ast.AST) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        if isinstance(node, (ast.stmt, ast.expr)) and not spans_cuda(node):
            return False  # every construct that needs CUDA names `cuda.` on one of its lines
        if isinstance(node, ast.If) and _ends_when_no_cuda(node):
            return True  # `if not torch.cuda.is_available(): sys.exit(...)`: a setup for GPUs
        branches = _device_branches(node)
        if branches is not None:  # CUDA is needed only if both branches need it
            return all(any(needs(s) for s in branch) for branch in branches)
        if isinstance(node, ast.Call):
            qualified = reader.qualify(node.func) or ""
            if qualified in NEEDS_CUDA or _CUDA_TENSOR_TYPE.match(qualified):
                return True
        if isinstance(node, ast.Assert) and (_mentions(node.test, ("is_available",)) or _says_cuda_device(node.test)):
            return True
        return any(needs(child) for child in _children(node))

    verdicts: dict[str, bool] = {}
    for function in _definitions(tree):  # every definition of the name in the module
        name = function.name
        verdicts[name] = verdicts.get(name, True) and spans_cuda(function) and any(needs(s) for s in function.body)
    for node in tree.body:  # building an object whose `__init__` needs CUDA needs CUDA
        if isinstance(node, ast.ClassDef) and spans_cuda(node):
            init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
            if init is not None and any(needs(s) for s in init.body):
                verdicts[node.name] = verdicts.get(node.name, True)
    return sorted(name for name, all_need in verdicts.items() if all_need)


def _says_cuda_device(test: ast.expr) -> bool:
    """``device.type == "cuda"``, ``args.device == "cuda:0"``: a device compared equal to CUDA's."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    cuda = [s for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value.startswith("cuda")]
    other = [s for s in sides if s not in cuda]
    if len(cuda) != 1 or len(other) != 1:
        return False
    name = pyast.dotted(other[0]) or ""
    return name.endswith(".type") or "device" in name.lower()


def stops_without_cuda(reader: "_Reader", tree: ast.Module) -> str:
    """``ModuleFacts.stops_without_cuda``: the first statement of the top level, or of its
    ``__main__`` block, after which a run without CUDA has stopped: a test of
    ``torch.cuda.is_available()`` that stops, or a call of a ``torch.cuda`` function that
    raises without a CUDA device (a runner's ``torch.cuda.ipc_collect()`` at import)."""
    from torchdev_lint.analysis.requirements import NEEDS_CUDA

    body = [s for top in tree.body for s in (top.body if _main_guard(top) else [top])]
    for statement in body:
        value = statement.value if isinstance(statement, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and reader.qualify(value.func) in NEEDS_CUDA:
            return f"line {statement.lineno}"
        if isinstance(statement, ast.Assert) and _asks_cuda(statement.test):
            return f"line {statement.lineno}"
        if isinstance(statement, ast.If) and (_ends_when_no_cuda(statement) or (
                _asks_cuda(statement.test) and any(_stops(s) for s in statement.orelse))):
            return f"line {statement.lineno}"
    return ""


# Calls a module makes at import to set itself up, not to do a run's work.
_SETUP_CALLS = ("sys.path.", "warnings.", "logging.", "os.environ", "torch.backends.", "matplotlib.use")


def saved_path_tails(reader: "_Reader", scopes: list[tuple[ast.AST, list[ast.AST]]]) -> list[str]:
    """``ModuleFacts.saved_tails``, from the calls ``_scope_nodes`` found."""
    found: dict[str, None] = {}
    for _, nodes in scopes:
        for node in nodes:
            if type(node) is ast.Call and reader.qualify(node.func) in kinds.TORCH_SAVERS:
                path = _saved_file(node)
                tail = path_tail(path) if path is not None else None
                if tail is not None:
                    found[tail] = None
    return sorted(found)


def _saved_file(save: ast.Call) -> ast.expr | None:
    """The file a ``torch.save``-like call writes: its second argument, or ``f=``."""
    return save.args[1] if len(save.args) > 1 else next((k.value for k in save.keywords if k.arg == "f"), None)


def path_tail(path: ast.expr) -> str | None:
    """The attribute or string key a path expression ends with: ``args.filepath``,
    ``cfg["ckpt"]``; None for anything else."""
    if isinstance(path, ast.Attribute):
        return path.attr
    if isinstance(path, ast.Subscript) and isinstance(path.slice, ast.Constant) and isinstance(path.slice.value, str):
        return path.slice.value
    return None


def top_imports(tree: ast.Module, name: str, is_init: bool) -> list[str]:
    """``ModuleFacts.top_imports``: modules (and ``module.name``, which may be one) that
    import statements outside functions and classes name."""
    found: dict[str, None] = {}
    todo = list(tree.body)
    while todo:
        statement = todo.pop()
        if isinstance(statement, ast.Import):
            found.update(dict.fromkeys(alias.name for alias in statement.names))
        elif isinstance(statement, ast.ImportFrom):
            base = _absolute(name, is_init, statement.level, statement.module) if statement.level \
                else statement.module or ""
            found[base] = None
            found.update(dict.fromkeys(f"{base}.{alias.name}" for alias in statement.names if alias.name != "*"))
        elif isinstance(statement, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            todo += [*statement.body, *getattr(statement, "orelse", ()), *getattr(statement, "finalbody", ()),
                     *(s for handler in getattr(statement, "handlers", ()) for s in handler.body)]
    return sorted(found)


# Words of a name that holds a device (`CUDA_DEVICE`, `gpu`): `_names_a_device`.
_DEVICE_NAME_WORDS = frozenset({"device", "cuda", "gpu"})


def _names_a_device(name: str) -> bool:
    return not _DEVICE_NAME_WORDS.isdisjoint(re.findall(r"[a-z]+", name.lower()))


def device_reads(tree: ast.Module, names: dict[str, str], imported: dict[str, str]) -> tuple[list[str], list[str]]:
    """Of the device names a module reads from others (``names``: local -> qualified; and
    ``config.CUDA_DEVICE`` of a name ``imported`` binds), the qualified names read only where
    CUDA is asked for (the body of ``if torch.cuda.is_available():`` or of a conditional
    expression testing it), in a comparison or as the default of the user's option
    (``parser.add_argument("--device", default=cfg.device)``: the user's to change, as the
    same literal written there would be), and those read anywhere else."""
    guarded: set[str] = set()
    unguarded: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, asked = stack.pop()
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            (guarded if asked else unguarded).add(names[node.id])
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported \
                and isinstance(node.ctx, ast.Load) and _names_a_device(node.attr):
            (guarded if asked else unguarded).add(f"{imported[node.value.id]}.{node.attr}")
            continue
        if isinstance(node, (ast.If, ast.IfExp)) and _asks_cuda(node.test):
            body = node.body if isinstance(node.body, list) else [node.body]
            stack += [(child, True) for child in body]
            orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
            stack += [(child, asked) for child in (node.test, *orelse)]
            continue
        if isinstance(node, ast.Compare):
            stack += [(child, True) for child in (node.left, *node.comparators)]
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            stack += [(child, asked) for child in (node.func, *node.args)]
            stack += [(k.value, asked or k.arg == "default") for k in node.keywords]
            continue
        stack += [(child, asked) for child in _children(node)]
    return sorted(guarded - unguarded), sorted(unguarded)


def _moves_when_available(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``if torch.cuda.is_available(): x = x.cuda()`` (or ``.to("cuda")``) in the function's
    own code: it puts what it is given on CUDA whenever the machine has it."""
    for node in _own_nodes(function):
        if isinstance(node, ast.If) and _asks_cuda(node.test):
            for inner in node.body:
                for call in ast.walk(inner):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and (
                            (call.func.attr == "cuda" and not call.args) or (
                                call.func.attr == "to" and call.args and isinstance(call.args[0], ast.Constant)
                                and call.args[0].value == "cuda")):
                        return True
    return False


def _asks_cuda(test: ast.expr) -> bool:
    """``torch.cuda.is_available()`` (``_ends_when_no_cuda`` reads its negative forms)."""
    return isinstance(test, ast.Call) and not test.args and (pyast.dotted(test.func) or "").endswith("cuda.is_available")


def _stops(statement: ast.stmt) -> bool:
    """``raise ...`` or ``sys.exit(...)``: the run ends there."""
    return isinstance(statement, ast.Raise) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
        and pyast.dotted(statement.value.func) in ("sys.exit", "exit", "quit", "os._exit"))


def _main_guard(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: the block runs when the file is a script, never on import."""
    test = statement.test if isinstance(statement, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


# Files that say a folder's modules may be built rather than checked in.
_BUILD_FILES = frozenset({"setup.py", "build.py", "CMakeLists.txt", "Makefile", "src", "csrc", "make.sh", "build.sh"})
_COMPILED_SOURCES = frozenset({"c", "cc", "cpp", "cxx", "cu", "cuh", "h", "hpp", "pyx", "pxd", "so", "pyd"})
# What lets a module bind names no reading of its statements lists.
_DYNAMIC_BINDING = re.compile(r"\b(?:globals|vars|exec|setattr)\s*\(|\bsys\.modules\b|__dict__|:=|^\s*def\s+__getattr__\b",
                              re.MULTILINE)
_GLOBAL = re.compile(r"^[ \t]*global[ \t]+(\w+(?:[ \t]*,[ \t]*\w+)*)", re.MULTILINE)


_DEVICE_STRING = re.compile(r"(?:cpu|cuda|mps|xpu|npu|hpu)(?::\d+)?$")


def device_constants(tree: ast.Module, text: str) -> dict[str, str]:
    """``NAME = "cpu"`` (or a CUDA, MPS... device's string) at the top level, where nothing
    else in the file binds ``NAME`` (no other assignment, keyword or ``global``): a constant
    wherever the name is imported."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                and _DEVICE_STRING.match(node.value.value):
            name = node.targets[0].id
            if len(re.findall(rf"\b{name}\s*(?:[-+*/%|&^@]|//|\*\*|>>|<<)?=(?!=)", text)) == 1 \
                    and not re.search(rf"\bglobal\b[^\n]*\b{name}\b", text):
                found[name] = node.value.value
    return found


def top_bindings(tree: ast.Module, text: str) -> list[str] | None:
    """The names the module's top level binds, in any of its blocks: imports, definitions,
    targets of assignments (unpacked too), ``for``, ``with`` and ``except ... as``, and names a
    function declares ``global``. Statements only: no walk of expressions or function bodies.
    None when the module may bind names dynamically."""
    if _DYNAMIC_BINDING.search(text):
        return None
    found: set[str] = set()
    for names in _GLOBAL.findall(text):
        found.update(n.strip() for n in names.split(","))
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            continue
        if hasattr(ast, "Match") and isinstance(node, ast.Match):
            return None  # capture patterns bind names in many shapes
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            found.update(h.name for h in node.handlers if h.name)
            stack += [s for h in node.handlers for s in h.body]
        elif type(node).__name__ == "TypeAlias":
            targets = [node.name]
        for target in targets:
            todo = [target]
            while todo:
                current = todo.pop()
                if isinstance(current, ast.Name):
                    found.add(current.id)
                elif isinstance(current, (ast.Tuple, ast.List)):
                    todo += current.elts
                elif isinstance(current, ast.Starred):
                    todo.append(current.value)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack += block
    return sorted(found)


def _calls(node: ast.AST) -> set[str]:
    """The names of the calls ``node`` makes wherever it runs, as ``cuda_defs`` reads code:
    not in a nested definition; under a test for a device, only the calls both branches make."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(current, (ast.If, ast.IfExp, ast.While)):
            branches = _device_branches(current)
            if branches is not None:
                found |= set.intersection(*(set().union(*map(_calls, branch)) for branch in branches))
                stack.append(current.test)
                continue
        if isinstance(current, ast.Call):
            name = _maker_name(current)  # torch's own `nn.LSTM(...)` is no project `LSTM`
            if name:
                found.add(name)
        stack.extend(_children(current))
    return found


def _device_move(node: ast.AST) -> ast.expr | None:
    """The receiver of ``x.to(d)``/``x.cuda()`` when ``d`` is not the CPU nor a dtype."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr == "cuda":
        return node.func.value
    if node.func.attr != "to" or not (node.args or node.keywords) or _is_cpu_move(node):
        return None
    first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "device"), None)
    if first is None or (pyast.dotted(first) or "").rsplit(".", 1)[-1] in _DTYPES:
        return None
    return node.func.value


_DTYPES = frozenset("float16 float32 float64 half float double bfloat16 int8 int16 int32 int64 int long bool "
                    "uint8 dtype".split())


def _scope_nodes(tree: ast.Module) -> list[tuple[ast.AST, list[ast.AST]]]:
    """Each scope of the module (its own code, then each function) with the calls and
    assignments of its own code, in one walk of the tree."""
    scopes: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    stack: list[tuple[ast.AST, list[ast.AST]]] = [(child, scopes[0][1]) for child in _children(tree)]
    while stack:
        node, owner = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append((node, []))
            owner = scopes[-1][1]
        elif isinstance(node, (ast.Call, ast.Assign)):
            owner.append(node)
        stack += zip(_children(node), itertools.repeat(owner))
    return scopes


def moved_and_handed(scopes: list[tuple[ast.AST, list[ast.AST]]]) -> tuple[list[str], dict[str, list[int]], list[str]]:
    """What the module says about the modules it moves, read in one walk: the names of the
    calls whose results it moves to a device (``_device_move``: in the moved expression
    itself, or bound to a name the same scope moves); for its functions that move a parameter
    (``def fit(model, ...): model.to(device)``), the parameter's position; and the calls that
    hand a callee what another call made, as "callee:position:maker" (``fit(Net(), data)``,
    or ``model = Net()`` then ``fit(model, data)`` in one scope)."""
    found: set[str] = set()
    params: dict[str, list[int]] = {}
    handed: set[str] = set()
    cpu = _cpu_names(scopes[0][1]) if scopes else set()
    for scope, nodes in scopes:
        moved_names = set()
        made = {t.id: _called_name(node.value) for node in nodes if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call) for t in node.targets if isinstance(t, ast.Name)}
        local = set() if scope is scopes[0][0] else {t.id for node in nodes if isinstance(node, ast.Assign)
                                                     for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a parameter `device` is the caller's
            local.update(a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg))
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            receiver = _device_move(node)
            target = node.args[0] if node.args else None
            if receiver is not None and isinstance(target, ast.Name) and target.id in cpu - local:
                receiver = None  # `device = "cpu"` ... `model.to(device)`: it stays on the CPU
            if receiver is not None:
                while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
                        and receiver.func.attr in ("eval", "train", "float", "half", "double", "to", "cuda"):
                    receiver = receiver.func.value  # `Net().eval().to(d)`
                if isinstance(receiver, ast.Name):
                    moved_names.add(receiver.id)
                elif isinstance(receiver, ast.Call):  # `nn.Sequential(Norm(...), ...).to(d)`
                    found.update(_maker_name(c) for c in _walk(receiver) if isinstance(c, ast.Call))
            callee = _called_name(node)
            for position, arg in enumerate(node.args):
                maker = _called_name(arg) if isinstance(arg, ast.Call) else (
                    made.get(arg.id, "") if isinstance(arg, ast.Name) else "")
                if maker and callee:
                    handed.add(f"{callee}:{position}:{maker}")
        for node in nodes:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                    isinstance(t, ast.Name) and t.id in moved_names for t in node.targets):
                found.update(_maker_name(c) for c in _walk(node.value) if isinstance(c, ast.Call))
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args)]
            positions = [i for i, n in enumerate(names) if n in moved_names]
            if positions:
                params.setdefault(scope.name, []).extend(positions)
    return sorted(found - {""}), params, sorted(handed)


def _cpu_names(nodes: list[ast.AST]) -> set[str]:
    """The names the module's own code binds, every time, to the CPU (``device = "cpu"``,
    ``torch.device("cpu")``): a move to one of them puts nothing on an accelerator."""
    values: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
    return {name for name, each in values.items() if all(_cpu_value(value) for value in each)}


def _cpu_value(value: ast.expr) -> bool:
    if isinstance(value, ast.Call) and (pyast.dotted(value.func) or "").rsplit(".", 1)[-1] == "device" \
            and len(value.args) == 1:
        value = value.args[0]  # `torch.device("cpu")`
    return isinstance(value, ast.Constant) and value.value == "cpu"


_INDENTED_IMPORT = re.compile(r"^[ \t]+(?:from[ \t]+\S+[ \t]+)?import[ \t]", re.MULTILINE)


def lazy_imports(reader: "_Reader", tree: ast.Module) -> list[str]:
    """What the module's functions import (qualified as the module's own imports are):
    ``_raymarching``, ``pkg.backend._backend`` for ``from .backend import _backend``. One
    walk: an import counts once, however deep the functions around it nest."""
    found: dict[str, None] = {}
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        if in_function and isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
        elif in_function and isinstance(node, ast.ImportFrom):
            source = _absolute(reader.facts.name, reader.is_init, node.level, node.module) if node.level \
                else (node.module or "")
            found.update((f"{source}.{alias.name}", None) for alias in node.names if alias.name != "*")
        elif isinstance(node, (ast.stmt, ast.Module, ast.excepthandler, ast.match_case)):
            inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            stack += [(child, inner) for child in _children(node) if isinstance(child, _STATEMENTS)]
    return list(found)


# The nodes that hold statements: imports are statements, so a walk for them skips expressions.
_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def required_gpu_library(tree: ast.Module) -> str:
    """The GPU-only library (``requirements.GPU_LIBRARIES``) the module imports whenever it is
    imported: at its top level, or in a ``try`` whose every handler raises (``except
    ImportError: raise ImportError("Please install apex")``); "" when none."""
    for statement in tree.body:
        imports = [statement]
        if isinstance(statement, ast.Try) and statement.handlers and all(
                handler.body and isinstance(handler.body[-1], ast.Raise) for handler in statement.handlers):
            imports = statement.body
        for node in imports:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                library = requirements.library_of(name, requirements.GPU_LIBRARIES)
                if library is not None:
                    return library
    return ""


def cuda_extensions(tree: ast.Module) -> list[str]:
    """The names of the CUDA extensions the module builds: a ``CUDAExtension``, or a
    ``load``/``load_inline`` of ``torch.utils.cpp_extension`` or a setuptools (distutils)
    ``Extension`` given ``.cu`` sources or CUDA flags (a Cython wrapper of a kernel that
    ``nvcc`` compiles)."""
    found = []
    for node in _walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called_name(node)
        if called not in ("CUDAExtension", "Extension", "load", "load_inline"):
            continue
        text = ast.unparse(node)
        if called != "CUDAExtension" and not re.search(r"\.cu\b|cuda_sources|extra_cuda_cflags", text):
            continue
        name = next((k.value for k in node.keywords if k.arg == "name"), node.args[0] if node.args else None)
        found.append(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "")
    return found


_DEFAULT_DEVICE = re.compile(r"set_default_device\(\s*(?![\"']cpu)|set_default_tensor_type\([^)]*cuda")


def _moved_makers(modules: list[ModuleFacts]) -> frozenset[str]:
    """The makers (classes, functions building modules) whose modules ``modules`` move to a
    device: directly, handed to a function that moves that parameter, or made by the
    constructor or function of one that is moved (``ProjectIndex.moved_to_device``)."""
    inits: dict[str, set[str]] = {}
    builds: dict[str, set[str]] = {}
    moved: set[str] = set()
    movers: dict[str, set[int]] = {}
    for module in modules:
        moved.update(module.moved_calls)
        for function, positions in module.moved_params.items():
            movers.setdefault(function, set()).update(positions)
        for cls, calls in module.init_calls.items():
            inits.setdefault(cls, set()).update(calls)
        for function, each in module.def_calls.items():
            for calls in each:
                builds.setdefault(function, set()).update(calls)
    for module in modules:
        for handed in module.handed:
            callee, position, maker = handed.split(":")
            if int(position) in movers.get(callee, ()):
                moved.add(maker)
    todo = list(moved)
    while todo:
        maker = todo.pop()
        for made in inits.get(maker, set()) | builds.get(maker, set()):
            # `super().__init__()` runs a base class's constructor, not every
            # `__init__` of the project (a trainer's builds its loss unmoved)
            if made not in moved and not _dunder(made):
                moved.add(made)
                todo.append(made)
    return frozenset(moved)


def _dunder(name: str) -> bool:
    """``__init__``, ``__call__``: a special method, called by name only on ``super()`` or
    ``self``; many classes define one, so the name says nothing about which."""
    return name.startswith("__") and name.endswith("__")


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


_TORCH_ROOTS = frozenset({"torch", "nn"})


def _maker_name(call: ast.Call) -> str:
    """``_called_name``, but none for torch's own classes (``nn.LSTM(...)``, ``torch.nn.GRU``):
    moving one says nothing of a project class that shares its name."""
    root = call.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(call.func, ast.Attribute) and isinstance(root, ast.Name) and root.id in _TORCH_ROOTS:
        return ""
    return _called_name(call)


def definition_calls(tree: ast.Module) -> dict[int, set[str]]:
    """The names of the calls each function and method of ``_definitions`` makes wherever it
    runs (``_calls``), by the definition's id: read once, asked by ``def_calls`` and
    ``init_calls``."""
    return {id(function): set().union(*(_calls(s) for s in function.body)) for function in _definitions(tree)}


def def_calls(tree: ast.Module, needing: list[str], calls: dict[int, set[str]]) -> dict[str, list[list[str]]]:
    """For each function and method ``cuda_defs`` walks, other than those in ``needing``, the
    names of the calls it makes wherever it runs (``calls``). FastSpeech's
    ``inference(mel, waveglow, ...)`` calls ``waveglow.infer``, which needs CUDA: so does
    every call of ``inference``."""
    found: dict[str, list[list[str]]] = {}
    for function in _definitions(tree):
        if function.name not in needing:
            found.setdefault(function.name, []).append(sorted(calls[id(function)]))
    return found


def init_calls(tree: ast.Module, calls: dict[int, set[str]]) -> dict[str, list[str]]:
    """For each top-level class, the names of the calls its ``__init__`` makes."""
    return {node.name: sorted(set().union(*(calls[id(m)] for m in node.body
                                            if isinstance(m, ast.FunctionDef) and m.name == "__init__")))
            for node in tree.body if isinstance(node, ast.ClassDef)}


def _names(module: ModuleFacts, name: str) -> bool:
    """``module`` may call the definition ``name`` of another: it imports it by name (and
    reads it), mentions an attribute of that name, or imports everything (``*``) and calls it."""
    return name in module.attributes or any(
        q.rpartition(".")[2] == name and local not in module.unread_imports for local, q in module.names.items()) or (
        bool(module.stars) and (name in module.top_calls or any(
            name in calls for each in module.def_calls.values() for calls in each)))


def _mentions(expr: ast.expr, words) -> bool:
    """A name or attribute in ``expr`` contains one of ``words`` (lower case)."""
    return any(any(w in (n.id if isinstance(n, ast.Name) else n.attr).lower() for w in words)
               for n in _walk(expr) if isinstance(n, (ast.Name, ast.Attribute)))


def _ends_when_no_cuda(node: ast.If) -> bool:
    """``if not torch.cuda.is_available():`` (or ``device_count() == 0`` / ``< 1``) whose
    body raises or exits."""
    if not _mentions(node.test, ("is_available", "device_count")):
        return False
    test = ast.unparse(node.test).replace(" ", "")
    no_cuda = test.startswith("not") and "cuda.is_available()" in test or any(
        f"cuda.device_count(){op}" in test for op in ("==0", "<1"))
    return no_cuda and any(_stops(s) for s in node.body)


def names_devices(text: str) -> bool:
    """``text`` names a device or moves something to one."""
    return any(word in text for word in _DEVICE_WORDS) or ("mps" in text and _MPS.search(text) is not None)


def _device_lines(text: str, lines: "_Lines") -> set[int]:
    found = lines.containing(_DEVICE_WORDS)
    if "mps" in text:
        found |= {lines.of(m.start()) for m in _MPS.finditer(text)}
    return found


def _device_defs(tree: ast.Module, lines: set[int]) -> list[str]:
    """The top-level functions and classes (decorators included) on any of ``lines``: those
    that name a device or call a ``load`` (what it loads may be on any device)."""
    ordered = sorted(lines)
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            at = bisect.bisect_left(ordered, first)
            if at < len(ordered) and ordered[at] <= (node.end_lineno or first):
                found.append(node.name)
    return found


class _Lines:
    """Line numbers of offsets in a text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ends = list(itertools.accumulate(len(line) for line in text.splitlines(keepends=True)))

    def of(self, offset: int) -> int:
        return bisect.bisect_right(self.ends, offset) + 1

    def containing(self, words, called: bool = False) -> set[int]:
        """The lines on which any of ``words`` occurs (``str.find``: no regex scan); with
        ``called``, only in the name of a call (``save_state(``)."""
        found = set()
        for word in words:
            start = self.text.find(word)
            while start != -1:
                if not called or _calls_at(self.text, start + len(word)):
                    found.add(self.of(start))
                start = self.text.find(word, start + 1)
        return found


_NAME = re.compile(r"\w*\s*\(")


def _calls_at(text: str, offset: int) -> bool:
    """The identifier going on at ``offset`` is the name of a call."""
    return _NAME.match(text, offset) is not None


def regular_file_bytes(path: str) -> bytes | None:
    """The bytes of a regular file; None for anything else (a named pipe called x.py would
    block the read forever) or a file that cannot be read."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def file_size(path: str) -> int | None:
    """The size of a regular file; None for anything else or a file that cannot be seen."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def skipped(path: str, why: str) -> ModuleFacts:
    """The facts of a file over the budget of ``limits.py``: none, and why."""
    full = os.path.abspath(path)
    return ModuleFacts(module_name(full)[0], full, skipped=why)


# The texts `read_facts` parsed lately (by length and hash): the lint's syntax check of a file
# that no rule wants (`engine.lint_source`) need not parse them a second time.
_PARSED: dict[tuple[int, int], None] = {}
_PARSED_LIMIT = 4096


def parsed_lately(text: str) -> bool:
    """The stdlib parser accepted ``text`` while the index was read in this process."""
    return (len(text), hash(text)) in _PARSED


def _parse_without_fstrings(text: str) -> ast.Module | None:
    """The stdlib tree of a file this Python's parser rejects only for its f-strings: the
    quotes Python 3.12 allows inside them (``f"{a + "/" + b}"``), which the checks' parser
    (LibCST) reads. Each f-string becomes an empty string over as many lines, so every other
    node keeps its line; what the f-strings spell (a file name template) is lost. None when
    the file fails for another reason."""
    if sys.version_info >= (3, 12) or not re.search(r"(?i)(?<![\w])[rb]?f[rb]?['\"]", text):
        return None
    import libcst as cst

    class Blank(cst.CSTTransformer):
        def leave_FormattedString(self, original, updated):
            lines = cst.Module([]).code_for_node(original).count("\n")
            return cst.SimpleString('"""' + "\n" * lines + '"""' if lines else '""')

    try:
        blank = cst.parse_module(text).visit(Blank()).code
    except (cst.ParserSyntaxError, RecursionError, ValueError, MemoryError):
        return None
    return pyast.parse(blank)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _library_names(imported: dict[str, str]) -> set[str]:
    """The local names of ``imported`` (local -> qualified) bound to libraries (``torch``,
    ``np``): their attributes are no project function's."""
    return {local for local, qualified in imported.items() if qualified.split(".")[0] in run_order.FOREIGN_ROOTS}


def _parsed(path: str) -> ast.Module | None:
    """The file at ``path`` parsed again, for a question its facts do not answer (asked of
    few files: the trees are not kept); None when it cannot be read or parsed."""
    try:
        with open(path, "rb") as handle:
            return ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _attribute_scopes(tree: ast.Module, foreign: set[str]) -> dict[str, set[str]]:
    """``ProjectIndex._mention_scopes`` for every attribute ``tree`` mentions."""
    found: dict[str, set[str]] = {}
    todo: list[tuple[ast.AST, str]] = [(tree, "")]
    while todo:
        node, scope = todo.pop()
        kind = type(node)
        if kind is ast.Attribute and not (type(node.value) is ast.Name and node.value.id in foreign):
            found.setdefault(node.attr, set()).add(scope)
        elif kind is ast.Constant and type(node.value) is str and node.value.isidentifier():
            found.setdefault(node.value, set()).add("")
        if kind is ast.ClassDef and scope == "" and all(ast.unparse(b) in classes.PLAIN_BASES for b in node.bases) \
                and not node.decorator_list:
            for member in node.body:
                plain = type(member) in (ast.FunctionDef, ast.AsyncFunctionDef) and not member.decorator_list
                todo.append((member, member.name if plain else ""))
            todo.extend((b, "") for b in node.bases)
            continue
        todo.extend((child, scope) for child in ast.iter_child_nodes(node))
    return found


def _uncalled_reference(tree: ast.Module, name: str) -> int:
    """The first line of ``tree`` that reads ``name`` (a name or an attribute) other than to
    call it; 0 when none does."""
    called = {id(node.func) for node in ast.walk(tree) if type(node) is ast.Call}
    lines = [node.lineno for node in ast.walk(tree) if id(node) not in called and isinstance(node.ctx if isinstance(
        node, (ast.Name, ast.Attribute)) else None, ast.Load) and (node.id if type(node) is ast.Name else node.attr) == name]
    return min(lines, default=0)


def read_facts(path: str, source: str | bytes | None = None) -> ModuleFacts | None:
    """What one file defines and imports; None when it cannot be read or parsed (the lint
    reports that); no facts but why (``skipped``) when it is over the size or depth budget
    of ``limits.py``, which is checked before it is parsed (its size before it is read).
    Depends only on the file's text and its module name."""
    full = os.path.abspath(path)
    if source is None:
        size = file_size(full)
        if size is None:
            return None
        why = limits.index_budget(size)
        if why is not None:
            return skipped(full, why)
        source = regular_file_bytes(full)
        if source is None:
            return None
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    text = data.decode("utf-8", "replace")
    why = limits.index_budget(len(data))
    if why is not None:
        return skipped(full, why)
    tree = pyast.parse(source)  # CPython's parser keeps to its own limits
    whole = tree is not None  # not a tree without the f-strings (they may name devices)
    why = limits.index_budget(len(data), text, pyast.statement_lines(tree) if whole else None)
    if why is not None:
        return skipped(full, why)
    if tree is None:
        tree = _parse_without_fstrings(text)
    if tree is None:
        return None
    if len(_PARSED) >= _PARSED_LIMIT:
        del _PARSED[next(iter(_PARSED))]
    _PARSED[len(text), hash(text)] = None
    facts = ModuleFacts(module_name(full)[0], full, digest=_digest(data))
    if whole:
        found = sites.of_tree(tree)
        facts.sites = tuple(sorted(found)) if found is not None else None
    reader = _Reader(facts, os.path.basename(full) == "__init__.py", "is_available" in text)
    reader.read(tree)
    lines = _Lines(text)
    lower = _Lines(text.lower())
    scopes = _scope_nodes(tree)
    files = lower.containing(_FILE_WORDS, called=True) | lower.containing(["load("])
    if files:
        facts.saves, facts.other_writes, facts.loads = _read_files(reader, tree, files)
        facts.saved_tails = saved_path_tails(reader, scopes)
    facts.defs, facts.attributes = attributes(tree, text, facts.names)
    flag_scopes: set[str] = set()
    facts.run_calls = run_order.read(tree, scopes, reader.qualify, facts.names, flag_scopes)
    facts.flag_scopes = sorted(flag_scopes)
    facts.groups = process_groups(tree, text)
    facts.cpu_path = cpu_path(text, lines)
    facts.cpu_choice = cpu_choice(text, lines)
    if (facts.cpu_path or facts.cpu_choice) and "#" in text:
        # read again without the comments (`# device = "cuda" if ... else "cpu"`, a line
        # switched off), only where the text shows one: blanking them costs a scan
        code = _without_comments(text)
        facts.cpu_path, facts.cpu_choice = cpu_path(code, lines), cpu_choice(code, lines)
    else:
        code = text
    if "is_available" in text or "cuda." in text:
        facts.stops_without_cuda = stops_without_cuda(reader, tree)
    facts.top_imports = top_imports(tree, facts.name, reader.is_init)
    facts.runs_code = any(_main_guard(s) or isinstance(s, (ast.For, ast.While, ast.With)) or (
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
        and not (pyast.dotted(s.value.func) or "").startswith(_SETUP_CALLS)) for s in tree.body)
    if "cuda." in text:
        facts.cuda_defs = cuda_defs(reader, tree, lines.containing(["cuda.", "assert"]))
    if facts.cpu_choice:
        choices = _named_choices(tree, code, list(_cpu_choices(code, lines)), facts.cuda_defs)
        facts.cpu_choice = f"line {choices[0]}" if choices else ""
        facts.cpu_choice_defs = cpu_choice_defs(tree, set(choices))
    calls = definition_calls(tree)
    facts.def_calls = def_calls(tree, facts.cuda_defs, calls)
    top_calls = [_calls(s) for s in tree.body]
    facts.top_calls = sorted(set().union(*top_calls))
    facts.moved_calls, facts.moved_params, facts.handed = moved_and_handed(scopes)
    in_functions = any("cuda" in calls for each in facts.def_calls.values() for calls in each)
    # a script's function that nothing in it names (a helper left from an experiment) does
    # not run in its runs: its `.cuda()` says nothing of the script's CPU choice
    named = collections.Counter(_WORD.findall(code)) if in_functions and facts.runs_code else None
    in_run = in_functions and any("cuda" in calls for name, each in facts.def_calls.items()
                                  if named is None or reach.RUNS_ON_ITS_OWN.fullmatch(name) or named[name] > 1
                                  for calls in each)
    facts.unguarded_cuda = ".cuda(" in text and (in_run or "cuda" in facts.top_calls)
    # what an importer runs: not the file's `__main__` block (a smoke test of its model)
    facts.cuda_only = ".cuda(" in text and not facts.cpu_path and not facts.cpu_choice and (
        in_functions or any("cuda" in calls for s, calls in zip(tree.body, top_calls) if not _main_guard(s)))
    if "cpp_extension" in text or "CUDAExtension" in text or ("Extension(" in text and ".cu" in text):
        facts.cuda_extensions = cuda_extensions(tree)
    facts.gpu_library = required_gpu_library(tree)
    facts.required_imports = [
        _absolute(facts.name, reader.is_init, node.level, node.module) if node.level else node.module or ""
        for node in tree.body if isinstance(node, ast.ImportFrom)] + [
        alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
    facts.required_names = [
        f"{source}:{alias.name}" for node, source in zip(
            (n for n in tree.body if isinstance(n, ast.ImportFrom)), facts.required_imports)
        for alias in node.names if alias.name != "*"]
    facts.top_bindings = top_bindings(tree, text)
    if "cpu" in text or "cuda" in text:
        facts.device_constants = device_constants(tree, text)
    if _INDENTED_IMPORT.search(text):
        facts.lazy_imports = lazy_imports(reader, tree)
    found = _DEFAULT_DEVICE.search(text) if "set_default_" in text else None
    facts.default_device = f"line {lines.of(found.start())}" if found else ""
    facts.init_calls = init_calls(tree, calls)
    if _MOVE_OVERRIDE.search(text):
        facts.override_moved = override_moved(tree)
    facts.replaced = sorted(set(_REPLACED.findall(text)))
    if ".state" in text:
        facts.state_movers = state_movers(tree)
    imported_devices = {local: qualified for local, qualified in facts.names.items() if _names_a_device(local)}
    if facts.stars:  # `from .config import *`: a device name the module reads and does not bind comes from there
        own = set(facts.names) | set(facts.defined) | set(facts.returns) | set(facts.classes)
        for local in set(_READ_NAME.findall(_code_only(text))) - own:
            if _names_a_device(local) and local not in imported_devices:
                imported_devices[local] = f"{facts.stars[0]}.{local}"
    # `config.CUDA_DEVICE` of an imported project name (torch's own `torch.cuda` is no constant)
    aliases = {local: qualified for local, qualified in facts.names.items() if not qualified.startswith("torch")}
    device_attributes = [a for a in facts.attributes if _names_a_device(a)] if aliases else []
    read_as_attributes = any(f"{alias}.{a}" in text for alias in aliases for a in device_attributes)
    if imported_devices or read_as_attributes:
        facts.guarded_devices, facts.unguarded_devices = device_reads(tree, imported_devices, aliases)
    if "save(" in text:
        # The lines that may call a saver: `torch.save(`, `T.save(`, or a name bound to one.
        saving = lines.containing(["save(", *(f"{local}(" for local, qualified in facts.names.items()
                                              if qualified in kinds.TORCH_SAVERS)])
        facts.weight_saves = weight_saves(reader, tree, saving)
        facts.saving_defs = saving_defs(reader, tree, saving)
    if "class " in text and "self." in text:
        facts.class_parts = class_parts(tree, text)
    if facts.names:
        facts.unread_imports = unread_imports(text, facts.names)
    if "Module" in text:
        facts.plain_modules = plain_modules(reader, tree)
    facts.signatures = signatures(tree)
    devices = _device_lines(text, lines) if names_devices(text) else set()
    facts.names_devices = bool(devices)
    if devices or "load(" in text:
        facts.device_defs = _device_defs(tree, devices | lines.containing(["load("]))
    return facts


# how many of one scope's saves (or CUDA calls) a question about the order of a run reads
_WANTED_PER_SCOPE = 64


class ProjectIndex:
    """What the project's modules define, and answers about it for one file's analysis."""

    def __init__(self) -> None:
        self.modules: dict[str, list[ModuleFacts]] = {}  # scripts may share a name
        self.paths: dict[str, str] = {}  # absolute path -> module name
        self.skipped: dict[str, str] = {}  # absolute path -> why it contributes no facts
        self._memo: dict[tuple, object] = {}

    def __getstate__(self):
        return {"modules": self.modules, "paths": self.paths, "skipped": self.skipped, "_memo": {}}

    # -- building ------------------------------------------------------------------------

    def add(self, path: str, source: str | bytes | None = None) -> None:
        full = os.path.abspath(path)
        if full not in self.paths and full.endswith(".py"):
            self.add_facts(full, read_facts(full, source))

    def add_facts(self, path: str, facts: ModuleFacts | None) -> None:
        """Record what ``read_facts`` said of ``path`` (None: unreadable, still known)."""
        full = os.path.abspath(path)
        if full in self.paths:
            return
        self.paths[full] = facts.name if facts is not None else module_name(full)[0]
        if facts is not None and facts.skipped:
            self.skipped[full] = facts.skipped
        elif facts is not None:
            self.modules.setdefault(facts.name, []).append(facts)
            self._memo.clear()

    # -- questions -------------------------------------------------------------------------

    def module_of(self, path: str) -> str | None:
        full = os.path.abspath(path)
        name = self.paths.get(full)
        return name if name is not None else module_name(full)[0] or None

    def is_project_module(self, qualified: str, origin: str | None) -> bool:
        """``qualified`` names one of the project's modules (``import utils``): its
        ``utils.cuda(x)`` is the project's function, not ``Tensor.cuda``."""
        return self._module(qualified, origin) is not None

    def _module(self, name: str, origin: str | None) -> ModuleFacts | None:
        found = self.modules.get(name)
        if not found:
            return self._namespace_module(name, origin)
        if len(found) == 1:
            return found[0]
        # Scripts with one name in several directories: the importer's sibling.
        directory = os.path.dirname(os.path.abspath(origin)) if origin else None
        return next((m for m in found if m.directory == directory), None)

    def _namespace_module(self, name: str, origin: str | None) -> ModuleFacts | None:
        """``common.policy_networks`` from a script beside a ``common/`` directory without an
        ``__init__.py`` (a namespace package, as research code often has): the file at that
        path, which the index names by its stem."""
        if origin is None or "." not in name:
            return None
        full = os.path.join(os.path.dirname(os.path.abspath(origin)), *name.split(".")) + ".py"
        if full not in self.paths:  # `libs.pointnet2.utils` from the project root: the one file so placed
            full = self._by_tail().get(os.path.join(*name.split(".")) + ".py", "")
        indexed = self.paths.get(full)
        if indexed is None:
            return None
        return next((m for m in self.modules.get(indexed, []) if m.path == full), None)

    def _by_tail(self) -> dict[str, str]:
        """The indexed files by their last two to four path parts (``libs/pointnet2/utils.py``),
        for the tails only one file has."""
        tails = self._memo.get(("tails",))
        if tails is None:
            found: dict[str, list[str]] = {}
            for full in self.paths:
                parts = full.split(os.sep)
                for k in (2, 3, 4):
                    if len(parts) > k:
                        found.setdefault(os.path.join(*parts[-k:]), []).append(full)
            tails = self._memo[("tails",)] = {tail: paths[0] for tail, paths in found.items() if len(paths) == 1}
        return tails

    def _find(self, qualified: str, origin: str | None, depth: int = 0):
        """(module facts, name) where ``qualified`` is defined in the project, following
        re-exports and star imports; ("external", qualified) for a name from outside; None
        when a project module does not say. Remembered: the lint asks about every call."""
        key = ("find", qualified, os.path.dirname(origin) if origin else None)
        if key in self._memo:
            return self._memo[key]
        found = self._memo[key] = self._search(qualified, origin, depth)
        return found

    def _search(self, qualified: str, origin: str | None, depth: int):
        if depth > _MAX_DEPTH:
            return None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self._module(".".join(parts[:cut]), origin)
            if module is None:
                continue
            if cut != len(parts) - 1:
                return None  # an attribute of a name (`pkg.Class.attr`)
            name = parts[cut]
            if name in module.classes or name in module.returns or name in module.defined:
                return module, name
            if name in module.names:
                return self._find(module.names[name], module.path, depth + 1)
            for star in module.stars:
                found = self._find(f"{star}.{name}", module.path, depth + 1)
                if found is not None and found[0] != "external":
                    return found
            return None
        return "external", qualified

    def is_module_class(self, qualified: str, origin: str | None = None, depth: int = 0) -> bool:
        """``qualified`` names an ``nn.Module`` subclass, directly or through project bases."""
        found = self._find(qualified, origin)
        if found is None or depth > _MAX_DEPTH:
            return False
        if found[0] == "external":
            return kinds.is_module_class(found[1])
        module, name = found
        key = ("module", module.path, name)
        if key not in self._memo:
            self._memo[key] = False  # a cycle of bases is not a module
            bases = module.classes.get(name, [])
            self._memo[key] = any(self.is_module_class(b, module.path, depth + 1) for b in bases)
        return self._memo[key]

    def returns(self, qualified: str, origin: str | None = None) -> str | None:
        """"tensor" or "module" when the project function ``qualified`` returns one;
        "device" for a device helper (``_Reader.device_helper``)."""
        found = self._find(qualified, origin)
        if found is None or found[0] == "external":
            return None
        module, name = found
        returned = module.returns.get(name)
        if returned is None or not returned.startswith("call:"):
            return returned
        built = returned[5:]
        if kinds.is_module_class(built) or self.is_module_class(built, module.path):
            return "module"
        return None

    def machine_device(self, qualified: str, origin: str | None = None) -> str | None:
        """Where the project module that defines ``qualified`` lets the machine alone pick its
        device (``ModuleFacts.machine_devices``): that module's dotted name; None otherwise."""
        found = self.locate(qualified, origin)
        return found[0].name if found is not None and found[1] in found[0].machine_devices else None

    def machine_mover(self, qualified: str, origin: str | None = None) -> str | None:
        """The same for a function that moves what it is given to CUDA whenever the machine
        has it (``ModuleFacts.machine_movers``)."""
        found = self.locate(qualified, origin)
        return found[0].name if found is not None and found[1] in found[0].machine_movers else None

    def locate(self, qualified: str, origin: str | None = None) -> tuple[ModuleFacts, str] | None:
        """The project module defining ``qualified`` and the name there; None for a name
        from outside the project or one no module defines."""
        found = self._find(qualified, origin)
        return None if found is None or found[0] == "external" else found

    def chooses_cpu(self, qualified: str, origin: str | None = None) -> str | None:
        """``qualified`` is a project function whose code chooses the CPU to run on
        (``ModuleFacts.cpu_choice_defs``): where its module does, or None."""
        found = self.locate(qualified, origin)
        line = next((entry.rpartition(":")[2] for entry in found[0].cpu_choice_defs
                     if entry.rpartition(":")[0] == found[1]), None) if found is not None else None
        return f"{self.shown(found[0].path)}:{line}" if line is not None else None

    def saves_when_called(self, qualified: str, origin: str | None = None) -> bool:
        """``qualified`` is a project function or class whose code calls ``torch.save``
        (``ModuleFacts.saving_defs``)."""
        found = self.locate(qualified, origin)
        return found is not None and found[1] in found[0].saving_defs

    def plain_module(self, qualified: str, origin: str | None = None) -> list[str] | None:
        """The ``__init__`` parameters the project class ``qualified`` keeps, when it keeps
        no tensors otherwise (``ModuleFacts.plain_modules``); None for any other class."""
        found = self.locate(qualified, origin)
        return found[0].plain_modules.get(found[1]) if found is not None else None

    def moves_optimizer_state(self, qualified: str, origin: str | None = None) -> int | None:
        """The position of the optimizer whose state the project function ``qualified``
        moves (``ModuleFacts.state_movers``), or None."""
        found = self.locate(qualified, origin)
        if found is None:
            return None
        return next((int(entry.rpartition(":")[2]) for entry in found[0].state_movers
                     if entry.rpartition(":")[0] == found[1]), None)

    def imported_digest(self, path: str) -> str:
        """One digest of the project modules ``path`` imports from (directly): analyses
        that follow a call into another file's code read those files, and only those."""
        full = os.path.abspath(path)
        module = next((m for m in self.modules.get(self.paths.get(full) or "", []) if m.path == full), None)
        if module is None:
            return ""
        reached = {}
        for qualified in module.names.values():
            for found in (self._module(qualified, full), (self.locate(qualified, full) or (None,))[0]):
                if found is not None:
                    reached[found.path] = found.digest
        for star in module.stars:
            found = self._module(star, full)
            if found is not None:
                reached[found.path] = found.digest
        digest = hashlib.blake2b(digest_size=12)
        for item in sorted(reached.items()):
            digest.update(repr(item).encode())
        return digest.hexdigest()

    def exports(self, module_name: str, origin: str | None = None, depth: int = 0) -> dict[str, str]:
        """What ``from <module_name> import *`` binds: name -> qualified name."""
        module = self._module(module_name, origin)
        if module is None or depth > _MAX_DEPTH:
            return {}
        key = ("exports", module.path)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        self._memo[key] = {}  # a cycle of star imports adds nothing
        bound: dict[str, str] = {}
        for star in module.stars:
            bound.update(self.exports(star, module.path, depth + 1))
        bound.update(module.names)
        for name in (*module.classes, *module.returns, *module.defined):
            bound[name] = f"{module.name}.{name}"
        if module.public is not None:
            bound = {n: bound.get(n, f"{module.name}.{n}") for n in module.public}
        else:
            bound = {n: q for n, q in bound.items() if not n.startswith("_")}
        self._memo[key] = bound
        return bound

    def imported_from(self, path: str) -> frozenset[str] | None:
        """The names of the file at ``path`` that other modules of the project import
        (``"*"`` when one imports the module itself or star-imports it, and then ``"import *"``
        too: every public name is in use); None when the index does not hold the file."""
        full = os.path.abspath(path)
        name = self.paths.get(full)
        if name is None:
            return None
        imported = self._memo.get(("imported",))
        if imported is None:  # one pass over every module, for every file's question
            imported = {}

            def add(module: str, origin: str, what: str) -> None:
                imported.setdefault(module, set()).add(what)
                # `image_classifier.config` of a folder without `__init__.py`: the file the index names `config`
                target = None if module in self.modules else self._namespace_module(module, origin)
                if target is not None:
                    imported.setdefault(target.path, set()).add(what)

            for modules in self.modules.values():
                for other in modules:
                    for qualified in other.names.values():
                        head, _, last = qualified.rpartition(".")
                        add(qualified, other.path, "*")
                        if head:
                            add(head, other.path, last)
                    for star in other.stars:
                        add(star, other.path, "*")
                        add(star, other.path, "import *")
            self._memo[("imported",)] = imported
        return frozenset(imported.get(name, set()) | imported.get(full, set()))

    def read_only_guarded_elsewhere(self, path: str, name: str) -> bool:
        """Some other module imports ``name`` from the file at ``path``, and every one that
        does reads it only where CUDA is asked for or in a comparison (``device_reads``)."""
        full = os.path.abspath(path)
        if full not in self.paths:
            return False

        def names_it(qualified: str, importer: ModuleFacts) -> bool:  # as the importer resolves it
            located = self.locate(qualified, importer.path)
            return located is not None and located[1] == name and located[0].path == full

        found = False
        for modules in self.modules.values():
            for other in modules:
                if any(names_it(q, other) for q in other.unguarded_devices):
                    return False
                found = found or any(names_it(q, other) for q in other.guarded_devices)
        return found

    def mentioned_elsewhere(self, name: str, path: str) -> bool | None:
        """Does a project module other than the one at ``path``, of its program
        (``same_program``), mention attribute ``name`` (``ModuleFacts.attributes``)? If not,
        a method of that name defined at ``path`` is called only from there. None when the
        index does not hold the file."""
        full = os.path.abspath(path)
        if full not in self.paths:
            return None
        return any(other != full and self.same_program(full, other) and self._live_mention(other, name, {name})
                   for other in sorted(self._mentions().get(name, ())))

    def _live_mention(self, path: str, name: str, seen: set[str]) -> bool:
        """The module at ``path`` mentions attribute ``name`` in code that may run: outside
        any method of a plain class, or in a method that something may call in turn (one
        that runs on its own, ``forward``, a dunder; or one whose name a live mention reads,
        up to three methods up). ``self.algo.load(path)`` inside an ``Agent.load`` nothing
        calls calls nothing."""
        scopes = self._mention_scopes(path, name)
        if scopes is None or "" in scopes:
            return True
        for method in sorted(scopes - seen):
            if reach.RUNS_ON_ITS_OWN.fullmatch(method) or len(seen) > 3:
                return True
            if any(self._live_mention(other, method, seen | {method})
                   for other in sorted({path, *self._mentions().get(method, ())}) if self.same_program(path, other)):
                return True
        return False

    def _mention_scopes(self, path: str, name: str) -> set[str] | None:
        """The methods (of classes with no base but ``object`` or ``nn.Module``, undecorated)
        in whose bodies the module at ``path`` mentions attribute ``name`` (not of a library
        module, ``torch.load``), "" for a mention anywhere else or a string spelling it; None
        when it does not parse (read once per module)."""
        key = ("mention scopes", path)
        if key not in self._memo:
            module, tree = self._module_at(path), _parsed(path)
            self._memo[key] = None if tree is None else _attribute_scopes(
                tree, _library_names(module.names if module is not None else {}))
        found = self._memo[key]
        return found.get(name, set()) if found is not None else None

    def _mentions(self) -> dict[str, set[str]]:
        """Attribute name -> the paths of the modules that mention it, built once."""
        mentions = self._memo.get(("mentions",))
        if mentions is None:
            mentions = {}
            for modules in self.modules.values():
                for module in modules:
                    for attribute in module.attributes:
                        mentions.setdefault(attribute, set()).add(module.path)
            self._memo[("mentions",)] = mentions
        return mentions

    def saved_earlier_in_every_run(self, path: str, line: int) -> str | None:
        """Every run that reaches the torch load at ``line`` of ``path`` has called a torch
        save before it (``run_order.precedes``): earlier in the load's own function, or,
        through each call of that function however deep, earlier in its caller
        (``histopathology``: ``run_trainable.py`` trains, ``training.train`` saving the best
        model, then calls ``create_model`` that loads it). The load reads back what that run
        wrote, on the machine that wrote it. Where the first such save or saving call is, as
        evidence names it; None when one path reaches the load without a save (a run's start
        point, a function nothing in sight calls, a caller that saves nothing first)."""
        return self._earlier_in_every_run(path, line, run_order.LOAD, "saved")

    def cuda_needed_earlier_in_every_run(self, path: str, line: int, callee: str) -> str | None:
        """Every run that reaches the call of ``callee`` (as ``run_order.read`` records it:
        ".cuda", ``run_order.LOAD``) at ``line`` of ``path`` has first made a call that raises
        without CUDA, itself or through a project function that needs CUDA whenever it runs,
        and that runs whenever the later call does (not under a test):
        ``torch.set_default_tensor_type("torch.cuda.FloatTensor")`` in the caller, then the
        function that loads. No run without CUDA gets there. Where that call is, or None."""
        return self._earlier_in_every_run(path, line, callee, "cuda")

    def _earlier_in_every_run(self, path: str, line: int, callee: str, question: str) -> str | None:
        """The first call that ``question`` asks for (``_wanted``) and that every run reaching
        the call of ``callee`` at ``line`` of ``path`` makes before it, as "<what it does>,
        <file>:<line>"; None when one path reaches it without (answered once)."""
        full = os.path.abspath(path)
        key = ("earlier", question, full, line, callee)
        if key not in self._memo:
            module = self._module_at(full)
            site = self._run_sites(module).get((callee, line)) if module is not None else None
            self._memo[key] = None if site is None else self._done_before(module, *site, question, set(), [0])
        return self._memo[key]

    def _run_sites(self, module: ModuleFacts) -> dict[tuple[str, int], tuple[str, str, str]]:
        """(callee, line) -> (scope, place, the optional parameter a load runs under) of each
        call of ``module`` (read once per module)."""
        key = ("run sites", module.path)
        found = self._memo.get(key)
        if found is None:
            found = {}
            for scope, callee, line, place, detail in run_order.entries(module.run_calls):
                found.setdefault((callee, line), (scope, place, detail if callee == run_order.LOAD else ""))
            self._memo[key] = found
        return found

    def _wanted(self, module: ModuleFacts, scope: str, question: str) -> list[tuple[str, str]]:
        """The calls of ``scope`` in ``module`` that ``question`` asks for, as (place, what it
        does at <file>:<line>), the first ``_WANTED_PER_SCOPE`` of them in line order: "saved",
        a torch save of weights or a call that may make one; "cuda", a torch call that raises
        without CUDA or a project function that needs CUDA whenever it runs (read once per
        scope; every call of the scope asks, so a scope of thousands of them stays linear)."""
        key = ("wanted", question, module.path, scope)
        found = self._memo.get(key)
        if found is None:
            savers = self._may_save() if question == "saved" else frozenset()
            needing = self.cuda_def_names() if question == "cuda" else frozenset()
            found = []
            for _, callee, line, place, detail in self._run_scopes().get((module.path, scope), ()):
                if question == "saved":
                    said = "torch.save" if callee == run_order.SAVE else \
                        f"`{callee.lstrip('.')}` saves" if callee in savers else None
                else:
                    said = f"`{detail}` raises without CUDA" if callee == run_order.CUDA else \
                        f"`{callee.lstrip('.')}` needs CUDA" if callee.lstrip(".") in needing else None
                if said is not None:
                    found.append((line, place, f"{said}, {self.shown(module.path)}:{line}"))
            found = [(place, said) for _, place, said in sorted(found)[:_WANTED_PER_SCOPE]]
            self._memo[key] = found
        return found

    def _done_before(self, module: ModuleFacts, scope: str, place: str, guard: str, question: str,
                     seen: set[str], visits: list[int]) -> str | None:
        """``_earlier_in_every_run`` of a call at ``place`` in ``scope``, which runs only where
        the scope's callers pass the optional parameter ``guard`` ("" for any call). A CUDA
        call must also run whenever the later call does (``run_order.precedes``)."""
        always = question == "cuda"
        for other, said in self._wanted(module, scope, question):
            if run_order.precedes(other, place, always):
                return said
        return self._done_before_calls(scope, guard, question, seen, visits)

    def _done_before_calls(self, scope: str, guard: str, question: str, seen: set[str],
                           visits: list[int]) -> str | None:
        """What ``_done_before`` asks of ``scope``'s callers: each call that may run it (passing
        ``guard``) comes after such a call; None where a run starts at ``scope``."""
        found_callers = self._run_callers()
        callers = [(caller, caller_scope, caller_place) for key in run_order.callers_of(scope) if scope
                   for caller, caller_scope, caller_place, _, arguments in found_callers.get(key, ())
                   if run_order.passes(arguments, guard) and self._may_run(scope, arguments, caller)]
        visits[0] += 1
        if not callers or scope in seen or visits[0] > 64:
            return None  # a run starts here, or it is too far to follow
        seen = seen | {scope}
        first = None
        for caller, caller_scope, caller_place in callers:
            found = self._done_before(caller, caller_scope, caller_place, "", question, seen, visits)
            if found is None:
                return None
            first = first or found
        return first

    def cuda_needed_to_reach(self, path: str, scope: str) -> str | None:
        """Every run that reaches ``scope`` of the module at ``path`` (``run_order.read``'s
        name: "train", "Net" for a class) has first made a call that raises without CUDA, in
        a caller however far up (``_done_before``). Asked of a class for its methods: a
        method runs on an instance, so its runs are those that build the class
        (``criterion = ComputeLossOTA(...)`` after ``torch.cuda.set_device(local_rank)``),
        unless a project class derives from it (its instances are built under other names).
        Where that call is, or None."""
        full = os.path.abspath(path)
        key = ("CUDA to reach", full, scope)
        if key not in self._memo:
            module = self._module_at(full)
            derived = scope in module.classes and scope in self._base_names() if module is not None else True
            self._memo[key] = None if module is None or derived else \
                self._done_before_calls(scope, "", "cuda", set(), [0])
        return self._memo[key]

    def _base_names(self) -> frozenset[str]:
        """The last names of every project class's bases."""
        found = self._memo.get(("base names",))
        if found is None:
            found = self._memo[("base names",)] = frozenset(
                q.rsplit(".", 1)[-1] for modules in self.modules.values() for module in modules
                for bases in module.classes.values() for q in bases)
        return found

    def calls_of(self, scope: str, path: str) -> list[tuple[str, int, str]] | None:
        """Every project call that may run ``scope`` (as ``run_order.read`` names it: "train",
        "Net" for its ``__init__``, "Net.load" for a method) of the module at ``path``, as
        (file, line, the arguments it passes); None when the index does not hold the
        module or ``scope`` tests none of its parameters (``ModuleFacts.flag_scopes``)."""
        module = self._module_at(os.path.abspath(path))
        if module is None or scope not in module.flag_scopes:
            return None
        key = ("calls of", scope)
        if key not in self._memo:  # who calls a scope does not depend on which module asks
            found = self._run_callers()
            self._memo[key] = sorted((caller.path, line, arguments) for name in run_order.callers_of(scope)
                                     for caller, _, _, line, arguments in found.get(name, ())
                                     if self._may_run(scope, arguments, caller))
        return self._memo[key]

    def named_uncalled(self, path: str, name: str, callers: Iterable[str], limit: int = 40) -> str | None:
        """Where a project file names ``name`` (a function, class or method of the module at
        ``path``) other than to call it (``{"vgg": get_vgg}``, ``callbacks=[self.restore]``),
        as "<file>:<line>"; "" when none does: the files that import the module, mention an
        attribute of that name or call it (``callers``), the module's own included. None when
        more than ``limit`` files are to be read, or one cannot be: who calls it is not known."""
        full = os.path.abspath(path)
        key = ("named uncalled", full, name)
        if key not in self._memo:
            paths = {full, *(m.path for m in self._importers().get(full, ())), *self._mentions().get(name, ()),
                     *callers}
            found: str | None = None if len(paths) > limit else ""
            for each in sorted(paths) if found == "" else ():
                tree = _parsed(each)
                line = None if tree is None else _uncalled_reference(tree, name)
                if line != 0:
                    found = None if line is None else f"{self.shown(each)}:{line}"
                    break
            self._memo[key] = found
        return self._memo[key]

    def _may_run(self, scope: str, arguments: str, caller: ModuleFacts) -> bool:
        """A call with ``arguments`` (``run_order.read``'s detail) in the module ``caller`` may
        run ``scope``: unless ``scope`` is a method and the object it is called on is bound,
        in that module, only to instances of classes unrelated to the method's
        (``tissue_trainable = SegformerTissueTrainable(...)`` then
        ``tissue_trainable.create_model(...)`` runs no other class's ``create_model``)."""
        klass, dot, _ = scope.partition(".")
        receiver = run_order.receiver_of(arguments)
        made = self._instances(caller.path).get(receiver) if dot and receiver not in ("", "self") else None
        return not made or any(klass == c or klass in self._ancestors(c) or c in self._ancestors(klass) for c in made)

    def _instances(self, path: str | None = None) -> dict[str, set[str]]:
        """Each name bound to ``Class(...)`` -> those classes: in the module at ``path``, or
        anywhere in the project."""
        found = self._memo.get(("instances", path))
        if found is None:
            found = {}
            module = self._module_at(path) if path is not None else None
            modules = [module] if module is not None else [] if path is not None else \
                [m for each in self.modules.values() for m in each]
            for module in modules:
                for _, callee, _, place, _ in run_order.entries(module.run_calls):
                    if callee.startswith("="):
                        found.setdefault(place, set()).add(callee[1:])
            self._memo[("instances", path)] = found
        return found

    def _ancestors(self, klass: str) -> set[str]:
        """The names of a project class's bases, however far up (by last name)."""
        bases: dict[str, set[str]] = self._memo.get(("class bases",))
        if bases is None:
            bases = {}
            for modules in self.modules.values():
                for module in modules:
                    for name, qualified in module.classes.items():
                        bases.setdefault(name, set()).update(q.rsplit(".", 1)[-1] for q in qualified)
            self._memo[("class bases",)] = bases
        found, todo = set(), [klass]
        while todo and len(found) < 64:
            for base in bases.get(todo.pop(), ()):
                if base not in found:
                    found.add(base)
                    todo.append(base)
        return found

    def _run_scopes(self) -> dict[tuple[str, str], list[tuple[str, str, int, str, str]]]:
        """``ModuleFacts.run_calls`` by (module path, scope) (built once)."""
        found = self._memo.get(("run scopes",))
        if found is None:
            found = {}
            for modules in self.modules.values():
                for module in modules:
                    for entry in run_order.entries(module.run_calls):
                        found.setdefault((module.path, entry[0]), []).append(entry)
            self._memo[("run scopes",)] = found
        return found

    def _run_callers(self) -> dict[str, list[tuple[ModuleFacts, str, str, int, str]]]:
        """For each name called anywhere in the project, where and how: (module, scope, place,
        line, the arguments it passes)."""
        found = self._memo.get(("run callers",))
        if found is None:
            found = {}
            for modules in self.modules.values():
                for module in modules:
                    for scope, callee, line, place, arguments in run_order.entries(module.run_calls):
                        found.setdefault(callee, []).append((module, scope, place, line, arguments))
            self._memo[("run callers",)] = found
        return found

    def _may_save(self) -> frozenset[str]:
        """The callees (as ``run_order.read`` records them) that may call a torch save: a
        function or method whose code does, itself or through calls of others that may,
        however deep, and a name bound to an object whose ``__call__`` may (built once)."""
        found = self._memo.get(("may save",))
        if found is None:
            calls: dict[str, set[str]] = {}
            for (_, scope), scope_entries in self._run_scopes().items():
                if scope:
                    calls.setdefault(scope, set()).update(callee for _, callee, _, _, _ in scope_entries)
            runs = {callee: {f"{c}.__call__" for c in made} for name, made in self._instances().items()
                    for callee in (name, f".{name}")}  # a bound instance called runs its `__call__`
            scopes: set[str] = set()  # the functions and methods that may save
            saving: set[str] = set()
            grown = True
            while grown:
                more = {scope for scope, called in calls.items()
                        if scope not in scopes and (run_order.SAVE in called or called & saving)}
                scopes |= more
                callees = {callee for scope in more for callee in run_order.callers_of(scope)}
                callees |= {callee for callee, called in runs.items() if called & scopes}
                grown = bool(more or callees - saving)
                saving |= callees
            found = self._memo[("may save",)] = frozenset(saving)
        return found

    def needs_cuda_def(self, name: str) -> bool:
        """Every function or method of the project named ``name`` needs CUDA whenever it runs,
        by its own code (``ModuleFacts.cuda_defs``) or by a call, however deep, of one that
        does (``ModuleFacts.def_calls``), and there is one: a call of ``x.name(...)`` runs
        only where CUDA is, whatever ``x`` is."""
        return name in self._cuda_def_names()

    def _cuda_def_names(self) -> frozenset[str]:
        """The names ``needs_cuda_def`` answers yes for: those whose every definition needs
        CUDA, grown until no definition's calls add one (built once)."""
        found = self._memo.get(("cuda defs",))
        if found is not None:
            return found
        defined: collections.Counter = collections.Counter()
        direct: collections.Counter = collections.Counter()
        callers: list[tuple[str, list[str]]] = []
        for modules in self.modules.values():
            for module in modules:
                defined.update(module.defs)
                direct.update(module.cuda_defs)
                callers += [(name, calls) for name, each in module.def_calls.items() for calls in each]
        needing = collections.Counter(direct)
        names = {name for name, count in needing.items() if count >= defined[name]}
        waiting = [(name, calls) for name, calls in callers if name not in names]
        while True:
            reached = [name for name, calls in waiting if not names.isdisjoint(calls)]
            if not reached:
                break
            waiting = [(name, calls) for name, calls in waiting if names.isdisjoint(calls)]
            needing.update(reached)
            names |= {name for name in reached if needing[name] >= defined[name]}
        self._memo[("cuda defs",)] = found = frozenset(names)
        return found

    def cuda_extension_imported(self, path: str, depth: int = 2) -> str | None:
        """The module at ``path`` imports a CUDA extension the project builds (by its name,
        or from the module that loads it), itself or through a project module it imports
        that does (``pointnet2_utils``, the wrapper of the kernels; ``depth`` such hops), or
        through its package's ``__init__``, which any import of it runs first:
        "<file>" of the builder, or None. Its code calls CUDA kernels; a `.cuda()` that
        feeds them is no portability bug."""
        full = os.path.abspath(path)
        key = ("cuda extension imported", full, depth)
        if key not in self._memo:
            self._memo[key] = None  # an import cycle answers None
            self._memo[key] = self._cuda_extension_imported(full, depth)
        return self._memo[key]

    def _cuda_extension_imported(self, full: str, depth: int) -> str | None:
        module = next((m for m in self.modules.get(self.paths.get(full) or "", []) if m.path == full), None)
        if module is None:
            return None
        builders = self._memo.get(("cuda extensions",))
        if builders is None:
            builders = {}
            for modules in self.modules.values():
                for other in modules:
                    for name in other.cuda_extensions:
                        builders.setdefault(name.rsplit(".", 1)[-1], other.path)
            self._memo[("cuda extensions",)] = builders
        if not builders:
            return None
        wrappers = []
        for qualified in [*module.names.values(), *module.stars, *module.lazy_imports]:
            for found in (self._module(qualified, full), (self.locate(qualified, full) or (None,))[0]):
                if found is not None and found.cuda_extensions:
                    return self.shown(found.path)
                if found is not None and found.path != full:
                    wrappers.append(found.path)
            last = qualified.rsplit(".", 1)[-1]
            if last in builders and last != "":
                return self.shown(builders[last])
        # importing a module of a package runs the package's `__init__` first, and what it imports
        package = module.name.rpartition(".")[0]
        while package:
            init = self._module(package, full)
            if init is not None and init.path != full:
                wrappers.append(init.path)
            package = package.rpartition(".")[0]
        for wrapper in dict.fromkeys(wrappers) if depth > 0 else ():
            builder = self.cuda_extension_imported(wrapper, depth - 1)
            if builder is not None:
                return builder
        return None

    def missing_import(self, path: str) -> str | None:
        """A module the file at ``path`` must import (``ModuleFacts.required_imports``) that
        its own package does not have, or that does not parse: "<module> ...", or None. The
        file fails when imported, before any of its lines run (a stale script of a project
        that moved on). Only names under a package of the project (a directory with an
        ``__init__.py``) that defines or imports no such name are judged missing."""
        full = os.path.abspath(path)
        module = next((m for m in self.modules.get(self.paths.get(full) or "", []) if m.path == full), None)
        if module is None:
            return None
        unreadable = self._memo.get(("unreadable",))
        if unreadable is None:
            unreadable = self._memo[("unreadable",)] = {
                name for p, name in self.paths.items() if p not in self.skipped and not self.modules.get(name)}
        here = os.path.dirname(full)
        for source in module.required_imports:
            parts = source.split(".")
            prefix = parts[0]
            if prefix in unreadable:
                return f"{prefix}, which does not parse"
            top = self._module(prefix, full)
            if self._on_disk(here, prefix) and (top is None or not top.path.startswith(os.path.join(here, prefix))):
                continue  # the folder beside the script is what it imports, not the package found elsewhere
            for part in parts[1:]:
                parent = self._module(prefix, full)
                if parent is None or not parent.path.endswith("__init__.py"):
                    break
                candidate = f"{prefix}.{part}"
                if candidate in unreadable:
                    return f"{candidate}, which does not parse"
                if candidate in self.modules:
                    prefix = candidate
                    continue
                if not parent.stars and part not in parent.names and part not in parent.defined \
                        and part not in parent.classes and part not in parent.returns \
                        and not self._on_disk(parent.directory, part):
                    return f"{candidate}, which the project does not have"
                break
        for entry in module.required_names:
            source, name = entry.rsplit(":", 1)
            if not self._binds(source, name, full):
                return f"`{name}` from {source}, which does not define it"
        return None

    def imported_constant(self, path: str, name: str) -> str | None:
        """The device string ``name`` holds in the file at ``path`` when it imports it from a
        project module that binds it once to one (``ModuleFacts.device_constants``), by name or
        with ``*`` (``from DataUtils.Common import *`` bringing ``cpu_device = "cpu"``)."""
        full = os.path.abspath(path)
        module = self._module_at(full)
        if module is None:
            return None
        qualified = module.names.get(name)
        todo = [(*qualified.rpartition(".")[::2], full, 0)] if qualified is not None \
            else [(s, name, full, 0) for s in module.stars]
        while todo:  # through the modules' own `*` imports too (a package re-exporting its common names)
            source, original, origin, depth = todo.pop(0)
            found = self._module(source, origin)
            if found is None or depth > 3:
                continue
            if original in found.device_constants:
                return found.device_constants[original]
            if original not in (found.top_bindings or ()):
                todo += [(s, original, found.path, depth + 1) for s in found.stars]
        return None

    def _constants_in_reach(self, module: ModuleFacts) -> tuple:
        """The device constants ``imported_constant`` may answer with for ``module``: those of
        the modules it imports names from, and along their ``*`` imports."""
        found, todo, seen = set(), [(q.rpartition(".")[0], module.path) for q in module.names.values()] + [
            (s, module.path) for s in module.stars], set()
        while todo:
            source, origin = todo.pop()
            target = self._module(source, origin)
            if target is None or target.path in seen:
                continue
            seen.add(target.path)
            found.update((target.path, *item) for item in target.device_constants.items())
            todo += [(s, target.path) for s in target.stars]
        return tuple(sorted(found))

    def _binds(self, source: str, name: str, origin: str) -> bool:
        """``from source import name`` finds ``name``, as far as the project shows: True unless
        ``source`` is a script's sibling module or a module of a project package, the
        module's whole top level is readable (``ModuleFacts.top_bindings``) and nothing there,
        nor a submodule file, nor another module's assignment (`data.Reader = ...`), binds it."""
        found = self.modules.get(source)
        if not found or source.split(".")[0] in sys.stdlib_module_names:
            return True
        # a sibling is what a script imports (its folder comes first on sys.path), not a package's module
        here = os.path.dirname(origin)
        target = next((m for m in found if m.directory == here), None) \
            if not os.path.exists(os.path.join(here, "__init__.py")) else None
        if target is None and "." in source and len(found) == 1:
            target = found[0]
        if target is None or target.skipped or target.top_bindings is None or target.stars:
            return True
        if name in target.top_bindings or self.replaced_from_outside(name):
            return True
        stem = os.path.basename(target.path).rsplit(".", 1)[0]
        if stem == "__init__":
            return self._on_disk(target.directory, name) or self._builds_extensions(target.directory)
        # a compiled module or stub beside the source (`data.cpython-311-x86_64-linux-gnu.so`) is what imports
        return self._siblings(target.directory, stem)

    def _builds_extensions(self, directory: str) -> bool:
        """``directory`` or its parent holds compiled code's sources or a build script: the
        modules a build puts there (`deform_conv_cuda`, `_ext/nms`) are not in a checkout."""
        for folder in (directory, os.path.dirname(directory)):
            for entry in self._entries(folder) or ():
                if entry in _BUILD_FILES or entry.rpartition(".")[2] in _COMPILED_SOURCES:
                    return True
        return False

    def _siblings(self, directory: str, stem: str) -> bool:
        """``directory`` holds a file called ``stem`` besides ``stem.py`` (a compiled module, a
        stub), or cannot be listed."""
        entries = self._entries(directory)
        return entries is None or any(e.split(".", 1)[0] == stem and e != f"{stem}.py" for e in entries)

    def _on_disk(self, directory: str, name: str) -> bool:
        """A directory (a namespace package) or a file of any kind (a compiled extension,
        a module over the index's budget) called ``name`` in ``directory``."""
        stems = self._memo.get(("stems", directory))
        if stems is None:
            stems = self._memo[("stems", directory)] = frozenset(
                entry.split(".", 1)[0] for entry in self._entries(directory) or ())
        return name in stems

    def _entries(self, directory: str) -> tuple[str, ...] | None:
        """The names in ``directory``; None when it cannot be listed."""
        key = ("entries", directory)
        if key not in self._memo:
            try:
                self._memo[key] = tuple(os.listdir(directory))
            except OSError:
                self._memo[key] = None
        return self._memo[key]

    def gpu_library_imported(self, path: str) -> str | None:
        """A project module the file at ``path`` imports (by name or ``*``) that must import
        a GPU-only library (``ModuleFacts.gpu_library``): "<file> imports <library>", or
        None. The file cannot even be imported without it."""
        full = os.path.abspath(path)
        key = ("GPU library imported", full)
        if key not in self._memo:
            self._memo[key] = self._gpu_library_through(full)
        return self._memo[key]

    def importers_need_gpu(self, path: str) -> str | None:
        """Every project module that imports the module at ``path`` cannot be imported without
        a GPU-only library (``ModuleFacts.gpu_library``, its own or through the project modules
        it imports: RAFT-3D's modules all reach ``lietorch_extras``), and one does: the
        module's code runs only where those do. "<importer>: <how it needs the library>" of
        the first, or None."""
        full = os.path.abspath(path)
        key = ("importers need a GPU", full)
        if key not in self._memo:
            importers = sorted(self._importers().get(full, ()), key=lambda m: m.path)
            needs = [(m, m.gpu_library and f"it imports {m.gpu_library}" or self.gpu_library_imported(m.path))
                     for m in importers]
            self._memo[key] = f"{self.shown(needs[0][0].path)}: {needs[0][1]}" \
                if needs and all(how for _, how in needs) else None
        return self._memo[key]

    def _gpu_library_through(self, full: str) -> str | None:
        """``gpu_library_imported``, also through up to two project modules between
        (cdvd_tsp -> flow_pwc -> correlation, which imports cupy)."""
        chain: dict[str, str | None] = {}
        layer = [m for m in self._imported_modules(full)]
        for found in layer:
            chain.setdefault(found.path, None)
        for _ in range(3):
            hit = next((m for m in layer if m.gpu_library), None)
            if hit is not None:
                steps, at = [], hit.path
                while at is not None:  # from the module that imports the library back to the first
                    steps.append(self.shown(at))
                    at = chain.get(at)
                steps.reverse()
                return steps[0] + "".join(f", which imports {step}" for step in steps[1:]) \
                    + (" imports " if len(steps) == 1 else ", which imports ") + hit.gpu_library
            following = []
            for module in layer:
                for found in self._imported_modules(module.path):
                    if found.path != full and found.path not in chain:
                        chain[found.path] = module.path
                        following.append(found)
            layer = following
        return None

    def _imported_modules(self, path: str) -> list[ModuleFacts]:
        """The other project modules the file at ``path`` imports from (by name or ``*``),
        found once per file: the questions that follow imports a few modules deep ask it for
        the same files again and again (a package of a thousand modules made that quadratic)."""
        full = os.path.abspath(path)
        key = ("imported modules", full)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = []
            module = next((m for m in self.modules.get(self.paths.get(full) or "", []) if m.path == full), None)
            for qualified in [*module.names.values(), *module.stars] if module is not None else ():
                for imported in (self._module(qualified, full), (self.locate(qualified, full) or (None,))[0]):
                    if imported is not None and imported.path != full:
                        found.append(imported)
        return found

    def cuda_only_import(self, path: str, depth: int = 2) -> str | None:
        """A project module the file at ``path`` imports from (by name or ``*``), directly or
        through up to ``depth - 1`` project modules between (a script -> its model -> the
        model's recurrent cells), that is written for CUDA only (``ModuleFacts.cuda_only``):
        "<file>" or "<file>, which imports <file>", or None. A script that chooses the CPU but
        runs such code offers a CPU path that never ran: fixing its own ``.cuda()`` would not
        make it run there."""
        start = os.path.abspath(path)
        seen, frontier = {start}, [(start, "")]
        for _ in range(depth):
            following = []
            for current, via in frontier:
                for module in self._imported_modules(current):
                    if module.path in seen:
                        continue
                    seen.add(module.path)
                    shown = self.shown(module.path)
                    if module.cuda_only:
                        return f"{via}, which imports {shown}" if via else shown
                    following.append((module.path, via or shown))
            frontier = following
        return None

    def default_device(self) -> str | None:
        """Where the project sets torch's default device to an accelerator's ("<file>:<line>"),
        or None: there, factories without ``device=`` do not build on the CPU."""
        for modules in self.modules.values():
            for module in modules:
                if module.default_device:
                    return f"{self.shown(module.path)}:{module.default_device.split()[-1]}"
        return None

    def moved_to_device(self, name: str, path: str | None = None) -> bool:
        """The project moves a module made by a call of ``name`` (a class or a function that
        builds one) to a device other than the CPU: directly (``Net().to(device)``), as a
        submodule of one it moves (a class its ``__init__`` makes), or built by a function
        whose result it moves (``make_model().to(device)`` builds ``Normalize(...)``).

        Calls are matched by name. Where several files define a class ``name`` (two
        ``Coder``s, copies of one project), only the modules near ``path``, the file of the
        class asked about, count: those in its folder (and below) and those importing from
        a module there."""
        folder = None
        if path is not None and self._class_definitions()[name] > 1:
            folder = os.path.dirname(os.path.abspath(path))
        moved = self._memo.get(("moved to a device", folder))
        if moved is None:
            modules = [m for ms in self.modules.values() for m in ms
                       if folder is None or self._near(m, folder)]
            self._memo[("moved to a device", folder)] = moved = _moved_makers(modules)
        return name in moved

    def _class_definitions(self) -> collections.Counter:
        """How many modules define a top-level class of each name (counted once)."""
        counts = self._memo.get(("class definitions",))
        if counts is None:
            counts = self._memo[("class definitions",)] = collections.Counter(
                name for modules in self.modules.values() for module in modules for name in module.classes)
        return counts

    def _near(self, module: ModuleFacts, folder: str) -> bool:
        """``module`` is in ``folder`` (or below it), or imports from a module there (as the
        import resolves from where ``module`` is: a script's sibling first)."""
        if os.path.abspath(module.path).startswith(folder + os.sep):
            return True
        for qualified in module.names.values():
            imported = self._module(qualified.rsplit(".", 1)[0], module.path) if "." in qualified else None
            if imported is not None and os.path.abspath(imported.path).startswith(folder + os.sep):
                return True
        return False

    def moved_by_override(self, attribute: str) -> bool:
        """A move override somewhere in the project assigns an attribute of this name
        (``ModuleFacts.override_moved``): the module's moves carry it along."""
        return attribute in self._override_moved()

    def unbindable(self, qualified: str, origin: str, positional: int, keywords: list[str]) -> str | None:
        """Why a call of the project's function or class ``qualified`` (as ``origin`` names
        it) with these arguments raises TypeError on every machine; None when it may bind,
        or the callee is not the project's (or not known)."""
        signature = self.signature(qualified, origin)
        why = unbound(signature, positional, keywords) if signature is not None else None
        return f"`{qualified.rpartition('.')[2]}` {why}" if why else None

    def signature(self, qualified: str, origin: str) -> str | None:
        """``ModuleFacts.signatures``' entry for the project's function or class
        ``qualified`` (as ``origin`` names it), through a package's re-exports."""
        for _ in range(3):  # a package's `__init__` may import it from the module that defines it
            module_name, _, name = qualified.rpartition(".")
            module = self._module(module_name, origin) if module_name else None
            if module is None:
                return None
            if name in module.signatures or name not in module.names:
                return module.signatures.get(name)
            qualified, origin = module.names[name], module.path
        return None

    def replaced_from_outside(self, attribute: str) -> bool:
        """Code of the project assigns ``attribute`` on an object other than ``self``
        (``ModuleFacts.replaced``): what a class keeps there may be that value instead."""
        names = self._memo.get(("replaced",))
        if names is None:
            names = frozenset(a for modules in self.modules.values() for m in modules for a in m.replaced)
            self._memo[("replaced",)] = names
        return attribute in names

    def _override_moved(self) -> frozenset[str]:
        names = self._memo.get(("override moved",))
        if names is None:
            names = frozenset(a for modules in self.modules.values() for m in modules for a in m.override_moved)
            self._memo[("override moved",)] = names
        return names

    def builds(self, name: str) -> bool:
        """Some code of the project calls ``name`` whenever it runs (``top_calls``,
        ``def_calls``, ``init_calls``) and no function returns what the call builds
        (``return Inner()``: its callers may move it): a module of that class is built, and
        kept, somewhere."""
        built = self._memo.get(("built",))
        if built is None:
            built, returned = set(), set()
            for modules in self.modules.values():
                for module in modules:
                    built.update(module.top_calls)
                    returned.update(r[5:].rsplit(".", 1)[-1] for r in module.returns.values() if r.startswith("call:"))
                    for each in module.def_calls.values():
                        for calls in each:
                            built.update(calls)
                    for calls in module.init_calls.values():
                        built.update(calls)
            self._memo[("built",)] = built = frozenset(built - returned)
        return name in built

    def cuda_def_names(self) -> tuple[str, ...]:
        """The names ``needs_cuda_def`` answers yes for (a cache key part)."""
        return tuple(sorted(self._cuda_def_names()))

    def nccl_groups_only(self, path: str) -> bool:
        """Does the project of the file at ``path`` (the modules under the directory that
        holds its outermost package, or beside it for a script) open process groups, every
        one with NCCL, and name no other backend or launcher (``process_groups``)? Then its
        distributed code runs on NVIDIA GPUs only."""
        root = package_root(path)
        if os.path.isfile(os.path.join(root, "__init__.py")):
            root = os.path.dirname(root)
        key = ("nccl only", root)
        if key not in self._memo:
            prefix = os.path.join(root, "")
            groups = [
                g for modules in self.modules.values() for m in modules
                if m.path.startswith(prefix) for g in m.groups
            ]
            self._memo[key] = bool(groups) and all(g == "nccl" for g in groups)
        return self._memo[key]

    def saved_on_cpu(self, shape: str) -> bool:
        """Every file named ``shape`` (``file_name_shape``) that the project writes, it
        writes with ``torch.save`` from code that never names a device (``names_devices``):
        the saving module, the project functions and modules it imports, and every module
        that imports it, directly or through others (its callers may hand it the data). So
        the file holds CPU tensors only, and loads on any machine. A module that writes a
        file of that name any other way (``accelerator.save``, a copy, a download) leaves it
        unknown. Not seen: a library that moves data to a GPU by itself."""
        key = ("cpu saved", shape)
        if key not in self._memo:
            self._memo[key] = False  # a file made from itself: not known to be CPU
            writers, others = self._writers()
            self._memo[key] = shape in writers and shape not in others and all(
                self._writes_from_cpu(m) for m in writers[shape])
        return self._memo[key]

    def cpu_saved_names(self) -> tuple[str, ...]:
        """Every file name ``saved_on_cpu`` holds for: what a load's finding may depend on."""
        key = ("cpu saved names",)
        if key not in self._memo:
            self._memo[key] = tuple(sorted(s for s in self._writers()[0] if self.saved_on_cpu(s)))
        return self._memo[key]

    def saved_names(self) -> tuple[str, ...]:
        """Every file name (``file_name_shape``) the project's ``torch.save`` calls write, and
        the functions and classes that call it: what a load's round trip through a project
        helper depends on (a cache key part, ``facts_for``)."""
        defs = sorted((m.path, d) for modules in self.modules.values() for m in modules for d in m.saving_defs)
        return (*sorted(self._writers()[0]), *(f"{path}:{name}" for path, name in defs))

    def package_cpu_path(self, path: str) -> str | None:
        """Where a module of the package holding ``path`` (its outermost package) shows a
        CPU path (``ModuleFacts.cpu_path``): "<file>:<line>", or None where none does."""
        prefix = package_root(path) + os.sep
        key = ("package cpu path", prefix)
        if key not in self._memo:
            found = sorted(f"{os.path.relpath(m.path, prefix)}:{m.cpu_path.split()[-1]}"
                           for modules in self.modules.values() for m in modules
                           if m.cpu_path and m.path.startswith(prefix))
            self._memo[key] = found[0] if found else None
        return self._memo[key]

    def cpu_weights(self) -> str | None:
        """The project saves its weights as CPU tensors: at least one of its ``torch.save``
        calls of weights comes after the saving function moved them to the CPU
        (``state_dict[k] = v.cpu()``), and every other one is in a module that never names a
        device. Then the checkpoints it wrote (and published) load anywhere. The answer is
        "<file>:<line>" of such a save, or None."""
        key = ("cpu weights",)
        if key not in self._memo:
            first, others_on_cpu = None, True
            for modules in self.modules.values():
                for module in modules:
                    for entry in module.weight_saves:
                        kind, line, _ = save_entry(entry)
                        if kind == "cpu":
                            first = min(first, (module.path, int(line))) if first else (module.path, int(line))
                        elif module.names_devices:
                            others_on_cpu = False
            self._memo[key] = (f"{self.shown(first[0])}:{first[1]}"
                               if first is not None and others_on_cpu else None)
        return self._memo[key]

    def some_cpu_weights(self, tests: bool = True) -> str | None:
        """Where the project saves weights as CPU tensors: a ``torch.save`` of weights moved
        to the CPU first, or one in a module that places nothing on a device
        (``_writes_from_cpu``). "<file>:<line>" of the first, or None. ``tests``: count the
        saves of test code too (a fixture's file is only ever loaded by tests)."""
        key = ("some cpu weights", tests)
        if key not in self._memo:
            found = sorted((m.path, save_entry(entry)[1])
                           for modules in self.modules.values() for m in modules for entry in m.weight_saves
                           if (entry.startswith("cpu:") or self._writes_from_cpu(m))
                           and (tests or not is_test_path(m.path)))
            self._memo[key] = f"{self.shown(found[0][0])}:{found[0][1]}" if found else None
        return self._memo[key]

    def root(self) -> str:
        """The folder that holds every indexed file."""
        root = self._memo.get(("root",))
        if root is None:
            paths = [m.path for modules in self.modules.values() for m in modules]
            root = self._memo[("root",)] = os.path.dirname(os.path.commonpath(paths)) if len(paths) == 1 \
                else os.path.commonpath(paths) if paths else os.getcwd()
        return root

    def shown(self, path: str) -> str:
        """``path`` as evidence names it: from the folder that holds every indexed file, so
        that `train.py` and `backup/train.py` stay apart."""
        key = ("shown", path)
        if key not in self._memo:
            self._memo[key] = os.path.relpath(path, self.root()).replace(os.sep, "/")
        return self._memo[key]

    def indexed_folder(self) -> str:
        """Where the index looked, as evidence names it (relative to the working directory
        when under it): a run on one file indexes its package, not the whole project."""
        root = self.root()
        shown = os.path.relpath(root)
        return (root if shown.startswith("..") else shown).replace(os.sep, "/")

    def users_cpu_path(self, path: str, fact: str = "cpu_path",
                       named: str | None = None) -> tuple[str | None, tuple[str, ...]]:
        """How the project code that uses the module at ``path`` places tensors: the modules
        that import it, directly or through modules that name no device (a package's
        ``__init__`` re-exporting it), and name a device themselves. The answer: where the
        first of them shows a CPU path (``cpu_path``, "<file>:<line>") or None; their file
        names (None with names: every user that places tensors runs on CUDA only, as far as
        the project shows; no names: its callers are out of sight). ``fact``: which of the
        users' facts counts, ``cpu_path`` (any CPU path) or ``cpu_choice`` (they choose it).
        ``named``: a CPU path counts only in a user that names it (imports or mentions it).
        A user's CPU choice counts only if its own code calls no ``.cuda()`` outside a device
        test, and defines no function or method that needs CUDA whenever it runs (a trainer
        whose epoch loop opens a prefetcher on a CUDA stream), and imports no CUDA extension
        the project builds (its import fails without CUDA): such a user never ran on the CPU
        path it shows."""
        full = os.path.abspath(path)
        key = ("users cpu path", full, fact, named)
        if key not in self._memo:
            where, users = [], self._device_users(full)
            for importer in users:
                shown = getattr(importer, fact)
                if shown and (named is None or _names(importer, named)) \
                        and self._cuda_def_names().isdisjoint(importer.top_calls) \
                        and self._cuda_def_names().isdisjoint(importer.defs) \
                        and not (fact == "cpu_choice" and importer.unguarded_cuda) \
                        and self.cuda_extension_imported(importer.path) is None:
                    where.append((importer.path, int(shown.split()[-1])))
            first = min(where) if where else None
            self._memo[key] = (f"{self.shown(first[0])}:{first[1]}" if first else None,
                               tuple(sorted(self.shown(u.path) for u in users)))
        return self._memo[key]

    def users_on_cuda(self, path: str) -> str | None:
        """Every project module that uses the module at ``path`` and names a device
        (``_device_users``) is written for CUDA: it makes no CPU choice, and calls ``.cuda()``
        outside any device test or imports a GPU-only library (a CPU path it shows, such as a
        ``map_location``, is no run of its own on the CPU), or shows no CPU path at all and is
        itself used only so (up to three modules up: a configuration a CUDA-only trainer
        reads). The device its code follows is a CUDA one. The files of its users, or None
        (one may run on the CPU, or the users are out of sight)."""
        full = os.path.abspath(path)
        if not self._used_on_cuda_only(full, 0, {full}):
            return None
        return ", ".join(sorted(self.shown(u.path) for u in self._device_users(full)))

    def _used_on_cuda_only(self, full: str, depth: int, seen: set[str]) -> bool:
        users = self._device_users(full)
        return bool(users) and all(not u.cpu_choice and (
            u.unguarded_cuda or bool(u.gpu_library) or not u.cpu_path and depth < 2 and u.path not in seen
            and self._used_on_cuda_only(u.path, depth + 1, seen | {u.path})) for u in users)

    def _device_users(self, full: str) -> list[ModuleFacts]:
        """The modules that import the module at ``full``, directly or through modules that
        name no device (a package's ``__init__`` re-exporting it), and name a device themselves
        (found once)."""
        key = ("device users", full)
        if key not in self._memo:
            reached, todo, users = {full}, [full], []
            while todo:
                for importer in self._importers().get(todo.pop(), ()):
                    if importer.path in reached:
                        continue
                    reached.add(importer.path)
                    if importer.names_devices:
                        users.append(importer)
                    else:
                        todo.append(importer.path)
            self._memo[key] = users
        return self._memo[key]

    def stopped_without_cuda(self, path: str) -> str | None:
        """Every run that reaches the module at ``path`` stops first where there is no CUDA:
        each module a run starts from (one nothing imports that does work when run, up the
        importers from ``path``; there is one at least) stops itself (``ModuleFacts.stops_without_cuda``) or imports a module that does
        (``from preparation import *`` of a script whose helper exits without a GPU). The
        first such stop ("<file>:<line>"), or None."""
        full = os.path.abspath(path)
        key = ("stopped without CUDA", full)
        if key not in self._memo:
            importers = self._top_importers()
            reached, todo, starts = {full}, [full], []
            while todo and len(reached) < 4096:
                current = todo.pop()
                above = importers.get(current, ())
                if not above:
                    starts.append(current)
                for importer in above:
                    if importer.path not in reached:
                        reached.add(importer.path)
                        todo.append(importer.path)
            stops = [self._stop_of(start) for start in sorted(starts)
                     if (found := self._module_at(start)) is not None and found.runs_code]
            self._memo[key] = stops[0] if stops and all(stops) else None
        return self._memo[key]

    def _stop_of(self, path: str) -> str | None:
        """Where the module at ``path`` or one it imports stops a run without CUDA."""
        module = self._module_at(path)
        if module is None:
            return None
        imported = [self._module(q, module.path) or self._module(q.rpartition(".")[0], module.path)
                    for q in [*module.names.values(), *module.stars]]
        for found in (module, *imported):
            if found is not None and found.stops_without_cuda:
                return f"{self.shown(found.path)}:{found.stops_without_cuda.removeprefix('line ')}"
        return None

    def _top_importers(self) -> dict[str, list[ModuleFacts]]:
        """Module path -> the project modules whose top level imports it (``top_imports``)."""
        return self._importer_map(("top importers",), lambda module: module.top_imports)

    def holds(self, path: str) -> bool:
        """The index read the file at ``path`` (not a notebook, nor a file outside the run)."""
        return os.path.abspath(path) in self.paths

    def sites_of(self, path: str, text: str) -> frozenset[str] | None:
        """Where a rule could report in ``path`` (``sites.py``), when the index read this very
        text; None when it did not (an editor's unsaved buffer, a notebook) or cannot say."""
        facts = self._module_at(os.path.abspath(path))
        if facts is None or facts.sites is None:
            return None
        if facts.digest != _digest(text.encode("utf-8", "surrogatepass")):
            return None
        return frozenset(facts.sites)

    def _module_at(self, path: str) -> ModuleFacts | None:
        return next((m for m in self.modules.get(self.paths.get(path) or "", []) if m.path == path), None)

    def run_from(self, path: str) -> bool:
        """Code that runs imports the module at ``path``, directly or through other modules:
        one outside any package (a script, or a module beside the scripts) or a test. No:
        nothing in the project uses it, as for an unused copy of a model package."""
        full = os.path.abspath(path)
        key = ("run from", full)
        if key not in self._memo:
            self._memo[key] = self._run_from(full)
        return self._memo[key]

    def _run_from(self, full: str) -> bool:
        reached, todo = {full}, [full]
        while todo:
            for importer in self._importers().get(todo.pop(), ()):
                if importer.path in reached:
                    continue  # already asked: each importer once (a package of a thousand modules)
                reached.add(importer.path)
                name = os.path.basename(importer.path)
                if not self._in_package(importer.path) or name.startswith(("test", "conftest")):
                    return True
                todo.append(importer.path)
        return False

    def _in_package(self, path: str) -> bool:
        key = ("in package", path)
        if key not in self._memo:
            self._memo[key] = module_name(path)[1]
        return self._memo[key]

    def device_weights(self, path: str) -> str | None:
        """Where the program of the module at ``path`` (``same_program``) saves weights that
        may be on an accelerator: a ``torch.save`` of weights not moved to the CPU first
        ("plain" in ``weight_saves``) in a module that may place tensors on devices (it, a
        project module it uses, or one that imports it names a device: not
        ``_writes_from_cpu``). A program that saves no weights reads those another writes
        (an inference folder beside the training one): the whole project's count then. The
        checkpoints it writes, those it publishes too, can then hold accelerator tensors.
        "<file>:<line>" of the first such save, or None."""
        full = os.path.abspath(path)
        key = ("device weights", self._program_of(full))
        if key not in self._memo:
            savers = [m for modules in self.modules.values() for m in modules if m.weight_saves]
            own = [m for m in savers if self.same_program(full, m.path)]
            found = sorted((m.path, save_entry(entry)[1]) for m in own or savers for entry in m.weight_saves
                           if entry.startswith("plain:") and not self._writes_from_cpu(m))
            self._memo[key] = f"{self.shown(found[0][0])}:{found[0][1]}" if found else None
        return self._memo[key]

    def same_program(self, one: str, other: str) -> bool:
        """The modules at ``one`` and ``other`` may run in one program: one of them is at the
        project's root, or they are in the same folder, or in folders whose modules import
        one another's, however indirectly. A repository that keeps one program per folder
        (``a3c/``, ``dqn/``, ``ppo/``, none importing another) does not call in one what
        another defines, nor read in one what another writes."""
        first, second = self._program_of(one), self._program_of(other)
        return first is None or second is None or first == second

    def _program_of(self, full: str) -> int | None:
        """The number ``same_program`` compares: shared by the folders whose modules import
        one another's; None for a module at the project's root."""
        programs = self._memo.get(("programs",))
        if programs is None:
            root, parent = self.root(), {}

            def find(folder: str) -> str:
                while parent.setdefault(folder, folder) != folder:
                    folder = parent[folder]
                return folder

            for target, importers in self._importers().items():
                for importer in importers:
                    one, other = os.path.dirname(target), os.path.dirname(importer.path)
                    if root not in (one, other):  # the root's modules serve every program
                        parent[find(one)] = find(other)
            folders = {os.path.dirname(m.path) for modules in self.modules.values() for m in modules} - {root}
            roots = sorted({find(f) for f in folders})
            programs = self._memo[("programs",)] = {f: roots.index(find(f)) for f in folders}
        return programs.get(os.path.dirname(full))

    def saved_under(self, tail: str) -> str | None:
        """A module whose torch save writes a path kept under the attribute or key ``tail``
        (``torch.save(best, self.bestModelPath)``: ``ModuleFacts.saved_tails``), shown
        relative to the project; None when none does."""
        key = ("saved under", tail)
        if key not in self._memo:
            found = sorted(m.path for modules in self.modules.values() for m in modules if tail in m.saved_tails)
            self._memo[key] = self.shown(found[0]) if found else None
        return self._memo[key]

    def saved_whole_around(self, part: str) -> str | None:
        """Every save of weights from a device writes a whole model that has ``part`` (its
        class, or a base of it, assigns ``self.<part>``): the keys of such a checkpoint start
        with "<part>.", so none of them is what a load into that part reads; that file is
        the part's own weights, from elsewhere. "`<Class>`, <file>:<line>" of the first such
        save, or None (a save of a module the code does not show, of another class, or none)."""
        key = ("saved whole around", part)
        if key not in self._memo:
            saves = sorted((m.path, *save_entry(entry)[1:]) for modules in self.modules.values() for m in modules
                           for entry in m.weight_saves if entry.startswith("plain:") and not self._writes_from_cpu(m))
            parts = self._class_parts()
            whole = bool(saves) and all(
                classes and all(any(part in parts.get(c, ()) for c in {klass, *self._ancestors(klass)})
                                for klass in classes)
                for _, _, classes in saves)
            self._memo[key] = f"`{saves[0][2][0]}`, {self.shown(saves[0][0])}:{saves[0][1]}" if whole else None
        return self._memo[key]

    def _class_parts(self) -> dict[str, set[str]]:
        """``ModuleFacts.class_parts`` of the whole project, by class name (built once)."""
        found = self._memo.get(("class parts",))
        if found is None:
            found = {}
            for modules in self.modules.values():
                for module in modules:
                    for klass, parts in module.class_parts.items():
                        found.setdefault(klass, set()).update(parts)
            self._memo[("class parts",)] = found
        return found

    def device_saver_shapes(self) -> tuple[str, ...]:
        """The names (``file_name_shape``) of the files the modules of ``device_weights``
        save, each module with a weights save from code that may be on a device; () when one
        of them saves under a name the code does not spell."""
        key = ("device saver shapes",)
        if key not in self._memo:
            savers = [m for modules in self.modules.values() for m in modules
                      if any(e.startswith("plain:") for e in m.weight_saves) and not self._writes_from_cpu(m)]
            self._memo[key] = () if any(not m.saves for m in savers) else tuple(
                sorted({shape for m in savers for shape in m.saves}))
        return self._memo[key]

    def files_named(self, shape: str, limit: int = 20000) -> list[str]:
        """The files under the project's root whose name has the shape ``shape`` (``{}``
        stands for any text): what the repository ships of what a save writes. Hidden and
        cache folders are skipped; the walk stops after ``limit`` entries."""
        key = ("files named", shape)
        if key not in self._memo:
            pattern = re.compile(".*".join(re.escape(part) for part in shape.split("{}")) + r"\Z")
            found: list[str] = []
            seen = 0
            for folder, dirs, names in os.walk(self.root()):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                seen += len(names) + len(dirs)
                found += [os.path.join(folder, n) for n in sorted(names) if pattern.match(n)]
                if seen > limit:
                    break
            self._memo[key] = found
        return self._memo[key]

    def writes_file(self, shape: str) -> bool:
        """Some code of the project writes a file named ``shape`` (``file_name_shape``): a
        ``torch.save`` or another writer (a copy, ``accelerator.save``), of the same name or
        of a template that names it (``best_{}.pth`` and ``best_model.pth``), either way."""
        writers, others = self._writers()
        return any(written == shape or template_names(written, shape) or template_names(shape, written)
                   for written in (*writers, *others))

    def written_names(self) -> tuple[str, ...]:
        """Every file name the project writes, by ``torch.save`` or otherwise: what
        ``writes_file`` depends on (a cache key part)."""
        writers, others = self._writers()
        return tuple(sorted({*writers, *others}))

    def _writers(self) -> tuple[dict[str, list[ModuleFacts]], set[str]]:
        """File name -> the modules whose ``torch.save`` writes it; the names other calls write."""
        key = ("writers",)
        if key not in self._memo:
            writers: dict[str, list[ModuleFacts]] = {}
            others: set[str] = set()
            for modules in self.modules.values():
                for module in modules:
                    for shape in module.saves:
                        writers.setdefault(shape, []).append(module)
                    others.update(module.other_writes)
            self._memo[key] = writers, others
        return self._memo[key]

    def _writes_from_cpu(self, module: ModuleFacts) -> bool:
        key = ("writes from cpu", module.path)
        if key not in self._memo:
            self._memo[key] = False  # while it is being answered (a cycle of loads)
            self._memo[key] = self._fed_from_cpu(module)
        return self._memo[key]

    def _fed_from_cpu(self, module: ModuleFacts) -> bool:
        reached, todo = {module.path}, [module]
        while todo:  # the module and every module that imports it, transitively
            current = todo.pop()
            if current.names_devices or not all(self.saved_on_cpu(s) for s in current.loads):
                return False  # it may place tensors, or re-save a file loaded onto its devices
            for importer in self._importers().get(current.path, ()):
                if importer.path not in reached:
                    reached.add(importer.path)
                    todo.append(importer)
        for qualified in module.names.values():  # what the saving module uses of the project
            imported = self._module(qualified, module.path)
            if imported is not None and imported.names_devices:
                return False
            found = self.locate(qualified, module.path)
            if found is not None and found[1] in found[0].device_defs:
                return False
        stars = [self._module(star, module.path) for star in module.stars]
        return not any(m is not None and m.names_devices for m in stars)

    def _importers(self) -> dict[str, list[ModuleFacts]]:
        """Module path -> the project modules that import it or a name from it."""
        return self._importer_map(("importers",), lambda module: [*module.names.values(), *module.stars])

    def _importer_map(self, key: tuple, imported: Callable[[ModuleFacts], list[str]]) -> dict[str, list[ModuleFacts]]:
        """Module path -> the project modules ``imported`` says import it (a module, or the
        module of an imported name), read once."""
        importers = self._memo.get(key)
        if importers is None:
            importers = {}
            for modules in self.modules.values():
                for other in modules:
                    for qualified in imported(other):
                        target = self._module(qualified, other.path) or self._module(
                            qualified.rpartition(".")[0], other.path)
                        if target is not None and target is not other:
                            importers.setdefault(target.path, []).append(other)
            self._memo[key] = importers
        return importers

    def facts_for(self, path: str) -> tuple:
        """What one file's findings may depend on: for each project name it imports (and
        each star import), the answers the index gives about it. A cache key part."""
        full = os.path.abspath(path)
        name = self.paths.get(full)
        module = next((m for m in self.modules.get(name or "", []) if m.path == full), None)
        if module is None:
            return ()
        facts = []
        for local, qualified in sorted(module.names.items()):
            found = self._find(qualified, full)
            if found is not None and found[0] != "external":
                facts.append((local, self.is_module_class(qualified, full), self.returns(qualified, full)))
        for star in module.stars:
            facts.append((star, tuple(sorted(self.exports(star, full).items()))))
        facts.append(("imported by others", tuple(sorted(self.imported_from(full) or ()))))
        facts.append(("imported", self.imported_digest(full)))
        facts.append(("saved on the CPU", self.cpu_saved_names()))
        facts.append(("saved names", self.saved_names()))
        facts.append(("package CPU path", self.package_cpu_path(full)))
        facts.append(("weights saved on the CPU", self.cpu_weights()))
        facts.append(("weights saved from a device", self.device_weights(full)))
        facts.append(("weights saved on the CPU somewhere", self.some_cpu_weights()))
        facts.append(("users' CPU path", self.users_cpu_path(full)))
        facts.append(("users' CPU choice", self.users_cpu_path(full, "cpu_choice")))
        facts.append(("users' CPU choice by definition", tuple(
            (name, self.users_cpu_path(full, "cpu_choice", name)[0]) for name in (*module.defs, *module.classes))))
        facts.append(("imported by code that runs", self.run_from(full)))
        facts.append(("stopped without CUDA", self.stopped_without_cuda(full)))
        facts.append(("written names", self.written_names()))
        facts.append(("process groups NCCL only", self.nccl_groups_only(full)))
        facts.append(("defs that need CUDA", self.cuda_def_names()))
        facts.append(("attributes moved by overrides", tuple(sorted(self._override_moved()))))
        facts.append(("attributes replaced from outside", tuple(
            a for a in module.attributes if self.replaced_from_outside(a))))
        facts.append(("classes moved to a device", tuple(c for c in module.classes if self.moved_to_device(c))))
        facts.append(("default device set", self.default_device()))
        facts.append(("device constants imported", self._constants_in_reach(module)))
        facts.append(("CUDA extension imported", self.cuda_extension_imported(full)))
        facts.append(("CUDA-only module imported", self.cuda_only_import(full)))
        facts.append(("importers need a GPU library", self.importers_need_gpu(full)))
        facts.append(("defs mentioned elsewhere", tuple(n for n in module.defs if self.mentioned_elsewhere(n, full))))
        facts.append(("loads saved earlier in every run", tuple(
            (line, self.saved_earlier_in_every_run(full, line)) for _, callee, line, _, _
            in run_order.entries(module.run_calls) if callee == run_order.LOAD)))
        facts.append(("calls of definitions with flags", tuple(
            (scope, _digest(repr(self.calls_of(scope, full)).encode())) for scope in module.flag_scopes)))
        facts.append(("CUDA needed to reach", tuple(
            (scope, self.cuda_needed_to_reach(full, scope)) for scope in (*module.defs, *module.classes))))
        facts.append(("CUDA needed earlier in every run", tuple(
            (line, callee, self.cuda_needed_earlier_in_every_run(full, line, callee)) for _, callee, line, _, _
            in run_order.entries(module.run_calls) if callee in (run_order.LOAD, ".cuda"))))
        return tuple(facts)


def build(paths: list[str], read=None) -> ProjectIndex:
    """The index of ``paths`` and of the rest of each one's package (pre-commit passes a
    few files; their imports reach the files beside them). ``read`` maps a list of files to
    their ``read_facts`` (the CLI's reads them from its cache, in parallel)."""
    wanted = wanted_files(paths)
    index = ProjectIndex()
    for path, facts in zip(wanted, read(wanted) if read else map(read_facts, wanted)):
        index.add_facts(path, facts)
    return index


def wanted_files(paths: list[str]) -> list[str]:
    """The files ``build`` reads for ``paths``: them and the rest of each one's package
    (``python_files``), and the folders without ``__init__.py`` beside a script that the
    scripts there import (``import model.model`` of a namespace package ``model/``)."""
    roots = sorted({package_root(path) for path in paths if path.endswith(".py")})
    found = list(dict.fromkeys(
        os.path.abspath(p) for p in [*(f for root in roots for f in python_files(root)), *paths]
        if p.endswith(".py")))
    known = set(found)
    for root in roots:
        if not os.path.isfile(os.path.join(root, "__init__.py")):
            found += [f for f in _imported_folders(root, known) if f not in known]
            known.update(found)
    return found


def _imported_folders(root: str, known: set[str]) -> list[str]:
    """The files of the folders in a script's directory that have no ``__init__.py``
    (namespace packages) and that a script beside them imports; only folders with a file
    not already read are looked at, so a run over the whole tree reads nothing more."""
    try:
        folders = sorted(e.path for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")
                         and not os.path.isfile(os.path.join(e.path, "__init__.py")))
    except OSError:
        return []
    candidates = {os.path.basename(folder): files for folder in folders
                  if (files := [os.path.abspath(f) for f in python_files(folder)])
                  and not known.issuperset(files)}
    if not candidates:
        return []
    imported: set[str] = set()
    for script in python_files(root):
        if os.path.dirname(script) != root:
            continue
        try:
            with open(script, encoding="utf-8", errors="replace") as handle:
                text = handle.read(_IMPORT_SCAN_BYTES)
        except OSError:
            continue
        imported.update(name for name in _IMPORTED.findall(text) if name in candidates)
    return [f for name in sorted(imported) for f in candidates[name]]


_IMPORTED = re.compile(r"^[ \t]*(?:from|import)[ \t]+(\w+)", re.MULTILINE)
_IMPORT_SCAN_BYTES = 1 << 20
