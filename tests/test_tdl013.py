"""TDL013 (device-chosen-twice): where a value placed by one device decision meets a value
placed by another that can pick a different device. The three shapes of issue 40 (a module
that chooses its device at import against a constructor's `device=`, a data helper that
moves batches whenever CUDA is there against the script's `--cuda`, `cuda:0` against
`cuda:{local_rank}`), and the cases with one decision, or two that cannot disagree."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Confidence
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL013"]
HEAD = "import argparse\nimport os\nimport torch\nimport torch.nn as nn\n"
MACHINE = "torch.device('cuda' if torch.cuda.is_available() else 'cpu')"


def lint(code, preview=True):
    return lint_source("example.py", HEAD + textwrap.dedent(code), [RULE], preview=preview)


def positions(code):
    """(line, column) of each finding, lines counted after the four import lines."""
    return [(f.line - 4, f.column) for f in lint(code).findings]


DETECTOR = f"""\
DEVICE = {MACHINE}

class Detector:
    def __init__(self, device=None):
        self.device = device
        self.model = nn.Linear(3, 2).to(self.device)
        self.anchors = torch.zeros(5, 3, device=DEVICE)

    def detect(self, image):
        x = torch.from_numpy(image).to(self.device)
        return self.model(x) + self.anchors[:4, :2]
"""

HELPER = """\
def to_device(batch):
    if torch.cuda.is_available():
        return batch.cuda()
    return batch

parser = argparse.ArgumentParser()
parser.add_argument('--cuda', action='store_true')
args = parser.parse_args()
model = nn.Linear(3, 2)
if args.cuda:
    model.cuda()
net = nn.Linear(3, 2).to('cuda' if args.cuda else 'cpu')
for inputs in [torch.zeros(4, 3)]:
    out = net(to_device(inputs))
