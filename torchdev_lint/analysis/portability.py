"""Is this code meant to run without CUDA? The evidence a hardcoded device needs.

A hardcoded ``.cuda()``, ``"cuda"`` or a ``torch.load`` without ``map_location`` is a bug
only where the code would otherwise run on a machine without CUDA. Guards and
``requirements.py`` say where it cannot; on code they say nothing about, a finding is
*certain* only when the code shows it is meant to run without CUDA, nearest scope first:

- the function is device-generic: it takes a device (``device``, ``*_device``; not a GPU
  number it hands to ``.cuda(device)``) or reads the ``.device`` of an input (``x.device``,
  ``args.device``; not ``self.device``, which the class may have set from a literal);
- its class is, through a method that takes the device, as a parameter or as the parsed
  options' ``args.device`` (an object that follows its caller's choice);
- the file chooses a device with a CPU branch (``"cuda" if ... else "cpu"``, an ``if``
  that sets ``"cpu"``), or offers a command-line option that turns CUDA off (``--cpu``,
  ``--no-cuda``, ``--device``).

For a load (TDL004, ``library=True``), library code (a module of a package with no
``__main__`` block and no top-level loop or ``with``: a module that does its work when
imported is a script) counts when its package shows a CPU path (a ``"cpu"`` literal or a
function taking a device or ``map_location``, in any of its modules: the project index's
``package_cpu_path``; the file alone where there is no index). ``needs_cuda_around`` says
when the code around a load needs CUDA anyway: the blocks that run whenever it runs, up to
its function, import a CUDA-only library (torch2trt, TensorRT, apex...), call ``.cuda()``
or use a ``torch.cuda.*Tensor`` type.

Code kept in a folder of code the project no longer runs (``legacy/``), or in a copy of
another project (a folder below the root with a license of its own), is not shown to run
without CUDA, whatever it chooses.

A file that needs CUDA anyway says the opposite, and wins: it asserts or exits on
``torch.cuda.is_available()``, imports a library that only drives NVIDIA GPUs (apex,
bitsandbytes, triton, TensorRT, PyCUDA, CuPy) at its top level, or loads a model quantised
to 8 or 4 bits or placed by ``device_map=0``. (Process groups are ``requirements.py``'s:
an NCCL group under ``if args.local_rank != -1`` leaves a CPU path.) Test code is run where its
author's CI decides, so its findings are never certain either.

The answers are the evidence a finding shows (``--show-evidence``): the node and what it
says. Each file's answers are computed once, on the first question.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import libcst as cst

from torchdev_lint.analysis import classes, conditions, flags, guards, kinds, project_index, provenance, reach, \
    requirements
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.reach import Step
from torchdev_lint.analysis.tree import children, collect, walk


_CPU_OPTIONS = frozenset({"--cpu", "--no-cuda", "--no_cuda", "--device", "--use-cpu", "--use_cpu"})
_OPT_IN_GPU_OPTIONS = frozenset({"--cuda", "--gpu", "--use_cuda", "--use-cuda", "--use_gpu", "--use-gpu"})
_AVAILABILITY = frozenset({"is_available", "device_count"})
# `target-devices` entries that have CUDA (ROCm builds answer to "cuda" too).
_CUDA_TARGETS = frozenset({"cuda", "rocm"})


@dataclass
class _FileFacts:
    cpu_choice: Step | None = None  # the first; ``reach`` finds every one and what it reaches
    unread: set[int] = field(default_factory=set)  # device choices bound to a name nothing reads
    cuda_only: Step | None = None
    device_generic: dict[cst.CSTNode, Step] = field(default_factory=dict)  # function/class -> why
    cuda_scopes: dict[cst.CSTNode, Step] = field(default_factory=dict)  # function/class -> why it needs CUDA
    cpu_placements: dict[int, str] = field(default_factory=dict)  # top-level `device = "cpu"` -> what it says


def _is_cpu_literal(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value in ("cpu", "cpu:0")
    if isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device"):
        return bool(node.args) and _is_cpu_literal(node.args[0].value)
    return False


def _mentions_cpu(node: cst.CSTNode) -> bool:
    """``node`` names the CPU as a device; not as what a ``.cuda(...)`` call is given
    (``torch.cuda("cpu")`` calls a module, ``x.cuda("cpu")`` asks for a CUDA device: both
    raise, and choose nothing)."""
    found = False

    def enter(child: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute) and child.func.attr.value == "cuda":
            return False
        found = found or _is_cpu_literal(child)
        return not found

    walk(node, enter)
    return found


def _devices_assigned(block: cst.BaseSuite) -> dict[str, conditions.Machine]:
    """What a branch binds names or attributes to, by target (``device = torch.device("cpu")``,
    ``self.device = "cuda"``), for the device values among them. A dict entry
    (``state["storage_device"] = "cpu"``) is where something is kept, not where code runs."""
    found = {}
    for statement in getattr(block, "body", ()):
        for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                    and isinstance(small.targets[0].target, (cst.Name, cst.Attribute)):
                machine = conditions.device_named(small.value)
                if machine is not conditions.UNKNOWN:
                    found[code_of(small.targets[0].target)] = machine
    return found


def if_chooses_cpu(node: cst.If) -> bool:
    """``if cfg["gpu"]: device = "cuda"`` / ``else: device = "cpu"``: an ``if``/``else`` that
    binds the same name or attribute to CUDA in one branch and to the CPU in the other."""
    if not isinstance(node.orelse, cst.Else):
        return False
    chosen, otherwise = _devices_assigned(node.body), _devices_assigned(node.orelse.body)
    return any({machine, otherwise.get(target)} == {conditions.CPU, conditions.ACCELERATOR}
               for target, machine in chosen.items())


def _follows_a_tensor(test: cst.BaseExpression) -> bool:
    """``z.get_device() != -1``, ``x.is_cuda``, ``x.device.type == "cuda"``: the test reads
    where a tensor already is. A device chosen so follows the data; it chooses no machine."""
    return bool(project_index.FOLLOWS_A_TENSOR.search(code_of(test)))


def _fixed_flag(test: cst.BaseExpression, source: str) -> bool:
    """A condition no run can change chooses nothing: ``self.no_cuda``, or a name a function
    binds (``cuda = True`` then ``'cuda:0' if cuda else 'cpu'``), that the file binds once, to
    ``True`` or ``False`` (or its ``not``); or ``torch.cuda.is_available`` left uncalled (a
    function, always true). A module-level ``USE_CPU = False`` is a setting: it chooses."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if (dotted_name(test) or "").endswith(("cuda.is_available", "cuda.device_count")):
        return True
    if isinstance(test, cst.Attribute) and isinstance(test.value, cst.Name) and test.value.value == "self":
        assigned = re.findall(rf"\bself\.{test.attr.value}\s*=(?!=)\s*([^\n#]*)", source)
    elif isinstance(test, cst.Name):
        name = re.escape(test.value)
        if re.search(rf"\b(?:def\s+\w+\s*\([^)]*|for\s+|as\s+|global\s+)\b{name}\b", source):
            return False  # a parameter, a loop variable, a name bound elsewhere
        assigned = re.findall(rf"(?<![\w.]){name}\s*(?::[^=\n]*)?=(?!=)\s*([^\n#]*)", source)
        # in a function's code; a module's `USE_CPU = False` is a setting its user edits
        if not re.search(rf"^[ \t]+{name}\s*=", source, re.MULTILINE):
            return False
    else:
        return False
    return len(assigned) == 1 and assigned[0].strip() in ("True", "False")


def _tests_availability(test: cst.BaseExpression) -> bool:
    found = False

    def enter(child: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute):
            found = found or child.func.attr.value in _AVAILABILITY
        return not found

    walk(test, enter)
    return found


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _ends_without_cuda(statement: cst.CSTNode, qualify) -> bool:
    """guards' early exit that ends the program, not one function: ``if not
    torch.cuda.is_available(): sys.exit(...)`` (or ``raise``), ``assert torch.cuda.is_available()``.
    A test of the user's choice too (``args.cuda and not ...``) is no such exit."""
    if not guards.exits_early(statement, qualify):
        return False
    if isinstance(statement, cst.If):
        last = statement.body.body[-1]
        return not isinstance(last.body[-1], (cst.Return, cst.Continue, cst.Break))
    return True


# The node types ``_needs_cuda`` and ``_cpu_choice`` can say something of, by class name:
# LibCST runs only once a file is parsed (``lazy.py``).
_SAY_NEEDS_CUDA = frozenset({"If", "SimpleStatementLine", "Import", "ImportFrom", "Call"})
_SAY_CPU_CHOICE = frozenset({"IfExp", "If", "Call"})


