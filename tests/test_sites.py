"""Where a rule could report (``analysis/sites.py``): a file holding no site of any rule in the
run is not parsed by LibCST, and skipping it must change no finding, certain or possible."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import cli, engine
from torchdev_lint.analysis import sites
from torchdev_lint.rule import Rule

ROOT = Path(__file__).resolve().parent.parent
RULES_WITH_SITES = [cls for _, cls in sorted(Rule.registry.items()) if cls.sites is not None]


def of(code: str) -> frozenset[str] | None:
    return sites.of_tree(ast.parse("import torch\nimport torch.nn as nn\n" + textwrap.dedent(code)))


@pytest.mark.parametrize("cls", RULES_WITH_SITES, ids=lambda cls: cls.code)
def test_every_example_a_rule_flags_holds_its_site(cls):
    for example in cls.INVALID:
        found = of(example.code)
        assert found is None or not cls.sites.isdisjoint(found), example.code


@pytest.mark.parametrize("code, site, present", [
    # device strings: read as a device, not compared, documented or given to an unrelated call
    ('x.to("cuda")\n', sites.CUDA_STRING, True),
    ('device = "cuda:0" if ok else "cpu"\n', sites.CUDA_STRING, True),
    ('torch.load(f, map_location="cuda")\n', sites.CUDA_STRING, True),
    ('if device.type == "cuda":\n    pass\nok = d in ("cuda", "mps")\n', sites.CUDA_STRING, False),
    ('"""Runs on cuda."""\nparser.add_argument("--device", help="cuda device")\n', sites.CUDA_STRING, False),
    ('name = s.replace("cuda:", "")\n', sites.CUDA_STRING, False),
    ('i = torch.cuda.current_device()\n', sites.CUDA_STRING, True),
    # dropped moves
    ("x.to(device)\n", sites.DISCARDED_MOVE, True),
    ("{k: v.cuda() for k, v in batch.items()}\n", sites.DISCARDED_MOVE, True),
    ("x = x.to(device)\nmodel.train()\n", sites.DISCARDED_MOVE, False),
    # loads without map_location, by any name the file gives torch.load
    ("import torch\nstate = torch.load(path)\n", sites.LOADER_CALL, True),
    ("from torch import load as L\nstate = L(path)\n", sites.LOADER_CALL, True),
    ("import torch as T\nload = T.load\nstate = load(path)\n", sites.LOADER_CALL, True),
    ("import torch\nstate = torch.load(path, map_location='cpu')\n", sites.LOADER_CALL, False),
    ("import yaml\ncfg = yaml.load(f)\n", sites.LOADER_CALL, False),
    # optimizers: named, imported under another name, or held in a name or attribute
    ("opt = torch.optim.AdamW(model.parameters())\n", sites.OPTIMIZER_CALL, True),
    ("from torch.optim import SGD as S\nopt = S(params)\n", sites.OPTIMIZER_CALL, True),
    ("cls = getattr(torch.optim, name)\nopt = cls(params)\n", sites.OPTIMIZER_CALL, True),
    ("class T:\n    def __init__(self):\n        self.make = torch.optim.Adam\n"
     "    def fit(self):\n        return self.make(p)\n", sites.OPTIMIZER_CALL, True),
    ("opt = parse_opt()\nmodel = build(opt)\n", sites.OPTIMIZER_CALL, False),
    # a module's method storing what may be a tensor on self
    ("class N(nn.Module):\n    def __init__(self):\n        self.mean = torch.tensor([0.5])\n",
     sites.TENSOR_ATTRIBUTE, True),
    ("class N(nn.Module):\n    def __init__(self, w: torch.Tensor):\n        self.w = w * 2\n",
     sites.TENSOR_ATTRIBUTE, True),
    ("class N(nn.Module):\n    def __init__(self):\n        self.t = torch.tensor(1.0).view(1)\n",
     sites.TENSOR_ATTRIBUTE, True),
    ("class N(nn.Module):\n    def __init__(self, dim, cfg):\n        self.fc = nn.Linear(dim, 2)\n"
     "        self.dim = dim\n        self.cfg = cfg\n        self.scale = dim ** -0.5\n        self.names = []\n",
     sites.TENSOR_ATTRIBUTE, False),
    ("class Loader:\n    def __init__(self):\n        self.mean = torch.tensor([0.5])\n",
     sites.TENSOR_ATTRIBUTE, False),  # no base: no nn.Module
    # factories without device= in a module's methods
    ("class N(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n",
     sites.FACTORY_IN_METHOD, True),
    ("class N(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3, device=x.device)\n",
     sites.FACTORY_IN_METHOD, False),
    ("def f(x):\n    return x + torch.zeros(3)\n", sites.FACTORY_IN_METHOD, False),
    # NumPy conversions of what may be on an accelerator
    ("def f(x):\n    model = Net()\n    y = model(x)\n    return y.numpy()\n", sites.NUMPY_CONVERSION, True),
    # a model handed in is the caller's: what it returns is placed where the caller placed it
    ("def f(model, x):\n    return model(x).numpy()\n", sites.NUMPY_CONVERSION, False),
    ("import numpy as np\ndef f(x, device):\n    z = x.to(device)\n    return np.asarray(z)\n",
     sites.NUMPY_CONVERSION, True),
    ("def f(model, x):\n    return model(x).cpu().numpy()\n", sites.NUMPY_CONVERSION, False),
    ("import numpy as np\ndef f(boxes):\n    keep = np.argsort(boxes)\n    return np.array(keep)\n",
     sites.NUMPY_CONVERSION, False),
    ("import cv2\ndef f(im):\n    im = cv2.resize(im, (2, 2))\n    return cv2.flip(im, 1)\n",
     sites.NUMPY_CONVERSION, False),
])
def test_sites_are_where_findings_can_be(code, site, present):
    assert (site in of(code)) == present


def test_a_star_import_leaves_every_rule_to_run():
    assert of("from .common import *\nx = 1\n") is None


def findings(capsys, paths: list[str], tier: tuple[str, ...] = ("--preview",)) -> list[tuple]:
    cli.main(["--format", "json", "--isolated", *tier, "--no-cache", "-j", "1", *paths])
    return sorted((f["path"], f["line"], f["column"], f["code"], f["confidence"])
                  for f in json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("tier", [(), ("--preview",)], ids=["default", "preview"])
@pytest.mark.parametrize("folder", ["testdata", "benchmarks/user-bugs"])
def test_findings_are_the_same_when_every_rule_runs_on_every_file(folder, tier, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with_sites = findings(capsys, [folder], tier)
    for cls in RULES_WITH_SITES:
        monkeypatch.setattr(cls, "sites", None)
        monkeypatch.setattr(cls, "may_be_certain", classmethod(lambda cls, index, path, found: True))
    assert with_sites and findings(capsys, [folder], tier) == with_sites


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The names of the files LibCST parses, in order."""
    names: list[str] = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda path, source: names.append(Path(path).name) or real(path, source))
    return names