"""

RANKS = """\
local_rank = int(os.environ['LOCAL_RANK'])
model = nn.Linear(3, 2).to(torch.device('cuda', local_rank))
target = torch.ones(4, 2).to('cuda:0')
loss = (model(torch.zeros(4, 3).to(f'cuda:{local_rank}')) - target).pow(2).mean()
"""


def test_a_module_that_chooses_at_import_against_the_constructor_device():
    (finding,) = lint(DETECTOR).findings
    assert (finding.line - 4, finding.column) == (11, 16)
    assert finding.confidence is Confidence.POSSIBLE  # a preview rule
    steps = [(e.line - 4, e.message) for e in finding.evidence]
    assert steps[0][0] == 4 and "parameter `device` of `__init__`" in steps[0][1]
    assert steps[2] == (6, "`nn.Linear(3, 2).to(self.device)` places the value there")
    assert steps[3][0] == 1 and "at import; the machine decides" in steps[3][1]
    assert steps[-1][0] == 11 and "meet here" in steps[-1][1]
    assert "the user's choice" in finding.message and "the machine's choice" in finding.message


def test_a_data_helper_that_moves_whenever_cuda_is_there_against_the_cuda_option():
    (finding,) = lint(HELPER).findings
    assert (finding.line - 4, finding.column) == (14, 11)
    messages = " | ".join(e.message for e in finding.evidence)
    assert "the user decides: `args.cuda`" in messages
    assert "`to_device` moves to CUDA whenever `torch.cuda.is_available()`" in messages


def test_cuda_zero_against_the_local_rank():
    (finding,) = lint(RANKS).findings
    assert (finding.line - 4, finding.column) == (4, 9)
    assert "each process's own GPU" in finding.message and "one fixed GPU" in finding.message
    assert "rank > 0" in finding.message


def test_preview_only():
    assert lint(DETECTOR, preview=False).findings == []


@pytest.mark.parametrize("code, expected", [
    # a global device against a `device` parameter, met in a torch function
    (f"device = {MACHINE}\ndef build(n, dev_device):\n"
     "    a = torch.zeros(n, device=dev_device)\n    b = torch.ones(n).to(device)\n"
     "    return torch.cat([a, b])\n", [(5, 12)]),
    # `get_device()` of the file, read through a name bound at import
    ("def get_device():\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
     "DEV = get_device()\nclass Net(nn.Module):\n    def __init__(self, device):\n"
     "        super().__init__()\n        self.fc = nn.Linear(2, 2).to(device)\n"
     "        self.scale = torch.ones(2, device=DEV)\n"
     "    def forward(self, x):\n        return self.fc(x) * self.scale\n", [(10, 16)]),
    # the script's `--cpu`, met by an operator
    ("parser = argparse.ArgumentParser()\nparser.add_argument('--cpu', action='store_true')\n"
     "args = parser.parse_args()\nuse_cuda = not args.cpu and torch.cuda.is_available()\n"
     "device = torch.device('cuda' if use_cuda else 'cpu')\nx = torch.ones(3).to(device)\n"
     f"y = torch.ones(3).to({MACHINE})\nprint(x + y)\n", [(8, 7)]),
    # a helper reached through a call reads the argument the caller gave
    (f"def place(t, where):\n    return t.to(where)\nmodel = nn.Linear(2, 2).to({MACHINE})\n"
     "def run(x, device):\n    return model(place(x, device))\n", [(5, 12)]),
    # `if` tests decide: the model moves whenever CUDA is there, the batches when the user asks
    ("parser = argparse.ArgumentParser()\nparser.add_argument('--cuda', action='store_true')\n"
     "args = parser.parse_args()\nmodel = nn.Linear(3, 2)\nif torch.cuda.is_available():\n    model.cuda()\n"
     "for data in [torch.zeros(4, 3)]:\n    if args.cuda and torch.cuda.is_available():\n"
     "        data = data.cuda()\n    out = model(data)\n", [(10, 11)]),
])
def test_flagged(code, expected):
    assert positions(code) == expected


@pytest.mark.parametrize("code", [
    # one decision only
    f"device = {MACHINE}\nmodel = nn.Linear(3, 2).to(device)\nprint(model(torch.zeros(4, 3).to(device)))\n",
    "def f(x, device):\n    return x.to(device) + torch.ones(3, device=device)\n",
    # both from the same source: the helper is handed the script's device
    f"device = {MACHINE}\ndef prepare(batch, device):\n    return batch.to(device)\n"
    "model = nn.Linear(3, 2).to(device)\nprint(model(prepare(torch.zeros(4, 3), device)))\n",
    # the class is always handed the machine's device it also reads as a global
    f"DEVICE = {MACHINE}\nclass D:\n    def __init__(self, device):\n"
    "        self.model = nn.Linear(3, 2).to(device)\n        self.mean = torch.zeros(3).to(DEVICE)\n"
    "    def __call__(self, x):\n        return self.model(x - self.mean)\nd = D(DEVICE)\n",
    # a helper that follows its input's device
    f"device = {MACHINE}\nmodel = nn.Linear(3, 2).to(device)\n"
    "def noise(x):\n    return torch.randn(x.shape, device=x.device)\n"
    "def run(x):\n    x = x.to(device)\n    return model(x + noise(x))\n",
    "def run(model, x):\n    d = next(model.parameters()).device\n    return model(x.to(d))\n",
    # the availability fallback is the default of the user's option
    "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
    "args = parser.parse_args()\nmodel = nn.Linear(3, 2).to(args.device)\n"
    "x = torch.zeros(4, 3, device=args.device)\nprint(model(x))\n",
    # the option decides both, with availability as a guard
    "parser = argparse.ArgumentParser()\nparser.add_argument('--cuda', action='store_true')\n"
    "args = parser.parse_args()\ndev = 'cuda' if args.cuda and torch.cuda.is_available() else 'cpu'\n"
    "model = nn.Linear(3, 2).to(dev)\nprint(model(torch.zeros(4, 3).to(dev)))\n",
    # a value with no device decision in sight (a parameter, a CPU tensor)
    f"model = nn.Linear(3, 2).to({MACHINE})\ndef run(x):\n    return model(x) + torch.ones(2)\n",
    # each process's own GPU everywhere
    "local_rank = int(os.environ['LOCAL_RANK'])\nmodel = nn.Linear(3, 2).cuda(local_rank)\n"
    "print(model(torch.zeros(4, 3).to(f'cuda:{local_rank}')))\n",
    # `cuda:0` against a user's option: not this rule's pair (TDL002 reads hardcoded devices)
    "parser = argparse.ArgumentParser()\nargs = parser.parse_args()\n"
    "model = nn.Linear(3, 2).to(args.device)\nprint(model(torch.zeros(4, 3).to('cuda:0')))\n",
    # one `if` test decides both, for the model moved in place and for the batches
    "parser = argparse.ArgumentParser()\nparser.add_argument('--cuda', action='store_true')\n"
    "args = parser.parse_args()\nmodel = nn.Linear(3, 2)\nif args.cuda:\n    model.cuda()\n"
    "for data in [torch.zeros(4, 3)]:\n    if args.cuda:\n        data = data.cuda()\n    out = model(data)\n",
    "model = nn.Linear(3, 2)\nif torch.cuda.is_available():\n    model.cuda()\n"
    "for data in [torch.zeros(4, 3)]:\n    if torch.cuda.is_available():\n        data = data.cuda()\n"
    "    out = model(data)\n",
    # an option that is no device choice: the move to CUDA runs whenever the feature is on
    "parser = argparse.ArgumentParser()\nargs = parser.parse_args()\n"
    f"model = nn.Linear(3, 2).to({MACHINE})\nx = torch.zeros(4, 3)\n"
    "if args.flip_test:\n    x = x.cuda()\nprint(model(x))\n",
    # a move under a test that reads the CPU is no move to CUDA on the user's word
    "parser = argparse.ArgumentParser()\nargs = parser.parse_args()\nmodel = nn.Linear(3, 2)\n"
    "if torch.cuda.is_available():\n    model.cuda()\nx = torch.zeros(4, 3)\nif not args.cpu:\n"
    "    x = x.cuda()\nprint(model(x))\n",
    # a name bound to both kinds of decision is none in particular
    f"device = {MACHINE}\nif flag:\n    device = args.device\nx = torch.ones(3).to(device)\n"
    "print(x + torch.ones(3).to(args.device))\n",
])
def test_not_flagged(code):
    assert positions(code) == []


# -- a decision made at import by another module of the project ---------------------------

CONFIG = """\
import torch
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
def get_device():
    return "cuda" if torch.cuda.is_available() else "cpu"