def _needs_cuda(node: cst.CSTNode, top_level: bool, qualify, unconditional: bool = True) -> str | None:
    """What a single node says about the file needing CUDA anyway, or None. Imports count
    at the top level only (or in a ``try`` that raises when they fail): one inside ``try``,
    ``if`` or a function is optional; an exit
    without CUDA only where it always runs (``unconditional``)."""
    if unconditional and isinstance(node, (cst.If, cst.SimpleStatementLine)) and _ends_without_cuda(node, qualify):
        return "asserts or exits when CUDA is missing"
    if isinstance(node, (cst.Import, cst.ImportFrom)) and top_level:
        library = requirements.imported_library(node, requirements.GPU_LIBRARIES)
        if library is not None:
            return f"imports {library}, which drives NVIDIA GPUs only"
    if isinstance(node, cst.Call):
        for flag in ("load_in_8bit", "load_in_4bit"):
            value = _keyword(node, flag)
            if isinstance(value, cst.Name) and value.value == "True":
                return f"loads a model with {flag}=True (bitsandbytes: CUDA only)"
        device_map = _keyword(node, "device_map")
        if isinstance(device_map, cst.Integer) or (
            isinstance(device_map, cst.Dict) and any(isinstance(e.value, cst.Integer)
                                                     for e in device_map.elements if isinstance(e, cst.DictElement))
        ):
            return "places the model on GPU 0 with device_map"
    return None


def _reraises(statement: cst.CSTNode) -> bool:
    """A ``try`` whose every handler raises (``except ImportError: raise ImportError("install
    apex")``): what its body imports is required, not optional."""
    return isinstance(statement, cst.Try) and bool(statement.handlers) and all(
        isinstance(handler.body, cst.IndentedBlock) and isinstance(handler.body.body[-1], cst.SimpleStatementLine)
        and isinstance(handler.body.body[-1].body[-1], cst.Raise) for handler in statement.handlers)


def _opens_nccl_group(statement: cst.CSTNode) -> bool:
    """A statement line that opens an NCCL process group (``backend="nccl"``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("init_process_group"):
            backend = _keyword(value, "backend") or (value.args[0].value if value.args else None)
            if isinstance(backend, cst.SimpleString) and backend.evaluated_value == "nccl":
                return True
    return False


def _cpu_choice(node: cst.CSTNode, source: str) -> str | None:
    """What a single node says about the file offering a CPU path, or None. An option
    nothing reads (``--cuda`` parsed, ``args.cuda`` never used) offers nothing."""
    if isinstance(node, cst.IfExp) and (_is_cpu_literal(node.body) or _is_cpu_literal(node.orelse)) \
            and not _follows_a_tensor(node.test) and not _fixed_flag(node.test, source):
        return "chooses the CPU when the condition says so"
    if isinstance(node, cst.If) and _tests_availability(node.test):
        branches = [node.body, node.orelse] if node.orelse is not None else [node.body]
        if any(_mentions_cpu(branch) for branch in branches):
            return "falls back to the CPU"
    if isinstance(node, cst.If) and if_chooses_cpu(node):
        return "chooses the CPU when the condition says so"  # `if cfg["gpu"]: device = "cuda"` / `else: ... "cpu"`
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
        action = _keyword(node, "action")
        action = action.evaluated_value if isinstance(action, cst.SimpleString) else None
        dest = _keyword(node, "dest")
        for arg in node.args:
            if not isinstance(arg.value, cst.SimpleString):
                continue
            option = arg.value.evaluated_value
            if option in _CPU_OPTIONS | _OPT_IN_GPU_OPTIONS and not project_index.reads_option(
                    source, option, dest.evaluated_value if isinstance(dest, cst.SimpleString) else None):
                continue
            if option in _CPU_OPTIONS and not _gpu_indices(node):
                return f"offers {option} on the command line"
            if action == "store_true" and option in _OPT_IN_GPU_OPTIONS:
                return f"runs on the CPU unless {option} is given"
            if action == "store_false" and option in _OPT_IN_GPU_OPTIONS:
                return f"runs on the CPU when {option} is given (it turns the flag off)"
    return None


def _choice_of(ctx, node: cst.CSTNode) -> str | None:
    """What ``node`` says about the file offering a CPU path (``_cpu_choice``), or, for a
    call of a project function imported from another module that chooses the CPU itself
    (``run(net, loader)`` of a ``run`` that moves batches to ``"cuda:0" if ... else "cpu"``):
    the run that makes the call runs where that function chooses."""
    why = _cpu_choice(node, ctx.source)
    if why is not None or type(node) is not cst.Call or ctx.index is None or ctx.path == "-":
        return why
    qualified = ctx.qualified_name(node.func)
    where = ctx.index.chooses_cpu(qualified, ctx.path) if qualified and "." in qualified else None
    return f"calls `{code_of(node.func)}`, which chooses the CPU when the condition says so ({where})" \
        if where is not None else None


def _places_on_cpu(ctx, module: cst.Module, assignment: cst.Assign) -> bool:
    """``device = torch.device("cpu")`` at the top of a script, the name's only binding there,
    and something moved to it (``classifier.to(device)``): the run is placed on the CPU. Not a
    name that says CPU itself (``cpu = torch.device("cpu")``): that is where results come back."""
    if len(assignment.targets) != 1 or not isinstance(assignment.targets[0].target, cst.Name) \
            or not _is_cpu_literal(assignment.value):
        return False
    name = assignment.targets[0].target.value
    # `cpu = torch.device("cpu")` names where results come back to (`.to(cpu).numpy()`), not the work's device
    return "cpu" not in name.lower() and len(ctx.bindings(module).get(name, ())) == 1 and ctx.mentions(f".to({name})")


def _gpu_indices(add_argument: cst.Call) -> bool:
    """``add_argument("--device", type=int, ...)``: the option takes GPU indices (2s-AGCN's
    "the indexes of GPUs"), not a device name; a CPU choice it feeds shows as one itself."""
    kind = _keyword(add_argument, "type")
    return isinstance(kind, cst.Name) and kind.value == "int"


def _note_unread_choice(ctx, module: cst.Module, assignment: cst.Assign | cst.AnnAssign | cst.If,
                        unread: set[int]) -> None:
    """``device = torch.device("cuda" if cuda else "cpu")`` where nothing reads ``device``, or
    only ``map_location=device`` does: a choice nothing is placed by (boilerplate of a script
    that moves everything with ``.cuda()``) says nothing about where the script runs; nor does
    one named for where data is kept (``gather_device``: ``project_index.places_data``), nor one
    whose test reads only names the file binds once to a string (nanoGPT's ``device_type =
    "cuda" if "cuda" in device else "cpu"`` under ``device = "cuda"``: always the same branch). Adds
    the choice's node to ``unread``; the same for ``if ...: device = "cuda"`` / ``else: device =
    "cpu"``."""
    if isinstance(assignment, cst.If):
        branches = [assignment.body] + ([assignment.orelse.body] if isinstance(assignment.orelse, cst.Else) else [])
        names = {target for branch in branches for target in _devices_assigned(branch) if "." not in target}
        if names and all(n not in names_read(ctx) or project_index.only_maps_loads(ctx.source, n)
                         or project_index.places_data(n) for n in names):
            unread.add(id(assignment))
        return
    targets = ([t.target for t in assignment.targets] if isinstance(assignment, cst.Assign)
               else [assignment.target])
    if len(targets) != 1 or not isinstance(targets[0], cst.Name) or assignment.value is None:
        return
    value = _choice_value(assignment.value)
    name = targets[0].value
    if isinstance(value, cst.IfExp) and (name not in names_read(ctx) or project_index.only_maps_loads(ctx.source, name)
                                         or project_index.places_data(name)
                                         or _constant_test(ctx, module, assignment, value.test)):
        unread.add(id(value))


def _only_reports(call: cst.Call) -> bool:
    """``print(...)``, ``logging.info(...)``, ``logger.warning(...)``, ``sys.stdout.write(...)``:
    a call that only shows its arguments, so a device expression handed to one decides nothing."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "print"
    return isinstance(func, cst.Attribute) and func.attr.value in kinds.LOG_METHODS


def _note_rebound_choices(body: Sequence[cst.CSTNode], unread: set[int]) -> None:
    """``device = "cuda:0" if torch.cuda.is_available() else "cpu"`` followed at once by
    ``device = "mps"``: the choice is bound again before anything reads it, so it says
    nothing about where the code runs. Adds the choice's node to ``unread``."""
    for first, second in zip(body, body[1:]):
        bound = [_single_name_assignment(statement) for statement in (first, second)]
        if bound[0] is None or bound[1] is None or bound[0][0] != bound[1][0] \
                or any(n.value == bound[0][0] for n in collect(bound[1][1].value, cst.Name)):
            continue
        unread.add(id(_choice_value(bound[0][1].value)))


def _choice_value(value: cst.BaseExpression) -> cst.BaseExpression:
    """The choice itself: ``"cuda" if ... else "cpu"`` of ``torch.device("cuda" if ... else "cpu")``."""
    return value.args[0].value if isinstance(value, cst.Call) and value.args else value


def _single_name_assignment(statement: cst.CSTNode) -> tuple[str, cst.Assign] | None:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    return assign.targets[0].target.value, assign


