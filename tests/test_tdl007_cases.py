"""TDL007 (unregistered-submodule-container): what counts as holding submodules, how
containers get filled, and the fix's shape (aliases, imports, multi-line displays,
comments, keys ModuleDict refuses, list methods ModuleList lacks)."""

import textwrap

import pytest

import conftest
import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL007"]
HEAD = "import torch\nimport torch.nn as nn\n\n"


def lint(code):
    return lint_source("example.py", textwrap.dedent(code), [RULE], preview=True)


def module(init, extra=""):
    body = textwrap.indent(textwrap.dedent(init), " " * 8)
    return (HEAD + "class M(nn.Module):\n    def __init__(self, d=4, n=2):\n"
            "        super().__init__()\n" + body + textwrap.indent(textwrap.dedent(extra), "    "))


def positions(code):
    return [(f.line, f.column) for f in lint(code).findings]


def fixed(code):
    result = lint(code)
    outcome = fix_file(result, unsafe=True)
    assert outcome.error is None
    assert lint(outcome.source).findings == []
    return outcome.source


@pytest.mark.parametrize(
    "init, extra",
    [
        ("self.layers = nn.ModuleList([nn.Linear(d, d)])\n", ""),
        ("self.layers = nn.Sequential(*[nn.Linear(d, d) for _ in range(n)])\n", ""),
        ("self.layers = nn.ParameterList([nn.Parameter(torch.ones(d))])\n", ""),
        ("layers = [nn.Linear(d, d) for _ in range(n)]\nself.layers = nn.Sequential(*layers)\n", ""),
        # Not modules.
        ("self.sizes = [d, 2 * d]\nself.names = {'a': 'x'}\nself.masks = [torch.ones(d)]\n", ""),
        ("self.outputs = []\n", "def forward(self, x):\n    self.outputs.append(x * 2)\n    return x\n"),
        # Registered anyway: attributes, add_module, a later ModuleList of the same list.
        ("self.a = nn.Linear(d, d)\nself.b = nn.Linear(d, d)\nself.pair = (self.a, self.b)\n", ""),
        ("layer = nn.Linear(d, d)\nself.layer = layer\nself.layers = [layer]\n", ""),
        ("self.heads = []\nfor i in range(n):\n    self.heads.append(nn.Linear(d, 1))\n"
         "    self.add_module(f'head{i}', self.heads[-1])\n", ""),
        ("self.body = []\nself.body.append(nn.Linear(d, d))\nself.body = nn.ModuleList(self.body)\n", ""),
        # Stateless: nothing to move, no train/eval difference.
        ("self.acts = [nn.ReLU(), nn.Identity(), nn.MaxPool2d(2)]\n", ""),
        ("self.losses = {'mse': nn.MSELoss(), 'l1': nn.L1Loss(reduction='sum')}\n", ""),
        # Filled while the model runs: a cache of modules built in forward by design.
        ("self.runners = []\n", "def forward(self, x):\n    return self._runner(x)(x)\n"
         "def _runner(self, x):\n    runner = nn.Linear(x.shape[-1], 1)\n"
         "    self.runners.append(runner)\n    return runner\n"),
        # Of unknown kind.
        ("self.layers = [make_layer(i) for i in range(n)]\n", ""),
    ],
)
def test_not_flagged(init, extra):
    assert positions(module(init, extra)) == []


def test_other_frameworks_modules_are_not_torch_modules():
    code = ("import mlx.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.heads = [nn.Linear(1, 1) for _ in range(3)]\n")
    assert positions(code) == []


