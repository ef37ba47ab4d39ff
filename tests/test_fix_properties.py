"""Property tests for --fix over generated programs and the bundled real ones: the output
always parses and compiles, the fixed findings do not come back, no new ones appear, and a
second --fix changes nothing."""

import collections
import textwrap
from pathlib import Path

import libcst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.config import enabled_rules
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import applicable, fix_file

RULES = enabled_rules(["TDL"], [])
ROOT = Path(__file__).resolve().parent.parent

names = st.sampled_from(["x", "y", "batch", "inputs", "self.w", "feats"])
modules = st.sampled_from(["model", "net", "self.encoder"])
devices = st.sampled_from(["device", "'cuda'", "'cuda:1'", "args.device", "torch.device('cuda')"])
TEMPLATES = [
    "{t} = torch.zeros({n})",
    "{t} = torch.randn({n}, {n}).cuda()",
    "{t}.cuda()",
    "{t}.cuda({n})",
    "{t}.cuda(non_blocking=True)  # move it",
    "{t}.to({dev})",
    "{t} = {t}.to({dev})",
    "{m} = nn.Linear({n}, {n})",
    "{m}.cuda()",
    "{m}.to({dev})",
    "opt = torch.optim.Adagrad({m}.parameters(), lr=0.1)",
    "sched = torch.optim.lr_scheduler.StepLR(opt, {n})",
    "opt.step()",
    "opt = torch.optim.Adagrad({m}.parameters())\nsched = torch.optim.lr_scheduler.StepLR(opt, 2)\n{m}.to({dev})",
    "opt = torch.optim.SGD({m}.parameters())\nprint(opt)\n{m}.cuda()",
    "state = torch.load('ckpt.pt')",
    "state = torch.load(\n    'ckpt.pt',\n)",
    "{m}.load_state_dict(torch.load('w.pt'))",
    "if torch.cuda.is_available():\n    {t}.cuda()",
    "device = torch.device({dev})",
    "for {a}, {b} in loader:\n    {a}.cuda()\n    {b}.to({dev})",
    "print({t})",
]


@st.composite
def statements(draw):
    template = draw(st.sampled_from(TEMPLATES))
    return template.format(
        t=draw(names), m=draw(modules), n=draw(st.integers(1, 4)), dev=draw(devices),
        a=draw(st.sampled_from(["x", "images"])), b=draw(st.sampled_from(["y", "labels"])),
    )


@st.composite
def programs(draw):
    header = draw(st.sampled_from([
        "import torch\nimport torch.nn as nn\n",
        "import torch as T\nimport torch.nn as nn\n",
        '"""A script."""\nimport os\n\nimport torch\nfrom torch import nn\n',
        "import torch\nfrom torch import nn as nn\n",
    ]))
    body = draw(st.lists(statements(), min_size=1, max_size=8))
    text = "\n".join(body)
    if draw(st.booleans()):
        params = draw(st.sampled_from(["", "args", "x, device"]))
        text = f"def main({params}):\n" + textwrap.indent(text, "    ") + "\n    return None"
    if header.startswith("import torch as T"):
        text = text.replace("torch.", "T.")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return (header + "\n" + text + "\n").replace("\n", newline)


SEEN = collections.Counter()


def check_fix_properties(source: str) -> None:
    before = lint_source("m.py", source, RULES, preview=True)
    SEEN.update(f.code for f in before.findings)
    outcome = fix_file(before, unsafe=True)
    assert outcome.error is None
    fixed = outcome.source
    libcst.parse_module(fixed)
    compile(fixed, "m.py", "exec")
    after = lint_source("m.py", fixed, RULES, preview=True)
    unfixed = [f for f in before.findings if not applicable(f, unsafe=True)]
    assert collections.Counter(f.code for f in after.findings) == collections.Counter(
        f.code for f in unfixed
    ), fixed
    assert fix_file(after, unsafe=True).source == fixed  # idempotent
    if "\r\n" in source:
        assert fixed.count("\r\n") == fixed.count("\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fix_properties_on_generated_programs(source):
    check_fix_properties(source)


def test_generated_programs_exercise_every_core_rule():
    # Runs after the property test (file order): the generator must reach each rule.
    assert {"TDL001", "TDL003", "TDL004", "TDL005"} <= set(SEEN)


REAL = sorted((ROOT / "testdata").rglob("*.py"))


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_fix_properties_on_bundled_programs(path):
    check_fix_properties(path.read_text(encoding="utf-8"))