def _constant_test(ctx, module: cst.Module, assignment: cst.CSTNode, test: cst.BaseExpression) -> bool:
    """The choice is made by the module's own code, and its test reads only names bound once
    in the file, at its top level, to a string, and nothing rewrites the module's names (an
    ``exec`` of a configurator): it always holds, or never."""
    names = {n.value for n in collect(test, cst.Name)}
    if not names or "exec(" in ctx.source:
        return False
    top = ctx.once(("portability: top-level assignments",), lambda: {
        id(a) for a in collect(module, (cst.Assign, cst.AnnAssign), skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda))})
    if id(assignment) not in top:
        return False
    bound = ctx.bindings(module)
    return all(len(bound.get(name, ())) == 1 and isinstance(bound[name][0], cst.Assign)
               and isinstance(bound[name][0].value, cst.SimpleString) for name in names)


def names_read(ctx) -> frozenset[str]:
    """The names the file reads somewhere (``project_index.read_names``), once per file."""
    return ctx.once(("portability: read names",), lambda: project_index.read_names(ctx.source))


def reads_module_name(ctx, module: cst.Module, name: str) -> bool:
    """Does code of ``module`` read its top-level ``name``? Not a function that binds the
    name itself (a parameter ``device`` of each function shadows a script's
    ``device = "cuda"``) unless it declares it ``global``, nor an attribute, a keyword or a
    plain assignment of that name."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if found:
            return False
        if isinstance(node, (cst.FunctionDef, cst.Lambda)) and name in ctx.bindings(node) and not any(
                any(n.name.value == name for n in g.names) for g in collect(node, cst.Global)):
            return False
        if isinstance(node, (cst.Attribute, cst.Arg)):  # not `x.device` nor `f(device=...)`
            walk(node.value, enter)
            return False
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
            return False
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            for part in (*node.decorators, *((node.params,) if isinstance(node, cst.FunctionDef) else node.bases),
                         node.body):
                walk(part, enter)
            return False
        if isinstance(node, cst.Param):
            if node.default is not None:
                walk(node.default, enter)
            return False
        found = isinstance(node, cst.Name) and node.value == name
        return True

    walk(module, enter)
    return found


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _built_on_cuda_only(ctx, module: cst.Module, definition: cst.ClassDef | cst.FunctionDef,
                        param: cst.Param) -> bool:
    """Every call of ``definition`` in its file (a construction, for a class) passes a CUDA
    device for ``param`` (``liGRU_layer(..., device="cuda")``; an omitted one its CUDA
    default), and no other module of the project imports it (by name, or the whole file): the
    device parameter offers a CPU path that nothing takes. The calls carry the hardcoded
    device, and their findings."""
    imported = ctx.index.imported_from(ctx.path) if ctx.index is not None and ctx.path != "-" else None
    if imported is None or {"*", "import *", definition.name.value} & imported:
        return False
    if isinstance(definition, cst.ClassDef):
        init = next((m for m in definition.body.body
                     if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"), None)
        if init is None:
            return False
        positional = [p.name.value for p in init.params.params][1:]  # after `self`
    else:
        positional = [p.name.value for p in definition.params.params]
    name = definition.name.value
    passed: list[tuple[cst.BaseExpression | None, bool]] = []
    top = {id(call) for call in collect(module, cst.Call, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda))}
    # in a package, only calls from the module's own definitions: one its `__main__` block or
    # top level makes is a demo of an API its users call with their device
    package = ctx.path.endswith(".py") and (Path(ctx.path).parent / "__init__.py").is_file()
    if package and any(isinstance(c.func, cst.Name) and c.func.value == name
                       for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                       for c in collect(s, cst.Call)):
        return False

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
            keyword = next((a.value for a in node.args if a.keyword is not None
                            and a.keyword.value == param.name.value), None)
            index = positional.index(param.name.value) if param.name.value in positional else None
            plain = [a.value for a in node.args if a.keyword is None and not a.star]
            passed.append((keyword if keyword is not None else
                           plain[index] if index is not None and index < len(plain) else param.default,
                           id(node) in top))
        return True

    walk(module, enter)
    # a call the script's own code makes hands what the script binds to the name, whatever a
    # function's parameter of that name holds: every binding must assign a CUDA device
    bound = ctx.bindings(module)
    return bool(passed) and all(
        value is not None and (conditions.device_named(value) is conditions.ACCELERATOR or (
            at_top and isinstance(value, cst.Name) and bool(bound.get(value.value))
            and all(isinstance(site, (cst.Assign, cst.AnnAssign)) and site.value is not None
                    and conditions.device_named(site.value) is conditions.ACCELERATOR
                    for site in bound[value.value])))
        for value, at_top in passed)


def _gpu_index(function: cst.FunctionDef | cst.ClassDef, name: str) -> bool:
    """The "device" is a GPU number: ``x.cuda(device)``, ``torch.cuda.set_device(device)``."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (
            "cuda", "set_device"
        ):
            found = found or any(_root(arg.value) == name or code_of(arg.value) == f"self.{name}" for arg in node.args)
        return not found

    walk(function.body, enter)
    return found


_GPU_WORDS = frozenset({"cuda", "gpu"})


def _reads_device(function: cst.FunctionDef) -> Step | None:
    """A device the caller chooses: a device parameter (not one named for where data is kept,
    ``data_device``, nor for a GPU, ``cuda_device``: the caller picks which GPU), or the
    ``.device`` of an input (``x.device``, ``args.device``; not of a local the function moved
    itself, nor ``self.device``)."""
    params = [*function.params.params, *function.params.kwonly_params, *function.params.posonly_params]
    for param in params:
        name = param.name.value
        if (name == "device" or name.endswith("_device") or name == "map_location") and not _gpu_index(function, name) \
                and not project_index.places_data(name) and not _GPU_WORDS & conditions.words(name):
            return param, f"`{function.name.value}` takes the device as `{name}`"
    # `self.device` may be what the class set from a hardcoded string: an input's device is not
    inputs = {param.name.value for param in params} - {"self", "cls"}
    found: list[Step] = []

    def enter(node: cst.CSTNode) -> bool:
        if found:
            return False
        if isinstance(node, cst.Attribute) and node.attr.value == "device" and _root(node.value) in inputs:
            how = "takes the device chosen in its options," if _options_device(node) else "follows the device of"
            found.append((node, f"`{function.name.value}` {how} `{code_of(node)}`"))
            return False
        return True

    walk(function.body, enter)
    return found[0] if found else None


def _options_device(node: cst.CSTNode) -> bool:
    """``args.device``, ``opt.device``: the device the user chose, read off the parsed options
    a caller handed in (not a tensor's device)."""
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) \
        and node.value.value in reach.OPTION_HOLDERS


def _calls_cuda_only(ctx, function: cst.FunctionDef) -> Step | None:
    """A call anywhere in the function (a loop, a branch) of a ``torch.cuda`` function
    that raises without CUDA: the function is for GPUs. Not one in a branch that only runs
    where CUDA is wanted (``if s.use_cuda: ... torch.cuda.current_device()``): the other
    branch is the function's CPU path."""
    found: list[Step] = []

    def enter(node: cst.CSTNode) -> bool:
        if found:
            return False
        if isinstance(node, (cst.If, cst.IfExp)):
            for branch in (node.test, node.body, node.orelse):
                if branch is not None and not guards.runs_only_on_accelerator(node, branch, ctx.qualified_name):
                    walk(branch, enter)
            return False
        if isinstance(node, cst.Call) and ctx.qualified_name(node.func) in requirements.NEEDS_CUDA:
            found.append((node, f"`{function.name.value}` needs CUDA anyway: it calls `{code_of(node.func)}`"))
        return not isinstance(node, (cst.FunctionDef, cst.Lambda)) or node is function

    walk(function, enter)
    return found[0] if found else None