"""


def lint_project(files, path):
    from torchdev_lint.analysis import project_index
    index = project_index.ProjectIndex()
    for name, text in files.items():
        index.add(name, textwrap.dedent(text))
    return lint_source(path, textwrap.dedent(files[path]), [RULE], preview=True, index=index).findings


@pytest.mark.parametrize("imported, placed", [
    ("from pkg.config import DEVICE", "torch.tensor([0.5, 0.5, 0.5]).to(DEVICE)"),
    ("from pkg import config", "torch.ones(3, device=config.DEVICE)"),  # a module, not the user's config
    ("from pkg.config import get_device", "torch.zeros(3).to(get_device())"),
    ("from .config import DEVICE", "torch.ones(3, device=DEVICE)"),
])
def test_a_device_another_module_picks_at_import_against_the_constructor_device(imported, placed):
    detector = f"""\
        import torch
        import torch.nn as nn
        {imported}

        class Detector:
            def __init__(self, device="cpu"):
                self.model = nn.Linear(3, 2).to(device)
                self.mean = {placed}

            def __call__(self, x):
                return self.model(x - self.mean)
    """
    files = {"pkg/__init__.py": "", "pkg/config.py": CONFIG, "pkg/detector.py": detector}
    (finding,) = lint_project(files, "pkg/detector.py")
    assert (finding.line, finding.column) == (11, 16)
    assert any("config` is picked by the machine alone" in e.message for e in finding.evidence)


def test_the_imported_device_used_everywhere_is_one_decision():
    detector = """\
        import torch
        import torch.nn as nn
        from pkg.config import DEVICE

        class Detector:
            def __init__(self):
                self.model = nn.Linear(3, 2).to(DEVICE)
                self.mean = torch.zeros(3).to(DEVICE)

            def __call__(self, x):
                return self.model(x - self.mean)
    """
    files = {"pkg/__init__.py": "", "pkg/config.py": CONFIG, "pkg/detector.py": detector}
    assert lint_project(files, "pkg/detector.py") == []


def test_an_imported_device_the_user_chooses_is_not_the_machines():
    config = """\
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cpu")
        DEVICE = torch.device(parser.parse_args().device)
    """
    detector = """\
        import torch
        import torch.nn as nn
        from pkg.config import DEVICE

        class Detector:
            def __init__(self, device="cpu"):
                self.model = nn.Linear(3, 2).to(device)
                self.mean = torch.zeros(3).to(DEVICE)

            def __call__(self, x):
                return self.model(x - self.mean)
    """
    files = {"pkg/__init__.py": "", "pkg/config.py": config, "pkg/detector.py": detector}
    assert lint_project(files, "pkg/detector.py") == []


@pytest.mark.parametrize("imported, call", [
    ("from utils import to_var", "to_var(inputs)"),
    ("import utils", "utils.to_var(inputs)"),
])
def test_a_helper_of_another_module_that_moves_whenever_cuda_is_there_against_the_cuda_option(imported, call):
    helper = """\
        import torch
        def to_var(x):
            if torch.cuda.is_available():
                x = x.cuda()
            return x
    """
    script = f"""\
        import argparse
        import torch
        import torch.nn as nn
        {imported}
        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        args = parser.parse_args()
        net = nn.Linear(3, 2).to("cuda" if args.cuda else "cpu")
        for inputs in [torch.zeros(4, 3)]:
            out = net({call})
    """
    (finding,) = lint_project({"utils.py": helper, "train.py": script}, "train.py")
    assert (finding.line, finding.column) == (10, 11)
    assert any("of module `utils` moves to CUDA whenever" in e.message for e in finding.evidence)


def test_a_helper_of_another_module_that_moves_only_when_asked_is_the_users_decision():
    helper = "import torch\ndef to_var(x, cuda):\n    return x.cuda() if cuda else x\n"
    script = """\
        import argparse
        import torch.nn as nn
        from utils import to_var
        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        args = parser.parse_args()
        net = nn.Linear(3, 2).to("cuda" if args.cuda else "cpu")
        out = net(to_var(torch.zeros(4, 3), args.cuda))
    """
    assert lint_project({"utils.py": helper, "train.py": script}, "train.py") == []
