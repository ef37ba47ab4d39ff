"""A load that every run reaches only after saving a checkpoint reads back what that run
wrote, on the machine that wrote it: TDL004 shows it as possible, with the save as evidence,
however many calls and files lie between. One path that reaches the load without a save
(an evaluation script, a branch that does not train) keeps it certain."""
import ast
import json
import textwrap
from pathlib import Path

import pytest

from torchdev_lint import cli
from torchdev_lint.analysis import project_index, run_order


def read(code: str, imported: dict[str, str]) -> list[str]:
    tree = ast.parse(code)
    return run_order.read(tree, project_index._scope_nodes(tree), ast.unparse, imported)


def places(code: str) -> dict[str, str]:
    """callee -> place of each call ``run_order.read`` records in ``code`` (names unique)."""
    entries = read(textwrap.dedent(code), {"torch": "torch"})
    return {callee: place for _, callee, _, place, _ in run_order.entries(entries)}


@pytest.mark.parametrize("code, first, second, expected", [
    ("a()\nb()\n", "a", "b", True),
    ("a()\nb()\n", "b", "a", False),
    # the test of an `if` runs before either branch; the branches exclude each other
    ("if a():\n    b()\nelse:\n    c()\n", "a", "c", True),
    ("if x:\n    b()\nelse:\n    c()\n", "b", "c", False),
    # a loop's later statement comes after on the first pass, which reads what was on disk
    ("for e in range(3):\n    b()\n    a()\n", "a", "b", False),
    ("for e in range(3):\n    a()\nb()\n", "a", "b", True),
    # a `try` body runs before its `finally`
    ("try:\n    a()\nfinally:\n    b()\n", "a", "b", True),
    # in one statement, an argument's call returns before the call it is handed to
    ("b(a())\n", "a", "b", True),
    ("b(a())\n", "b", "a", False),
    # nested blocks: an earlier statement of an enclosing block comes first
    ("a()\nwith x:\n    if y:\n        b()\n", "a", "b", True),
])
def test_order_of_calls_in_one_scope(code, first, second, expected):
    found = places(code)
    assert run_order.precedes(found[first], found[second]) is expected


def test_a_data_cache_is_no_checkpoint_but_a_model_state_is():
    code = "import torch\ntorch.save(new_ids, ids_file)\ntorch.save({'net': net.state_dict()}, path)\n"
    entries = list(run_order.entries(read(code, {"torch": "torch"})))
    assert [line for _, callee, line, _, _ in entries if callee == run_order.SAVE] == [3]


def test_a_cuda_call_only_a_test_lets_run_is_not_one_every_run_makes():
    code = ("import torch\ntorch.cuda.synchronize()\n"
            "n = torch.cuda.current_device() if torch.cuda.is_available() else 0\n"
            "ok = torch.cuda.is_available() and torch.cuda.synchronize()\n")
    entries = read(code, {"torch": "torch"})
    assert [line for _, callee, line, _, _ in run_order.entries(entries) if callee == run_order.CUDA] == [2]


def test_a_mode_switch_is_no_call_of_a_training_function():
    # `model.train(False)` switches a module's mode; `exp.train()` may be the project's trainer
    code = "model.train(False)\nmodel.eval()\nmodel.train(mode=True)\ntrainer.train(model, data)\nexp.train()\n"
    entries = read(code, {})
    assert sorted((callee, line) for _, callee, line, _, _ in run_order.entries(entries)) == [
        (".eval", 2), (".train", 4), (".train", 5)]


def test_what_a_saved_name_was_bound_to_says_whether_it_is_a_checkpoint():
    code = ("import torch\nfiles = {'model': model.state_dict()}\ntorch.save(files, path)\n"
            "ids = list(range(9))\ntorch.save(ids, ids_path)\n")
    assert [line for _, callee, line, _, _ in run_order.entries(read(code, {"torch": "torch"}))
            if callee == run_order.SAVE] == [3]


TRAINING = """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
def train(model, loader, out):
    model.to(device)
    for epoch in range(3):
        fit_one(model, loader)
        torch.save(model.state_dict(), out)
    return out
"""

LOADER = """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
def create_model(path=None):
    model = torch.nn.Linear(2, 2)
    if path is not None:
        model.load_state_dict(torch.load(path))
    return model.to(device)
"""


