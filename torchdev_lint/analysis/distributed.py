"""Process groups and the device each process picks (TDL011).

Every process of a group runs the same file. ``.cuda()``, ``"cuda"`` and
``torch.device("cuda")`` mean the *current* device, which is GPU 0 until the process sets
it (``torch.cuda.set_device(local_rank)``). This module says where a file starts a group,
whether it ever sets the current device (or gives each process its own visible GPU), which
device expressions name one fixed GPU, and which code only runs in one process or outside
any group.
"""

from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.conditions import is_main_guard, words
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name

# What starts (or launches) a group of processes that run this file.
_STARTS = ("init_process_group", "multiprocessing.spawn", "mp.spawn")
_RANK_VARIABLES = frozenset({"LOCAL_RANK"})
# What gives each process its own device.
_SETTERS = ("cuda.set_device", "accelerator.set_device_index", "xpu.set_device", "set_device")
_VISIBLE = "CUDA_VISIBLE_DEVICES"
# Libraries that place each process on its own device themselves.
_PLACING_LIBRARIES = ("accelerate", "lightning", "pytorch_lightning", "transformers.Trainer",
                      "transformers.trainer", "ignite.distributed", "horovod")
_NOT_PICKS = ("autocast", "GradScaler", "amp.")
# How a test of a rank says "rank 0 only" or "no group" (spaces removed).
_SINGLE_RANK_TESTS = ("==0", "in[-1,0]", "in(-1,0)", "in[0,-1]", "in(0,-1)", "<=0", "==-1", "<1")
_SINGLE_WORDS = frozenset({"main", "master", "zero", "rank0", "leader", "chief"})
_GROUP_WORDS = frozenset({"distributed", "ddp", "dist", "world", "multi", "multigpu",
                          "parallel", "initialized", "rank", "gpus", "fsdp"})


def _fixed_cuda(expr: cst.BaseExpression | None) -> bool:
    """``"cuda"``, ``"cuda:0"``: one GPU for every process."""
    if not isinstance(expr, cst.SimpleString):
        return False
    value = expr.evaluated_value
    if not isinstance(value, str):
        return False
    kind, _, index = value.partition(":")
    return kind == "cuda" and (index == "" or index.isdigit())


def _fixed_device_value(expr: cst.BaseExpression | None) -> bool:
    """A device value that names a fixed GPU: ``"cuda"``, ``"cuda" if c else "cpu"``."""
    if isinstance(expr, cst.IfExp):
        return _fixed_device_value(expr.body) or _fixed_device_value(expr.orelse)
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("device"):
        args = [a for a in expr.args if a.keyword is None or a.keyword.value == "type"]
        return len(expr.args) == 1 and bool(args) and _fixed_device_value(args[0].value)
    return _fixed_cuda(expr)


def fixed_pick(node: cst.CSTNode, parent: cst.CSTNode | None) -> str | None:
    """What ``node`` does if it picks one fixed GPU whatever the rank: ``.cuda()`` with no
    index, ``torch.device("cuda")``, ``.to("cuda")``, ``device="cuda:0"``, or
    ``device = "cuda" if ... else "cpu"``; None otherwise. ``parent``: the node holding it."""
    if isinstance(node, cst.Call):
        func = node.func
        name = dotted_name(func) or ""
        if (isinstance(func, cst.Attribute) and func.attr.value == "cuda" and not node.args
                and not name.startswith("torch.")):
            return "`.cuda()` without an index puts it on the current device"
        if name.endswith("device") and len(node.args) == 1 and _fixed_cuda(node.args[0].value):
            return f"`{code_of(node)}` is the current device"
        if isinstance(func, cst.Attribute) and func.attr.value == "to" and node.args and (
            node.args[0].keyword is None or node.args[0].keyword.value == "device"
        ) and _fixed_cuda(node.args[0].value):
            return f"`.to({code_of(node.args[0].value)})` names the same GPU in every process"
        if not any(n in name for n in _NOT_PICKS):
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "device" and _fixed_cuda(arg.value):
                    return f"`device={code_of(arg.value)}` names the same GPU in every process"
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        target = dotted_name(node.targets[0].target) or ""
        if "device" in words(target.rpartition(".")[2]) and _fixed_device_value(node.value):
            return f"`{target}` is set to the same GPU in every process"
    return None