@pytest.mark.parametrize(
    "init, extra, where, line",
    [
        ("self.layers = [nn.Linear(d, d), nn.Linear(d, d)]\n", "", (7, 9),
         "        self.layers = nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d)])"),
        ("self.layers = (nn.Linear(d, d), nn.Dropout(0.1))\n", "", (7, 9),
         "        self.layers = nn.ModuleList((nn.Linear(d, d), nn.Dropout(0.1)))"),
        ("self.layers = nn.Linear(d, d), nn.Linear(d, d)\n", "", (7, 9),
         "        self.layers = nn.ModuleList((nn.Linear(d, d), nn.Linear(d, d)))"),
        ("self.heads = {'cls': nn.Linear(d, 2), 'box': nn.Linear(d, 4)}\n", "", (7, 9),
         "        self.heads = nn.ModuleDict({'cls': nn.Linear(d, 2), 'box': nn.Linear(d, 4)})"),
        ("self.heads = {f'h{i}': nn.Linear(d, 1) for i in range(n)}\n", "", (7, 9),
         "        self.heads = nn.ModuleDict({f'h{i}': nn.Linear(d, 1) for i in range(n)})"),
        ("self.blocks = list(nn.Linear(d, d) for _ in range(n))\n", "", (7, 9),
         "        self.blocks = nn.ModuleList(list(nn.Linear(d, d) for _ in range(n)))"),
        ("self.ws = [nn.Parameter(torch.randn(d)) for _ in range(n)]\n", "", (7, 9),
         "        self.ws = nn.ParameterList([nn.Parameter(torch.randn(d)) for _ in range(n)])"),
        ("self.blocks = list()\nself.blocks.extend([nn.Linear(d, d), nn.ReLU()])\n", "", (7, 9),
         "        self.blocks = nn.ModuleList()"),
        ("self.blocks = []\nself.blocks += [nn.Linear(d, d)]\n", "", (7, 9),
         "        self.blocks = nn.ModuleList()"),
        ("self.blocks = []\nself.blocks.insert(0, nn.Conv2d(3, 3, 1))\n", "", (7, 9),
         "        self.blocks = nn.ModuleList()"),
        ("self.heads = collections.OrderedDict()\n",
         "def add_head(self, name):\n    self.heads[name] = nn.Linear(4, 1)\n", (7, 9),
         "        self.heads = nn.ModuleDict()"),
        ("self.stages: list = []\nfor i in range(n):\n    stage = nn.Conv2d(3, 3, 1)\n"
         "    self.stages.append(stage)\n", "", (7, 9),
         "        self.stages: list = nn.ModuleList()"),
    ],
)
def test_flagged_and_fixed(init, extra, where, line):
    code = module(init, extra)
    assert positions(code) == [where]
    assert fixed(code).splitlines()[where[0] - 1] == line


def test_multi_line_display_keeps_its_comments():
    code = module("""\
        self.layers = [  # encoder
            nn.Linear(d, d),  # first
            nn.Linear(d, d),
        ]
    """)
    assert fixed(code).splitlines()[6:10] == [
        "        self.layers = nn.ModuleList([  # encoder",
        "            nn.Linear(d, d),  # first",
        "            nn.Linear(d, d),",
        "        ])",
    ]


@pytest.mark.parametrize(
    "header, base, layer, spelled",
    [
        ("import torch.nn as nn\n", "nn.Module", "nn.Linear", "nn.ModuleList"),
        ("from torch import nn\n", "nn.Module", "nn.Linear", "nn.ModuleList"),
        ("import torch\nimport torch.nn as tnn\n", "tnn.Module", "tnn.Linear", "tnn.ModuleList"),
        ("import torch as T\n", "T.nn.Module", "T.nn.Linear", "T.nn.ModuleList"),
        ("from torch.nn import ModuleList as ML, Module, Linear\n", "Module", "Linear", "ML"),
    ],
)
def test_nn_is_spelled_as_the_file_imports_it(header, base, layer, spelled):
    code = (header + f"class M({base}):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.layers = [{layer}(2, 2)]\n")
    assert fixed(code).splitlines()[-1] == f"        self.layers = {spelled}([{layer}(2, 2)])"


def test_import_added_when_nothing_names_torch_nn():
    code = ('"""Doc."""\nfrom __future__ import annotations\nfrom torch.nn import Module, Linear\n'
            "class M(Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.a = [Linear(2, 2)]\n        self.b = {'x': Linear(2, 2)}\n")
    source = fixed(code)
    assert source.splitlines()[:4] == [
        '"""Doc."""', "from __future__ import annotations",
        "from torch.nn import Module, Linear", "import torch",
    ]
    assert source.count("import torch\n") == 1
    assert "self.a = torch.nn.ModuleList([Linear(2, 2)])" in source
    assert "self.b = torch.nn.ModuleDict({'x': Linear(2, 2)})" in source


