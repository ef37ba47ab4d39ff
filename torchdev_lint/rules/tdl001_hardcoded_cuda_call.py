from __future__ import annotations

import re

import libcst as cst

from torchdev_lint import fixes
from torchdev_lint.analysis import kinds, portability, receivers, uses
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.requirements import of_file
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# What a torch loss is given as tensors (a class weight): with one, its `.cuda()` moves it.
_TENSOR_ARGUMENTS = frozenset({"weight", "pos_weight"})
_CUDA_CALL = re.compile(r"\.[\s\\]*cuda[\s\\]*\(")  # `x.cuda(`, `x .cuda (`, across lines
_CUDA_TYPE = re.compile(r"cuda\.\w*Tensor")  # `x.type(torch.cuda.FloatTensor)`


def _plain_given(call: cst.Call, kept: str) -> bool:
    """``call`` gives the parameter ``kept`` ("position:name") a plain value (a number,
    string, ``None`` or a container display, which a module does not register), or leaves it
    to its default (a literal, ``plain_modules``)."""
    position, _, name = kept.partition(":")
    given = next((a.value for a in call.args if uses.given_as(call, a, (int(position), name))), None)
    if given is None:
        return not any(a.star for a in call.args)  # `*args`, `**options`: perhaps it
    if isinstance(given, cst.UnaryOperation):
        given = given.expression
    return kinds.plain_literal(given) or (isinstance(given, cst.Name) and given.value == "None")


