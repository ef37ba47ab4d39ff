"""The project index: what other files of the project define reaches each file's analysis,
on every way in (a directory run, a few files as pre-commit passes them, stdin with a
file name, the flake8 plugin)."""

from __future__ import annotations

import io
import json
import pickle
import textwrap
from pathlib import Path

import pytest

from torchdev_lint import cli, flake8_plugin
from torchdev_lint.analysis import project_index


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


PACKAGE = {
    "proj/__init__.py": "from .base import Encoder\n",
    "proj/base.py": """
        import torch
        import torch.nn as nn

        class BaseEncoder(nn.Module):
            pass

        class Encoder(BaseEncoder):
            pass

        def make_mask(n):
            return torch.ones(n)

        def build_block():
            return Block()

        class Block(nn.Module):
            pass
    """,
    "proj/common.py": "import torch\nimport torch.nn as nn\n",
    "proj/models/__init__.py": "",
    "proj/models/model.py": """
        from ..common import *
        from .. import Encoder
        from ..base import make_mask, build_block

        class MyEncoder(Encoder):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(4)
                self.blocks = [build_block(), build_block()]

            def forward(self, x):
                return x * self.scale

        def run(path, device):
            state = torch.load(path)
            mask = make_mask(3)
            mask.to(device)
            return state, mask
    """,
}
# (code, line) each file of PACKAGE must show; none of them is found without the index.
# TDL006/TDL007 are preview rules and the load shows no sign it holds weights, so all four
# are possible findings: the runs are in the preview tier.
EXPECTED = [("TDL006", 9), ("TDL007", 10), ("TDL004", 16), ("TDL003", 18)]


