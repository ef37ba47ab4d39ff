"""Guards by meaning: code counts as guarded only in the branch that runs where an
accelerator is wanted or present. Each case is checked through TDL001 (`.cuda()`), as a
user sees it: flagged at its line, or not flagged at all."""

import textwrap

import pytest

import libcst as cst

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.analysis import conditions, guards
from torchdev_lint.analysis.conditions import ACCELERATOR, CPU, UNKNOWN
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

TDL001 = Rule.registry["TDL001"]


def cuda_lines(code: str) -> list[int]:
    result = lint_source("example.py", textwrap.dedent(code), [TDL001], preview=True)
    assert result.error is None
    return [f.line for f in result.findings]


GUARDED = {
    "exactly one gpu asked for": """
        if args.ngpu == 1:
            model.cuda()
    """,
    "an option that wraps the model for several gpus": """
        import torch.nn as nn
        if config.get("parallel", False):
            model = nn.DataParallel(model).cuda()
    """,
    "availability": """
        import torch
        if torch.cuda.is_available():
            x = x.cuda()
    """,
    "imported availability": """
        from torch.cuda import is_available
        if is_available():
            x = x.cuda()
    """,
    "else of not available": """
        import torch
        if not torch.cuda.is_available():
            x = x.cpu()
        else:
            x = x.cuda()
    """,
    "elif after cpu flag": """
        if args.cpu:
            pass
        elif args.fp16:
            model = model.cuda().half()
    """,
    "not cpu flag": """
        if not args.cpu:
            model.cuda()
    """,
    "not cfg.common.cpu": """
        if not cfg.common.cpu:
            model.cuda()
    """,
    "not no_cuda and available": """
        if not args.no_cuda and torch.cuda.is_available():
            model.cuda()
    """,
    "use_cuda flag": """
        def f(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()
            return x
    """,
    "gpu index not None": """
        if args.gpu is not None:
            model.cuda(args.gpu)
    """,
    "gpu index >= 0": """
        if args.gpu >= 0:
            model.cuda(args.gpu)
    """,
    "len of gpu ids": """
        if len(gpu_ids) > 0:
            net.cuda(gpu_ids[0])
    """,
    "device count": """
        import torch
        if torch.cuda.device_count() > 0:
            model.cuda()
    """,
    "device count > 1 (true branch)": """
        import torch
        if torch.cuda.device_count() > 1:
            model.cuda()
    """,
    "is_cuda": """
        if x.is_cuda:
            y = y.cuda()
    """,
    "device type": """
        if x.device.type == "cuda":
            y = y.cuda()
    """,
    "device not cpu": """
        if device != "cpu":
            y = y.cuda()
    """,
    "device in tuple": """
        if device.type in ("cuda", "xpu"):
            y = y.cuda()
    """,
    "string contains": """
        if "cuda" in str(device):
            y = y.cuda()
    """,
    "startswith": """
        if str(device).startswith("cuda"):
            y = y.cuda()
    """,
    "mps availability or cuda": """
        import torch
        if torch.cuda.is_available() or torch.backends.mps.is_available():
            y = y.cuda()
    """,
    "torch.accelerator": """
        import torch
        if torch.accelerator.is_available():
            y = y.cuda()
    """,
    "option dict": """
        if opt["cuda"]:
            y = y.cuda()
    """,
    "ternary": """
        y = y.cuda() if use_gpu else y
    """,
    "ternary else of cpu": """
        y = y if args.cpu else y.cuda()
    """,
    "and operand": """
        self.use_gpu and model.cuda()
    """,
    "early return": """
        import torch
        def f(x):
            if not torch.cuda.is_available():
                return x
            return x.cuda()
    """,
    "early pytest.skip": """
        import pytest, torch
        def test_it(x):
            if not torch.cuda.is_available():
                pytest.skip("needs a GPU")
            x.cuda()
    """,
    "early sys.exit": """
        import sys, torch
        if not torch.cuda.is_available():
            sys.exit("needs a GPU")
        model.cuda()
    """,
    "assert count above rank": """
        import torch
        assert torch.cuda.device_count() > LOCAL_RANK, "insufficient CUDA devices"
        device = torch.zeros(1).cuda(LOCAL_RANK)
    """,
    "assert": """
        import torch
        def f(x):
            assert torch.cuda.is_available()
            return x.cuda()
    """,
    "skipIf": """
        import unittest, torch
        class T(unittest.TestCase):
            @unittest.skipIf(not torch.cuda.is_available(), "no GPU")
            def test_move(self):
                torch.zeros(2).cuda()
    """,
    "skipUnless": """
        import unittest, torch
        @unittest.skipUnless(torch.cuda.is_available(), "no GPU")
        def test_move():
            torch.zeros(2).cuda()
    """,
    "pytest skipif": """
        import pytest, torch
        @pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
        def test_move():
            torch.zeros(2).cuda()
    """,
    "pytest skipif string": """
        import pytest, torch
        @pytest.mark.skipif("not torch.cuda.is_available()")
        def test_move():
            torch.zeros(2).cuda()
    """,
    "RunIf": """
        @RunIf(min_cuda_gpus=1)
        def test_move():
            torch.zeros(2).cuda()
    """,
    "require_torch_gpu": """
        @require_torch_gpu
        def test_move():
            torch.zeros(2).cuda()
    """,
    "cuda override": """
        class Buffers:
            def cuda(self, device=None):
                self.mask = self.mask.cuda(device)
                return self
    """,
    "accelerator-named helper": """
        def to_gpu(batch):
            return batch.cuda()
    """,
    "flag not the cpu": """
        device = flag if flag in ("cpu", "mps") else torch.zeros(1).cuda()
    """,
    "nccl backend": """
        import torch
        if torch.distributed.get_backend(group) == "nccl":
            x = x.cuda()
    """,
    "triton support": """
        import pytest
        def test_matmul():
            if not get_accelerator().is_triton_supported():
                pytest.skip("no triton")
            torch.zeros(2).cuda()
    """,
    "pytest.param marks": """
        import pytest, torch
        CASES = [torch.zeros(1), pytest.param(torch.zeros(1).cuda(), marks=RunIf(min_cuda_gpus=1))]
    """,
    "while": """
        while torch.cuda.is_available() and todo:
            todo.pop().cuda()
    """,
}

