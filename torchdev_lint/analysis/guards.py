"""Is this code guarded, i.e. does it only run when an accelerator is wanted or present?

A hardcoded ``.cuda()`` under ``if torch.cuda.is_available():`` or ``if args.cuda:`` is
correct code; under ``if not torch.cuda.is_available():``, in the ``else:`` of
``if torch.cuda.is_available():`` or under ``if args.cpu:`` it is the bug itself. So a test
guards the branch that runs only when it says an accelerator is there
(``analysis/conditions.py`` reads it), and a decorator guards a function only when it
selects where the function runs (``skipIf(not torch.cuda.is_available())``,
``pytest.mark.skipif(...)``, ``RunIf(min_cuda_gpus=1)``, ``require_torch_gpu``), never
``autocast`` or ``inference_mode``, which run anywhere.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Sequence

import libcst as cst

from torchdev_lint.analysis import conditions, kinds, tree
from torchdev_lint.analysis.conditions import ACCELERATOR, CPU, Machine, Qualifier
from torchdev_lint.analysis.imports import dotted_name

# What users read in docs/rules/README.md (generated): exactly what counts as a guard.
GUARDS_DOC = """\
## Guards

TDL001 and TDL002 do not flag code that only runs where an accelerator is wanted or
present. The test of an `if`/`elif`/`while`, a conditional expression or the left operand of
`and`/`or` is read for what it *means*:

- an accelerator is there when the test holds: availability calls
  (`torch.cuda.is_available()`, `torch.backends.mps.is_available()`,
  `torch.accelerator.is_available()`, `torch.cuda.device_count()`, also when imported under
  another name), flags named for an accelerator (`use_cuda`, `args.gpu`, `self.use_gpu`,
  `opt["cuda"]`, `has_mps`), `x.is_cuda`, comparisons of a device with an accelerator
  (`device.type == "cuda"`, `"cuda" in str(device)`, `str(device).startswith("cuda")`,
  `device.type in ("cuda", "xpu")`, `device != "cpu"`, `torch_device == "rocm"`, `flag not in ("cpu", "mps")`), GPU
  counts and indices (`args.gpu is not None`, `args.gpu >= 0`, `len(gpu_ids) > 0`,
  `n_gpu > 1`, `args.ngpu == 1`), a collective backend that needs GPUs (`get_backend() == "nccl"`), Triton
  support (`is_triton_supported()`);
- the CPU is there (or asked for) when the test holds: flags named for the CPU or against an
  accelerator (`args.cpu`, `cfg.common.cpu`, `use_cpu`, `no_cuda`, `disable_gpu`),
  `device == "cpu"`, `n_gpu == 0`;
- a device may be compared with a constant of the module (`_CPU_DEVICE =
  torch.device("cpu")`, then `device == _CPU_DEVICE`): a name bound once, by a top-level
  assignment, and bound nowhere else in the file (no other assignment, `global` rebinding,
  local, parameter, loop variable, `del` or `from m import *`) is read as its value, and so
  is a device's string another project module binds that way and the file imports, by name
  or with `*` (`cpu_device = "cpu"` in `DataUtils/Common.py`, then `from DataUtils.Common
  import *` and `if config.device != cpu_device:`), when the file binds the name no other way;
- `not`, `and` and `or` combine these (`if not args.no_cuda and torch.cuda.is_available():`
  guards its body; `if not torch.cuda.is_available() or args.cpu:` guards its `else:`);
  anything else says nothing, and does not guard. Names match by whole words: `output`,
  `input` and `timestamps` are not `tpu`, `npu` or `mps`.

Code is guarded when it sits in the branch that runs only with an accelerator: the body of
a test that says one is there, the body of an option that wraps the model for several GPUs
(`if cfg.get("parallel"): model = nn.DataParallel(model).cuda()`), the `else:` of one that
says it is not
(`if not torch.cuda.is_available(): ... else: model.cuda()`), the code after an early exit
(`if not torch.cuda.is_available(): return` / `raise` / `sys.exit(...)` / `pytest.skip(...)`,
or `assert torch.cuda.is_available()`). A flag with a default value (`use_gpu=True`) still
guards: the user can turn it off.

Decorators guard a function only when they select where it runs:
`@unittest.skipIf(not torch.cuda.is_available(), ...)`, `@unittest.skipUnless(...)`,
`@pytest.mark.skipif(...)` (also with a string condition), `@RunIf(min_cuda_gpus=1)`-style
markers, `@require_torch_gpu`, `@skip_if_no_cuda`, `@pytest.mark.gpu`; the same marks on a
test case (`pytest.param(torch.device("cuda"), marks=RunIf(min_cuda_gpus=1))`) guard its
values. `@torch.autocast("cuda")`,
`@torch.cuda.amp.autocast()`, `@torch.inference_mode()` and the like run anywhere and guard
nothing.