def _facts(ctx, module: cst.Module) -> _FileFacts:
    facts = getattr(ctx, "_portability", None)
    if facts is not None:
        return facts
    facts = ctx._portability = _FileFacts()
    required = [*module.body, *(inner for statement in module.body if _reraises(statement)
                                for inner in statement.body.body)]
    top_level = {id(statement) for statement in required}
    top_level |= {id(small) for statement in required if isinstance(statement, cst.SimpleStatementLine)
                  for small in statement.body}
    # An exit without CUDA says the file needs it only where it always runs: a statement of
    # the module's or a function's own body, not one under `if self._use_amp:` (a function's
    # body is added as the walk enters the function, before it reaches the body).
    unconditional = {id(s) for s in module.body}
    functions: list[cst.FunctionDef] = []
    classes: list[cst.ClassDef] = []

    unread = facts.unread

    def enter(node: cst.CSTNode) -> bool:
        kind = type(node)  # a dict lookup per node, not an isinstance on LibCST's ABCs
        if kind is cst.FunctionDef:
            functions.append(node)
            if isinstance(node.body, cst.IndentedBlock):
                unconditional.update(id(s) for s in node.body.body)
        elif kind is cst.ClassDef:
            classes.append(node)
        if facts.cuda_only is None and kind.__name__ in _SAY_NEEDS_CUDA:
            why = _needs_cuda(node, id(node) in top_level, ctx.qualified_name, id(node) in unconditional)
            if why is not None:
                facts.cuda_only = (node, f"the file needs CUDA anyway: it {why}")
        if kind is cst.IndentedBlock or kind is cst.Module:
            _note_rebound_choices(node.body, unread)
        if kind is cst.Assign or kind is cst.AnnAssign or kind is cst.If:
            _note_unread_choice(ctx, module, node, unread)
        elif kind is cst.Call and _only_reports(node):
            # `print("running on", "cuda:0" if torch.cuda.is_available() else "cpu")` places nothing
            unread.update(id(arg.value) for arg in node.args if type(arg.value) is cst.IfExp)
        if facts.cpu_choice is None and kind.__name__ in _SAY_CPU_CHOICE and id(node) not in unread:
            why = _choice_of(ctx, node)
            if why is not None:
                facts.cpu_choice = (node, f"the file runs without CUDA: it {why}")
        if kind is cst.Assign and id(node) in top_level and _places_on_cpu(ctx, module, node):
            facts.cpu_placements[id(node)] = f"places its work on `{code_of(node.value)}`"
            if facts.cpu_choice is None:
                facts.cpu_choice = (node, f"the file runs without CUDA: it {facts.cpu_placements[id(node)]}")
        if kind is cst.FunctionDef:
            step = _reads_device(node)
            if step is not None:
                facts.device_generic[node] = step
            step = _calls_cuda_only(ctx, node)
            if step is not None:
                facts.cuda_scopes[node] = step
        elif kind is cst.ClassDef:
            for base in node.bases:
                if ctx.qualified_name(base.value) in kinds.GPU_WRAPPERS:
                    facts.cuda_scopes[node] = (base, f"class `{node.name.value}` is a {code_of(base.value)}: "
                                               "it runs where GPUs are")
        return True

    walk(module, enter)
    if facts.cpu_choice is not None:
        _choose_where_cuda_is_not_needed(ctx, module, facts)
    unconditional = [*module.body, *(s for f in functions for s in f.body.body
                                      if isinstance(f.body, cst.IndentedBlock))]
    nccl = next((s for s in unconditional if _opens_nccl_group(s)), None)
    if nccl is not None and facts.cuda_only is None:
        facts.cuda_only = (nccl, "the file needs CUDA anyway: it always opens an NCCL process group")
    if facts.cuda_only is None and ctx.index is not None and ctx.path != "-":
        builder = ctx.index.cuda_extension_imported(ctx.path)
        if builder is not None:
            facts.cuda_only = (module, f"the file needs CUDA anyway: it calls the kernels of a CUDA extension "
                                       f"({builder} builds it)")
        library = ctx.index.gpu_library_imported(ctx.path) if builder is None else None
        if library is not None:
            facts.cuda_only = (module, f"the file needs CUDA anyway: it imports {library}, which drives "
                                       "NVIDIA GPUs only")
    if facts.device_generic and facts.cpu_choice is None and ctx.index is not None and ctx.path != "-":
        # code other files use follows their device: where every one of them that places
        # tensors is written for CUDA only, what it follows is a CUDA device
        users = ctx.index.users_on_cuda(ctx.path)
        if users is not None:
            for node, (at, _) in facts.device_generic.items():
                facts.cuda_scopes.setdefault(node, (at, f"every project module that uses this file ({users}) is "
                                                        "written for CUDA, or used only by modules that are: "
                                                        "the device this follows is a CUDA one"))
            facts.device_generic.clear()
    # a function no other module imports (one they import is their API: `predict(..., device=...)`)
    for function in module.body:
        step = facts.device_generic.get(function) if isinstance(function, cst.FunctionDef) else None
        if isinstance(step and step[0], cst.Param) and _built_on_cuda_only(ctx, module, function, step[0]):
            del facts.device_generic[function]  # every call passes CUDA: a CPU path no caller takes
    needs = requirements.of_file(ctx, module)
    on_cuda = _classes_built_on_cuda(classes)
    for node in classes:
        methods = [m for m in node.body.body if isinstance(m, cst.FunctionDef)]
        for method in methods:
            statement = needs.needing_statement(method, node)
            if statement is not None:
                facts.cuda_scopes.setdefault(node, (statement, f"class `{node.name.value}` needs CUDA anyway: "
                                                    f"`{method.name.value}` always runs code that needs it"))
        if node.name.value in on_cuda:
            # its object only exists where CUDA is: a method that follows an input's `.device`
            # follows what the class itself put on CUDA, and shows no CPU path
            for method in methods:
                step = facts.device_generic.get(method)
                if step is not None and not isinstance(step[0], cst.Param):
                    del facts.device_generic[method]
        for method in methods:
            step = facts.device_generic.get(method)
            if isinstance(step and step[0], cst.Param) and _gpu_index(node, step[0].name.value):
                continue  # `self.device` handed to `.cuda(self.device)`: a GPU number
            if method.name.value == "__init__" and isinstance(step and step[0], cst.Param) \
                    and _built_on_cuda_only(ctx, module, node, step[0]):
                del facts.device_generic[method]  # its CPU path is one no caller takes
                continue
            # a method that takes the device (as a parameter, or as the parsed options' `.device`:
            # `self.device = torch.device(args.device)`) makes the class's object follow its
            # caller's choice; one that follows an input's `.device` is portable itself, and says
            # nothing of the other methods (that input may be what the class moved with `.cuda()`)
            if step is not None and (isinstance(step[0], cst.Param) or _options_device(step[0])):
                facts.device_generic[node] = (step[0], f"class `{node.name.value}` is device-generic: " + step[1])
                break
    return facts


def _choose_where_cuda_is_not_needed(ctx, module: cst.Module, facts: _FileFacts) -> None:
    """A CPU choice made in a function that always runs code needing CUDA (``device = "cuda" if
    ... else "cpu"``, then ``torch.cuda.synchronize(device)``) is no CPU path: that function fails
    without CUDA whatever it chose. The file's CPU path is then another choice, or none."""
    dies = _dies_without_cuda(ctx, module)
    skipped: set[int] = set()
    choice = facts.cpu_choice
    while choice is not None:
        function, klass = _enclosing_function(module, choice[0])
        if function is None or not dies(function, klass):
            break
        skipped.add(id(function))
        choice = _first_cpu_choice(ctx, module, facts, skipped)
    facts.cpu_choice = choice


def _dies_without_cuda(ctx, module: cst.Module):
    """Whether a function (a method: with its class) always runs code that needs CUDA."""
    needs = requirements.of_file(ctx, module)
    return lambda function, klass: needs.needing_statement(function, klass) is not None


def _enclosing_function(module: cst.Module, target: cst.CSTNode) -> tuple[cst.FunctionDef | None,
                                                                            cst.ClassDef | None]:
    """The innermost function ``target`` is in (None at the module's level), and its class
    where it is a method."""
    # (node, the function it is in, that function's class, the class whose body holds the node)
    todo: list[tuple[cst.CSTNode, cst.FunctionDef | None, cst.ClassDef | None, cst.ClassDef | None]] = [
        (module, None, None, None)]
    while todo:
        node, function, method_of, body_of = todo.pop()
        if node is target:
            return function, method_of
        kind = type(node)
        if kind is cst.FunctionDef:
            function, method_of, body_of = node, body_of, None
        elif kind is cst.ClassDef:
            body_of = node
        todo.extend((child, function, method_of, body_of) for child in children(node))
    return None, None


def _first_cpu_choice(ctx, module: cst.Module, facts: _FileFacts, skipped: set[int]) -> Step | None:
    """The first CPU choice (or CPU placement) of the file outside the functions ``skipped``."""
    found: list[Step] = []

    def enter(node: cst.CSTNode) -> bool:
        if found or id(node) in skipped:
            return False
        if id(node) in facts.cpu_placements:
            found.append((node, f"the file runs without CUDA: it {facts.cpu_placements[id(node)]}"))
        elif type(node).__name__ in _SAY_CPU_CHOICE and id(node) not in facts.unread:
            why = _choice_of(ctx, node)
            if why is not None:
                found.append((node, f"the file runs without CUDA: it {why}"))
        return not found

    walk(module, enter)
    return found[0] if found else None


def _classes_built_on_cuda(classes: list[cst.ClassDef]) -> set[str]:
    """The names of the file's classes whose ``__init__`` hardcodes CUDA in a statement of its
    own body, which runs whenever an object is built (``model.cuda()``, ``self.mean =
    m.to("cuda")``, ``.type(torch.cuda.FloatTensor)``), or builds an object of such a class
    there (``self.Z = Latent(shape)``)."""
    inits = {}
    for klass in classes:
        init = next((m for m in klass.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"),
                    None)
        if init is not None and isinstance(init.body, cst.IndentedBlock):
            inits[klass.name.value] = [c for s in init.body.body if isinstance(s, cst.SimpleStatementLine)
                                       for c in collect(s, cst.Call, skip=(cst.Lambda,))]
    found = {name for name, calls in inits.items() if any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value in ("cuda", "to", "type") and _to_cuda(c)
        for c in calls)}
    grown = True
    while grown:  # a class that builds one of those, and so on
        grown = False
        for name, calls in inits.items():
            if name not in found and any(isinstance(c.func, cst.Name) and c.func.value in found for c in calls):
                found.add(name)
                grown = True
    return found


