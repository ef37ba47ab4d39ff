"""TDL004 after the first look at 37 fresh repositories (benchmarks/precision/results/
2026-11-26-first-look-45b7431.txt): what stays certain is a script with a CPU path loading
weights from outside; loads that only run with CUDA, in code that needs CUDA anyway, of a file
the same run wrote through a helper, resumes of the script's own checkpoints, library code of
a package that shows no CPU path and loads in a project that saves CPU tensors are possible."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint import cli
from torchdev_lint.analysis import project_index
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

TDL004 = Rule.registry["TDL004"]


# A project's training code: it saves weights from the device it is given, so the
# checkpoints the project writes (and publishes) can hold GPU tensors.
TRAINER = {"trainer.py": """\
    import torch
    def snapshot(model, device, out):
        torch.save(model.to(device).state_dict(), out)
"""}


def lint_beside(files: dict[str, str], path: str = "script.py"):
    """The TDL004 findings, preview tier included, of ``path`` in a project index that also
    holds ``files`` (name -> code)."""
    code = textwrap.dedent(files[path])
    index = project_index.ProjectIndex()
    for name, text in files.items():
        index.add(name, textwrap.dedent(text))
    return lint_source(path, code, [TDL004], preview=True, index=index).findings


def found(code: str, path: str = "script.py"):
    """(line, column, confidence) of each TDL004 finding of one file beside the project's
    ``TRAINER`` (in its index)."""
    return [(f.line, f.column, f.confidence.value) for f in lint_beside({path: code, **TRAINER}, path)]


def reasons(code: str, path: str = "script.py") -> list[str]:
    """The evidence of the one TDL004 finding of a file in a project of its own, each step's
    message."""
    (finding,) = lint_beside({path: code}, path)
    return [step.message for step in finding.evidence]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def project_findings(capsys, root: Path, evidence: bool = False) -> list[tuple]:
    """(file, line, column, confidence) of the TDL004 findings of a run over ``root`` (with
    the project index), preview tier included; with ``evidence``, each step's message too."""
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", "TDL004", str(root)])
    return sorted(
        (Path(f["path"]).relative_to(root).as_posix(), f["line"], f["column"], f["confidence"],
         *([[e["message"] for e in f["evidence"]]] if evidence else []))
        for f in json.loads(capsys.readouterr().out)
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- the right shape: a script with a CPU path loading published weights ---------------------

PUBLISHED = """\
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--weights", default="pretrained/detector.pth")
parser.add_argument("--cpu", action="store_true")
args = parser.parse_args()
device = "cpu" if args.cpu else "cuda"
model = Detector()
model.load_state_dict(torch.load(args.weights))
model.to(device)
"""


def test_a_script_with_a_cpu_option_loading_published_weights_is_certain():
    assert found(PUBLISHED) == [(9, 23, "certain")]


def test_published_weights_stay_certain_in_a_project_that_saves_other_files(project, capsys):
    write(project, {
        "infer.py": PUBLISHED,
        "train.py": """\
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
            def train(model, out_dir):
                torch.save(model.state_dict(), out_dir + "/last.pth")
        """,
    })
    assert project_findings(capsys, project) == [("infer.py", 9, 23, "certain")]


def test_a_checkpoint_variable_of_an_inference_script_is_no_resume():
    # The script saves nothing itself: its checkpoint comes from elsewhere.
    code = """\
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    checkpoint = "./checkpoint_detector.pth.tar"
    checkpoint = torch.load(checkpoint)
    model = checkpoint["model"].to(device)
    """
    assert found(code) == [(4, 14, "certain")]


@pytest.mark.parametrize("after", [
    "    return torch.utils.data.DataLoader(data, batch_size=8)\n",  # a data loader batches data
    "    return data.float() / 255\n",
])
def test_a_file_of_data_read_where_a_path_was_is_no_weights(after):
    # `np.load(data)` reads the path before the load: the loaded object goes to neither
    code = f"""\
    import numpy as np
    import torch
    def features(data, device):
        if data.endswith("npy"):
            data = np.load(data)
        else:
            data = torch.load(data)
        data = torch.as_tensor(data)
    {after}"""
    assert found(code) == [(7, 16, "possible")]


# -- 1. a load under a CUDA guard ----------------------------------------------------------

@pytest.mark.parametrize("test", ["torch.cuda.is_available()", "args.cuda", "use_gpu"])
def test_a_load_under_a_cuda_guard_is_only_possible(test):
    code = f"""\
    import torch
    def restore(model, path, args, use_gpu):
        if {test}:
            state = torch.load(path)
        else:
            state = torch.load(path, map_location="cpu")
        model.load_state_dict(state)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    """
    assert found(code) == [(4, 17, "possible")]


def test_a_guarded_load_in_a_module_method_is_only_possible():
    code = """\
    import torch
    class Landmarks(torch.nn.Module):
        def load_pretrained(self, fname):
            if torch.cuda.is_available():
                checkpoint = torch.load(fname)
            else:
                checkpoint = torch.load(fname, map_location=torch.device("cpu"))
            self.load_state_dict(checkpoint["state_dict"])
    """
    assert found(code) == [(5, 26, "possible")]


def test_the_cpu_branch_of_a_guard_keeps_the_finding():
    code = """\
    import torch
    def restore(model, path):
        if not torch.cuda.is_available():
            model.load_state_dict(torch.load(path))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = torch.nn.Linear(2, 2).to(device)
    restore(net, "net.pt")
    """
    assert found(code) == [(4, 31, "certain")]


# -- 2. CUDA-only code around the load ----------------------------------------------------

TRT_BRANCH = """\
import torch
class Predictor:
    def __init__(self, model, trt_file=None, device="cpu"):
        self.model = model
        if trt_file is not None:
            {line}
            engine = TRTModule()
            engine.load_state_dict(torch.load(trt_file))
            {after}
            self.model = engine
"""


@pytest.mark.parametrize("line, after", [
    ("from torch2trt import TRTModule", "pass"),
    ("import tensorrt", "pass"),
    ("from apex import amp", "pass"),
])
def test_a_branch_that_needs_cuda_anyway_is_only_possible(line, after):
    assert found(TRT_BRANCH.format(line=line, after=after)) == [(8, 36, "possible")]


def test_the_same_branch_without_cuda_code_is_certain():
    assert found(TRT_BRANCH.format(line="pass", after="pass")) == [(8, 36, "certain")]


def test_a_bare_cuda_call_beside_the_load_is_the_other_rules_bug_not_a_need_for_cuda():
    # The class takes a device: the `.cuda()` is TDL001's finding, so it cannot also be the
    # reason the load needs CUDA anyway (the two rules would contradict each other).
    code = TRT_BRANCH.format(line="pass", after="self.model(torch.ones(1, 3, 64, 64).cuda())")
    assert found(code) == [(8, 36, "certain")]
    tdl001 = lint_source("script.py", textwrap.dedent(code), [Rule.registry["TDL001"]], preview=True)
    assert [f.line for f in tdl001.findings] == [9]


def test_a_cuda_call_only_in_a_conditional_expression_leaves_the_cpu_path():
    code = TRT_BRANCH.format(line="pass", after="x = x.cuda() if self.use_gpu else x")
    assert found(code) == [(8, 36, "certain")]


def test_a_function_that_uses_cuda_tensor_types_is_only_possible():
    code = """\
    import torch
    def evaluate(model, loader, half, trt_file, device):
        tensor_type = torch.cuda.HalfTensor if half else torch.cuda.FloatTensor
        if trt_file is not None:
            model.load_state_dict(torch.load(trt_file))
        return [model(x.type(tensor_type)) for x in loader]
    """
    assert found(code) == [(5, 31, "possible")]


def test_a_function_that_synchronizes_cuda_is_only_possible():
    code = """\
    import torch
    def bench(model, path, device):
        model.load_state_dict(torch.load(path))
        torch.cuda.synchronize()
    """
    assert found(code) == [(3, 27, "possible")]


# -- 3. a round trip through a helper of the project --------------------------------------

EARLY_STOP = {
    "utils/__init__.py": "",
    "utils/tools.py": """\
        import torch
        class EarlyStopping:
            def __init__(self, patience=7):
                self.patience = patience
            def __call__(self, val_loss, model, path):
                torch.save(model.state_dict(), path + "/" + "checkpoint.pth")
    """,
    "exp/__init__.py": "",
    "exp/train.py": """\
        import os
        import torch
        from utils.tools import EarlyStopping
        class Exp:
            def __init__(self, args):
                self.device = torch.device("cuda" if args.use_gpu else "cpu")
            def train(self, setting):
                path = os.path.join("./checkpoints/", setting)
                early_stopping = EarlyStopping(patience=3)
                for epoch in range(10):
                    early_stopping(self.vali(), self.model, path)
                best_model_path = path + "/" + "checkpoint.pth"
                self.model.load_state_dict(torch.load(best_model_path))
                return self.model
    """,
}


def test_a_file_a_helper_saved_earlier_in_the_same_function_is_a_round_trip(project, capsys):
    write(project, EARLY_STOP)
    assert project_findings(capsys, project) == [("exp/train.py", 13, 36, "possible")]


@pytest.mark.parametrize("stopper, path_read", [
    # kept in an attribute, built with the path the load reads
    ("self.early_stopping", "self.modelpath"),
    # a local built with it
    ("early_stopping", "self.modelpath"),
])
def test_an_early_stopper_built_with_the_path_saves_what_is_reloaded(project, capsys, stopper, path_read):
    files = {
        "utils/__init__.py": "",
        "utils/earlystopping.py": """\
            import torch
            class EarlyStopping:
                def __init__(self, path, patience=7):
                    self.path = path
                    self.patience = patience
                def __call__(self, val_loss, model):
                    self.save_checkpoint(model)
                def save_checkpoint(self, model):
                    torch.save({"model": model.state_dict()}, self.path)
        """,
        "exp/__init__.py": "",
        "exp/exp.py": f"""\
            import torch
            from utils.earlystopping import EarlyStopping
            class Exp:
                def __init__(self, args):
                    self.device = torch.device("cuda" if args.use_gpu else "cpu")
                    self.modelpath = "./checkpoint/" + args.name + "_best_model.pkl"
                def train(self):
                    {stopper} = EarlyStopping(path={path_read}, patience=3)
                    for epoch in range(10):
                        {stopper}(self.vali(), self.model)
                    checkpoint = torch.load({path_read})
                    self.model.load_state_dict(checkpoint["model"])
        """,
    }
    write(project, files)
    assert project_findings(capsys, project) == [("exp/exp.py", 11, 22, "possible")]


def test_a_same_file_helper_that_saves_is_a_round_trip_too():
    code = """\
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    def keep_best(model, folder):
        torch.save(model.state_dict(), folder + "/best_model.pth")
    def fit(model, folder):
        keep_best(model, folder)
        model.load_state_dict(torch.load(folder + "/best_model.pth"))
    """
    assert found(code) == [(7, 27, "possible")]


def test_a_helper_handed_the_path_after_the_load_is_no_round_trip(project, capsys):
    files = dict(EARLY_STOP)
    files["exp/train.py"] = """\
        import os
        import torch
        from utils.tools import EarlyStopping
        class Exp:
            def __init__(self, args):
                self.device = torch.device("cuda" if args.use_gpu else "cpu")
            def train(self, setting):
                path = os.path.join("./checkpoints/", setting)
                early_stopping = EarlyStopping(patience=3)
                best_model_path = path + "/" + "checkpoint.pth"
                self.model.load_state_dict(torch.load(best_model_path))
                for epoch in range(10):
                    early_stopping(self.vali(), self.model, path)
                return self.model
    """
    write(project, files)
    assert project_findings(capsys, project) == [("exp/train.py", 11, 36, "certain")]


# -- 4. a resume of the script's own checkpoint -------------------------------------------

@pytest.mark.parametrize("path, line, column", [
    ("args.resume", 10, 27),
    ('cfg["training"]["resume"]', 10, 27),
    ("args.checkpoint_path", 10, 27),
])
def test_a_resume_of_the_scripts_own_checkpoint_is_only_possible(path, line, column):
    code = f"""\
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default=None)
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    cfg = load_config(args)
    model = Net()
    if args.resume:
        model.load_state_dict(torch.load({path}))
    for epoch in range(10):
        torch.save(model.state_dict(), "last.pth")
    """
    assert found(code) == [(line, column, "possible")]


def test_a_resume_in_a_script_that_saves_nothing_stays_certain():
    code = """\
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default=None)
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    model = Net().to("cpu" if args.no_cuda else "cuda")
    model.load_state_dict(torch.load(args.resume))
    """
    assert found(code) == [(8, 23, "certain")]


# -- 5. library code ------------------------------------------------------------------------

BUILDER = """\
import torch
def build(model, checkpoint):
    model.load_state_dict(torch.load(checkpoint))
    return model
"""


# Code that runs and uses the package's builder (a script outside the package).
RUNNER = {"run.py": "from pkg.build import build\n"}


def test_library_code_of_a_package_with_no_cpu_path_is_only_possible(project, capsys):
    write(project, {"pkg/__init__.py": "", "pkg/build.py": BUILDER,
                    "pkg/train.py": "def step(model, x):\n    return model(x.cuda())\n"})
    assert project_findings(capsys, project) == [("pkg/build.py", 3, 27, "possible")]


def test_library_code_of_a_package_with_a_cpu_path_is_certain(project, capsys):
    write(project, {"pkg/__init__.py": "", "pkg/build.py": BUILDER,
                    "pkg/device.py": 'import torch\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
                    **RUNNER, **TRAINER})
    assert project_findings(capsys, project) == [("pkg/build.py", 3, 27, "certain")]


def test_a_script_kept_in_a_package_directory_is_no_library_code(project, capsys):
    write(project, {
        "pkg/__init__.py": "",
        "pkg/device.py": 'import torch\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
        "pkg/tools/__init__.py": "",
        "pkg/tools/relaunch.py": """\
            # Usage: python pkg/tools/relaunch.py
            from pathlib import Path
            import torch
            for last in Path.cwd().rglob("last.pt"):
                ckpt = torch.load(last)
                if ckpt["model"] is None:
                    continue
        """,
    })
    assert project_findings(capsys, project) == [("pkg/tools/relaunch.py", 5, 12, "possible")]


# -- 6. a project that saves CPU tensors ----------------------------------------------------

CPU_SAVER = """\
import os
import torch
class ModelBase:
    def __init__(self, opt):
        self.device = torch.device("cuda" if opt["gpu_ids"] else "cpu")
    def save_network(self, save_dir, network, label):
        state_dict = network.state_dict()
        for key, param in state_dict.items():
            state_dict[key] = param.cpu()
        torch.save(state_dict, os.path.join(save_dir, label + ".pth"))
    def save_optimizer(self, save_dir, optimizer, label):
        torch.save(optimizer.state_dict(), os.path.join(save_dir, label + "_optim.pth"))
    def load_network(self, load_path, network):
        network.load_state_dict(torch.load(load_path))
"""
TEST_SCRIPT = """\
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--model_path", default="model_zoo/denoiser.pth")
args = parser.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Denoiser()
model.load_state_dict(torch.load(args.model_path), strict=True)
model = model.to(device)
"""


def test_loads_in_a_project_that_saves_its_weights_on_the_cpu_are_only_possible(project, capsys):
    write(project, {"models/__init__.py": "", "models/model_base.py": CPU_SAVER, "main_test_denoiser.py": TEST_SCRIPT})
    assert project_findings(capsys, project) == [
        ("main_test_denoiser.py", 8, 23, "possible"), ("models/model_base.py", 14, 33, "possible")]


GPU_SNAPSHOT = """\
    import torch
    def snapshot(generator):
        torch.save(generator.cuda().state_dict(), "generator.pth")
"""


def test_a_project_that_saves_weights_both_ways_leaves_a_file_it_does_not_name_possible(project, capsys):
    # the option names no file the code writes: a CPU save or the GPU snapshot may have made it
    write(project, {"models/__init__.py": "", "models/model_base.py": CPU_SAVER, "main_test_denoiser.py": TEST_SCRIPT,
                    "train_gan.py": GPU_SNAPSHOT})
    assert ("main_test_denoiser.py", 8, 23, "possible") in project_findings(capsys, project)


def test_a_file_named_as_the_gpu_snapshot_stays_certain_beside_cpu_saves(project, capsys):
    script = TEST_SCRIPT.replace("torch.load(args.model_path)", 'torch.load("generator.pth")')
    write(project, {"models/__init__.py": "", "models/model_base.py": CPU_SAVER, "main_test_denoiser.py": script,
                    "train_gan.py": GPU_SNAPSHOT})
    assert ("main_test_denoiser.py", 8, 23, "certain") in project_findings(capsys, project)


def test_a_cpu_copy_of_something_else_than_the_saved_weights_says_nothing(project, capsys):
    write(project, {"train.py": """\
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--use_cpu", action="store_true")
        args = parser.parse_args(); device = "cpu" if args.use_cpu else "cuda"
        def main(model, loader, exp_dir):
            model.load_state_dict(torch.load(args.weights))
            for x, y in loader:
                accuracy = (model(x).argmax(1) == y).float().mean().cpu()
            state = {"model_state_dict": model.state_dict()}
            torch.save(state, exp_dir + "/best_model.pth")
        main(torch.nn.Linear(2, 2).to(device), [], "runs")
    """})
    assert project_findings(capsys, project) == [("train.py", 7, 27, "certain")]


def test_a_directory_of_checkpoints_is_no_resume_option():
    code = """\
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint_dir", default="checkpoints/base")
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    model = Net()
    model.load_state_dict(torch.load(args.checkpoint_dir + "/model.pth"))
    torch.save(model.state_dict(), "merged.pth")
    """
    assert not any("resumes" in step for step in reasons(code))


def test_a_package_that_follows_the_device_of_its_values_shows_a_cpu_path(project, capsys):
    write(project, {"pkg/__init__.py": "", "pkg/build.py": BUILDER,
                    "pkg/model.py": """\
                        import torch
                        class Net(torch.nn.Module):
                            def embed(self, x):
                                return x.to(self.mean.device) - self.mean
                    """, **RUNNER, **TRAINER})
    assert project_findings(capsys, project) == [("pkg/build.py", 3, 27, "certain")]


# -- round trips the ninth batch showed (results/2026-11-26-first-look-1ae38a1.txt) ----------

TEMPLATE_SCRIPT = """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
for epoch in range(10):
    train(model)
    torch.save(model.state_dict(), {saved})
model.load_state_dict(torch.load({loaded}))
"""


@pytest.mark.parametrize("saved, loaded", [
    ("'{}.pkl'.format(epoch)", "'{}.pkl'.format(best_epoch)"),
    ('f"{epoch}.pkl"', "'{}.pkl'.format(best)"),
    ("'%d.pkl' % epoch", "'%d.pkl' % best"),
    ('os.path.join(out, f"ckpt_{epoch}.pt")', 'os.path.join(out, f"ckpt_{best}.pt")'),
])
def test_a_name_template_the_script_saves_with_is_a_round_trip(saved, loaded):
    code = TEMPLATE_SCRIPT.format(saved=saved, loaded=loaded)
    assert found(code) == [(6, 23, "possible")]


@pytest.mark.parametrize("loaded", [
    "'{}.pth'.format(best_epoch)",  # other literal text: another family of files
    "args.weights",  # no template
    'os.path.join(args.pretrained, f"ckpt_{best}.pt")',  # the template under another directory
])
def test_another_template_or_directory_is_another_file(loaded):
    code = TEMPLATE_SCRIPT.format(saved='os.path.join(out, f"ckpt_{epoch}.pt")' if "ckpt" in loaded
                                  else "'{}.pkl'.format(epoch)", loaded=loaded)
    assert not any("writes a file of that name" in step for step in reasons(code))


SAVE_HELPER = """\
    import torch
    from pathlib import Path
    def save_model(model, target_dir, model_name):
        path = Path(target_dir)
        path.mkdir(exist_ok=True)
        torch.save(obj=model.state_dict(), f=path / model_name)
"""


@pytest.mark.parametrize("load", [
    'model.load_state_dict(torch.load("models/effnet.pth"))',
    'best = "models/effnet.pth"\nmodel.load_state_dict(torch.load(best))',
])
def test_a_file_a_project_helper_saved_earlier_is_a_round_trip(project, capsys, load):
    write(project, {"utils.py": SAVE_HELPER, "run.py": (
        "import torch\nimport utils\n"
        'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
        "model = Net().to(device)\n"
        'utils.save_model(model=model, target_dir="models", model_name="effnet.pth")\n'
        + load + "\n")})
    line = 6 if load.startswith("model") else 7
    assert project_findings(capsys, project) == [("run.py", line, 23, "possible")]


def test_a_project_helper_handed_a_template_of_the_name_is_a_round_trip(project, capsys):
    write(project, {"utils.py": SAVE_HELPER, "run.py": """\
        import torch
        from utils import save_model
        device = "cuda" if torch.cuda.is_available() else "cpu"
        for name in ["effnetb0", "effnetb2"]:
            for epochs in [5, 10]:
                save_name = f"07_{name}_{epochs}_epochs.pth"
                save_model(model=train(name, epochs), target_dir="models", model_name=save_name)
        model.load_state_dict(torch.load("models/07_effnetb2_10_epochs.pth"))
    """})
    assert project_findings(capsys, project) == [("run.py", 8, 23, "possible")]


TRAINS_AND_KEEPS_THE_BEST = """\
    import torch
    def train(model, loader):
        for batch in loader:
            torch.save(model.state_dict(), "best_model.pt")
"""


@pytest.mark.parametrize("order, confidence", [
    # the project's training loop keeps the best weights under that very name, then the script reloads them
    ("utils.train(model, loader)\nmodel.load_state_dict(torch.load('best_model.pt'))\n", "possible"),
    # loaded before this run trained: the last run's file
    ("model.load_state_dict(torch.load('best_model.pt'))\nutils.train(model, loader)\n", "certain"),
    # a script that does not train: it reads what another run wrote on its device
    ("model.load_state_dict(torch.load('best_model.pt'))\n", "certain"),
])
def test_a_file_a_project_helper_writes_under_its_own_name_is_a_round_trip(project, capsys, order, confidence):
    write(project, {"utils.py": TRAINS_AND_KEEPS_THE_BEST, "run.py": (
        "import torch\nimport utils\n"
        'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
        "model = Net().to(device)\n" + order)})
    assert [f[3] for f in project_findings(capsys, project)] == [confidence]


GANOMALY = """\
    import os
    import torch
    class Ganomaly:
        def __init__(self, args):
            self.save_dir = args.save_dir
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            self.netg = Net().to(self.device)
        def load_weights(self):
            self.netg.load_state_dict(torch.load(os.path.join(self.save_dir, "netG.pt")))
        def test(self, loader):
            self.load_weights()
            return [self.netg(x) for x in loader]
"""

TRAIN_SAVE_TEST = """\
    import os
    import torch
    from network.model import Ganomaly
    def train_epochs(model, args, loader):
        G_PATH = os.path.join(args.save_dir, "netG.pt")
        for epoch in range(args.epochs):
{body}
"""


@pytest.mark.parametrize("body, others, confidence", [
    # each epoch saves netG.pt, then tests: the test reloads what this run wrote
    ("torch.save(model.netg.state_dict(), G_PATH)\nauc = model.test(loader)", {}, "possible"),
    # tested before the save: the first epoch reads the last run's file
    ("auc = model.test(loader)\ntorch.save(model.netg.state_dict(), G_PATH)", {}, "certain"),
    # an evaluation script also tests, with no training in its run: it reads a file another run wrote
    ("torch.save(model.netg.state_dict(), G_PATH)\nauc = model.test(loader)",
     {"evaluate.py": "from network.model import Ganomaly\nGanomaly(args).test(loader)\n"}, "certain"),
])
def test_a_method_the_project_calls_only_after_saving_its_file_reads_back_the_run(project, capsys, body, others,
                                                                                   confidence):
    body = textwrap.indent(body, " " * 12)
    write(project, {"network/__init__.py": "", "network/model.py": GANOMALY,
                    "train.py": TRAIN_SAVE_TEST.format(body=body), **others})
    assert [f[:2] + f[3:] for f in project_findings(capsys, project)] == [("network/model.py", 9, confidence)]


@pytest.mark.parametrize("helper, load", [
    # the helper saves, but was handed another name
    ('utils.save_model(model=model, target_dir="models", model_name="effnet.pth")',
     'model.load_state_dict(torch.load("pretrained/resnet.pth"))'),
    # the helper was handed the name, but saves nothing
    ('utils.show(model, "models/effnet.pth")', 'model.load_state_dict(torch.load("models/effnet.pth"))'),
])
def test_a_helper_that_did_not_save_that_file_makes_no_round_trip(project, capsys, helper, load):
    write(project, {"utils.py": SAVE_HELPER + "    def show(model, name):\n        print(model, name)\n",
                    "run.py": (
        "import torch\nimport utils\n"
        'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
        "model = Net().to(device)\n" + helper + "\n" + load + "\n")})
    ((path, line, _, _, steps),) = project_findings(capsys, project, evidence=True)
    assert (path, line) == ("run.py", 6)
    assert not any("this run wrote" in step for step in steps)


EARLY_STOPPING = """\
    import torch
    class EarlyStopping:
        def __call__(self, loss, model, path):
            torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')
"""

EXPERIMENT = """\
    import os
    import torch
    from tools import EarlyStopping
    class Exp:
        def __init__(self, args):
            self.args = args
            self.device = torch.device("cuda" if args.use_gpu else "cpu")
        def train(self, setting):
            path = os.path.join(self.args.checkpoints, setting)
            early_stopping = EarlyStopping()
            for epoch in range(self.args.epochs):
                early_stopping(self.validate(), self.model, path)
        def predict(self, setting):
            path = os.path.join(self.args.checkpoints, setting)
            best_model_path = path + '/' + '{name}'
            self.model.load_state_dict(torch.load(best_model_path))
"""


def test_a_file_another_method_of_the_class_writes_is_a_round_trip(project, capsys):
    write(project, {"tools.py": EARLY_STOPPING, "exp.py": EXPERIMENT.replace("{name}", "checkpoint.pth")})
    assert project_findings(capsys, project) == [("exp.py", 16, 36, "possible")]


def test_a_method_that_saves_directly_is_a_round_trip_too():
    code = EXPERIMENT.replace("{name}", "checkpoint.pth").replace(
        "early_stopping(self.validate(), self.model, path)",
        "torch.save(self.model.state_dict(), path + '/' + 'checkpoint.pth')")
    assert found(code) == [(16, 36, "possible")]


def test_a_file_of_another_name_than_the_class_writes_stays_certain(project, capsys):
    write(project, {"tools.py": EARLY_STOPPING, "exp.py": EXPERIMENT.replace("{name}", "pretrained.pth").replace(
        "best_model_path = path + '/' + 'pretrained.pth'", "best_model_path = self.args.pretrained"), **TRAINER})
    assert project_findings(capsys, project) == [("exp.py", 16, 36, "certain")]


@pytest.mark.parametrize("move", [
    "v.to('cpu')", "v.to(torch.device('cpu'))", "v.to(device='cpu')", "v.cpu()",
])
def test_weights_moved_to_the_cpu_with_to_count_as_cpu_saves(project, capsys, move):
    write(project, {
        "infer.py": PUBLISHED,
        "train.py": f"""\
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
            def save(decoder, path):
                state_dict = decoder.state_dict()
                for k, v in state_dict.items():
                    state_dict[k] = {move}
                torch.save(state_dict, path)
        """,
    })
    assert project_findings(capsys, project) == [("infer.py", 9, 23, "possible")]


def test_a_move_to_another_device_is_no_cpu_save(project, capsys):
    write(project, {
        "infer.py": PUBLISHED,
        "train.py": """\
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
            def save(decoder, path):
                state_dict = decoder.state_dict()
                for k, v in state_dict.items():
                    state_dict[k] = v.to(torch.device('cuda'))
                torch.save(state_dict, path)
        """,
    })
    assert project_findings(capsys, project) == [("infer.py", 9, 23, "certain")]


# -- evidence that the file can hold accelerator tensors (eleventh batch) --------------------

def test_published_weights_of_a_project_that_never_saves_from_a_device_are_possible():
    (finding,) = lint_source("infer.py", PUBLISHED, [TDL004], preview=True).findings
    assert finding.confidence.value == "possible"
    assert any("nothing in the project saves weights" in step.message for step in finding.evidence)


def test_a_checkpoint_helper_called_by_gpu_training_is_evidence(project, capsys):
    write(project, {
        "infer.py": PUBLISHED,
        "checkpoint.py": """\
            import torch
            def save_checkpoint(path, model, optimizer):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
        """,
        "train.py": """\
            from checkpoint import save_checkpoint
            def main(model, optimizer, args):
                model.cuda()
                save_checkpoint(args.out, model, optimizer)
        """,
    })
    ((path, line, _, confidence, steps),) = project_findings(capsys, project, evidence=True)
    assert (path, line, confidence) == ("infer.py", 9, "certain")
    assert any("checkpoint.py:3" in step for step in steps)


def test_an_optimizer_state_alone_is_no_evidence_of_weights(project, capsys):
    write(project, {"infer.py": PUBLISHED, "train.py": """\
        import torch
        def main(model, optimizer, args):
            model.cuda()
            torch.save(optimizer.state_dict(), args.out)
    """})
    assert project_findings(capsys, project) == [("infer.py", 9, 23, "possible")]


INFER = """\
import argparse
import torch
def main(model, path{default}):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.load_state_dict(torch.load({loaded}))
    model.to(device)
"""


@pytest.mark.parametrize("default, loaded", [
    ("", '"pretrained/resnet50.pth"'),  # a literal the project never writes
    ("", 'os.path.join(path, "imagenet_{}.pth".format(depth))'),  # a template of one
    ('="weights/hubert_soft.pt"', "path"),  # the literal default of the parameter it comes from
])
def test_a_file_the_project_never_writes_is_possible(project, capsys, default, loaded):
    write(project, {"infer.py": INFER.format(default=default, loaded=loaded), **TRAINER})
    ((path, _, _, confidence, steps),) = project_findings(capsys, project, evidence=True)
    assert (path, confidence) == ("infer.py", "possible")
    assert any("no code of the project writes a file named" in step for step in steps)


@pytest.mark.parametrize("saved, loaded", [
    ('f"{out}/best.pth"', '"checkpoints/best.pth"'),
    ('os.path.join(out, "best_{}.pth".format(epoch))', '"checkpoints/best_12.pth"'),
])
def test_a_file_the_project_writes_from_a_device_is_certain(project, capsys, saved, loaded):
    write(project, {"infer.py": INFER.format(default="", loaded=loaded), "train.py": f"""\
        import torch
        def snapshot(model, device, out, epoch):
            torch.save(model.to(device).state_dict(), {saved})
    """})
    assert project_findings(capsys, project) == [("infer.py", 5, 27, "certain")]


def test_a_parameter_reassigned_in_the_body_is_not_its_default(project, capsys):
    write(project, {"infer.py": INFER.format(default='="weights/x.pt"', loaded="path").replace(
        "    device =", "    path = resolve(path)\n    device ="), **TRAINER})
    assert project_findings(capsys, project) == [("infer.py", 6, 27, "certain")]


TRAINER_START = """\
import torch
def train(model, args, device):
    model.load_state_dict(torch.load(args.init))
    {loop}
        torch.save(model.to(device).state_dict(), args.out)
"""


@pytest.mark.parametrize("loop", ["for epoch in range(args.epochs):", "while True:"])
def test_a_load_in_code_that_saves_checkpoints_in_a_loop_is_a_trainers_start(loop):
    assert found(TRAINER_START.format(loop=loop)) == [(3, 27, "possible")]
    assert any("a trainer's start point" in step for step in reasons(TRAINER_START.format(loop=loop)))


@pytest.mark.parametrize("shadowed", [False, True])
def test_a_loop_calling_the_scripts_own_saving_function_is_a_trainer(shadowed):
    # the epoch loop calls `save_data(...)`, a function of the same script that torch.saves
    code = TRAINER_START.format(loop="for epoch in range(args.epochs):").replace(
        "        torch.save(model.to(device).state_dict(), args.out)\n", "        save_data(model, args)\n") + (
        "def save_data(model, args):\n    torch.save(model.state_dict(), args.out)\n")
    if shadowed:  # a parameter of that name is something else: no trainer
        code = code.replace("def train(model, args, device):", "def train(model, args, device, save_data):")
    assert found(code) == [(3, 27, "certain" if shadowed else "possible")]


@pytest.mark.parametrize("init, confidence", [
    ("        self.net = torch.nn.Linear(2, 2)\n", "certain"),  # building one saves nothing
    ("        self.net = torch.nn.Linear(2, 2)\n        torch.save(self.net.state_dict(), 'init.pt')\n", "possible"),
])
def test_a_loop_building_objects_that_can_save_is_no_trainer(init, confidence):
    # MADDPG's team builds its agents in a loop; only their `save` method writes checkpoints
    code = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "class Agent:\n    def __init__(self):\n" + init.replace("Linear(2, 2)", "Linear(2, 2).to(device)")
            + "    def save(self, path):\n        torch.save(self.net.state_dict(), path)\n"
            "class Team:\n    def __init__(self, n):\n        self.agents = [Agent() for _ in range(n)]\n"
            "        for _ in range(n):\n            self.agents.append(Agent())\n"
            "    def load(self, path):\n        self.agents[0].net.load_state_dict(torch.load(path))\n"
            "team = Team(2)\nteam.load('team.pt')\n")
    line = code.splitlines().index("        self.agents[0].net.load_state_dict(torch.load(path))") + 1
    assert found(code) == [(line, 44, confidence)]