Code inside a function or class named for CUDA or a GPU (`def cuda(self, ...)` overriding
`nn.Module.cuda`, `def to_gpu(batch)`, `class CUDAAccelerator`) is chosen by its caller and
counts as guarded, except in test functions (`test_*`), which the test runner calls.
"""

# Calls that end the run, and those that also end a test (a skip).
_STOPPING_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_EXIT_CALLS = _STOPPING_CALLS | {"pytest.skip", "self.skipTest", "unittest.skip"}
# Decorators that choose whether a function runs, by the words of their name.
_SELECTING_WORDS = frozenset(
    "require requires needs need only run runs runif if skip skipif skipunless".split()
)


@functools.cache
def _empty_module() -> cst.Module:
    return cst.Module(body=[])


def code_of(node: cst.CSTNode) -> str:
    plain = _plain_dotted(node)
    return plain if plain is not None else _empty_module().code_for_node(node)


def _plain_dotted(node: cst.CSTNode) -> str | None:
    """The code of a dotted name written without parentheses or spaces (``self.model.to``),
    as LibCST would generate it, without generating it (most of what ``code_of`` is asked);
    None for anything else."""
    parts = []
    while type(node) is cst.Attribute:
        dot, attr = node.dot, node.attr
        if node.lpar or node.rpar or attr.lpar or attr.rpar or not (
                type(dot.whitespace_before) is cst.SimpleWhitespace and dot.whitespace_before.value == ""
                and type(dot.whitespace_after) is cst.SimpleWhitespace and dot.whitespace_after.value == ""):
            return None
        parts.append(attr.value)
        node = node.value
    if type(node) is not cst.Name or node.lpar or node.rpar:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _runs_on(test: cst.BaseExpression, holds: bool, qualify: Qualifier | None,
             machine: Machine = ACCELERATOR) -> bool:
    """Does ``test`` being ``holds`` mean the code runs on ``machine``?"""
    return conditions.implies(test, holds, qualify) is machine


def is_exit(statement: cst.BaseStatement) -> bool:
    """``return``, ``raise``, ``continue``, ``break``, ``sys.exit(...)``, ``pytest.skip(...)``."""
    if isinstance(statement, cst.SimpleStatementLine) and statement.body:
        last = statement.body[-1]
        if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if isinstance(last, cst.Expr) and isinstance(last.value, cst.Call):
            return code_of(last.value.func) in _EXIT_CALLS
    return False


def stops_without_accelerator(statement: cst.CSTNode, qualify: Qualifier | None) -> bool:
    """Without an accelerator the statement ends the run: the branch it then takes ends in
    ``raise`` or ``sys.exit()`` (``if torch.cuda.is_available(): ... else: raise
    NotImplementedError``, ``if not torch.cuda.is_available(): sys.exit("needs a GPU")``).
    A ``return`` only skips work: the run goes on."""
    if not isinstance(statement, cst.If):
        return False
    if isinstance(statement.orelse, cst.Else) and _runs_on(statement.test, True, qualify):
        branch = statement.orelse.body
    elif _runs_on(statement.test, False, qualify):
        branch = statement.body
    else:
        return False
    last = branch.body[-1] if isinstance(branch, cst.IndentedBlock) and branch.body else None
    if not isinstance(last, cst.SimpleStatementLine) or not last.body:
        return False
    small = last.body[-1]
    return isinstance(small, cst.Raise) or (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                                            and code_of(small.value.func) in _STOPPING_CALLS)



def exits_early(statement: cst.BaseStatement, qualify: Qualifier | None,
                 machine: Machine = ACCELERATOR) -> bool:
    """The code after ``statement`` runs only on ``machine`` (an accelerator:
    ``if not torch.cuda.is_available(): return`` or ``assert torch.cuda.is_available()``)."""
    if isinstance(statement, cst.If) and statement.orelse is None:
        body = statement.body.body
        return bool(body) and is_exit(body[-1]) and _runs_on(statement.test, False, qualify, machine)
    if isinstance(statement, cst.SimpleStatementLine):
        return any(
            isinstance(s, cst.Assert) and _runs_on(s.test, True, qualify, machine)
            for s in statement.body
        )
    return False


def _user_device_choice(operation: cst.BooleanOperation) -> bool:
    """``args.device or "cuda"``: the right operand is only the default of a device the
    user chooses, like an argparse default."""
    name = dotted_name(operation.left) or ""
    return isinstance(operation.operator, cst.Or) and bool(
        conditions.words(name.rpartition(".")[2]) & {"device", "devices"}
    )


# Per block of the file being analysed: where each statement stands and where the first early
# exit is. FileContext starts one per file on the thread that checks it (and it goes with that
# thread); without one, each question reads the block again.
_blocks: ContextVar[dict | None] = ContextVar("torchdev_lint_blocks", default=None)


def remember_blocks() -> None:
    """Read each block's early exits once for the file about to be analysed: asked for every
    statement of a long module, reading all the statements before it was quadratic."""
    _blocks.set({})


def _after_early_exit(block: cst.Module | cst.IndentedBlock, statement: cst.CSTNode,
                      qualify: Qualifier | None, machine: Machine) -> bool:
    """``statement`` comes after a statement of ``block`` that exits early unless the code
    runs on ``machine``."""
    memo = _blocks.get()
    key = (id(block), machine)
    known = memo.get(key) if memo is not None else None
    if known is None:
        body = block.body
        first = next((i for i, s in enumerate(body) if exits_early(s, qualify, machine)), len(body))
        known = ({id(s): i for i, s in enumerate(body)}, first, block)  # the block keeps its id
        if memo is not None:
            memo[key] = known
    where, first, _ = known
    return where.get(id(statement), -1) > first


def _argument(call: cst.Call, keyword: str) -> cst.BaseExpression | None:
    """The first positional argument, or the one passed as ``keyword``."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


