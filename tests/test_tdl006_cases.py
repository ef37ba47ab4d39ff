"""TDL006 (unregistered-tensor-attribute): which assignments count, and the fix's shape on
aliases, multi-line values, comments, helper methods called from `__init__`, and the
cases where registering would break or change the program."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL006"]
HEAD = "import torch\nimport torch.nn as nn\n\n"


def lint(code):
    return lint_source("example.py", textwrap.dedent(code), [RULE], preview=True)


def module(init, extra="", use="mask"):
    """A module whose __init__ runs ``init`` and whose forward reads ``self.<use>``."""
    body = textwrap.indent(textwrap.dedent(init), " " * 8)
    return (
        HEAD + "class M(nn.Module):\n    def __init__(self, n=3, scale=0.5, w=None):\n"
        "        super().__init__()\n" + body + textwrap.indent(textwrap.dedent(extra), "    ")
        + f"    def forward(self, x):\n        return x * self.{use}\n"
    )


def positions(code):
    return [(f.line, f.column) for f in lint(code).findings]


def fixed(code, unsafe=True):
    result = lint(code)
    outcome = fix_file(result, unsafe=unsafe)
    assert outcome.error is None
    assert lint(outcome.source).findings == [] or not unsafe
    return outcome.source


@pytest.mark.parametrize(
    "init, extra",
    [
        ("self.mask = nn.Parameter(torch.ones(n))\n", ""),
        ("m = nn.Parameter(torch.ones(n))\nself.mask = m\n", ""),
        ("self.mask = nn.Buffer(torch.ones(n))\n", ""),
        ("self.register_buffer('mask', torch.ones(n))\n", ""),
        # 0-dim tensors mix with accelerator tensors.
        ("self.mask = torch.tensor(2.0)\n", ""),
        ("self.mask = torch.tensor(-1, dtype=torch.long)\n", ""),
        ("self.mask = torch.tensor(scale)\n", ""),
        ("self.mask = torch.tensor(math.log(1 / 0.07)).float()\n", ""),
        ("self.mask = torch.zeros(())\n", ""),
        ("self.mask = torch.scalar_tensor(n)\n", ""),
        # Not tensors, or not made here.
        ("self.mask = [1, 2, 3]\n", ""),
        ("self.mask = w\n", ""),
        ("self.mask = w.clone().detach()\n", ""),
        ("self.lin = nn.Linear(2, 2)\nself.mask = self.lin.weight\n", ""),
        # Assigned outside __init__ and the methods it calls.
        ("pass\n", "def reset(self):\n    self.mask = torch.ones(3)\n"),
        # A cache rebuilt at run time: the __init__ value is a placeholder.
        ("self.mask = torch.empty(0)\n",
         "def grow(self, x):\n    self.mask = torch.ones(x.shape[0], device=x.device)\n"),
        # The class moves it by hand.
        ("self.mask = torch.ones(n)\n",
         "def to_input(self, x):\n    return self.mask.unsqueeze(0).to(x.device)\n"),
        ("self.mask = torch.ones(n)\n",
         "def place(self, x):\n    return torch.zeros(2, device=self.mask.device)\n"),
        ("self.mask = torch.ones(n)\n", "def _apply(self, fn):\n    super()._apply(fn)\n"
         "    self.mask = fn(self.mask)\n    return self\n"),
    ],
)
def test_not_flagged(init, extra):
    assert positions(module(init, extra)) == []


def test_only_read_while_building_is_harmless():
    code = module("self.base = torch.arange(n)\nself.register_buffer('table', self.base * 2)\n",
                  use="table")
    assert positions(code) == []


def test_not_a_module_or_unknown_base():
    assert positions("import torch\nclass Cfg:\n    def __init__(self):\n"
                     "        self.mask = torch.ones(3)\n    def f(self):\n"
                     "        return self.mask\n") == []
    assert positions("import torch\nfrom .base import Layer\nclass M(Layer):\n"
                     "    def __init__(self):\n        self.mask = torch.ones(3)\n"
                     "    def f(self):\n        return self.mask\n") == []


def test_one_finding_per_attribute_at_the_first_tensor_assignment():
    code = module("self.mask = None\nif n > 2:\n    self.mask = torch.ones(n)\n"
                  "else:\n    self.mask = torch.zeros(n)\n")
    assert positions(code) == [(9, 13)]
    # Every tensor and None assignment in __init__ is registered, so registering never
    # meets a plain attribute of the same name (register_buffer would raise KeyError).
    assert fixed(code).splitlines()[6:11] == [
        '        self.register_buffer("mask", None, persistent=False)',
        "        if n > 2:",
        '            self.register_buffer("mask", torch.ones(n), persistent=False)',
        "        else:",
        '            self.register_buffer("mask", torch.zeros(n), persistent=False)',
    ]


def test_helper_methods_called_from_init_transitively():
    code = HEAD + textwrap.dedent("""\
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self._setup(n)
            def _setup(self, n):
                self._tables(n)
            def _tables(self, n):
                self.pos = torch.arange(n)[None, :]  # positions
            def unused(self):
                self.other = torch.ones(2)
            def forward(self, x):
                return x + self.pos + self.other
    """)
    assert positions(code) == [(11, 9)]
    assert fixed(code).splitlines()[10] == (
        '        self.register_buffer("pos", torch.arange(n)[None, :], persistent=False)  # positions'
    )


def test_aliases_multi_line_values_and_other_self_names():
    code = textwrap.dedent("""\
        import torch as T
        from torch import nn, tensor
        class M(nn.Module):
            def __init__(me, mean):
                super().__init__()
                me.mean = tensor(
                    mean,  # per channel
                    dtype=T.float32,
                ).view(1, -1)
            def forward(me, x):
                return x - me.mean
    """)
    assert positions(code) == [(6, 9)]
    assert fixed(code).splitlines()[5:9] == [
        '        me.register_buffer("mean", tensor(',
        "            mean,  # per channel",
        "            dtype=T.float32,",
        "        ).view(1, -1), persistent=False)",
    ]


def test_nested_classes_and_subclasses_of_local_modules():
    code = HEAD + textwrap.dedent("""\
        class Base(nn.Module):
            pass
        def build():
            class Inner(Base):
                def __init__(self):
                    super().__init__()
                    self.w = torch.randn(2, 2) @ torch.randn(2, 2); self.k = 1
                def forward(self, x):
                    return x @ self.w
            return Inner()
    """)
    assert positions(code) == [(10, 13)]
    assert fixed(code).splitlines()[9] == (
        '            self.register_buffer("w", torch.randn(2, 2) @ torch.randn(2, 2), '
        "persistent=False); self.k = 1"
    )


@pytest.mark.parametrize(
    "init, safe",
    [
        ("self.mask = torch.ones(n, dtype=torch.bool)\n", True),
        ("self.mask = torch.tril(torch.ones(n, n)) == 0\n", True),
        ("self.mask = torch.randperm(n)\n", True),
        ("self.mask = torch.arange(n).long()\n", True),
        ("self.mask = torch.tensor([[0, 1], [1, 0]])\n", True),
        ("self.mask = torch.ones(n).to(torch.int64)\n", True),
        ("self.mask = torch.ones(n)\n", False),
        ("self.mask = torch.tensor([0.5, 1.0])\n", False),
        ("self.mask = torch.arange(n)\n", False),  # could be float: unknown
    ],
)
def test_fix_is_safe_only_for_tensors_no_dtype_move_touches(init, safe):
    (finding,) = lint(module(init)).findings
    expected = Applicability.SAFE if safe else Applicability.UNSAFE
    assert finding.fix.applicability is expected


def test_other_assignments_decide_the_fix():
    # Tensors assigned later stay buffers; an unknown value may not be a tensor.
    code = module("self.mask = torch.ones(n).bool()\nself.mask = prepare(self.mask)\n")
    (finding,) = lint(code).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert fixed(code).splitlines()[6:8] == [
        '        self.register_buffer("mask", torch.ones(n).bool(), persistent=False)',
        "        self.mask = prepare(self.mask)",
    ]
    # A list assigned as well cannot be a buffer: no fix.
    code = module("self.mask = torch.ones(n).bool()\nif n == 0:\n    self.mask = []\n")
    (finding,) = lint(code).findings
    assert finding.fix is None


def test_before_super_init_has_no_fix():
    code = HEAD + textwrap.dedent("""\
        class M(nn.Module):
            def __init__(self):
                self.mask = torch.ones(3).bool()
                super().__init__()
            def forward(self, x):
                return x * self.mask
    """)
    (finding,) = lint(code).findings
    assert finding.fix is None


def test_requires_grad_suggests_a_parameter():
    code = module("self.mask = torch.zeros(n).requires_grad_()\n")
    (finding,) = lint(code).findings
    assert finding.fix is None
    assert "nn.Parameter" in finding.message


def test_annotated_and_typed_values():
    code = module("self.mask: torch.Tensor = torch.ones(n).bool()\n")
    assert fixed(code, unsafe=False).splitlines()[6] == (
        '        self.register_buffer("mask", torch.ones(n).bool(), persistent=False)'
    )


# -- following the attribute: 0-dim reductions, helpers that move it ---------------------------

def test_a_full_reduction_is_0_dim_and_mixes_anywhere():
    code = (
        HEAD + "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.p = torch.rand(3, 3, requires_grad=True)\n"
        "    def forward(self, *args):\n        return {'loss': self.p.sum()}\n"
    )
    # `nn.Parameter` is suggested (requires_grad), but only where it matters
    assert positions(code) == []
    assert positions(code.replace("self.p.sum()", "self.p.sum(0)")) == [(7, 9)]
    assert positions(code.replace("self.p.sum()", "self.p.sum(dim=1)")) == [(7, 9)]


HELPER = (
    "def place(table, like):\n    return table.to(like.device)\n"
    "def mix(table, like):\n    return table * like\n"
)


def test_an_attribute_handed_to_a_function_that_moves_it():
    code = (
        HEAD + HELPER + "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.table = torch.arange(4)\n"
        "    def forward(self, x):\n        return x * place(self.table, x)\n"
    )
    assert positions(code) == []
    assert positions(code.replace("place(self.table", "mix(self.table")) == [(11, 9)]


@pytest.mark.parametrize("copy, flagged", [
    ("torch.as_tensor(mean, device=data.device, dtype=data.dtype)", False),  # kornia's normalize
    ("torch.tensor(mean, device=data.device)", False),
    ("torch.as_tensor(mean, dtype=data.dtype)", True),  # no device: stays on the CPU
    ("torch.as_tensor(mean, device='cpu')", True),
])
def test_an_attribute_a_helper_copies_onto_the_inputs_device(copy, flagged):
    code = (
        HEAD + f"def normalize(data, mean):\n    mean = {copy}\n    return data - mean\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.mean = torch.tensor([0.5, 0.5, 0.5])\n"
        "    def forward(self, x):\n        return normalize(x, self.mean)\n"
    )
    assert bool(positions(code)) is flagged


KERNEL = """
import numpy as np
import torch
import torch.nn as nn