def test_a_converter_that_saves_once_is_no_trainer():
    code = TRAINER_START.format(loop="if True:")
    assert found(code) == [(3, 27, "certain")]


def test_a_trainer_in_another_function_leaves_the_load_certain():
    code = TRAINER_START.format(loop="for epoch in range(args.epochs):").replace(
        "    model.load_state_dict(torch.load(args.init))\n", "    pass\n") + (
        "def evaluate(model, args, device):\n    model.load_state_dict(torch.load(args.weights))\n")
    assert found(code) == [(7, 27, "certain")]


RECEIVER = """\
import torch
def restore(model, other, path, device):
    model.load_state_dict(torch.load(path))
    {after}
"""


@pytest.mark.parametrize("after", ["model.cuda()", "model = model.cuda().eval()", 'model.to("cuda:0")'])
def test_weights_going_into_a_module_moved_to_cuda_anyway_are_possible(after):
    code = RECEIVER.format(after=after)
    assert found(code) == [(3, 27, "possible")]
    assert any("is moved to CUDA whatever happens" in step for step in reasons(code))


@pytest.mark.parametrize("after", [
    "other.cuda()",  # another object: TDL001's business
    "if args.cuda:\n        model.cuda()",  # only when asked
    "model.to(device)",  # follows the chosen device
])
def test_no_unconditional_cuda_move_of_the_receiver_leaves_the_load_certain(after):
    assert found(RECEIVER.format(after=after)) == [(3, 27, "certain")]