def _test_of(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """A condition, or the code of one given as a string (``skipif("not cuda")``)."""
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        return conditions.string_test(expr.evaluated_value)
    return expr


def selects_accelerator(expr: cst.BaseExpression, qualify: Qualifier | None = None) -> bool:
    """The decorator (or pytest mark) lets the test run only where an accelerator is:
    ``@unittest.skipIf(not torch.cuda.is_available(), ...)``, ``@unittest.skipUnless(...)``,
    ``@pytest.mark.skipif(...)``, ``@RunIf(min_cuda_gpus=1)``, ``@require_torch_gpu``,
    ``@skip_if_no_cuda``, ``@pytest.mark.gpu`` (a marker that CPU runs deselect)."""
    call = expr if isinstance(expr, cst.Call) else None
    name = dotted_name(call.func if call is not None else expr) or ""
    head, _, last = name.rpartition(".")
    lowered = last.lower()
    if call is not None and lowered in ("skipif", "skip_if"):
        test = _test_of(_argument(call, "condition"))
        return test is not None and _runs_on(test, False, qualify)
    if call is not None and lowered in ("skipunless", "skip_unless"):
        test = _test_of(_argument(call, "condition"))
        return test is not None and _runs_on(test, True, qualify)
    said = conditions.words(last)
    if said & conditions.ACCELERATOR_WORDS:
        if head.endswith("mark"):  # @pytest.mark.gpu
            return True
        skips = "skip" in said
        return bool(said & _SELECTING_WORDS) and (not skips or bool(said & {"no", "not"}))
    if call is not None and said & _SELECTING_WORDS:
        # @RunIf(min_cuda_gpus=1), @RunIf(mps=True)
        for arg in call.args:
            if arg.keyword is None or not conditions.words(arg.keyword.value) & conditions.ACCELERATOR_WORDS:
                continue
            value = arg.value
            if (isinstance(value, cst.Name) and value.value == "True") or (
                isinstance(value, cst.Integer) and int(value.evaluated_value) > 0
            ):
                return True
    return False


def _marked_for_accelerator(call: cst.Call, qualify: Qualifier | None) -> bool:
    """``pytest.param(torch.device("cuda"), marks=RunIf(min_cuda_gpus=1))``: a test case
    that runs only where its marks select an accelerator."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "param":
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "marks":
            value = arg.value
            marks = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
            return any(selects_accelerator(m, qualify) for m in marks)
    return False


def _branch_selects(parent: cst.CSTNode, child: cst.CSTNode, qualify: Qualifier | None,
                    machine: Machine) -> bool:
    """``child`` of ``parent`` runs only on ``machine``, by the tests of the control flow:
    an ``if``/ternary/``while`` branch, the right operand of ``and``/``or``, or a statement
    after an early exit."""
    if isinstance(parent, (cst.If, cst.IfExp)):
        return (child is parent.body and _runs_on(parent.test, True, qualify, machine)) or (
            child is parent.orelse and _runs_on(parent.test, False, qualify, machine)
        )
    if isinstance(parent, cst.While):
        return child is parent.body and _runs_on(parent.test, True, qualify, machine)
    if isinstance(parent, cst.BooleanOperation):
        # `use_gpu and model.cuda()`: the right operand runs when the left one is true
        # (for `and`) or false (for `or`).
        return child is parent.right and _runs_on(
            parent.left, isinstance(parent.operator, cst.And), qualify, machine
        )
    if isinstance(parent, (cst.Module, cst.IndentedBlock)):
        return _after_early_exit(parent, child, qualify, machine)
    return False


def runs_only_on_accelerator(parent: cst.CSTNode, child: cst.CSTNode, qualify: Qualifier | None = None) -> bool:
    """``child`` of ``parent`` runs only where an accelerator is, by a branch's test or an
    early exit before it (``_branch_selects``)."""
    return _branch_selects(parent, child, qualify, ACCELERATOR)


def _opts_into_gpus(parent: cst.CSTNode, child: cst.CSTNode, qualify: Qualifier | None) -> bool:
    """``child`` is the body of an ``if`` on an option that spreads the model over GPUs
    (``if cfg.get("parallel"): model = nn.DataParallel(model).cuda()``): the option asks
    for GPUs, whatever its name, unless its test says the CPU."""
    if not (isinstance(parent, cst.If) and child is parent.body and qualify is not None):
        return False
    if conditions.implies(parent.test, True, qualify) is CPU:
        return False
    return any(qualify(call.func) in kinds.GPU_WRAPPERS
               for statement in parent.body.body if isinstance(statement, cst.SimpleStatementLine)
               for call in tree.collect(statement, cst.Call))


def is_guarded(ancestors: Sequence[cst.CSTNode], qualify: Qualifier | None = None) -> bool:
    """True if the innermost node of ``ancestors`` runs only where an accelerator is wanted
    or present: in the branch of a test that says so or of an option that wraps the model
    for several GPUs, after an early exit that ensures it, under a decorator that selects
    it, or in a function or class named for an accelerator (``def cuda(self)``, ``def
    _to_gpu``), which its caller chooses to run."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if _branch_selects(parent, child, qualify, ACCELERATOR) or _opts_into_gpus(parent, child, qualify):
            return True
        if isinstance(parent, cst.BooleanOperation) and child is parent.right and _user_device_choice(parent):
            return True
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            if any(selects_accelerator(d.decorator, qualify) for d in parent.decorators):
                return True
        elif isinstance(parent, cst.Call) and _marked_for_accelerator(parent, qualify):
            return True
    return named_for_accelerator(ancestors)


def reads_only_guarded(module: cst.Module, name: str, qualify: Qualifier | None = None) -> bool:
    """Every read of the top-level ``name`` in ``module`` (there is one at least) is guarded
    (``is_guarded``): ``torch_gpu = torch.device("cuda")`` used only under ``if use_gpu:``
    places nothing on a machine without CUDA."""
    reads = 0
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and node.value == name:
            parent = parents.get(id(node))
            if not (isinstance(parent, (cst.AssignTarget, cst.Param))
                    or (isinstance(parent, cst.Attribute) and parent.attr is node)):
                path = [node]
                while id(path[-1]) in parents:
                    path.append(parents[id(path[-1])])
                if not is_guarded(path[::-1], qualify):
                    return False
                reads += 1
            continue
        for child in tree.children(node):
            parents[id(child)] = node
            stack.append(child)
    return reads > 0


def runs_on_cpu(ancestors: Sequence[cst.CSTNode], qualify: Qualifier | None = None) -> bool:
    """True if the innermost node of ``ancestors`` runs only where the device is the CPU:
    ``if device.type == "cpu": x.numpy()``, ``if not torch.cuda.is_available(): ...``,
    or after ``if use_cuda: return``."""
    return any(
        _branch_selects(parent, child, qualify, CPU)
        for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:]))
    )


ACCELERATOR_NAME_WORDS = frozenset({"cuda", "gpu", "gpus", "nccl", "cudnn", "triton"})


def named_for_accelerator(ancestors: Sequence[cst.CSTNode]) -> bool:
    """True inside a class or function whose name says it is for CUDA (``CUDAAccelerator``,
    ``def _launch_cuda_kernel``): its callers choose it, as under a guard. Test functions
    are not chosen by a caller but by the test runner, so ``test_*`` names do not count."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            name = node.name.value
            if name.lower().startswith("test"):
                continue
            if conditions.words(name) & ACCELERATOR_NAME_WORDS:
                return True
    return False
