from __future__ import annotations

import bisect
import re
from typing import Iterator, Sequence

import libcst as cst

from torchdev_lint import fixes
from torchdev_lint.analysis import kinds, portability, tree
from torchdev_lint.analysis.guards import code_of, is_guarded, reads_only_guarded
from torchdev_lint.analysis.requirements import of_file
from torchdev_lint.analysis.sites import CUDA_STRING
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# Where a device object goes without placing anything: compared, a parameter default,
# an element of a list/tuple/set/dict of devices (multi-GPU code).
# (Node class names: LibCST runs only once a file is parsed.)
_NOT_A_PLACEMENT = frozenset({"Comparison", "ComparisonTarget", "Param", "Element", "DictElement",
                              "ListComp", "SetComp", "GeneratorExp", "DictComp"})
_CUDA_QUOTED = re.compile(r"[\"']cuda")  # "cuda", 'cuda:0', f"cuda:{rank}", r"cuda"
_DEVICE_KEYWORDS = frozenset({"device", "map_location"})
# Calls whose first positional argument is a device.
_DEVICE_FIRST = frozenset({"torch.set_default_device", "torch.Generator", "torch._C.Generator"})
# Helpers named like movers take the device second: `recursive_to(batch, "cuda")`,
# `move_to(obj, "cuda")`, `to_device(x, "cuda")`, `send_to_device(...)`.
_MOVER = re.compile(r"(?i)^(?:recursive_to|move_to|(?:\w+_)?to_device|to_cuda|move_to_device)$")
_MOCKING = re.compile(r"(?i)\bmock|\bmonkeypatch\b|\bmocker\b")


