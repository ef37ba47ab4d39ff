"""TDL003 discarded-to-result: when assigning the move back is safe. A module's registered
parameter cannot take the plain tensor `.to()` returns (`Module.__setattr__` raises), and a
`Parameter` rebound to it is no longer a leaf an optimizer can hold."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL003"]

MODULE = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(2))
            self.register_parameter("v", nn.Parameter(torch.ones(2)))
            self.register_buffer("b", torch.zeros(2))
            self.t = torch.zeros(2)

        def place(self, device):
            self.w.to(device)
            self.v.to(device)
            self.b.to(device)
            self.t.to(device)
            self.w.data.to(device)


    def make(device):
        p = nn.Parameter(torch.zeros(2))
        p.to(device)
        q = torch.zeros(2)
        q.to(device)
        return p, q
    """)


def fixes(code):
    result = lint_source("t.py", code, [RULE], preview=True)
    return [(f.line, f.column, f.fix.applicability.value) for f in result.findings]


def test_a_parameter_gets_no_safe_fix_and_a_plain_tensor_keeps_it():
    assert fixes(MODULE) == [
        (14, 9, "unsafe"),  # self.w = nn.Parameter(...): the assignment back raises
        # `self.v`, `self.b` are registered by name (module state): a parameter's
        # assignment back raises, and the fix does not tell them apart
        (15, 9, "unsafe"),
        (16, 9, "unsafe"),
        (17, 9, "safe"),
        (18, 9, "safe"),  # `self.w.data = ...` is how a parameter's data moves
        (23, 5, "unsafe"),  # `p` would become a non-leaf tensor
        (25, 5, "safe"),
    ]


@pytest.mark.parametrize("base", ["nn.Module", "torch.nn.Module"])
def test_an_attribute_a_module_never_assigns_may_be_an_inherited_parameter(base):
    code = (
        f"import torch\nimport torch.nn as nn\nclass Net({base}):\n"
        "    def place(self, d, x: torch.Tensor):\n        self.weight: torch.Tensor\n"
        "        self.weight.to(d)\n        x.to(d)\n"
    )
    assert fixes(code) == [(6, 9, "unsafe"), (7, 9, "safe")]


@pytest.mark.parametrize("rebinding, confidence", [
    # reshaped and repeated: still on the device it was built on, so the dropped move may do nothing
    ("    mask = mask.unsqueeze(1).repeat(1, 3)\n", "possible"),
    # moved to the CPU on the way: the dropped move is what would put it back
    ("    mask = mask.unsqueeze(1).cpu()\n", "certain"),
])
def test_a_tensor_built_on_a_device_stays_there_through_reshapes(rebinding, confidence):
    code = ("import torch\ndef noise(weight, device):\n"
            "    mask = torch.zeros(weight.size(0), device=weight.device)\n" + rebinding
            + "    mask.to(device)\n    return weight.to(device) * mask\n")
    result = lint_source("example.py", code, [RULE], preview=True)
    assert [(f.line, f.confidence.value) for f in result.findings] == [(5, confidence)]


@pytest.mark.parametrize("cast, confidence", [
    # a CUDA tensor type copies to the GPU: the dropped move after it may do nothing
    ("masks.type(torch.cuda.FloatTensor)", "possible"),
    ("masks.type('torch.cuda.FloatTensor')", "possible"),
    # a CPU tensor type keeps it on the CPU: the dropped move is what would place it
    ("masks.type(torch.FloatTensor)", "certain"),
])
def test_a_cast_to_a_cuda_tensor_type_places_the_tensor(cast, confidence):
    code = ("import torch\ndef run(mask, image, gen, device):\n    image = image.to(device)\n"
            "    masks = torch.from_numpy(mask)\n    masks = " + cast + "\n    masks.to(device)\n"
            "    return gen(image * masks)\n")
    result = lint_source("example.py", code, [RULE], preview=True)
    assert [(f.line, f.confidence.value) for f in result.findings] == [(6, confidence)]


@pytest.mark.parametrize("dropped, confidence", [
    # an input: by the convention that puts the rest on the module's device, it arrives there too
    ("        labels.cuda()\n", "possible"),
    ("        labels[0].cuda()\n", "possible"),
    # built here on the CPU: it does not follow the module
    ("        labels = torch.zeros(2, dtype=torch.long)\n        labels.cuda()\n", "certain"),
    # a move bound after the drop does not say where the value was at the drop
    ("        labels = labels.view(-1)\n        labels.cuda()\n        labels = labels.long().cuda()\n", "possible"),
    # ... unless a loop brings it back around
    ("        labels = labels.view(-1)\n        for _ in range(2):\n            labels.cuda()\n"
     "            labels = labels.long().cuda()\n", "certain"),
])
def test_a_module_input_arrives_on_the_module_device(dropped, confidence):
    code = ("import torch\nimport torch.nn as nn\nclass Full(nn.Module):\n"
            "    def forward(self, inputs, labels):\n        out = self.model(inputs)\n" + dropped
            + "        return self.loss(out, labels)\n")
    result = lint_source("example.py", code, [RULE], preview=True)
    assert [f.confidence.value for f in result.findings] == [confidence]


