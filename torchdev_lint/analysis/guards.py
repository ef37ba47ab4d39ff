"""Is this code guarded, i.e. does it only run when an accelerator is wanted or present?

A hardcoded ``.cuda()`` under ``if torch.cuda.is_available():`` or ``if args.cuda:`` is
correct code. The test of a guard is recognised by what it mentions (CUDA/GPU availability
or a device choice), not by an exact API list: real code spells it ``use_cuda``,
``self.use_gpu``, ``args.gpu >= 0``, ``len(gpu_ids) > 0``, ``device.type == "cuda"``...
"""

from __future__ import annotations

import re
from typing import Sequence

import libcst as cst

_ACCELERATOR_WORDS = re.compile(
    r"(?i)cuda|gpu|mps|xpu|npu|hpu|tpu|accelerat|device|is_available|nccl"
)
_EMPTY = cst.Module(body=[])


def code_of(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def mentions_accelerator(expr: cst.CSTNode) -> bool:
    return bool(_ACCELERATOR_WORDS.search(code_of(expr)))


def _is_exit(statement: cst.BaseStatement) -> bool:
    """``return``, ``raise``, ``sys.exit(...)``, ``exit()``, ``quit()``, ``continue``."""
    if isinstance(statement, cst.SimpleStatementLine) and statement.body:
        last = statement.body[-1]
        if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if isinstance(last, cst.Expr) and isinstance(last.value, cst.Call):
            func = code_of(last.value.func)
            return func in ("sys.exit", "exit", "quit", "os._exit", "pytest.skip", "self.skipTest")
    return False


def _exits_early(statement: cst.BaseStatement) -> bool:
    """``if not torch.cuda.is_available(): return`` or ``assert torch.cuda.is_available()``."""
    if isinstance(statement, cst.If) and mentions_accelerator(statement.test):
        body = statement.body.body
        return bool(body) and _is_exit(body[-1])
    if isinstance(statement, cst.SimpleStatementLine):
        return any(
            isinstance(s, cst.Assert) and mentions_accelerator(s.test) for s in statement.body
        )
    return False


def _preceding_statements(block: cst.CSTNode, statement: cst.CSTNode):
    body = getattr(block, "body", None)
    if not isinstance(body, Sequence) or isinstance(body, (str, bytes)):
        return ()
    for index, child in enumerate(body):
        if child is statement:
            return body[:index]
    return ()


def is_guarded(ancestors: Sequence[cst.CSTNode]) -> bool:
    """True if the innermost node of ``ancestors`` runs only under an accelerator check."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
            if child is not parent.test and mentions_accelerator(parent.test):
                return True
        elif isinstance(parent, cst.BooleanOperation):
            other = parent.left if child is parent.right else parent.right
            if mentions_accelerator(other):
                return True
        elif isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            if any(mentions_accelerator(d.decorator) for d in parent.decorators):
                return True
        elif isinstance(parent, (cst.Module, cst.IndentedBlock)):
            if any(_exits_early(s) for s in _preceding_statements(parent, child)):
                return True
    return False


_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_ACCELERATOR_NAME_WORDS = frozenset({"cuda", "gpu", "gpus", "nccl", "cudnn", "triton"})


def named_for_accelerator(ancestors: Sequence[cst.CSTNode]) -> bool:
    """True inside a class or function whose name says it is for CUDA (``CUDAAccelerator``,
    ``def _launch_cuda_kernel``): its callers choose it, as under a guard. Test functions
    are not chosen by a caller but by the test runner, so ``test_*`` names do not count."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            name = node.name.value
            if name.lower().startswith("test"):
                continue
            words = {w.lower() for w in _NAME_WORDS.findall(name)}
            if words & _ACCELERATOR_NAME_WORDS:
                return True
    return False
