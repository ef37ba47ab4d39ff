"""TDL008 factory-without-device-in-forward: the shapes real models take, beyond the
rule's own examples: aliases, layouts and comments, nested functions, helpers that forward
calls (and the tensors it passes them), values moved later, and what is left alone."""

import textwrap

import pytest

import conftest
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
    return [(f.line, f.column) for f in lint_source("t.py", code, [RULE], preview=True).findings]


def fixed(code, unsafe=True):
    result = lint_source("t.py", code, [RULE], preview=True)
    outcome = fix_file(result, unsafe=unsafe)
    assert outcome.error is None
    assert lint_source("t.py", outcome.source, [RULE], preview=True).findings == [] or not unsafe
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


@pytest.mark.parametrize("comment", ["", "  # shape"])
def test_a_call_closed_on_its_own_line_without_a_trailing_comma_keeps_its_layout(comment):
    # the new argument goes on the arguments' line; the closing parenthesis stays on its own
    code = module(
        "def forward(self, x):\n"
        "    mask = torch.randint(\n"
        f"        low=0, high=4, size=(x.size(0), 3){comment}\n"
        "    )\n"
        "    return x * mask\n"
    )
    assert fixed(code) == module(
        "def forward(self, x):\n"
        "    mask = torch.randint(\n"
        f"        low=0, high=4, size=(x.size(0), 3),{comment}\n"
        "        device=x.device\n"
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
    (finding,) = lint_source("t.py", code, [RULE], preview=True).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert "torch.rand(3, device=y.device)" in fixed(code)


def test_safety_follows_the_factory_and_what_is_known_about_the_input():
    def applicability(body):
        (finding,) = lint_source("t.py", module(body), [RULE], preview=True).findings
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


# -- following the tensor: CPU-only arithmetic, callees that move it, other files -------------

def test_cpu_only_index_arithmetic_is_left_alone():
    # Negative sampling: indices drawn and shifted on the CPU, meeting only each other and
    # numbers (`high` comes from a shape), then used as an index.
    code = module(
        "def forward(self, y):\n"
        "    bsz, tsz, fsz = y.shape\n"
        "    high = tsz - 1\n"
        "    idxs = torch.randint(low=0, high=high, size=(bsz, 4))\n"
        "    idxs = idxs + torch.arange(bsz).unsqueeze(1) * high\n"
        "    both = torch.cat([idxs, torch.zeros(bsz, 1).long()], dim=1)\n"
        "    return y.view(-1, fsz)[both.view(-1)]\n"
    )
    assert findings(code) == []


def test_cpu_arithmetic_that_then_meets_the_input_is_flagged():
    code = module(
        "def forward(self, y):\n"
        "    bsz, tsz, fsz = y.shape\n"
        "    offsets = torch.arange(bsz).unsqueeze(1) * tsz\n"
        "    return y + offsets\n"
    )
    assert findings(code) == [(6, 19)]


def test_a_number_parameter_is_no_tensor_but_an_unknown_one_may_be():
    quiet = module("def forward(self, x, scale: float):\n    return x[(torch.arange(3) * scale).long()]\n")
    loud = module("def forward(self, x, scale):\n    return x[(torch.arange(3) * scale).long()]\n")
    assert findings(quiet) == []
    assert findings(loud) == [(5, 19)]


def test_padding_a_tensor_the_caller_built_on_the_cpu():
    # The helper's `tensor` only ever receives `torch.LongTensor(...)`: no GPU input.
    code = module(
        "def forward(self, x):\n"
        "    ids = self.pad(torch.LongTensor([1, 2]), 4)\n"
        "    return self.embed(ids)\n"
        "def pad(self, tensor, size):\n"
        "    zero = torch.zeros(size - len(tensor)).long()\n"
        "    return torch.cat((tensor, zero), dim=0)\n"
    )
    assert findings(code) == []
    assert findings(code.replace("self.pad(torch.LongTensor([1, 2]), 4)", "self.pad(x, 4)")) == [(8, 16)]


ROPE = (
    "class Rope(nn.Module):\n"
    "    def forward(self, frame_indices, device):\n"
    "        n = frame_indices.shape[0]\n"
    "        frame_indices = frame_indices.to(device=device, dtype=torch.float32)\n"
    "        return frame_indices[:, None] * torch.arange(n, device=device)\n"
)
USER = (
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.rope = Rope()\n"
    "    def forward(self, x):\n"
    "        idx = torch.arange(x.shape[1]).unsqueeze(0)\n"
    "        return x * self.rope(frame_indices=idx, device=x.device)\n"
)


def test_handed_to_a_submodule_that_moves_it():
    assert findings(HEAD + ROPE + USER) == []


@pytest.mark.parametrize("rope", [
    # uses it before it moves it
    ROPE.replace("n = frame_indices.shape[0]", "n = (frame_indices * self.scale).shape[0]"),
    # moves it only on one branch
    ROPE.replace("        frame_indices = frame_indices.to(", "        if device:\n"
                 "            frame_indices = frame_indices.to("),
    # gives it back unmoved, and the caller mixes it
    "class Rope(nn.Module):\n    def forward(self, frame_indices, device):\n"
    "        return frame_indices.float()\n",
    # hands it to a layer (unknown code)
    "class Rope(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.proj = nn.Linear(4, 4)\n"
    "    def forward(self, frame_indices, device):\n        return self.proj(frame_indices)\n",
])
def test_handed_to_a_submodule_that_does_not_move_it_first(rope):
    code = HEAD + rope + USER
    line = code.splitlines().index("        idx = torch.arange(x.shape[1]).unsqueeze(0)") + 1
    assert findings(code) == [(line, 15)]


def test_handed_to_a_method_of_the_class_that_moves_it():
    code = module(
        "def forward(self, x):\n"
        "    return x + self.place(torch.arange(x.size(1)), x)\n"
        "def place(self, positions, like):\n"
        "    return positions.to(like.device)\n"
    )
    assert findings(code) == []


EMBEDDINGS = """
    import math
    import torch
    import torch.nn as nn

    def timestep_embedding(timesteps, dim: int, max_period: int = 10000):
        half = dim // 2
        exponent = -math.log(max_period) * torch.arange(half, device=timesteps.device)
        freqs = torch.exp(exponent / half)
        emb = timesteps[:, None].float() * freqs[None, :]
        return torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)

    class Timesteps(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.channels = channels

        def forward(self, timesteps):
            return timestep_embedding(timesteps, self.channels)
"""
MODEL = """
    import torch
    import torch.nn as nn
    from .embeddings import Timesteps

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.guidance = Timesteps(8)

        def forward(self, t: torch.Tensor):
            g = self.guidance(torch.tensor([0] * t.shape[0])).to(device=t.device)
            return t + g
"""


def lint_project(root, files, name):
    return conftest.lint_project(root, files, name, RULE)


def test_a_parameterless_submodule_in_another_file_carries_the_value_to_a_move(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/embeddings.py": EMBEDDINGS, "pkg/model.py": MODEL}
    assert lint_project(tmp_path, files, "pkg/model.py") == []
    # Without the project index the submodule is unknown code: flagged.
    assert findings(textwrap.dedent(MODEL)) == [(12, 27)]


@pytest.mark.parametrize("change", [
    # the caller no longer moves the result
    ("g = self.guidance(torch.tensor([0] * t.shape[0])).to(device=t.device)",
     "g = self.guidance(torch.tensor([0] * t.shape[0]))"),
    # the submodule mixes it with its own table
    ("return timestep_embedding(timesteps, self.channels)",
     "return timestep_embedding(timesteps, self.channels) * self.table"),
    # the helper builds its frequencies on another device than the value's
    ("device=timesteps.device", "device=self_device()"),
])
def test_a_submodule_in_another_file_that_lets_it_meet_other_tensors(tmp_path, change):
    old, new = change
    files = {"pkg/__init__.py": "", "pkg/embeddings.py": EMBEDDINGS.replace(old, new),
             "pkg/model.py": MODEL.replace(old, new)}
    assert lint_project(tmp_path, files, "pkg/model.py") == [(12, 27)]


def test_code_two_files_away_is_not_followed(tmp_path):
    # `Timesteps` now calls a helper of a third file: followed one file deep only.
    embeddings = EMBEDDINGS.replace("    def timestep_embedding", "    def unused").replace(
        "import torch.nn as nn\n", "import torch.nn as nn\n    from .helpers import timestep_embedding\n", 1)
    helpers = EMBEDDINGS.split("    class Timesteps")[0]
    files = {"pkg/__init__.py": "", "pkg/embeddings.py": embeddings, "pkg/helpers.py": helpers,
             "pkg/model.py": MODEL}
    assert lint_project(tmp_path, files, "pkg/model.py") == [(12, 27)]


def test_onnx_shape_tensors_are_cpu_data():
    code = module(
        "def forward(self, x):\n"
        "    shape = torch.onnx.operators.shape_as_tensor(x)\n"
        "    bsz, seq_len = shape[0], shape[1]\n"
        "    target = torch.cat((bsz.view(1), seq_len.view(1), torch.tensor([-1], dtype=torch.long)))\n"
        "    return torch.onnx.operators.reshape_from_tensor_shape(x, target)\n"
    )
    assert findings(code) == []


def test_a_long_chain_of_names_is_weighed_conservatively_without_crashing():
    chain = "a0 = torch.arange(3)\n" + "".join(f"a{i} = a{i - 1} + 1\n" for i in range(1, 400))
    code = module("def forward(self, x):\n" + textwrap.indent(chain, "    ")
                  + "    t = torch.zeros(3).long()\n    return x[t + a399]\n")
    result = lint_source("t.py", code, [RULE], preview=True)
    assert result.error is None
    assert (405, 13) in [(f.line, f.column) for f in result.findings]


@pytest.mark.parametrize("helper", [
    # a closure uses the parameter: not followed
    "def place(self, positions, like):\n"
    "    def inner():\n        return positions * like\n"
    "    return positions.to(like.device), inner\n",
    # a call cycle decides nothing
    "def place(self, positions, like):\n    return self.again(positions, like)\n"
    "def again(self, positions, like):\n    return self.place(positions, like)\n",
    # lands in **kwargs: not mapped
    "def place(self, **kw):\n    return kw['positions'].to(kw['like'].device)\n",
])
def test_callees_that_are_not_followed_stay_harmful(helper):
    call = "self.place(positions=torch.arange(x.size(1)), like=x)"
    code = module(f"def forward(self, x):\n    return x + {call}\n" + helper)
    assert findings(code) == [(5, 41)]


# -- what a method returns is followed to the calls the project makes of it ---------------

TABLES = """
    import torch
    import torch.nn as nn

    class Tables(nn.Module):
        def forward(self, x):
            t = torch.arange(x.shape[1]).float()
            return t.cos(), t.sin()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tables = Tables()

        def forward(self, x):
            cos, sin = self.tables(x)
            return x * cos.to(x.device) + x * sin.to(x.device)
"""


def test_a_returned_table_that_every_caller_moves(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/model.py": TABLES}
    assert lint_project(tmp_path, files, "pkg/model.py") == []


@pytest.mark.parametrize("files", [
    # one caller mixes it unmoved
    {"pkg/model.py": TABLES.replace("x * sin.to(x.device)", "x * sin")},
    # the module is handed on, so it may be called anywhere
    {"pkg/model.py": TABLES.replace("return x * cos", "self.last = self.tables\n            return x * cos")},
    # another file of the project imports the class: its callers there are not seen
    {"pkg/model.py": TABLES, "pkg/other.py": "from .model import Tables\n"},
])
def test_a_returned_table_that_a_caller_may_mix(tmp_path, files):
    assert lint_project(tmp_path, {"pkg/__init__.py": "", **files}, "pkg/model.py") == [(7, 13)]


def test_a_returned_table_without_the_project_index_is_flagged():
    assert findings(textwrap.dedent(TABLES)) == [(7, 13)]


SAMPLER = module(
    "def forward(self, y):\n"
    "    a, _ = self.sample(y)\n"
    "    b = self.sample(y)[0]\n"
    "    return a + b\n"
    "def sample(self, y):\n"
    "    idx = torch.randint(0, y.shape[0], (4,))\n"
    "    return y[idx], idx\n"
)


def test_returned_indices_that_every_caller_of_the_method_drops():
    assert findings(SAMPLER) == []


@pytest.mark.parametrize("change", [
    ("a, _ = self.sample(y)", "a, i = self.sample(y)\n        a = a + i"),  # kept and mixed
    ("self.sample(y)[0]", "self.sample(y)[1]"),  # the indices, mixed
    ("self.sample(y)[0]", "sum(self.sample(y))"),  # the whole tuple, handed on
    ("return a + b", "self.keep = self.sample\n        return a + b"),  # the method is handed on
])
def test_returned_indices_that_a_caller_uses(change):
    code = SAMPLER.replace(*change)
    line = code.splitlines().index("        idx = torch.randint(0, y.shape[0], (4,))") + 1
    assert findings(code) == [(line, 15)]


# -- rotary tables handed through blocks, a processor and a helper that moves them ---------

ROTARY = """
    import torch
    import torch.nn as nn

    def apply_rotary(x, tables, use_real: bool = True):
        if use_real:
            cos, sin = tables
            cos, sin = cos.to(x.device), sin.to(x.device)
            return x * cos + x * sin
        else:
            return x * tables
"""
ATTENTION = """
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self, processor=None):
            super().__init__()
            self.processor = processor

        def forward(self, hidden, **kwargs):
            return self.processor(self, hidden, **kwargs)
"""
BLOCKS = """
    import torch
    import torch.nn as nn
    from .attention import Attention
    from .rotary import apply_rotary

    class Processor:
        def __call__(self, attn, hidden, tables=None):
            if tables is not None:
                hidden = apply_rotary(hidden, tables)
            return hidden

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention(processor=Processor())

        def forward(self, hidden, tables):
            return self.attn(hidden, tables=tables)

    class Rope(nn.Module):
        def __init__(self, theta: float = 10000.0):
            super().__init__()
            self.theta = theta

        def forward(self, hidden):
            freqs = self.theta ** torch.arange(hidden.shape[1]).float()
            return freqs.cos(), freqs.sin()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rope = Rope()
            self.blocks = nn.ModuleList([Block() for _ in range(2)])

        def forward(self, hidden):
            tables = self.rope(hidden)
            for i, block in enumerate(self.blocks):
                if self.checkpointing:
                    hidden = self._checkpoint(block, hidden, tables)
                else:
                    hidden = block(hidden, tables)
            return hidden
"""
# The submodule filters what it hands its processor by key, and warns about the rest.
FILTERING = ATTENTION.replace(
    "            return self.processor(self, hidden, **kwargs)\n",
    "            unused = [k for k, _ in kwargs.items() if k not in self.known]\n"
    "            kwargs = {k: v for k, v in kwargs.items() if k in self.known}\n"
    "            return self.processor(self, hidden, **kwargs)\n",
)


def lint_rotary(tmp_path, blocks=BLOCKS, rotary=ROTARY, attention=ATTENTION):
    files = {"pkg/__init__.py": "", "pkg/rotary.py": rotary, "pkg/attention.py": attention, "pkg/blocks.py": blocks}
    return lint_project(tmp_path, files, "pkg/blocks.py")


@pytest.mark.parametrize("attention", [ATTENTION, FILTERING])
def test_rotary_tables_that_reach_a_helper_that_moves_them(tmp_path, attention):
    # returned to the model, through a ModuleList of blocks (and the checkpointing twin),
    # by keyword into a submodule's **kwargs and on to the processor it was given, into a
    # helper whose branch for `use_real=True` (the default, left alone) moves them.
    assert lint_rotary(tmp_path, attention=attention) == []


@pytest.mark.parametrize("attention", [
    # the submodule mixes what its **kwargs holds itself
    ATTENTION.replace("return self.processor(self, hidden, **kwargs)",
                      "return self.processor(self, hidden, **kwargs) * kwargs['tables'][0]"),
    # it keeps the values in a list of its own
    FILTERING.replace("unused = [k for k, _ in kwargs.items()", "unused = [v for k, v in kwargs.items()"),
])
def test_rotary_tables_that_the_submodule_uses_itself(tmp_path, attention):
    line = textwrap.dedent(BLOCKS).splitlines().index(
        "        freqs = self.theta ** torch.arange(hidden.shape[1]).float()") + 1
    assert lint_rotary(tmp_path, attention=attention) == [(line, 31)]


@pytest.mark.parametrize("blocks, rotary", [
    # the processor asks for the branch that mixes them unmoved
    (BLOCKS.replace("apply_rotary(hidden, tables)", "apply_rotary(hidden, tables, use_real=False)"), ROTARY),
    # the helper mixes before it moves
    (BLOCKS, ROTARY.replace("cos, sin = tables\n", "cos, sin = tables\n            x = x * cos\n")),
    # the helper moves them only on one branch
    (BLOCKS, ROTARY.replace("            cos, sin = cos.to(x.device), sin.to(x.device)\n",
                            "            if x.is_cuda:\n                cos, sin = cos.to(x.device), sin.to(x.device)\n")),
    # the processor mixes them itself
    (BLOCKS.replace("hidden = apply_rotary(hidden, tables)", "hidden = hidden * tables[0]"), ROTARY),
    # the submodule is given no processor object: where the keyword lands is not known
    (BLOCKS.replace("Attention(processor=Processor())", "Attention()"), ROTARY),
    # the blocks are of two classes
    (BLOCKS.replace("[Block() for _ in range(2)]", "[Block(), nn.Identity()]"), ROTARY),
    # the wrapper is handed the tables but the function never calls the block on them itself
    (BLOCKS.replace("hidden = block(hidden, tables)", "hidden = block(hidden)"), ROTARY),
    # the class that returns the tables is imported by another file
    (BLOCKS.replace("class Model(nn.Module):", "from .other import Model2\n\n    class Model(nn.Module):"), ROTARY),
])
def test_rotary_tables_that_may_meet_tensors_unmoved(tmp_path, blocks, rotary):
    if "Model2" in blocks:
        (tmp_path / "pkg").mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg/other.py").write_text("from .blocks import Rope\nModel2 = Rope\n")
    line = textwrap.dedent(blocks).splitlines().index(
        "        freqs = self.theta ** torch.arange(hidden.shape[1]).float()") + 1
    assert lint_rotary(tmp_path, blocks, rotary) == [(line, 31)]


def test_a_number_attribute_is_no_tensor():
    code = module(
        "def __init__(self, scale: float, table):\n"
        "    super().__init__()\n    self.scale = scale\n    self.table = table\n"
        "def forward(self, x):\n"
        "    a = torch.arange(x.shape[0]) * self.scale\n"
        "    b = torch.arange(x.shape[0]) * self.table\n"
        "    return x[a.long()], x[b.long()]\n"
    )
    assert findings(code) == [(10, 13)]


STORED = module(
    "def forward(self, x):\n"
    "    self.order = torch.randperm(x.size(0))\n"
    "    return self.shuffle(x)\n"
    "def shuffle(self, x):\n"
    "    return x[self.order]\n"
)


def test_stored_in_an_attribute_the_class_only_indexes_with():
    assert findings(STORED) == []


@pytest.mark.parametrize("change", [
    ("return x[self.order]", "return x * self.order"),  # a read mixes it
    ("return x[self.order]", "return x"),  # nobody here reads it: kept for others
])
def test_stored_in_an_attribute_that_may_meet_tensors(change):
    assert findings(STORED.replace(*change)) == [(5, 22)]


BRANCHES = module(
    "def forward(self, x, weight):\n"
    "    if weight > 0:\n"
    "        extra = self.loss(x)\n"
    "        total = x + weight * extra\n"
    "    else:\n"
    "        extra = torch.tensor([0.0])\n"
    "        total = x\n"
    "    return total, extra.detach().mean()\n"
)


def test_a_value_read_only_in_the_other_branch_does_not_see_the_tensor():
    # `weight * extra` reads the submodule's loss; the CPU placeholder of the `else` branch
    # only reaches a full reduction (0-dim)
    assert findings(BRANCHES) == []


LOOPED = module(
    "def forward(self, x, weight):\n"
    "    total = x\n"
    "    for _ in range(2):\n"
    "        if weight > 0:\n"
    "            extra = self.loss(x)\n"
    "            total = total + weight * extra\n"
    "        else:\n"
    "            extra = torch.tensor([0.0])\n"
    "    return total\n"
)


@pytest.mark.parametrize("code, line", [
    # read after the `if`, where either value may be
    (BRANCHES.replace("    return total, extra.detach().mean()\n", "    return total + extra\n"), 9),
    # a loop around both: the next turn reads the placeholder
    (LOOPED, 11),
])
def test_a_value_that_a_later_read_may_see(code, line):
    assert findings(code) == [(line, 21 if code is not LOOPED else 25)]


IN_A_TEST = HEAD + (
    "class TestHead:\n"
    "    def test_tracing(self):\n"
    "        class Wrap(nn.Module):\n"
    "            def forward(self, x):\n"
    "                labels = torch.zeros(x.shape[0], dtype=torch.long)\n"
    "                return self.head(x, labels)\n"
    "        model = Wrap()\n"
    "        assert model(torch.rand(2, 3)).shape == (2,)\n"
)


def test_a_module_defined_in_a_test_that_never_reaches_an_accelerator():
    assert findings(IN_A_TEST) == []


@pytest.mark.parametrize("change", [
    ("model = Wrap()", "model = Wrap().cuda()"),  # moved
    ("model = Wrap()", "model = Wrap().to(torch.float64)"),  # a move we do not weigh
    ("def test_tracing(self):", "def test_tracing(self, device):"),  # handed a device
    ("def test_tracing(self):", "def test_tracing(self, setting):"),  # a fixture we cannot see
    ("def test_tracing(self):", "@pytest.mark.skipif(not torch.cuda.is_available(), reason='')\n"
                                "    def test_tracing(self):"),  # it names the accelerator
    ("def test_tracing(self):", "def check_tracing(self):"),  # not a test: called from anywhere
])
def test_a_module_defined_in_a_test_that_may_reach_an_accelerator(change):
    code = IN_A_TEST.replace(*change)
    line = code.splitlines().index("                labels = torch.zeros(x.shape[0], dtype=torch.long)") + 1
    assert findings(code) == [(line, 26)]


WEIGHTED = HEAD + (
    "class Net(nn.Module):\n"
    "    def forward(self, xs, weights: list[float] | None = None):\n"
    "        if weights is None:\n"
    "            weights = torch.tensor([1 / len(xs)] * len(xs))\n"
    "        else:\n"
    "            weights = torch.tensor(weights)\n"
    "        total = 0\n"
    "        for x, w, layer in zip(xs, weights, self.layers):\n"
    "            total = total + w * layer(x)\n"
    "        return total\n"
)


def test_weights_iterated_into_0_dim_rows():
    assert findings(WEIGHTED) == []


@pytest.mark.parametrize("change", [
    ("[1 / len(xs)] * len(xs)", "[[1 / len(xs)]] * len(xs)"),  # rows of one element
    ("[1 / len(xs)] * len(xs)", "[self.a + self.b]"),  # `+` may join lists
    ("list[float] | None", "list[list[float]] | None"),  # the other binding is 2-D
    ("zip(xs, weights, self.layers)", "zip(xs, weights.view(-1, 1), self.layers)"),  # reshaped
])
def test_weights_whose_rows_may_not_be_0_dim(change):
    code = WEIGHTED.replace(*change)
    line = code.splitlines().index(next(l for l in code.splitlines() if "weights = torch.tensor([" in l)) + 1
    assert findings(code) == [(line, 23)]


SPREAD = HEAD + (
    "class Block(nn.Module):\n"
    "    def forward(self, h, sizes, scale):\n"
    "        for f, w in sizes.tolist():\n"
    "            h = h[:, : f * w]\n"
    "        return h * scale\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.blocks = nn.ModuleList([Block() for _ in range(2)])\n"
    "    def forward(self, xs):\n"
    "        sizes = torch.stack([torch.tensor(x.shape[1:]) for x in xs])\n"
    "        kwargs = {'sizes': sizes}\n"
    "        kwargs.update(scale=2)\n"
    "        h = torch.cat(xs)\n"
    "        for block in self.blocks:\n"
    "            h = block(h, **kwargs)\n"
    "        return h\n"
)


def test_a_dict_of_keyword_arguments_spread_into_blocks_that_read_sizes():
    # a list of shapes stacked, put in a dict, spread into each block of a ModuleList
    # as `sizes=`, which only turns it into Python lists
    assert findings(SPREAD) == []


@pytest.mark.parametrize("change", [
    ("return h * scale", "return h * scale * sizes"),  # the block mixes it
    ("return h\n", "return h, kwargs['sizes']\n"),  # read back from the dict and returned
    ("kwargs.update(scale=2)", "kwargs.update(scale=2)\n        self.log(kwargs)"),  # the dict handed on
    # the block takes it in **extra, and nothing says where it goes from there
    ("def forward(self, h, sizes, scale):\n        for f, w in sizes.tolist():\n            h = h[:, : f * w]\n",
     "def forward(self, h, scale, **extra):\n"),
])
def test_a_dict_of_keyword_arguments_that_may_mix_it(change):
    code = SPREAD.replace(*change)
    line = code.splitlines().index("        sizes = torch.stack([torch.tensor(x.shape[1:]) for x in xs])") + 1
    assert findings(code) == [(line, 30)]


IN_MAIN = HEAD + (
    "class Net(nn.Module):\n"
    "    def __init__(self, masker):\n"
    "        super().__init__()\n"
    "        self.masker = masker\n"
    "    def forward(self, x):\n"
    "        return x.masked_fill(self.masker(x), 0)\n"
    "if __name__ == '__main__':\n"
    "    class Masker(nn.Module):\n"
    "        def forward(self, x):\n"
    "            return torch.ones(x.shape).bool()\n"
    "    print(Net(Masker())(torch.rand(2, 3)))\n"
)


def test_a_module_defined_in_a_script_block_that_never_reaches_an_accelerator():
    assert findings(IN_MAIN) == []


@pytest.mark.parametrize("change", [
    ("print(Net(Masker())(torch.rand(2, 3)))", "print(Net(Masker()).cuda()(torch.rand(2, 3).cuda()))"),
    ("if __name__ == '__main__':", "if __name__ == '__main__' or True:"),  # not only the script
])
def test_a_module_defined_in_a_script_block_that_may_reach_an_accelerator(change):
    assert findings(IN_MAIN.replace(*change)) == [(12, 20)]


def test_a_submodule_built_with_different_processors_is_not_one_answer(tmp_path):
    # one branch gives the attention a processor that mixes the tables unmoved
    blocks = BLOCKS.replace(
        "            self.attn = Attention(processor=Processor())\n",
        "            if self.fast:\n                self.attn = Attention(processor=Mixer())\n"
        "            else:\n                self.attn = Attention(processor=Processor())\n",
    ).replace("    class Block(nn.Module):", "    class Mixer:\n        def __call__(self, attn, hidden, tables=None):\n"
              "            return hidden * tables[0]\n\n    class Block(nn.Module):")
    line = textwrap.dedent(blocks).splitlines().index(
        "        freqs = self.theta ** torch.arange(hidden.shape[1]).float()") + 1
    assert lint_rotary(tmp_path, blocks) == [(line, 31)]


def test_returned_indices_of_a_class_another_file_imports(tmp_path):
    # another file calls `sample` and may keep the indices: its calls are not followed
    other = "from .m import Net\n\ndef draw(y):\n    return Net().sample(y)\n"
    files = {"pkg/__init__.py": "", "pkg/m.py": SAMPLER, "pkg/other.py": other}
    line = SAMPLER.splitlines().index("        idx = torch.randint(0, y.shape[0], (4,))") + 1
    assert lint_project(tmp_path, files, "pkg/m.py") == [(line, 15)]
    # importing the class without ever mentioning the method leaves the file's own calls
    files["pkg/other.py"] = "from .m import Net\n\ndef build():\n    return Net()\n"
    assert lint_project(tmp_path / "imported", files, "pkg/m.py") == []
    del files["pkg/other.py"]
    assert lint_project(tmp_path / "alone", files, "pkg/m.py") == []


# -- a scalar the same statement sizes a factory with; a parameter used as a mapping --------

TIMESTEPS = module("""\
def __init__(self, size=256):
    super().__init__()
    self.size = size

@staticmethod
def embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=t.device)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

def forward(self, t):
    return self.embedding(t, self.size)
""", head="import math\n" + HEAD)


def test_a_divisor_that_sizes_the_factory_in_the_same_statement_is_a_scalar():
    # `half` is the `end` of the arange it divides: a number or a 0-dim tensor (arange takes
    # nothing else), and a 0-dim tensor meets tensors on any device; the result is moved
    assert findings(TIMESTEPS) == []


@pytest.mark.parametrize("change", [
    # the divisor is another value, which may be a tensor on the GPU
    ("torch.float32) / half", "torch.float32) / t"),
    # nothing in the statement is sized by `half` (`dim` may be a tensor, `half` with it)
    ("end=half, dtype", "end=8, dtype"),
    # the sized factory is the one that is followed, but its result is not moved
    ("    ).to(device=t.device)\n", "    )\n"),
])
def test_a_divisor_not_known_to_be_a_scalar_is_flagged(change):
    code = TIMESTEPS.replace(*change)
    line = next(i for i, text in enumerate(code.splitlines(), 1) if "torch.arange(start=0" in text)
    assert findings(code) == [(line, 37)]


MATCHER = module("""\
def forward(self, outputs, targets):
    probs = outputs["pred_logits"].softmax(-1)
    boxes = torch.cat([t["boxes"] for t in targets])
    cost = torch.cdist(probs, boxes).cpu()
    pairs = [assign(c) for c in cost]
    return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j)) for i, j in pairs]
""")


def test_a_parameter_read_by_string_keys_is_no_tensor_to_take_a_device_from():
    # `outputs["pred_logits"]`: a tensor cannot be indexed by a string, so `outputs` is a
    # mapping and `outputs.device` would raise; `targets` yields such mappings. No input is
    # a tensor to take a device from.
    assert findings(MATCHER) == []


def test_a_parameter_read_by_integer_index_may_still_be_a_tensor():
    code = MATCHER.replace('outputs["pred_logits"]', "outputs[0]")
    assert findings(code) == [(9, 18), (9, 57)]
    # but nothing shows it is one (a list is read by integer index too): no `outputs.device`
    result = lint_source("t.py", code, [RULE], preview=True)
    assert [f.fix for f in result.findings] == [None, None]
    # `targets` yields tensors here: it may be the tensor input
    code = MATCHER.replace('outputs["pred_logits"]', 'outputs.logits').replace('t["boxes"]', "t[0]")
    assert findings(code) == [(9, 18), (9, 57)]


# -- a tensor given as a size --------------------------------------------------------------

GROUPS = """
def forward(self, x):
    N, C, H, W = x.shape
    G = torch.min(torch.as_tensor(self.group_size), torch.as_tensor(N))
    y = x.reshape(G, -1, C, H, W)
    y = y.mean(dim=0).repeat(G, 1, 1, 1)
    return torch.cat([x, y], dim=1)
"""


def test_a_cpu_tensor_used_only_as_a_size_of_a_module_tensor_is_silent():
    # stylegan2's minibatch-stddev layer: the group size is a 0-dim CPU tensor that reshape
    # and repeat read as an integer, on whatever device `x` is.
    assert findings(module(GROUPS)) == []


@pytest.mark.parametrize(("use", "expected"), [
    # the same tensor also meets `x` in an op
    ("y = x.reshape(G, -1, C, H, W) * G", [(7, 23), (7, 57)]),
    # given by keyword to a function we do not follow, as data (`pad=` would be sizes)
    ("y = x.reshape(G, -1, C, H, W)\n    y = torch.nn.functional.layer_norm(y, y.shape[1:], weight=G)",
     [(7, 23), (7, 57)]),
])
def test_a_size_that_is_also_used_otherwise_is_flagged(use, expected):
    code = module(GROUPS.replace("y = x.reshape(G, -1, C, H, W)", use, 1))
    assert findings(code) == expected


# -- negative sampling: an optional count, a helper's cached table, a helper method --------

NEGATIVES = {
    "pkg/__init__.py": "",
    "pkg/utils.py": """
        import torch

        def cached_arange(n, device="cpu"):
            if not hasattr(cached_arange, "buf"):
                cached_arange.buf = torch.LongTensor().to(device)
            if n > cached_arange.buf.numel():
                cached_arange.buf.resize_(n)
                torch.arange(n, out=cached_arange.buf)
            return cached_arange.buf[:n]
    """,
    "pkg/model.py": """
        import torch
        import torch.nn as nn
        from pkg.utils import cached_arange

        class Sampler(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k

            def forward(self, y, padding_count=None):
                negs, _ = self.sample_negatives(y, y.size(1), padding_count=padding_count)
                return y + negs.sum(0)

            def sample_negatives(self, y, num, padding_count=None):
                bsz, tsz, fsz = y.shape
                y = y.view(-1, fsz)
                high = tsz - (padding_count or 0)
                with torch.no_grad():
                    tszs = cached_arange(num).unsqueeze(-1).expand(-1, self.k).flatten()
                    neg_idxs = torch.randint(low=0, high=high - 1, size=(bsz, self.k * num))
                    neg_idxs[neg_idxs >= tszs] += 1
                neg_idxs = neg_idxs + (torch.arange(bsz).unsqueeze(1) * high)
                negs = y[neg_idxs.view(-1)].view(bsz, num, self.k, fsz).permute(2, 0, 1, 3)
                return negs, neg_idxs
    """,
    "pkg/other.py": "from pkg.model import Sampler\n\nclass Big(Sampler):\n    pass\n",
}
RANDINT = (21, 24)  # `torch.randint(...)` in pkg/model.py
ARANGE = (23, 32)  # `torch.arange(bsz)`


def negatives(tmp_path, **changes):
    files = dict(NEGATIVES)
    for name, (old, new) in changes.items():
        assert old in files[name]
        files[name] = files[name].replace(old, new)
    return lint_project(tmp_path, files, "pkg/model.py")


def test_negative_sampling_indices_that_stay_on_the_cpu_are_silent(tmp_path):
    # wav2vec 2.0's sampler: indices drawn, compared with a helper's cached CPU table,
    # shifted by a count (`padding_count or 0`: a number), used as an index; the
    # indices returned beside the samples are dropped by the only caller in the project
    # (another file imports the class but never mentions the method).
    assert negatives(tmp_path) == []


@pytest.mark.parametrize(("change", "expected"), [
    # the helper's table follows a device the caller gives
    ({"pkg/model.py": ("cached_arange(num)", "cached_arange(num, device=y.device)")}, [RANDINT]),
    # ... or one its default names
    ({"pkg/utils.py": ('device="cpu"', 'device="cuda"')}, [RANDINT]),
    # the helper is a generator: nothing is known of what it gives
    ({"pkg/utils.py": ("return cached_arange.buf[:n]", "yield cached_arange.buf[:n]")}, [RANDINT]),
    # the count is not substituted by a number: it may be a tensor
    ({"pkg/model.py": ("(padding_count or 0)", "(padding_count if padding_count is not None else 0)")},
     [RANDINT, ARANGE]),
    ({"pkg/model.py": ("(padding_count or 0)", "(padding_count or self.k)")}, [RANDINT, ARANGE]),
    # another file calls the method (or reaches it by name) and may use the indices
    ({"pkg/other.py": ("pass", "def go(self, y):\n        return self.sample_negatives(y, 3)[1]")},
     [RANDINT, ARANGE]),
    ({"pkg/other.py": ("pass", "def go(self, y):\n        return getattr(self, 'sample_negatives')(y, 3)")},
     [RANDINT, ARANGE]),
])
def test_negative_sampling_indices_that_may_meet_other_devices(tmp_path, change, expected):
    assert negatives(tmp_path, **change) == expected


def test_another_file_calling_its_own_method_of_that_name_is_no_caller(tmp_path):
    own = "def sample_negatives(self, y):\n        return y\n    def go(self, y):\n        return self.sample_negatives(y)"
    assert negatives(tmp_path, **{"pkg/other.py": ("pass", own)}) == []


def test_a_helper_returning_a_fresh_cpu_tensor_is_on_the_cpu():
    code = HEAD + (
        "def positions(n):\n"
        "    return torch.arange(n).to('cpu')\n"
        "class Net(nn.Module):\n"
        "    def forward(self, y):\n"
        "        idx = torch.randint(0, y.shape[0], (4,))\n"
        "        return y[idx[idx >= positions(4)]]\n"
    )
    assert findings(code) == []
    moved = code.replace("torch.arange(n).to('cpu')", "torch.arange(n).to('cuda')")
    assert findings(moved) == [(7, 15)]
    given = code.replace("def positions(n):", "def positions(n, d=None):").replace(
        "torch.arange(n).to('cpu')", "torch.arange(n, device=d)").replace("positions(4)", "positions(4, y.device)")
    assert findings(given) == [(7, 15)]


def test_a_cached_result_is_not_reused_once_another_file_calls_the_method(tmp_path, monkeypatch, capsys):
    # pkg/model.py is unchanged; pkg/other.py starts using the returned indices.
    import json

    from torchdev_lint import cli

    monkeypatch.chdir(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    for path, text in NEGATIVES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))

    def run():
        cli.main(["--format", "json", "--isolated", "--preview", *cache, "--select", "TDL008", str(tmp_path / "pkg")])
        return [(f["line"], f["column"]) for f in json.loads(capsys.readouterr().out)]

    assert run() == []
    other = tmp_path / "pkg/other.py"
    other.write_text(other.read_text().replace("pass", "def go(self, y):\n        return self.sample_negatives(y, 3)[1]"))
    assert run() == [RANDINT, ARANGE]


# -- a record of detached values, kept for logging ------------------------------------------

LOSS = """
def forward(self, inputs, reconstructions, global_step, split="train"):
    rec_loss = (inputs - reconstructions).abs().mean()
    g_loss = -torch.mean(self.discriminator(reconstructions))
    disc_factor = self.weight(global_step)
    loss = rec_loss + disc_factor * g_loss
    log = {"{}/total_loss".format(split): loss.clone().detach().mean(),
           "{}/rec_loss".format(split): rec_loss.detach().mean(),
           "{}/disc_factor".format(split): torch.tensor(disc_factor),
           "{}/g_loss".format(split): g_loss.item(),
           }
    return loss, log
"""


def test_a_tensor_in_a_record_of_detached_values_is_left_alone():
    # taming/latent-diffusion's GAN losses: the discriminator factor is logged beside the
    # detached losses; the record goes to `self.log_dict` in another file.
    assert findings(module(LOSS)) == []


@pytest.mark.parametrize("changes", [
    # one other value still carries autograd: the dict is more than a record
    [("g_loss.item()", "g_loss")],
    # only one other value: nothing says the dict is a record
    [('           "{}/rec_loss".format(split): rec_loss.detach().mean(),\n', ""),
     ('           "{}/g_loss".format(split): g_loss.item(),\n', "")],
    # spread into the dict: what it holds is unknown
    [("g_loss.item(),", "g_loss.item(), **self.extra,")],
])
def test_a_tensor_in_a_dict_that_is_not_only_a_record_is_flagged(changes):
    code = LOSS
    for old, new in changes:
        assert old in code
        code = code.replace(old, new)
    line = module(code).splitlines().index(
        '               "{}/disc_factor".format(split): torch.tensor(disc_factor),') + 1
    assert findings(module(code)) == [(line, 48)]


@pytest.mark.parametrize("helper, confidence", [
    # built from a factory without `device=`: on the CPU, whatever it was handed (a 0-dim
    # element of the target mixes with it there)
    ("        x = torch.arange(size).repeat(size, 1).float()\n"
     "        return torch.exp(-(x - centre) ** 2 / width)\n", None),
    # computed from what it is handed: on the target's device
    ("        return centre * width\n", "certain"),
    # moved on the way out: on the device
    ("        x = torch.arange(size).float()\n        return (x * width).cuda()\n", "certain"),
])
def test_a_method_building_its_result_on_the_cpu_meets_nothing_on_the_device(helper, confidence):
    code = HEAD + (
        "class Loss(nn.Module):\n"
        "    def forward(self, pred, target):\n"
        "        weight = torch.zeros(4, 4)\n"
        "        for b in range(4):\n"
        "            weight[b] = torch.max(self.gaussian(target[b, 0], target[b, 1], 4), weight[b])\n"
        "        return weight\n"
        "    def gaussian(self, centre, width, size):\n" + helper +
        "criterion = Loss().cuda()\n")
    found = lint_source("loss.py", code, [RULE], preview=True).findings
    # (the helper's own factory is another finding, of its own line)
    assert [(f.line, f.confidence.value) for f in found if f.line == 5 and f.confidence.value == "certain"] == \
        ([(5, confidence)] if confidence else [])


@pytest.mark.parametrize("use, flagged", [
    # pad amounts and target sizes are read as integers: the CPU tensor meets no activation
    ("y = F.pad(y, [diff // 2, diff - diff // 2])", False),
    ("y = F.pad(y, pad=[diff // 2, diff - diff // 2])", False),
    ("y = F.interpolate(y, size=diff)", False),
    # the same tensor in arithmetic with the input does meet it
    ("y = y + diff", True),
])
def test_a_factory_tensor_used_as_sizes_meets_nothing(use, flagged):
    code = module(f"""\
        def forward(self, x, skip):
            y = self.up(x)
            diff = torch.tensor([skip.size(2) - y.size(2)])
            {use}
            return torch.cat([skip, y], dim=1)
        """, HEAD + "import torch.nn.functional as F\n")
    assert bool(findings(code)) is flagged


@pytest.mark.parametrize("loss", [
    "nn.CTCLoss(blank=0)(log_probs, targets, lengths, target_lengths)",
    "F.ctc_loss(log_probs, targets, lengths, target_lengths)",
    "self.ctc(log_probs, targets, input_lengths=lengths, target_lengths=target_lengths)",
])
def test_the_lengths_a_ctc_loss_reads_on_the_cpu_mix_nothing(loss):
    code = module(f"""\
        def __init__(self):
            super().__init__()
            self.ctc = nn.CTCLoss()
        def forward(self, x, targets):
            log_probs = x.log_softmax(2)
            lengths = torch.full(size=(x.size(1),), fill_value=x.size(0), dtype=torch.int32)
            target_lengths = torch.full((x.size(1),), targets.size(1), dtype=torch.int32)
            return {loss}
        """, HEAD + "import torch.nn.functional as F\n")
    assert findings(code) == []
    # the same lengths meeting the log-probabilities in an op of their own are flagged
    assert findings(code.replace(f"return {loss}", "return log_probs * lengths")) == [(10, 19)]