# -- what the twelfth batch showed (results/2026-11-26-first-look-da54707.txt) ----------------

def test_a_name_template_of_suffixes_only_names_no_particular_file(project, capsys):
    write(project, {"infer.py": INFER.format(default="", loaded='"hifigan/generator_LJSpeech.pth.tar"'),
                    "train.py": """\
        import torch
        def snapshot(model, device, step):
            torch.save(model.to(device).state_dict(), "{}.pth.tar".format(step))
    """})
    ((_, _, _, confidence, steps),) = project_findings(capsys, project, evidence=True)
    assert confidence == "possible"
    assert any("no code of the project writes a file named `generator_LJSpeech.pth.tar`" in s for s in steps)


@pytest.mark.parametrize("use, confidence", [
    ("recall = data['params'].recThrs", "possible"),  # COCOeval's parameters: an object, no state dict
    ("model.load_state_dict(data['params'])", "certain"),  # BasicSR's weights
])
def test_an_entry_read_as_an_object_holds_no_weights(use, confidence):
    code = f"""\
    import torch
    def plot(model, f, device):
        data = torch.load(f)
        {use}
    """
    assert found(code) == [(3, 12, confidence)]


LOSS = """\
import torch
class IDLoss(torch.nn.Module):
    def __init__(self, path):
        super().__init__()
        self.net = Backbone()
        self.net.load_state_dict(torch.load(path))
"""