@pytest.mark.parametrize("computed, confidence", [
    ("F.unfold(x, 4).transpose(0, 2).contiguous()", "possible"),  # computed from the input: on its device
    ("torch.nn.functional.unfold(x, 4)", "possible"),
    ("x[..., :4]", "possible"),
    ("self.table[:x.size(1)]", "certain"),  # the module's own plain attribute: x only gives a size
    ("F.unfold(x, 4).to('cpu')", "certain"),  # moved off the input's device first
])
def test_a_value_a_modules_method_computes_from_its_input(computed, confidence):
    code = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
            "class Chop(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.table = torch.zeros(80, 4)\n    def forward(self, x):\n"
            f"        patches = {computed}\n        patches.cuda()\n        return self.body(patches)\n")
    result = lint_source("chop.py", code, [RULE], preview=True)
    assert [(f.line, f.confidence.value) for f in result.findings] == [(10, confidence)]


@pytest.mark.parametrize("iterator, confidence", [
    # torchtext's iterators put the batches on the device they are given: the dropped move does nothing
    ("torchtext.data.BPTTIterator.splits((train, val), batch_size=32, device=device)", "possible"),
    ("torchtext.data.BucketIterator.splits((train, val), batch_size=32, device=device)", "possible"),
    # plain lists of CPU batches beside a model moved to the device: the batch stays behind
    ("(list(train), list(val))", "certain"),
])
def test_batches_a_data_iterator_placed_are_on_the_device(iterator, confidence):
    code = ("import torch\nimport torchtext\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            f"train_iter, val_iter = {iterator}\n"
            + ("model = torch.nn.Linear(2, 2).to(device)\n" if confidence == "certain" else "")
            + "def evaluate(model, data):\n    for batch in data:\n        data, target = batch.text, batch.target\n"
            "        data.to(device)\n        output = model(data)\n        count = data.size(0)\n"
            "evaluate(model, val_iter)\n")
    result = lint_source("lm.py", code, [RULE], preview=True)
    assert [f.confidence.value for f in result.findings] == [confidence]


@pytest.mark.parametrize("after, confidence", [
    # freed at once: nothing reads it as if it had moved (a wasted copy, no wrong device)
    ("        del images\n", "possible"),
    ("        del images, labels\n", "possible"),
    # read again first: the model gets the tensor where it was
    ("        print(model(images))\n        del images\n", "certain"),
])
def test_a_dropped_move_of_a_value_deleted_next_is_no_wrong_device(after, confidence):
    code = ("import torch\n"
            "def evaluate(model, loader, device):\n"
            "    model.to(device)\n"
            "    for images, labels in loader:\n"
            "        images.to(device)\n" + after)
    result = lint_source("evaluate.py", code, [RULE], preview=True)
    assert [(f.line, f.column, f.confidence.value) for f in result.findings] == [(5, 9, confidence)]


@pytest.mark.parametrize("base", ["PyroModule", "Base"])
def test_a_methods_self_is_never_taken_for_a_tensor_by_its_uses(base):
    # `self.mean` reads an attribute, not Tensor.mean: the object is the class's, whose `to()`
    # (a module's, in place) is not known to return a new object
    code = (f"import torch\nfrom lib import {base}\nclass BNN({base}):\n"
            "    def __init__(self, mean):\n        super().__init__()\n        self.mean = torch.tensor(mean)\n"
            "    def setup(self, device):\n        self.to(device)\n        self.mean = self.mean.to(device)\n")
    assert lint_source("example.py", code, [RULE], preview=True).findings == []


def test_a_plain_functions_parameter_used_like_a_tensor_still_is_one():
    code = ("import torch\ndef setup(x, device):\n    x.to(device)\n    return x.mean()\n")
    assert [f.line for f in lint_source("example.py", code, [RULE], preview=True).findings] == [3]


@pytest.mark.parametrize("before, move, flagged", [
    # the tensor is moved to the device it is on: a no-op, nothing to fix
    ("    x = torch.ones(3)\n", "    x.to(x.device)\n", False),
    ("    ids = torch.ones(3)\n    x = ids\n", "    x.to(ids.device)\n", False),
    ("    ids = torch.ones(3)\n    x = ids.long()\n", "    x.to(ids.device)\n", False),
    # to another tensor's device, or after a rebinding the move does not see: flagged
    ("    ids = torch.ones(3)\n    x = ids\n", "    x.to(other.device)\n", True),
    ("    ids = torch.ones(3)\n    x = ids\n    x = torch.zeros(3)\n", "    x.to(ids.device)\n", True),
    ("    ids = torch.ones(3)\n    x = ids\n    x += 1\n", "    x.to(ids.device)\n", True),
])
def test_a_move_to_the_device_the_tensor_is_on_does_nothing(before, move, flagged):
    code = "import torch\ndef generate(model, other):\n" + before + move + "    return model(x)\n"
    findings = lint_source("example.py", code, [RULE], preview=True).findings
    assert [f.line for f in findings] == ([code.count("\n") - 1] if flagged else [])


@pytest.mark.parametrize("before, confidence", [
    # computed from values the code moved to the CPU: the dropped move to the CPU does nothing
    ("emb = F.normalize(emb, dim=1).to('cpu')", "possible"),
    ("emb = F.normalize(emb, dim=1).cpu()", "possible"),
    # computed from the module's input: the dropped move is what would bring it to the CPU
    ("emb = F.normalize(emb, dim=1)", "certain"),
])
def test_a_dropped_move_to_the_cpu_of_a_value_already_there(before, confidence):
    code = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nclass Loss(nn.Module):\n"
            "    def contrast(self, emb, labels):\n        " + before + "\n"
            "        sim = torch.mm(emb, emb.t()) / self.temperature\n        sim.to('cpu')\n"
            "        return F.cross_entropy(sim, labels)\n")
    result = lint_source("example.py", code, [RULE], preview=True)
    assert [f.confidence.value for f in result.findings] == [confidence]