if __name__ == "__main__":
    class Blur(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 5, bias=False)
            self.k = torch.from_numpy(np.ones((5, 5)))
            for p in self.parameters():
                p.data.copy_(self.k)

        def forward(self, x):
            return self.conv(x)

        def get_kernel(self):
            return self.k

    class Operator(nn.Module):
        def __init__(self):
            super().__init__()
            self.blur = Blur()
            self.kernel = self.blur.get_kernel()
            self.blur.load(self.kernel.type(torch.float32))

        def forward(self, x):
            return self.blur(x)

        def get_kernel(self):
            return self.kernel.view(1, 1, 5, 5)
"""
# what the operator adds to Blur, to load a kernel: copied into the parameters
LOAD = """
        def load(self, k):
            if not torch.is_tensor(k):
                k = torch.from_numpy(k)
            for p in self.parameters():
                p.data.copy_(k)
"""


def with_load(code, load=LOAD):
    return code.replace("\n        def get_kernel(self):\n            return self.k\n",
                        "\n        def get_kernel(self):\n            return self.k\n" + load, 1)


def test_a_kernel_returned_to_an_outer_module_that_only_copies_it():
    # `get_kernel` returns it to the one caller of the file, which keeps it in an attribute
    # the class only copies into parameters and returns from a method nobody calls (the
    # classes are in the script's main block: no other file reaches them)
    assert positions(with_load(KERNEL)) == []


@pytest.mark.parametrize("code", [
    # the outer module mixes the kernel with its input
    with_load(KERNEL).replace("return self.blur(x)", "return self.blur(x) * self.kernel"),
    # the loader mixes it
    with_load(KERNEL, LOAD.replace("p.data.copy_(k)", "p.data.copy_(k * p)")),
    # someone calls the outer `get_kernel`, out of the classes
    with_load(KERNEL) + "    kernel = Operator().get_kernel()\n",
    # the classes are importable: other files may call the outer `get_kernel`
    with_load(KERNEL).replace('if __name__ == "__main__":', "if True:"),
])
def test_a_kernel_returned_to_code_that_may_mix_it(code):
    line = code.splitlines().index("            self.k = torch.from_numpy(np.ones((5, 5)))") + 1
    assert positions(code) == [(line, 13)]


@pytest.mark.parametrize("init", [
    "self.mask = nn.Parameter(torch.ones(n)).double()\n",
    "self.mask = nn.Parameter(torch.ones(n)).cuda()\n",
    "p = nn.Parameter(torch.ones(n)).half()\nself.mask = p\n",
])
def test_a_moved_new_parameter_is_left_to_tdl012(init):
    """Registered as a buffer it would never train: TDL012 moves the tensor inside instead."""
    assert positions(module(init)) == []


def test_a_moved_plain_tensor_is_still_flagged():
    assert positions(module("self.mask = torch.ones(n).double()\n")) == [(7, 9)]