@pytest.mark.parametrize("cpu_path, confidence", [
    ('state = torch.load(p, map_location="cpu")', "possible"),  # where a file lands: no CPU path
    ('state = torch.load(p, map_location=torch.device("cpu"))', "possible"),
    ('DEVICE = torch.device("cuda")', "possible"),  # a device built, not one followed
    ('state = torch.load(p, map_location=None if torch.cuda.is_available() else "cpu")', "certain"),
    ("y = x.to(w.device)", "certain"),  # follows the device of a value
])
def test_what_shows_a_package_cpu_path(project, capsys, cpu_path, confidence):
    write(project, {"pkg/__init__.py": "", "pkg/loss.py": LOSS, "pkg/io.py": f"import torch\n{cpu_path}\n",
                    "score.py": "from pkg.loss import IDLoss\n", **TRAINER})
    assert project_findings(capsys, project) == [("pkg/loss.py", 6, 34, confidence)]


def test_library_code_whose_users_all_run_on_cuda_is_possible(project, capsys):
    write(project, {"pkg/__init__.py": "", "pkg/loss.py": LOSS,
                    "pkg/io.py": 'import torch\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
                    "coach.py": """\
                        from pkg import loss
                        class Coach:
                            def __init__(self, opts):
                                self.device = "cuda:0"
                                self.id_loss = loss.IDLoss(opts.ir_se50).to(self.device)
                    """, **TRAINER})
    ((path, _, _, confidence, steps),) = project_findings(capsys, project, evidence=True)
    assert (path, confidence) == ("pkg/loss.py", "possible")
    assert any("(coach.py) show no CPU path" in step for step in steps)
    # another user that offers the CPU makes it certain again
    write(project, {"infer.py": """\
        import torch
        from pkg.loss import IDLoss
        device = "cuda" if torch.cuda.is_available() else "cpu"
        scorer = IDLoss("ir_se50.pth").to(device)
    """})
    assert project_findings(capsys, project) == [("pkg/loss.py", 6, 34, "certain")]