def starts_group(ctx, node: cst.CSTNode) -> str | None:
    """What ``node`` starts: a process group, processes spawned to run a function, or a
    read of torchrun's ``LOCAL_RANK``; None otherwise."""
    if isinstance(node, cst.Call):
        name = ctx.qualified_name(node.func) or dotted_name(node.func) or ""
        if name.startswith("torch.distributed.") and name.endswith(".init_process_group"):
            backend = next((a.value for a in node.args if a.keyword is None or a.keyword.value == "backend"), None)
            if isinstance(backend, cst.SimpleString) and backend.evaluated_value in ("gloo", "mpi"):
                return None  # a CPU group
            size = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "world_size"), None)
            if isinstance(size, cst.Integer) and size.evaluated_value == 1:
                return None  # a group of one process
            return "a process group starts here: every process runs this code"
        if name.endswith(("multiprocessing.spawn", "mp.spawn")):
            target = node.args[0].value if node.args and node.args[0].keyword is None else None
            if not (isinstance(target, cst.Name) and _defines_function(ctx, target.value)):
                return None  # the spawned code, and where it sets its device, is in another file
            return "processes are spawned here: each runs the function with its own rank"
    if isinstance(node, cst.SimpleString) and node.evaluated_value in _RANK_VARIABLES and _reads_environment(ctx):
        return "torchrun starts one process per GPU and says each its LOCAL_RANK"
    return None


def communicates_on_cpu(ctx, node: cst.CSTNode) -> bool:
    """``init_process_group("gloo")`` (or ``"mpi"``) or ``rpc.init_rpc(...)``: the processes
    talk through the CPU, where several of them sharing one GPU raises nothing (pytorch/examples'
    RPC parameter server runs its trainers on one GPU on purpose)."""
    if not isinstance(node, cst.Call):
        return False
    name = ctx.qualified_name(node.func) or ""
    if name.startswith("torch.distributed.") and name.endswith(".init_rpc"):
        return True
    if name.startswith("torch.distributed.") and name.endswith(".init_process_group"):
        backend = next((a.value for a in node.args if a.keyword is None or a.keyword.value == "backend"), None)
        return isinstance(backend, cst.SimpleString) and backend.evaluated_value in ("gloo", "mpi")
    return False


def _reads_environment(ctx) -> bool:
    """The string being visited is read from the environment: ``os.environ["LOCAL_RANK"]``,
    ``os.environ.get("LOCAL_RANK")``, ``os.getenv("LOCAL_RANK")`` (not a key of a dict
    that a test patches in)."""
    ancestors = ctx.ancestors
    if len(ancestors) < 4:
        return False
    holder = ancestors[-4] if isinstance(ancestors[-2], cst.Index) else ancestors[-3]
    if isinstance(holder, cst.Subscript):
        return (dotted_name(holder.value) or "").endswith("environ")
    if isinstance(holder, cst.Call):
        name = dotted_name(holder.func) or ""
        return name.endswith(("environ.get", "getenv"))
    return False


_HELPER_WORDS = frozenset({"get", "set", "setup", "init", "initialize", "configure"})