def lint(tmp_path: Path, capsys, files: dict[str, str], select: str) -> list[dict]:
    """The JSON findings (preview tier included) of a project of ``files`` (name -> code)."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", select, str(tmp_path)])
    return json.loads(capsys.readouterr().out)


def findings(tmp_path: Path, capsys, files: dict[str, str]) -> list[tuple]:
    """(file name, line, confidence, evidence) of the TDL004 findings beside the training and
    the loader."""
    return [(Path(f["path"]).name, f["line"], f["confidence"], [e["message"] for e in f["evidence"]])
            for f in lint(tmp_path, capsys, {"training.py": TRAINING, "models.py": LOADER, **files}, "TDL004")]


def test_a_load_two_calls_and_a_file_away_from_the_training_reads_back_the_run(tmp_path, capsys):
    run = ("import torch\nfrom training import train\nfrom models import create_model\n"
           "def main(args):\n    model = torch.nn.Linear(2, 2)\n    train(model, [], args.out)\n"
           "    evaluate(args.out)\n"
           "def evaluate(path):\n    model = create_model(path)\n\nmain(args)\n")
    ((path, line, confidence, steps),) = findings(tmp_path, capsys, {"run.py": run})
    assert (path, line, confidence) == ("models.py", 6, "possible")
    assert any("has saved a checkpoint first (`train` saves, run.py:6)" in step for step in steps)


def test_an_evaluation_script_that_saves_nothing_first_keeps_it_certain(tmp_path, capsys):
    run = ("import torch\nfrom training import train\nfrom models import create_model\n"
           "def main(args):\n    model = create_model()\n    train(model, [], args.out)\n"
           "    model = create_model(args.out)\n\nmain(args)\n")
    evaluate = "import sys\nfrom models import create_model\nmodel = create_model(sys.argv[1])\n"
    assert [f[:3] for f in findings(tmp_path, capsys, {"run.py": run, "evaluate.py": evaluate})] == [
        ("models.py", 6, "certain")]


@pytest.mark.parametrize("mode, confidence", [
    # the branch that tests is not the one that trained: its checkpoint is another run's
    ("if args.mode == 'train':\n    train(model, [], args.out)\nelse:\n    model = create_model(args.out)\n",
     "certain"),
    # a resume, before training: another run's file
    ("model = create_model(args.resume)\ntrain(model, [], args.out)\n", "certain"),
    ("train(model, [], args.out)\nmodel = create_model(args.out)\n", "possible"),
    # built without a path before training, the model loads nothing: only the later call loads
    ("model = create_model()\ntrain(model, [], args.out)\nmodel = create_model(path=args.out)\n", "possible"),
    ("model = create_model(args.init)\ntrain(model, [], args.out)\nmodel = create_model(args.out)\n", "certain"),
])
def test_where_the_load_stands_against_the_training(tmp_path, capsys, mode, confidence):
    run = ("import torch\nfrom training import train\nfrom models import create_model\n"
           "model = torch.nn.Linear(2, 2)\n" + mode)
    assert [f[2] for f in findings(tmp_path, capsys, {"run.py": run})] == [confidence]


def test_a_run_that_only_cached_its_data_has_written_no_checkpoint(tmp_path, capsys):
    data = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "def make_loader(ids_file):\n    ids = torch.arange(9, device=device)\n    torch.save(ids, ids_file)\n")
    run = ("import torch\nfrom data import make_loader\nfrom models import create_model\n"
           "make_loader('ids.pt')\nmodel = create_model(args.checkpoint)\n")
    assert [f[2] for f in findings(tmp_path, capsys, {"run.py": run, "data.py": data})] == ["certain"]


EARLY_STOPPING = """\
import torch
class EarlyStopping:
    def __init__(self, path):
        self.path, self.best = path, None
    def __call__(self, loss, model):
        if self.best is None or loss < self.best:
            self.best = loss
            self.save_checkpoint(model)
    def save_checkpoint(self, model):
        torch.save(model.state_dict(), self.path)
"""

EXPERIMENT = """\
import torch
from early import EarlyStopping
class Experiment:
    def __init__(self, path, device):
        self.path = path
        self.model = torch.nn.Linear(2, 2).to(device)
        self.early_stopping = EarlyStopping(path)
    def train(self, epochs):
        for epoch in range(epochs):
            self.early_stopping(epoch, self.model)
        self.model.load_state_dict(torch.load(self.path))
    def test(self, path):
        self.model.load_state_dict(torch.load(path))