class HardcodedDeviceString(Rule):
    """
    ## What it does
    Flags a `"cuda"` or `"cuda:N"` string (or an f-string or format expression starting
    with `cuda:`, such as `f"cuda:{rank}"`) where a device is chosen: `torch.device(...)`
    (also as `with torch.device(...)`), `torch.set_default_device(...)`, a `device=` or
    `map_location=` argument of any call, the device argument of `.to(...)` and of
    `torch.Generator(...)`, the second argument of a helper named like a mover
    (`recursive_to(batch, "cuda")`, `move_to(obj, "cuda")`, `to_device(x, "cuda")`), the
    second argument of `torch.load`, the argument given to a device parameter of a function
    the file defines (`infer(model, image, "cuda")` of `def infer(model, x, device)`),
    `.to(torch.cuda.current_device())` (an index of a CUDA device), and an assignment to a variable or `self` attribute whose
    name says device (`device = "cuda"`, `DEVICE = "cuda:0"`, `self.device = "cuda"`).

    As with TDL001, a use is fine when it only runs where an accelerator is wanted or
    present: under an `if`/`while`, conditional expression or `and`/`or` whose test
    mentions CUDA, a GPU or a device choice (`"cuda" if torch.cuda.is_available() else
    "cpu"`, `if args.cuda:`), under a decorator that does, after an early exit, or inside
    a class or function whose name says it is for CUDA (`class CUDAAccelerator`,
    `def _triton_autotune`; not `test_*` functions, which the test runner picks).

    It does not flag values the user can change without editing code: argparse defaults
    (`default="cuda"`, `set_defaults(device="cuda")`, or a name bound to one that is read only
    as such a default, `DEVICE = "cuda:0"` then `default=DEVICE`), function parameter defaults, class-level
    defaults (a config dataclass's `device: str = "cuda"`), dict values (`{"device": "cuda"}`,
    `dict(device="cuda")`), attributes of config objects (`cfg.MODEL.DEVICE = "cuda"`), and
    module-level settings that a later `exec(open("configurator.py").read())` overrides
    (nanoGPT's idiom). Nor does it flag device *types* given to
    `autocast(device_type="cuda")`, `GradScaler("cuda")` or mixed-precision wrappers
    (`MixedPrecision(device="cuda")`, also through a loop over such classes): they warn
    and disable themselves without CUDA. Nor
    the `torch.cuda` API itself (`torch.cuda.set_device(...)`),
    or a `torch.device("cuda")` that is only compared (`x.device == torch.device("cuda")`,
    `device.type == "cuda"`), read for its type (`torch.device("cuda").type`), asserted
    (`m.to.assert_called_with(torch.device("cuda"))`) or listed (`[torch.device("cuda", i) for i in range(n)]`, multi-GPU code), nor devices
    in a test that fakes what it tests (`Mock()`, `mock.patch`, `monkeypatch`, `mocker`)
    or in code a test expects to fail (`with pytest.raises(ValueError):`): there they are
    test data. A test without fakes is checked like any code: the test
    runner picks it on a CPU-only machine too.

    Nor a device variable a function only hands to APIs taking a device type
    (`device = flag if flag in ("cpu", "mps") else "cuda"` then
    `MixedPrecision(..., device=device)`), nor a `pytest.param(torch.device("cuda"),
    marks=...)` whose marks require a GPU.

    Nor code that can only run where CUDA is, whatever its strings say, so that a device
    chosen at run time would not make it run anywhere else:
    - a block (up to its function, or the top level of the module for the whole file) that
      also needs CUDA by means no fix of ours changes: an NCCL process group
      (`init_process_group(backend="nccl")`, also as `if not dist.is_initialized():
      dist.init_process_group(backend="nccl")`), a `torch.cuda` call that raises without a
      CUDA device (`synchronize`, `Event`, `Stream`, `reset_peak_memory_stats`,
      `get_device_properties`...; not the memory readers such as `max_memory_allocated`,
      which return 0; `set_device(gpu)` raises for any device, but not `set_device(device)`
      of a device string the file chose, which goes with that choice and is fixed with it),
      an import of TensorRT, PyCUDA or CuPy,
      or a call of a function of the same file that needs CUDA in these ways or whose name
      says it is for CUDA (`with cuda_timer(times):`; not movers such as `to_cuda(batch)`,
      which a device argument makes portable). Only statements that run whenever the
      block does count: not those nested under an `if` or a loop, nor in a lambda;
    - a function of the file that no other module calls (a private `_name`, or a
      module-level function that, by the project index, no other module of the run
      imports) whose every use, a call or the function handed on (`spawn(_ddp_fn, ...)`),
      is guarded or is in such code: the helper of a test marked `RunIf(min_cuda_gpus=2)`.
      A method counts when private, or when no other module of the run mentions an
      attribute of its name (`p.setup_pipeline()`, `getattr(p, "setup_pipeline")`) and
      the file mentions it only as `self.setup_pipeline`: an object can be handed
      anywhere, but only code that names a method calls it (a framework that calls a
      hook by its name, such as a trainer's `validation_step`, is not seen). Without the
      index (one file at a time, as flake8 runs) public functions and methods stay checked.
    - code that runs only inside a process group (under `if dist.is_initialized():` or
      `if world_size > 1:`, after `if not is_dist_avail_and_initialized(): return` or
      `if get_world_size() == 1: return [data]`, through the file's own helpers that
      answer so) in a file whose every `init_process_group` opens an NCCL group (a literal
      `"nccl"`, or `args.dist_backend = "nccl"` set just before in the same block): the
      file's distributed runs are NCCL runs (an assumption: another module that opens a gloo
      group and then calls these helpers is not seen). A file that opens no group counts
      when, by the project index, its project (the modules under the directory of its
      outermost package) opens groups and every one with a literal
      `"nccl"`, and no file names another backend (`gloo`) or a launcher that picks one
      (Accelerate, Lightning, DeepSpeed's `init_distributed`, a device mesh): the
      `comm.all_gather` helper of a project whose `train.py` opens NCCL groups. A file that
      may open a gloo group says nothing. `get_world_size()` may first return 1 under
      `if not dist.is_available():`.

    Such code would fail on a machine without CUDA anyway; a finding there would only ask
    to rewrite a line that changes nothing. Where the requirement itself can be made
    portable, the other rules say so (`.cuda()` is TDL001's).

    ## Why is this bad?
    The string works on the machine it was typed on and fails everywhere else: on a
    laptop, a CPU-only CI runner or an Apple-silicon Mac the first tensor or module moved
    there raises `AssertionError: Torch not compiled with CUDA enabled` (or `RuntimeError:
    No CUDA GPUs are available`), and `torch.load(..., map_location="cuda")` cannot load.
    Choosing the device once and passing it around runs on all of them.

    ## Fix
    A plain `"cuda"` is replaced by the same device expression TDL001 uses: a `device`
    variable or parameter bound at that point, `self.device`, `args.device`, the `.device`
    of a tensor input of `forward`, or else a module-level
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` added once
    after the imports. With that default, `torch.device("cuda")` as a whole becomes
    `device`; a device expression of the program's own is wrapped instead
    (`torch.device(device)`), since it may be a string.

    Where the string *defines* the device (it is assigned to a variable or `self`
    attribute) or names a GPU index (`"cuda:1"`, `f"cuda:{rank}"`,
    `torch.device("cuda", rank)`), the string is kept for machines that have CUDA and falls
    back to the CPU elsewhere: `DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"`.
    In a file that does not import torch, such a string is reported without a fix.

    Fix safety: safe when the fix keeps the string behind `torch.cuda.is_available()` or
    uses its own default device: on a machine with a GPU both are exactly the device the
    string named. Unsafe when it reuses a device expression of the program's, whose value
    may differ from the string.

    ## Confidence
    Certain on the same failure path as [TDL001](TDL001.md): the line runs on a machine
    without CUDA that the code is meant for (declared by `target-devices`, or shown by the
    code) and nothing says it needs CUDA anyway. Possible, besides: code judged CUDA-only, a
    CUDA string with a computed index (`f"cuda:{rank}"`, multi-GPU code), a `"cuda"` that is
    one branch of a choice with the CPU or with the caller's device (`"cuda" if backend ==
    "nccl" else "cpu"`, `if device is None: device = "cuda"`), the old-torch stand-in for
    `torch.accelerator`, a device bound at the top level to a name the file binds again
    before anything reads it but a test for CUDA (`device = "cuda:0"`, then `device =
    torch.device(device if torch.cuda.is_available() else "cpu")`), and one bound to a name
    the file never reads (a function with
    a `device` parameter of its own reads that one; or reads only under a GPU test:
    `if use_gpu: x = x.to(gpu)`) and no other module imports (a notebook), or that the
    modules importing it (by name, by `*` or as `config.CUDA_DEVICE`) read only under a test
    for CUDA or in comparisons (`if torch.cuda.is_available(): return CUDA_DEVICE`,
    `CUDA_DEVICE if torch.cuda.is_available() else "cpu"`, `device == CUDA_DEVICE`), or to a
    `self` attribute its class never reads, or to a local name its function never reads
    (building a `torch.device` needs no CUDA; nothing is placed without it).

        ## When not to use
    In a project that only ever runs on CUDA (a multi-GPU trainer, a library of CUDA
    kernels) every such string is deliberate. Turn the rule off in `pyproject.toml`:

    ```toml
    [tool.torchdev-lint]
    ignore = ["TDL002"]
    ```

    or only for its tests: `per-file-ignores = { "tests/*" = ["TDL002"] }`.
    """

    code = "TDL002"
    name = "hardcoded-device-string"
    sites = frozenset({CUDA_STRING})
    message = "`\"cuda\"` hardcodes a CUDA device: this line fails on machines without one"
    fix_title = "Use a device chosen at run time"

    VALID = [
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'),
        Valid('import argparse\nparser = argparse.ArgumentParser()\n'
              'parser.add_argument("--device", default="cuda")\nparser.set_defaults(device="cuda")\n'),
        Valid('config = {"device": "cuda", "lr": 0.1}\ncfg.MODEL.DEVICE = "cuda"\n'
              'from dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n'
              '    device: str = "cuda"\n'),
        Valid('import torch\nwith torch.autocast(device_type="cuda"):\n    y = model(x)\n'
              'scaler = torch.amp.GradScaler("cuda")\n'),
        # the device's type is the text "cuda": nothing is placed
        Valid('import torch\ndef normalize(x, mean):\n'
              '    if x.device.type == torch.device("cuda").type:\n        return x - mean\n'),
        # the string goes to the function's other parameter, or to one that names a device type
        Valid('import torch\ndef log(msg, device, device_type):\n    print(msg, device, device_type)\n'
              'log("cuda run", torch.device("cpu"), "cuda")\n'),
        Valid('import torch\ndef same(x, device):\n    if device.type == "cuda":\n'
              '        torch.cuda.synchronize()\n    return x.device == torch.device("cuda")\n'),
        Valid('import torch\nif torch.cuda.is_available():\n    model.to("cuda:0")\n'
              'x = x.to("cuda") if args.cuda else x\n'),
        Valid('import torch\ndef train(model, device="cuda", loader_device=torch.device("cuda")):\n'
              '    model.to(device)\n'),
        Valid('import torch\ntorch.cuda.set_device(torch.device("cuda", 0))\n'
              'devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]\n'),
        Valid('import torch\ndevice = "cuda"  # overridden by configurator.py\n'
              'exec(open("configurator.py").read())\nx = torch.zeros(2).to(device)\n'),
        Valid('import torch\nclass CUDAAccelerator:\n    def setup(self, model):\n'
              '        return model.to("cuda")\n'),
        # Not a device position: a mover given a variable, a tensor's data, a guarded index.
        Valid('batch = recursive_to(batch, device)\nnames = to_device_map(names, "cuda")\n'
              'x = move_to("cuda")\n'),
        Valid('import torch\nif torch.cuda.is_available():\n'
              '    x = x.to(torch.cuda.current_device())\n'
              'torch.cuda.set_device(torch.cuda.current_device())\n'),
        # A device variable only given where a device *type* is wanted; a GPU-marked case.
        Valid('def plugin(flag, precision):\n'
              '    device = flag if flag in ("cpu", "mps") else "cuda"\n'
              '    return MixedPrecision(precision=precision, device=device)\n'),
        Valid('from lightning.pytorch.plugins.precision import MixedPrecision, MixedPrecisionPlugin\n'
              'for plugin_cls in [MixedPrecision, MixedPrecisionPlugin]:\n'
              '    plugin_cls(precision="bf16-mixed", device="cuda:0")\n'),
        Valid('import pytest\nimport torch\n@pytest.mark.parametrize("d", [\n'
              '    pytest.param(torch.device("cuda"), marks=RunIf(min_cuda_gpus=1))])\n'
              'def test_move(d):\n    pass\n'),
        # Code that can only run where CUDA is: an NCCL process group, a TensorRT branch,
        # timing by a CUDA-named function of the file, a private helper only handed on from
        # a test that requires GPUs; and a ROCm run naming its GPU "cuda".
        Valid('import torch\nimport torch.distributed as dist\ndef main():\n'
              '    dist.init_process_group(backend="nccl")\n'
              '    device = f"cuda:{dist.get_rank()}"\n'),
        Valid('import torch\ndef load(w, device, engine):\n    if engine:\n'
              '        import tensorrt as trt\n        if device.type == "cpu":\n'
              '            device = torch.device("cuda:0")\n'),
        Valid('import torch\ndef cuda_timer(times):\n    pass\ndef bench(kernel, times):\n'
              '    q = torch.randn(8, device="cuda")\n    with cuda_timer(times):\n        kernel(q)\n'),
        Valid('def _ddp_fn(rank):\n    m = Metric().to(f"cuda:{rank}")\n'
              '@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(_ddp_fn, world_size=2)\n'),
        Valid('def check(torch_device):\n'
              '    device = torch_device if torch_device != "rocm" else "cuda"\n'),
        # Runs only in a process group, and this file opens only NCCL groups.
        Valid('import torch\nimport torch.distributed as dist\ndef sync(n):\n'
              '    if not dist.is_initialized():\n        return n\n'
              '    t = torch.tensor([n], device="cuda")\n    dist.all_reduce(t)\n    return t.item()\n'
              'def init(args):\n    args.backend = "nccl"\n'
              '    dist.init_process_group(backend=args.backend)\n'),
    ]
    INVALID = [
        Invalid(  # memory statistics read 0 without CUDA: they require nothing
            'import torch\ndef report(model):\n    model.to("cuda")\n'
            '    print(torch.cuda.max_memory_allocated())\n',
            3, 14,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'def report(model):\n    model.to(device)\n    print(torch.cuda.max_memory_allocated())\n', possible=True,
        ),
        Invalid(  # a private helper also called where no GPU is required
            'import torch\ndef _ddp_fn(rank):\n    m = Metric().to(f"cuda:{rank}")\n'
            '@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(_ddp_fn)\n'
            'def test_cpu():\n    _ddp_fn(0)\n',
            3, 21,
            'import torch\ndef _ddp_fn(rank):\n'
            '    m = Metric().to(f"cuda:{rank}" if torch.cuda.is_available() else "cpu")\n'
            '@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(_ddp_fn)\n'
            'def test_cpu():\n    _ddp_fn(0)\n', possible=True,
        ),
        Invalid(  # the file may open a gloo group: the block also runs on a CPU
            'import torch\nimport torch.distributed as dist\ndef sync(n):\n'
            '    if not dist.is_initialized():\n        return n\n'
            '    t = torch.tensor([n], device="cuda")\n    return t\n'
            'def init(args):\n    dist.init_process_group(backend=args.backend)\n',
            6, 34,
            'import torch\nimport torch.distributed as dist\n'
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ndef sync(n):\n'
            '    if not dist.is_initialized():\n        return n\n'
            '    t = torch.tensor([n], device=device)\n    return t\n'
            'def init(args):\n    dist.init_process_group(backend=args.backend)\n', possible=True,
        ),
        Invalid(  # a positional device argument
            'import torch\ng = torch.Generator("cuda")\n',
            2, 21,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ng = torch.Generator(device)\n', possible=True,
        ),
        Invalid(  # the file's own function takes the device at that position
            'import torch\ndef infer(model, x, device):\n    return model(x.to(device))\n'
            'print(infer(model, image, "cuda"))\n',
            4, 27,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'def infer(model, x, device):\n    return model(x.to(device))\nprint(infer(model, image, device))\n',
            possible=True,
        ),
        Invalid(  # a helper named like a mover takes the device second
            'import torch\nbatch = recursive_to(batch, "cuda")\n',
            2, 29,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'batch = recursive_to(batch, device)\n', possible=True,
        ),
        Invalid(
            'import torch\ndef step(model, x):\n    return model(x.to(torch.cuda.current_device()))\n',
            3, 23,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ndef step(model, x):\n    return model(x.to(device))\n', possible=True,
        ),
        Invalid(
            'import torch\nx = torch.zeros(3, device="cuda")\n',
            2, 27,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'x = torch.zeros(3, device=device)\n', possible=True,
        ),
        Invalid(
            'import torch\nDEVICE = "cuda:0"\nmodel.to(DEVICE)\n',
            2, 10,
            'import torch\nDEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"\n'
            'model.to(DEVICE)\n', possible=True,
        ),
        Invalid(
            'import torch as T\ndef run(model, device):\n    model.to(T.device("cuda"))\n',
            3, 23,
            'import torch as T\ndef run(model, device):\n    model.to(T.device(device))\n',
            unsafe=True,
        ),
        Invalid(
            'import torch\nstate = torch.load(path, map_location=f"cuda:{rank}")\n',
            2, 39,
            'import torch\nstate = torch.load(path, map_location=f"cuda:{rank}" if '
            'torch.cuda.is_available() else "cpu")\n', possible=True,
        ),
        Invalid(
            'import torch\nwith torch.device("cuda"):\n    model = Net()\n',
            2, 19,
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'with device:\n    model = Net()\n', possible=True,
        ),
        Invalid(
            'import torch\nclass Runner:\n    def __init__(self):\n        self.device = "cuda"\n',
            4, 23,
            'import torch\nclass Runner:\n    def __init__(self):\n'
            '        self.device = "cuda" if torch.cuda.is_available() else "cpu"\n', possible=True,
        ),
        Invalid(
            'class Evaluator:\n    def __init__(self, device):\n        self.device = device\n'
            '    def run(self, model, batch):\n        return model(batch.to("cuda"))\n',
            5, 31,
            'class Evaluator:\n    def __init__(self, device):\n        self.device = device\n'
            '    def run(self, model, batch):\n        return model(batch.to(self.device))\n',
            unsafe=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        # Every flag is a string starting with `cuda` (`cuda_string`) or a `current_device()`.
        return "cuda" in source and (_CUDA_QUOTED.search(source) is not None or "current_device" in source)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # Module-level definitions (`device = "cuda"`) wait for the end of the file: a later
        # `exec(open("configurator.py").read())` makes them configuration values.
        self.module_definitions: list[tuple] = []
        # Every other finding waits too: whether its code can only run where CUDA is
        # (`analysis/requirements.py`) depends on the whole file.
        self.candidates: list[tuple] = []
        self.mocking: dict[int, bool] = {}  # test function -> whether it fakes with mocks
        # the file's top-level functions -> the positions and names of their device parameters
        self.device_parameters: dict[str, tuple[list[int], set[str]]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            if isinstance(statement, cst.FunctionDef):
                params = [*statement.params.posonly_params, *statement.params.params]
                names = {p.name.value for p in (*params, *statement.params.kwonly_params)
                         if kinds.names_a_device(p.name.value)}
                if names:
                    self.device_parameters[statement.name.value] = (
                        [i for i, p in enumerate(params) if p.name.value in names], names)

    # -- where a device is chosen --------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualified_name(node.func) or ""
        if qualified == "torch.device":
            self._check_device_object(node)
            return
        if self._overrides_globals(node):
            self.module_definitions.clear()
            return
        if (
            _takes_device_type(qualified or _callee_name(node.func))
            or _is_cuda_api(qualified)
            or _builds_config(node)
            or self._each_takes_device_type(node.func)
        ):
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        candidates: list[cst.Arg] = []
        if qualified in _DEVICE_FIRST and positional:
            candidates.append(positional[0])
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" and positional:
            candidates.append(positional[0])
        elif _MOVER.search(_callee_name(node.func)) and len(positional) >= 2:
            candidates.append(positional[1])  # `recursive_to(batch, "cuda")`
        elif qualified in kinds.TORCH_LOADERS and len(positional) >= 2:
            candidates.append(positional[1])
        taken = self.device_parameters.get(node.func.value) if isinstance(node.func, cst.Name) else None
        if taken is not None and len(positional) == sum(a.keyword is None for a in node.args):  # `inference(model, image, "cuda")` of the file's `def inference(model, x, device)`
            candidates += [positional[i] for i in taken[0] if i < len(positional)]
        candidates += [a for a in node.args if a.keyword is not None
                       and (a.keyword.value in _DEVICE_KEYWORDS or taken is not None and a.keyword.value in taken[1])]
        for arg in candidates:
            path = (*self.ctx.ancestors, arg)
            if (  # `.to(torch.cuda.current_device())`: an index of a CUDA device
                isinstance(arg.value, cst.Call)
                and self.ctx.qualified_name(arg.value.func) == "torch.cuda.current_device"
            ):
                if not is_guarded((*path, arg.value), self.ctx.qualified_name):
                    self.candidates.append((arg.value, (*path, arg.value), False, None))
                continue
            self._check_value(arg.value, path, defines=False)

    def _each_takes_device_type(self, func: cst.BaseExpression) -> bool:
        """``for plugin_cls in [MixedPrecision, MixedPrecisionPlugin]: plugin_cls(device=...)``:
        the loop variable is only ever an API taking a device type."""
        if not isinstance(func, cst.Name):
            return False
        for node in reversed(self.ctx.ancestors):
            if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == func.value:
                options = node.iter.elements if isinstance(node.iter, (cst.List, cst.Tuple)) else ()
                return bool(options) and all(
                    _takes_device_type(self.ctx.qualified_name(e.value) or code_of(e.value)) for e in options
                )
        return False

    def _check_device_object(self, node: cst.Call) -> None:
        """``torch.device("cuda")``: building the object is harmless; what it is given to
        decides. Comparisons, parameter defaults, test assertions
        (``m.to.assert_called_with(torch.device("cuda"))``), the ``torch.cuda`` API and
        device-type APIs, lists of devices (multi-GPU code) and attributes of other objects
        (configuration) are fine."""
        type_args = [a for a in node.args if a.keyword is None or a.keyword.value == "type"]
        if not type_args:
            return
        consumer, value = _consumer(self.ctx.ancestors)
        if type(consumer).__name__ in _NOT_A_PLACEMENT:
            return
        if isinstance(consumer, cst.Attribute) and consumer.value is value and consumer.attr.value in ("type", "index"):
            return  # `torch.device("cuda").type` is the text "cuda": it places nothing
        if isinstance(consumer, cst.Arg) and isinstance(value, cst.Call):
            qualified = self.ctx.qualified_name(value.func) or ""
            called = _callee_name(value.func)
            if (
                _takes_device_type(qualified or called)
                or _is_cuda_api(qualified)
                or called.rsplit(".", 1)[-1].lower().startswith("assert")
                or _gpu_marked_param(value)
            ):
                return
        defines = False
        if isinstance(consumer, (cst.Assign, cst.AnnAssign)):
            if not self._binds_variable(consumer):
                return
            defines = True
        indexed = len(type_args) > 1 or any(
            a.keyword is not None and a.keyword.value == "index" for a in node.args
        )
        arg = type_args[0]
        self._check_value(arg.value, (*self.ctx.ancestors, arg), defines=defines or indexed,
                          device_call=node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._binds_device(node) and not self._only_device_type(node):
            self._check_value(node.value, tuple(self.ctx.ancestors), defines=True)

    def _only_device_type(self, node: cst.Assign) -> bool:
        """``device = ... else "cuda"`` in a function that only gives ``device`` to APIs
        taking a device type (``MixedPrecision(..., device=device)``, autocast), or as the
        default of a command-line option (``DEVICE = 'cuda:0'`` then
        ``add_argument('--device', default=DEVICE)``: the user's choice, as a default
        written in the call is)."""
        function = self.ctx.function
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
        if function is None or len(names) != 1:
            return False
        calls, mentions = self.ctx.once(("names given to calls", id(function)), lambda: _names_given(function))
        # Asked now, as the traversal stands: a local name may shadow an import later on.
        uses = [_takes_device_type(self.ctx.qualified_name(call.func) or code_of(call.func))
                or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument")
                for call in calls.get(names[0], ())]
        stores = len(self.ctx.bindings(function).get(names[0], ()))
        return bool(uses) and all(uses) and mentions.get(names[0], 0) == len(uses) + stores

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._binds_device(node):
            self._check_value(node.value, tuple(self.ctx.ancestors), defines=True)

    def _binds_device(self, node: cst.Assign | cst.AnnAssign) -> bool:
        """Assigned to a variable or ``self`` attribute whose name says it holds a device."""
        return any(
            name is not None and kinds.names_a_device(name) for name in self._variables(node)
        )

    def _binds_variable(self, node: cst.Assign | cst.AnnAssign) -> bool:
        return any(name is not None for name in self._variables(node))

    def _variables(self, node: cst.Assign | cst.AnnAssign) -> list[str | None]:
        """The name of each target that is a variable or an attribute of ``self`` (None
        for the others); nothing in a class body, whose assignments are defaults."""
        if isinstance(self.ctx.scopes[-1].node, cst.ClassDef):
            return []
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        names: list[str | None] = []
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)):
                names += [e.value.value if isinstance(e.value, cst.Name) else None
                          for e in target.elements]
            elif isinstance(target, cst.Name):
                names.append(target.value)
            elif (
                isinstance(target, cst.Attribute)
                and isinstance(target.value, cst.Name)
                and self._is_self(target.value.value)
            ):
                names.append(target.attr.value)
            else:
                names.append(None)  # a config object's attribute, an item
        return names

    def _is_self(self, name: str) -> bool:
        function = self.ctx.function
        if function is None or self.ctx.enclosing_class is None:
            return False
        params = [*function.params.posonly_params, *function.params.params]
        return bool(params) and params[0].name.value == name

    def _overrides_globals(self, call: cst.Call) -> bool:
        """A module-level ``exec(...)`` or ``globals().update(...)``: the module's globals
        above it are a configuration section (nanoGPT's ``configurator.py`` idiom)."""
        if self.ctx.function is not None or not isinstance(self.ctx.scopes[-1].node, cst.Module):
            return False
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "update":
            inner = func.value
            return isinstance(inner, cst.Call) and not inner.args and code_of(inner.func) == "globals"
        return (
            isinstance(func, cst.Name) and func.value == "exec" and self.ctx.qualified_name(func) is None
        )

    # -- the strings ---------------------------------------------------------------------

    def _check_value(
        self,
        value: cst.BaseExpression,
        ancestors: Sequence[cst.CSTNode],
        defines: bool,
        device_call: cst.Call | None = None,
    ) -> None:
        module_level = defines and isinstance(self.ctx.scopes[-1].node, cst.Module)
        for literal, path in _branches(value, tuple(ancestors)):
            kind = cuda_string(literal)
            if (
                kind is None
                or is_guarded(path, self.ctx.qualified_name)
                or self._in_mocking_test(path)
            ):
                continue
            flag = (literal, path, defines or kind == "indexed", device_call)
            (self.module_definitions if module_level else self.candidates).append(flag)

    def _in_mocking_test(self, path: Sequence[cst.CSTNode]) -> bool:
        """Inside a test that fakes what it tests (``Mock()``, ``mock.patch``,
        ``monkeypatch``, ``mocker``), or in code it expects to fail (``with
        pytest.raises(...)``), devices are test data: nothing is placed there."""
        test = next((n for n in path if isinstance(n, cst.FunctionDef)), None)
        if test is None or not test.name.value.startswith("test"):
            return False
        if any(isinstance(n, cst.With) and any(_expects_error(i.item) for i in n.items) for n in path):
            return True
        known = self.mocking.get(id(test))
        if known is None:
            known = self.mocking[id(test)] = bool(_MOCKING.search(code_of(test)))
        return known

    def end_of_file(self) -> None:
        flags = [*self.candidates, *self.module_definitions]
        if not flags:
            return
        requirements = of_file(self.ctx, flags[0][1][0])
        for flag in flags:
            if not requirements.only_on_accelerator(flag[1]):
                self._flag(*flag)

    def _flag(self, literal, path, keep: bool, device_call: cst.Call | None) -> None:
        text = code_of(literal)
        message = self.message.replace('"cuda"', text if len(text) <= 40 else text[:37] + "...")
        verdict = portability.runs_without_cuda(self.ctx, path)
        if verdict.off:
            return
        # `f"cuda:{i}"` picks one of several GPUs: multi-GPU code, whose CPU path we cannot see
        indexed = not isinstance(literal, (cst.SimpleString, cst.ConcatenatedString))
        unread = self._unread_binding(path)
        steps = verdict.steps if unread is None else (*verdict.steps, unread)
        self.report(literal, message, fix=lambda: self._fix(literal, path, keep, device_call),
                    evidence=steps, certain=verdict.certain and not indexed and unread is None
                    and not _old_torch_fallback(path) and not _falls_back(path),
                    set_aside=verdict.unknown_intent and not indexed)

    def _unread_binding(self, path) -> tuple[cst.CSTNode, str] | None:
        """``device = torch.device("cuda")`` at the top level, bound to a name the file binds
        again before anything reads it, or never reads, or reads only under a GPU test, and no
        other module imports: the device
        places nothing on a machine without CUDA (building a ``torch.device`` does not need
        CUDA)."""
        if len(path) < 3 or not isinstance(path[0], cst.Module):
            return None
        unread = self._unread_attribute(path) or _unread_local(path)
        if unread is not None:
            return unread
        line = path[1]
        assign = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 \
                or not isinstance(assign.targets[0].target, cst.Name):
            return None
        name = assign.targets[0].target.value
        rebound = _rebound_before_read(self.ctx, path[0], line, name)
        if rebound is not None:
            return rebound, (f"`{name}` is bound again here, and read before only where CUDA is present (if at "
                             "all): the device places nothing on a machine without CUDA")
        index = self.ctx.index
        imported = index.imported_from(self.ctx.path) if index is not None and self.ctx.path != "-" else None
        if self.ctx.path.endswith(".ipynb"):
            imported = frozenset()  # nothing imports a notebook
        if imported is not None and ("*" in imported or name in imported) \
                and index.read_only_guarded_elsewhere(self.ctx.path, name) \
                and (name not in portability.names_read(self.ctx)
                     or reads_only_guarded(path[0], name, self.ctx.qualified_name)):
            return assign, (f"`{name}` is read by the modules that import it only where CUDA is asked for "
                            "(`if torch.cuda.is_available():`, a CUDA-or-CPU choice) or in comparisons: the "
                            "device places nothing on a machine without CUDA")
        if imported is None or "*" in imported or name in imported:
            return None
        if name not in portability.names_read(self.ctx) or not portability.reads_module_name(self.ctx, path[0], name):
            return assign, f"`{name}` is never read here nor imported elsewhere: the device places nothing"
        if reads_only_guarded(path[0], name, self.ctx.qualified_name):
            return assign, (f"`{name}` is read only where CUDA is wanted or present (under a GPU test): the "
                            "device places nothing on a machine without CUDA")
        return None

    def _unread_attribute(self, path) -> tuple[cst.CSTNode, str] | None:
        """``self.device = torch.device("cuda")`` in a method of a class none of whose code
        reads ``self.device``: the class places nothing there (its code uses another device)."""
        klass = next((n for n in reversed(path) if isinstance(n, cst.ClassDef)), None)
        method = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
        assign = next((n for n in reversed(path) if isinstance(n, cst.Assign)), None)
        if klass is None or method is None or assign is None or len(assign.targets) != 1:
            return None
        params = [*method.params.posonly_params, *method.params.params]
        target = assign.targets[0].target
        if not (params and isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == params[0].name.value):
            return None
        attribute = target.attr.value
        reads = [node for node in tree.collect(klass, cst.Attribute)
                 if node.attr.value == attribute and node is not target
                 and isinstance(node.value, cst.Name) and node.value.value in ("self", target.value.value)]
        if reads or f'"{attribute}"' in code_of(klass) or f"'{attribute}'" in code_of(klass):
            return None
        return assign, f"nothing in `{klass.name.value}` reads `self.{attribute}`: the device places nothing"

    def _fix(self, literal, path, keep: bool, device_call: cst.Call | None) -> Fix | None:
        torch_name = self.ctx.torch_name
        if keep:
            if self.ctx.imports.local_name_for("torch") is None:
                return None  # the availability check would need an `import torch`
            parent = path[-2]
            if device_call is not None and len(device_call.args) >= 2 and parent is device_call.args[0]:
                # `torch.device("cuda", rank)`: a guarded type would give `cpu:rank`; guard the device
                bare = len(path) > 3 and path[-3] is device_call and isinstance(
                    path[-4], (cst.Arg, cst.Assign, cst.AnnAssign))
                return Fix(Applicability.SAFE, [(device_call, lambda updated: cst.IfExp(
                    test=fixes.expression(f"{torch_name}.cuda.is_available()"),
                    body=updated.with_changes(lpar=(), rpar=()),
                    orelse=fixes.expression(f'{torch_name}.device("cpu")'),
                    lpar=updated.lpar if bare else [cst.LeftParen()],
                    rpar=updated.rpar if bare else [cst.RightParen()],
                ))])
            bare = isinstance(parent, (cst.Arg, cst.Assign, cst.AnnAssign))
            guarded = cst.IfExp(
                test=fixes.expression(f"{torch_name}.cuda.is_available()"),
                body=literal.with_changes(lpar=(), rpar=()),
                orelse=fixes.string_like(literal, "cpu"),
                lpar=literal.lpar if bare else [cst.LeftParen()],
                rpar=literal.rpar if bare else [cst.RightParen()],
            )
            return Fix(Applicability.SAFE, [(literal, lambda _: guarded)])
        choice, applicability = fixes.device_for(self.ctx, path, literal, _moved(path))
        device = fixes.expression(choice.code)
        target = literal
        if device_call is not None and not choice.existing and len(device_call.args) == 1:
            target = device_call  # `torch.device("cuda")` as a whole becomes our device
        return Fix(
            applicability,
            [(target, lambda updated: device.with_changes(lpar=updated.lpar, rpar=updated.rpar))],
            needs_default_device=choice.needs_default,
        )


def _falls_back(path: Sequence[cst.CSTNode]) -> bool:
    """``"cuda" if backend == "nccl" else "cpu"`` (or an ``if``/``else`` of statements): the
    literal is one branch of a choice whose other branch is the CPU; or ``if device is None:
    device = "cuda"`` (or ``return torch.device("cuda")``), the default of a device its caller
    may pass. The code already chooses; whether the choice can be wrong is out of sight."""
    literal = path[-1]
    for parent in reversed(path[:-1]):
        if isinstance(parent, cst.IfExp):
            other = parent.orelse if parent.body is literal or tree.contains(parent.body, literal) else parent.body
            if "cpu" in code_of(other).lower() or "device" in code_of(other).lower():
                return True  # the CPU, or the device the caller passed
        if isinstance(parent, (cst.FunctionDef, cst.SimpleStatementLine)):
            break
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
        if isinstance(parent, cst.If) and child in (parent.body, parent.orelse) and portability.if_chooses_cpu(parent):
            return True  # `if cfg["gpu"]: device = "cuda"` / `else: device = "cpu"`
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            break
    statement = next((p for p in reversed(path) if isinstance(p, (cst.Assign, cst.AnnAssign))), None)
    function = next((p for p in reversed(path) if isinstance(p, cst.FunctionDef)), None)
    if function is not None and _default_of_parameter(path, function):
        return True
    if statement is not None and function is not None:
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        params = {p.name.value for p in [*function.params.params, *function.params.kwonly_params]}
        return any(isinstance(t, cst.Name) and t.value in params for t in targets)
    return False


def _default_of_parameter(path: Sequence[cst.CSTNode], function: cst.FunctionDef) -> bool:
    """The literal is in the body of ``if device is None:`` on a parameter of its function
    (``if device is None: return torch.device("cuda")``): the default of a device the caller
    may pass."""
    params = {p.name.value for p in [*function.params.params, *function.params.kwonly_params]}
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, cst.If) and child is parent.body and isinstance(parent.test, cst.Comparison) \
                and isinstance(parent.test.left, cst.Name) and parent.test.left.value in params \
                and len(parent.test.comparisons) == 1 and isinstance(parent.test.comparisons[0].operator, cst.Is) \
                and code_of(parent.test.comparisons[0].comparator) == "None":
            return True
    return False


def _names_given(function: cst.FunctionDef) -> tuple[dict[str, list[cst.Call]], dict[str, int]]:
    """In ``function``'s body, per name: the calls it is handed to (once per argument it
    is), and how often it is mentioned, not counting keywords' own names or attribute names
    (``.device`` of something). One walk per function, for every assignment that asks."""
    calls: dict[str, list[cst.Call]] = {}
    mentions: dict[str, int] = {}

    def enter(child: cst.CSTNode) -> bool:
        if isinstance(child, cst.Call):
            for arg in child.args:
                if isinstance(arg.value, cst.Name):
                    calls.setdefault(arg.value.value, []).append(child)
        elif isinstance(child, cst.Arg) and child.keyword is not None:
            tree.walk(child.value, enter)  # not the keyword's own name
            return False
        elif isinstance(child, cst.Attribute):
            tree.walk(child.value, enter)  # not `.device` of something
            return False
        elif isinstance(child, cst.Name):
            mentions[child.value] = mentions.get(child.value, 0) + 1
        return True

    tree.walk(function.body, enter)
    return calls, mentions


def _old_torch_fallback(path: Sequence[cst.CSTNode]) -> bool:
    """``torch.accelerator.current_accelerator().type if hasattr(torch, "accelerator") else
    "cuda"``: the literal only stands in for the accelerator API on an older torch."""
    literal, parent = path[-1], path[-2] if len(path) > 1 else None
    return (isinstance(parent, cst.IfExp) and parent.orelse is literal
            and "accelerator" in code_of(parent.body) + code_of(parent.test))


def cuda_string(node: cst.BaseExpression) -> str | None:
    """``"plain"`` for ``"cuda"``, ``"indexed"`` for ``"cuda:1"``, ``f"cuda:{rank}"``,
    ``"cuda:%d" % rank``, ``"cuda:" + str(rank)`` or ``"cuda:{}".format(rank)``; else None."""
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value
        if isinstance(text, bytes):
            return None
        if text == "cuda":
            return "plain"
        return "indexed" if text.startswith("cuda:") else None
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda"):
            return "plain" if first.value == "cuda" and len(node.parts) == 1 else "indexed"
        return None
    if isinstance(node, cst.ConcatenatedString):
        return "indexed" if cuda_string(node.left) else None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        return "indexed" if cuda_string(node.left) else None
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
    ):
        return "indexed" if cuda_string(node.func.value) else None
    return None


