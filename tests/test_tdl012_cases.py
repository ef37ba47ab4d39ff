"""TDL012 (parameter-not-a-parameter): which moves of a new `nn.Parameter` make a plain
copy, rebindings to such a copy, CPU generators handed to samplers on a device; and the fix,
run for real: after it the parameter is registered and trained."""

import importlib.util
import shutil
import subprocess
import sys
import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from conftest import ROOT
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability, Confidence
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL012"]
HEAD = "import torch\nimport torch.nn as nn\n"


def lint(code, preview=True):
    return lint_source("example.py", HEAD + textwrap.dedent(code), [RULE], preview=preview)


def positions(code):
    """(line, column) of each finding, lines counted after the two import lines."""
    return [(f.line - 2, f.column) for f in lint(code).findings]


@pytest.mark.parametrize("code", [
    # The move inside the Parameter, or a conversion that returns the same float32 tensor.
    "w = nn.Parameter(torch.zeros(3).cuda())\n",
    "w = nn.Parameter(torch.zeros(3)).float()\n",
    "w = nn.Parameter(torch.zeros(3)).to(torch.float32)\n",
    "w = nn.Parameter(torch.zeros(3)).cpu()\n",
    "w = nn.Parameter(torch.zeros(3)).to('cpu')\n",
    # `.to(x)` with a name that does not say device: may be a tensor or a dtype.
    "w = nn.Parameter(torch.zeros(3)).to(x)\n",
    "w = nn.Parameter(torch.zeros(3)).to(self.dtype)\n",
    # The data moved, the Parameter kept.
    "w = nn.Parameter(torch.zeros(3))\nw.data = w.data.cuda()\n",
    # A name rebound in between holds no Parameter any more.
    "w = nn.Parameter(torch.zeros(3))\nw = torch.ones(3)\nw = w.cuda()\n",
    # Another name's move.
    "w = nn.Parameter(torch.zeros(3))\nv = w.cuda()\n",
    # Generators that live where they sample, or samplers on the CPU.
    "g = torch.Generator(device=device)\nx = torch.randn(3, device=device, generator=g)\n",
    "g = torch.Generator('cuda')\nx = torch.randn(3, device='cuda', generator=g)\n",
    "g = torch.Generator()\nx = torch.randn(3, generator=g)\n",
    "g = torch.Generator()\nx = torch.randn(3, device=torch.device('cpu'), generator=g)\n",
    "def f(device):\n    g = torch.Generator()\n    if device.type == 'cpu':\n"
    "        return torch.rand(3, device=device, generator=g)\n",
    # Bound to something else too: which generator it is depends on the path.
    "g = torch.Generator()\nif use_cuda:\n    g = torch.Generator(device='cuda')\n"
    "x = torch.randn(3, device='cuda', generator=g)\n",
    # A parameter of unknown kind.
    "def f(g, device):\n    return torch.randn(3, device=device, generator=g)\n",
])
def test_not_flagged(code):
    assert positions(code) == []


@pytest.mark.parametrize("code, where", [
    ("w = nn.Parameter(torch.zeros(3)).cuda()\n", [(1, 5)]),
    ("w = nn.Parameter(torch.zeros(3)).to(device)\n", [(1, 5)]),
    ("w = nn.Parameter(torch.zeros(3)).to(device=dev)\n", [(1, 5)]),
    ("w = nn.Parameter(torch.zeros(3)).to('cuda:1')\n", [(1, 5)]),
    ("w = nn.Parameter(torch.zeros(3)).to(torch.float16)\n", [(1, 5)]),
    ("w = nn.Parameter(torch.zeros(3)).bfloat16()\n", [(1, 5)]),
    ("from torch.nn import Parameter\nw = Parameter(torch.zeros(3)).xpu()\n", [(2, 5)]),
    ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.register_parameter('w', nn.Parameter(torch.zeros(3)).cuda())\n", [(4, 38)]),
    # Rebinding: a local name, or the attribute of a module.
    ("def f(device):\n    w = nn.Parameter(torch.zeros(3))\n    w = w.to(device)\n    return w\n",
     [(3, 9)]),
    ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.w = nn.Parameter(torch.zeros(3))\n        self.w = self.w.half()\n", [(5, 18)]),
    # Generators: inline, seeded, in a function.
    ("x = torch.rand(3, device='cuda', generator=torch.Generator().manual_seed(1))\n", [(1, 5)]),
    ("g = torch.Generator(device='cpu')\nx = torch.randint(0, 5, (3,), device=dev, generator=g)\n",
     [(2, 5)]),
    ("def f(n, device):\n    g = torch.Generator()\n    g.manual_seed(0)\n"
     "    return torch.randperm(n, device=device, generator=g)\n", [(4, 12)]),
])
def test_flagged(code, where):
    assert positions(code) == where