"""


RUN = """\
import torch
from experiment import Experiment
device = "cuda" if torch.cuda.is_available() else "cpu"
exp = Experiment("best.pt", device)
exp.train(10)
exp.test("best.pt")
"""


def test_an_object_that_saves_when_called_makes_the_reload_after_it_a_round_trip(tmp_path, capsys):
    run = RUN
    found = findings(tmp_path, capsys, {"early.py": EARLY_STOPPING, "experiment.py": EXPERIMENT, "run.py": run})
    assert [(line, confidence) for path, line, confidence, _ in found if path == "experiment.py"] == [
        (11, "possible"), (13, "possible")]


def test_a_function_of_the_same_name_is_no_caller_of_a_method(tmp_path, capsys):
    # `test(args)` in evaluate.py calls its own function, not `Experiment.test`
    run = RUN
    evaluate = "def test(args):\n    return args\ntest(None)\n"
    found = findings(tmp_path, capsys, {"early.py": EARLY_STOPPING, "experiment.py": EXPERIMENT, "run.py": run,
                                        "evaluate.py": evaluate})
    assert [(line, confidence) for path, line, confidence, _ in found if path == "experiment.py"] == [
        (11, "possible"), (13, "possible")]


TRAINABLES = """\
import torch
from training import train
class CellTrainable:
    def create_model(self, path=None):
        model = torch.nn.Linear(2, 2)
        if path is not None:
            model.load_state_dict(torch.load(path))
        return model
class TissueTrainable:
    def create_model(self, path=None):
        model = torch.nn.Linear(2, 2)
        if path is not None:
            model.load_state_dict(torch.load(path))
        return model
"""


@pytest.mark.parametrize("receiver, confidences", [
    # the predictions script builds a TissueTrainable: its load is another run's file; the
    # cell trainer's `create_model` is reached only after training
    ("TissueTrainable", [(7, "possible"), (13, "certain")]),
    ("CellTrainable", [(7, "certain"), (13, "possible")]),
])
def test_a_method_is_called_by_the_objects_of_its_class(tmp_path, capsys, receiver, confidences):
    run = ("import torch\nfrom training import train\nfrom trainables import CellTrainable, TissueTrainable\n"
           "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
           "cell = CellTrainable()\ntissue = TissueTrainable()\n"
           "train(torch.nn.Linear(2, 2).to(device), [], 'cell.pt')\ncell.create_model('cell.pt')\n"
           "train(torch.nn.Linear(2, 2).to(device), [], 'tissue.pt')\ntissue.create_model('tissue.pt')\n")
    predictions = ("import sys\nfrom trainables import CellTrainable, TissueTrainable\n"
                   f"trainable = {receiver}()\nmodel = trainable.create_model(sys.argv[1])\n")
    found = findings(tmp_path, capsys, {"trainables.py": TRAINABLES, "run.py": run, "predictions.py": predictions})
    assert [(line, confidence) for path, line, confidence, _ in found if path == "trainables.py"] == confidences


NERF = """\
import torch
def create_nerf(args):
    model = torch.nn.Linear(2, 2).to(args.device)
    model.load_state_dict(torch.load(args.ckpt))
    return model
def render(rays):
    return rays.cuda()
def query(points):
    return points.type(torch.cuda.FloatTensor)
"""


@pytest.mark.parametrize("setup, confidence", [
    # the training script makes every tensor a CUDA one before it builds the model: it needs CUDA
    ("torch.set_default_tensor_type('torch.cuda.FloatTensor')\n", "possible"),
    ("torch.cuda.synchronize()\n", "possible"),
    # a CPU type, or a CUDA call only when CUDA is there, says nothing
    ("torch.set_default_tensor_type('torch.FloatTensor')\n", "certain"),
    ("if torch.cuda.is_available():\n        torch.cuda.synchronize()\n", "certain"),
    ("index = torch.cuda.current_device() if torch.cuda.is_available() else 'cpu'\n", "certain"),
])
def test_a_caller_that_needs_cuda_first_makes_the_line_need_it(tmp_path, capsys, setup, confidence):
    run = ("import torch\nfrom nerf import create_nerf, query, render\n"
           "def train(args):\n    " + setup + "    model = create_nerf(args)\n    render(torch.rand(3))\n"
           "    query(torch.rand(3))\n"
           "args = parse()\nargs.device = 'cuda' if torch.cuda.is_available() else 'cpu'\ntrain(args)\n")
    saver = "import torch\ndef save(model, device):\n    torch.save(model.to(device).state_dict(), 'ckpt.pt')\n"
    found = [(f["code"], f["line"], f["confidence"])
             for f in lint(tmp_path, capsys, {"nerf.py": NERF, "run.py": run, "save.py": saver}, "TDL001,TDL004")
             if f["path"].endswith("nerf.py")]
    # the cast to a CUDA tensor type is recorded as `.type`: the same caller decides it
    assert found == [("TDL004", 4, confidence), ("TDL001", 7, confidence), ("TDL001", 9, confidence)]


def test_a_save_made_only_when_the_file_is_missing_leaves_the_load_a_file_from_elsewhere():
    code = ("import os\nimport torch\nif not os.path.exists(path):\n    torch.save(model.state_dict(), path)\n"
            "torch.save(model.state_dict(), other)\n")
    assert [line for _, callee, line, _, _ in run_order.entries(read(code, {"torch": "torch", "os": "os"}))
            if callee == run_order.SAVE] == [5]