NOT_GUARDED = {
    "autocast decorator": """
        import torch
        @torch.amp.autocast("cuda")
        def step(x):
            return x.cuda()
    """,
    "cuda.amp autocast decorator": """
        import torch
        @torch.cuda.amp.autocast()
        def step(x):
            return x.cuda()
    """,
    "inference_mode decorator": """
        import torch
        @torch.inference_mode()
        def step(x):
            return x.cuda()
    """,
    "not available": """
        import torch
        if not torch.cuda.is_available():
            x = x.cuda()
    """,
    "not is_cuda": """
        if not x.is_cuda:
            x = x.cuda()
    """,
    "device is cpu": """
        if device == "cpu":
            x = x.cuda()
    """,
    "else of available": """
        import torch
        if torch.cuda.is_available():
            pass
        else:
            x = x.cuda()
    """,
    "device differs from cuda": """
        import torch
        if attr.device != torch.device("cuda"):
            attr = attr.cuda()
    """,
    "output is not None": """
        if output is not None:
            x = x.cuda()
    """,
    "input substring": """
        if input_ids is not None and inputs:
            x = x.cuda()
    """,
    "timestamps substring": """
        if timestamps:
            x = x.cuda()
    """,
    "cpu flag": """
        if args.cpu:
            model.cuda()
    """,
    "no_cuda flag": """
        if args.no_cuda:
            model.cuda()
    """,
    "unrelated test": """
        if args.distributed:
            model.cuda()
    """,
    "device only truthy": """
        if device:
            model.cuda()
    """,
    "early exit on the wrong polarity": """
        import torch
        def f(x):
            if torch.cuda.is_available():
                return x
            return x.cuda()
    """,
    "skipIf available": """
        import unittest, torch
        @unittest.skipIf(torch.cuda.is_available(), "CPU only")
        def test_move():
            torch.zeros(2).cuda()
    """,
    "skip_if_cuda": """
        @skip_if_cuda
        def test_move():
            torch.zeros(2).cuda()
    """,
    "or with unknown": """
        if torch.cuda.is_available() or force:
            model.cuda()
    """,
    "test named for cuda": """
        def test_cuda_move():
            torch.zeros(2).cuda()
    """,
    "flag in cpu list": """
        device = torch.zeros(1).cuda() if flag in ("cpu", "mps") else flag
    """,
    "pytest.param without a selecting mark": """
        import pytest, torch
        CASES = [pytest.param(torch.zeros(1).cuda(), marks=pytest.mark.slow)]
    """,
    "gloo backend": """
        import torch
        if torch.distributed.get_backend(group) == "gloo":
            x = x.cuda()
    """,
    "ternary cpu branch": """
        y = y.cuda() if args.cpu else y
    """,
    # another count than one GPU, or the branch where the user did not ask for the one
    "else of exactly one gpu": """
        if args.ngpu == 1:
            pass
        else:
            model.cuda()
    """,
    # the wrapper is built in another statement's branch, or the option says the CPU
    "data parallel in the other branch": """
        import torch.nn as nn
        if config.get("parallel", False):
            model = nn.DataParallel(model)
        else:
            model = model.cuda()
    """,
    "cpu option wrapping anyway": """
        import torch.nn as nn
        if args.cpu:
            model = nn.DataParallel(model).cuda()
    """,
}


