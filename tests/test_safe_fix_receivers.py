"""A safe fix never touches an object of the project's own class: programs whose only
`to`/`cuda`/`numpy` receivers are objects of a class they define (holding plain lists)
get no safe fix, and running the program after `--fix` behaves as before."""

import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.config import enabled_rules
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability
from torchdev_lint.fixer import fix_file

RULES = enabled_rules(["TDL"], [])
METHODS = {
    "to": "    def to(self, *args, **kwargs):\n        self.moves += 1\n        return self\n",
    "cuda": "    def cuda(self, *args, **kwargs):\n        self.moves += 1\n        return self\n",
    "numpy": "    def numpy(self):\n        return list(self.items)\n",
}
objects = st.sampled_from(["bag", "x", "batch", "out", "self_items"])
devices = st.sampled_from(["device", "args.device", "torch.device(args.device)"])
# Each statement only calls `to`/`cuda`/`numpy` on objects of `Bag`; `{need}` names the
# methods it calls, so only programs whose class has them are generated.
STATEMENTS = [
    ("{o} = Bag()", set()),
    ("{o} = Bag().to({dev})", {"to"}),
    ("{o} = {o}.to({dev})", {"to"}),
    ("{o}.to({dev})", {"to"}),
    ("{o}.cuda()", {"cuda"}),
    ("{o} = {o}.cuda()", {"cuda"}),
    ("arr = {o}.numpy()", {"numpy"}),
    ("arr = {o}.to({dev}).numpy()", {"to", "numpy"}),
    ("arr = {o}.cuda().numpy()", {"cuda", "numpy"}),
    ("for {o} in loader:\n    {o} = {o}.to({dev})\n    arr = {o}.numpy()", {"to", "numpy"}),
    ("for {o}, y in loader:\n    {o} = {o}.cuda()\n    print({o}.numpy())", {"cuda", "numpy"}),
    ("arr = step(net, {o})", set()),
]
STEP = (
    "def step(model, batch):\n    out = model(batch.to(device))\n"
    "    return out.numpy()\n"
)


@st.composite
def programs(draw):
    methods = draw(st.sets(st.sampled_from(sorted(METHODS)), min_size=1))
    usable = [(t, need) for t, need in STATEMENTS if need <= methods]
    body = [f"{o} = Bag()" for o in ("bag", "x", "batch", "out", "self_items")]
    for template, _ in draw(st.lists(st.sampled_from(usable), min_size=1, max_size=6)):
        body.append(template.format(o=draw(objects), dev=draw(devices)))
    base = draw(st.sampled_from(["", "(object)", "(Base)"]))
    source = (
        "import numpy as np\nimport torch\n\n\nclass Base:\n    pass\n\n\n"
        f"class Bag{base}:\n    def __init__(self):\n        self.items = [1, 2]\n"
        "        self.moves = 0\n\n" + "\n".join(METHODS[m] for m in sorted(methods))
        + "\n\n" + (STEP if {"to", "numpy"} <= methods else "")
        + "\n\ndef main(args, device, loader, net):\n" + textwrap.indent("\n".join(body), "    ")
        + "\n"
    )
    return source


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_no_safe_fix_touches_a_projects_own_to_cuda_numpy(source):
    result = lint_source("m.py", source, RULES, preview=True)
    safe = [f for f in result.findings if f.fix is not None and f.fix.applicability is Applicability.SAFE]
    assert safe == [], source
    assert fix_file(result).source == source


def test_the_generator_reaches_the_rules_that_fix_these_calls():
    # Without this, the property above could pass because nothing is reported at all.
    source = (
        "import torch\n\n\nclass Bag:\n    def to(self, d):\n        return self\n"
        "    def cuda(self):\n        return self\n\n\ndef main(device):\n    bag = Bag()\n"
        "    bag.cuda()\n    arr = bag.to(device).numpy()\n"
    )
    codes = {f.code for f in lint_source("m.py", source, RULES, preview=True).findings}
    assert "TDL001" in codes