class HardcodedCudaCall(Rule):
    """
    ## What it does
    Flags `.cuda()` calls (`.cuda()`, `.cuda(n)`, `.cuda(device=...)`,
    `.cuda(non_blocking=True)`) on tensors, modules or anything else, and casts to a CUDA
    tensor type (`x.type(torch.cuda.FloatTensor)`, `x.type("torch.cuda.LongTensor")`, which
    copy to the GPU as `.cuda()` does), unless they only run
    where an accelerator is wanted or present (see [what counts as a guard](README.md#guards)):
    in the branch of an `if`/`elif`/`else`, `while`, conditional expression or `and`/`or`
    that runs only when its test says so (`if torch.cuda.is_available():`, the `else:` of
    `if not torch.cuda.is_available():`, `if not args.cpu:`, `if args.gpu >= 0:`,
    `device.type == "cuda"`...), after an early exit such as
    `if not torch.cuda.is_available(): return`, under a decorator that selects the machine
    (`@unittest.skipIf(not torch.cuda.is_available(), ...)`, `@RunIf(min_cuda_gpus=1)`),
    or inside a function or class named for an accelerator (`def cuda(self)`, `def to_gpu`),
    which its caller chooses to run. `@torch.autocast("cuda")` and other decorators that run
    anywhere are not guards, nor is the CPU branch of a test (`if args.cpu:`,
    `if not x.is_cuda:`, `if device == "cpu":`).

    Nor `.cuda()` in code that can only run where CUDA is, found as for TDL002's device
    strings (see [TDL002](TDL002.md)): a block (up to its function, or a module's top level)
    that also opens an NCCL process group, calls a `torch.cuda` function that raises
    without CUDA (`synchronize`, `Event`, `current_device`, `reset_peak_memory_stats`,
    `set_device(gpu)`...; not the memory readers, which return 0), imports TensorRT, PyCUDA or CuPy, or calls a function of the
    file that needs CUDA so or is named for it (`with cuda_timer():`); a function no
    other module calls whose every use is guarded or in such code; and code that runs only
    inside a process group in a file (or, opening none, a project) whose every
    `init_process_group` is NCCL. That code fails without
    CUDA whatever `.cuda()` becomes, so the rewrite would change nothing.

    `torch.cuda.*` API calls and reads of a `.cuda` attribute are not flagged.

    ## Why is this bad?
    `.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled` (or
    `RuntimeError: No CUDA GPUs are available`) on a laptop, a CPU-only CI runner or an
    Apple-silicon Mac, so code that could run anywhere runs on one kind of machine only.
    A device chosen once (`device = torch.device("cuda" if torch.cuda.is_available() else
    "cpu")`) and used everywhere with `.to(device)` runs on all of them.

    ## Fix
    Rewrites `.cuda()` to `.to(device)`, using a device expression that is bound at that
    point: a `device` variable or parameter already in scope, `self.device`, `args.device`,
    the `.device` of a tensor input of `forward`, or else a module-level
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` added once
    after the imports (with `import torch` if needed). It never uses a name that is unbound
    where it is used: when a function assigns `device` only after the call, the default is
    written inline; so it is in a file that reads a `device` it does not bind (from
    `from settings import *`, say), which a module-level default would replace. `.cuda(n)` keeps its index where CUDA exists:
    `.to(n if torch.cuda.is_available() else "cpu")`. Inside a `map_location` callable the
    whole callable becomes the device (`map_location=device`). A cast to a CUDA tensor type
    becomes a move with the type's dtype: `.type(torch.cuda.FloatTensor)` ->
    `.to(device, torch.float32)`.

    Fix safety: safe when the fix uses its own default device, which is exactly
    `torch.device("cuda")` (the current device, as `.cuda()` uses) on a machine with a
    GPU; unsafe when it reuses a device expression of the program's, whose value may differ,
    and when the receiver may be an object of a class the file defines with its own
    `cuda()`/`to()` (its `to()` need not do what its `cuda()` did). A kept index is safe
    only when it cannot be `None` (a literal, arithmetic, `int(...)`,
    `torch.cuda.current_device()`): `.cuda(None)` moves to the current GPU, `.to(None)`
    moves nothing. The fix of a cast is unsafe unless the receiver is known to be a tensor:
    a module's `.type()` casts its integer buffers too, its `.to(dtype)` only floating ones.

    ## Confidence
    Certain when the line runs on a machine without CUDA that the code is meant for: declared
    by `target-devices` (a machine without CUDA in it), or shown by the code, nearest scope
    first (the function takes a device or follows an input's `.device`, a method of its
    class takes one, as a parameter or as the options' `args.device`, or the file chooses the CPU: `"cuda" if torch.cuda.is_available() else
    "cpu"`, `--cpu`, `--no-cuda`, `--device`, a `--cuda` flag off by default, and the line
    runs in the run that
    makes the choice: in the function that makes it or reads what it binds, in what the code
    that calls that function runs, or in a function or class that code names; a choice bound
    to a name nothing reads, or an option nothing reads after parsing, is not one). Possible
    where the choice reaches nothing that runs the line (a helper nothing calls), in code judged
    CUDA-only (no CPU path shown; counted in the summary), in test code, in code for a
    multi-GPU machine (a file that puts work on a second GPU it names, `.cuda(1)` or
    `.to("cuda:1")`: a model split over two GPUs; or a function that hands `nn.DataParallel` a
    literal list of GPU numbers with a second GPU in it), and where the file, function or class needs CUDA anyway (apex/bitsandbytes/triton at the top of the file, a
    CUDA-only `torch.cuda` call, an `nn.DataParallel` subclass), or every run that reaches the
    line has first made a call that raises without CUDA, here or in a caller in any file
    (`torch.set_default_tensor_type("torch.cuda.FloatTensor")` before the call that leads here),
    or a call before the line cannot bind its arguments to the project's function or class
    (`Net()` whose `__init__` takes `cfg`: TypeError on every machine).
    `--show-evidence` prints the step. See [confidence](../confidence.md).

        ## When not to use
    In a project that only ever runs on CUDA (a multi-GPU trainer), say so:
    `target-devices = ["cuda"]` under `[tool.torchdev-lint]` in `pyproject.toml` turns the
    portability findings off.
    """

    code = "TDL001"
    name = "hardcoded-cuda-call"
    message = "`.cuda()` hardcodes a CUDA device: this line fails on machines without one"
    fix_title = "Use `.to(device)`"

    VALID = [
        Valid("import torch\nif torch.cuda.is_available():\n    model.cuda()\n"),
        Valid("def f(x, args):\n    if args.cuda:\n        x = x.cuda()\n    return x\n"),
        Valid("x = x.cuda() if use_gpu else x\n"),
        Valid("import torch\nn = torch.cuda.device_count()\ntorch.cuda.synchronize()\n"),
        Valid("def f(x):\n    if not torch.cuda.is_available():\n        return x\n"
              "    return x.cuda()\n"),
        Valid("has_cuda = hasattr(x, 'cuda')\nfn = x.cuda\n"),
        Valid("import torch\nx = x.type(torch.FloatTensor)\n"
              "y = y.type(torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor)\n"),
        Valid("self.use_gpu and model.cuda()\n"),
        Valid("def main(args, model):\n    if not args.cpu:\n        model.cuda()\n"),
        Valid("import torch\nif not torch.cuda.is_available():\n    device = 'cpu'\n"
              "else:\n    model.cuda()\n"),
        Valid("import unittest, torch\n"
              "@unittest.skipIf(not torch.cuda.is_available(), 'needs a GPU')\n"
              "def test_move():\n    torch.zeros(2).cuda()\n"),
        Valid("@RunIf(min_cuda_gpus=1)\ndef test_move(model):\n    model.cuda()\n"),
        Valid("class Masks:\n    def cuda(self, device=None):\n"
              "        self.mask = self.mask.cuda(device)\n        return self\n"),
        # Code that needs CUDA anyway: CUDA events time it.
        Valid("import torch\ndef bench(model, x):\n    start = torch.cuda.Event(enable_timing=True)\n"
              "    model.cuda()\n    return model(x.cuda())\n"),
    ]
    INVALID = [
        Invalid(  # certain: the script chooses the CPU where CUDA is missing and runs `embed`
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "def embed(x):\n    return x.cuda()\nmodel = Net().to(device)\nout = model(embed(x))\n",
            4, 12,
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "def embed(x):\n    return x.to(device)\nmodel = Net().to(device)\nout = model(embed(x))\n",
            unsafe=True,
        ),
        Invalid(  # possible: nothing the choice's run reaches calls `embed`
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "def embed(x):\n    return x.cuda()\nmodel = Net().to(device)\n",
            4, 12,
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "def embed(x):\n    return x.to(device)\nmodel = Net().to(device)\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # memory statistics read 0 without CUDA: they require nothing
            "import torch\ndef report(model):\n    model.cuda()\n"
            "    print(torch.cuda.max_memory_allocated())\n",
            3, 5,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "def report(model):\n    model.to(device)\n    print(torch.cuda.max_memory_allocated())\n", possible=True,
        ),
        Invalid(
            "import torch\nmodel = Net()\nmodel.cuda()\n",
            3, 1,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else '
            '"cpu")\nmodel = Net()\nmodel.to(device)\n', possible=True,
        ),
        Invalid(
            "import torch\n\n@torch.amp.autocast('cuda')\ndef step(model, x):\n"
            "    return model(x.cuda())\n",
            5, 18,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else '
            '"cpu")\n\n@torch.amp.autocast(\'cuda\')\ndef step(model, x):\n'
            "    return model(x.to(device))\n", possible=True,
        ),
        Invalid(
            "def main(args, model):\n    if args.cpu:\n        model.cuda()\n",
            3, 9,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else '
            '"cpu")\ndef main(args, model):\n    if args.cpu:\n        model.to(device)\n', possible=True,
        ),
        Invalid(
            "def f(x, output):\n    if output is not None:\n        x = x.cuda()\n    return x\n",
            3, 13,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else '
            '"cpu")\ndef f(x, output):\n    if output is not None:\n        x = x.to(device)\n'
            "    return x\n", possible=True,
        ),
        Invalid(  # the index may be None (`.to(None)` moves nothing): unsafe
            "import torch\ndef load(x, gpu=None):\n    return x.cuda(gpu)\n",
            3, 12,
            "import torch\ndef load(x, gpu=None):\n"
            '    return x.to(gpu if torch.cuda.is_available() else "cpu")\n',
            unsafe=True, possible=True,
        ),
        Invalid(
            "import torch\n\ndevice = torch.device('cuda:0')\n\ndef train(x):\n"
            "    return x.cuda(non_blocking=True)\n",
            6, 12,
            "import torch\n\ndevice = torch.device('cuda:0')\n\ndef train(x):\n"
            "    return x.to(device, non_blocking=True)\n",
            unsafe=True, possible=True,
        ),
        Invalid(
            "import torch as T\nx = T.zeros(2).cuda(1)\n",
            2, 5,
            'import torch as T\nx = T.zeros(2).to(1 if T.cuda.is_available() else "cpu")\n', possible=True,
        ),
        Invalid(
            "import torch\ndef main(x):\n    y = x.cuda()\n    device = torch.device('cpu')\n"
            "    return y\n",
            3, 9,
            "import torch\ndef main(x):\n"
            '    y = x.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))\n'
            "    device = torch.device('cpu')\n    return y\n", possible=True,
        ),
        Invalid(  # certain: a cast to a CUDA tensor type in a script that falls back to the CPU
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "labels = torch.arange(4).type(torch.cuda.LongTensor)\nprint(labels.to(device))\n",
            3, 10,
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
            "labels = torch.arange(4).to(device, torch.int64)\nprint(labels.to(device))\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nstate = torch.load(p, map_location=lambda s, loc: s.cuda())\n",
            2, 51,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else '
            '"cpu")\nstate = torch.load(p, map_location=device)\n', possible=True,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []

    @classmethod
    def wants(cls, source: str) -> bool:
        # A call of `.cuda`, not the `torch.cuda` namespace every device check names; or a
        # cast to a CUDA tensor type.
        return ".cuda" in source and (_CUDA_CALL.search(source) is not None or _CUDA_TYPE.search(source) is not None)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or (func.attr.value != "cuda" and not kinds.casts_to_cuda_type(node)):
            return
        module = self.ctx.qualified_name(func.value)
        if module == "torch" or self.ctx.is_guarded():
            return
        if module is not None and self.ctx.index is not None and self.ctx.index.is_project_module(module, self.ctx.path):
            return  # `utils.cuda(x)`: the project's own function
        self.candidates.append((node, tuple(self.ctx.ancestors)))

    def end_of_file(self) -> None:
        if not self.candidates:
            return
        requirements = of_file(self.ctx, self.candidates[0][1][0])
        for node, ancestors in self.candidates:
            if not requirements.only_on_accelerator(ancestors):
                verdict = portability.runs_without_cuda(self.ctx, ancestors)
                if verdict.off:
                    continue
                steps, certain = verdict.steps, verdict.certain
                index = _gpu_index(node)
                if index is not None and index >= 1:  # `.cuda(1)`: code for a machine with two GPUs
                    steps = ((node, f"`.cuda({index})` names a second GPU: code for a multi-GPU machine"),)
                    certain = False
                stateless = self._stateless_module(node.func.value, ancestors)
                if stateless is not None:
                    steps, certain = (*steps, (stateless[0], f"`{stateless[1]}` holds no tensors: its `.cuda()` "
                                                             "moves nothing and does not fail without CUDA")), False
                callee = f".{node.func.attr.value}"  # as the run order records `.cuda(...)`, `.type(...)`
                first = portability.cuda_first_in_every_run(self.ctx, ancestors, node, callee) if certain else None
                if first is not None:
                    steps, certain = (*steps, first), False
                cast = kinds.cuda_type_cast(node)
                self.report(node, f"`.type({code_of(node.args[0].value)})` hardcodes a CUDA device: this line fails "
                                  "on machines without one" if cast else None,
                            fix=lambda node=node, ancestors=ancestors: self._fix(node, ancestors),
                            evidence=steps, certain=certain, set_aside=verdict.unknown_intent)

    def _stateless_module(self, receiver: cst.BaseExpression,
                          ancestors: tuple[cst.CSTNode, ...]) -> tuple[cst.CSTNode, str] | None:
        """``receiver`` and its class's name when it is a new module that holds no state: an
        instance of a project module class that keeps no tensors, built with literals for the
        parameters it keeps (``DiceLoss(2).cuda()``, ``ModuleFacts.plain_modules``), or a
        torch loss given no tensor (``nn.CrossEntropyLoss().cuda()``; not one given a
        ``weight``), also through a name bound once, to one (``criterion = nn.MSELoss()``)."""
        if isinstance(receiver, cst.Name):
            scope = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), ancestors[0])
            sites = self.ctx.bindings(scope).get(receiver.value, ())
            if len(sites) == 1 and isinstance(sites[0], cst.Assign) and len(sites[0].targets) == 1:
                receiver = sites[0].value
        if not isinstance(receiver, cst.Call):
            return None
        qualified = self.ctx.qualified_name(receiver.func) or ""
        index = self.ctx.index
        if isinstance(receiver.func, cst.Name) and receiver.func.value in self.ctx.classes and index is not None:
            qualified = f"{index.module_of(self.ctx.path)}.{receiver.func.value}"  # a class of this file
        kept = index.plain_module(qualified, self.ctx.path) if index is not None and qualified else None
        if kept is not None and all(_plain_given(receiver, entry) for entry in kept):
            return receiver, code_of(receiver.func)
        if qualified.startswith("torch.nn.") and qualified.endswith("Loss") and all(
                arg.keyword is not None and arg.keyword.value not in _TENSOR_ARGUMENTS for arg in receiver.args):
            return receiver, qualified.rsplit(".", 1)[-1]
        return None

    def _fix(self, node: cst.Call, ancestors: tuple[cst.CSTNode, ...]) -> Fix:
        moved = code_of(node.func.value)
        choice, applicability = fixes.device_for(self.ctx, ancestors, node, moved)
        device = fixes.expression(choice.code)
        cast = kinds.cuda_type_cast(node)
        if cast is not None:
            # `.type(torch.cuda.FloatTensor)` -> `.to(device, torch.float32)`; a module's `.type`
            # casts integer buffers too, its `.to(dtype)` only floating ones: unsafe but for a tensor
            dtype = fixes.expression(f"{self.ctx.torch_name}.{kinds.TENSOR_TYPE_DTYPES.get(cast, 'float32')}")
            if self.ctx.value_of(node.func.value).kind is not Kind.TENSOR or cast not in kinds.TENSOR_TYPE_DTYPES:
                applicability = Applicability.UNSAFE
            return Fix(applicability, [(node, lambda updated: fixes.move_call(
                updated.with_changes(args=[]), device, [cst.Arg(dtype)]))],
                needs_default_device=choice.needs_default, needs_torch=choice.inline)
        callable_arg = _map_location_callable(ancestors)
        if callable_arg is not None:
            return Fix(
                applicability,
                [(callable_arg, lambda updated: updated.with_changes(value=device))],
                needs_default_device=choice.needs_default,
                needs_torch=choice.inline,
            )
        index = [a for a in node.args if a.keyword is None or a.keyword.value == "device"]
        keep = [a for a in node.args if a not in index]
        needs_default, needs_torch = choice.needs_default, choice.inline
        if index:
            torch_name = self.ctx.torch_name
            device = cst.IfExp(
                test=fixes.expression(f"{torch_name}.cuda.is_available()"),
                body=index[0].value,
                orelse=cst.SimpleString('"cpu"'),
            )
            # `.cuda(None)` is the current GPU but `.to(None)` moves nothing: the index is
            # kept safely only when it cannot be None
            applicability = Applicability.SAFE if self._never_none(index[0].value) else Applicability.UNSAFE
            needs_default, needs_torch = False, True
        if receivers.may_be_projects(self.ctx, node.func.value, {"cuda", "to"}):
            applicability = Applicability.UNSAFE  # the file's own `cuda()` need not be `to()`
        return Fix(
            applicability,
            [(node, lambda updated: fixes.move_call(updated, device, keep))],
            needs_default_device=needs_default,
            needs_torch=needs_torch,
        )

    def _never_none(self, index: cst.BaseExpression) -> bool:
        """A literal index or device string, an arithmetic result (``rank % n``), or a call
        that returns a number or a device (``int(...)``, ``torch.cuda.current_device()``)."""
        if isinstance(index, (cst.Integer, cst.SimpleString, cst.ConcatenatedString,
                              cst.FormattedString, cst.BinaryOperation)):
            return True
        if isinstance(index, cst.Call):
            name = self.ctx.qualified_name(index.func) or dotted_name(index.func) or ""
            return name in ("int", "str", "torch.cuda.current_device", "torch.device")
        return False


def _gpu_index(call: cst.Call) -> int | None:
    """The GPU number a ``.cuda(1)``/``.cuda(device=1)`` names, or None."""
    for arg in call.args:
        if (arg.keyword is None or arg.keyword.value == "device") and isinstance(arg.value, cst.Integer):
            return int(arg.value.evaluated_value)
    return None


def _map_location_callable(ancestors) -> cst.Arg | None:
    """The ``map_location=<lambda>`` argument that encloses the call, if any."""
    for parent, child in zip(ancestors, ancestors[1:]):
        if (
            isinstance(parent, cst.Arg)
            and parent.keyword is not None
            and parent.keyword.value == "map_location"
            and isinstance(child, cst.Lambda)
        ):
            return parent
    return None