@pytest.mark.parametrize("code", GUARDED.values(), ids=GUARDED.keys())
def test_guarded_code_is_not_flagged(code):
    assert cuda_lines(code) == []


@pytest.mark.parametrize("code", NOT_GUARDED.values(), ids=NOT_GUARDED.keys())
def test_unguarded_code_is_flagged(code):
    assert len(cuda_lines(code)) == 1


def implies(text: str, holds: bool = True):
    return conditions.implies(cst.parse_expression(text), holds)


@pytest.mark.parametrize(
    "text, when_true, when_false",
    [
        ("torch.cuda.is_available()", ACCELERATOR, CPU),
        ("not torch.cuda.is_available() or args.cpu", CPU, ACCELERATOR),
        # when it holds the machine has CUDA, whatever the user wished: the availability is a fact
        ("torch.cuda.is_available() and args.cpu", ACCELERATOR, UNKNOWN),
        ("args.ngpu > 1", ACCELERATOR, UNKNOWN),
        ("args.ngpu == 1", ACCELERATOR, UNKNOWN),  # otherwise none, or several
        ("args.ngpu != 2", UNKNOWN, ACCELERATOR),
        ("n_gpu == 0", CPU, ACCELERATOR),
        ("args.gpu < 0", CPU, ACCELERATOR),
        ("device_type == DeviceType.CUDA", ACCELERATOR, UNKNOWN),  # else: the CPU, or MPS, XPU...
        ("device_type != DeviceType.CPU", ACCELERATOR, CPU),
        ("output is not None", UNKNOWN, UNKNOWN),
        ("use_cpu", CPU, ACCELERATOR),
    ],
)
def test_what_a_condition_says(text, when_true, when_false):
    assert (implies(text, True), implies(text, False)) == (when_true, when_false)


ON_CPU = {
    "cpu branch": "if device.type == 'cpu':\n    y = x\n",
    "else of availability": "if torch.cuda.is_available():\n    pass\nelse:\n    y = x\n",
    "after an exit on an accelerator": "if use_cuda:\n    raise SystemExit\ny = x\n",
    "right of and": "args.cpu and print(x)\n",
    "device constant compared": "if self.device == torch.device('cpu'):\n    y = x\n",
    "else of an accelerator test": "if device.type != 'cpu':\n    pass\nelse:\n    y = x\n",
}
NOT_ON_CPU = {
    "accelerator branch": "if device.type == 'cuda':\n    y = x\n",
    "else of a cpu test": "if device.type == 'cpu':\n    pass\nelse:\n    y = x\n",
    "unknown test": "if output is not None:\n    y = x\n",
    "plain code": "y = x\n",
    # Not CUDA is not the CPU: an Apple or Intel GPU is neither.
    "not cuda": "if device.type != 'cuda':\n    y = x\n",
    "else of a cuda test": "if device == 'cuda':\n    pass\nelse:\n    y = x\n",
    "cuda not in the name": "if 'cuda' not in str(device):\n    y = x\n",
    "does not start with cuda": "if not str(device).startswith('cuda'):\n    y = x\n",
    "not one of two accelerators": "if device.type not in ('cuda', 'xpu'):\n    y = x\n",
}


def innermost_x_path(code: str) -> list[cst.CSTNode]:
    """The ancestors of the last use of the name `x`, module first."""
    found: list[list[cst.CSTNode]] = []

    def walk(node, path):
        path = [*path, node]
        if isinstance(node, cst.Name) and node.value == "x":
            found.append(path)
        for child in node.children:
            walk(child, path)

    walk(cst.parse_module(code), [])
    return found[-1]


@pytest.mark.parametrize("code", ON_CPU.values(), ids=ON_CPU.keys())
def test_code_that_runs_only_on_the_cpu(code):
    assert guards.runs_on_cpu(innermost_x_path(code))


@pytest.mark.parametrize("code", NOT_ON_CPU.values(), ids=NOT_ON_CPU.keys())
def test_code_that_may_run_on_an_accelerator(code):
    assert not guards.runs_on_cpu(innermost_x_path(code))