def _branches(
    value: cst.BaseExpression, ancestors: tuple[cst.CSTNode, ...]
) -> Iterator[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]]:
    """The expressions ``value`` may evaluate to, through conditional expressions and
    ``and``/``or``, each with its full ancestor path (for the guard check)."""
    path = (*ancestors, value)
    if isinstance(value, cst.IfExp):
        yield from _branches(value.body, path)
        yield from _branches(value.orelse, path)
    elif isinstance(value, cst.BooleanOperation):
        yield from _branches(value.left, path)
        yield from _branches(value.right, path)
    else:
        yield value, path


def _consumer(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, cst.CSTNode]:
    """What the value of the innermost node goes to, through conditional expressions and
    ``and``/``or``: (that node, the value as it is passed there)."""
    child = ancestors[-1]
    for index in range(len(ancestors) - 2, -1, -1):
        parent = ancestors[index]
        if (isinstance(parent, cst.IfExp) and child is not parent.test) or isinstance(
            parent, cst.BooleanOperation
        ):
            child = parent
            continue
        if isinstance(parent, cst.Arg) and index > 0:
            return parent, ancestors[index - 1]
        if (  # `rank, dev = 0, torch.device("cuda")`
            isinstance(parent, cst.Element)
            and index > 1
            and isinstance(ancestors[index - 1], cst.Tuple)
            and isinstance(ancestors[index - 2], cst.Assign)
        ):
            return ancestors[index - 2], ancestors[index - 1]
        return parent, child
    return child, child