def test_findings_are_possible_and_carry_their_evidence():
    result = lint("w = nn.Parameter(torch.zeros(3)).cuda()\n")
    (finding,) = result.findings
    assert finding.confidence is Confidence.POSSIBLE
    assert [(e.line, e.column) for e in finding.evidence] == [(3, 5), (3, 34)]
    assert "Parameter is built here" in finding.evidence[0].message
    assert lint("w = nn.Parameter(torch.zeros(3)).cuda()\n", preview=False).findings == []


def fixed(code, unsafe=False):
    result = lint(code)
    outcome = fix_file(result, unsafe=unsafe)
    assert outcome.error is None
    return outcome.source[len(HEAD):]


@pytest.mark.parametrize("code, after", [
    ("w = nn.Parameter(torch.zeros(3)).cuda()\n", "w = nn.Parameter(torch.zeros(3).cuda())\n"),
    ("w = nn.Parameter(a + b, requires_grad=False).to(device, non_blocking=True)\n",
     "w = nn.Parameter((a + b).to(device, non_blocking=True), requires_grad=False)\n"),
    ("w = nn.Parameter(data=t).half()  # keep\n", "w = nn.Parameter(data=t.half())  # keep\n"),
    ("w: nn.Parameter = nn.Parameter(\n    torch.randn(2, 2) * 0.1,\n).cuda()\n",
     "w: nn.Parameter = nn.Parameter(\n    (torch.randn(2, 2) * 0.1).cuda(),\n)\n"),
    ("def f():\n    return (nn.Parameter(t).cuda())\n", "def f():\n    return (nn.Parameter(t.cuda()))\n"),
])
def test_safe_fix_moves_the_tensor_inside(code, after):
    (finding,) = lint(code).findings
    assert finding.fix.applicability is Applicability.SAFE
    assert fixed(code) == after
    assert lint(after).findings == []


def test_fix_is_unsafe_where_the_copy_is_not_the_whole_value():
    code = "params = [nn.Parameter(torch.zeros(3)).cuda(), other]\n"
    (finding,) = lint(code).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert fixed(code) == code  # not applied without --unsafe-fixes
    assert fixed(code, unsafe=True) == "params = [nn.Parameter(torch.zeros(3).cuda()), other]\n"


def test_no_fix_for_rebinding_or_generators():
    for code in ("w = nn.Parameter(torch.zeros(3))\nw = w.cuda()\n",
                 "g = torch.Generator()\nx = torch.randn(3, device='cuda', generator=g)\n"):
        (finding,) = lint(code).findings
        assert finding.fix is None


PROGRAM = ROOT / "testdata" / "rules" / "tdl012_before.py"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_fix_makes_the_parameter_trainable(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")

    def run():
        done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    before = run()
    assert "parameters: []" in before and "leaf: False" in before
    assert "gamma: [1.0, 1.0, 1.0]" in before  # never trained
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL012", program)
    assert status == 1 and "TDL012" in out, out + err
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL012", "--fix", program)
    assert status == 0, out + err
    assert "nn.Parameter(torch.ones(n, dtype=torch.float32).double())" in program.read_text()
    after = run()
    assert "parameters: ['gamma']" in after and "leaf: True" in after
    assert "gamma: [1.0, 1.0, 1.0]" not in after  # the optimizer now trains it


def test_a_frozen_parameter_used_once_is_a_constant_but_kept_it_is_the_bug():
    used_once = """\
    class PositionalEncoding(nn.Module):
        def forward(self, x):
            return x + nn.Parameter(self.pe, requires_grad=False).to(self.device)
    """
    assert positions(used_once) == []
    kept = """\
    class PositionalEncoding(nn.Module):
        def __init__(self, pe, device):
            super().__init__()
            self.pe = nn.Parameter(pe, requires_grad=False).to(device)
    """
    assert positions(kept) == [(4, 19)]