def test_the_evidence_names_the_saving_file_from_the_project_root(project, capsys):
    write(project, {"infer.py": PUBLISHED, "backup/train.py": TRAINER["trainer.py"]})
    ((_, _, _, confidence, steps),) = project_findings(capsys, project, evidence=True)
    assert confidence == "certain"
    assert any("(backup/train.py:3)" in step for step in steps)


# -- what the thirteenth batch showed (results/2026-11-27-first-look-5d7d2f8.txt) -------------

TRAINER_CLASS = """\
import numpy as np
import torch
class ModelTrainer:
    def __init__(self, net, chkp_path, on_gpu=True):
        self.device = torch.device("cuda:0" if on_gpu and torch.cuda.is_available() else "cpu")
        net.to(self.device)
        checkpoint = torch.load(chkp_path)
        net.load_state_dict(checkpoint["model_state_dict"])
    def train(self, net, loader, epochs):
        for epoch in range(epochs):
            {write}
"""


@pytest.mark.parametrize("write, confidence", [
    ("self._save_checkpoint(epoch)", "possible"),  # a trainer class: its start point
    ("save_model(net, epoch, path='checkpoints')", "possible"),
    ("torch.save(net.state_dict(), f'chkp_{epoch}.tar')", "possible"),
    ("np.save(f'probs_{epoch}.npy', net.probs)", "certain"),  # a tester's results, no checkpoint
    ("image.save(f'pred_{epoch}.png')", "certain"),
    ("plt.savefig(f'loss_{epoch}.png')", "certain"),
])
def test_a_class_that_writes_checkpoints_in_a_loop_is_a_trainer(write, confidence):
    assert found(TRAINER_CLASS.format(write=write)) == [(7, 22, confidence)]


