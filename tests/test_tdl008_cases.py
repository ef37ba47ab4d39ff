"""TDL008 factory-without-device-in-forward: the shapes real models take, beyond the
rule's own examples: aliases, layouts and comments, nested functions, helpers that forward
calls (and the tensors it passes them), values moved later, and what is left alone."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL008"]
HEAD = "import torch\nimport torch.nn as nn\n"


def module(body, head=HEAD):
    return head + "class Net(nn.Module):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def findings(code):
    return [(f.line, f.column) for f in lint_source("t.py", code, [RULE]).findings]


def fixed(code, unsafe=True):
    result = lint_source("t.py", code, [RULE])
    outcome = fix_file(result, unsafe=unsafe)
    assert outcome.error is None
    assert lint_source("t.py", outcome.source, [RULE]).findings == [] or not unsafe
    return outcome.source


# -- what is flagged -----------------------------------------------------------------------

@pytest.mark.parametrize("factory", [
    "torch.zeros(3)", "torch.ones(2, 3)", "torch.empty(4)", "torch.full((2,), 1.0)",
    "torch.arange(5)", "torch.rand(3)", "torch.randn(3)", "torch.randint(0, 5, (3,))",
    "torch.randperm(3)", "torch.eye(3)", "torch.linspace(0, 1, 3)", "torch.logspace(0, 1, 3)",
    "torch.tensor([1.0, 2.0, 3.0])", "torch.as_tensor([1, 2, 3])",
])
def test_each_factory_is_flagged(factory):
    code = module(f"def forward(self, x, values=None):\n    return x + {factory}\n")
    assert findings(code) == [(5, 20)]


def test_alias_and_from_import():
    code = (
        "import torch as T\nfrom torch import zeros, nn\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + T.ones(3) + zeros(3)\n"
    )
    assert fixed(code) == code.replace("T.ones(3)", "T.ones(3, device=x.device)").replace(
        "zeros(3)", "zeros(3, device=x.device)"
    )


def test_multi_line_call_with_comments_keeps_its_layout():
    code = module(
        "def forward(self, x):\n"
        "    mask = torch.ones(\n"
        "        x.size(0),  # batch\n"
        "        x.size(1),  # time\n"
        "        dtype=torch.bool,\n"
        "    )\n"
        "    return x * mask\n"
    )
    assert fixed(code) == module(
        "def forward(self, x):\n"
        "    mask = torch.ones(\n"
        "        x.size(0),  # batch\n"
        "        x.size(1),  # time\n"
        "        dtype=torch.bool,\n"
        "        device=x.device,\n"
        "    )\n"
        "    return x * mask\n"
    )


def test_one_line_call_with_a_trailing_comment():
    code = module("def forward(self, x):\n    return x + torch.zeros(3)  # bias\n")
    assert fixed(code) == code.replace("torch.zeros(3)", "torch.zeros(3, device=x.device)")


def test_nested_function_in_forward_uses_the_input_it_closes_over():
    code = module(
        "def forward(self, x):\n"
        "    def pad(n):\n"
        "        return torch.zeros(n)\n"
        "    return torch.cat([x, pad(2)])\n"
    )
    assert findings(code) == [(6, 20)]
    assert "torch.zeros(n, device=x.device)" in fixed(code)


def test_nested_function_that_rebinds_the_name_is_left_alone():
    code = module(
        "def forward(self, x):\n"
        "    def pad(x):\n"
        "        return torch.zeros(x)\n"
        "    return torch.cat([x, pad(2)])\n"
    )
    assert findings(code) == []


def test_lambda_in_forward():
    code = module("def forward(self, x):\n    pad = lambda n: torch.zeros(n)\n    return pad(3) + x\n")
    assert "torch.zeros(n, device=x.device)" in fixed(code)


def test_helper_called_from_forward_with_a_tensor():
    code = module(
        "def forward(self, tokens):\n"
        "    return self.embed(tokens) + self.positions(tokens)\n"
        "def positions(self, ids):\n"
        "    return torch.arange(ids.size(1))\n"
    )
    assert findings(code) == [(7, 16)]
    assert "torch.arange(ids.size(1), device=ids.device)" in fixed(code)


def test_helpers_called_through_helpers_and_by_keyword():
    code = module(
        "def forward(self, x):\n"
        "    return self.first(x)\n"
        "def first(self, h):\n"
        "    return self.second(scale=2, inp=h)\n"
        "def second(self, scale, inp):\n"
        "    return inp * torch.full((3,), scale)\n"
    )
    assert findings(code) == [(9, 22)]
    assert "torch.full((3,), scale, device=inp.device)" in fixed(code)


def test_static_helper():
    code = module(
        "def forward(self, x):\n"
        "    return self.pad(x)\n"
        "@staticmethod\n"
        "def pad(t):\n"
        "    return torch.cat([t, torch.zeros(1)])\n"
    )
    assert "torch.zeros(1, device=t.device)" in fixed(code)


def test_helper_without_a_tensor_input_is_left_alone():
    code = module(
        "def forward(self, x):\n"
        "    return x + self.grid(x.size(1))\n"
        "def grid(self, n):\n"
        "    return torch.arange(n)\n"
    )
    assert findings(code) == []


def test_helper_not_called_from_forward_is_left_alone():
    code = module(
        "def forward(self, x):\n"
        "    return x\n"
        "def reset(self, x):\n"
        "    return torch.zeros(3) + x\n"
    )
    assert findings(code) == []


def test_dtype_only_to_is_no_move():
    code = module("def forward(self, x):\n    return x + torch.arange(3).to(torch.float16)\n")
    assert findings(code) == [(5, 20)]


def test_prefers_an_input_without_a_default_and_the_fix_is_then_still_unsafe_for_random():
    code = module("def forward(self, mask=None, x=None, *, y):\n    return y + torch.rand(3)\n")
    (finding,) = lint_source("t.py", code, [RULE]).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert "torch.rand(3, device=y.device)" in fixed(code)


def test_safety_follows_the_factory_and_what_is_known_about_the_input():
    def applicability(body):
        (finding,) = lint_source("t.py", module(body), [RULE]).findings
        return finding.fix.applicability

    assert applicability("def forward(self, x: torch.Tensor):\n    return x + torch.zeros(3)\n") \
        is Applicability.SAFE
    assert applicability("def forward(self, x):\n    d = x.device\n    return x + torch.zeros(3)\n") \
        is Applicability.SAFE
    assert applicability("def forward(self, x):\n    return x + torch.zeros(3)\n") \
        is Applicability.UNSAFE
    assert applicability("def forward(self, x: torch.Tensor):\n    return x + torch.randn(3)\n") \
        is Applicability.UNSAFE


def test_nested_module_classes():
    code = HEAD + (
        "class Outer(nn.Module):\n"
        "    class Inner(nn.Module):\n"
        "        def forward(self, x):\n"
        "            return x + torch.ones(1)\n"
        "    def forward(self, y):\n"
        "        return y + torch.zeros(1)\n"
    )
    assert findings(code) == [(6, 24), (8, 20)]


# -- what is not flagged -------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "def forward(self, x):\n    return x + torch.ones_like(x) + torch.rand_like(x)\n",
    "def forward(self, x):\n    return x + torch.arange(3).to(x)\n",
    "def forward(self, x):\n    return x + torch.arange(3).float().cuda()\n",
    "def forward(self, x):\n    return x + torch.arange(3).type_as(x)\n",
    "def forward(self, x):\n    n = torch.randint(0, 4, (1,)).item()\n    return x[n]\n",
    "def forward(self, x):\n    assert torch.tensor([0.0]).dtype == torch.float32\n    return x\n",
    "def forward(self, x):\n    return x * torch.tensor(-float('inf')) + torch.tensor(math.pi)\n",
    "def forward(self, x):\n    return x * torch.zeros(()) + torch.full((), 2.0)\n",
    "def forward(self, x):\n    i = torch.randint(0, 4, ())\n    j = torch.randint(4, size=())\n    return x[i:j]\n",
    "def forward(self, x):\n    return x * torch.sqrt(torch.tensor(2.0 / torch.pi))\n",
    "def forward(self, x):\n    return x, torch.empty(0)\n",
    "def forward(self, x):\n    return torch.tensor(x)\n",
    "def forward(self, x):\n    return x + torch.zeros(3, device=None)\n",
    "def forward(self, x):\n    return torch.zeros(3, out=x)\n",
    "def forward(self, x, **kw):\n    return x + torch.zeros(3, **kw)\n",
    "def forward(self, x):\n    with torch.device(x.device):\n        return x + torch.zeros(3)\n",
    "def forward(self, *inputs):\n    return torch.zeros(3)\n",
    "def forward(self, n: int):\n    return torch.zeros(n)\n",
    "def forward(self, x):\n    x = x.tolist()\n    return torch.tensor(x)\n",
    # Built on the CPU, moved before it leaves.
    "def forward(self, x):\n    pe = torch.zeros(x.size(1), 4)\n    pos = torch.arange(x.size(1))\n"
    "    pe[:, 0] = pos\n    self.pe = pe.to(x.device)\n    return x + self.pe\n",
    # Only an index: PyTorch takes CPU indices for tensors on any device.
    "def forward(self, x):\n    r = torch.randperm(x.size(1))\n    return x[:, r]\n",
    "def forward(self, x):\n    x[torch.tensor([0, 2])] = 0\n    return x\n",
])
def test_not_flagged(body):
    assert findings(module(body, head=HEAD + "import math\n")) == []


def test_helper_whose_callers_move_its_result():
    code = module(
        "def forward(self, x):\n"
        "    return x + self.weights(x).to(x.device)\n"
        "def weights(self, h):\n"
        "    w = torch.zeros(h.size(1))\n"
        "    return w\n"
    )
    assert findings(code) == []


def test_outside_modules_and_outside_forward():
    assert findings(HEAD + "def forward(x):\n    return x + torch.ones(3)\n") == []
    assert findings(HEAD + "class Plain:\n    def forward(self, x):\n        return x + torch.ones(3)\n") == []
    assert findings(module("def __init__(self):\n    super().__init__()\n    self.w = torch.ones(3)\n")) == []


def test_lightning_module_forward():
    code = (
        "import torch\nimport lightning as L\n"
        "class Model(L.LightningModule):\n"
        "    def forward(self, x):\n"
        "        return x + torch.ones(3)\n"
    )
    assert findings(code) == [(5, 20)]
