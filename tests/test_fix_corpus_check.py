"""The corpus benchmark's check that a fix never reads a name before binding it: it must
catch the bug the fixer once had, and pass what the fixer writes now."""

import importlib.util
from pathlib import Path

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

_SPEC = importlib.util.spec_from_file_location(
    "fix_corpus", Path(__file__).resolve().parent.parent / "benchmarks" / "fix_corpus.py")
fix_corpus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fix_corpus)

LATE = 'import os\nos.environ["A"] = "1"\nimport torch\nx = torch.zeros(2)\ny = x.cuda()\n'


def test_catches_a_definition_above_the_import_it_needs():
    broken = LATE.replace("import os\n", 'import os\ndevice = torch.device("cuda")\n').replace(
        "x.cuda()", "x.to(device)")
    assert fix_corpus.unbound_introductions(LATE, broken) == [
        '`torch` is read (`device = torch.device("cuda")`) before it is bound']


def test_catches_a_name_bound_nowhere():
    assert fix_corpus.unbound_introductions("y = x.cuda()\n", "y = x.to(device)\n") == [
        "`device` is never bound"]
    # a keyword names a parameter; a function's own `device` binds it there
    assert fix_corpus.unbound_introductions("s = load(p)\n", "s = load(p, map_location='cpu')\n") == []
    assert fix_corpus.unbound_introductions(
        "def f(device):\n    return x.cuda()\n", "def f(device):\n    return x.to(device)\n") == []


def test_the_fixer_output_passes_it():
    result = lint_source("m.py", LATE, [Rule.registry["TDL001"]], preview=True)
    fixed = fix_file(result).source
    assert "x.to(device)" in fixed
    assert fix_corpus.unbound_introductions(LATE, fixed) == []