COPY = """\
import torch
class Backbone(torch.nn.Module):
    def load_param(self, trained_path):
        param_dict = torch.load(trained_path)
        for k in param_dict["state_dict"]:
            self.state_dict()[k].copy_(param_dict["state_dict"][k])
"""


def test_a_package_module_that_no_running_code_imports_is_possible(project, capsys):
    write(project, {
        "models/__init__.py": "",
        "models/used/__init__.py": "from .make_model import Backbone\n",
        "models/used/make_model.py": COPY,
        "models/second_copy/__init__.py": "from .make_model import Backbone\n",
        "models/second_copy/make_model.py": COPY,
        "models/device.py": 'import torch\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
        "test.py": "import torch\nfrom models.used import Backbone\n"
                   'device = "cuda" if torch.cuda.is_available() else "cpu"\nnet = Backbone().to(device)\n',
        **TRAINER,
    })
    found_ = project_findings(capsys, project, evidence=True)
    assert [(path, confidence) for path, _, _, confidence, _ in found_] == [
        ("models/second_copy/make_model.py", "possible"), ("models/used/make_model.py", "certain")]
    assert any("nothing indexed with it imports" in step for step in found_[0][4])


def test_a_save_through_a_helper_that_prepares_the_path_is_a_round_trip():
    """`torch.save(state, make_path(path))` (a helper that creates the directory and returns
    the path) then `torch.load(path)` in the same run: the file comes back where it was saved.
    Another file loaded after that save is only possible too: nothing shows it is not one this
    run wrote. Loaded before the save, it is flagged."""
    code = """\
    import argparse, os, torch
    from utils import make_path
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    args = p.parse_args()
    device = "cpu" if args.cpu else "cuda"
    model = torch.nn.Linear(2, 2).to(device)
    model.load_state_dict(torch.load(args.init))
    path = os.path.join(args.save_dir, "best_params")
    torch.save(model.state_dict(), make_path(path))
    model.load_state_dict(torch.load(path))
    model.load_state_dict(torch.load(args.other))
    """
    assert found(code) == [(8, 23, "certain"), (12, 23, "possible")]