def _expects_error(item: cst.BaseExpression) -> bool:
    """``pytest.raises(...)``, ``self.assertRaises(...)``, ``assertRaisesRegex(...)``."""
    return isinstance(item, cst.Call) and _callee_name(item.func) in (
        "raises", "assertRaises", "assertRaisesRegex")


def _gpu_marked_param(call: cst.Call) -> bool:
    """``pytest.param(torch.device("cuda"), marks=RunIf(min_cuda_gpus=1))``: the case only
    runs where a GPU is."""
    return code_of(call.func).rsplit(".", 1)[-1] == "param" and any(
        a.keyword is not None and a.keyword.value == "marks"
        and re.search(r"(?i)cuda|gpu", code_of(a.value))
        for a in call.args
    )


def _takes_device_type(qualified: str) -> bool:
    """APIs that take a device *type* and disable themselves without it: autocast,
    GradScaler, and mixed-precision wrappers around them (``MixedPrecision(device="cuda")``)."""
    last = qualified.rsplit(".", 1)[-1].lower()
    return "autocast" in last or "mixedprecision" in last or last.endswith("gradscaler")


def _builds_config(call: cst.Call) -> bool:
    """``dict(device="cuda")``, ``parser.set_defaults(device=...)``, ``Namespace(...)``:
    keywords that become configuration entries, like the values of a dict literal."""
    return _callee_name(call.func) in ("dict", "set_defaults", "Namespace", "SimpleNamespace", "update")