def test_local_list_filled_then_stored():
    code = module("""\
        blocks = []
        for i in range(n):
            blocks.append(nn.Linear(d, d))
        blocks[0] = nn.Linear(d, 2 * d)
        self.blocks = blocks  # the stack
    """)
    assert positions(code) == [(11, 9)]
    assert fixed(code).splitlines()[10] == "        self.blocks = nn.ModuleList(blocks)  # the stack"


def test_filled_in_another_method_and_with_item_assignment():
    code = module("self.heads = {}\n", "def add(self, name, d):\n    self.heads[name] = nn.Linear(d, 1)\n")
    assert positions(code) == [(7, 9)]


@pytest.mark.parametrize(
    "init, extra",
    [
        # Keys ModuleDict refuses: dots, its own attribute names, numbers.
        ("self.heads = {'a.b': nn.Linear(d, 1)}\n", ""),
        ("self.heads = {'train': nn.Linear(d, 1)}\n", ""),
        ("self.heads = {}\nself.heads[0] = nn.Linear(d, 1)\n", ""),
        # An element that is not a module, nested containers.
        ("self.layers = [nn.Linear(d, d), 'relu']\n", ""),
        ("self.layers = [(nn.Linear(d, d), nn.BatchNorm1d(d))]\n", ""),
        ("self.layers = []\nself.layers.append(nn.Linear(d, d))\nself.layers.append(build())\n", ""),
        # Methods ModuleList/ModuleDict do not have.
        ("self.layers = [nn.Linear(d, d)]\n", "def f(self):\n    self.layers.reverse()\n"),
        ("self.heads = {'a': nn.Linear(d, 1)}\n", "def f(self, k):\n    return self.heads.get(k)\n"),
        # Modules and parameters mixed.
        ("self.parts = [nn.Linear(d, d), nn.Parameter(torch.ones(d))]\n", ""),
    ],
)
def test_flagged_without_a_fix_when_wrapping_would_break(init, extra):
    (finding,) = lint(module(init, extra)).findings
    assert finding.fix is None


def test_one_finding_per_assignment_and_each_fixed():
    code = module("if n:\n    self.layers = []\nelse:\n    self.layers = list()\n"
                  "self.layers.append(nn.Linear(d, d))\n")
    assert positions(code) == [(8, 13), (10, 13)]
    source = fixed(code)
    assert source.count("self.layers = nn.ModuleList()") == 2


WRAPPER = """\
    import torch.nn as nn
    from .paths import set_module_by_path


    class TTT(nn.Module):
        def __init__(self, net, paths):
            super().__init__()
            self.net = net
            self.wrappers = dict()
            for path in paths:
                wrapper = nn.Linear(4, 4)
                set_module_by_path(net, path, wrapper)
                self.wrappers[path] = wrapper
"""
REGISTERING_HELPER = """\
    from functools import reduce


    def set_module_by_path(model, path, new_module):
        *parts, last = path.split(".")
        setattr(reduce(getattr, parts, model), last, new_module)
"""


def lint_project(root, files, name):
    return conftest.lint_project(root, files, name, RULE)


@pytest.mark.parametrize("helper, expected", [
    # the helper sets each wrapper on the wrapped network: registered there, the dict only indexes
    (REGISTERING_HELPER, []),
    # through an attribute assignment on the parent
    (REGISTERING_HELPER.replace("setattr(reduce(getattr, parts, model), last, new_module)",
                                "reduce(getattr, parts, model).block = new_module"), []),
    # the helper only looks the old module up: nothing registers the wrappers
    (REGISTERING_HELPER.replace("setattr(reduce(getattr, parts, model), last, new_module)",
                                "print(reduce(getattr, parts, model), new_module)"), [(9, 9)]),
    # it registers another of its parameters, not the module it is given
    (REGISTERING_HELPER.replace("last, new_module)", "last, model)"), [(9, 9)]),
])
def test_a_module_handed_to_a_helper_of_another_file_that_registers_it(tmp_path, helper, expected):
    files = {"pkg/__init__.py": "", "pkg/paths.py": helper, "pkg/ttt.py": WRAPPER}
    assert lint_project(tmp_path, files, "pkg/ttt.py") == expected


def test_without_the_project_the_helper_is_unknown_and_the_dict_is_flagged():
    assert positions(WRAPPER) == [(9, 9)]