def test_a_run_on_one_file_says_where_it_looked_for_importers(project, capsys):
    """Named alone, a package module is indexed with its package only: the evidence says so
    instead of claiming that nothing in the project imports it."""
    write(project, {
        "src/models/__init__.py": "",
        "src/models/make_model.py": COPY,
        "src/models/device.py": 'import torch\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
        "src/train.py": "import torch\nfrom models.make_model import Backbone\n"
                        'device = "cuda" if torch.cuda.is_available() else "cpu"\nnet = Backbone().to(device)\n',
    })
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", "TDL004",
              "src/models/make_model.py"])
    steps = [e["message"] for f in json.loads(capsys.readouterr().out) for e in f["evidence"]]
    assert any("nothing indexed with it imports (the files under src/models/" in step for step in steps), steps
    assert not any("nothing in the project imports" in step for step in steps)


def confidences_beside_the_trainer(project, capsys, script: str) -> list[str]:
    """The confidences of the TDL004 findings in ``script.py``, in a project whose trainer saves
    weights from a device."""
    write(project, {**TRAINER, "script.py": script})
    return [f[3] for f in project_findings(capsys, project) if f[0] == "script.py"]


@pytest.mark.parametrize("path, confidence", [
    ('os.path.expanduser("~/.cache/torch/hub/checkpoints/" + model_urls[name].split("/")[-1])', "possible"),
    ("args.weights", "certain"),
    # named as torch.hub names its downloads: the hash's first digits follow the name
    ('os.path.join("weights", "inception_v3_google-0cc3c7bd.pth")', "possible"),
])
def test_weights_from_the_model_zoo_are_cpu_tensors(project, capsys, path, confidence):
    script = ("import os\nimport sys\nimport torch\n"
              "model_urls = {'resnet50': 'https://download.pytorch.org/models/resnet50-19c8e357.pth'}\n"
              'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
              "def load(net, name, args):\n"
              f"    cached = {path}\n"
              "    net.load_state_dict(torch.load(cached))\n"
              "    return net.to(device)\n"
              "if __name__ == '__main__':\n    load(torch.nn.Linear(2, 2), 'resnet50', sys.argv)\n")
    assert confidences_beside_the_trainer(project, capsys, script) == [confidence]


@pytest.mark.parametrize("module, confidence", [
    ("torch2trt.TRTModule()", "possible"),  # a TensorRT engine: the code around the load needs CUDA
    ("torch.nn.Linear(2, 2)", "certain"),
])
def test_weights_loaded_into_a_tensorrt_module_need_cuda_anyway(project, capsys, module, confidence):
    script = ("import sys\nimport torch\ntry:\n    import torch2trt\nexcept ImportError:\n    pass\n"
              'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "def load(path):\n"
              f"    model = {module}\n"
              "    model.load_state_dict(torch.load(path))\n"
              "    return model.to(device)\n"
              "if __name__ == '__main__':\n    load(sys.argv[1])\n")
    assert confidences_beside_the_trainer(project, capsys, script) == [confidence]


SET_DEVICE_FIRST = """\
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--weights")
    args = parser.parse_args()
    {line}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(2, 2).to(device)
    model.load_state_dict(torch.load(args.weights))
"""


def test_a_script_that_sets_the_cuda_device_whenever_it_runs_needs_cuda_anyway():
    # `torch.cuda.set_device` raises on a machine without CUDA whatever it is given (the
    # CPU's device included): the script cannot reach the load there.
    assert found(SET_DEVICE_FIRST.format(line="torch.cuda.set_device(args.device)")) == [(10, 23, "possible")]


def test_a_script_that_sets_the_cuda_device_only_with_cuda_keeps_its_cpu_path():
    line = "if torch.cuda.is_available(): torch.cuda.set_device(args.device)"
    assert found(SET_DEVICE_FIRST.format(line=line)) == [(10, 23, "certain")]


RECORD = """\
    import argparse
    import torch

    class Record:
        def __init__(self):
            self.best = -1.0
            self.model_path = "runs/best.pt"

        def track(self, net, accuracy):
            if accuracy > self.best:
                self.best = accuracy
                torch.save(net.state_dict(), self.model_path)

        def get_model_path(self):
            return self.model_path

    def train(net, data, path):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net.to(device)
        record = Record()
        for epoch in range(10):
            record.track(net, evaluate(net, data))
        {load}
"""


@pytest.mark.parametrize("load", ["net.load_state_dict(torch.load(record.get_model_path()))",
                                  "net.load_state_dict(torch.load(record.model_path))"])
def test_a_reload_of_what_a_tracking_object_saved_earlier_in_the_run_is_only_possible(load):
    # The best weights are written by `record.track` from the net on its device and read
    # back in the same process: they return where they already are.
    assert [f[2] for f in found(RECORD.format(load=load))] == ["possible"]


def test_a_load_after_the_run_saved_weights_is_possible_whatever_it_names():
    # `path` may well be the file `record.track` wrote: the code does not show otherwise
    code = RECORD.format(load="net.load_state_dict(torch.load(path))")
    assert [f[2] for f in found(code)] == ["possible"]


@pytest.mark.parametrize("path, confidence", [
    # the author's lab disk: the script runs where that file is
    ("'/dshome/lab/runs/ours_model.pth'", "possible"),
    ("'D:\\\\experiments\\\\ours_model.pth'", "possible"),
    # a relative path, or a temporary one: any machine that runs the script may have it
    ("'runs/ours_model.pth'", "certain"),
    ("os.path.join('/tmp/runs', 'ours_model.pth')", "certain"),
])
def test_a_load_from_one_machines_absolute_path_runs_on_that_machine(path, confidence):
    code = ("import os\nimport torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "model = Net().to(device)\n"
            f"CKPT = {path}\nmodel.load_state_dict(torch.load(CKPT))\n")
    trainer = {"trainer.py": "import torch\ndef snapshot(model, device):\n"
                             "    torch.save(model.to(device).state_dict(), 'ours_model.pth')\n"}
    assert [(f.line, f.confidence.value) for f in lint_beside({"script.py": code, **trainer})] == [(6, confidence)]


TRAINING = """\
    import os
    import torch
    def save_model(model, path):
        torch.save(model.state_dict(), path)
    def train(model, loader, out):
        best = None
        for epoch, batch in enumerate(loader):
            if epoch % 2 == 0:
                best = os.path.join(out, f"best_{epoch}.pth")
                save_model(model, best)
        return best
    def fit(model, loader, out):
        train(model, loader, out)
        return model
"""

TRAINABLE = """\
    import torch
    import training
    class Trainable:
        def __init__(self, device):
            self.device = device
        def train(self, model, loader):
            best_model_path = training.train(model, loader, "runs")
            return best_model_path
        def create_model(self, model_path=None):
            model = torch.nn.Linear(2, 2)
            if model_path is not None:
                model.load_state_dict(torch.load(model_path))
            return model.to(self.device)
"""


