"""TDL010 (loss-weight-not-moved): losses whose CPU weight meets device data, the moves and
placements that make them correct, and the fix (appending the model's move), run for real."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability, Confidence
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL010"]
HEAD = "import torch\nimport torch.nn as nn\n"
TRAIN = (
    "model = Net().to(device)\n"
    "for x, y in loader:\n"
    "    loss = criterion(model(x.to(device)), y.to(device))\n"
)


def lint(code, preview=True):
    return lint_source("example.py", HEAD + textwrap.dedent(code), [RULE], preview=preview)


def positions(code):
    """(line, column) of each finding, lines counted after the two import lines."""
    return [(f.line - 2, f.column) for f in lint(code).findings]


@pytest.mark.parametrize("code", [
    # Weights built on the device, or moved before the loss is built.
    "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0], device=device))\n" + TRAIN,
    "w = torch.tensor([1.0, 2.0]).to(device)\ncriterion = nn.CrossEntropyLoss(weight=w)\n" + TRAIN,
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2).cuda())\n" + TRAIN,
    # The criterion moved: by a chain, a statement, a rebinding, or a helper that may move it.
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2)).to(device)\n" + TRAIN,
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n" + TRAIN + "criterion.cuda()\n",
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\ncriterion = criterion.to(device)\n" + TRAIN,
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n"
    "model, criterion = accelerator.prepare(model, criterion)\n" + TRAIN,
    # The default device builds the weight there.
    "torch.set_default_device(device)\ncriterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n" + TRAIN,
    "with torch.device('cuda'):\n    criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n" + TRAIN,
    # No tensor argument, or one of unknown origin.
    "criterion = nn.CrossEntropyLoss(label_smoothing=0.1)\n" + TRAIN,
    "def build(w):\n    global criterion\n    criterion = nn.CrossEntropyLoss(weight=w)\n" + TRAIN,
    "w = load_weights()\ncriterion = nn.CrossEntropyLoss(weight=w)\n" + TRAIN,
    # Only CPU data ever reaches it.
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\nmodel = nn.Linear(4, 2)\n"
    "loss = criterion(model(torch.randn(3, 4)), torch.zeros(3, dtype=torch.long))\n",
    # A submodule of a module: model.to() moves it.
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.fc = nn.Linear(4, 2)\n"
    "        self.criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n"
    "    def forward(self, x, y):\n        return self.criterion(self.fc(x), y)\n" + TRAIN,
    # The file's own loss module that moves its buffer to the input itself.
    "class FocalLoss(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.register_buffer('alpha', torch.tensor([0.25, 0.75]))\n"
    "    def forward(self, x, y):\n        return (self.alpha.to(x.device)[y] * x).mean()\n"
    "criterion = FocalLoss()\n" + TRAIN,
])
def test_not_flagged(code):
    assert positions(code) == []


@pytest.mark.parametrize("code, where", [
    ("criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))\n" + TRAIN, [(1, 13)]),
    ("criterion = nn.CrossEntropyLoss(torch.tensor([1.0, 2.0]), ignore_index=-1)\n" + TRAIN, [(1, 13)]),
    ("criterion = nn.BCEWithLogitsLoss(pos_weight=torch.ones(1) * 3)\n" + TRAIN, [(1, 13)]),
    ("criterion = nn.NLLLoss(weight=torch.FloatTensor(weights))\n" + TRAIN, [(1, 13)]),
    ("import numpy as np\ncriterion = nn.BCELoss(weight=torch.from_numpy(np.ones(2)).float())\n" + TRAIN,
     [(2, 13)]),
    # Built after the function that calls it (a script's usual order).
    ("def train(model, criterion):\n    for x, y in loader:\n"
     "        criterion(model(x.to(device)), y).backward()\n"
     "def main():\n    weights = torch.tensor([0.2, 0.8])\n"
     "    criterion = nn.CrossEntropyLoss(weight=weights)\n"
     "    model = Net().to(device)\n    train(model, criterion)\n", [(6, 17)]),
    # The file's own loss module with a CPU buffer.
    ("class WeightedLoss(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.register_buffer('w', torch.tensor([0.25, 0.75]))\n"
     "    def forward(self, x, y):\n        return nn.functional.cross_entropy(x, y, weight=self.w)\n"
     "criterion = WeightedLoss()\n" + TRAIN, [(7, 13)]),
])
def test_flagged(code, where):
    assert positions(code) == where


def test_findings_are_possible_and_name_the_weight_and_the_call():
    code = "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))\n" + TRAIN
    (finding,) = lint(code).findings
    assert finding.confidence is Confidence.POSSIBLE
    assert [(e.line - 2, e.column) for e in finding.evidence] == [(1, 40), (4, 12)]
    assert "built on the CPU" in finding.evidence[0].message
    assert lint(code, preview=False).findings == []


def fixed(code):
    outcome = fix_file(lint(code), unsafe=True)
    assert outcome.error is None
    return outcome.source[len(HEAD):]


def test_fix_appends_the_models_move():
    code = ("def main(device):\n    model = Net()\n    model.to(device)\n"
            "    criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n"
            "    for x, y in loader:\n        criterion(model(x.to(device)), y.to(device))\n")
    (finding,) = lint(code).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert "    criterion = nn.CrossEntropyLoss(weight=torch.ones(2)).to(device)\n" in fixed(code)
    assert lint(fixed(code)).findings == []


@pytest.mark.parametrize("code", [
    # The model moves after the loss is built, or under an `if`: no device to reuse here.
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\n" + TRAIN,
    "criterion = nn.CrossEntropyLoss(weight=torch.ones(2))\nmodel = Net()\n"
    "if use_gpu:\n    model.cuda()\nloss = criterion(model(x.cuda()), y)\n",
])
def test_no_fix_without_a_move_before_it_in_the_same_block(code):
    (finding,) = lint(code).findings
    assert finding.fix is None


def test_the_bug_and_the_fix_at_run_time():
    """The meta device plays the accelerator: a CPU weight meeting meta logits fails the
    way it fails on a GPU, and after the fix the criterion follows the model."""
    torch = pytest.importorskip("torch")
    program = textwrap.dedent("""\
        device = torch.device("meta")
        model = nn.Linear(4, 2)
        model.to(device)
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))
        out = model(torch.randn(5, 4).to(device))
        loss = criterion(out, torch.zeros(5, dtype=torch.long).to(device))
        """)
    namespace = {"torch": torch, "nn": torch.nn}
    with pytest.raises((RuntimeError, NotImplementedError)):
        exec(HEAD + program, dict(namespace))
    after = fixed(program)
    assert "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0])).to(device)\n" in after
    exec(HEAD + after, dict(namespace))
