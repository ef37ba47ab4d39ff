"""Code that can only run where CUDA is, whatever its device strings say.

A hardcoded ``"cuda"`` (TDL002) or ``.cuda()`` (TDL001) costs portability only where the
code around it could otherwise run on another machine. Two kinds of code cannot, and the
guards of ``guards.py`` do not see either, because no test in the code says so:

- a block that already needs CUDA by means no fix changes (every statement of a block runs
  whenever the block does): it opens an NCCL process group, calls a ``torch.cuda`` function
  that raises without a CUDA device (``synchronize``, ``Event``, ``Stream``,
  ``reset_peak_memory_stats``...), wraps a model in ``DistributedDataParallel`` with
  ``device_ids`` (which a module on the CPU refuses), imports a library that only drives NVIDIA GPUs
  (TensorRT, torch2trt, PyCUDA, CuPy), stops the run without CUDA (``if
  torch.cuda.is_available(): ... else: raise``), or calls a function of the same file that needs
  CUDA in the same way or whose name says it is for CUDA (``with cuda_timer(times):``; ``guards.py`` already
  treats such a function's body as chosen by its caller). At the top level of a module
  this covers the whole file;
- a function of the file that no other module calls (a private ``_name``, or a module-level
  function the project index says no other module imports) whose every use, a call or the
  function handed on (``spawn(_ddp_fn, ...)``), is guarded or is itself in such code: a
  helper of a test marked ``RunIf(min_cuda_gpus=2)``. Methods count when private, or when
  no other module mentions an attribute of their name (``ProjectIndex.mentioned_elsewhere``)
  and every mention in the file is ``self.<name>``: an object can be handed anywhere, but
  only code that names the method can call it.
- code that runs only inside a process group (after ``if not dist.is_initialized():
  return``, under ``if world_size > 1:``, through the file's own helpers that answer so)
  in a file whose every ``init_process_group`` opens an NCCL group (a literal ``"nccl"``,
  or a name the same block sets to it just before): the file's distributed runs are NCCL
  runs (assumed: another module that opens a gloo group and calls these helpers is not
  seen); or in a file that opens none, of a project that opens groups with NCCL only and
  names no other backend or launcher (``ProjectIndex.nccl_groups_only``). A file that may
  open another kind says nothing.

The answers are per file and computed once, on the first question.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import libcst as cst

from torchdev_lint.analysis import conditions, tree
from torchdev_lint.analysis.conditions import Qualifier
from torchdev_lint.analysis.guards import ACCELERATOR_NAME_WORDS, code_of, is_guarded, stops_without_accelerator
from torchdev_lint.analysis.imports import dotted_name


# `torch.cuda` functions that raise on a machine without a CUDA device (checked on a
# CPU-only build; the memory *readers* such as `max_memory_allocated` return 0 instead and
# `empty_cache`/`manual_seed` do nothing, so they say nothing). Not `set_device` (below).
NEEDS_CUDA = frozenset(
    f"torch.cuda.{name}" for name in """synchronize Event Stream current_stream default_stream current_device get_device_name get_device_properties get_device_capability
    reset_peak_memory_stats reset_max_memory_allocated reset_accumulated_memory_stats
    mem_get_info ipc_collect CUDAGraph graph init get_rng_state set_per_process_memory_fraction
    memory_summary nvtx.range_push nvtx.range_pop nvtx.range nvtx.mark""".split()
)
# `torch.cuda.set_device` raises for every device it can be given, the CPU's included: code
# that calls it whenever it runs needs CUDA (`torch.cuda.set_device(args.gpu)`), unless it sets
# a device string the same file chose (`device = f"cuda:{rank}"` then `set_device(device)`):
# that call goes with the choice, and a fix of the choice is a fix of both.
SET_DEVICE = "torch.cuda.set_device"
# `DistributedDataParallel(model, device_ids=[...])` raises for a module on the CPU (device
# ids work for GPU modules only; a CPU module takes `device_ids=None`): the wrap needs CUDA.
DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                  "torch.nn.parallel.distributed.DistributedDataParallel"})
# Collectives of `torch.distributed`: they raise outside a process group, so code that calls
# one whenever it runs runs only inside a group (an NCCL one, in a file that opens no other).
_COLLECTIVES = frozenset(f"torch.distributed.{name}" for name in """all_gather all_gather_into_tensor
    all_gather_object all_reduce all_to_all all_to_all_single barrier broadcast broadcast_object_list
    gather gather_object reduce reduce_scatter reduce_scatter_tensor scatter scatter_object_list""".split())
# Libraries with no CPU back end: importing one means the code drives an NVIDIA GPU.
CUDA_LIBRARIES = frozenset({"tensorrt", "pycuda", "cupy", "torch_tensorrt", "torch2trt",
                            # CUDA kernels published as packages: no CPU implementation
                            "knn_cuda", "pointnet2_ops", "torch_int", "diff_gaussian_rasterization",
                            "simple_knn", "tinycudann", "flash_attn", "mamba_ssm", "causal_conv1d",
                            "diff_surfel_rasterization", "gsplat", "nvdiffrast", "fused_ssim", "lietorch_extras",
                            # FlowNet2's kernels, which optical-flow projects build and import
                            "correlation_package", "correlation_cuda", "resample2d_package",
                            "channelnorm_package"})
# With the libraries used for their CUDA kernels: a module that must import one needs CUDA.
# NVIDIA DALI feeds batches decoded on the GPU (`device_id=0`, the "mixed" decoder).
GPU_LIBRARIES = CUDA_LIBRARIES | {"apex", "bitsandbytes", "triton", "nvidia.dali"}
# `to_cuda(batch)`, `move_to_gpu(x)`: a mover, which a device argument would make portable.
_MOVING_WORDS = frozenset({"to", "move", "moved", "send"})


def imported_library(statement: cst.CSTNode, libraries: frozenset[str]) -> str | None:
    """The first of ``libraries`` an (absolute) ``import``/``from ... import`` statement
    imports, by its top-level name; None for any other statement."""
    if isinstance(statement, cst.Import):
        names = [dotted_name(a.name) or "" for a in statement.names]
    elif isinstance(statement, cst.ImportFrom) and statement.module is not None and not statement.relative:
        names = [dotted_name(statement.module) or ""]
    else:
        return None
    return next((found for found in (library_of(n, libraries) for n in names) if found), None)


def library_of(module: str, libraries: frozenset[str]) -> str | None:
    """The one of ``libraries`` that ``module`` is or is part of (``nvidia.dali.ops`` of
    ``nvidia.dali``), or None."""
    parts = module.split(".")
    return parts[0] if parts[0] in libraries else ".".join(parts[:2]) if ".".join(parts[:2]) in libraries else None


# Shell calls whose output the code reads back: `os.popen(...).read()`, `check_output`, or
# `os.system("... > tmp")` and then the file.
_SHELL_READERS = frozenset({"os.popen", "subprocess.check_output", "subprocess.getoutput"})


def _reads_nvidia_smi(call: cst.Call, qualified: str) -> bool:
    """A GPU picked from ``nvidia-smi``'s report (``os.system('nvidia-smi -q -d Memory | grep
    Free > tmp')``, then an argmax over the file's lines): without the NVIDIA driver the
    report is empty or the call raises, and so does what parses it. A plain
    ``os.system("nvidia-smi")`` that only prints is no such pick."""
    if qualified not in _SHELL_READERS and qualified != "os.system" or not call.args:
        return False
    command = call.args[0].value
    if isinstance(command, (cst.List, cst.Tuple)) and command.elements:
        command = command.elements[0].value
    text = command.evaluated_value if isinstance(command, cst.SimpleString) else None
    return isinstance(text, str) and "nvidia-smi" in text and (qualified != "os.system" or ">" in text)


def _imports_cuda_library(statement: cst.BaseSmallStatement) -> bool:
    return imported_library(statement, CUDA_LIBRARIES) is not None


def _runs(node: cst.CSTNode, found: list[cst.Call]) -> None:
    """The calls of an expression that run whenever it is evaluated: not those in a lambda,
    in a branch of a conditional expression, in the right operand of ``and``/``or``, or in
    a comprehension's element."""

    def enter(child: cst.CSTNode) -> bool:
        if isinstance(child, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(child, cst.IfExp):
            _runs(child.test, found)
            return False
        if isinstance(child, cst.BooleanOperation):
            _runs(child.left, found)
            return False
        if isinstance(child, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            _runs(child.for_in.iter, found)
            return False
        if isinstance(child, cst.Call):
            found.append(child)
        return True

    tree.walk(node, enter)


def _unconditional_calls(statement: cst.CSTNode) -> list[cst.Call]:
    """The calls a statement makes whenever it runs (for compound statements: their test,
    iterable or context managers, and the bodies of ``with`` and ``try`` blocks and of loops:
    a script's loop over its data or epochs runs, and a call in it that needs CUDA makes the
    run need it)."""
    found: list[cst.Call] = []
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            _runs(small, found)
    elif isinstance(statement, cst.If):
        _runs(statement.test, found)
        if statement.orelse is None and _unless_initialized(statement.test):
            # `if not dist.is_initialized(): dist.init_process_group(...)`: after it, a group
            # exists, and the one it opens is the only one this code can count on
            found += [c for c in _suite_calls(statement.body)
                      if (dotted_name(c.func) or "").rsplit(".", 1)[-1] == "init_process_group"]
    elif isinstance(statement, cst.While):
        _runs(statement.test, found)
        found += _suite_calls(statement.body)
    elif isinstance(statement, cst.For):
        _runs(statement.iter, found)
        found += _suite_calls(statement.body)
    elif isinstance(statement, cst.With):
        for item in statement.items:
            _runs(item.item, found)
        found += _suite_calls(statement.body)
    elif isinstance(statement, cst.Try):
        found += _suite_calls(statement.body)
    return found


def _unless_initialized(test: cst.BaseExpression) -> bool:
    """``not dist.is_initialized()``."""
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) \
        and isinstance(test.expression, cst.Call) and not test.expression.args \
        and (dotted_name(test.expression.func) or "").rsplit(".", 1)[-1] == "is_initialized"


def _suite_calls(suite: cst.BaseSuite) -> list[cst.Call]:
    if isinstance(suite, cst.SimpleStatementSuite):
        found: list[cst.Call] = []
        for small in suite.body:
            _runs(small, found)
        return found
    return [c for inner in suite.body for c in _unconditional_calls(inner)]


class Requirements:
    """What one file's code requires of the machine (see the module docstring)."""

    def __init__(self, module: cst.Module, qualify: Qualifier,
                 imported: frozenset[str] | None = None, mentioned_elsewhere=None,
                 project_nccl: bool = False, project_needs_cuda=None) -> None:
        """``imported``: the names of this file other modules import (None: unknown);
        ``mentioned_elsewhere(name)``: whether another module mentions attribute ``name``
        (None: unknown); ``project_nccl``: the project opens process groups with NCCL only
        (``ProjectIndex.nccl_groups_only``); ``project_needs_cuda(name)``: every project
        function or method of that name needs CUDA (``ProjectIndex.needs_cuda_def``)."""
        self.project_needs_cuda = project_needs_cuda
        self.qualify = qualify
        self.project_nccl = project_nccl
        self.imported = imported
        self.mentioned_elsewhere = mentioned_elsewhere
        self.functions: dict[str, cst.FunctionDef] = {}  # module-level functions
        self.methods: dict[int, dict[str, cst.FunctionDef]] = {}  # class -> its methods
        self.class_of: dict[int, cst.ClassDef] = {}  # method -> its class
        self.uses: dict[int, list[tuple[cst.CSTNode, ...]]] = {}  # closed function -> use paths
        self._needs: dict[int | tuple[str, int], bool] = {}
        self._only: dict[int, bool] = {}
        self._needing: dict[tuple[int, int], list[int]] = {}
        self._inits: list[cst.Call] = []  # `init_process_group(...)` calls of the file
        self._cuda_strings: set[str] = set()  # names the file binds to a CUDA device string
        self._parents: dict[int, cst.CSTNode] = {}
        self._nccl: bool | None = None
        self._answers: dict[int, bool] = {}
        self._collect(module)

    # -- one pass over the file ----------------------------------------------------------

    def _collect(self, module: cst.Module) -> None:
        for statement in module.body:
            if isinstance(statement, cst.FunctionDef):
                self.functions[statement.name.value] = statement
            elif isinstance(statement, cst.ClassDef):
                methods = self.methods.setdefault(id(statement), {})
                for inner in statement.body.body:
                    if isinstance(inner, cst.FunctionDef):
                        methods[inner.name.value] = inner
                        self.class_of[id(inner)] = statement
        # The uses of every function no other module calls, each with its path from the module (walked with
        # parent links: deep trees must not exhaust Python's recursion, nor memory).
        parents: dict[int, cst.CSTNode] = {}
        found: list[tuple[cst.FunctionDef, cst.CSTNode]] = []
        mentions: dict[str, int] = {}  # attribute name -> its mentions in the file
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Attribute):
                mentions[node.attr.value] = mentions.get(node.attr.value, 0) + 1
            target = self._closed_target(node, parents)
            if target is not None:
                found.append((target, node))
            if isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] == "init_process_group":
                self._inits.append(node)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                    and isinstance(node.value, (cst.SimpleString, cst.FormattedString)) and "cuda" in code_of(node.value):
                self._cuda_strings.add(node.targets[0].target.value)
            own_name = node.name if isinstance(node, (cst.FunctionDef, cst.ClassDef)) else None
            for child in tree.children(node):
                if child is not own_name:
                    parents[id(child)] = node
                    stack.append(child)
        self._parents = parents
        through_self: dict[str, int] = {}  # public methods: their `self.<name>` uses
        for target, node in found:
            if isinstance(node, cst.Attribute) and not _private(node.attr.value):
                through_self[node.attr.value] = through_self.get(node.attr.value, 0) + 1
        found = [
            (target, node) for target, node in found
            if not (isinstance(node, cst.Attribute) and not _private(node.attr.value))
            or (through_self[node.attr.value] == mentions[node.attr.value]
                and self.mentioned_elsewhere is not None
                and self.mentioned_elsewhere(node.attr.value) is False)
        ]
        for target, node in found:
            path = [node]
            while id(path[-1]) in parents:
                path.append(parents[id(path[-1])])
            self.uses.setdefault(id(target), []).append(tuple(reversed(path)))

    def _closed_target(self, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.FunctionDef | None:
        """The function of the file no other module may call that ``node`` names, if any: a
        module-level function by its name, a method as ``self.<name>`` (a public one is
        kept by ``_collect`` only when nothing else can reach it)."""
        if isinstance(node, cst.Name):
            parent = parents.get(id(node))
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                return None
            found = self.functions.get(node.value)
            return found if found is not None and self._closed(node.value) else None
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and (
            _private(node.attr.value) or (node.value.value == "self" and not node.attr.value.startswith("__"))
        ):
            cls = parents.get(id(node))
            while cls is not None and not isinstance(cls, cst.ClassDef):
                cls = parents.get(id(cls))
            return self.methods.get(id(cls), {}).get(node.attr.value) if cls is not None else None
        return None

    def _closed(self, name: str) -> bool:
        """No other module calls the module-level function ``name``."""
        if _private(name):
            return True
        return self.imported is not None and "*" not in self.imported and name not in self.imported

    # -- questions -----------------------------------------------------------------------

    def only_on_accelerator(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """The innermost node of ``ancestors`` runs only where CUDA is: a block around it
        (up to its function, and the module's top level) needs CUDA by other statements,
        or its function is a private one used only where an accelerator is."""
        on_path = {id(n) for n in ancestors}
        cls = next((n for n in reversed(ancestors) if isinstance(n, cst.ClassDef)), None)
        for index in range(len(ancestors) - 1, 0, -1):
            node = ancestors[index]
            if isinstance(node, cst.Lambda):
                break
            if isinstance(node, cst.FunctionDef):
                if self._used_only_on_accelerator(node) or (self._nccl_only() and self._needs_group(node)):
                    return True
                break
            if isinstance(node, cst.IndentedBlock) and (self._block_needs_cuda(node, on_path, cls) or (
                    self._nccl_only() and self._suite_needs_group(node))):
                return True
            inside = ancestors[index + 1] if index + 1 < len(ancestors) else None
            if isinstance(node, cst.With) and inside is node.body and self._entering_needs_cuda(node, cls):
                return True  # `with cuda_timer():` runs before its body
        if self._nccl_only() and self._in_group(ancestors):
            return True
        return self._block_needs_cuda(ancestors[0], on_path, None)

    # -- code that runs only in a process group, in a file whose groups are NCCL ---------

    def _nccl_only(self) -> bool:
        """The file opens process groups, and every one with NCCL; or it opens none, in a
        project that opens them with NCCL only."""
        if self._nccl is None:
            if self._inits:
                self._nccl = all(self._opens_nccl(c) for c in self._inits)
            else:
                self._nccl = self.project_nccl
        return self._nccl

    def _opens_nccl(self, call: cst.Call) -> bool:
        """``backend="nccl"``, or a backend name (``args.dist_backend``) that an earlier
        statement of the same block sets to ``"nccl"``, with nothing else setting it there."""
        if _nccl_backend(call):
            return True
        backend = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "backend"), None)
        if not isinstance(backend, (cst.Name, cst.Attribute)):
            return False
        statement, block = call, self._parents.get(id(call))
        while block is not None and not isinstance(block, (cst.IndentedBlock, cst.Module)):
            statement, block = block, self._parents.get(id(block))
        if block is None:
            return False
        wanted, answer = code_of(backend), False
        for earlier in block.body:
            if earlier is statement:
                return answer
            assigned = [t for t in _assigned(earlier) if code_of(t) == wanted]
            if assigned:
                small = earlier.body[0] if isinstance(earlier, cst.SimpleStatementLine) else None
                answer = (
                    isinstance(small, cst.Assign) and len(earlier.body) == 1 and len(small.targets) == 1
                    and isinstance(small.value, cst.SimpleString) and small.value.evaluated_value == "nccl"
                )
        return False

    def _in_group(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """The innermost node runs only inside a process group: under ``if <group>:``, or
        after ``if <no group>: return`` in a block around it, within its function."""
        function = next((n for n in reversed(ancestors) if isinstance(n, (cst.FunctionDef, cst.Lambda))), None)
        if not isinstance(function, cst.FunctionDef):
            return False
        for index in range(len(ancestors) - 2, 0, -1):
            node, inner = ancestors[index], ancestors[index + 1]
            if node is function:
                return False
            if isinstance(node, cst.If) and inner is node.body and self._group(node.test, function):
                return True
            if isinstance(node, cst.IndentedBlock):
                for earlier in node.body:
                    if earlier is inner:
                        break
                    if isinstance(earlier, cst.If) and earlier.orelse is None and _only_returns(
                        earlier.body
                    ) and self._no_group(earlier.test, function):
                        return True
        return False

    def _group(self, test: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """``test`` is true only where a process group exists."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._no_group(test.expression, function)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._group(test.left, function) or self._group(test.right, function)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            return self._world_size(test.left, function) and _compares(target, {
                cst.GreaterThan: 1, cst.NotEqual: 1, cst.GreaterThanEqual: 2})
        if isinstance(test, cst.Call) and not test.args:
            if self.qualify(test.func) == "torch.distributed.is_initialized":
                return True
            helper = self.functions.get(test.func.value) if isinstance(test.func, cst.Name) else None
            return helper is not None and self._answers_group(helper)
        return False

    def _no_group(self, test: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """``test`` is true wherever no process group exists."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._group(test.expression, function)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            return self._no_group(test.left, function) or self._no_group(test.right, function)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            return self._world_size(test.left, function) and _compares(target, {
                cst.Equal: 1, cst.LessThan: 2, cst.LessThanEqual: 1})
        return False

    def _answers_group(self, helper: cst.FunctionDef) -> bool:
        """A helper of the file that returns something true only inside a process group:
        each return gives False/None/0 or a group test, or comes after an early
        ``if <no group>: return False`` at the top of its body."""
        key = id(helper)
        if key not in self._answers:
            self._answers[key] = False  # recursion answers nothing
            guarded, answer = False, True
            for statement in helper.body.body:
                for value in _returned(statement):
                    if not (guarded or _falsy(value) or self._group(value, helper)):
                        answer = False
                if isinstance(statement, cst.If) and statement.orelse is None and _only_returns(
                    statement.body
                ) and self._no_group(statement.test, helper):
                    guarded = True
            self._answers[key] = answer
        return self._answers[key]

    def _world_size(self, expr: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """``get_world_size()`` of the file (or a name bound once to it) that is 1 outside a
        process group: its first return is ``if <no group>: return 1``, possibly after
        ``if not dist.is_available(): return 1``."""
        if isinstance(expr, cst.Name):
            values = assignments(function, expr.value)
            return len(values) == 1 and values[0] is not None and self._world_size(values[0], function)
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args):
            return False
        helper = self.functions.get(expr.func.value)
        if helper is None:
            return False
        for statement in helper.body.body:
            returned = _returned(statement)
            if not returned:
                continue
            if not (
                isinstance(statement, cst.If) and statement.orelse is None and _only_returns(statement.body)
                and isinstance(returned[0], cst.Integer) and returned[0].value == "1"
            ):
                return False
            if self._no_group(statement.test, helper):
                return True
            test = statement.test
            if not (
                isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
                and isinstance(test.expression, cst.Call)
                and self.qualify(test.expression.func) == "torch.distributed.is_available"
            ):
                return False  # 1 under another test: not known to cover every run without a group
        return False

    def _block_needs_cuda(self, block: cst.CSTNode, skip: set[int], cls: cst.ClassDef | None) -> bool:
        # The block's first two statements that need CUDA, found once per block: the one on
        # the question's path (``skip``, at most one statement of a block) does not count.
        # Reading the whole module again for every question was quadratic.
        key = (id(block), id(cls))
        needing = self._needing.get(key)
        if needing is None:
            body = block.body if isinstance(block, (cst.Module, cst.IndentedBlock)) else ()
            found = (id(s) for s in body if self._statement_needs_cuda(s, cls))
            needing = self._needing[key] = list(itertools.islice(found, 2))
        return any(i not in skip for i in needing)

    def _entering_needs_cuda(self, statement: cst.With, cls: cst.ClassDef | None) -> bool:
        found: list[cst.Call] = []
        for item in statement.items:
            _runs(item.item, found)
        return any(self._call_needs_cuda(c, cls) for c in found)

    def _statement_needs_cuda(self, statement: cst.CSTNode, cls: cst.ClassDef | None) -> bool:
        if isinstance(statement, cst.SimpleStatementLine) and any(
            _imports_cuda_library(s) for s in statement.body
        ):
            return True
        if stops_without_accelerator(statement, self.qualify):
            return True
        return any(self._call_needs_cuda(c, cls) for c in _unconditional_calls(statement))

    def needing_statement(self, function: cst.FunctionDef, cls: cst.ClassDef | None) -> cst.CSTNode | None:
        """The first statement of ``function``'s own body that needs CUDA whenever it runs."""
        body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
        return next((s for s in body if self._statement_needs_cuda(s, cls)), None)

    def _call_needs_cuda(self, call: cst.Call, cls: cst.ClassDef | None) -> bool:
        qualified = self.qualify(call.func) or ""
        if qualified in NEEDS_CUDA:
            return True
        if qualified == SET_DEVICE:
            chosen = call.args[0].value if len(call.args) == 1 else None
            return not (isinstance(chosen, cst.Name) and chosen.value in self._cuda_strings)
        if (qualified or dotted_name(call.func) or "").rsplit(".", 1)[-1] == "init_process_group":
            return _nccl_backend(call)
        if qualified in DDP:
            return _device_ids_given(call)
        if _reads_nvidia_smi(call, qualified):
            return True
        func = call.func
        callee = None
        if isinstance(func, cst.Name):
            callee = self.functions.get(func.value)
        elif isinstance(func, cst.Attribute) and dotted_name(func.value) in ("self", "cls") and cls is not None:
            callee = self.methods.get(id(cls), {}).get(func.attr.value)
        if callee is None:
            # another module's: `waveglow.infer(mel)` where every `infer` builds CUDA tensors
            name = func.attr.value if isinstance(func, cst.Attribute) else qualified.rsplit(".", 1)[-1]
            return bool(name) and self.project_needs_cuda is not None and self.project_needs_cuda(name)
        said = conditions.words(callee.name.value)
        if said & ACCELERATOR_NAME_WORDS and not said & _MOVING_WORDS:
            return True  # `cuda_timer()`: code the guards count as chosen for CUDA
        return self._function_needs_cuda(callee)

    def _needs_group(self, function: cst.FunctionDef) -> bool:
        """A statement of the function calls, whenever it runs, a collective or a function of
        the file that does (``_distributed_value(x.cuda())`` of a helper that all-gathers):
        the function completes only inside a process group, the statement on a question's
        path included (the collective is not what a fix of that line changes)."""
        key = ("group", id(function))
        if key not in self._needs:
            self._needs[key] = False  # recursion needs nothing more
            self._needs[key] = self._suite_needs_group(function.body)
        return self._needs[key]

    def _suite_needs_group(self, suite: cst.BaseSuite) -> bool:
        """A statement of the suite needs a group (``_statement_needs_group``) and none before
        it may leave the suite (``if world_size == 1: return [data]`` completes without one)."""
        for statement in suite.body if isinstance(suite, cst.IndentedBlock) else ():
            if self._statement_needs_group(statement):
                return True
            if tree.collect(statement, (cst.Return, cst.Break, cst.Continue)):
                return False
        return False

    def _statement_needs_group(self, statement: cst.CSTNode) -> bool:
        """The statement calls, whenever it runs, a collective or a function of the file that
        does (``_needs_group``). Not a method: a trainer's ``reduce_tensor`` helper is called
        under ``if args.distributed:``, and its class runs without a group."""
        return any(self.qualify(c.func) in _COLLECTIVES or (
            isinstance(c.func, cst.Name) and c.func.value in self.functions
            and self._needs_group(self.functions[c.func.value])) for c in _unconditional_calls(statement))

    def _function_needs_cuda(self, function: cst.FunctionDef) -> bool:
        key = id(function)
        if key not in self._needs:
            self._needs[key] = False  # recursion needs nothing more
            cls = self.class_of.get(key)
            self._needs[key] = self._block_needs_cuda(function.body, set(), cls)
        return self._needs[key]

    def _used_only_on_accelerator(self, function: cst.FunctionDef) -> bool:
        key = id(function)
        if key not in self._only:
            self._only[key] = False  # a recursive use is no evidence
            uses = self.uses.get(key, [])
            self._only[key] = bool(uses) and all(
                is_guarded(path, self.qualify) or self.only_on_accelerator(path) for path in uses
            )
        return self._only[key]


