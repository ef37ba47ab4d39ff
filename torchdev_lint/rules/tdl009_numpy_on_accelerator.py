from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import decisions, receivers, tree
from torchdev_lint.analysis.guards import runs_on_cpu
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import NUMPY_CONVERTERS, Kind
from torchdev_lint.analysis.project_index import names_devices
from torchdev_lint.analysis.sites import NUMPY_CONVERSION
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

    The same goes for functions that convert a tensor argument to NumPy themselves:
    `np.array(t)`, `np.asarray(t)`, `np.isnan(t)`, `np.sum(t)` (and other NumPy functions
    taking an array first), `np.save(path, t)`, `plt.plot(t)`/`scatter`/`imshow`/`hist`,
    `cv2.*(…, t)` and `PIL.Image.fromarray(t)`, when `t` is certainly a tensor (see Fix
    safety) that may be on an accelerator: what a pipeline or the project's own model
    returns may be an image or an array.

    It does not flag tensors that are clearly on the CPU (built by a factory without
    `device=`, moved back with `.cpu()` or `.to("cpu")`, or a module's output on inputs
    that are all on the CPU), parameters of unknown origin
    (`def f(t): return t.numpy()`), `.cpu().numpy()`, or `.numpy(force=True)` (which
    copies to the CPU itself), nor `.numpy()` of an object of a class the file defines
    (`Bag().to(device).numpy()`), or of a value of unknown kind where the file defines its
    own `numpy()` method: those are the project's objects, not tensors. A `.to(torch.float16)` that only changes the dtype does
    not move anything, and `device=x.device` puts a tensor wherever `x` is. Nor code that
    runs only on the CPU by its control flow (`if device.type == "cpu": x.numpy()`, the
    `else` of `if torch.cuda.is_available()`, `if self.device == _CPU_DEVICE:` where the
    module's constant `_CPU_DEVICE = torch.device("cpu")` is bound nowhere else: see Guards
    in the rules' README).

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

    For the converting functions it inserts the same before the argument:
    `np.asarray(t)` becomes `np.asarray(t.cpu())`.

    Fix safety: safe when the receiver is certainly a tensor (built by a torch factory or
    op, a tensor method of one, the output of a `torch.nn` layer, or an annotated `Tensor`,
    along every assignment of the name): on a CPU tensor `.cpu()` returns the tensor itself
    and `.detach()` a view of the same memory, so the array is the same, memory shared as
    before; on an accelerator the line, which used to raise, now copies the values to the
    host. Unsafe otherwise (a batch element, the output of the project's own module, a
    parameter): an object with its own `numpy()` may have no `cpu()`.

    ## Confidence
    Certain when the analysis shows a run where the value is on an accelerator: a move or a
    factory in sight placed it (or what it is computed from: `model(x.to(device)).argmax(1)`,
    `torch.softmax(out, 1)`, `_, pred = torch.max(out, 1)`, `x = x.to(device)` of a
    parameter) on a device that is an accelerator on some machine or for some caller: the
    machine's pick (`"cuda" if torch.cuda.is_available() else "cpu"`), the user's
    (`args.device`, a `device` parameter), a GPU (`.cuda()`, `"cuda:0"`). The evidence names
    the move and that decision. Possible otherwise: a model's output in a file that names
    devices, a move to a device read from some object (`.to(model.device)`, which follows
    that object), a value a function of the module computes (its body decides), names bound
    more than one way. A device read from a config object built with `"cpu"`
    (`cfg = Config(dev=torch.device("cpu"))`, `device=cfg.dev`) places nothing. See
    [confidence](../confidence.md).

    ## When not to use
    Never: `.cpu()` costs nothing on a CPU tensor.
    """

    code = "TDL009"
    name = "numpy-on-accelerator"
    sites = frozenset({NUMPY_CONVERSION})
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
        # The project's own class with a `numpy()` method: not a tensor.
        Valid("class Bag:\n    def __init__(self):\n        self.items = [1]\n"
              "    def to(self, device):\n        return self\n"
              "    def numpy(self):\n        return list(self.items)\n"
              "bag = Bag().to(device)\nprint(bag.numpy())\n"),
        Valid("class Boxes:\n    def numpy(self):\n        return []\n"
              "def show(boxes, device):\n    print(boxes.to(device).numpy())\n"),
        # CPU tensors and values that are no tensors, given to NumPy or plotting.
        Valid("import numpy as np\nimport torch\nx = torch.randn(3)\nprint(np.asarray(x))\n"),
        Valid("import numpy as np\nimport torch\nx = torch.randn(3).cuda()\n"
              "print(np.asarray(x.cpu()), np.sum(x.shape))\n"),
        Valid("import matplotlib.pyplot as plt\nplt.plot(losses)\n"),
        Valid("import numpy as np\ndef f(out, device):\n    return np.array(out.to(device))\n"),
        Valid("import numpy\nfrom diffusers import DiffusionPipeline\n"
              "pipe = DiffusionPipeline.from_pretrained(m).to(device)\n"
              "image = pipe(prompt).images[0]\nprint(numpy.asarray(image))\n"),
        # A branch that runs only on the CPU (DINOv2's linear evaluation).
        Valid("import numpy as np\nimport torch\n"
              "def predict(estimator, samples, device):\n"
              "    samples = samples.to(device)\n"
              "    if device == torch.device('cpu'):\n"
              "        samples = samples.numpy()\n"
              "    return estimator.predict(samples)\n"),
        Valid("import torch\n"
              "def show(model, x, device):\n"
              "    out = model(x.to(device))\n"
              "    if device.type != 'cpu':\n"
              "        return None\n"
              "    return out.detach().numpy()\n"),
        Valid("import torch\n_CPU_DEVICE = torch.device('cpu')\n"
              "def predict(estimator, samples, device):\n"
              "    samples = samples.to(device)\n"
              "    if device == _CPU_DEVICE:\n"
              "        samples = samples.numpy()\n"
              "    return estimator.predict(samples)\n"),
        # The model and its input go where a config object built with the CPU says.
        Valid("import torch\n"
              "class Config:\n"
              "    def __init__(self, dev):\n"
              "        self.dev = dev\n"
              'cfg = Config(dev=torch.device("cpu"))\n'
              "net = torch.nn.Linear(4, 2).to(cfg.dev)\n"
              "z = torch.randn(3, 4, device=cfg.dev)\n"
              "print(net(z).detach().numpy())\n"),
    ]
    INVALID = [
        # A helper of the module computes the result: its own `torch.zeros` may hold it.
        Invalid(
            "import torch\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(4, 2).to(device)\n"
            "def to_mask(scores):\n"
            "    mask = torch.zeros(scores.shape)\n"
            "    mask[scores > 0] = 1\n"
            "    return mask\n"
            "def evaluate(x):\n"
            "    return to_mask(model(x.to(device))).numpy()\n",
            9, 12,
            "import torch\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(4, 2).to(device)\n"
            "def to_mask(scores):\n"
            "    mask = torch.zeros(scores.shape)\n"
            "    mask[scores > 0] = 1\n"
            "    return mask\n"
            "def evaluate(x):\n"
            "    return to_mask(model(x.to(device))).detach().cpu().numpy()\n",
            unsafe=True,
            possible=True,
        ),
        # A name bound twice is no constant: the test says nothing.
        Invalid(
            "import torch\nCPU = torch.device('cpu')\nCPU = torch.device('cuda')\n"
            "def f(x, device):\n    x = x.to(device)\n    if device == CPU:\n"
            "        return x.numpy()\n",
            7, 16,
            "import torch\nCPU = torch.device('cpu')\nCPU = torch.device('cuda')\n"
            "def f(x, device):\n    x = x.to(device)\n    if device == CPU:\n"
            "        return x.cpu().numpy()\n",
            unsafe=True,  # a parameter is not certainly a tensor
        ),
        # The branch that runs off the CPU still fails.
        Invalid(
            "import torch\ndef f(x, device):\n    x = x.to(device)\n    if device.type == 'cpu':\n"
            "        return x.numpy()\n    else:\n        return x.numpy()\n",
            7, 16,
            "import torch\ndef f(x, device):\n    x = x.to(device)\n    if device.type == 'cpu':\n"
            "        return x.numpy()\n    else:\n        return x.cpu().numpy()\n",
            unsafe=True,  # a parameter is not certainly a tensor
        ),
        Invalid(
            "import torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\nout = model(x)\n"
            "print(out.numpy())\n",
            4, 7,
            "import torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\nout = model(x)\n"
            "print(out.detach().cpu().numpy())\n",
            possible=True,  # `device` is out of sight: nothing shows it is ever an accelerator
        ),
        Invalid(
            "for images, labels in train_loader:\n    images = images.to(device)\n"
            "    grid = images.numpy()  # for plotting\n",
            3, 12,
            "for images, labels in train_loader:\n    images = images.to(device)\n"
            "    grid = images.cpu().numpy()  # for plotting\n",
            unsafe=True,  # a batch element is not certainly a tensor
            possible=True,
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
            unsafe=True,
            possible=True,
        ),
        Invalid(
            "import numpy as np\nimport torch\nx = torch.randn(3).to(device)\n"
            "print(np.asarray(x))\n",
            4, 18,
            "import numpy as np\nimport torch\nx = torch.randn(3).to(device)\n"
            "print(np.asarray(x.cpu()))\n",
            possible=True,
        ),
        Invalid(
            "import numpy as np\nimport torch\nx = torch.randn(3).cuda()\n"
            "bad = np.isnan(x + 1).any()\n",
            4, 16,
            "import numpy as np\nimport torch\nx = torch.randn(3).cuda()\n"
            "bad = np.isnan((x + 1).cpu()).any()\n",
        ),
        Invalid(
            "import matplotlib.pyplot as plt\nimport torch.nn as nn\n"
            "net = nn.Linear(4, 1).to(device)\nplt.plot(net(x))\n",
            4, 10,
            "import matplotlib.pyplot as plt\nimport torch.nn as nn\n"
            "net = nn.Linear(4, 1).to(device)\nplt.plot(net(x).detach().cpu())\n",
            possible=True,
        ),
        Invalid(
            "import cv2\nimport torch\nimg = torch.rand(8, 8, 3, device='cuda')\n"
            "cv2.imwrite('a.png', img)\n",
            4, 22,
            "import cv2\nimport torch\nimg = torch.rand(8, 8, 3, device='cuda')\n"
            "cv2.imwrite('a.png', img.cpu())\n",
        ),
        Invalid(
            "from PIL import Image\nimport torch\nimg = torch.rand(8, 8).cuda()\n"
            "Image.fromarray(img)\n",
            4, 17,
            "from PIL import Image\nimport torch\nimg = torch.rand(8, 8).cuda()\n"
            "Image.fromarray(img.cpu())\n",
        ),
        Invalid(
            "import torch\nclass Net(torch.nn.Module):\n    pass\nmodel = Net().to(device)\n"
            "pred = model(x).detach().numpy()\n",
            5, 8,
            "import torch\nclass Net(torch.nn.Module):\n    pass\nmodel = Net().to(device)\n"
            "pred = model(x).detach().cpu().numpy()\n",
            unsafe=True,  # the project's own module may return something else than a tensor
            possible=True,
        ),
        # The machine's pick places the input: on a machine with CUDA the line fails.
        Invalid(
            "import torch\nimport torch.nn as nn\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(2, 2).to(device)\n"
            "def predict(batch):\n    with torch.no_grad():\n"
            "        return model(batch.to(device)).argmax(1).numpy()\n",
            7, 16,
            "import torch\nimport torch.nn as nn\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(2, 2).to(device)\n"
            "def predict(batch):\n    with torch.no_grad():\n"
            "        return model(batch.to(device)).argmax(1).cpu().numpy()\n",
        ),
        Invalid(
            "def step(model, batch, device):\n    out = model(batch.to(device))\n"
            "    return out.numpy()\n",
            3, 12,
            "def step(model, batch, device):\n    out = model(batch.to(device))\n"
            "    return out.cpu().numpy()\n",
            unsafe=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        # and something that may put a value on an accelerator: a move or a device named (the
        # outputs of a model it calls are there then), module state, or a Lightning step's batch
        return any(word in source for word in ("numpy", "cv2", "fromarray", "pyplot")) and (
            names_devices(source) or "register_" in source or "_step" in source)

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
            self._converter(node)
            return
        if any(a.keyword is not None and a.keyword.value == "force" for a in node.args):
            return
        if len([a for a in node.args if a.keyword is None]) > 0:
            return  # `numpy(True)`: force given positionally
        receiver = self.ctx.value_of(func.value)
        if not receiver.maybe_accelerator or receiver.kind not in (Kind.TENSOR, Kind.UNKNOWN):
            return
        if runs_on_cpu(self.ctx.ancestors, self.ctx.qualified_name):
            return
        certain = receivers.certainly(self.ctx, func.value)
        if certain == receivers.PROJECT or (
            receiver.kind is Kind.UNKNOWN and receivers.defines_method(self.ctx, {"numpy"})
        ):
            return  # the project's own `numpy()`, not a tensor's
        detach = not self._grad_disabled() and self._may_require_grad(func.value)
        evidence, placed = self._failure_path(node, func.value)
        self.report(node, fix=Fix(_applicability(certain),
                                  [(node, lambda u: _insert_cpu(u, detach))]),
                    evidence=evidence, certain=placed)

    def _converter(self, call: cst.Call) -> None:
        """``np.asarray(t)``, ``plt.plot(t)``, ``cv2.imwrite(p, t)``: NumPy converts the
        tensor with its ``numpy()``, which fails the same way."""
        qualified = self.ctx.qualified_name(call.func) or ""
        if qualified.startswith("cv2."):
            converted = None
        elif qualified in NUMPY_CONVERTERS:
            converted = NUMPY_CONVERTERS[qualified]
        else:
            return
        if runs_on_cpu(self.ctx.ancestors, self.ctx.qualified_name):
            return
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for index, arg in enumerate(positional):
            if converted is not None and index not in converted:
                continue
            value = self.ctx.value_of(arg.value)
            # Only values torch certainly made: a pipeline's `.images[0]` is a PIL image.
            if not value.maybe_accelerator or receivers.certainly(self.ctx, arg.value) != receivers.TENSOR:
                continue
            detach = not self._grad_disabled() and self._may_require_grad(arg.value)
            name = qualified.replace("numpy.", "np.").replace("matplotlib.pyplot.", "plt.")
            evidence, placed = self._failure_path(arg.value, arg.value)
            self.report(
                arg.value,
                f"`{name}()` converts a tensor that may be on an accelerator to NumPy: "
                "call `.cpu()` first",
                fix=Fix(Applicability.SAFE, [(arg.value, lambda u: _cpu_of(u, detach))]),
                evidence=evidence, certain=placed,
            )

    def _failure_path(self, node: cst.CSTNode, value: cst.BaseExpression) -> tuple[tuple, bool]:
        """The failure path, and whether it is whole: the converted value was placed by a
        move (or a factory) whose device is an accelerator in some run: a GPU, the machine's
        pick, or the user's (``analysis/decisions.py``). A move to a device read from some
        object (``.to(model.device)``) shows no such run."""
        placement = decisions.placement_of(self.ctx, value, decisions.where_of(self.ctx))
        if placement is None:
            return ((node, "the value may be on an accelerator (a model's output, a move to a device out of "
                           "sight), but no move to an accelerator is in sight"),), False
        decision = placement.decision
        return ((node, "NumPy cannot read a tensor on an accelerator"), *placement.steps,
                (decision.node, f"{decision.what}: on an accelerator this line fails")), True

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


def _applicability(certain: str | None) -> Applicability:
    """Safe only on a value torch certainly made: an object of the project's own class with
    a ``numpy()`` method may have no ``cpu()`` at all."""
    return Applicability.SAFE if certain == receivers.TENSOR else Applicability.UNSAFE


def _cpu_of(value: cst.BaseExpression, detach: bool) -> cst.Call:
    """``x`` -> ``x.cpu()`` (``x.detach().cpu()``); ``a + b`` -> ``(a + b).cpu()``."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if detach:
        value = cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name("cpu")))


def _insert_cpu(updated: cst.Call, detach: bool) -> cst.Call:
    """``x.numpy()`` -> ``x.cpu().numpy()`` (``x.detach().cpu().numpy()``)."""
    receiver = _cpu_of(updated.func.value, detach)
    return updated.with_changes(func=updated.func.with_changes(value=receiver))
