"""What a value is, from annotations, legacy wrappers, uses and optimizer classes held in
variables, seen through the rules that ask (TDL003 for tensors, TDL005 for optimizers)."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule


def lines(code: str, rule: str) -> list[int]:
    result = lint_source("example.py", textwrap.dedent(code), [Rule.registry[rule]], preview=True)
    return [f.line for f in result.findings]


TENSORS = {
    "Optional[Tensor]": "from typing import Optional\nfrom torch import Tensor\n"
                        "def f(x: Optional[Tensor]):\n    x.to('cpu')\n",
    "Tensor | None": "import torch\ndef f(x: torch.Tensor | None):\n    x.cpu()\n",
    "string annotation": "import torch\ndef f(x: 'torch.Tensor'):\n    x.cpu()\n",
    "torch.FloatTensor": "import torch\ndef f(x: torch.FloatTensor):\n    x.cpu()\n",
    "torch.LongTensor": "import torch\ndef f(x: torch.LongTensor):\n    x.cpu()\n",
    "Union with a tensor": "from typing import Union, List\nimport torch\n"
                           "def f(x: Union[torch.Tensor, List[int]]):\n    x.cpu()\n",
    "nn.Parameter": "import torch.nn as nn\ndef f(x: nn.Parameter):\n    x.cpu()\n",
    "annotated assignment": "from typing import Optional\nimport torch\n"
                            "x: Optional[torch.Tensor] = get()\nx.cpu()\n",
    "Variable": "import torch\nfrom torch.autograd import Variable\n"
                "x = Variable(torch.zeros(2))\nx.cuda()\n",
    "torch.autograd.Variable": "import torch\nx = torch.autograd.Variable(y)\nx.cuda()\n",
    "used as a tensor": "def f(x, device):\n    n = x.size(0)\n    x.to(device)\n"
                        "    return x.view(n, -1)\n",
    "shape read": "def f(x, device):\n    b = x.shape[0]\n    x.to(device)\n    return b\n",
}
NOT_TENSORS = {
    "another framework's Tensor": "from tensorflow import Tensor\ndef f(x: Tensor):\n    x.cpu()\n",
    "list of tensors": "from typing import List\nimport torch\n"
                       "def f(x: List[torch.Tensor]):\n    x.cpu()\n",
    "used as a module": "def f(net, device):\n    net.eval()\n    net.to(device)\n",
    "called": "def f(net, x, device):\n    net.to(device)\n    return net(x)\n",
    "conflicting uses": "def f(x, device):\n    x.view(2)\n    x.eval()\n    x.to(device)\n",
    "no use": "def f(x, device):\n    x.to(device)\n",
}


@pytest.mark.parametrize("code", TENSORS.values(), ids=TENSORS.keys())
def test_tensors_are_known(code):
    assert len(lines(code, "TDL003")) == 1


@pytest.mark.parametrize("code", NOT_TENSORS.values(), ids=NOT_TENSORS.keys())
def test_non_tensors_stay_silent(code):
    assert lines(code, "TDL003") == []


OPTIMIZERS = {
    "class parameter": "def main(model, optimizer_cls):\n"
                       "    opt = optimizer_cls(model.parameters(), lr=0.1)\n    model.to(device)\n",
    "getattr": "import torch\ndef main(model, name):\n"
               "    opt = getattr(torch.optim, name)(model.parameters(), lr=0.1)\n"
               "    model.to(device)\n",
    "class in a local": "import torch\ndef main(model):\n    opt_class = torch.optim.AdamW\n"
                        "    opt = opt_class(model.parameters(), lr=0.1)\n    model.to(device)\n",
    "class chosen by a ternary": "import torch\ndef main(model, a):\n"
                                 "    cls = torch.optim.AdamW if a else torch.optim.SGD\n"
                                 "    opt = cls(model.parameters(), lr=0.1)\n    model.cuda()\n",
    "parameters gathered first": "import torch\ndef main(model):\n"
                                 "    params = list(model.parameters())\n"
                                 "    opt = torch.optim.SGD(params, lr=0.1)\n    model.cuda()\n",
    "trainable parameters gathered": "import torch\ndef main(model):\n"
                                     "    params = [p for p in model.parameters() if p.requires_grad]\n"
                                     "    opt = torch.optim.SGD(params, lr=0.1)\n    model.cuda()\n",
}
NOT_OPTIMIZER_BUGS = {
    "another model's parameters": "import torch\ndef main(model, other):\n"
                                  "    params = list(other.parameters())\n"
                                  "    opt = torch.optim.SGD(params, lr=0.1)\n    model.cuda()\n",
    "gathered after the move": "import torch\ndef main(model):\n    model.cuda()\n"
                               "    params = list(model.parameters())\n"
                               "    opt = torch.optim.SGD(params, lr=0.1)\n",
    "not an optimizer class": "def main(model, make_report):\n"
                              "    r = make_report(model.parameters())\n    model.cuda()\n",
}


@pytest.mark.parametrize("code", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_optimizers_from_variables(code):
    assert len(lines(code, "TDL005")) == 1


@pytest.mark.parametrize("code", NOT_OPTIMIZER_BUGS.values(), ids=NOT_OPTIMIZER_BUGS.keys())
def test_not_optimizer_bugs(code):
    assert lines(code, "TDL005") == []


def test_a_dataclass_field_annotated_as_a_tensor_is_a_tensor_in_its_methods():
    import torchdev_lint.rules  # noqa: F401
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule

    code = (
        "from dataclasses import dataclass\nfrom typing import Optional\nimport torch\n"
        "@dataclass\nclass Batch:\n    tokens: torch.Tensor\n    mask: Optional[torch.Tensor] = None\n"
        "    def to(self, device):\n        self.tokens = self.tokens.to(device)\n"
        "        if self.mask is not None:\n            self.mask.to(device)\n        return self\n"
        "    def size(self):\n        n: torch.Tensor = self.tokens\n        return n\n"
    )
    (finding,) = lint_source("t.py", code, [Rule.registry["TDL003"]]).findings
    assert (finding.line, finding.confidence.value) == (11, "certain")