def of_file(ctx, module: cst.Module) -> Requirements:
    """The requirements of the file ``ctx`` checks, built once for all the rules that ask
    (TDL001 and TDL002), with what the project index says other modules import from it."""
    found = ctx.shared.get("requirements")
    if found is None:
        index = ctx.index
        known = index is not None and ctx.path != "-"
        imported = index.imported_from(ctx.path) if known else None
        elsewhere = (lambda name: index.mentioned_elsewhere(name, ctx.path)) if known else None
        nccl = known and index.nccl_groups_only(ctx.path)
        found = ctx.shared["requirements"] = Requirements(
            module, ctx.imports.qualified_name, imported, elsewhere, nccl,
            index.needs_cuda_def if index is not None else None)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _nccl_backend(call: cst.Call) -> bool:
    """``init_process_group(backend="nccl")`` (or ``"nccl"`` first, or ``dist.Backend.NCCL``):
    NCCL runs only on NVIDIA GPUs."""
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "backend":
            value = arg.value
            if isinstance(value, cst.Attribute):  # `dist.Backend.NCCL`
                return (dotted_name(value) or "").endswith("Backend.NCCL")
            return isinstance(value, cst.SimpleString) and str(value.evaluated_value).lower() == "nccl"
    return False


def _only_returns(body: cst.BaseSuite) -> bool:
    """The body of ``if ...: return [value]`` and nothing else."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    return len(statements) == 1 and isinstance(statements[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and (
        len(statements[0].body) == 1 and isinstance(statements[0].body[0], cst.Return))


def _returned(statement: cst.CSTNode) -> list[cst.BaseExpression | None]:
    """The values of the ``return`` statements in ``statement`` (not in nested functions)."""
    found: list[cst.BaseExpression | None] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(node, cst.Return):
            found.append(node.value)
        return True

    tree.walk(statement, enter)
    return found


def _device_ids_given(call: cst.Call) -> bool:
    """``device_ids=`` (or the second positional argument) is given and is not ``None``."""
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value == "device_ids") or (arg.keyword is None and index == 1):
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return False


def _falsy(value: cst.BaseExpression | None) -> bool:
    return value is None or (isinstance(value, cst.Name) and value.value in ("False", "None")) or (
        isinstance(value, cst.Integer) and value.value == "0")


def _compares(target: cst.ComparisonTarget, wanted: dict[type, int]) -> bool:
    """``<op> <int>`` with the integer ``wanted`` gives for that operator."""
    number = wanted.get(type(target.operator))
    return number is not None and isinstance(target.comparator, cst.Integer) and target.comparator.value == str(number)


def _assigned(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets a statement assigns (at any depth, not in nested functions)."""
    found: list[cst.BaseExpression] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(node, cst.Assign):
            found.extend(t.target for t in node.targets)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            found.append(node.target)
        return True

    tree.walk(statement, enter)
    return found


def assignments(function: cst.FunctionDef, name: str) -> list[cst.BaseExpression | None]:
    """What each binding of ``name`` in the function binds: the value of ``name = value``,
    None for any other kind of binding (a parameter, a loop, unpacking)."""
    found: list[cst.BaseExpression | None] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and node is not function:
            return False
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else (
            [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr))
            else [node.name] if isinstance(node, cst.Param) else [])
        for target in targets:
            if isinstance(target, cst.Name) and target.value == name and isinstance(node, cst.Assign):
                found.append(node.value)
            elif any(n.value == name for n in _names(target)):
                found.append(None)
        return True

    tree.walk(function, enter)
    return found


def _names(target: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []
    tree.walk(target, lambda n: found.append(n) if isinstance(n, cst.Name) else True)
    return found
