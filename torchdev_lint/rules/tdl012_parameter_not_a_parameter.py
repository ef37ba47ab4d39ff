from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import moves
from torchdev_lint.analysis.guards import code_of, runs_on_cpu
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# torch samplers that take `device=` and `generator=`.
_SAMPLERS = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.randperm"})
# Expressions that need no parentheses as the receiver of a method call (names of LibCST
# classes: reading them at import would load LibCST, which a run served from the cache avoids).
_ATOMS = ("Name", "Attribute", "Call", "Subscript", "SimpleString", "Integer", "Float", "List",
          "Tuple", "Dict", "ListComp", "FormattedString")


class ParameterNotAParameter(Rule):
    """
    ## What it does
    Flags a move applied to a freshly built parameter, `nn.Parameter(t).cuda()`,
    `nn.Parameter(t).to(device)`, `nn.Parameter(t).half()` (also `.xpu()`, `.mps()`,
    `.bfloat16()`, `.double()`, `.to(torch.float16)`), and an `nn.Parameter` bound to a name
    or attribute that the same function then rebinds to its own move (`self.w =
    nn.Parameter(t)` followed by `self.w = self.w.cuda()`).

    It also flags a CPU random generator (`torch.Generator()` or
    `torch.Generator(device="cpu")`, also seeded with `.manual_seed(...)`) handed to a torch
    sampler that builds on another device: `torch.randn(..., device=device, generator=g)`,
    `torch.rand`, `torch.randint`, `torch.randperm(n, device=..., generator=g)`.

    It does not flag `nn.Parameter(t.cuda())` (the move inside), `.float()` or
    `.to(torch.float32)` (no copy of a float32 tensor), `.to(x)` with a name that does not say
    it is a device, a moved `.data` (`self.w.data = self.w.data.cuda()`), a move wrapped in
    a new `nn.Parameter(...)`, a generator built with an accelerator device
    (`torch.Generator(device=device)`), samplers on the CPU (no `device=`, `device="cpu"`,
    or code that runs only on the CPU), or a generator name bound to anything else anywhere
    in its scope.

    ## Why is this bad?
    `Tensor.cuda()`, `.to(device)` and `.half()` return the tensor itself when nothing
    changes (so the code works on a CPU machine) and a *copy* otherwise. The copy of an
    `nn.Parameter` is a plain tensor computed from it: not a Parameter, not a leaf. Kept as a
    module attribute it is not registered, so the optimizer never sees it (it is never
    trained, or `torch.optim` raises "can't optimize a non-leaf Tensor" when given it), it
    is not in `state_dict()`, and `model.to()` leaves it behind. Rebinding a registered
    parameter to the copy raises `TypeError: cannot assign 'torch.cuda.FloatTensor' as
    parameter 'w' (torch.nn.Parameter or None expected)` on a GPU only.

    `torchdev-lint trace --mode sim` confirms the copy left on the CPU by a module move where
    an operation meets it (a dtype copy such as `.half()`; a `.cuda()` copy is on the device
    already, and what it lacks, registration and training, raises nothing).

    A random generator lives on one device: `torch.randn(3, device="cuda", generator=g)`
    with a CPU `g` raises "Expected a 'cuda' device type for generator but found 'cpu'".

    ## Fix
    Moves the conversion inside the parameter: `nn.Parameter(t).cuda()` becomes
    `nn.Parameter(t.cuda())`, which is a registered leaf parameter on the same device and
    dtype as the copy was. No fix is offered for a rebinding or for a generator (which device
    the generator should have, and whether CPU sampling shares it, is the author's choice:
    `torch.Generator(device=device)`).

    Fix safety: safe when the call is the whole value of an assignment or return, because
    the values, device and dtype are those of the old copy; what changes is what the author
    meant: the module now registers the parameter, trains it and saves it. A checkpoint
    saved before the fix lacks the key, so `load_state_dict(..., strict=True)` of an old
    checkpoint reports it missing. Unsafe elsewhere (an argument of a call, part of an
    expression), where the callee may treat a Parameter differently from a tensor.

    ## At run time
    `torchdev-lint trace` confirms it when the plain copy stays behind on `model.to()` and
    meets the other device's tensors in an op; a copy that stayed behind but never mixed is
    not confirmed ([trace](../trace.md)).

    ## When not to use
    When the tensor is meant to be a frozen constant: then register it as a buffer instead;
    the finding still says the Parameter wrapper does nothing.
    """

    code = "TDL012"
    preview = True  # new: first-look precision not measured on enough findings yet
    name = "parameter-not-a-parameter"
    message = ("A move of an `nn.Parameter` returns a plain tensor: it is not registered, trained or moved "
               "with the model")
    fix_title = "Move the tensor inside the `nn.Parameter(...)`"

    VALID = [
        Valid("import torch.nn as nn\nclass PE(nn.Module):\n    def forward(self, x):\n"
              "        return x + nn.Parameter(self.pe, requires_grad=False).to(x.device)\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.w = nn.Parameter(torch.zeros(3).cuda())\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.w = nn.Parameter(torch.zeros(3)).float()\n"),
        Valid("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
              "    def __init__(self, device):\n        super().__init__()\n"
              "        self.w = nn.Parameter(torch.zeros(3))\n"
              "        self.w.data = self.w.data.to(device)\n"),
        Valid("import torch\ng = torch.Generator(device='cuda')\ng.manual_seed(0)\n"
              "x = torch.randn(3, device='cuda', generator=g)\n"),
        Valid("import torch\ng = torch.Generator().manual_seed(0)\n"
              "idx = torch.randperm(10, generator=g)\nx = torch.rand(2, device='cpu', generator=g)\n"),
        Valid("import torch\nimport torch.nn as nn\n"
              "w = nn.Parameter(nn.Parameter(torch.zeros(2)).to(x))\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Scale(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n"
            "        self.gamma = nn.Parameter(torch.ones(n)).cuda()\n\n"
            "    def forward(self, x):\n        return x * self.gamma\n",
            7, 22,
            "import torch\nimport torch.nn as nn\n\nclass Scale(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n"
            "        self.gamma = nn.Parameter(torch.ones(n).cuda())\n\n"
            "    def forward(self, x):\n        return x * self.gamma\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def __init__(self, dim, device):\n        super().__init__()\n"
            "        self.pos = nn.Parameter(torch.randn(1, dim) * 0.02, requires_grad=True).to(device)\n",
            6, 20,
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def __init__(self, dim, device):\n        super().__init__()\n"
            "        self.pos = nn.Parameter((torch.randn(1, dim) * 0.02).to(device), requires_grad=True)\n",
        ),
        Invalid(
            "import torch\ndef make(n):\n    return [torch.nn.Parameter(torch.zeros(n)).half()]\n",
            3, 13,
            "import torch\ndef make(n):\n    return [torch.nn.Parameter(torch.zeros(n).half())]\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.zeros(4))\n        self.w = self.w.cuda()\n",
            7, 18,
            None,
        ),
        Invalid(
            "import torch\ng = torch.Generator()\ng.manual_seed(0)\n"
            "noise = torch.randn(4, device='cuda', generator=g)\n",
            4, 9,
            None,
        ),
        Invalid(
            "import torch\ndef shuffle(n, device, seed):\n"
            "    gen = torch.Generator().manual_seed(seed)\n"
            "    return torch.randperm(n, device=device, generator=gen)\n",
            4, 12,
            None,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "Parameter(" in source or "Generator(" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # Per scope (by id): target code -> the nn.Parameter call last assigned to it.
        self.parameters: dict[int, dict[str, cst.Call]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and moves.is_parameter_call(self.ctx, func.value):
            self._moved_parameter(node)
        elif any(a.keyword is not None and a.keyword.value == "generator" for a in node.args):
            self._sampler(node)

    def _moved_parameter(self, node: cst.Call) -> None:
        method = moves.copying_move(node)
        if method is None:
            return
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        if isinstance(parent, cst.Arg) and moves.is_parameter_call(self.ctx, self.ctx.ancestors[-3]):
            return  # wrapped again: `nn.Parameter(nn.Parameter(t).cuda())`
        built = node.func.value
        if _frozen(built) and not isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)):
            return  # a constant used once, `x + nn.Parameter(pe, requires_grad=False).to(d)`: nothing to train or keep
        self.report(
            node,
            f"`.{method}()` of a new `nn.Parameter` returns a plain tensor copy: it is not "
            f"registered, not trained, and `model.to()` leaves it behind; move the tensor "
            f"inside the `nn.Parameter(...)`",
            fix=lambda: _inside_fix(node, parent),
            evidence=[(built, "the Parameter is built here"),
                      (node.func.attr, f"`.{method}()` copies it where the device or dtype changes")],
        )

    def _sampler(self, node: cst.Call) -> None:
        if self.ctx.qualified_name(node.func) not in _SAMPLERS:
            return
        device = moves.keyword_argument(node, "device")
        if device is None or moves.names_cpu(device.value):
            return
        if runs_on_cpu(self.ctx.ancestors, self.ctx.qualified_name):
            return
        generator = moves.keyword_argument(node, "generator").value
        built = self._cpu_generator(generator)
        if built is None:
            return
        self.report(
            node,
            f"CPU random generator `{code_of(generator)}` used to sample on "
            f"`{code_of(device.value)}`: on an accelerator this raises \"Expected a 'cuda' "
            "device type for generator\"; build it with `torch.Generator(device=...)`",
            evidence=[(built, "the generator is built on the CPU here"),
                      (device, "the sample is built on this device")],
        )

    def _cpu_generator(self, expr: cst.BaseExpression) -> cst.CSTNode | None:
        """Where ``expr`` (a call, or a name every binding of which is one) builds a CPU
        generator, or None."""
        if moves.is_cpu_generator(self.ctx, expr):
            return expr
        if not isinstance(expr, cst.Name):
            return None
        for scope in (self.ctx.function, self.ctx.ancestors[0]):
            if scope is None:
                continue
            sites = self.ctx.bindings(scope).get(expr.value)
            if not sites:
                continue
            if all(isinstance(s, cst.Assign) and len(s.targets) == 1
                   and moves.is_cpu_generator(self.ctx, s.value) for s in sites):
                return sites[0].value
            return None
        return None

    def _scope_key(self) -> int:
        return id(self.ctx.function or self.ctx.ancestors[0])

    def leave_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = code_of(node.targets[0].target)
        built = self.parameters.setdefault(self._scope_key(), {})
        value = node.value
        if moves.is_parameter_call(self.ctx, value):
            built[target] = value
            return
        earlier = built.pop(target, None)
        if (
            earlier is not None
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and code_of(value.func.value) == target
            and (method := moves.copying_move(value)) is not None
        ):
            self.report(
                value,
                f"`{target}` held an `nn.Parameter`; rebound to its `.{method}()` it holds a "
                "plain tensor copy (on a GPU, a module raises TypeError here): build the "
                "Parameter from the moved tensor instead",
                evidence=[(earlier, "the Parameter is built here"),
                          (value.func.attr, f"`.{method}()` copies it where the device or dtype changes")],
            )


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if type(expr).__name__ in _ATOMS or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _inside_fix(node: cst.Call, parent: cst.CSTNode | None) -> Fix | None:
    """``nn.Parameter(t, ...).cuda()`` -> ``nn.Parameter(t.cuda(), ...)``."""
    built = node.func.value
    index = next((i for i, a in enumerate(built.args)
                  if (a.keyword is None and not a.star) or (a.keyword is not None and a.keyword.value == "data")),
                 None)
    if index is None:
        return None
    whole = isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)) and parent.value is node

    def edit(updated: cst.Call) -> cst.CSTNode:
        inner = updated.func.value
        arg = inner.args[index]
        moved = cst.Call(func=cst.Attribute(value=_parenthesized(arg.value), attr=updated.func.attr),
                         args=updated.args)
        args = [*inner.args[:index], arg.with_changes(value=moved), *inner.args[index + 1:]]
        return inner.with_changes(args=args, lpar=updated.lpar, rpar=updated.rpar)

    return Fix(Applicability.SAFE if whole else Applicability.UNSAFE, [(node, edit)])


def _frozen(built: cst.CSTNode) -> bool:
    """``nn.Parameter(t, requires_grad=False)``: a parameter nobody means to train."""
    return isinstance(built, cst.Call) and any(
        a.keyword is not None and a.keyword.value == "requires_grad"
        and isinstance(a.value, cst.Name) and a.value.value == "False" for a in built.args)