@pytest.mark.parametrize("script, confidence", [
    # the run trains, and loads the path its training returned: the best model it just saved
    ("best_model_path = training.train(model, loader, 'runs')\nmodel.load_state_dict(torch.load(best_model_path))\n",
     "possible"),
    ("model.load_state_dict(torch.load(training.train(model, loader, 'runs')))\n", "possible"),
    # `fit` returns the model, not a path it saved, but it did save: which file is this?
    ("path = training.fit(model, loader, 'runs')\nmodel.load_state_dict(torch.load(sys.argv[1]))\n", "possible"),
    # loaded before the run trains: a file an earlier run wrote, maybe on another machine
    ("model.load_state_dict(torch.load(sys.argv[1]))\npath = training.fit(model, loader, 'runs')\n", "certain"),
])
def test_a_load_of_the_path_a_saver_returned_reads_back_the_run(project, capsys, script, confidence):
    write(project, {"training.py": TRAINING, "run.py": (
        "import sys\nimport torch\nimport training\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "loader = []\n" + script)})
    assert [f[3] for f in project_findings(capsys, project) if f[0] == "run.py"] == [confidence]


@pytest.mark.parametrize("script, confidence", [
    # the trainer's best path, handed to the method that loads it: a round trip through two files
    ("best_model_path = trainable.train(model, [])\ntrainable.create_model(model_path=best_model_path)\n", "possible"),
    # a checkpoint named on the command line: another run's file
    ("checkpoint_path = sys.argv[1]\ntrainable.create_model(model_path=checkpoint_path)\n", "certain"),
])
def test_a_method_handed_the_path_a_saver_returned_reads_back_the_run(project, capsys, script, confidence):
    write(project, {"training.py": TRAINING, "trainable.py": TRAINABLE, "run.py": (
        "import sys\nimport torch\nfrom trainable import Trainable\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "trainable = Trainable(device)\n" + script)})
    assert [f[3] for f in project_findings(capsys, project) if f[0] == "trainable.py"] == [confidence]


# A detector whose backbone loads its own pretrained weights; the trainer saves the whole
# detector from the device the user picks.
DETECTOR = """\
    import torch
    import torch.nn as nn
    from backbones import vgg, Encoder

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = vgg()
            self.head = nn.Linear(4, 2)

        def load_base(self, path):
            self.base.load_state_dict(torch.load(path))
"""
BACKBONES = """\
    import torch.nn as nn

    def vgg():
        return nn.Sequential(nn.Linear(4, 4))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Linear(4, 4)
"""


def _trainer(saved: str) -> str:
    return f"""\
    import argparse
    import torch
    from detector import Detector
    from backbones import Encoder
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    device = "cuda" if args.cuda and torch.cuda.is_available() else "cpu"
    net = Detector()
    net.load_base("weights/vgg16.pth")
    net = net.to(device)
    encoder = Encoder().to(device)
    torch.save({saved}, "out/model.pth")
"""


@pytest.mark.parametrize("saved, confidence", [
    # the whole detector: its checkpoint's keys start with "base.", no fit for the backbone
    ("net.state_dict()", "possible"),
    ("{'model': net.state_dict(), 'optimizer': opt.state_dict(), 'epoch': 3}", "possible"),
    # the backbone alone, or a module of another class: it may be what the backbone loads
    ("net.base.state_dict()", "certain"),
    ("encoder.state_dict()", "certain"),
])
def test_a_part_loads_weights_no_whole_model_checkpoint_fits(saved, confidence):
    files = {"detector.py": DETECTOR, "backbones.py": BACKBONES, "train.py": _trainer(saved)}
    (finding,) = lint_beside(files, "detector.py")
    assert (finding.line, finding.column, finding.confidence.value) == (12, 35, confidence)
    messages = [step.message for step in finding.evidence]
    said = [m for m in messages if "a part of the model the project saves whole" in m]
    if confidence == "possible":
        assert said == ["the weights go into `self.base`, a part of the model the project saves whole "
                        "(`Detector`, train.py:13): those checkpoints keep it under `base.`, so this file is "
                        "the part's own, from elsewhere"]
    else:
        assert not said


LIGHTNING = """\
    import torch
    import pytorch_lightning as pl
    device = "cuda" if torch.cuda.is_available() else "cpu"
    def fit(model, data, checkpoint_callback):
        trainer = pl.Trainer(callbacks=[checkpoint_callback])
        trainer.fit(model, data)
        path = {path}
        model.load_state_dict(torch.load(path)["state_dict"])
        return model.to(device)
"""


@pytest.mark.parametrize("path, confidence", [
    # the checkpoint the run's trainer just wrote: read back on the machine that wrote it
    ("checkpoint_callback.best_model_path", "possible"),
    ("checkpoint_callback.last_model_path", "possible"),
    # a file the caller names: trained anywhere
    ("data.pretrained", "certain"),
])
def test_a_lightning_checkpoint_of_the_run_is_read_where_it_was_written(path, confidence):
    assert found(LIGHTNING.format(path=path)) == [(8, 27, confidence)]


PLUGINS = {
    "checkpoint.py": """\
        import torch
        class CheckpointPlugin:
            def __init__(self, bestModelPath):
                self.bestModelPath = bestModelPath
            def after_eval(self, strategy):
                strategy.model.to(strategy.device)
                torch.save(strategy.model.state_dict(), self.bestModelPath)
    """,
    "reload.py": """\
        import torch
        class ReloadPlugin:
            def __init__(self, bestModelPath, initialPath, device):
                self.bestModelPath = bestModelPath
                self.initialPath = initialPath
                self.device = device
            def after_training(self, strategy):
                strategy.model.load_state_dict(torch.load(self.{attribute}))
                strategy.model.to(self.device)
    """,
}


@pytest.mark.parametrize("attribute, confidence", [
    # the path a checkpoint plugin of the project saves to, under the same name: one run's file
    ("bestModelPath", "possible"),
    ("initialPath", "certain"),  # no save writes a path of that name: from elsewhere
])
def test_an_object_path_the_projects_saver_writes_is_read_back_in_the_run(attribute, confidence):
    files = {**PLUGINS, "reload.py": PLUGINS["reload.py"].format(attribute=attribute), **TRAINER}
    assert [(f.line, f.confidence.value) for f in lint_beside(files, "reload.py")] == [(8, confidence)]


@pytest.mark.parametrize("name, zoo", [
    ("inception_v3_google-0cc3c7bd.pth", True),
    ("resnet18-f37072fd.pth", True),
    ("model-20240101.pth", False),  # a date is no hash: it has no letter
    ("best-epoch12.pth", False),
])
def test_a_file_named_as_torch_hub_names_its_downloads_is_published_weights(name, zoo):
    code = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "def load(net):\n    if torch.cuda.is_available():\n"
            f"        path = 'out/{name}'\n    else:\n        path = 'backup/{name}'\n"
            "    net.load_state_dict(torch.load(path))\n    return net.to(device)\n")
    said = any("model zoo" in step for step in reasons(code))
    assert said is zoo


@pytest.mark.parametrize("read, certain", [
    # the state dict's entries, renamed on the way into load_state_dict: weights
    ('{k.replace("model.", ""): v for k, v in torch.load(path)["state_dict"].items()}', True),
    ('dict(torch.load(path)["state_dict"].items())', True),
    # an entry read as an object (an evaluator's parameters): no state dict
    ('torch.load(path)["params"].recThrs', False),
])
def test_a_state_dict_read_entry_by_entry_holds_weights(read, certain):
    code = ("import torch\ndef load_net(net, path, device):\n"
            f"    state = {read}\n    net.load_state_dict(state)\n    return net.to(device)\n")
    assert [c for _, _, c in found(code)] == (["certain"] if certain else ["possible"])