@dataclass(frozen=True)
class Verdict:
    """``certain`` when the code is meant to run without CUDA and nothing says otherwise;
    ``steps``: the evidence either way."""

    certain: bool
    steps: tuple[Step, ...]
    # No machine without CUDA is shown or declared: a finding set aside by `auto`.
    unknown_intent: bool = False
    # `target-devices` names CUDA machines only: portability findings are off.
    off: bool = False


def is_library_module(ctx, module: cst.Module) -> bool:
    """A module of an importable package (an ``__init__.py`` beside it) with no ``__main__``
    block and no top-level loop or ``with``: code its importers call, not a script."""
    path = Path(ctx.path)
    if path.suffix != ".py" or not (path.parent / "__init__.py").is_file():
        return False
    return _imported_code(ctx, module)


def _imported_code(ctx, module: cst.Module) -> bool:
    """No ``__main__`` block and no top-level loop or ``with``: code its importers call."""
    return "__main__" not in ctx.source and not any(
        isinstance(s, (cst.For, cst.While, cst.With)) for s in module.body)


def _importers_run_without_cuda(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """A module of code its importers call (a ``data.py`` beside ``train.py``) runs where they
    do: when a project module that imports it, places tensors and chooses the CPU (a device
    choice with a CPU branch, a CPU option; ``ProjectIndex.users_cpu_path``) names the
    function or class the line is in (a vocoder loader only the GPU demo calls is not run by
    the dataset module that imports the same file for its padding helpers), so does it. A
    module with a ``__main__`` block of its own (a smoke test of its dataset) counts for the
    functions and classes its importers name."""
    module = ancestors[0]
    if ctx.index is None or ctx.path == "-":
        return None
    definition = ancestors[1] if len(ancestors) > 1 else None
    named = definition.name.value if isinstance(definition, (cst.FunctionDef, cst.ClassDef)) else None
    if named is None and not _imported_code(ctx, module):
        return None
    where, _users = ctx.index.users_cpu_path(ctx.path, "cpu_choice", named)
    through = None
    if where is None and isinstance(definition, cst.ClassDef):
        # a class the importers name may build this one (`DiceLoss` runs `BinaryDiceLoss`); not
        # a function, which a class may call with the CUDA device it fills in itself
        for user in _named_by(_names_in(ctx, module), named):
            where, _users = ctx.index.users_cpu_path(ctx.path, "cpu_choice", user)
            if where is not None:
                through = user
                break
    if where is None:
        return None
    how = f", through `{through}`, which uses `{named}`" if through else ""
    return module, f"the file runs without CUDA: code that imports it runs without CUDA ({where}){how}"


def _named_by(names_in: dict[str, set[str]], name: str, depth: int = 3) -> list[str]:
    """The module's top-level functions and classes whose code names ``name``, and those
    that name them, ``depth`` levels up (``names_in``: ``_names_in``): what runs it when an
    importer calls them."""
    found: list[str] = []
    wanted = {name}
    for _ in range(depth):
        users = [own for own, names in names_in.items() if own and own not in wanted and own not in found
                 and names & wanted]
        if not users:
            break
        found += users
        wanted = set(users)
    return found


def _unimportable(ctx, module: cst.Module) -> Step | None:
    """The file imports a project module that is not there or does not parse
    (``ProjectIndex.missing_import``): it fails when imported, on every machine, before this
    line can."""
    if ctx.index is None or ctx.path == "-":
        return None
    missing = ctx.index.missing_import(ctx.path)
    return None if missing is None else (module, f"the file fails when imported, on any machine: it imports {missing}")


# Folders where a project keeps code it no longer runs (`old_code/`, `legacy/`, `models_old/`,
# `(Deprecated)training/`).
_ARCHIVED = re.compile(r"(?i)^[(\[]?(?:old|deprecated|legacy|archived?|unused|obsolete|outdated|backups?|attic|trash)"
                       r"(?:[)\]].*|[_-].*)?$|[_-](?:old|deprecated|legacy|archived?|unused|obsolete|backup)$")


def _folders(ctx) -> tuple[Path, Path]:
    """The file's folder and the folder the project is seen from: the working directory or
    the indexed root, whichever holds it (the file's own folder when neither does)."""
    parent = Path(ctx.path).resolve().parent
    bases = [Path.cwd(), *([Path(ctx.index.indexed_folder()).resolve()] if ctx.index is not None else [])]
    return parent, next((b for b in bases if parent == b or b in parent.parents), parent)


def _archived(ctx, module: cst.Module) -> Step | None:
    """The file sits in a folder where the project keeps code it no longer runs (a folder
    named ``old_code``, ``legacy``, ``deprecated``... below the working directory or the
    indexed root): nothing shows the line still runs anywhere."""
    if ctx.path == "-":
        return None
    parent, base = _folders(ctx)
    folder = next((f for f in parent.relative_to(base).parts if _ARCHIVED.search(f)), None)
    if folder is None:
        return None
    return module, f"the file is kept in `{folder}/`, a folder of code the project no longer runs"


_LICENSE = re.compile(r"(?i)^(?:licen[cs]e|copying)(?:[._-][\w.-]*)?$")


def _vendored(ctx, module: cst.Module) -> Step | None:
    """The file sits in a folder below the project's root that carries a license of its own
    (``third_party/apex/LICENSE``, ``other_frameworks/DeepInversion/LICENSE``), or in one of
    the subfolders of a folder named for other projects (``code/repos/L2T/``): a copy of
    another project kept in this one. Its lines are upstream's choices, and nothing shows
    this project runs them without CUDA."""
    if ctx.path == "-":
        return None
    parent, base = _folders(ctx)
    folder = parent
    while folder != base and base in folder.parents:
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        found = next((n for n in sorted(names) if _LICENSE.match(n) and (folder / n).is_file()), None)
        if found is not None:
            shown = folder.relative_to(base).as_posix()
            return module, (f"the file is in `{shown}/`, which carries a license of its own ({found}): a copy of "
                            "another project, kept here as its authors wrote it")
        if folder.parent != base and _VENDOR_FOLDERS.match(folder.parent.name):
            shown = folder.relative_to(base).as_posix()
            return module, (f"the file is in `{shown}/`, one of the projects kept in `{folder.parent.name}/`: a "
                            "copy of another project, kept here as its authors wrote it")
        folder = folder.parent
    return None


# Folders that hold other projects, one per subfolder (`third_party/apex`, `code/repos/L2T`).
_VENDOR_FOLDERS = re.compile(r"(?i)^(?:third[_-]?party|3rd[_-]?party|vendor(?:ed)?|externals?|repos|submodules)$")


def _never_named(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line is in a top-level function or class of a script that nothing names: the
    file never refers to it (a call left in a comment or a string does not count), no
    module indexed with it imports the file, and nothing looks names up at run time
    (``globals()``, ``eval``, a decorator that registers it). It never runs."""
    if len(ancestors) < 2 or ctx.index is None or ctx.path == "-":
        return None
    module, definition = ancestors[0], ancestors[1]
    if not isinstance(definition, (cst.FunctionDef, cst.ClassDef)) or definition.decorators:
        return None
    named = ctx.once(("portability: named definitions",), lambda: _named_definitions(ctx, module))
    name = definition.name.value
    if named is None or name in named or ctx.index.imported_from(ctx.path) != frozenset():
        return None
    kind = "class" if isinstance(definition, cst.ClassDef) else "function"
    return definition, (f"nothing runs the {kind} `{name}`: the script never names it and no module indexed "
                        "with it imports the script")


def _never_called(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line is in a top-level function or class of a module that other project files
    import (not one of a package, whose users may be elsewhere), and nothing calls or builds
    it: the module's own code names it nowhere but in definitions nothing calls, no file
    imports it by name, and no file's code mentions an attribute of that name (a call left
    in a comment does not count: ``ProjectIndex.mentioned_elsewhere``). It never runs. In a
    class that is built, the line may still be in a method nothing calls."""
    if len(ancestors) < 2 or ctx.index is None or ctx.path == "-" or not ctx.path.endswith(".py"):
        return None
    module, definition = ancestors[0], ancestors[1]
    if not isinstance(definition, (cst.FunctionDef, cst.ClassDef)):
        return None
    imported = ctx.index.imported_from(ctx.path)
    if imported and not definition.decorators and not (Path(ctx.path).parent / "__init__.py").is_file():
        called = ctx.once(("portability: called definitions",), lambda: _called_definitions(ctx, module, imported))
        name = definition.name.value
        if called is not None and name not in called:
            said = "builds" if isinstance(definition, cst.ClassDef) else "calls"
            return definition, (f"nothing in the project {said} `{name}`: the module's own code and the files that "
                                "import it name it only in comments or in definitions nothing calls")
    return _never_called_method(ctx, ancestors) if isinstance(definition, cst.ClassDef) else None


def _never_called_method(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line is in a method that nothing calls (``classes.uncalled_methods``: the project
    mentions it only as ``self.<name>`` in methods that are themselves uncalled), of a class
    of a module whose users are in sight: one other project files import (not a package's,
    whose users may be elsewhere), or a script nothing imports. It never runs."""
    module, klass = ancestors[0], ancestors[1]
    method = ancestors[3] if len(ancestors) > 3 and isinstance(ancestors[3], cst.FunctionDef) else None
    if method is None or is_library_module(ctx, module) or _DYNAMIC_LOOKUPS.search(ctx.source):
        return None
    imported = ctx.index.imported_from(ctx.path)
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    if imported is None or (not imported and not _runs_something(module, defined)):
        return None  # a module nothing in sight uses: its callers are elsewhere
    uncalled = ctx.once(("portability: uncalled methods",), lambda: classes.uncalled_methods(
        module, ctx.source, lambda name: ctx.index.mentioned_elsewhere(name, ctx.path)))
    if (klass.name.value, method.name.value) not in uncalled:
        return None
    return method, (f"nothing in the project calls `{klass.name.value}.{method.name.value}`: no other file "
                    "mentions it, and its own file names it only in methods nothing calls")


def _called_definitions(ctx, module: cst.Module, imported: frozenset[str]) -> frozenset[str] | None:
    """The module's top-level definitions that something may call: named by its other code
    (a string spelling the name counts), imported by name or mentioned as an attribute by
    another project file, or named by a definition so called. None when the module looks
    names up at run time."""
    if _DYNAMIC_LOOKUPS.search(ctx.source):
        return None
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    names_in = _names_in(ctx, module)
    starred = {n for n in defined if not n.startswith("_")} if "import *" in imported else set()
    called = set(names_in.get("", ())) | (defined & imported) | starred | {
        n for n in defined if ctx.index.mentioned_elsewhere(n, ctx.path) is not False}
    todo = list(called)
    while todo:
        for named in names_in.get(todo.pop(), ()):
            if named not in called:
                called.add(named)
                todo.append(named)
    return frozenset(called)


# Ways a script reaches its own definitions by name at run time (`fire.Fire()` makes every
# top-level function a command).
_DYNAMIC_LOOKUPS = re.compile(r"(?<![.\w])(?:globals|locals|vars)\(\s*\)\s*(?:\[|\.get\b)"
                              r"|(?<![.\w])(?:eval|exec)\s*\(|getattr\(\s*sys\.modules|\bFire\(\s*\)")


def _named_definitions(ctx, module: cst.Module) -> frozenset[str] | None:
    """The names of the module's top-level definitions that code outside them names (a
    read of the name, or a string spelling it, as registries and configs do); None when the
    file is no script (it runs nothing: its callers are elsewhere) or looks names up at
    run time."""
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    # a call of a function the script defines itself (its own `def eval(model, ...)`) is no look-up
    lookups = (m.group(0).split("(")[0].strip() for m in _DYNAMIC_LOOKUPS.finditer(ctx.source))
    if any(called not in defined for called in lookups) or not _runs_something(module, defined):
        return None
    # a definition names the others too (recursion aside)
    return frozenset(set().union(*_names_in(ctx, module).values()))


def _names_in(ctx, module: cst.Module) -> dict[str, set[str]]:
    """``_definitions_named`` for every top-level definition of the file, read once."""
    return ctx.once(("portability: definitions named",), lambda: _definitions_named(
        module, {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}))


def _definitions_named(module: cst.Module, defined: set[str]) -> dict[str, set[str]]:
    """For each top-level definition (``""`` for the module's other code), the names of
    ``defined`` it names: a read of the name (not its own), or a string spelling it, as
    registries and configs do."""
    names_in: dict[str, set[str]] = {}
    for statement in module.body:
        own = statement.name.value if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else ""
        found = names_in.setdefault(own, set())

        def enter(node: cst.CSTNode, own=own, found=found) -> bool:
            if isinstance(node, cst.Name) and node.value in defined and node.value != own:
                found.add(node.value)
            elif isinstance(node, cst.SimpleString):
                text = str(node.evaluated_value) if not isinstance(node.evaluated_value, bytes) else ""
                found.update(n for n in defined if text == n or text.endswith(f".{n}") or text.endswith(f":{n}"))
            return True

        walk(statement, enter)
    return names_in


def _runs_something(module: cst.Module, defined: set[str]) -> bool:
    """The module is a script: a ``__main__`` block, or top-level code that calls one of its
    own definitions (``main()``)."""
    for statement in module.body:
        if isinstance(statement, cst.If) and conditions.is_main_guard(statement.test):
            return True
        if isinstance(statement, cst.SimpleStatementLine) and any(
                isinstance(call.func, cst.Name) and call.func.value in defined for call in collect(statement, cst.Call)):
            return True
    return False


def _runs_cuda_only_code(ctx, module: cst.Module) -> Step | None:
    """The file imports a project module written for CUDA only (``.cuda()`` outside any
    device test, no CPU path; ``ProjectIndex.cuda_only_import``): whatever CPU choice the file
    shows, the code it runs was never run without CUDA, and this line is not what stops it."""
    if ctx.index is None or ctx.path == "-":
        return None
    where = ctx.index.cuda_only_import(ctx.path)
    if where is None:
        return None
    return module, (f"the file imports {where}, which calls `.cuda()` outside any device test and shows no "
                    "CPU path: the CPU path this file offers does not run anyway")


def _library(ctx, module: cst.Module) -> Step | None:
    """A module of an importable package with no ``__main__`` block whose package shows a
    CPU path: library code runs wherever its callers run, machines without CUDA among them,
    as its package says it may. A module whose top-level code does its work (a loop, a
    ``with``: ``for last in Path.cwd().rglob("last.pt"): ...``) is a script kept in a package
    directory, not library code."""
    if not is_library_module(ctx, module):
        return None
    facts = _facts(ctx, module)
    if ctx.index is not None and ctx.path != "-":
        where = ctx.index.package_cpu_path(ctx.path)
        if where is None:
            return None
        why = f"its package shows a CPU path ({where})"
    elif facts.device_generic:
        why = "the module has device-generic code"
    else:
        return None
    return module, f"library code (a module of a package, no __main__ block) runs wherever its callers do: {why}"


def _users_on_cuda(ctx, module: cst.Module) -> Step | None:
    """Library code whose users in the project (the modules that import it and place
    tensors) all show no CPU path: it runs where they do, on CUDA, whatever the rest of its
    package shows (a training loss imported only by a trainer that hardcodes ``"cuda:0"``).
    Or library code nothing in the project imports but its package's ``__init__``: dead code
    (a copy of a model package), or code whose callers are out of sight."""
    if ctx.index is None or ctx.path == "-":
        return None
    if not ctx.index.run_from(ctx.path):
        return module, (f"library code that nothing indexed with it imports (the files under "
                        f"{ctx.index.indexed_folder()}/, its package's __init__ aside): dead code, or callers "
                        "out of sight, whatever its package shows")
    where, users = ctx.index.users_cpu_path(ctx.path)
    if where is not None or not users:
        return None
    return module, (f"library code, but the project modules that use it and place tensors ({', '.join(users)}) "
                    "show no CPU path: it runs where they do, on CUDA")


_CUDA_TENSOR_TYPE = re.compile(r"torch\.cuda\.\w*Tensor")


def _imports_gpu_library(statement: cst.CSTNode) -> str | None:
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    return next((library for small in statement.body
                 if (library := requirements.imported_library(small, requirements.GPU_LIBRARIES))), None)


def _cuda_tensor_type(ctx, statement: cst.CSTNode) -> cst.CSTNode | None:
    """A ``torch.cuda.FloatTensor``-style type a simple statement always uses (both
    branches of a conditional expression, when in one)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    found: list[cst.CSTNode] = []

    def is_type(node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Attribute) and bool(
            _CUDA_TENSOR_TYPE.fullmatch(ctx.qualified_name(node) or ""))

    def enter(node: cst.CSTNode) -> bool:
        if found or isinstance(node, (cst.Lambda, cst.BooleanOperation)):
            return False
        if isinstance(node, cst.IfExp):
            if is_type(node.body) and is_type(node.orelse):
                found.append(node)
            return False
        if is_type(node):
            found.append(node)
            return False
        return True

    walk(statement, enter)
    return found[0] if found else None


def cuda_first_in_every_run(ctx, ancestors: Sequence[cst.CSTNode], call: cst.Call, callee: str) -> Step | None:
    """Every run that reaches ``call`` (recorded by ``run_order`` as ``callee``) has first
    made a call that raises without CUDA, here or in a caller however far up
    (``ProjectIndex.cuda_needed_earlier_in_every_run``): the code needs CUDA anyway."""
    if ctx.index is None or not ctx.path.endswith(".py"):
        return None
    found = ctx.index.cuda_needed_earlier_in_every_run(ctx.path, ctx.line_of(call, ancestors[0]), callee)
    return None if found is None else (
        call, f"every run that gets here has first called code that needs CUDA ({found}): no machine without "
              "CUDA gets here")


def needs_cuda_around(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The code that runs whenever the innermost node of ``ancestors`` runs needs CUDA
    anyway: a statement of a block around it, up to its function's body (the module's
    top level for code outside functions), imports or calls a CUDA-only library (``from
    torch2trt import TRTModule``, ``torch2trt.TRTModule()``, TensorRT, PyCUDA, CuPy) or uses a
    ``torch.cuda.*Tensor`` type.
    (``torch.cuda`` calls that raise without CUDA are ``requirements.py``'s and
    ``cuda_scopes``'.) A bare ``.cuda()`` does not count: in code that runs without CUDA it is
    TDL001's bug, not a reason the code needs CUDA."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            for statement in node.body:
                library = _imports_gpu_library(statement)
                if library is not None:
                    return statement, f"the code around it needs CUDA anyway: it imports {library}"
                used = _cuda_tensor_type(ctx, statement)
                if used is not None:
                    return used, f"the code around it needs CUDA anyway: it uses `{code_of(used)}`"
                called = _cuda_library_call(ctx, statement)
                if called is not None:
                    return called, f"the code around it needs CUDA anyway: it calls `{code_of(called.func)}`"
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
    return None


def _cuda_library_call(ctx, statement: cst.CSTNode) -> cst.Call | None:
    """A call of a library with no CPU back end (``requirements.CUDA_LIBRARIES``) that a simple
    statement always makes."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    return next((call for call in collect(statement, cst.Call, skip=(cst.Lambda,))
                 if (ctx.qualified_name(call.func) or "").split(".")[0] in requirements.CUDA_LIBRARIES), None)


def moved_to_cuda_anyway(ancestors: Sequence[cst.CSTNode], receiver: str) -> Step | None:
    """``receiver`` (code: the module that loaded weights go into) is moved with a bare
    ``.cuda()`` or ``.to("cuda")`` by a statement that runs whenever the innermost node of
    ``ancestors`` does: one of a block around it, up to its function's body. That very
    object goes to CUDA whatever the load does, so the code needs CUDA anyway. (A ``.cuda()``
    of anything else is TDL001's business, not a reason.)"""
    for node in reversed(ancestors):
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            for statement in node.body:
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for call in collect(statement, cst.Call, skip=(cst.Lambda,)):
                    if isinstance(call.func, cst.Attribute) and code_of(call.func.value) == receiver \
                            and _to_cuda(call):
                        return call, f"`{receiver}` is moved to CUDA whatever happens: the code needs CUDA anyway"
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
    return None


def _to_cuda(call: cst.Call) -> bool:
    """``x.cuda()``, ``x.cuda(0)``, ``x.to("cuda")``, ``x.to("cuda:0")``,
    ``x.type(torch.cuda.FloatTensor)``."""
    method = call.func.attr.value
    if method == "cuda":
        return all(a.keyword is None for a in call.args)
    if method == "type":
        return kinds.casts_to_cuda_type(call)
    first = call.args[0].value if method == "to" and call.args else None
    return isinstance(first, cst.SimpleString) and str(first.evaluated_value).split(":")[0] == "cuda"


_DEVICE_WORDS = re.compile(r"cuda|gpu|cpu|device|available", re.IGNORECASE)


def _second_gpu(module: cst.Module) -> Step | None:
    """The file puts work on a second GPU it names: ``.to("cuda:1")``, ``.cuda(1)``, a torch
    factory's ``device="cuda:1"`` (not an option's default, which the user may change, nor
    a report of ``torch.cuda`` memory on that GPU). Model-parallel code (a network split over
    ``cuda:0`` and ``cuda:1``) is written for a machine with two GPUs, as ``.cuda(1)`` is: a
    CPU choice elsewhere in the file is boilerplate, not a path its code runs."""
    for call in collect(module, cst.Call):
        func = call.func
        called = dotted_name(func) or ""
        factory = called.startswith("torch.") and not called.startswith("torch.cuda.")
        named = [a.value for a in call.args if factory and a.keyword is not None and a.keyword.value == "device"]
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and call.args \
                and call.args[0].keyword is None:
            named.append(call.args[0].value)
        for value in named:
            if isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device") and value.args:
                value = value.args[-1].value if len(value.args) == 2 else value.args[0].value  # `torch.device("cuda", 1)`
            index = conditions.integer_value(value)  # `.cuda(1)`, `.to(1)`, `device=1`
            if index is None and isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                kind, _, number = value.evaluated_value.partition(":")
                index = int(number) if kind == "cuda" and number.isdigit() else None
            if index is not None and index >= 1:
                return call, f"`{code_of(call)}` puts work on a second GPU: code for a multi-GPU machine"
    return None


def _several_gpus(ctx, scope: cst.CSTNode) -> Step | None:
    """The function (or the module's top level) spreads its model over GPUs it names:
    ``nn.DataParallel(model, device_ids=[0, 1, 2, 3])``, a literal list of GPU numbers (or a
    name the function binds once to one, or a top-level constant that holds one) with a
    second GPU in it. Code written for a multi-GPU
    machine, as ``.cuda(1)`` is: a CPU choice elsewhere in it is boilerplate, not a path this
    code runs."""
    found: list[Step] = []

    def enter(node: cst.CSTNode) -> bool:
        if found:
            return False
        if isinstance(node, cst.Call) and ctx.qualified_name(node.func) in kinds.GPU_WRAPPERS:
            ids = _keyword(node, "device_ids")
            if ids is None and len(node.args) > 1 and node.args[1].keyword is None:
                ids = node.args[1].value
            if isinstance(ids, cst.Name):  # `gpus = [0, 1]` in the function, or at the top of the file
                bound = requirements.assignments(scope, ids.value) if isinstance(scope, cst.FunctionDef) else []
                ids = bound[0] if len(bound) == 1 else None if bound else conditions.constant_value(ids.value)
            numbers = [conditions.integer_value(e.value) for e in ids.elements] \
                if isinstance(ids, (cst.List, cst.Tuple)) else []
            if any(n is not None and n >= 1 for n in numbers):
                found.append((node, f"`{code_of(node.func)}` spreads the model over GPUs {code_of(ids)}: "
                                    "code for a multi-GPU machine"))
        return node is scope or not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))

    walk(scope, enter)
    return found[0] if found else None


def _list_loader(ctx, module: cst.Module) -> Step | None:
    """The file batches its data with torch_geometric's ``DataListLoader``
    (``project_index.feeds_data_parallel``): multi-GPU code, whatever CPU choice it shows."""
    if not project_index.feeds_data_parallel(ctx.source):
        return None
    return ctx.once(("portability: list loader",), lambda: next(
        ((call, f"`{code_of(call.func)}` batches lists of graphs that only torch_geometric's multi-GPU "
                "`DataParallel` takes: code for a multi-GPU machine")
         for call in collect(module, cst.Call) if code_of(call.func).endswith("DataListLoader")), None))


def _stopped_first(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """A statement that runs before the line, in its block or a block around it (up to its
    function), calls the project's function or class with arguments it cannot bind
    (``Dual_net()`` whose ``__init__`` takes ``cfg``; ``PointNet_cls(K=13)`` of a class
    without ``K``): it raises TypeError on every machine, so the line never runs. Not
    inside a ``try``, whose handler may catch it."""
    if ctx.index is None or ctx.path == "-":
        return None
    for index in range(len(ancestors) - 1, 0, -1):
        block, statement = ancestors[index - 1], ancestors[index]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Try, cst.ExceptHandler)):
            return None
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            continue
        at = next((i for i, s in enumerate(block.body) if s is statement), None)
        first = ctx.once(("portability: first bad call", id(block)),
                         lambda block=block: _first_bad_call(ctx, ancestors[0], block))
        if at is not None and first is not None and first[0] <= at:
            return first[1], (f"`{code_of(first[1].func)}(...)` raises TypeError on every machine ({first[2]}): "
                              "the run stops there, before this line")
    return None


def _cuda_needed_to_reach(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """Every run that reaches the line's top-level function has first called code that
    raises without CUDA, in a caller however far up; for a method of a top-level class,
    every run that builds the class (``ProjectIndex.cuda_needed_to_reach``): no machine
    without CUDA gets here. Not for a static or class method, nor a class with a class
    method (an alternative constructor builds it out of sight)."""
    if ctx.index is None or not ctx.path.endswith(".py") or len(ancestors) < 2:
        return None
    top = ancestors[1]
    if isinstance(top, cst.FunctionDef):
        found = ctx.index.cuda_needed_to_reach(ctx.path, top.name.value)
        return None if found is None else (
            top, f"every run that calls `{top.name.value}` has first called code that needs CUDA ({found}): "
                 "no machine without CUDA gets here")
    method = next((a for a in ancestors[2:4] if isinstance(a, cst.FunctionDef)), None)
    if not isinstance(top, cst.ClassDef) or method is None or any(
            _decorated(m, ("classmethod", "staticmethod")) for m in top.body.body if isinstance(m, cst.FunctionDef)):
        return None
    found = ctx.index.cuda_needed_to_reach(ctx.path, top.name.value)
    return None if found is None else (
        top, f"every run that builds `{top.name.value}` has first called code that needs CUDA ({found}): its "
             "methods never run without CUDA")


def _decorated(function: cst.FunctionDef, names: tuple[str, ...]) -> bool:
    return any(code_of(d.decorator) in names for d in function.decorators)


def _first_bad_call(ctx, module: cst.Module, block: cst.Module | cst.IndentedBlock) -> tuple[int, cst.Call, str] | None:
    """The first simple statement of ``block`` with a call ``ProjectIndex.unbindable`` says
    raises: (its place in the block, the call, why)."""
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    own = ctx.index.module_of(ctx.path)
    for at, statement in enumerate(block.body):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for call in collect(statement, cst.Call, skip=(cst.Lambda,)):
            if any(arg.star for arg in call.args):
                continue
            qualified = ctx.qualified_name(call.func)
            if qualified is None and isinstance(call.func, cst.Name) and call.func.value in defined and own:
                qualified = f"{own}.{call.func.value}"
            if not qualified or qualified.startswith("torch."):
                continue
            why = ctx.index.unbindable(qualified, ctx.path, sum(a.keyword is None for a in call.args),
                                       [a.keyword.value for a in call.args if a.keyword is not None])
            if why is not None:
                return at, call, why
    return None


def _off_the_path(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line is not where the code's CPU path runs: in an ``except`` handler (it runs
    only after the ``try`` failed, which nothing shows a machine without CUDA does), or in
    the branch of an ``if`` that is no device test whose other branch moves values to a
    device it was given (``if args: x.to(args.device) else: x.cuda()``: the CPU path is
    the other branch)."""
    step = _replaced(ctx, ancestors)
    if step is not None:
        return step
    for index in range(len(ancestors) - 1, 0, -1):
        node, child = ancestors[index - 1], ancestors[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(node, cst.ExceptHandler) and child is node.body:
            return (node, "it runs only after the `try` above failed: nothing shows that happens on a machine "
                          "without CUDA")
        if isinstance(node, cst.If) and child is not node.test and not _DEVICE_WORDS.search(code_of(node.test)):
            other = node.orelse if child is node.body else node.body
            if other is not None and _moves_to_a_given_device(other):
                return (node, f"the device the code is given is used on the other branch of `if {code_of(node.test)}:`: "
                              "this one runs where none was given")
    return None


def _replaced(ctx, ancestors: Sequence[cst.CSTNode]) -> Step | None:
    """The line is in a function that a later definition of the same name in the same module
    or class body replaces, with nothing in between naming it: that body never runs (a
    copy-pasted first version of ``evaluate``)."""
    for block, definition in zip(ancestors, ancestors[1:]):
        if isinstance(definition, cst.FunctionDef) and isinstance(block, (cst.Module, cst.IndentedBlock)):
            later = ctx.once(("portability: replaced", id(block)), lambda block=block: _replacements(block))
            if id(definition) in later:
                return later[id(definition)], (f"a later `def {definition.name.value}` replaces this one before "
                                               "anything calls it: this body never runs")
    return None


def _replacements(block: cst.Module | cst.IndentedBlock) -> dict[int, cst.FunctionDef]:
    """For each function of ``block`` that a later one of the same name replaces with no
    statement in between naming it: that later definition. One pass from the end."""
    found: dict[int, cst.FunctionDef] = {}
    pending: dict[str, cst.FunctionDef] = {}  # name -> the next definition, not named since
    for statement in reversed(block.body):
        own = statement.name.value if isinstance(statement, cst.FunctionDef) else None
        if own is not None and own in pending:
            found[id(statement)] = pending[own]
        for name in {n.value for n in collect(statement, cst.Name)} - {own}:
            pending.pop(name, None)
        if own is not None:
            pending[own] = statement
    return found


def _moves_to_a_given_device(block: cst.CSTNode) -> bool:
    """``.to(x)`` with a device expression (not a literal) somewhere in ``block``."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" \
                and node.args and not isinstance(node.args[0].value, (cst.SimpleString, cst.FormattedString)):
            found = found or bool(_DEVICE_WORDS.search(code_of(node.args[0].value)))
        return not found

    walk(block, enter)
    return found


def runs_without_cuda(ctx, ancestors: Sequence[cst.CSTNode], library: bool = False) -> Verdict:
    """Whether code at ``ancestors`` (the flagged node's, module first) is meant to run
    on machines without CUDA, with the evidence. ``library``: a module of a package counts
    (for a load, whose file comes from the caller)."""
    module = ancestors[0]
    if not isinstance(module, cst.Module):
        return Verdict(False, ())
    targets = ctx.target_devices
    if targets is not None and all(t in _CUDA_TARGETS for t in targets):
        return Verdict(False, (), off=True)
    facts = _facts(ctx, module)
    if facts.cuda_only is not None:
        return Verdict(False, (facts.cuda_only,))
    stop = ctx.index.stopped_without_cuda(ctx.path) if ctx.index is not None and ctx.path != "-" else None
    if stop is not None:
        return Verdict(False, ((module, f"every run that reaches this file stops first where there is no CUDA "
                                        f"({stop}): its CPU choices are never taken"),))
    users = ctx.index.importers_need_gpu(ctx.path) if ctx.index is not None and ctx.path != "-" \
        and _imported_code(ctx, module) else None
    if users is not None:
        return Verdict(False, ((module, f"every project module that imports this file needs a GPU-only library "
                                        f"({users}): its code runs only where they do"),))
    step = _unimportable(ctx, module) or ctx.once(("portability: archived",), lambda: _archived(ctx, module)) \
        or ctx.once(("portability: vendored",), lambda: _vendored(ctx, module)) or _never_named(ctx, ancestors) \
        or _never_called(ctx, ancestors) or flags.never_taken(ctx, ancestors) or _stopped_first(ctx, ancestors) \
        or _cuda_needed_to_reach(ctx, ancestors)
    if step is not None:
        return Verdict(False, (step,))
    for scope in reversed(ancestors):
        step = facts.cuda_scopes.get(scope)
        if step is not None:
            return Verdict(False, (step,))
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if provenance.is_test_function(ctx, function, ancestors):
        return Verdict(False, ())
    step = ctx.once(("portability: several GPUs", id(function or module)),
                    lambda: _several_gpus(ctx, function or module)) or _list_loader(ctx, module) \
        or ctx.once(("portability: second GPU",), lambda: _second_gpu(module))
    if step is not None:
        return Verdict(False, (step,))
    step = _off_the_path(ctx, ancestors)
    if step is not None:
        return Verdict(False, (step,))
    if targets is not None:
        machines = ", ".join(t for t in targets if t not in _CUDA_TARGETS)
        return Verdict(True, ((module, f"target-devices names {machines}: the code must run without CUDA"),))
    if ctx.gpu_runtime is not None:
        return Verdict(False, ((module, f"the notebook asks its host for a GPU runtime ({ctx.gpu_runtime} in its "
                                        "metadata): it is written for a machine with CUDA; --target-devices "
                                        "cpu,cuda says it must run without"),), unknown_intent=True)
    for scope in reversed(ancestors):
        step = facts.device_generic.get(scope)
        if step is not None:
            return Verdict(True, (step,))
    step = _runs_cuda_only_code(ctx, module)
    if step is not None:
        return Verdict(False, (step,))
    unreached = None
    if facts.cpu_choice is not None:
        steps = _reach(ctx, module, facts).path(reach.innermost_scope(ancestors))
        if steps is not None:
            return Verdict(True, steps)
        unreached = (facts.cpu_choice[0], "the file chooses the CPU here, but nothing shows this line runs in "
                                          "that run: nothing the choice reaches calls its code")
    step = _importers_run_without_cuda(ctx, ancestors)
    if step is not None:
        return Verdict(True, (step,))
    step = _library(ctx, module) if library else None
    if step is not None:
        doubt = _users_on_cuda(ctx, module)
        return Verdict(False, (doubt,)) if doubt is not None else Verdict(True, (step,))
    return Verdict(False, (unreached or (module, "judged CUDA-only (target-devices auto): nothing here chooses the "
                                                 "CPU, offers a CPU option or takes a device; --target-devices "
                                                 "cpu,cuda says it must run without CUDA"),), unknown_intent=True)


def _reach(ctx, module: cst.Module, facts: _FileFacts) -> reach.Reach:
    """The file's CPU choices (those bound to a name something reads) and the code their run reaches."""

    def is_choice(node: cst.CSTNode) -> str | None:
        why = facts.cpu_placements.get(id(node)) if type(node) is cst.Assign else \
            None if id(node) in facts.unread else _choice_of(ctx, node)
        return None if why is None else f"the file runs without CUDA: it {why}"

    def needs_cuda(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
        return guards.runs_only_on_accelerator(parent, child, ctx.qualified_name)

    return ctx.once(("portability: reach",),
                    lambda: reach.Reach(module, is_choice, needs_cuda, _dies_without_cuda(ctx, module)))