def test_a_file_without_sites_is_not_parsed_by_libcst(tmp_path, capsys, monkeypatch, parsed):
    (tmp_path / "plots.py").write_text(
        "import numpy as np\nimport torch\n\ndef show(scores, device):\n"
        "    return np.array(scores).argmax()\n")
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('w.pt')\n")  # a site of TDL004
    monkeypatch.chdir(tmp_path)
    findings(capsys, ["."], tier=())  # the default output's rules
    assert parsed == ["train.py"]


NOISY_MODEL = """\
import torch
import torch.nn as nn


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.randn(4)
"""


@pytest.mark.parametrize("moved", [True, False])
def test_the_default_tier_skips_a_module_nothing_moves(moved, tmp_path, capsys, monkeypatch, parsed):
    """TDL008 is certain only where the project moves the module's class: where nothing does,
    the default output would show none of its findings, so it does not parse the file for it."""
    (tmp_path / "model.py").write_text(NOISY_MODEL)
    move = ".to(device)" if moved else ""
    (tmp_path / "train.py").write_text(
        "import torch\nfrom model import Noisy\n\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        f"model = Noisy(){move}\nprint(model(torch.ones(2, 4, device=device)))\n")
    monkeypatch.chdir(tmp_path)
    default = findings(capsys, ["."], tier=())
    assert ("model.py" in parsed) is moved
    assert default == ([("model.py", 11, 29, "TDL008", "certain")] if moved else [])
    assert findings(capsys, ["."]) == [("model.py", 11, 29, "TDL008", "certain" if moved else "possible")]


def test_text_the_index_did_not_read_is_checked_by_every_rule(tmp_path):
    """An editor's unsaved buffer: the sites the index read from disk say nothing of it."""
    from torchdev_lint.analysis import project_index

    path = tmp_path / "train.py"
    path.write_text("import torch\nx = torch.ones(2)\n")
    index = project_index.build([str(path)])
    edited = "import torch\nx = torch.ones(2)\nx.to('cuda:0')\nprint(x + 1)\n"
    result = engine.lint_source(str(path), edited, [Rule.registry["TDL003"]], index=index, preview=True)
    assert [f.line for f in result.findings] == [3]
