"""TDL009 (numpy-on-accelerator): what counts as "may be on an accelerator", and the fix's
shape on aliases, chains laid out over lines, comments, nested calls and other rules' fixes."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL009"]


def lint(code, rules=(RULE,)):
    return lint_source("example.py", textwrap.dedent(code), list(rules), preview=True)


def positions(code):
    return [(f.line, f.column) for f in lint(code).findings]


def fixed(code, rules=(RULE,)):
    # The fix's shape; whether it is safe is tested apart (receivers not certainly tensors
    # get unsafe fixes).
    result = lint(code, rules)
    outcome = fix_file(result, unsafe=True)
    assert outcome.error is None
    again = lint(outcome.source, rules)
    assert [f for f in again.findings if f.code == "TDL009"] == []
    return outcome.source


MODEL = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2).to(device)\n"


@pytest.mark.parametrize(
    "code",
    [
        # Clearly on the CPU.
        "import torch\nx = torch.arange(3)\nprint(x.numpy())\n",
        "import torch\nx = torch.from_numpy(a)\nprint((x * 2).numpy())\n",
        MODEL + "out = model(x).cpu()\nprint(out.numpy())\n",
        MODEL + "out = model(x).to('cpu')\nprint(out.numpy())\n",
        MODEL + "out = model(x).to(torch.device('cpu'))\nprint(out.numpy())\n",
        MODEL + "out = model(x).to(self._cpu_device)\nprint(out.numpy())\n",
        MODEL + "out = model(x).detach().cpu().float()\nprint(out.numpy())\n",
        # A dtype change is no move.
        "import torch\nx = torch.ones(2).to(torch.float16)\nprint(x.numpy())\n",
        "import torch\nx = torch.ones(2).to(dtype=torch.float64)\nprint(x.numpy())\n",
        # Parameters of unknown origin.
        "def show(t):\n    return t.numpy()\n",
        "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        return x.numpy()\n",
        # Asked to copy.
        MODEL + "print(model(x).numpy(force=True))\n",
        MODEL + "print(model(x).numpy(True))\n",
        # Not a tensor: `.numpy()` of a numpy-like object, shapes and devices.
        MODEL + "out = model(x)\nprint(out.shape.numpy())\n",
        "import pandas as pd\ndf = pd.read_csv(p)\nprint(df.to_numpy())\n",
        # Moved back by a library call is not guessed at: only calls of unknown kind count.
        "import numpy as np\ndef f(x, device):\n    return np.asarray(x.to(device)).numpy()\n",
        # A module computes where its inputs are: all known to be on the CPU here.
        MODEL + "up = nn.Upsample(scale_factor=2)\nprint(up(torch.from_numpy(a)).numpy())\n",
        MODEL + "print(model(torch.zeros(1, 2)).detach().numpy())\n",
        # `device=x.device` follows `x`, of unknown place.
        "import torch\ndef paint(image):\n    lut = torch.tensor([0.0, 1.0], device=image.device)\n"
        "    return lut[image.long()].numpy()\n",
        # A script that never places anything on a device runs on the CPU.
        "import torch.nn as nn\nmodel = nn.Linear(2, 2)\nout = model(x)\n"
        "print(out.detach().numpy())\n",
    ],
)
def test_not_flagged(code):
    assert positions(code) == []


@pytest.mark.parametrize(
    "code, where",
    [
        # A model's output, a field of it, an element of its tuple output.
        (MODEL + "out = model(x)\nprint(out.logits.numpy())\n", (5, 7)),
        (MODEL + "logits, hidden = model(x)\nprint(hidden.numpy())\n", (5, 7)),
        (MODEL + "print(model(x)[0].numpy())\n", (4, 7)),
        # Computed from it: ops, methods, arithmetic.
        (MODEL + "print(torch.sigmoid(model(x)).numpy())\n", (4, 7)),
        (MODEL + "print((model(x) * 2).argmax(1).numpy())\n", (4, 7)),
        (MODEL + "pred = model(x).max(1)[1]\nprint(pred.numpy())\n", (5, 7)),
        (MODEL + "out = torch.cat([model(x), model(y)])\nprint(out.numpy())\n", (5, 7)),
        # Moved to the device, whatever it was.
        ("def f(x, device):\n    x = x.to(device)\n    return x.numpy()\n", (3, 12)),
        ("def f(x):\n    return x.cuda().float().numpy()\n", (2, 12)),
        ("images = [t.to(device) for t in batch]\nprint(images[0].numpy())\n", (2, 7)),
        # A call of unknown kind fed data on the device (a model passed in as a parameter).
        ("def evaluate(model, loader, device):\n    for xb, _ in loader:\n"
         "        yield model(xb.to(device)).numpy()\n", (3, 15)),
        ("def decode(codec, codes, device):\n    return codec.decode(codes.to(device)).numpy()\n",
         (2, 12)),
        # A submodule's output on an input of unknown place.
        (
            "import torch.nn as nn\nclass Det(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.head = nn.Linear(2, 2)\n"
            "    def forward(self, x):\n        boxes = self.head(x)\n"
            "        return boxes.numpy()  # on the device of x\n",
            (8, 16),
        ),
        # Lightning hands the steps a batch already on the device.
        (
            "import lightning as L\nclass Lit(L.LightningModule):\n"
            "    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        self.seen.append(y.numpy())\n",
            (5, 26),
        ),
        # A method's attribute holding a model output.
        (
            "import torch.nn as nn\nclass Probe(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.net = nn.Linear(2, 2)\n"
            "    def run(self, x):\n        self.out = self.net(x.to(self.device))\n"
            "        return self.out.numpy()\n",
            (8, 16),
        ),
    ],
)
def test_flagged(code, where):
    assert positions(code) == [where]


def test_alias_and_from_imports():
    code = """\
        import torch as T
        from torch.nn import Linear
        net = Linear(2, 2).to(device)
        with T.no_grad():
            y = T.relu(net(x)).numpy()
    """
    assert fixed(code).splitlines()[-1] == "    y = T.relu(net(x)).cpu().numpy()"


def test_multi_line_chain_keeps_its_layout_and_comments():
    code = """\
        import torch
        import torch.nn as nn
        model = nn.Linear(2, 2).cuda()
        with torch.inference_mode():
            arr = (
                model(x)  # logits
                .softmax(-1)
                .numpy()  # to numpy
            )
    """
    assert fixed(code).splitlines()[4:] == [
        "    arr = (",
        "        model(x)  # logits",
        "        .softmax(-1).cpu()",
        "        .numpy()  # to numpy",
        "    )",
    ]


def test_nested_calls_are_each_fixed():
    code = """\
        import numpy as np
        import torch.nn as nn
        model = nn.Linear(2, 2).to(device)
        def score(x, y):
            return np.mean(model(x).numpy() == model(y).detach().numpy())
    """
    assert fixed(code).splitlines()[-1] == (
        "    return np.mean(model(x).detach().cpu().numpy() == model(y).detach().cpu().numpy())"
    )


def test_detach_only_where_grad_may_be_on():
    code = """\
        import torch
        import torch.nn as nn
        model = nn.Linear(2, 2).to(device)

        @torch.no_grad()
        def predict(x):
            return model(x).numpy()

        def train_step(x):
            out = model(x)
            out.sum().backward()
            return out.numpy(), out.argmax(1).numpy(), out.data.numpy()
    """
    lines = fixed(code).splitlines()
    assert lines[6] == "    return model(x).cpu().numpy()"
    assert lines[-1] == (
        "    return out.detach().cpu().numpy(), out.argmax(1).cpu().numpy(), "
        "out.data.cpu().numpy()"
    )


def test_lightning_evaluation_steps_run_without_grad():
    code = """\
        import lightning as L
        class Lit(L.LightningModule):
            def validation_step(self, batch, batch_idx):
                x, y = batch
                preds = self(x)
                self.log_preds(preds.numpy())
    """
    assert fixed(code).splitlines()[-1] == "        self.log_preds(preds.cpu().numpy())"


def test_composes_with_the_cuda_call_fix():
    code = "import torch\nx = torch.randn(3)\nprint(x.cuda().numpy())\n"
    rules = [Rule.registry["TDL001"], RULE]
    result = lint(code, rules)
    assert sorted(f.code for f in result.findings) == ["TDL001", "TDL009"]
    outcome = fix_file(result)
    assert outcome.source.splitlines()[-1] == "print(x.to(device).cpu().numpy())"


# The implicit conversions of the issue, each pinned at its argument, next to its CPU twin.
GPU = "import numpy as np\nimport torch\nx = torch.randn(3).cuda()\n"


@pytest.mark.parametrize("call, column, moved", [
    ("np.array(x)", 10, "np.array(x.cpu())"),
    ("np.asarray(x)", 12, "np.asarray(x.cpu())"),
    ("np.isnan(x)", 10, "np.isnan(x.cpu())"),
    ("np.sum(x)", 8, "np.sum(x.cpu())"),
    ("np.mean(x * 2)", 9, "np.mean((x * 2).cpu())"),
    ("np.save('x.npy', x)", 18, "np.save('x.npy', x.cpu())"),
    ("np.unique(x)", 11, "np.unique(x.cpu())"),
])
def test_each_numpy_conversion_is_flagged_and_a_cpu_tensor_is_not(call, column, moved):
    assert positions(GPU + f"y = {call}\n") == [(4, column + 4)]
    assert fixed(GPU + f"y = {call}\n") == GPU + f"y = {moved}\n"
    assert positions(GPU.replace(".cuda()", "") + f"y = {call}\n") == []


# DINOv2's linear evaluation: `if self.device == _CPU_DEVICE:` with a module constant.
CONSTANT_TEST = (
    "import torch\n"
    "{constant}\n"
    "class LogReg(torch.nn.Module):\n"
    "    def forward(self, samples):\n"
    "        samples = samples.to(device=self.device)\n"
    "{rebinding}"
    "        if self.device == _CPU_DEVICE:\n"
    "            samples = samples.numpy()\n"
    "        return samples\n"
    "{after}"
)


@pytest.mark.parametrize("constant", [
    "_CPU_DEVICE = torch.device('cpu')",
    "_CPU_DEVICE = 'cpu'",
    "_CPU_DEVICE: torch.device = torch.device('cpu')",
    "CPU = 'cpu'\n_CPU_DEVICE = torch.device(CPU)",
])
def test_a_module_constant_naming_the_cpu_makes_the_branch_cpu_only(constant):
    code = CONSTANT_TEST.format(constant=constant, rebinding="", after="")
    assert positions(code) == []


@pytest.mark.parametrize("constant, rebinding, after, line", [
    # Rebound at the top level: which value holds depends on the order of execution.
    ("_CPU_DEVICE = torch.device('cpu')", "", "_CPU_DEVICE = torch.device('cuda')\n", 7),
    # Assigned in a function that declares it global.
    ("_CPU_DEVICE = torch.device('cpu')", "",
     "def use_gpu():\n    global _CPU_DEVICE\n    _CPU_DEVICE = torch.device('cuda')\n", 7),
    # A local of the same name in the function that tests it.
    ("_CPU_DEVICE = torch.device('cpu')", "        _CPU_DEVICE = self.main_device\n", "", 8),
    # A parameter of the same name elsewhere, a loop variable, a `del`.
    ("_CPU_DEVICE = torch.device('cpu')", "", "def f(_CPU_DEVICE):\n    pass\n", 7),
    ("_CPU_DEVICE = torch.device('cpu')", "", "for _CPU_DEVICE in devices:\n    pass\n", 7),
    ("_CPU_DEVICE = torch.device('cpu')", "", "del _CPU_DEVICE\n", 7),
    # Bound only inside a function, or to a device chosen at run time.
    ("def setup():\n    _CPU_DEVICE = torch.device('cpu')", "", "", 8),
    ("_CPU_DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "", "", 7),
    # A star import may bind the name again.
    ("_CPU_DEVICE = torch.device('cpu')", "", "from settings import *\n", 7),
    # A constant naming an accelerator: the branch runs off the CPU.
    ("_CPU_DEVICE = torch.device('cuda')", "", "", 7),
])
def test_a_name_that_is_not_a_cpu_constant_keeps_the_finding(constant, rebinding, after, line):
    code = CONSTANT_TEST.format(constant=constant, rebinding=rebinding, after=after)
    assert positions(code) == [(line, 23)]
