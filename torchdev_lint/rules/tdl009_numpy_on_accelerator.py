from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

_NO_GRAD = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
})
# Lightning runs these with gradients off.
_NO_GRAD_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
# Methods whose result never requires grad (integer or boolean results, or detached).
_GRADLESS_METHODS = frozenset(
    "detach argmax argmin argsort eq ne lt le gt ge long int bool numpy tolist item".split()
)


class NumpyOnAccelerator(Rule):
    """
    ## What it does
    Flags `.numpy()` on a tensor that is or may be on an accelerator, with no `.cpu()`
    before it: a model's output, the result of a move to a device (`.to(device)`,
    `.cuda()`), a batch element moved to the device (or handed to a Lightning
    `*_step`), what a call of unknown kind returns when fed such data
    (`model(x.to(device))` with `model` a parameter), or something computed from those
    (`torch.softmax(out, 1)`, `out.argmax(1)`, `_, pred = torch.max(out, 1)`,
    `outputs.logits`). A model's output counts in files that place anything on a device
    (or use Lightning/Accelerate, which do it for them).

    It does not flag tensors that are clearly on the CPU (built by a factory without
    `device=`, moved back with `.cpu()` or `.to("cpu")`, or a module's output on inputs
    that are all on the CPU), parameters of unknown origin
    (`def f(t): return t.numpy()`), `.cpu().numpy()`, or `.numpy(force=True)` (which
    copies to the CPU itself). A `.to(torch.float16)` that only changes the dtype does
    not move anything, and `device=x.device` puts a tensor wherever `x` is.

    ## Why is this bad?
    NumPy arrays live in host memory, so `Tensor.numpy()` only works on CPU tensors. On a
    GPU it raises `TypeError: can't convert cuda:0 device type tensor to numpy. Use
    Tensor.cpu() to copy the tensor to host memory first.` The code runs on a CPU-only
    laptop and in CPU CI, and fails the first time it runs where the model is on a GPU.

    ## Fix
    Inserts `.cpu()` before `.numpy()`. Where the tensor may require grad (it is computed
    from a model's output outside `torch.no_grad()`/`torch.inference_mode()`, and nothing
    in the chain detaches it), inserts `.detach().cpu()`, since `.numpy()` also refuses a
    tensor that requires grad: `out.numpy()` becomes `out.detach().cpu().numpy()`.

    Fix safety: safe. On a CPU tensor `.cpu()` returns the tensor itself and `.detach()` a
    view of the same memory, so the array is the same, memory shared as before; on an
    accelerator the line, which used to raise, now copies the values to the host.

    ## When not to use
    Never: `.cpu()` costs nothing on a CPU tensor. (`np.asarray(t)` and `np.array(t)` on
    an accelerator tensor fail the same way; this rule only looks at `.numpy()`.)
    """

    code = "TDL009"
    name = "numpy-on-accelerator"
    message = "`.numpy()` on a tensor that may be on an accelerator: call `.cpu()` first"
    fix_title = "Insert `.cpu()` before `.numpy()`"

    VALID = [
        Valid("import torch\nx = torch.randn(3)\ny = x.numpy()\n"),
        Valid("def to_array(t):\n    return t.numpy()\n"),
        Valid("import torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\nout = model(x)\n"
              "y = out.detach().cpu().numpy()\n"),
        Valid("import torch.nn as nn\nmodel = nn.Linear(2, 2)\ny = model(x).numpy(force=True)\n"),
        Valid("import torch\nx = torch.zeros(2).to(device)\ny = x.to('cpu').numpy()\n"),
        Valid("import torch\nx = torch.zeros(2).to(torch.float64)\ny = x.numpy()\n"),
        Valid("for images, labels in loader:\n    images = images.cpu()\n"
              "    arr = images.numpy()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\nout = model(x)\n"
            "print(out.numpy())\n",
            4, 7,
            "import torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\nout = model(x)\n"
            "print(out.detach().cpu().numpy())\n",
        ),
        Invalid(
            "for images, labels in train_loader:\n    images = images.to(device)\n"
            "    grid = images.numpy()  # for plotting\n",
            3, 12,
            "for images, labels in train_loader:\n    images = images.to(device)\n"
            "    grid = images.cpu().numpy()  # for plotting\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nnet = nn.Linear(4, 3)\n"
            "with torch.no_grad():\n    probs = torch.softmax(net(x.cuda()), dim=1)\n"
            "    _, pred = torch.max(probs, 1)\n    labels = pred.numpy()\n",
            7, 14,
            "import torch\nimport torch.nn as nn\nnet = nn.Linear(4, 3)\n"
            "with torch.no_grad():\n    probs = torch.softmax(net(x.cuda()), dim=1)\n"
            "    _, pred = torch.max(probs, 1)\n    labels = pred.cpu().numpy()\n",
        ),
        Invalid(
            "import torch\nx = torch.randn(3).cuda()\nprint(x.numpy())\n",
            3, 7,
            "import torch\nx = torch.randn(3).cuda()\nprint(x.cpu().numpy())\n",
        ),
        Invalid(
            "batch = {k: v.to(device) for k, v in batch.items()}\n"
            "ids = batch['input_ids'].numpy()\n",
            2, 7,
            "batch = {k: v.to(device) for k, v in batch.items()}\n"
            "ids = batch['input_ids'].cpu().numpy()\n",
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return ".numpy(" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # Names (and `self.x` attributes) whose value may require grad: computed from a
        # model's output with gradients on.
        self.may_require_grad: set[str] = set()

    def leave_Assign(self, node: cst.Assign) -> None:
        grad = not self._grad_disabled() and self._may_require_grad(node.value)
        for target in node.targets:
            self._mark(target.target, grad)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if not self._grad_disabled() and self._may_require_grad(node.value):
            self._mark(node.target, True)

    def _mark(self, target: cst.BaseExpression, grad: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._mark(element.value, grad)
            return
        if isinstance(target, cst.StarredElement):
            target = target.value
        name = dotted_name(target)
        if name is not None:
            (self.may_require_grad.add if grad else self.may_require_grad.discard)(name)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "numpy":
            return
        if any(a.keyword is not None and a.keyword.value == "force" for a in node.args):
            return
        if len([a for a in node.args if a.keyword is None]) > 0:
            return  # `numpy(True)`: force given positionally
        receiver = self.ctx.value_of(func.value)
        if not receiver.maybe_accelerator or receiver.kind not in (Kind.TENSOR, Kind.UNKNOWN):
            return
        detach = not self._grad_disabled() and self._may_require_grad(func.value)
        self.report(node, fix=Fix(Applicability.SAFE, [(node, lambda u: _insert_cpu(u, detach))]))

    # -- does the value require grad? --------------------------------------------------

    def _grad_disabled(self) -> bool:
        """Inside ``with torch.no_grad():``/``inference_mode()`` or a function decorated
        with them, or a Lightning evaluation step."""
        for node in reversed(self.ctx.ancestors):
            if isinstance(node, cst.With):
                if any(self._is_no_grad(item.item) for item in node.items):
                    return True
            elif isinstance(node, cst.FunctionDef):
                if node.name.value in _NO_GRAD_STEPS:
                    return True
                return any(self._is_no_grad(d.decorator) for d in node.decorators)
        return False

    def _is_no_grad(self, expr: cst.BaseExpression) -> bool:
        call = expr
        if isinstance(expr, cst.Call):
            expr = expr.func
        qualified = self.ctx.qualified_name(expr) or ""
        if qualified in _NO_GRAD:
            return True
        return (
            qualified in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled")
            and isinstance(call, cst.Call)
            and bool(call.args)
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == "False"
        )

    def _may_require_grad(self, expr: cst.BaseExpression) -> bool:
        """``expr`` computes from a model's output (or a name that does) without detaching."""
        found = False

        def enter(node: cst.CSTNode) -> bool:
            nonlocal found
            if found or isinstance(node, cst.Lambda):
                return False
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in _GRADLESS_METHODS:
                    return False  # `out.detach()`, `out.argmax(1)`: no grad below
                found = self.ctx.value_of(func).kind is Kind.MODULE
            elif isinstance(node, cst.Attribute):
                if node.attr.value == "data":
                    return False
                found = dotted_name(node) in self.may_require_grad
                if not found:
                    tree.walk(node.value, enter)  # not into `.attr`, which is no variable
                return False
            elif isinstance(node, cst.Name):
                found = node.value in self.may_require_grad
            return not found

        tree.walk(expr, enter)
        return found


def _insert_cpu(updated: cst.Call, detach: bool) -> cst.Call:
    """``x.numpy()`` -> ``x.cpu().numpy()`` (``x.detach().cpu().numpy()``)."""
    receiver = updated.func.value
    if detach:
        receiver = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("detach")))
    receiver = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("cpu")))
    return updated.with_changes(func=updated.func.with_changes(value=receiver))