def _callee_name(func: cst.BaseExpression) -> str:
    """The last name of what is called (``update`` of ``a.b(x).update``): what the checks
    above need, without generating the code of a receiver chain on every call in it."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _is_cuda_api(qualified: str) -> bool:
    return qualified.startswith(("torch.cuda.", "torch.backends."))


def _moved(path: Sequence[cst.CSTNode]) -> str | None:
    """The receiver of ``x.to("cuda")`` (the first argument of ``move_to(x, "cuda")``),
    whose own ``.device`` is no answer."""
    for node in reversed(path):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "to":
                return code_of(func.value)
            if _MOVER.search(_callee_name(func)) and node.args:
                return code_of(node.args[0].value)
            return None
    return None


def _rebound_before_read(ctx, module: cst.Module, line: cst.CSTNode, name: str) -> cst.CSTNode | None:
    """The first top-level statement after ``line`` that names ``name``, when it binds it
    again and reads it, if at all, only where CUDA is present (``device = "cuda:0"``, then
    ``device = "cuda:0" if ... else "cpu"`` or ``torch.device(device if
    torch.cuda.is_available() else "cpu")``): without CUDA the first value is never read. The
    statements naming each name are read once per file."""
    naming = ctx.once(("TDL002: top-level statements by name",), lambda: _statements_by_name(module))
    where = ctx.once(("TDL002: top-level positions",), lambda: {id(s): i for i, s in enumerate(module.body)})
    position = where.get(id(line))
    positions = naming.get(name, [])
    after = bisect.bisect_right(positions, position) if position is not None else len(positions)
    if after == len(positions):
        return None
    statement = module.body[positions[after]]
    assign = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
        else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name) and assign.targets[0].target.value == name):
        return None
    reads = [path for path in _paths_to(assign.value, name)]
    return statement if all(is_guarded(path, ctx.qualified_name) for path in reads) else None


def _paths_to(node: cst.CSTNode, name: str, above: tuple[cst.CSTNode, ...] = ()) -> Iterator[tuple]:
    """The path from ``node`` down to each read of ``name`` in it."""
    path = (*above, node)
    if isinstance(node, cst.Name) and node.value == name:
        yield path
        return
    for child in tree.children(node):
        if not (isinstance(node, cst.Attribute) and child is node.attr):
            yield from _paths_to(child, name, path)


def _statements_by_name(module: cst.Module) -> dict[str, list[int]]:
    """Each name -> the positions of the top-level statements that name it, in order."""
    found: dict[str, list[int]] = {}
    for index, statement in enumerate(module.body):
        for name in {n.value for n in tree.collect(statement, cst.Name)}:
            found.setdefault(name, []).append(index)
    return found


def _unread_local(path) -> tuple[cst.CSTNode, str] | None:
    """``DEVICE = "cuda"`` in a function that never reads ``DEVICE`` (a name of its own, not
    declared ``global``): the device places nothing."""
    function = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
    assign = next((n for n in reversed(path) if isinstance(n, cst.Assign)), None)
    if function is None or assign is None or path.index(assign) < path.index(function) \
            or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    target = assign.targets[0].target
    name = target.value
    if any(name in {n.name.value for n in g.names} for g in tree.collect(function.body, cst.Global)):
        return None
    if any(n.value == name and n is not target for n in tree.collect(function.body, cst.Name)):
        return None
    return assign, f"`{name}` is never read in `{function.name.value}`: the device places nothing"