def may_set_device(ctx, node: cst.CSTNode) -> bool:
    """A call of a helper from elsewhere that, by its name, may set the process's device:
    ``utils.get_device(...)``, ``setup_device()``, ``init_distributed_mode(args)``,
    ``setup_ddp(rank)`` (torchtune's, DeiT's and many others set it inside)."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute):
        if isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            return False  # a method of this file: its body is in sight
        name = func.attr.value
    elif isinstance(func, cst.Name):
        if _defines_function(ctx, func.value):
            return False
        name = func.value
    else:
        return False
    if (ctx.qualified_name(func) or "").startswith("torch."):
        return False
    said = words(name)
    return bool(said & _HELPER_WORDS) and bool(said & {"device", "distributed", "dist", "ddp", "gpu", "cuda"})


def _defines_function(ctx, name: str) -> bool:
    """The file defines a function ``name`` at its top level."""
    module = ctx.ancestors[0] if ctx.ancestors else None
    return isinstance(module, cst.Module) and any(
        isinstance(s, cst.FunctionDef) and s.name.value == name for s in module.body)


def is_entry_point(module: cst.Module, starts: list[tuple]) -> bool:
    """The file is what the launcher runs: it has an ``if __name__ == "__main__":`` block,
    or it starts the group at its top level (not inside a function another file may call)."""
    return any(isinstance(s, cst.If) and is_main_guard(s.test) for s in module.body) or any(
        not any(isinstance(a, cst.FunctionDef) for a in ancestors) for _, _, ancestors in starts)


def function_of(ancestors) -> cst.FunctionDef | None:
    return next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)


def sets_device(ctx, node: cst.CSTNode) -> bool:
    """``torch.cuda.set_device(...)``, ``torch.accelerator.set_device_index(...)``,
    ``with torch.cuda.device(rank):``, or ``os.environ["CUDA_VISIBLE_DEVICES"] = ...``."""
    if isinstance(node, cst.Call):
        name = ctx.qualified_name(node.func) or dotted_name(node.func) or ""
        if name.endswith(_SETTERS) or name.endswith("cuda.device") and node.args:
            return True
    if isinstance(node, cst.SimpleString) and node.evaluated_value == _VISIBLE:
        return True
    return False


def placed_by_library(module: cst.Module) -> str | None:
    """The library the file imports that gives each process its device itself, if any."""
    for node in tree.collect(module, (cst.Import, cst.ImportFrom), skip=(cst.FunctionDef, cst.ClassDef)):
        if isinstance(node, cst.Import):
            names = [dotted_name(a.name) or "" for a in node.names]
        else:
            base = dotted_name(node.module) if node.module is not None and not node.relative else ""
            if not base:
                continue
            names = [base] if isinstance(node.names, cst.ImportStar) else [
                f"{base}.{dotted_name(a.name)}" for a in node.names]
        for name in names:
            for library in _PLACING_LIBRARIES:
                if name == library or name.startswith(library + "."):
                    return library
    return None


def _says_single_process(test: cst.BaseExpression) -> bool:
    """``rank == 0``, ``local_rank in [-1, 0]``, ``is_main_process()``, ``not args.distributed``,
    ``world_size == 1``: a test under which one process at most runs (or none in a group)."""
    code = code_of(test)
    text = code.replace(" ", "")
    said = words(code)
    if said & _SINGLE_WORDS and ("rank" in said or "process" in said or "main" in said or "master" in said):
        return True
    if "rank" in said and any(t in text for t in _SINGLE_RANK_TESTS):
        return True
    if said & _GROUP_WORDS and (text.startswith("not") or any(t in text for t in ("==1", "<=1", "<2", "==-1"))):
        return True
    return False


def _says_group(test: cst.BaseExpression) -> bool:
    """``args.distributed``, ``dist.is_initialized()``, ``world_size > 1``, ``local_rank != -1``."""
    code = code_of(test)
    return bool(words(code) & _GROUP_WORDS) and not _says_single_process(test) and not code.startswith("not")


def outside_group(ancestors) -> bool:
    """The innermost node of ``ancestors`` runs in one process at most, or only where no
    group is started: the body of ``if rank == 0:`` / ``if not args.distributed:``, or the
    ``else`` of ``if args.distributed:``."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(parent, (cst.If, cst.IfExp)):
            if child is parent.body and _says_single_process(parent.test):
                return True
            if child is parent.orelse and _says_group(parent.test):
                return True
    return False


def other_branch(pick: tuple, start: tuple) -> bool:
    """``pick`` and ``start`` (ancestor chains) sit in different branches of one ``if``:
    the pick runs where the group is not started."""
    for parent, child in zip(pick[:-1], pick[1:]):
        if isinstance(parent, (cst.If, cst.IfExp)):
            for other_parent, other_child in zip(start[:-1], start[1:]):
                if other_parent is parent and other_child is not child:
                    return True
    return False