def run_cli(argv: list[str], capsys, stdin: str | None = None, monkeypatch=None,
            path: str = "model.py") -> list[tuple[str, int]]:
    """The (code, line) findings of the files whose path ends with ``path``."""
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    cli.main(["--format", "json", "--isolated", "--preview", *argv])
    data = json.loads(capsys.readouterr().out)
    findings = data if isinstance(data, list) else data["findings"]
    return sorted((f["code"], f["line"]) for f in findings if f["path"].endswith(path))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    write(tmp_path, PACKAGE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_directory_run_sees_the_whole_project(project, capsys):
    assert run_cli(["proj"], capsys) == sorted(EXPECTED)


def test_one_file_indexes_its_package(project, capsys):
    # pre-commit passes only the changed files.
    assert run_cli(["proj/models/model.py"], capsys) == sorted(EXPECTED)


def test_stdin_with_a_file_name(project, capsys, monkeypatch):
    source = (project / "proj/models/model.py").read_text()
    found = run_cli(["--stdin-filename", "proj/models/model.py", "-"], capsys, source, monkeypatch)
    assert found == sorted(EXPECTED)


def test_flake8_plugin_indexes_the_package_once(project, monkeypatch):
    monkeypatch.setattr(flake8_plugin, "_linters", {})
    monkeypatch.setattr(flake8_plugin.TorchDevLintChecker, "preview", True)  # as --tdl-preview sets it
    path = str(project / "proj/models/model.py")
    lines = Path(path).read_text().splitlines(keepends=True)
    found = sorted(
        (message.split()[0], line)
        for line, _, message, _ in flake8_plugin.TorchDevLintChecker(None, lines, path).run()
    )
    assert found == sorted(EXPECTED)
    other = str(project / "proj/base.py")
    list(flake8_plugin.TorchDevLintChecker(None, Path(other).read_text().splitlines(True), other).run())
    (linter,) = flake8_plugin._linters.values()
    assert len(linter._package_indexes) == 1


def test_sibling_script_module(tmp_path, monkeypatch, capsys):
    # Scripts (no package) import each other by name; two directories may both have a
    # `model.py`: each script sees its own sibling.
    write(tmp_path, {
        "a/model.py": "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n",
        "a/train.py": """
            import torch
            from model import Net

            class Wrapper(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.nets = [Net(), Net()]
        """,
        "b/model.py": "class Net:\n    pass\n",
        "b/train.py": """
            import torch
            from model import Net

            class Wrapper(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.nets = [Net(), Net()]
        """,
    })
    monkeypatch.chdir(tmp_path)
    assert run_cli(["a", "b"], capsys, path="a/train.py") == [("TDL007", 8)]
    assert run_cli(["a", "b"], capsys, path="b/train.py") == []  # b's Net is no module


def test_a_script_checked_alone_sees_the_folders_it_imports(tmp_path, monkeypatch, capsys):
    # pre-commit, flake8 and editors check one script; what it loads was saved by a trainer in
    # a package beside it, and its model comes from a folder without __init__.py: checked
    # alone, the script gets the verdict a run over the whole folder gives it.
    write(tmp_path, {
        "predict.py": """
            import torch
            from nets.model import Net
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = Net().to(device)
            net.load_state_dict(torch.load("weights/net.pth"))
        """,
        "nets/model.py": "import torch.nn as nn\nclass Net(nn.Linear):\n    pass\n",
        "training/__init__.py": "",
        "training/trainer.py": """
            import torch
            def train(net, device):
                net.to(device)
                torch.save(net.state_dict(), "weights/net.pth")
        """,
        "docs/conf.py": "project = 'x'\n",
    })
    monkeypatch.chdir(tmp_path)

    def verdicts(argv):
        cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", *argv])
        data = json.loads(capsys.readouterr().out)
        return [(f["code"], f["line"], f["confidence"]) for f in data if f["path"].endswith("predict.py")]

    assert verdicts(["predict.py"]) == verdicts(["."]) == [("TDL004", 6, "certain")]
    wanted = project_index.wanted_files([str(tmp_path / "predict.py")])
    assert str(tmp_path / "training/trainer.py") in wanted and str(tmp_path / "nets/model.py") in wanted
    assert str(tmp_path / "docs/conf.py") not in wanted  # a folder nothing imports


def test_star_import_cycle_and_missing_module(tmp_path):
    write(tmp_path, {
        "p/__init__.py": "",
        "p/a.py": "from .b import *\nimport torch\n",
        "p/b.py": "from .a import *\nfrom .missing import *\n",
    })
    index = project_index.build([str(tmp_path / "p/a.py")])
    assert index.exports("p.b")["torch"] == "torch"


def test_a_module_of_a_folder_without_init_is_imported_by_its_dotted_name(tmp_path):
    # `from image_classifier.config import CFG` in a project whose folders have no `__init__.py`
    write(tmp_path, {
        "image_classifier/config.py": "CFG = dict(device='cuda')\nOTHER = 1\n",
        "image_classifier/main.py": "from image_classifier.config import CFG\nprint(CFG)\n",
    })
    index = project_index.build([str(tmp_path / "image_classifier/config.py")])
    assert index.imported_from(str(tmp_path / "image_classifier/config.py")) == frozenset({"CFG"})
    assert index.imported_from(str(tmp_path / "image_classifier/main.py")) == frozenset()


def test_index_pickles_without_its_memo(project):
    index = project_index.build(["proj/models/model.py"])
    assert index.is_module_class("proj.Encoder")
    again = pickle.loads(pickle.dumps(index))
    assert again.is_module_class("proj.Encoder")
    assert again.returns("proj.base.make_mask") == "tensor"
    assert again.facts_for("proj/models/model.py") == index.facts_for("proj/models/model.py")


def test_a_files_cache_facts_change_with_the_code_it_imports_from(project):
    # Analyses follow calls into the files a file imports from: editing one of them (even
    # a function body the index records nothing about) must change the cache key's facts.
    before = project_index.build(["proj/models/model.py"]).facts_for("proj/models/model.py")
    base = project / "proj/base.py"
    base.write_text(base.read_text().replace("return torch.ones(n)", "return torch.ones(n + 1)"))
    after = project_index.build(["proj/models/model.py"]).facts_for("proj/models/model.py")
    assert before != after
    # A file it does not import from changes nothing.
    (project / "proj/other.py").write_text("x = 1\n")
    assert project_index.build(["proj/models/model.py"]).facts_for("proj/models/model.py") == after


def test_a_method_of_another_module_that_builds_cuda_tensors_makes_its_callers_need_cuda(tmp_path):
    """WaveGlow's shape: `infer` allocates `torch.cuda.FloatTensor` on both branches of a
    dtype test, so a class that calls `waveglow.infer(...)` in `__init__` needs CUDA anyway and
    its hardcoded `.cuda()` is no portability bug; a method of that name that also runs on the
    CPU elsewhere in the project says nothing."""
    import textwrap

    from torchdev_lint.analysis import project_index
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule

    (tmp_path / "glow.py").write_text(textwrap.dedent("""\
        import torch
        class WaveGlow(torch.nn.Module):
            def infer(self, spect):
                if spect.type() == "torch.cuda.HalfTensor":
                    audio = torch.cuda.HalfTensor(spect.size(0), 8).normal_()
                else:
                    audio = torch.cuda.FloatTensor(spect.size(0), 8).normal_()
                return audio
        """))
    denoiser = textwrap.dedent("""\
        import torch
        class Denoiser(torch.nn.Module):
            def __init__(self, waveglow):
                super().__init__()
                mel = torch.zeros(1, 80, device=waveglow.upsample.weight.device)
                with torch.no_grad():
                    self.bias = waveglow.infer(mel)
            def forward(self, audio):
                return audio.cuda() - self.bias
        """)
    (tmp_path / "denoiser.py").write_text(denoiser)
    rule = Rule.registry["TDL001"]
    paths = [str(tmp_path / "glow.py"), str(tmp_path / "denoiser.py")]
    index = project_index.build(paths)
    assert project_index.read_facts(paths[0]).cuda_defs == ["infer"]
    (finding,) = lint_source(paths[1], denoiser, [rule], preview=True, index=index).findings
    assert finding.confidence.value == "possible"
    assert "needs CUDA anyway" in finding.evidence[0].message
    # another `infer` that runs anywhere: the call no longer says CUDA
    (tmp_path / "other.py").write_text("class Model:\n    def infer(self, x):\n        return x\n")
    index = project_index.build([*paths, str(tmp_path / "other.py")])
    (finding,) = lint_source(paths[1], denoiser, [rule], preview=True, index=index).findings
    assert not any("needs CUDA anyway" in step.message for step in finding.evidence)


def test_a_setup_function_that_exits_without_gpus_needs_cuda(tmp_path):
    from torchdev_lint.analysis import project_index

    (tmp_path / "setup.py").write_text(
        "import sys, torch\n"
        "def setup_gpus(args):\n    if not torch.cuda.is_available():\n        sys.exit('needs a GPU')\n"
        "    return torch.cuda.device_count()\n"
        "def pick(args):\n    if not torch.cuda.is_available():\n        return 'cpu'\n    return 'cuda'\n")
    assert project_index.read_facts(str(tmp_path / "setup.py")).cuda_defs == ["setup_gpus"]


VOCODER_PROJECT = {
    # WaveGlow's `infer` builds CUDA tensors; the project's `inference` helper reaches it one
    # call deeper; `utils.get_vocoder` is called by the GPU demo only, while `dataset.py`
    # imports `utils` for its padding helper and chooses the CPU where there is no GPU.
    "glow.py": """\
        import torch
        class WaveGlow(torch.nn.Module):
            def infer(self, spect):
                return torch.cuda.FloatTensor(spect.size(0), 8).normal_()
        """,
    "inference.py": """\
        import torch
        def inference(mel, waveglow, path):
            with torch.no_grad():
                audio = waveglow.infer(mel)
            return audio.cpu().numpy()
        """,
    "utils.py": """\
        import torch
        def pad(batch):
            return torch.stack(batch)
        def get_vocoder(path):
            vocoder = torch.load(path, weights_only=False)
            vocoder.cuda().eval()
            return vocoder
        """,
    "dataset.py": """\
        import torch
        from utils import pad
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def batches(samples):
            return pad(samples).to(device)
        """,
    "demo.py": """\
        import torch
        import inference
        import utils
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def synthesize(model, text):
            return model(torch.from_numpy(text).cuda())
        if __name__ == "__main__":
            vocoder = utils.get_vocoder("waveglow.pt")
            model = torch.nn.Linear(2, 2).to(device)
            for text in texts:
                mel = synthesize(model, text)
                inference.inference(mel, vocoder, "out.wav")
        """,
}


def tdl001_confidences(root: Path, names: list[str]) -> dict[tuple[str, int], str]:
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule

    paths = [str(root / n) for n in VOCODER_PROJECT]
    index = project_index.build(paths)
    found = {}
    for name in names:
        text = (root / name).read_text()
        for f in lint_source(str(root / name), text, [Rule.registry["TDL001"]], preview=True, index=index).findings:
            found[name, f.line] = f.confidence.value
    return found


def test_a_function_that_calls_one_needing_cuda_needs_it_too_however_deep(tmp_path):
    """`inference` calls `waveglow.infer`, which builds CUDA tensors: the demo's loop calls
    `inference` for every text, so its run needs CUDA, and its `.cuda()` calls are not what
    stops it from running on a laptop."""
    write(tmp_path, VOCODER_PROJECT)
    index = project_index.build([str(tmp_path / n) for n in VOCODER_PROJECT])
    assert index.needs_cuda_def("infer") and index.needs_cuda_def("inference")
    assert not index.needs_cuda_def("pad")
    # the demo's own call runs only where CUDA is (as under a CUDA guard): not flagged;
    # the vocoder loader only the demo calls is at most possible
    assert tdl001_confidences(tmp_path, ["demo.py", "utils.py"]) == {("utils.py", 6): "possible"}


def test_an_importer_that_chooses_the_cpu_counts_only_for_what_it_calls(tmp_path):
    """Without the CUDA-only vocoder the demo runs on the CPU: `utils.get_vocoder`, which the
    demo calls, is certain; the dataset module choosing the CPU says nothing about it."""
    project = dict(VOCODER_PROJECT)
    project["glow.py"] = "import torch\nclass WaveGlow(torch.nn.Module):\n    def infer(self, spect):\n        return spect\n"
    write(tmp_path, project)
    # the demo hardcodes `.cuda()` itself and runs a loader written for CUDA: neither line is
    # what stops it from running on a laptop, so neither is certain
    assert tdl001_confidences(tmp_path, ["demo.py", "utils.py"]) == {
        ("demo.py", 6): "possible", ("utils.py", 6): "possible"}
    # a demo that places its own tensors with `device`: the loader's `.cuda()` is the bug
    project["demo.py"] = project["demo.py"].replace("torch.from_numpy(text).cuda()", "torch.from_numpy(text).to(device)")
    write(tmp_path, project)
    assert tdl001_confidences(tmp_path, ["demo.py", "utils.py"]) == {("utils.py", 6): "certain"}
    project["demo.py"] = project["demo.py"].replace("utils.get_vocoder", "torch.hub.load")
    write(tmp_path, project)
    assert tdl001_confidences(tmp_path, ["utils.py"]) == {("utils.py", 6): "possible"}


def test_a_file_with_quotes_inside_its_f_strings_has_facts(tmp_path):
    # Python 3.12 allows `f"{a + "/" + b}"`; an older parser rejects it, and the file's facts
    # (what it imports, its CPU choice and on which line) must not be lost with it
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''\
        import torch
        from helpers import load_batch
        note = f"""{"multi"}
        line"""
        out = f"{"runs" + "/" + "x"}.txt"
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.ones(1).to(device)
        batch = load_batch().cuda()
    '''))
    facts = project_index.read_facts(str(script))
    assert facts is not None
    assert facts.cpu_choice == "line 6"
    assert facts.names["load_batch"] == "helpers.load_batch"
    assert facts.unguarded_cuda


def test_a_script_running_a_cuda_only_helper_is_judged_despite_its_f_strings(tmp_path, monkeypatch, capsys):
    # the helper hardcodes CUDA with no CPU path: the script's own CPU choice is a path that never ran
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text("import torch\ndef load_batch():\n    return torch.ones(2).cuda()\n")
    (tmp_path / "train.py").write_text(
        'import torch\nfrom helpers import load_batch\nname = f"{"a" + "b"}"\n'
        'device = "cuda" if torch.cuda.is_available() else "cpu"\nx = torch.ones(2).cuda()\nprint(load_batch())\n')
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", "TDL001", "train.py"])
    found = json.loads(capsys.readouterr().out)
    assert [(f["line"], f["confidence"]) for f in found] == [(5, "possible")]
    assert any("helpers.py" in e["message"] for e in found[0]["evidence"])


@pytest.mark.parametrize("assigned, saves", [
    # one value for the attribute in the class: its file name is what the save writes
    ("self.best_weights_path = weights_dir / 'best_weights'", ["best_weights"]),
    ("self.best_weights_path = os.path.join(out, 'best.pt')", ["best.pt"]),
    # two values: the name is not known
    ("self.best_weights_path = 'a.pt' if flag else 'b.pt'\n        self.best_weights_path = 'c.pt'", []),
])
def test_a_save_of_an_attribute_the_class_sets_once_writes_that_file(assigned, saves):
    code = textwrap.dedent(f"""\
        import os
        import torch
        class Trainer:
            def __init__(self, weights_dir, out, flag):
                {{assigned}}
            def save(self, model):
                torch.save(model.state_dict(), self.best_weights_path)
    """).replace("{assigned}", assigned)
    facts = project_index.read_facts("trainer.py", code)
    assert facts.saves == saves


@pytest.mark.parametrize("code, names", [
    ("def f(model, d):\n    return model.to(d)\n", True),  # a move names a device
    ("import lightning\n", True),
    ("def save(state, path):\n    import torch\n    torch.save(state, path)\n", False),
])
def test_what_names_a_device(code, names):
    assert project_index.read_facts("m.py", code).names_devices is names


def test_an_imported_name_read_nowhere_but_in_its_import_is_unread():
    from torchdev_lint.analysis.project_index import unread_imports

    text = ("from model import (Seq2Seq,\n    Seq2SeqAttention)\nimport utils\n"
            "net = Seq2SeqAttention(3)\nutils.log(net)\n")
    names = {"Seq2Seq": "model.Seq2Seq", "Seq2SeqAttention": "model.Seq2SeqAttention", "utils": "utils"}
    assert unread_imports(text, names) == ["Seq2Seq"]
    # a longer name that contains it is no read of it; a mention in a comment is counted as one
    assert unread_imports(text + "# Seq2Seq is kept for old checkpoints\n", names) == []


@pytest.mark.parametrize("check, choice", [
    # the function goes on only where its device is CUDA: its fallback is no CPU path for importers
    ("    assert device.type == 'cuda', 'GPU required for training'\n", ""),
    ("    assert torch.cuda.is_available()\n", ""),
    # a check that says nothing of the machine, or a device compared with the CPU's
    ("    assert epochs > 0\n", "line 5"),
    ("    assert device.type != 'cuda' or epochs > 0\n", "line 5"),
    # two devices compared with each other, or two strings: no CUDA asked for
    ("    assert device == model.device\n", "line 5"),
    ("    assert 'cuda' == 'cuda'\n", "line 5"),
])
def test_a_cpu_fallback_the_function_then_asserts_away_is_no_cpu_choice(tmp_path, check, choice):
    trainer = tmp_path / "trainer.py"
    trainer.write_text(textwrap.dedent("""\
        import torch

        def train(model, epochs, device=None):
            if device is None:
                device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        """) + check + "    return model.to(device)\n")
    assert project_index.read_facts(str(trainer)).cpu_choice == choice
