"""What the analysis must know before it calls a finding certain: the shapes first looks at
public repositories showed wrong (a CUDA extension's wrapper, a load that already falls back,
an option nothing reads, a project's own `cuda()` helper) and the failure paths that make
the device-mixing rules certain (a module the project moves, a value a move placed)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchdev_lint import cli
from torchdev_lint.analysis import project_index
from torchdev_lint.rule import Rule


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def findings(capsys, root: Path, select: str) -> list[tuple]:
    """(file, line, code, confidence) of a `--preview` run over ``root`` with its project index,
    in this process (``-j 1``): workers a spawning pool starts would not see the patched rules."""
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "-j", "1", "--select", select, str(root)])
    return sorted((Path(f["path"]).relative_to(root).as_posix(), f["line"], f["code"], f["confidence"])
                  for f in json.loads(capsys.readouterr().out))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def verdicts_of_preview_rules(monkeypatch):
    """What the analysis says of each finding, also for the rules the default output does
    not show yet (their findings all read as possible there; ``test_rule_examples`` checks that)."""
    for code in ("TDL006", "TDL008", "TDL009"):
        monkeypatch.setattr(Rule.registry[code], "preview", False)


EXTENSION = {
    "ops/backend.py": """\
        import os
        from torch.utils.cpp_extension import load
        _here = os.path.dirname(__file__)
        _backend = load(name="_march", sources=[os.path.join(_here, "march.cu"), os.path.join(_here, "bind.cpp")])
        """,
    "ops/__init__.py": "",
    "ops/march.py": """\
        import torch
        try:
            import _march as _backend
        except ImportError:
            from .backend import _backend
        def march(rays):
            if not rays.is_cuda:
                rays = rays.cuda()
            return _backend.march(rays)
        """,
    "train.py": """\
        import torch
        from ops.march import march
        device = "cuda" if torch.cuda.is_available() else "cpu"
        rays = torch.rand(8, 3).to(device)
        print(march(rays))
        """,
}


def test_the_wrapper_of_a_cuda_extension_needs_cuda_anyway(project, capsys):
    """The `.cuda()` that feeds a kernel built from `.cu` sources is no portability bug."""
    write(project, EXTENSION)
    assert findings(capsys, project, "TDL001") == [("ops/march.py", 8, "TDL001", "possible")]
    # the same wrapper over a C++-only extension runs on the CPU: the `.cuda()` is the bug
    write(project, {"ops/backend.py": EXTENSION["ops/backend.py"].replace('"march.cu"', '"march.cpp"')})
    assert findings(capsys, project, "TDL001") == [("ops/march.py", 8, "TDL001", "certain")]


def test_a_module_whose_package_init_builds_a_cuda_extension_needs_cuda_anyway(project, capsys):
    # `renders/__init__.py` imports the renderer that compiles `.cu` kernels when imported:
    # every import of `renders.nerf` runs it first, so a run that reaches `nerf` has CUDA
    write(project, {
        "renders/__init__.py": "from .nerf import render\nfrom .kernels import _backend\n",
        "renders/kernels.py": EXTENSION["ops/backend.py"],
        "renders/nerf.py": """\
            import torch
            def render(rays):
                return rays.cuda() * 2
            """,
        "run.py": """\
            import torch
            from renders import render
            device = "cuda" if torch.cuda.is_available() else "cpu"
            print(render(torch.rand(8, 3).to(device)))
            """,
    })
    assert findings(capsys, project, "TDL001") == [("renders/nerf.py", 3, "TDL001", "possible")]
    # a package `__init__` that builds nothing leaves the `.cuda()` a portability bug
    write(project, {"renders/__init__.py": "from .nerf import render\n", "renders/kernels.py": ""})
    assert findings(capsys, project, "TDL001") == [("renders/nerf.py", 3, "TDL001", "certain")]


def test_a_wrapper_that_builds_its_extension_lazily_needs_cuda_anyway(project, capsys):
    # `get_backend()` imports the extension when it is first called (torch-ngp's raymarching)
    write(project, {**EXTENSION, "ops/march.py": """\
        import torch
        BACKEND = None
        def get_backend():
            global BACKEND
            if BACKEND is None:
                try:
                    import _march as _backend
                except ImportError:
                    from .backend import _backend
                BACKEND = _backend
            return BACKEND
        def march(rays):
            if not rays.is_cuda:
                rays = rays.cuda()
            return get_backend().march(rays)
        """})
    assert findings(capsys, project, "TDL001") == [("ops/march.py", 14, "TDL001", "possible")]


def test_a_load_retried_with_map_location_already_falls_back(project, capsys):
    write(project, {"restore.py": """\
        import torch
        def restore(model, path, device):
            try:
                state = torch.load(path)
            except RuntimeError:
                state = torch.load(path, map_location=lambda storage, loc: storage)
            model.load_state_dict(state)
        def restore_plain(model, path, device):
            model.load_state_dict(torch.load(path))
        """})
    assert [f[:3] for f in findings(capsys, project, "TDL004")] == [("restore.py", 9, "TDL004")]


def test_a_project_function_named_cuda_is_not_tensor_cuda(project, capsys):
    write(project, {
        "utils.py": "import torch\ndef cuda(x):\n    return x.cuda() if torch.cuda.is_available() else x\n",
        "validate.py": """\
            import torch
            import utils
            device = "cuda" if torch.cuda.is_available() else "cpu"
            net = torch.nn.Linear(2, 2).to(device)
            def validate(model, loader):
                for x, y in loader:
                    yield model(utils.cuda(x)), y.cuda()
            outputs = list(validate(net, []))
            """,
    })
    assert findings(capsys, project, "TDL001") == [("validate.py", 7, "TDL001", "certain")]


@pytest.mark.parametrize("helper, certain", [
    # the imported `run` moves each batch to the device it picks, CPU included: a CPU run of
    # the script reaches its hardcoded `.cuda()`
    ("    return net(batch.to('cuda:0' if torch.cuda.is_available() else 'cpu'))\n", True),
    ("    return net(batch.to('cuda:0'))\n", False),
    ("    print('on', 'cuda:0' if torch.cuda.is_available() else 'cpu')\n    return net(batch.cuda())\n", False),
])
def test_a_script_runs_where_the_helper_it_imports_chooses(project, capsys, helper, certain):
    write(project, {"loops.py": "import torch\ndef run(net, batch):\n" + helper,
                    "train.py": "import torch\nfrom loops import run\ndef main():\n"
                                "    net = torch.nn.Linear(2, 2).cuda()\n    print(run(net, torch.ones(2)))\n"
                                "if __name__ == '__main__':\n    main()\n"})
    found = [f for f in findings(capsys, project, "TDL001") if f[0] == "train.py"]
    assert found == [("train.py", 4, "TDL001", "certain" if certain else "possible")]


@pytest.mark.parametrize("choice, certain", [
    ('device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")\n', True),
    # the CPU choice switched off in a comment: the script runs on cuda:0 only
    ('# device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")\ndevice = torch.device("cuda:0")\n',
     False),
])
def test_a_cpu_choice_in_a_comment_is_no_cpu_path_for_what_the_script_imports(project, capsys, choice, certain):
    write(project, {"utils.py": "import torch\ndef noise(shape):\n    return torch.zeros(shape).cuda()\n",
                    "detect.py": "import torch\nfrom utils import noise\n" + choice
                                 + "x = torch.ones(2, device=device) + noise(2).to(device)\nprint(x)\n"})
    found = [f for f in findings(capsys, project, "TDL001") if f[0] == "utils.py"]
    assert found == [("utils.py", 3, "TDL001", "certain" if certain else "possible")]


@pytest.mark.parametrize("config, certain", [
    # the configuration class the script builds picks the CPU without CUDA: its run does too
    ("    device: torch.device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')\n", True),
    ("    device: str = 'cuda:0'\n", False),
    # a class's own default device, chosen in its __init__, is not the run's: the script overrides it
    ("    def __init__(self, **kw):\n        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n", False),
])
def test_a_script_runs_where_the_configuration_class_it_builds_chooses(project, capsys, config, certain):
    write(project, {"config.py": "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass Configs:\n" + config,
                    "infer.py": "import json\nimport torch\nfrom config import Configs\ndef main(path):\n"
                                "    cfg = Configs(**json.load(open(path)))\n"
                                "    net = torch.nn.Linear(2, 2).to(cfg.device)\n"
                                "    return net(torch.ones(2).cuda())\n"
                                "if __name__ == '__main__':\n    main('cfg.json')\n"})
    found = [f for f in findings(capsys, project, "TDL001") if f[0] == "infer.py"]
    assert found == [("infer.py", 7, "TDL001", "certain" if certain else "possible")]


@pytest.mark.parametrize("choice, certain", [
    # a device only printed or logged decides nothing: the run places everything on CUDA
    ("print('running on', 'cuda:0' if torch.cuda.is_available() else 'cpu')\n", False),
    ("logger.info('device: %s', 'cuda' if torch.cuda.is_available() else 'cpu')\n", False),
    ("device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\nprint(torch.ones(1).to(device))\n", True),
])
def test_a_device_only_shown_is_no_cpu_choice(project, capsys, choice, certain):
    write(project, {"train.py": "import logging\nimport torch\nlogger = logging.getLogger()\n" + choice
                    + "def step(x):\n    return x.cuda()\nstep(torch.ones(1))\n"})
    (finding,) = findings(capsys, project, "TDL001")
    assert finding[3] == ("certain" if certain else "possible")


@pytest.mark.parametrize("script, certain", [
    # `--cuda` parsed and never read: the script offers no CPU path, whatever its help says
    ("p.add_argument('--cuda', action='store_true')\nargs = p.parse_args()\n", False),
    ("p.add_argument('--cuda', action='store_true')\nargs = p.parse_args()\nuse = args.cuda\n", True),
    ("p.add_argument('--no-cuda', action='store_true')\nargs = p.parse_args()\n"
     "device = 'cpu' if args.no_cuda else 'cuda'\nnet = Net().to(device)\n", True),
    ("p.add_argument('--gpu', dest='use_gpu', action='store_true')\nargs = p.parse_args()\n"
     "if args.use_gpu:\n    print('gpu')\n", True),
    # `--cuda` with store_false: on by default, and giving it turns CUDA off
    ("p.add_argument('--cuda', default=True, action='store_false')\nargs = p.parse_args()\n"
     "if args.cuda:\n    print('gpu')\n", True),
    ("p.add_argument('--cuda', default=True, action='store_false')\nargs = p.parse_args()\n", False),
])
def test_an_option_counts_as_a_cpu_path_only_when_the_script_reads_it(project, capsys, script, certain):
    write(project, {"train.py": "import argparse\nimport torch\np = argparse.ArgumentParser()\n" + script
                    + "def step(x):\n    return x.cuda()\nstep(torch.ones(1))\n"})
    (finding,) = findings(capsys, project, "TDL001")
    assert finding[3] == ("certain" if certain else "possible")


NORMALIZE = """\
    import torch
    from torch import nn
    class Normalize(nn.Module):
        def __init__(self, mean):
            super().__init__()
            self.mean = torch.tensor(mean).view(1, -1, 1, 1)
        def forward(self, x):
            return x - self.mean
    """


@pytest.mark.parametrize("training, confidence", [
    # built by a function whose result is moved
    ("from model import Normalize\ndef build():\n    return nn.Sequential(Normalize([0.5]), nn.Conv2d(1, 2, 3))\n"
     "net = build().to(device)\n", "certain"),
    # handed to a training helper that moves its parameter
    ("from model import Normalize\ndef fit(model, device):\n    model.to(device)\n"
     "fit(Normalize([0.5]), device)\n", "certain"),
    # a submodule of a module that is moved
    ("from model import Normalize\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.norm = Normalize([0.5])\nnet = Net().cuda()\n", "certain"),
    # built and kept, and nothing moves it: it stays on the CPU with its module, so the
    # finding is where the mean meets the inputs (line 8), the one place a move cures
    ("from model import Normalize\nnet = Normalize([0.5])\n", "possible at the use"),
    # a trainer builds it beside a model it moves: the model's `super().__init__()` runs
    # nn.Module's constructor, not the trainer's
    ("from model import Normalize\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.fc = nn.Linear(1, 1)\nclass Trainer:\n    def __init__(self):\n"
     "        self.net = Net().to(device)\n        self.norm = Normalize([0.5])\nTrainer()\n", "possible at the use"),
    # factories follow the default device the project sets to the accelerator's
    ("from model import Normalize\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n"
     "net = Normalize([0.5]).to(device)\n", "possible"),
])
def test_an_attribute_is_certain_where_the_project_moves_its_module(project, capsys, training, confidence):
    write(project, {"model.py": NORMALIZE,
                    "train.py": "import torch\nfrom torch import nn\ndevice = 'cuda'\n" + training})
    line = 8 if confidence.endswith("at the use") else 6
    assert findings(capsys, project, "TDL006") == [("model.py", line, "TDL006", confidence.split()[0])]


@pytest.mark.parametrize("choice, found", [
    ("device = 'cpu'\n", ("model.py", 8, "TDL006", "possible")),
    ("device = torch.device('cpu')\n", ("model.py", 8, "TDL006", "possible")),
    # chosen again where CUDA is there: the move may put the module on the GPU
    ("device = 'cpu'\nif torch.cuda.is_available():\n    device = 'cuda'\n", ("model.py", 6, "TDL006", "certain")),
    # a function's parameter of that name is its caller's device
    ("device = 'cpu'\ndef fit(net, device):\n    net.to(device)\nfit(Normalize([0.5]), 'cuda')\n",
     ("model.py", 6, "TDL006", "certain")),
])
def test_a_move_to_a_name_the_script_binds_only_to_the_cpu_moves_nothing(project, capsys, choice, found):
    """A teaching script's `device = "cpu"` ... `model.to(device)` puts no module on an
    accelerator: the attribute is not left behind by a move, as where nothing moves it."""
    write(project, {"model.py": NORMALIZE, "train.py": "import torch\nfrom model import Normalize\n" + choice
                    + "net = Normalize([0.5]).to(device)\n"})
    assert findings(capsys, project, "TDL006") == [found]


@pytest.mark.parametrize("split, confidence", [
    # a network split over two GPUs: model-parallel code, for a machine that has them
    ("head = torch.nn.Linear(2, 2).to('cuda:0')\ntail = torch.nn.Linear(2, 2).to('cuda:1')\nprint(head, tail)\n",
     "possible"),
    ("head = torch.nn.Linear(2, 2).cuda(0)\ntail = torch.nn.Linear(2, 2).cuda(1)\nprint(head, tail)\n", "possible"),
    # a second GPU only as an option's default: the user may pass the CPU
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda:1')\n"
     "head = torch.nn.Linear(2, 2).to('cuda:0')\nprint(head)\n", "certain"),
    ("x = torch.zeros(2, device='cuda:1')\nprint(x)\n", "possible"),
    # a report of GPU 1's memory puts no work there
    ("print(torch.cuda.memory_allocated(device='cuda:1'))\nhead = torch.nn.Linear(2, 2).to('cuda:0')\nprint(head)\n",
     "certain"),
])
def test_a_file_putting_work_on_a_second_gpu_is_multi_gpu_code(project, capsys, split, confidence):
    write(project, {"train.py": "import torch\n" + CHOOSES + split})
    assert {f[3] for f in findings(capsys, project, "TDL001,TDL002")} == {confidence}


@pytest.mark.parametrize("pick, found", [
    # the freest GPU, read back from nvidia-smi's report: without the driver its parse raises
    ("os.system('nvidia-smi -q -d Memory | grep Free > tmp')\n"
     "gpu = np.argmax([int(x.split()[2]) for x in open('tmp').readlines()])\n", []),
    ("gpu = int(subprocess.check_output(['nvidia-smi', '--query-gpu=index', '--format=csv']).split()[1])\n",
     []),
    ("os.system('nvidia-smi')\n", ["certain"]),  # only printed
])
def test_a_gpu_picked_from_nvidia_smi_at_import_needs_the_driver(project, capsys, pick, found):
    """The rest of the script runs only where there is a GPU: its `.cuda()` is no finding."""
    write(project, {"train.py": "import os\nimport subprocess\nimport numpy as np\nimport torch\n" + pick + CHOOSES
                    + "x = torch.ones(2).cuda()\nprint(x)\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == found


def test_a_python_list_made_from_the_tensor_is_no_attribute_left_behind(project, capsys):
    write(project, {"enc.py": """\
        import torch
        from torch import nn
        class Encoder(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.bands = 2.0 ** torch.linspace(0, n, n)
                self.bands = self.bands.numpy().tolist()
            def forward(self, x):
                return torch.cat([x * b for b in self.bands], -1)
        net = Encoder(4).to("cuda")
        """})
    assert findings(capsys, project, "TDL006") == []


HEAD = """\
    import torch
    from torch import nn
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)
            self.stride = torch.tensor([8.0, 16.0, 32.0])
        def forward(self, x):
            return self.conv(x) * self.stride.view(1, 3, 1, 1)
    """


@pytest.mark.parametrize("override, flagged", [
    # the model's `_apply` moves its head's stride with every move (YOLO)
    ("    def _apply(self, fn):\n        self = super()._apply(fn)\n"
     "        self.head.stride = fn(self.head.stride)\n        return self\n", []),
    # an override that moves something else leaves the stride behind
    ("    def _apply(self, fn):\n        self = super()._apply(fn)\n"
     "        self.head.anchors = fn(self.head.anchors)\n        return self\n", [("head.py", 7, "TDL006", "certain")]),
    ("", [("head.py", 7, "TDL006", "certain")]),
])
def test_an_attribute_a_move_override_of_another_file_assigns_follows_the_module(project, capsys, override, flagged):
    write(project, {"head.py": HEAD, "model.py": (
        "import torch\nfrom torch import nn\nfrom head import Head\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.head = Head()\n" + override
        + "    def forward(self, x):\n        return self.head(x)\n"
        "model = Model().to('cuda')\nprint(model(torch.rand(1, 3, 4, 4, device='cuda')))\n")})
    assert findings(capsys, project, "TDL006") == flagged


@pytest.mark.parametrize("pruner, confidence", [
    # a pruning loop sets the attribute from each module's weight: the class's own CPU tensor
    # may never be what `forward` meets
    ("def prune(model):\n    for m in model.modules():\n        if hasattr(m, 'stride'):\n"
     "            m.stride = (m.conv.weight.abs() > 0.1).float()\n", "possible"),
    ("def prune(model):\n    for m in model.modules():\n        if hasattr(m, 'stride'):\n"
     "            m.stride[0] = 0\n", "certain"),  # an item set in place: still the class's tensor
])
def test_an_attribute_other_code_replaces_is_not_the_class_s_own(project, capsys, pruner, confidence):
    write(project, {"head.py": HEAD, "prune.py": pruner, "train.py": (
        "import torch\nfrom head import Head\nfrom prune import prune\nmodel = Head().to('cuda')\nprune(model)\n"
        "print(model(torch.rand(1, 3, 4, 4, device='cuda')))\n")})
    assert findings(capsys, project, "TDL006") == [("head.py", 7, "TDL006", confidence)]


@pytest.mark.parametrize("line, confidence", [
    ("preds.append(model(x.to(device)).argmax(1).numpy())", "certain"),  # placed by a move in sight
    # through torch functions of the placed output, and the caller's device parameter
    ("preds.append(torch.max(torch.softmax(model(x.to(device)), 1), 1)[1].numpy())", "certain"),
    ("preds.append(model(x.to(model.device)).numpy())", "possible"),  # a device some object holds
    ("preds.append(model(x).argmax(1).numpy())", None),  # a model of unknown placement, nothing moved
    ("preds.append(model(x.to(device)).to('cpu', torch.uint8).numpy())", None),  # brought back
])
def test_numpy_is_certain_on_a_value_a_move_placed(project, capsys, line, confidence):
    write(project, {"evaluate.py": f"""\
        import torch
        def evaluate(model, loader, device):
            preds = []
            for x in loader:
                {line}
            return preds
        """})
    expected = [("evaluate.py", 5, "TDL009", confidence)] if confidence else []
    assert findings(capsys, project, "TDL009") == expected


@pytest.mark.parametrize("test", ["args.cpu == False", "args.cpu is False", "not args.cpu", "args.cpu != True"])
def test_a_flag_compared_with_a_bool_guards_like_not(project, capsys, test):
    write(project, {"train.py": f"""\
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--cpu", action="store_true")
        args = p.parse_args()
        def batches(loader):
            for x in loader:
                if {test}:
                    x = x.cuda()
                yield x
        """})
    assert findings(capsys, project, "TDL001") == []


def test_a_second_gpu_is_multi_gpu_code(project, capsys):
    """A file that puts work on GPU 1 is written for a machine with two GPUs: its plain
    `.cuda()` too (a first look judged a model split over cuda:0 and cuda:1 that way)."""
    write(project, {"demo.py": """\
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        net = torch.nn.Linear(2, 2).to(device)
        a = torch.ones(2).cuda(1)
        b = torch.ones(2).cuda()
        """})
    assert findings(capsys, project, "TDL001") == [("demo.py", 4, "TDL001", "possible"),
                                                   ("demo.py", 5, "TDL001", "possible")]


@pytest.mark.parametrize("after, flagged", [
    ("print(net(t).is_cuda)", True),  # used as if it had moved, with the model on the device
    ("print(t.is_cuda)", False),  # inspecting the tensor shows the move did not happen
    ("t = t.cpu().numpy()", False),  # brought back and rebound before any use
])
def test_a_dropped_move_is_certain_only_where_the_value_is_used_as_moved(project, capsys, after, flagged):
    write(project, {"demo.py": f"import torch\nnet = torch.nn.Linear(2, 2).to('cuda')\n"
                               f"t = torch.ones(2)\nt.to('cuda')\n{after}\n"})
    assert [f[3] for f in findings(capsys, project, "TDL003")] == (["certain"] if flagged else ["possible"])


@pytest.mark.parametrize("program, confidence", [
    # nothing else goes to the device: the tensor left behind meets only CPU values
    ("t = torch.ones(2)\nt.to('cuda')\nprint(t + 1)\n", "possible"),
    # a DataParallel moves the inputs it is called with to its copies' devices
    ("net = torch.nn.DataParallel(torch.nn.Linear(2, 2), device_ids=[0, 1])\nnet.cuda()\n"
     "t = torch.ones(2)\nt.cuda()\nprint(net(t))\n", "possible"),
    ("net = torch.nn.Linear(2, 2)\nnet.cuda()\nt = torch.ones(2)\nt.cuda()\nprint(net(t))\n", "certain"),
    # an index on the CPU indexes a tensor on any device
    ("net = torch.nn.Linear(2, 2)\nnet.cuda()\ndata = torch.ones(8, 2)\nr = torch.randperm(8)\nr.cuda()\n"
     "print(net(data[r].cuda()))\n", "possible"),
])
def test_a_dropped_move_fails_where_the_rest_is_on_the_device(project, capsys, program, confidence):
    write(project, {"demo.py": "import torch\n" + program})
    assert [f[3] for f in findings(capsys, project, "TDL003")] == [confidence]


def test_a_cpu_tensor_type_brings_the_value_back(project, capsys):
    write(project, {"act.py": """\
        import torch
        def act(net, obs, device):
            action = net(obs.to(device))
            return action.type(torch.FloatTensor).numpy()
        """})
    assert findings(capsys, project, "TDL009") == []


POLICIES = """\
    import torch
    class Policy(torch.nn.Module):
        def act(self, state):
            return self(torch.FloatTensor(state).cuda())
    class Other(torch.nn.Module):
        def act(self, state):
            return self(torch.FloatTensor(state).cuda())
    """


@pytest.mark.parametrize("script, confidence", [
    # a script that places everything with `device` and chooses the CPU: the helper's `.cuda()` is the bug
    ("from common.policies import *\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "policy = Policy().to(device)\nprint(policy.act([0.0]))\n", "certain"),
    # a script that hardcodes `.cuda()` itself never ran on the CPU path it shows
    ("from common.policies import *\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "policy = Policy().to(device)\nh = torch.zeros(1).cuda()\nprint(policy.act([0.0]))\n", "possible"),
])
def test_a_helper_in_a_namespace_directory_runs_where_its_importers_do(project, capsys, script, confidence):
    """`common/` without an `__init__.py`: `from common.policies import *` still reaches it, and
    only the class the script uses counts."""
    write(project, {"common/policies.py": POLICIES, "train.py": "import torch\n" + script})
    found = [f for f in findings(capsys, project, "TDL001") if f[0] == "common/policies.py"]
    assert found == [("common/policies.py", 4, "TDL001", confidence), ("common/policies.py", 7, "TDL001", "possible")]


def test_a_script_running_a_module_written_for_cuda_offers_no_working_cpu_path(project, capsys):
    write(project, {"common/policies.py": POLICIES, "train.py": """\
        import torch
        from common.policies import *
        device = "cuda" if torch.cuda.is_available() else "cpu"
        policy = Policy().to(device)
        hidden = torch.zeros(1, 4).cuda()
        """})
    assert ("train.py", 5, "TDL001", "possible") in findings(capsys, project, "TDL001")


@pytest.mark.parametrize("after, confidence", [
    # the state built by training meets the moved parameters at the next step
    ("model.to(device)\nfor x in data:\n    optimizer.step()\n", "certain"),
    # handed to a function that trains: the same
    ("model.to(device)\ntrain(model, optimizer)\n", "certain"),
    # moved for inference once training is over: the optimizer is only saved
    ("model.to(device)\ntorch.save(optimizer.state_dict(), 'opt.pt')\nprint(model(x))\n", "possible"),
])
def test_an_optimizer_with_state_is_certain_where_it_is_used_after_the_move(project, capsys, after, confidence):
    write(project, {"nb.py": "import torch\nmodel = Net()\noptimizer = torch.optim.Adam(model.parameters())\n"
                             "optimizer.load_state_dict(torch.load('opt.pt', map_location='cpu'))\n" + after})
    assert findings(capsys, project, "TDL005") == [("nb.py", 3, "TDL005", confidence)]


@pytest.mark.parametrize("call, confidence", [
    # the training function steps the optimizer before the move: its state stays behind
    ("train(model, optimizer)\nmodel.to(device)\ntrain(model, optimizer)\n", "certain"),
    # the argument moves the model before the training function runs: no state before the move
    ("train(model=model.to(device), optimizer=optimizer)\n", "possible"),
    ("train(model.cuda(), optimizer)\n", "possible"),
])
def test_a_move_in_the_arguments_of_the_training_call_comes_first(project, capsys, call, confidence):
    write(project, {"nb.py": "import torch\ndef train(model, optimizer):\n    optimizer.step()\n"
                             "model = Net()\noptimizer = torch.optim.AdamW(model.parameters())\n" + call})
    assert findings(capsys, project, "TDL005") == [("nb.py", 5, "TDL005", confidence)]


def test_a_parameter_cast_in_place_is_no_plain_attribute(project, capsys):
    """`nn.Parameter(w).float()` returns the Parameter itself when the dtype does not change:
    `named_parameters()` lists it and `model.to()` moves it."""
    write(project, {"llama.py": """\
        import torch
        from torch import nn
        class RMSNorm(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(dim)).float()
            def forward(self, x):
                return x * self.weight
        net = RMSNorm(4).to("cuda")
        """})
    assert findings(capsys, project, "TDL006") == []


TRAINER_ON_A_DEVICE = """\
    import torch
    import torch.nn as nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(2, 2).to(device)
    torch.save(model.state_dict(), "model.pth")
    """


@pytest.mark.parametrize("fetch", [
    # a download only when the file is missing: written by the publisher, not by this code
    """\
    if not os.path.exists(path):
        response = requests.get("https://example.org/" + path, timeout=60)
        with open(path, "wb") as f:
            f.write(response.content)
    """,
    "urllib.request.urlretrieve('https://example.org/gpt2.pth', path)\n",
    "path = hf_hub_download(repo_id='someone/gpt2', filename='gpt2.pth')\n",
])
def test_a_load_of_a_file_fetched_from_elsewhere_is_possible(project, capsys, fetch):
    # the project's trainer saves from a device, but this file is the publisher's: nothing
    # shows which device its tensors were saved from
    write(project, {"train.py": TRAINER_ON_A_DEVICE, "use.py": textwrap.dedent("""\
        import os
        import urllib.request
        import requests
        import torch
        import torch.nn as nn
        from huggingface_hub import hf_hub_download
        path = "gpt2.pth"
        """) + textwrap.dedent(fetch) + textwrap.dedent("""\
        model = nn.Linear(2, 2)
        model.load_state_dict(torch.load(path))
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)
        """)})
    assert findings(capsys, project, "TDL004") == [("use.py", 9 + fetch.count("\n"), "TDL004", "possible")]


def test_a_load_of_the_trainers_file_stays_certain(project, capsys):
    write(project, {"train.py": TRAINER_ON_A_DEVICE, "use.py": """\
        import torch
        import torch.nn as nn
        model = nn.Linear(2, 2)
        model.load_state_dict(torch.load("model.pth"))
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)
        """})
    assert findings(capsys, project, "TDL004") == [("use.py", 4, "TDL004", "certain")]


def test_a_dropped_move_of_module_state_may_do_nothing(project, capsys):
    # a slice of a registered buffer moves with the module: on a GPU it is there already;
    # a slice of a plain attribute stays on the CPU, and the dropped move is the bug
    write(project, {"embed.py": """\
        import torch
        import torch.nn as nn
        class Encoder(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.register_buffer("pe", torch.zeros(1, 80, d))
                self.table = torch.zeros(80, d)
            def forward(self, x):
                pe = self.pe[:, :x.size(1)]
                if x.is_cuda:
                    pe.cuda()
                table = self.table[:x.size(1)]
                table.cuda()
                return x + pe + table
        """})
    assert findings(capsys, project, "TDL003") == [("embed.py", 11, "TDL003", "possible"),
                                                    ("embed.py", 13, "TDL003", "certain")]


@pytest.mark.parametrize("device, expected", [
    ("'cpu'", []),  # a script that hardcodes the CPU places nothing on an accelerator
    ("torch.device('cpu')", []),
    ("'cuda'", [("pg.py", 7, "TDL009", "certain")]),
])
def test_numpy_of_a_value_moved_to_a_device_named_by_a_variable(project, capsys, device, expected):
    write(project, {"pg.py": f"""\
        import torch
        import torch.nn as nn
        device = {device}
        net = nn.Linear(4, 2).to(device)
        obs = torch.tensor([1.0, 2, 3, 4]).to(device)
        act = net(obs)
        print(act.detach().numpy())
        """})
    assert findings(capsys, project, "TDL009") == expected


@pytest.mark.parametrize("built, expected", [
    # every construction pins CUDA: the device parameter is a CPU path nothing takes
    ("layer = Cell(4, device='cuda')\n", [("cells.py", 7, "TDL002", "possible"),
                                           ("cells.py", 10, "TDL002", "possible")]),
    # a construction that passes the caller's device: the class runs where it is built
    ("layer = Cell(4, device=torch.device('cpu'))\n", [("cells.py", 7, "TDL002", "certain")]),
])
def test_a_device_parameter_counts_only_where_a_caller_may_pass_the_cpu(project, capsys, built, expected):
    write(project, {"cells.py": textwrap.dedent("""\
        import torch
        import torch.nn as nn
        class Cell(nn.Module):
            def __init__(self, n, device):
                super().__init__()
                self.device = device
                self.mask = torch.ones(n, device="cuda")
            def forward(self, x):
                return x.to(self.device) * self.mask
        """) + built})
    assert findings(capsys, project, "TDL002") == expected


MOVED_BOX_CODER = """\
    from coder import BoxCoder
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    coder = BoxCoder().to(device)
    """


@pytest.mark.parametrize("use, confidence", [
    ("deltas * self.std[0] + self.std[1]", "possible"),  # elements by integer index: perhaps 0-dim
    ("deltas * self.std", "certain"),
    ("deltas * self.std[:2]", "certain"),  # a slice is still a tensor on the CPU
])
def test_an_element_by_integer_index_may_be_zero_dim(project, capsys, use, confidence):
    write(project, {"run.py": MOVED_BOX_CODER, "coder.py": f"""\
        import torch
        import torch.nn as nn
        class BoxCoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.std = torch.tensor([0.1, 0.1, 0.2, 0.2])
            def forward(self, deltas):
                return {use}
        """})
    assert findings(capsys, project, "TDL006") == [("coder.py", 6, "TDL006", confidence)]


@pytest.mark.parametrize("data, confidence", [
    ("self.width ** 0.5", "possible"),  # perhaps one number: a 0-dim tensor mixes with any device
    ("scale", "possible"),
    ("[0.1, 0.1, 0.2, 0.2]", "certain"),  # four elements, on the CPU
])
def test_a_tensor_built_in_forward_from_data_that_may_be_one_number(project, capsys, data, confidence):
    write(project, {"run.py": MOVED_BOX_CODER, "coder.py": f"""\
        import torch
        import torch.nn as nn
        class BoxCoder(nn.Module):
            def __init__(self, width=16):
                super().__init__()
                self.width = width
                self.proj = nn.Linear(4, 4)
            def forward(self, deltas, scale=2.0):
                return self.proj(deltas) * torch.tensor({data}, dtype=deltas.dtype)
        """})
    assert findings(capsys, project, "TDL008") == [("coder.py", 9, "TDL008", confidence)]


def test_a_class_two_files_define_is_moved_where_its_own_copy_is(project, capsys):
    coder = """\
        import torch
        import torch.nn as nn
        class Coder(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.std = torch.tensor([0.1, 0.1, 0.2, 0.2])
            def forward(self, x):
                return self.proj(x) * self.std
        """
    mover = 'import torch\nfrom coder import Coder\nmodel = Coder().to("cuda" if torch.cuda.is_available() else "cpu")\n'
    write(project, {"a/coder.py": coder, "a/run.py": mover,  # a copy whose script moves its Coder
                    "b/coder.py": coder, "b/run.py": "from coder import Coder\nmodel = Coder()\n"})
    assert findings(capsys, project, "TDL006") == [("a/coder.py", 7, "TDL006", "certain"),
                                                   ("b/coder.py", 7, "TDL006", "possible")]


def test_moving_torchs_own_lstm_moves_no_project_class_of_that_name(project, capsys):
    write(project, {"lstm.py": """\
        import torch
        class LSTM(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = torch.nn.Linear(n, n)
            def forward(self, x):
                h = torch.zeros(x.shape[0], 4)
                return torch.cat([self.w(x), h], 1)
        print(LSTM(4)(torch.randn(2, 4)))
        """, "speech.py": """\
        import torch
        from torch import nn
        rnn = torch.nn.LSTM(4, 4).to('cuda')
        class Speech(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 4)
        model = Speech().to('cuda')
        """})
    assert findings(capsys, project, "TDL008") == [("lstm.py", 7, "TDL008", "possible")]


@pytest.mark.parametrize("wrap, flagged", [
    ("DDP(model, device_ids=[gpu])", []),  # device ids: the wrap refuses a CPU module anyway
    ("DDP(model, device_ids=None)", [("train.py", 6, "TDL001", "certain")]),
    ("DDP(model)", [("train.py", 6, "TDL001", "certain")]),
])
def test_a_ddp_wrap_with_device_ids_needs_cuda(project, capsys, wrap, flagged):
    write(project, {"train.py": f"""\
        import argparse
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(args):
            gpu = torch.device(args.device)
            model = torch.nn.Linear(2, 2).cuda(gpu)
            model = {wrap}
            return model
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda")
        main(parser.parse_args())
        """})
    assert findings(capsys, project, "TDL001") == flagged


@pytest.mark.parametrize("init, flagged", [
    ("self.stream = torch.cuda.Stream()", []),  # building one needs CUDA: the loop never runs without it
    ("self.stream = None", [("train.py", 7, "TDL001", "certain")]),
])
def test_building_an_object_whose_init_needs_cuda_needs_cuda(project, capsys, init, flagged):
    write(project, {"prefetch.py": f"""\
        import torch
        class Prefetcher:
            def __init__(self, loader):
                self.loader = iter(loader)
                {init}
        """, "train.py": """\
        import torch
        from prefetch import Prefetcher
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def train(model, loader):
            batches = Prefetcher(loader)
            for x in batches.loader:
                model(x.cuda())
        model = torch.nn.Linear(2, 2).to(device)
        train(model, [torch.randn(2, 2)])
        """})
    assert findings(capsys, project, "TDL001") == flagged


@pytest.mark.parametrize("weight, confidence", [
    ("torch.tensor(pos_weight)", "possible"),  # one number: a 0-dim tensor mixes with any device
    ("torch.tensor([pos_weight])", "certain"),
])
def test_a_loss_weight_from_one_number_mixes_with_any_device(project, capsys, monkeypatch, weight, confidence):
    monkeypatch.setattr(Rule.registry["TDL010"], "preview", False)
    write(project, {"train.py": f"""\
        import torch
        from torch import nn
        pos_weight = 3.0
        loss_fn = nn.BCEWithLogitsLoss(pos_weight={weight})
        model = nn.Linear(4, 1).cuda()
        print(loss_fn(model(torch.randn(2, 4).cuda()), torch.ones(2, 1).cuda()))
        """})
    assert findings(capsys, project, "TDL010") == [("train.py", 4, "TDL010", confidence)]


def test_a_list_registered_element_by_element_in_a_loop_is_registered(project, capsys, monkeypatch):
    monkeypatch.setattr(Rule.registry["TDL007"], "preview", False)
    write(project, {"res.py": """\
        import torch.nn as nn
        class Res(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.convs = [nn.Conv2d(8, 8, 3) for _ in range(n)]
                self.heads = [nn.Linear(8, 2) for _ in range(n)]
                for i, conv in enumerate(self.convs):
                    self.add_module("conv{}".format(i + 1), conv)
        """})
    assert findings(capsys, project, "TDL007") == [("res.py", 6, "TDL007", "certain")]


@pytest.mark.parametrize("epoch, confidence", [
    ("batches = Prefetcher(loader)", "possible"),  # every epoch needs CUDA: the fallback never runs it
    ("batches = iter(loader)", "certain"),
])
def test_an_importer_whose_methods_need_cuda_shows_no_cpu_path(project, capsys, epoch, confidence):
    write(project, {"prefetch.py": """\
        import torch
        class Prefetcher:
            def __init__(self, loader):
                self.stream = torch.cuda.Stream()
        """, "loss.py": """\
        import torch
        class Criterion:
            def __call__(self, a, b):
                return (a - b.to('cuda')).abs().mean()
        """, "trainer.py": f"""\
        import torch
        from loss import Criterion
        from prefetch import Prefetcher
        class Trainer:
            def __init__(self, model):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                self.model = model.to(self.device)
                self.criterion = Criterion()
            def epoch(self, loader):
                {epoch}
                for x, y in batches:
                    self.criterion(self.model(x.to(self.device)), y)
        """})
    assert findings(capsys, project, "TDL002") == [("loss.py", 4, "TDL002", confidence)]


def test_a_helper_a_star_import_brings_decides_where_its_result_is(project, capsys):
    # `helpers` is out of sight: `to_mask` may build its result on the CPU (a mask of zeros)
    write(project, {"evaluate.py": """\
        import torch
        from helpers import *
        class Trainer:
            def __init__(self, generator):
                self._gen = generator.cuda()
            def matrix(self, loader):
                for data in loader:
                    data = data.cuda()
                    print(to_mask(self._gen(data)).numpy())
        """})
    assert findings(capsys, project, "TDL009") == [("evaluate.py", 9, "TDL009", "possible")]


@pytest.mark.parametrize("back, confidence", [
    ("dec.cpu()", "possible"),  # the decoder is moved back to the CPU before the plots
    ("pass", "certain"),
])
def test_a_module_moved_back_to_the_cpu_places_nothing_certain(project, capsys, back, confidence):
    write(project, {"vae.py": f"""\
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def main(loader):
            dec = torch.nn.Linear(2, 4).to(device)
            for z in loader:
                dec(z.to(device)).sum().backward()
            {back}
            for z in loader:
                print(dec(z).detach().numpy())
        """})
    assert findings(capsys, project, "TDL009") == [("vae.py", 9, "TDL009", confidence)]


@pytest.mark.parametrize("flag, confidence", [
    ("False", "possible"),  # the meeting sits in a branch the file's constant rules out
    ("True", "certain"),
])
def test_a_meeting_under_a_constant_flag(project, capsys, flag, confidence):
    # a star import before the flag cannot rebind it
    write(project, {"run.py": MOVED_BOX_CODER, "helpers.py": "", "coder.py": f"""\
        from helpers import *
        import torch
        import torch.nn as nn
        EXPORT = {flag}
        class BoxCoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.grid = torch.zeros(4)
            def forward(self, deltas):
                if EXPORT:
                    return deltas + self.grid
                return deltas
        """})
    assert findings(capsys, project, "TDL006") == [("coder.py", 8, "TDL006", confidence)]


@pytest.mark.parametrize("show, confidence", [
    ("False", "possible"),  # the function's own flag rules the branch out: nothing there runs
    ("True", "certain"),
    ("len(loader) > 1", "certain"),  # a test the analysis cannot read: the branch may run
])
def test_a_branch_under_a_flag_its_function_sets_once(project, capsys, show, confidence):
    write(project, {"evaluate.py": f"""\
        import torch
        def evaluate(model, loader, device):
            for x in loader:
                out = model(x.to(device))
                SHOW = {show}
                if SHOW:
                    print(out.numpy())
        """})
    assert findings(capsys, project, "TDL009") == [("evaluate.py", 7, "TDL009", confidence)]


@pytest.mark.parametrize("index, confidence", [
    ("indices.cpu()", "possible"),  # CPU indices into a CPU tensor: both where they are
    ("indices", "certain"),  # indices on the inputs' device
])
def test_an_attribute_indexed_by_indices_brought_to_the_cpu(project, capsys, index, confidence):
    write(project, {"bins.py": f"""\
        import torch
        import torch.nn as nn
        class Bins(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 1)
                self.bins = torch.linspace(0.1, 10.0, 8)
            def forward(self, x):
                indices = self.conv(x).argmin(1)
                return 1 / self.bins[{index}]
        model = Bins().to("cuda" if torch.cuda.is_available() else "cpu")
        """})
    assert findings(capsys, project, "TDL006") == [("bins.py", 7, "TDL006", confidence)]


CHOOSES = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nw = torch.zeros(1).to(device)\n'


@pytest.mark.parametrize("body, confidence", [
    # the fallback after an out-of-memory error: it runs only once the try failed
    ("""\
    try:
        y = (x @ x).to(device)
    except RuntimeError:
        y = (x.cpu() @ x.cpu()).cuda()
    """, "possible"),
    # the device the code is given is used on the other branch
    ("""\
    if args:
        y = x.to(args.device)
    else:
        y = x.cuda()
    """, "possible"),
    # the same line on the path the CPU choice takes
    ("""\
    y = x.cuda()
    """, "certain"),
])
def test_a_hardcoded_line_off_the_cpu_path_is_possible(project, capsys, body, confidence):
    write(project, {"run.py": "import torch\n" + CHOOSES + "args = None\nx = torch.ones(2, 2)\n"
                              + textwrap.dedent(body)})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("common, imports, confidence", [
    # a device constant of the project, imported through a module that re-exports it with `*`
    ('cpu_device = "cpu"\n', "from helpers import *\n", []),
    ('cpu_device = "cpu"\n', "from common import cpu_device\n", []),
    # under another name, then bound to the file's own constant: the same value
    ('cpu_device = "cpu"\n', "from common import cpu_device as CPU\ncpu_device = CPU\n", []),
    # through a module whose names no reading lists (`globals()`): its own `*` import still brings it
    ('cpu_device = "cpu"\n', "from helpers import *\nfrom registry import *\n", []),
    # rebound in the module that defines it: no constant
    ('cpu_device = "cpu"\ndef use_gpu():\n    global cpu_device\n    cpu_device = "cuda"\n',
     "from helpers import *\n", ["certain"]),
    # bound again by the importing file
    ('cpu_device = "cpu"\n', "from helpers import *\nfor cpu_device in ('cpu',):\n    pass\n", ["certain"]),
])
def test_a_device_compared_with_a_constant_another_module_binds(project, capsys, common, imports, confidence):
    write(project, {
        "common.py": common,
        "helpers.py": "import os\nfrom common import *\n",
        "registry.py": "from common import *\nglobals()['extra'] = 1\n",
        "train.py": "import argparse\nimport torch\n" + imports + textwrap.dedent("""\
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cpu")
            args = parser.parse_args()
            model = torch.nn.Linear(2, 2)
            if args.device != cpu_device:
                model = model.cuda()
            """)})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == confidence


# A script with a CPU option whose last line hardcodes CUDA: TDL001 is certain where it can run.
NO_CUDA_SCRIPT = textwrap.dedent("""\
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(2, 2)
    if not args.no_cuda:
        model.cuda()
    x = torch.ones(2).cuda()
    """)


def test_a_folder_beside_the_script_is_what_it_imports_not_a_package_of_that_name_elsewhere(project, capsys):
    write(project, {
        "data/__init__.py": "def loader():\n    return None\n",
        "tools/data/readers.py": "class Reader:\n    pass\n",
        "tools/run.py": "import argparse\nimport torch\nfrom data.readers import Reader\n" + NO_CUDA_SCRIPT})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


@pytest.mark.parametrize("loss, confidence", [
    ("class Focal(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "    def forward(self, x):\n        return x.sum()\n", "possible"),  # no tensors: .cuda() moves nothing
    ("class Focal(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.alpha = torch.ones(3)\n    def forward(self, x):\n        return x.sum() * self.alpha\n",
     "certain"),
])
def test_cuda_of_a_module_that_holds_no_tensors(project, capsys, loss, confidence):
    write(project, {"run.py": "import torch\nimport torch.nn as nn\n" + CHOOSES + loss + "criterion = Focal().cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("option, confidence", [
    ("p.add_argument('--device', type=int, default=0, nargs='+', help='the indexes of GPUs')", "possible"),
    ("p.add_argument('--device', default='cuda', help='cuda or cpu')", "certain"),
])
def test_a_device_option_of_gpu_indices_offers_no_cpu_path(project, capsys, option, confidence):
    write(project, {"main.py": "import argparse\nimport torch\np = argparse.ArgumentParser()\n" + option + """
args = p.parse_args()
print(args.device)
x = torch.ones(2).cuda()
"""})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


SCRIPT = """\
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

def mask_of(model):
    return torch.ones(3).cuda()

def copied_helper(x):
    return x.cuda()

class Pruner:
    def __init__(self):
        self.mask = mask_of(None)

    def prune(self, x):
        return x * self.weights()

    def weights(self):
        return torch.ones(3).cuda()

def train(model):
    if args.cuda:
        model.cuda()
    Pruner().prune(torch.ones(3))

for epoch in range(3):
    train(None)
"""


def test_a_cpu_choice_reaches_the_code_its_run_calls(project, capsys):
    """The script offers --no-cuda and its top level calls `train`, which builds a `Pruner`
    (all its methods run) and calls `mask_of`: those lines fail on the CPU path. The helper
    nothing calls is not shown to run there."""
    write(project, {"prune.py": SCRIPT})
    assert findings(capsys, project, "TDL001") == [
        ("prune.py", 9, "TDL001", "certain"), ("prune.py", 12, "TDL001", "possible"),
        ("prune.py", 22, "TDL001", "certain")]
    cli.main(["--isolated", "--no-cache", "--preview", "--show-evidence", "--select", "TDL001", str(project / "prune.py")])
    out = capsys.readouterr().out
    assert "`train` runs there: the top level uses it" in out and "`mask_of` runs there" in out
    assert "nothing shows this line runs in that run" in out


@pytest.mark.parametrize("chooser, confidence", [
    # a helper returns the choice: its callers run in that run, and what they call
    ("def pick():\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
     "def main():\n    device = pick()\n    embed(torch.ones(2))\nmain()\n", "certain"),
    # a module-level device read by the function with the hardcoded line
    ("device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
     "def other(x):\n    return x.to(device)\n", "certain"),
    # the choice is made in a function nothing calls, and embed is called from nowhere it reaches
    ("def pick():\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n", "possible"),
])
def test_where_a_cpu_choice_is_made_decides_what_it_reaches(project, capsys, chooser, confidence):
    reads = "    y = x.to(device)\n" if "other" in chooser else ""
    write(project, {"run.py": "import torch\ndef embed(x):\n" + reads + "    return x.cuda()\n" + chooser})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("engine, confidence", [
    # the engine cannot be imported without apex: the script needs CUDA whatever it chooses
    ("try:\n    from apex.parallel import DistributedDataParallel\nexcept ImportError:\n"
     "    raise ImportError('Please install apex')\n", "possible"),
    # apex is optional there: the CPU path runs
    ("try:\n    from apex.parallel import DistributedDataParallel\nexcept ImportError:\n"
     "    DistributedDataParallel = None\n", "certain"),
    # Mamba's selective scan is a CUDA kernel: no CPU build
    ("from mamba_ssm import Mamba\n", "possible"),
    ("import cupy\n", "possible"),
    ("from diff_surfel_rasterization import GaussianRasterizer\n", "possible"),
    ("from gsplat import rasterization\n", "possible"),  # Gaussian splatting kernels: CUDA only
    ("from nvidia.dali.pipeline import Pipeline\n", "possible"),  # batches decoded on the GPU
])
@pytest.mark.parametrize("through", [False, True])
def test_a_project_module_that_requires_a_gpu_library(project, capsys, engine, confidence, through):
    # the engine imports the library, or a module of its own that does: it cannot be imported without it
    engine_files = ({"kernels.py": engine, "engine.py": "import kernels\nclass Engine:\n    pass\n"} if through
                    else {"engine.py": engine + "class Engine:\n    pass\n"})
    write(project, {**engine_files, "evaluate.py": """\
        import torch
        from engine import Engine
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        engine = Engine()
        images = torch.ones(2).to(device)
        labels = torch.ones(2).cuda()
        """})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


TRAINER = """\
import torch
class Trainer:
    def __init__(self, model, use_cuda):
        self.model = model
        {before}
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def load(self, path):
        self.optimizer.load_state_dict(torch.load(path, map_location="cpu"))

    def save(self, path):
        {save}
        self.model.cuda()
"""


RESUME = """\
import torch
def main(path, device):
    model = torch.nn.Linear(2, 2)
    {before}
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu"))
    {placed}
    model.to(device)
    optimizer.step()
"""


SAVE = "torch.save(self.model.state_dict(), 'm.pt')"


@pytest.mark.parametrize("program, confidence", [
    # a trainer whose model moves only after the state was loaded onto its CPU parameters
    (TRAINER.format(before="pass", save=SAVE), "certain"),
    # the same move came before the optimizer was built: the later one moves nothing
    (TRAINER.format(before="self.model.cuda()", save=SAVE), "possible"),
    # a round trip: to the CPU for the save, and back where the state is
    (TRAINER.format(before="pass", save="self.model.cpu()\n        " + SAVE), "possible"),
    # a resume: the state loaded onto CPU parameters stays there
    (RESUME.format(before="pass", placed="pass"), "certain"),
    # the script moves the loaded state itself
    (RESUME.format(before="pass", placed="for state in optimizer.state.values():\n        for k, v in state.items():\n"
                                         "            if torch.is_tensor(v):\n                state[k] = v.to(device)"),
     "possible"),
    # the model was already where the later move puts it
    (RESUME.format(before="model = torch.nn.DataParallel(model).to(device)", placed="pass"), "possible"),
    (RESUME.format(before="model.to('cpu')", placed="pass"), "certain"),  # a different move first: it still moves
])
def test_a_move_that_leaves_the_state_where_the_parameters_are_shows_no_failure(project, capsys, program, confidence):
    write(project, {"train.py": program})
    assert [f[3] for f in findings(capsys, project, "TDL005")] == [confidence]


@pytest.mark.parametrize("imports, confidence", [
    # a module the project's package no longer has: the script fails when imported
    ("from data.kaldi_dataset import KaldiDataset\n", "possible"),
    # a project module that does not parse (a merge left its conflict markers in)
    ("from data.broken import Reader\n", "possible"),
    # a subpackage without an __init__.py is a namespace package: it imports
    ("from data.extra.readers import Reader\n", "certain"),
    # an optional import the script guards is not required
    ("try:\n    from data.kaldi_dataset import KaldiDataset\nexcept ImportError:\n    KaldiDataset = None\n",
     "certain"),
    # what the package's __init__ defines imports
    ("from data.loader import Loader\n", "certain"),
    # a name the project's module does not define: the import raises
    ("from data.loader import Loader, Reader\n", "possible"),
    ("from helpers import sharpen\n", "possible"),
    # names bound under a loop, by unpacking or by `global` in a function are there
    ("from helpers import smooth, low, high, level\n", "certain"),
    # a module with a `__getattr__` may answer any name
    ("from lazy import anything\n", "certain"),
    # a folder without an __init__.py may be part of an installed package of that name
    ("from tools.writers import Writer\n", "certain"),
    # a package whose folder holds compiled code's sources: the build adds the module
    ("from ops import nms_cuda\n", "certain"),
    # the standard library's module, not the project's file of that name
    ("from typing import Optional\n", "certain"),
])
def test_a_script_that_fails_when_imported_runs_no_line(project, capsys, imports, confidence):
    write(project, {
        "data/__init__.py": "def loader():\n    return None\n",
        "data/loader.py": "class Loader:\n    pass\n",
        "data/broken.py": "<<<<<<< HEAD\nclass Reader:\n    pass\n=======\n>>>>>>> branch\n",
        "data/extra/readers.py": "class Reader:\n    pass\n",
        "helpers.py": "for smooth in [abs]:\n    pass\nlow, high = 0, 1\ndef configure():\n    global level\n    level = 2\n",
        "lazy.py": "def __getattr__(name):\n    return name\n",
        "tools/readers.py": "class Reader:\n    pass\n",
        "ops/__init__.py": "",
        "ops/nms_kernel.cu": "// CUDA source\n",
        "typing.py": "Alias = int\n",
        "train.py": "import argparse\nimport torch\n" + imports + NO_CUDA_SCRIPT})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("loss, confidence", [
    ("nn.CrossEntropyLoss()", "possible"),  # no tensor in it: .cuda() moves nothing
    ("nn.CrossEntropyLoss(reduction='sum')", "possible"),
    ("nn.CrossEntropyLoss(weight=torch.ones(3))", "certain"),  # the class weight moves
    ("nn.CrossEntropyLoss(torch.ones(3))", "certain"),
])
def test_cuda_of_a_torch_loss_without_tensors(project, capsys, loss, confidence):
    write(project, {"run.py": "import torch\nimport torch.nn as nn\n" + CHOOSES + f"criterion = {loss}.cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("test", [
    "trainer_config.get('use_cuda')",  # a setting read by its name
    "getattr(trainer_config, 'use_gpu', False)",
    "torch.distributed.get_backend() == torch.distributed.Backend.NCCL and not x.is_cuda",  # NCCL needs GPUs
    "backend == 'nccl'",
    "use_cuda and not x.is_cuda",  # both hold: the machine has one, x is elsewhere
])
def test_guards_that_say_the_machine_has_a_gpu(project, capsys, test):
    write(project, {"run.py": "import torch\n" + CHOOSES + "def step(x, trainer_config, backend, use_cuda):\n"
                              f"    if {test}:\n        x = x.cuda()\n    return x\nstep(w, {{}}, 'gloo', False)\n"})
    assert findings(capsys, project, "TDL001") == []


def test_an_other_backend_than_nccl_says_nothing_of_the_machine(project, capsys):
    write(project, {"run.py": "import torch\n" + CHOOSES + "def step(x, backend):\n"
                              "    if backend != 'nccl':\n        x = x.cuda()\n    return x\nstep(w, 'gloo')\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


@pytest.mark.parametrize("wrap, confidence", [
    # a literal list of GPU numbers with a second GPU: a trainer for a multi-GPU machine
    ("model = nn.DataParallel(model, device_ids=[0, 1, 2, 3])", "possible"),
    ("model = torch.nn.DataParallel(model, [0, 1])", "possible"),
    ("model = nn.DataParallel(model, device_ids=GPUS)", "possible"),  # GPUS = [0, 1] at the top
    ("ids = [0, 1, 2, 3]\n    model = nn.DataParallel(model, device_ids=ids)", "possible"),  # bound in the function
    ("ids = [0]\n    model = nn.DataParallel(model, device_ids=ids)", "certain"),
    # bound twice: which list reaches the wrapper is not known
    ("ids = [0, 1]\n    ids = [0]\n    model = nn.DataParallel(model, device_ids=ids)", "certain"),
    # one GPU, or the GPUs the machine has: nothing says the machine has several
    ("model = nn.DataParallel(model, device_ids=[0])", "certain"),
    ("model = nn.DataParallel(model)", "certain"),
])
def test_a_trainer_spread_over_named_gpus_is_multi_gpu_code(project, capsys, wrap, confidence):
    write(project, {"train.py": "import torch\nimport torch.nn as nn\nGPUS = [0, 1]\n" + CHOOSES
                                + f"def main():\n    model = nn.Linear(2, 2)\n    model.cuda()\n    {wrap}\n"
                                  "    return model(w)\nmain()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("use, confidence", [
    ("", "possible"),  # `gpu` is never read: building a torch.device needs no CUDA
    ("y = w.to(gpu)\n", "certain"),
])
def test_a_device_bound_to_a_name_nothing_reads_places_nothing(project, capsys, use, confidence):
    write(project, {"run.py": "import torch\n" + CHOOSES + "gpu = torch.device('cuda')\n" + use})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


@pytest.mark.parametrize("use, confidence", [
    # read only where the caller asks for the GPU: nothing is placed there without CUDA
    ("def flows(x, use_gpu=False):\n    if use_gpu:\n        x = x.to(gpu)\n    return x\n", "possible"),
    ("def flows(x, use_gpu=False):\n    if use_gpu:\n        x = x.to(gpu)\n    return x.to(gpu)\n", "certain"),
])
def test_a_device_read_only_under_a_gpu_test_places_nothing_without_cuda(project, capsys, use, confidence):
    write(project, {"run.py": "import torch\n" + CHOOSES + "gpu = torch.device('cuda')\n" + use})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


def test_a_device_another_module_imports_is_read_there(project, capsys):
    write(project, {"settings.py": "import torch\n" + CHOOSES + "gpu = torch.device('cuda')\n",
                    "train.py": "import torch\nfrom settings import gpu\nx = torch.ones(2).to(gpu)\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == ["certain"]


@pytest.mark.parametrize("method, confidence", [
    # a method follows its input's device: that input may be what the class moved itself
    ("def loss(self, depth):\n        return torch.zeros(1, device=depth.device)\n", "possible"),
    # a method takes the device: the object follows its caller's choice
    ("def to_device(self, device):\n        self.device = device\n", "certain"),
    # ... or reads the device the user chose off the options it is handed
    ("def __init__(self, args):\n        self.device = torch.device(args.device)\n", "certain"),
    # a config object's other fields choose nothing
    ("def __init__(self, args):\n        self.lr = args.lr\n", "possible"),
])
def test_a_class_is_device_generic_only_where_it_takes_the_device(project, capsys, method, confidence):
    write(project, {"trainer.py": "import torch\nclass Trainer:\n    " + method
                                  + "    def step(self, depth):\n        return depth.cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


def test_a_script_whose_model_calls_cuda_kernels_needs_cuda(project, capsys):
    """train.py -> models/net.py -> libs/ops/utils.py (no __init__.py in libs/ops) -> the
    extension setup.py builds: the script's CPU choice is no path its model can run."""
    write(project, {
        "libs/__init__.py": "",
        "libs/ops/setup.py": "from torch.utils.cpp_extension import CUDAExtension\n"
                             "ext = CUDAExtension(name='ops._ext', sources=['ops.cu'])\n",
        "libs/ops/utils.py": "try:\n    import ops._ext as _ext\nexcept ImportError:\n    raise\n"
                             "def sample(x):\n    return _ext.sample(x)\n",
        "models/__init__.py": "",
        "models/net.py": "import torch\nfrom libs.ops.utils import sample\n"
                         "class Net(torch.nn.Module):\n    def forward(self, x):\n        return sample(x)\n",
        "train.py": "import torch\nfrom models.net import Net\n" + CHOOSES + "x = torch.ones(2).cuda()\n",
    })
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["possible"]


ADVERSARY = """\
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
class Adv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1, 1)
    def load_weights(self, path):
        ckpt = torch.load(path)
        self.fc.load_state_dict(ckpt["fc"])
class Model:
    def __init__(self):
        self.adv = Adv().to(device)
        {call}
    def save(self):
        torch.save({{"fc": self.adv.fc.state_dict()}}, "adv.pth")
m = Model()
m.save()
"""


@pytest.mark.parametrize("loading, confidence", [
    # built, but nothing calls its `load_weights` (another file's class has one): only what runs
    # on its own (`__init__`, `forward`, a trainer's hooks) runs on the object
    ("pass", "possible"),
    ("self.adv.load_weights('adv.pth')", "certain"),
    ("Adv().load_weights('adv.pth')", "certain"),  # on the object the call builds
])
def test_building_a_class_runs_only_the_methods_something_calls(project, capsys, loading, confidence):
    write(project, {"train.py": ADVERSARY.format(call=loading),
                    "other.py": "class Other:\n    def load_weights(self, path):\n        return path\n"
                                "Other().load_weights('x')\n"})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == [confidence]


@pytest.mark.parametrize("setup, confidence", [
    # a Cython wrapper of a kernel nvcc compiles (py-faster-rcnn's `gpu_nms`)
    ("from distutils.extension import Extension\n"
     "ext = Extension('gpu_nms', ['nms_kernel.cu', 'gpu_nms.pyx'], libraries=['cudart'])\n", "possible"),
    # a C extension without CUDA sources runs anywhere
    ("from distutils.extension import Extension\next = Extension('cpu_nms', ['cpu_nms.pyx'])\n", "certain"),
])
def test_a_script_importing_a_compiled_cuda_kernel_needs_cuda(project, capsys, setup, confidence):
    """train.py -> functions.py -> nms/nms.py -> the extension nms/setup.py builds: the CPU
    choice of train.py is no path it can run, nor one the loader it imports is used on."""
    name = "gpu_nms" if "gpu_nms" in setup else "cpu_nms"
    write(project, {
        "nms/__init__.py": "",
        "nms/setup.py": setup,
        "nms/nms.py": f"from .{name} import {name}\ndef nms(dets):\n    return {name}(dets)\n",
        "functions.py": "import torch\nfrom nms.nms import nms\ndef evaluate(model, x):\n    return nms(model(x))\n",
        "utils/__init__.py": "",
        "utils/checkpoints.py": "import torch\ndef load(path):\n    return torch.load(path)\n",
        "train.py": "import torch\nfrom functions import evaluate\nfrom utils.checkpoints import load\n" + CHOOSES
                    + "x = torch.ones(2).cuda()\nstate = load('best.pth')\n"
                    + "torch.save(torch.nn.Linear(1, 1).to(device).state_dict(), 'best.pth')\n",
    })
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]
    # nor is train.py's CPU choice a CPU path of the loader it uses
    index = project_index.build([str(project / "train.py")])
    cpu_path, _ = index.users_cpu_path(str(project / "utils/checkpoints.py"))
    assert (cpu_path is not None) == (confidence == "certain")


@pytest.mark.parametrize("between, confidence", [
    ("", "possible"),  # the later definition replaces the first before anything runs it
    ("first = evaluate(w)\n", "certain"),  # the first one runs before it is replaced
])
def test_a_function_a_later_definition_replaces_never_runs(project, capsys, between, confidence):
    write(project, {"utils.py": "import torch\n" + CHOOSES
                                + "def evaluate(x):\n    return x.to(device='cuda')\n" + between
                                + "def evaluate(x):\n    return x.to(device)\n"
                                + "print(evaluate(w))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


INFERENCE = """\
import sys
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
class Trainer:
    def train(self, model):
        torch.save(model.to(device).state_dict(), "best_model.pt")
class Inference:
    def __init__(self, model, path):
        model.load_state_dict(torch.load(path))
        self.model = model.to(device)
def main():
    model = torch.nn.Linear(2, 2)
{call}
    Trainer().train(model)
if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("call, confidence", [
    ("    Inference(model, sys.argv[1])", "certain"),
    ("    # Inference(model, sys.argv[1])", "possible"),  # the only call is commented out: it never runs
    ('    """\n    Inference(model, sys.argv[1])\n    """', "possible"),  # or left in a string
])
def test_a_class_nothing_in_the_script_names_never_runs(project, capsys, call, confidence):
    write(project, {"infer.py": INFERENCE.format(call=call)})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == [confidence]


def test_a_class_another_module_imports_may_run(project, capsys):
    write(project, {"infer.py": INFERENCE.format(call="    pass"),
                    "serve.py": "import sys\nfrom infer import Inference\nInference(None, sys.argv[1])\n"})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == ["certain"]


@pytest.mark.parametrize("folder, confidence", [
    ("old_code", "possible"), ("legacy", "possible"), ("models_old", "possible"),
    ("(Deprecated)training", "possible"),
    ("tools", "certain"), ("golden", "certain"), ("(draft)training", "certain"),
])
def test_code_kept_in_an_archive_folder_is_not_shown_to_run(project, capsys, folder, confidence):
    write(project, {f"{folder}/eval.py": "import torch\n" + CHOOSES + "x = torch.ones(2).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("init, chooses, confidence", [
    # its object only exists where CUDA is: following an input's device is no CPU path
    ("self.net = torch.nn.Linear(2, 2)\n        self.net.cuda()", False, "possible"),
    ("self.mean = torch.zeros(2).to('cuda')", False, "possible"),
    # the file's own CPU choice still reaches it: both lines fail on the CPU path
    ("self.net = torch.nn.Linear(2, 2)\n        self.net.cuda()", True, "certain"),
    # built where its caller says, or under a test: the method's device is its input's
    ("self.net = torch.nn.Linear(2, 2)", False, "certain"),
    ("self.net = torch.nn.Linear(2, 2)\n        if torch.cuda.is_available():\n            self.net.cuda()",
     False, "certain"),
    # a CUDA tensor type, and an object of a class whose __init__ hardcodes one
    ("self.z = torch.zeros(2).type(torch.cuda.FloatTensor)", False, "possible"),
    ("self.latent = Latent()", False, "possible"),
    ("self.latent = Latent if torch.cuda.is_available() else None", False, "certain"),
])
def test_a_method_following_its_input_in_a_class_built_on_cuda(project, capsys, init, chooses, confidence):
    write(project, {"flow.py": "import torch\n" + (CHOOSES if chooses else "")
                               + "class Latent:\n    def __init__(self):\n"
                                 "        self.z = torch.zeros(2).type('torch.cuda.FloatTensor')\n"
                               + "class Flow(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                 f"        {init}\n"
                                 "    def forward(self, batch):\n        grid = torch.ones(2).to(batch['rgb'].device)\n"
                                 "        return grid + torch.zeros(2).cuda()\n"})
    found = findings(capsys, project, "TDL001")
    last = (project / "flow.py").read_text().count("\n")  # the `return` line
    assert [f[3] for f in found if f[1] == last] == [confidence]


@pytest.mark.parametrize("choice, confidence", [
    # where gathered results are kept, not where the code runs: no CPU path
    ("gather_device = torch.device('cpu') if gather_on_cpu else torch.device('cuda')", "possible"),
    ("if gather_on_cpu:\n    storage_device = 'cpu'\nelse:\n    storage_device = 'cuda'", "possible"),
    ("run_device = torch.device('cpu') if gather_on_cpu else torch.device('cuda')", "certain"),
])
def test_a_device_named_for_where_data_is_kept_is_no_cpu_path(project, capsys, choice, confidence):
    name = choice.split("=")[0].split()[-1]
    write(project, {"extract.py": "import torch\ngather_on_cpu = False\n" + choice + "\n"
                                  f"feats = torch.zeros(2).to({name})\nx = torch.ones(2).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("call, confidence", [
    ("attack(net, device='cuda')", "possible"),  # every call passes CUDA: a CPU path nothing takes
    ("attack(net)", "possible"),  # the CUDA default, taken by every call
    ("attack(net, device=torch.device('cpu'))", "certain"),
    ("attack(net, device=args.device)", "certain"),
    # the script's own `device`, bound only to CUDA, whatever the parameter of that name holds
    ("device = torch.device('cuda:0')\n    attack(net, device)", "possible"),
    ("device = torch.device('cuda:0')\n    for device in ('cpu', 'cuda'):\n        attack(net, device)", "certain"),
    ("device = 'cuda' if torch.cuda.is_available() else 'cpu'\n    attack(net, device)", "certain"),
])
def test_a_device_parameter_every_call_fills_with_cuda(project, capsys, call, confidence):
    write(project, {"attack.py": "import torch\ndef attack(model, device='cuda'):\n"
                                 "    x = torch.zeros(2).to(device)\n    model.cuda()\n    return model(x)\n"
                                 "if __name__ == '__main__':\n    net = torch.nn.Linear(2, 2)\n"
                                 f"    {call}\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


def test_a_packages_function_with_a_cuda_default_is_its_users_api(project, capsys):
    # `predict(..., device=torch.device("cuda"))` in a package: users outside pass their device
    write(project, {"pkg/__init__.py": "", "pkg/infer.py": "import torch\ndef predict(x, device='cuda'):\n"
                                                         "    model = torch.nn.Linear(2, 2).to(device)\n"
                                                         "    return model(x.cuda())\n"
                                                         "if __name__ == '__main__':\n    predict(torch.ones(2))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


@pytest.mark.parametrize("license_file, confidence", [
    ("extras/deepinv/LICENSE", "possible"),  # a copy of another project, as its authors wrote it
    ("extras/deepinv/License.txt", "possible"),
    ("extras/deepinv/other/COPYING", "possible"),
    ("other/COPYING", "certain"),  # a license beside other code, not above the file
    ("LICENSE", "certain"),  # the project's own license, at its root
    ("extras/deepinv/LICENSE_NOTES/readme.md", "certain"),  # a folder of that name is no license
    (None, "certain"),
])
def test_code_in_a_folder_with_a_license_of_its_own_is_a_copy(project, capsys, license_file, confidence):
    files = {"extras/deepinv/other/invert.py": "import torch\n" + CHOOSES + "x = torch.ones(2).cuda()\n",
             "main.py": "print(1)\n"}
    if license_file is not None:
        files[license_file] = "Copyright someone\n"
    write(project, files)
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("folder, confidence", [
    ("third_party/deepinv", "possible"),  # one of the projects kept in a folder named for them
    ("code/repos/L2T", "possible"),
    ("code/repos", "certain"),  # the folder itself holds the project's own code
    ("code/models/L2T", "certain"),
])
def test_code_in_a_folder_of_other_projects_is_a_copy(project, capsys, folder, confidence):
    write(project, {f"{folder}/invert.py": "import torch\n" + CHOOSES + "x = torch.ones(2).cuda()\n",
                    "main.py": "print(1)\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("use, confidence", [
    ("return x.to(self.device)", "certain"),
    ("return x.to(device)", "possible"),  # the class never reads the device it set
])
def test_a_device_attribute_its_class_never_reads_places_nothing(project, capsys, use, confidence):
    write(project, {"net.py": "import torch\n" + CHOOSES + "class Block(torch.nn.Module):\n"
                              "    def __init__(self):\n        super().__init__()\n"
                              "        self.device = torch.device('cuda')\n"
                              f"    def forward(self, x):\n        {use}\n"
                              "print(Block()(w))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


@pytest.mark.parametrize("call, confidence", [
    ("    model.eval()", "possible"),  # no look-up of names: the class nothing names never runs
    ("    print('x' in locals())", "possible"),  # asks whether a local exists
    ("    globals()[sys.argv[2]](model, sys.argv[1])", "certain"),  # may run any definition
    ("    eval(model)\ndef eval(model):\n    return model", "possible"),  # the script's own `eval` function
    ("    eval(sys.argv[2])", "certain"),  # Python's eval may name anything
])
def test_only_a_look_up_by_name_may_run_what_the_script_never_names(project, capsys, call, confidence):
    write(project, {"infer.py": INFERENCE.format(call=call)})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == [confidence]


def test_fire_makes_every_function_of_a_script_a_command(project, capsys):
    """`fire.Fire()` runs whichever top-level function the command line names."""
    write(project, {"main.py": "import torch\nimport fire\n"
                               "def gen():\n"
                               "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                               "    w = torch.zeros(1).to(device)\n"
                               "    return torch.ones(1).cuda()\n"
                               "if __name__ == '__main__':\n    fire.Fire()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


LIST_LOADER = """\
import torch
from torch_geometric.data import {loader}
from torch_geometric.nn import DataParallel
from model import Model
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader = {loader}(graphs, batch_size=8)
model = Model()
if torch.cuda.device_count() > 1:
    model = DataParallel(model)
model = model.to(device)
for data_list in loader:
    out = model(data_list)
"""


@pytest.mark.parametrize("loader, confidence", [
    ("DataListLoader", ["possible"]),  # lists of graphs: only the multi-GPU DataParallel takes them
    ("DataLoader", ["certain"]),
])
def test_a_list_loader_of_graphs_is_multi_gpu_code(project, capsys, loader, confidence):
    write(project, {"train.py": LIST_LOADER.format(loader=loader) + "y = torch.ones(1).cuda()\n",
                    "model.py": "import torch\nclass Model(torch.nn.Module):\n    def forward(self, data):\n"
                                "        return data.x\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == confidence


@pytest.mark.parametrize("backend, found", [
    # the branch makes sure an NCCL group exists: it runs only where CUDA is, not a finding
    ("'nccl'", []),
    ("dist.Backend.NCCL", []),  # the enum names NCCL as the string does
    ("'gloo'", ["certain"]),  # a CPU group: the branch runs without CUDA
    ("dist.Backend.GLOO", ["certain"]),
])
def test_a_branch_that_makes_sure_an_nccl_group_exists_needs_cuda(project, capsys, backend, found):
    write(project, {"parallel.py": "import torch\nimport torch.distributed as dist\n"
                                   "def set_device(config, rank):\n    if config.DDP:\n"
                                   "        if not dist.is_initialized():\n"
                                   f"            dist.init_process_group(backend={backend})\n"
                                   "        device = torch.device('cuda', rank)\n    else:\n"
                                   "        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                                   "    return device\n"
                                   "x = torch.ones(1).to(set_device(cfg, 0))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == found


@pytest.mark.parametrize("body, confidence", [
    ("        if device is None:\n            return torch.device('cuda')\n        return device\n", "possible"),
    ("        return torch.device('cuda')\n", "certain"),  # no device the caller may pass: always CUDA
])
def test_a_cuda_default_for_a_device_the_caller_may_pass(project, capsys, body, confidence):
    write(project, {"model.py": "import torch\n" + CHOOSES + "class Net(torch.nn.Module):\n"
                                "    def __init__(self, device=None):\n        super().__init__()\n"
                                "        self.device = self.init_device(device)\n"
                                "    @staticmethod\n    def init_device(device):\n" + body
                                + "    def forward(self, x):\n        return x.to(self.device)\n"
                                "print(Net(device)(w))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


TRAINER_CLASS = """\
import torch
class Trainer:
    def __init__(self, args):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.build_model()
        self.optimizer = torch.optim.Adam(self.net.parameters())
        if args.resume:
            self.restore(args.resume)
{extra}
    def build_model(self):
        self.net = torch.nn.Linear(2, 2)
        self.net = self.net.to(self.device)
    def restore(self, path):
        state = torch.load(path, map_location=self.device)
        self.optimizer.load_state_dict(state["optimizer"])
"""


@pytest.mark.parametrize("extra, confidence", [
    ("", "possible"),  # the helper that moves the model runs once, before the optimizer is built
    ("    def reset(self):\n        self.build_model()\n", "certain"),  # it may also run after the resume
])
def test_a_helper_that_moved_the_model_before_the_optimizer(project, capsys, extra, confidence):
    write(project, {"trainer.py": TRAINER_CLASS.format(extra=extra)})
    assert [f[3] for f in findings(capsys, project, "TDL005")] == [confidence]


@pytest.mark.parametrize("use, confidence", [
    ("state = torch.load(sys.argv[1], map_location=device)", "possible"),  # the choice places nothing
    ("state = torch.load(sys.argv[1], map_location=device)\nw = torch.zeros(1).to(device)", "certain"),
])
def test_a_device_choice_that_only_maps_loads_is_no_cpu_path(project, capsys, use, confidence):
    write(project, {"mask.py": "import sys\nimport torch\n"
                               'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                               f"{use}\nmodel = torch.nn.Linear(2, 2)\nmodel.load_state_dict(state)\nmodel.cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("mention, confidence", [
    ("parser.add_argument('--device', default='cuda:0')  # device", "possible"),  # a string and a comment
    ("print(f'running on {device}')", "certain"),  # an f-string's field reads the name
])
def test_a_device_choice_named_only_in_strings_is_unread(project, capsys, mention, confidence):
    write(project, {"main.py": "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                               "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                               f"{mention}\nmodel = torch.nn.Linear(2, 2).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("cell, confidence", [
    ("        return x + torch.zeros(2).cuda()\n", "possible"),  # the cells need CUDA: no CPU run
    ("        return x + torch.zeros(2, device=x.device)\n", "certain"),
])
def test_a_cuda_only_module_two_imports_away(project, capsys, cell, confidence):
    write(project, {"cells.py": "import torch\nclass Cell(torch.nn.Module):\n    def forward(self, x):\n" + cell,
                    "encoder.py": "import torch\nfrom cells import Cell\nclass Encoder(torch.nn.Module):\n"
                                  "    def __init__(self):\n        super().__init__()\n        self.cell = Cell()\n"
                                  "    def forward(self, x):\n        return self.cell(x)\n",
                    "main.py": "import torch\nfrom encoder import Encoder\n" + CHOOSES
                               + "net = Encoder().to(device)\ny = net(w).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "main.py"] == [confidence]


@pytest.mark.parametrize("model_tail, confidence", [
    # the model file's own smoke test: importing it does not run it
    ('if __name__ == "__main__":\n    net = Net().cuda()\n    print(net(torch.zeros(1, 2).cuda()))\n', "certain"),
    # code an import runs: the model needs CUDA wherever it is built
    ("NET = Net().cuda()\n", "possible"),
])
def test_a_models_main_block_does_not_make_importers_cuda_only(project, capsys, model_tail, confidence):
    write(project, {"model.py": "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
                                "        super().__init__()\n        self.fc = torch.nn.Linear(2, 2)\n"
                                "    def forward(self, x):\n        return self.fc(x)\n" + model_tail,
                    "export.py": "import torch\nfrom model import Net\n" + CHOOSES
                                 + "net = Net().to(device)\ny = net(w).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "export.py"] == [confidence]


@pytest.mark.parametrize("where, confidence", [
    # a training script's evaluation method: the script calls it, nothing collects it as a test
    ("class Trainer:\n", "certain"),
    # a unittest case: its machine is the project's CI
    ("class Trainer(unittest.TestCase):\n", "possible"),
])
def test_a_scripts_test_method_is_its_evaluation_not_a_test(project, capsys, where, confidence):
    write(project, {"train.py": "import unittest\nimport torch\n" + where
                                + "    def __init__(self):\n"
                                "        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                                "        self.model = torch.nn.Linear(2, 2).to(self.device)\n"
                                "    def test(self):\n"
                                "        y = self.model(torch.zeros(1, 2, device=self.device))\n"
                                "        return y.cuda().cpu().numpy()\n"
                                "    def train(self):\n        return self.test()\n"
                                'if __name__ == "__main__":\n    Trainer().train()\n'})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


IF_CHOICE = ("if CONFIG['gpu'] != '':\n    device = torch.device('cuda')\nelse:\n    device = torch.device('cpu')\n")


@pytest.mark.parametrize("choice, use, found", [
    # an if statement that chooses as `"cuda" if ... else "cpu"` does: the .cuda() line fails on
    # its CPU branch; the choice's own "cuda" is one branch of a choice with the CPU
    (IF_CHOICE, "w = torch.zeros(1).to(device)\n", [("TDL001", 8, "certain"), ("TDL002", 4, "possible")]),
    # a choice nothing places anything by is boilerplate
    (IF_CHOICE, "", [("TDL001", 7, "possible"), ("TDL002", 4, "possible")]),
    # where state is kept (a dict entry), not where the code runs
    ("state = {}\nif CONFIG['gpu']:\n    state['storage'] = torch.device('cpu')\nelse:\n"
     "    state['storage'] = torch.device('cuda')\n", "", [("TDL001", 8, "possible")]),
    # both branches name CUDA: the test picks how to reach a GPU, not the CPU
    ("if CONFIG['ddp']:\n    device = torch.device('cuda', 0)\nelse:\n"
     "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
     "w = torch.zeros(1).to(device)\n", [("TDL001", 8, "certain"), ("TDL002", 4, "certain")]),
])
def test_an_if_statement_that_chooses_the_cpu(project, capsys, choice, use, found):
    write(project, {"run.py": "import torch\nCONFIG = {'gpu': '0', 'ddp': False}\n" + choice + use
                              + "y = torch.ones(2).cuda()\n"})
    assert sorted((f[2], f[1], f[3]) for f in findings(capsys, project, "TDL001,TDL002")) == sorted(found)


def test_an_importer_choosing_with_an_if_statement_runs_the_module_without_cuda(project, capsys):
    write(project, {"task.py": "import torch\ndef predict(model, x):\n    return model(x.cuda())\n",
                    "main.py": "import torch\nimport task\nCONFIG = {'gpu': ''}\n" + IF_CHOICE
                               + "model = torch.nn.Linear(2, 2).to(device)\nprint(task.predict(model, torch.ones(2)))\n"})
    assert [(f[0], f[3]) for f in findings(capsys, project, "TDL001")] == [("task.py", "certain")]


def test_a_load_of_a_file_the_same_notebook_writes_says_so_and_nothing_contrary(project, capsys):
    """A notebook (which the project index does not read) that writes the checkpoint it loads:
    the evidence says so, and not that no code writes it or that it comes from elsewhere."""
    cells = ["import os\nimport torch\n" + CHOOSES + "model = torch.nn.Linear(2, 2).to(device)\n",
             "if os.path.exists('ckpt/checkpoint.pth'):\n"
             "    model.load_state_dict(torch.load('ckpt/checkpoint.pth')['model'])\n"
             "for epoch in range(3):\n"
             "    torch.save({'model': model.state_dict()}, os.path.join('ckpt', 'checkpoint.pth'))\n"]
    (project / "train.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
                  for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", "TDL004", str(project)])
    [finding] = json.loads(capsys.readouterr().out)
    evidence = [e["message"] for e in finding["evidence"]]
    assert finding["confidence"] == "possible"
    assert "the same file writes a file of that name: this may read it back" in evidence
    assert not [e for e in evidence if "no code of the project writes" in e or "comes from elsewhere" in e], evidence


@pytest.mark.parametrize("cpu_saver, confidence", [
    # a test fixture's CPU copy: code outside the tests never loads it
    ("tests/conftest.py", "certain"),
    # a project script that saves CPU weights: the loaded file may be one of those
    ("export_cpu.py", "possible"),
])
def test_a_test_fixtures_cpu_save_does_not_cover_the_projects_loads(project, capsys, cpu_saver, confidence):
    (project / "tests").mkdir()
    write(project, {
        "train.py": "import sys\nimport torch\n" + CHOOSES
                    + "model = torch.nn.Linear(2, 2).to(device)\ntorch.save(model.state_dict(), sys.argv[1])\n",
        "evaluate.py": "import sys\nimport torch\n" + CHOOSES
                       + "model = torch.nn.Linear(2, 2).to(device)\nmodel.load_state_dict(torch.load(sys.argv[1]))\n",
        cpu_saver: "import torch\ndef saved(path):\n"
                   "    torch.save(torch.nn.Linear(2, 2).cpu().state_dict(), path)\n    return path\n"})
    assert [f[3] for f in findings(capsys, project, "TDL004") if f[0] == "evaluate.py"] == [confidence]


SHARED = """\
import torch

def save_model(model, args):
    torch.save({"model": model.state_dict()}, args.filepath)

def train_epoch(model, args):
    save_model(model, args)

def train(args, model):
    for epoch in range(args.epochs):
        train_epoch(model, args)
"""


@pytest.mark.parametrize("main, confidence", [
    # the training the same run does saved it through two helpers: it comes back where it was written
    ("args = get_args()\ntrain(args, Net())\ngenerate(args)\n", "possible"),
    ("if __name__ == '__main__':\n    args = get_args()\n    train(args, Net())\n    generate(args)\n", "possible"),
    # another run's file: a checkpoint published from the GPU
    ("args = get_args()\ngenerate(args)\n", "certain"),
    # handed another object, but the run saved weights first: this file is not shown to be another
    ("args = get_args()\ntrain(other, Net())\ngenerate(args)\n", "possible"),
])
@pytest.mark.parametrize("saved", ["args.filepath", "args.kmeans_cache"])
def test_a_load_after_the_run_trained_and_saved_through_its_callers(project, capsys, main, confidence, saved):
    write(project, {"shared.py": SHARED.replace("args.filepath", saved), "generate.py": (
        "import torch\nfrom shared import train\n"
        "def generate(args):\n"
        "    device = torch.device('cuda') if args.use_gpu else torch.device('cpu')\n"
        "    saved = torch.load(args.filepath)\n"
        "    model = Net()\n    model.load_state_dict(saved['model'])\n    return model.to(device)\n" + main)})
    assert [f[3] for f in findings(capsys, project, "TDL004") if f[0] == "generate.py"] == [confidence]


TRAIN_THEN_TEST = """\
import sys
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def train(model, name):
    model.to(device)
    torch.save(model.state_dict(), name)

def test(model_path):
    model = torch.nn.Linear(2, 2)
    model.load_state_dict(torch.load(model_path))
    return model.to(device)

def main():
{main}
if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("main, confidence", [
    # the run's own main trains (and saves), then tests the file it wrote
    ("    name = 'best.pth'\n    train(torch.nn.Linear(2, 2), name)\n    test(model_path=name)\n", "possible"),
    # it tests first: the file is the last run's
    ("    name = 'best.pth'\n    test(name)\n    train(torch.nn.Linear(2, 2), name)\n", "certain"),
    # a file named on the command line after the run trained: which one, the code does not show
    ("    train(torch.nn.Linear(2, 2), 'best.pth')\n    test(sys.argv[1])\n", "possible"),
])
def test_a_load_whose_callers_function_trained_and_saved_it_first(project, capsys, main, confidence):
    write(project, {"colorize.py": TRAIN_THEN_TEST.format(main=main)})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == [confidence]


STOPS = "import sys\nimport torch\nif torch.cuda.is_available():\n    torch.cuda.manual_seed(0)\nelse:\n" \
        "    print('CUDA unavailable'); sys.exit()\n"
APPROACH = ("import torch\nclass Appr:\n    def __init__(self):\n"
            "        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "        self.w = torch.zeros(2).cuda()\n")
RUN = "import sys\n{prepare}if sys.argv[1] == 'a':\n    from approaches import base as approach\napproach.Appr()\n"


@pytest.mark.parametrize("files, confidence", [
    # the only run imports a module that exits without CUDA: the class's CPU choice is never taken
    ({"run.py": RUN.format(prepare="from preparation import *\n")}, "possible"),
    # a module nothing imports that does no work when run starts no run
    ({"run.py": RUN.format(prepare="from preparation import *\n"),
      "approaches/other.py": "import sys\nsys.path.append('.')\nfrom approaches.base import Appr\n"}, "possible"),
    # the runner's top level calls a torch.cuda function that raises without CUDA
    ({"run.py": RUN.format(prepare="import torch\ntorch.cuda.ipc_collect()\n")}, "possible"),
    ({"run.py": RUN.format(prepare="import torch\nname = torch.cuda.get_device_name()\n")}, "possible"),
    # ...one that does nothing without CUDA stops nothing
    ({"run.py": RUN.format(prepare="import torch\ntorch.cuda.empty_cache()\n")}, "certain"),
    # no stop on the way
    ({"run.py": RUN.format(prepare="")}, "certain"),
    # another script reaches it without stopping
    ({"run.py": RUN.format(prepare="from preparation import *\n"),
      "demo.py": "from approaches.base import Appr\nAppr()\n"}, "certain"),
])
def test_code_every_run_reaches_only_after_stopping_without_cuda(project, capsys, files, confidence):
    write(project, {"preparation.py": STOPS, "approaches/__init__.py": "", "approaches/base.py": APPROACH, **files})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "approaches/base.py"] == [confidence]


ROUND_TRAINER = """\
import torch

class Trainer:
    def __init__(self, model, device):
        self.model, self.device = model, device
        self._setup_optimizer()

    def _setup_optimizer(self):
        self.optimizer = torch.optim.Adam(self.model.parameters())

    def resume(self, path):
        self.optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])

    def on_round_start(self):
        self.model.to(self.device)
{after}
"""


@pytest.mark.parametrize("after, confidence", [
    ("        self._setup_optimizer()\n", "possible"),  # a new optimizer: the stale state goes with the old
    ("        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)\n", "possible"),
    ("        self.optimizer.step()\n", "certain"),
])
def test_a_mover_that_builds_the_optimizer_again_after_its_move(project, capsys, after, confidence):
    write(project, {"trainer.py": ROUND_TRAINER.format(after=after)})
    assert [f[3] for f in findings(capsys, project, "TDL005") if f[1] == 9] == [confidence]


@pytest.mark.parametrize("to_method, helper, confidence", [
    # the mover hands the optimizer to a helper of another module that moves its state
    ("        optimizer_to(self.optimizer, device)\n", "from util import optimizer_to\n", "possible"),
    # the same helper, given something else
    ("        optimizer_to(self.other, device)\n", "from util import optimizer_to\n", "certain"),
    # a helper of this file that moves its argument's state
    ("        move_state(self.optimizer, device)\n",
     "def move_state(opt, device):\n    for state in opt.state.values():\n"
     "        for k, v in state.items():\n            state[k] = v.to(device)\n", "possible"),
])
def test_a_wrapper_whose_to_moves_the_optimizer_state_with_a_helper(project, capsys, to_method, helper, confidence):
    write(project, {
        "util.py": ("import torch\ndef optimizer_to(optim, device):\n    for param in optim.state.values():\n"
                    "        if isinstance(param, dict):\n            for sub in param.values():\n"
                    "                sub.data = sub.data.to(device)\n"),
        "wrapper.py": ("import torch\n" + helper + "class Model:\n    def __init__(self, net):\n        self.net = net\n"
                       "        self.optimizer = torch.optim.Adam(self.net.parameters())\n"
                       "    def load_state_dict(self, state):\n        self.optimizer.load_state_dict(state['optimizer'])\n"
                       "    def to(self, device):\n        self.net.to(device)\n" + to_method)})
    assert [f[3] for f in findings(capsys, project, "TDL005")] == [confidence]


@pytest.mark.parametrize("holder, confidence", [
    ("trainer.optimizer = optimizer\n    for state in trainer.optimizer.state.values():", "possible"),
    ("for state in optimizer.state.values():", "possible"),
    ("trainer.optimizer = optimizer\n    for state in other.state.values():", "certain"),
])
def test_state_moved_by_the_code_through_the_object_it_was_handed_to(project, capsys, holder, confidence):
    write(project, {"resume.py": (
        "import torch\ndef resume(ckpt, trainer):\n    model = Net()\n"
        "    optimizer = torch.optim.Adam(model.parameters())\n"
        "    optimizer.load_state_dict(ckpt['optimizer'])\n"
        "    trainer.model = model.to(trainer.device)\n"
        f"    {holder}\n"
        "        for k, v in state.items():\n            state[k] = v.to(trainer.device)\n"
        "    optimizer.step()\n")})
    assert [f[3] for f in findings(capsys, project, "TDL005")] == [confidence]


@pytest.mark.parametrize("device, confidence", [
    # nanoGPT's autocast line under a fixed device: its CPU branch never runs
    ("device = 'cuda'", "possible"),
    # a device the user sets: the line follows the choice
    ("device = sys.argv[1]", "certain"),
])
def test_a_choice_whose_test_reads_only_a_fixed_string_is_no_cpu_path(project, capsys, device, confidence):
    write(project, {"bench.py": "import sys\nimport torch\n" + device + "\n"
                                "device_type = 'cuda' if 'cuda' in device else 'cpu'\n"
                                "x = torch.ones(2).to(device_type)\ny = torch.ones(2).cuda()\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


def test_a_function_parameter_named_like_a_fixed_top_level_string_is_read_as_given(project, capsys):
    write(project, {"bench.py": "import torch\ndevice = 'cuda'\n"
                                "def run(device):\n    kind = 'cuda' if 'cuda' in device else 'cpu'\n"
                                "    x = torch.ones(2).to(kind)\n    return torch.ones(2).cuda()\n"
                                "run('cpu')\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


@pytest.mark.parametrize("param, confidence", [
    # Gaussian Splatting's camera: `data_device` says where the images are kept, not where the code runs
    ("data_device", "possible"),
    ("device", "certain"),
])
def test_a_device_parameter_named_for_where_data_is_kept(project, capsys, param, confidence):
    write(project, {"scene/__init__.py": "", "scene/cameras.py": (
        "import torch\nclass Camera(torch.nn.Module):\n"
        f"    def __init__(self, image, {param}='cuda'):\n        super().__init__()\n"
        f"        self.image = image.to({param})\n"
        "        self.world_view_transform = torch.eye(4).cuda()\n")})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("binding, confidence", [
    ("device = torch.device('cpu')\nmodel = model.to(device)", "certain"),  # the run is placed on the CPU
    ("device = 'cpu'\nmodel = model.to(device)", "certain"),
    ("device = torch.device('cpu')", "possible"),  # nothing is moved to it: it places nothing
    ("device = torch.device('cpu')\nmodel = model.to(device)\ndevice = torch.device('cuda')", "possible"),
    # a CPU handle for bringing results back, beside GPU work: no CPU run
    ("cpu = torch.device('cpu')\nout = model(torch.ones(2)).to(cpu)", "possible"),
])
def test_a_script_that_places_its_work_on_the_cpu(project, capsys, binding, confidence):
    write(project, {"train.py": "import torch\nmodel = torch.nn.Linear(2, 2)\n" + binding + "\n"
                                "for x in [torch.ones(2)]:\n    y = model(x.cuda())\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("cuda_call, confidence", [
    # only the CUDA branch asks for the current GPU: the other branch is the function's CPU path
    ("    if use_cuda:\n        where = torch.device('cuda', torch.cuda.current_device())\n"
     "    else:\n        where = None\n", "certain"),
    ("    where = torch.device('cuda', torch.cuda.current_device())\n", "possible"),  # it always asks
])
def test_a_cuda_call_in_the_cuda_branch_leaves_the_function_portable(project, capsys, cuda_call, confidence):
    write(project, {"run.py": "import torch\n"
                              "use_cuda = torch.cuda.is_available()\n"
                              "def restart(model, path):\n" + cuda_call +
                              "    model.load_state_dict(torch.load(path))\n"
                              "    return model.to('cuda' if use_cuda else 'cpu')\n"
                              "def train(model):\n    torch.save(model.cuda().state_dict(), 'w.pt')\n"})
    assert [f[3] for f in findings(capsys, project, "TDL004")] == [confidence]


# -- a module the project builds and never moves (issue 40: the loss) ----------------------

LOSS = """\
    import torch
    import torch.nn as nn
    class ClassBalancedLoss(nn.Module):
        def __init__(self, counts, beta=0.999):
            super().__init__()
            weights = (1 - beta) / (1 - beta ** torch.tensor(counts, dtype=torch.float))
            self.beta = weights / weights.sum()
        def forward(self, logits, labels):
            weights = self.beta[labels]
            return (nn.functional.cross_entropy(logits, labels, reduction="none") * weights).mean()
    """
TRAIN = """\
    import torch
    import torch.nn as nn
    from losses import ClassBalancedLoss
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(8, 3).to(device)
    criterion = ClassBalancedLoss([10, 20, 30]){move}
    def step(x, y):
        return criterion(model(x.to(device)), y.to(device))
    """


def lint_loss(project, capsys, move: str = "", *extra: str):
    write(project, {"losses.py": LOSS, "train.py": TRAIN.format(move=move)})
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "-j", "1", "--select", "TDL006", *extra,
              str(project)])
    return capsys.readouterr().out


def test_a_loss_nobody_moves_is_flagged_where_its_cpu_weights_meet_the_labels(project, capsys):
    (finding,) = json.loads(lint_loss(project, capsys))
    assert (Path(finding["path"]).name, finding["line"], finding["column"]) == ("losses.py", 9, 19)
    assert "which nothing moves" in finding["message"]
    steps = [(e["line"], e["message"]) for e in finding["evidence"]]
    assert [line for line, _ in steps] == [7, 3, 9]
    assert "builds `ClassBalancedLoss` modules and moves none of them" in steps[1][1]


def test_its_fix_moves_the_weights_to_the_labels_device_at_the_use(project, capsys):
    lint_loss(project, capsys, "", "--fix", "--unsafe-fixes")
    fixed = (project / "losses.py").read_text().splitlines()
    assert fixed[8] == "        weights = self.beta.to(labels.device)[labels]"
    assert "register_buffer" not in "\n".join(fixed)
    assert findings(capsys, project, "TDL006") == []  # a move first: nothing left to flag


def test_a_loss_the_script_moves_keeps_the_buffer_at_the_attribute(project, capsys):
    (finding,) = json.loads(lint_loss(project, capsys, ".to(device)"))
    assert (Path(finding["path"]).name, finding["line"]) == ("losses.py", 7)
    assert "register it as a buffer" in finding["message"]


def test_a_loss_only_defined_here_keeps_the_finding_at_the_attribute(project, capsys):
    write(project, {"losses.py": LOSS})
    assert findings(capsys, project, "TDL006") == [("losses.py", 7, "TDL006", "possible")]


def test_a_loss_with_parameters_is_moved_by_whoever_trains_it_so_the_buffer_stays_the_fix(project, capsys):
    # a learned proxy table makes the module one its users move: a buffer follows that move
    line = "            self.beta = weights / weights.sum()\n"
    loss = LOSS.replace(line, line + "            self.proxies = nn.Parameter(torch.randn(3, 8))\n")
    write(project, {"losses.py": loss, "train.py": TRAIN.format(move="")})
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "-j", "1", "--select", "TDL006",
              str(project)])
    (finding,) = json.loads(capsys.readouterr().out)
    assert finding["line"] == 7 and "register it as a buffer" in finding["message"]


@pytest.mark.parametrize("choice, confidence", [
    # where a tensor already is: the device follows the data, no machine is chosen
    ('here = z.get_device() if z.get_device() != -1 else "cpu"\n', "possible"),
    ('here = "cuda" if z.is_cuda else "cpu"\n', "possible"),
    ('here = "cuda" if z.device.type == "cuda" else "cpu"\n', "possible"),
    # the machine's own answer, or the user's option: a CPU path
    ('here = "cuda" if torch.cuda.is_available() else "cpu"\n', "certain"),
    ('here = "cuda" if args.device == "cuda" else "cpu"\n', "certain"),
])
def test_a_device_that_follows_a_tensor_is_no_cpu_path(project, capsys, choice, confidence):
    write(project, {"run.py": "import torch\nz = torch.rand(4, 3)\n" + choice +
                              "idx = torch.randint(4, (2,)).to(here)\nprint(z[idx])\nprint(z.cuda())\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("choice, confidence", [
    ('here = z.get_device() if z.get_device() != -1 else "cpu"\n', "possible"),
    ('here = "cuda" if torch.cuda.is_available() else "cpu"\n', "certain"),
])
def test_an_importer_whose_device_follows_a_tensor_chooses_no_machine(project, capsys, choice, confidence):
    write(project, {"encoder.py": "import torch\ndef encode(x):\n    return x.cuda() * 2\n",
                    "run.py": "import torch\nfrom encoder import encode\nz = torch.rand(4, 3)\n" + choice +
                              "idx = torch.randint(4, (2,)).to(here)\nprint(encode(z[idx]))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "encoder.py"] == [confidence]


@pytest.mark.parametrize("flag, confidence", [
    ("        self.no_cuda = False\n", "possible"),  # written in the code: no run can change it
    ("        self.no_cuda = args.no_cuda\n", "certain"),  # the user's option
    ("        self.no_cuda = False\n        if args.cpu:\n            self.no_cuda = True\n", "certain"),
])
def test_a_flag_fixed_in_the_code_chooses_no_cpu(project, capsys, flag, confidence):
    write(project, {"evaluate.py": "import torch\nclass Evaluator:\n    def __init__(self, args):\n" + flag +
                                   '        self.device = torch.device("cpu" if self.no_cuda else "cuda")\n'
                                   "        self.k = torch.eye(3).cuda()\n"
                                   "Evaluator(None)\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


PREDICT = """\
    import torch
    import torch.nn as nn
    def predict(loader, device, weight_path):
        model = nn.Linear(2, 2).to(device)
        model.load_state_dict(torch.load(weight_path))
        return [model(x.to(device)) for x in loader]
    """


@pytest.mark.parametrize("handoff, confidence", [
    # the training run writes the weights, then hands the same path to the evaluation
    ("with open(path, 'wb') as f:\n    torch.save(model.state_dict(), f)\nprediction.predict(data, device, path)\n",
     "possible"),
    ("torch.save(model.state_dict(), path)\nprediction.predict(data, device, path)\n", "possible"),
    # evaluated before anything is written: the file comes from an earlier run
    ("prediction.predict(data, device, path)\ntorch.save(model.state_dict(), path)\n", "certain"),
    # another name, after the run saved weights: the code does not show it is not the same file
    ("torch.save(model.state_dict(), path)\nprediction.predict(data, device, args.weights)\n", "possible"),
])
def test_a_load_handed_a_file_its_caller_saved_in_another_file_is_a_round_trip(project, capsys, handoff, confidence):
    write(project, {"esc/__init__.py": "", "esc/prediction.py": PREDICT, "run.py": (
        "import sys\nimport torch\nimport torch.nn as nn\nfrom esc import prediction\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "model = nn.Linear(2, 2).to(device)\npath = 'best.pt'\nargs = sys.argv\ndata = [torch.rand(2)]\n"
        + handoff)})
    found = [f for f in findings(capsys, project, "TDL004") if f[0] == "esc/prediction.py"]
    assert found == [("esc/prediction.py", 5, "TDL004", confidence)]


@pytest.mark.parametrize("rebind, confidence", [
    ("", "certain"),
    ('device = "mps"\n', "possible"),  # the choice is replaced before anything reads it
    ('device = torch.device(device)\n', "certain"),  # built from the choice: still a CPU path
])
def test_a_cpu_choice_bound_again_at_once_is_no_cpu_path(project, capsys, rebind, confidence):
    write(project, {"run.py": (
        'import torch\nif __name__ == "__main__":\n'
        '    device = "cuda:0" if torch.cuda.is_available() else "cpu"\n'
        + "".join("    " + line + "\n" for line in rebind.splitlines())
        + '    model = torch.nn.Linear(2, 2).to(device)\n    x = torch.rand(2).cuda()\n    print(model(x))\n')})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("top_level, confidence", [
    ("", "possible"),  # nothing in the choice's run calls it: `device=` names a parameter, reads no variable
    ("print(split_data())\n", "certain"),
])
def test_a_device_keyword_is_no_read_of_the_chosen_device(project, capsys, top_level, confidence):
    write(project, {"lib.py": (
        'import torch\ndevice = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")\n'
        "print(device)\ndef split_data():\n    return torch.tensor([1.0], device='cuda:0')\n" + top_level),
        "main.py": "import lib\nif __name__ == '__main__':\n    print(lib.device)\n"})
    assert [f[3] for f in findings(capsys, project, "TDL002")] == [confidence]


OT = """\
    import torch
    def sinkhorn(C, device='cuda'):
        return torch.ones(C.size(0)).to('cuda') * C
    def ot_loss(x, y, device):
        return sinkhorn(x - y, device)
    """


@pytest.mark.parametrize("call, confidence", [
    ("    loss = ot.ot_loss(x, y, device)\n", "certain"),
    ("    # loss = ot.ot_loss(x, y, device)\n", "possible"),  # the only call is commented out
    # kept in a string (code switched off): it calls nothing; a string that is the name may be looked up
    ("    '''\n    loss = ot.ot_loss(x, y, device)\n    '''\n", "possible"),
    ("    losses = {'ot': getattr(ot, 'ot_loss')}\n", "certain"),  # a string spelling the name
])
def test_a_function_nothing_in_the_project_calls_never_runs(project, capsys, call, confidence):
    write(project, {"ot.py": OT, "train.py": (
        "import torch\nimport ot\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "def main(x, y):\n" + call + "    return x\n"
        "if __name__ == '__main__':\n    main(torch.ones(2).to(device), torch.ones(2).to(device))\n")})
    assert [f[3] for f in findings(capsys, project, "TDL002") if f[0] == "ot.py"] == [confidence]


AGENTS = """\
    import torch
    class Agent:
        def __init__(self, device):
            self.device = device
            self.memory = torch.zeros(4).to(device)
    class RnnAgent:
        def __init__(self, device):
            self.device = device
            self.hidden = torch.zeros(4, 1, 256).cuda()
    """


@pytest.mark.parametrize("imports, confidence", [
    # the app builds only `Agent`: no run builds `RnnAgent`, so its `.cuda()` never runs
    ("from agents import Agent\nagent = Agent(device)\n", "possible"),
    ("from agents import Agent, RnnAgent\nagent = Agent(device)\n", "certain"),  # imported by name
    ("import agents\nagent = agents.RnnAgent(device)\n", "certain"),
])
def test_a_class_nothing_in_the_project_builds_never_runs(project, capsys, imports, confidence):
    write(project, {"agents.py": AGENTS, "play.py": (
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n" + imports)})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "agents.py"] == [confidence]


OT_LOSS = """\
import torch
class {base_name}({base}):
    def forward(self, x, y):
        return self.distance(x, y){extra}
    def distance(self, x, y):
        return (x - y).abs().sum() * self.weights(x.size(0))
    def weights(self, n):
        return torch.ones(n).cuda()
    def old_distance(self, x, y):
        return self.old_weights(x.size(0)) * (x - y).sum()
    def old_weights(self, n):
        return torch.ones(n, n).cuda()
"""


@pytest.mark.parametrize("base, extra, trainer_extra, confidence", [
    # `old_weights` is used only by `old_distance`, which nothing calls: it never runs
    ("torch.nn.Module", "", "", ["certain", "possible"]),
    # a string naming the method may call it (a registry, `getattr`)
    ("torch.nn.Module", "\n    kinds = {'old': 'old_distance'}", "", ["certain", "certain"]),
    # another file calls it
    ("torch.nn.Module", "", "print(loss.old_distance(x, x))\n", ["certain", "certain"]),
    # a framework base may call any method of its own
    ("pl.LightningModule", "", "", ["certain", "certain"]),
])
def test_a_method_only_uncalled_methods_use_never_runs(project, capsys, base, extra, trainer_extra, confidence):
    write(project, {"losses/ot.py": OT_LOSS.format(base_name="OTLoss", base=base, extra=extra), "train.py": (
        "import torch\nfrom losses.ot import OTLoss\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "loss = OTLoss()\nx = torch.ones(2).to(device)\nprint(loss(x, x))\n" + trainer_extra)})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "losses/ot.py"] == confidence


GATHERING_EVAL = """\
import torch
import torch.distributed as dist

def _gathered(tensor):
    out = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(out, tensor)
    return torch.cat(out)

def metric(pred):
    return _gathered(torch.Tensor([pred.mean()]).cuda()).mean()

def predict(model, loader, device):
    for batch in loader:
        gt = batch['mask'].cuda()
        print(metric(model(batch['image'].to(device)) - gt))

def main(cfg):
    if cfg.distributed:
        dist.init_process_group({backend})
        torch.cuda.set_device(dist.get_rank())
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    predict(torch.nn.Identity().to(device), [], device)

if __name__ == '__main__':
    main(None)
"""


@pytest.mark.parametrize("backend, confidence", [
    # every evaluation all-gathers: it completes only in a process group, and the file's groups are NCCL ones
    ("'nccl'", []),
    # a gloo group runs on the CPU: the hardcoded `.cuda()` is what stops it
    ("'gloo'", ["certain", "certain"]),
])
def test_code_that_calls_a_collective_runs_only_in_the_files_process_groups(project, capsys, backend, confidence):
    write(project, {"evaluate.py": GATHERING_EVAL.format(backend=backend)})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == confidence


def test_a_star_import_uses_every_public_name(project, capsys):
    # `from ot import *` brings `ot_loss` in by its bare name: the project calls it, no attribute mentions it
    write(project, {"ot.py": OT, "train.py": (
        "import torch\nfrom ot import *\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "if __name__ == '__main__':\n    x = torch.ones(2).to(device)\n    print(ot_loss(x, x, device))\n")})
    assert [f[3] for f in findings(capsys, project, "TDL002") if f[0] == "ot.py"] == ["certain"]


PROJECTIVE_OPS = """\
import torch
def inv_project(depths, intrinsics):
    fx = intrinsics[..., 0].cuda()
    x = torch.arange(depths.shape[-1]).to(depths.device).float()
    return depths * x / fx
"""


@pytest.mark.parametrize("others, confidence", [
    # every importer reaches a CUDA-only extension: the helpers run only where it does
    ({}, "possible"),
    # a demo imports the helpers without it: they run on its CPU path
    ({"demo.py": "import torch\nimport ops\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                 "print(ops.inv_project(torch.ones(2, 2).to(device), torch.ones(2, 4).to(device)))\n"}, "certain"),
])
def test_a_module_only_gpu_library_users_import_runs_where_they_do(project, capsys, others, confidence):
    write(project, {"ops.py": PROJECTIVE_OPS,
                    "field.py": "import lietorch_extras\nimport ops\ndef step(d, k):\n    return ops.inv_project(d, k)\n",
                    "train.py": "import torch\nimport field\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                                "print(field.step(torch.ones(2, 2).to(device), torch.ones(2, 4).to(device)))\n",
                    **others})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "ops.py"] == [confidence]


def test_a_reducing_method_called_only_in_distributed_runs_leaves_its_class_portable(project, capsys):
    # `reduce_tensor` all-reduces, but only `if args.distributed` calls it: the evaluator runs without a group
    write(project, {"evaluate.py": """\
import torch
import torch.distributed as dist

class Evaluator:
    def __init__(self, args):
        self.args = args
        self.device = torch.device('cuda' if torch.cuda.is_available() and not args.no_cuda else 'cpu')

    def reduce_tensor(self, tensor):
        rt = tensor.clone()
        dist.all_reduce(rt)
        return rt

    def eval(self, net, image):
        prediction = net(image.cuda())
        if self.args.distributed:
            prediction = self.reduce_tensor(prediction)
        return prediction

def main(args):
    if args.distributed:
        dist.init_process_group(backend='nccl')
        torch.cuda.set_device(args.local_rank)
    print(Evaluator(args).eval(torch.nn.Identity(), torch.ones(2)))

if __name__ == '__main__':
    main(None)
"""})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


FLAG_MODELS = """\
import torch

def get_model(net, pretrained=False, distilled=False):
    if pretrained:
        if distilled:
            net.load_state_dict(torch.load('weights/distilled.pth'))
        else:
            net.load_state_dict(torch.load('weights/plain.pth'))
    return net
"""
FLAG_TRAIN = """\
import torch
net = torch.nn.Linear(2, 2).cuda()
torch.save(net.state_dict(), 'weights/plain.pth')
torch.save(net.state_dict(), 'weights/distilled.pth')
"""
FLAG_PREDICT = """\
import torch
from models import get_model

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
net = torch.nn.Linear(2, 2).to(device)
"""


@pytest.mark.parametrize("calls, confidences", [
    # every call skips the distilled branch: only the plain load runs
    ("net = get_model(net, True, False)\nother = get_model(net, False, True)\n", [("possible", 6), ("certain", 8)]),
    # by keyword, and a default left as it is
    ("net = get_model(net, pretrained=True)\n", [("possible", 6), ("certain", 8)]),
    # no call passes `pretrained`: neither load runs
    ("net = get_model(net)\nnet = get_model(net, distilled=True)\n", [("possible", 6), ("possible", 8)]),
    # a value the code cannot read may be anything: both branches may run
    ("import sys\nnet = get_model(net, sys.argv[1] == 'p', sys.argv[2] == 'd')\n", [("certain", 6), ("certain", 8)]),
    ("options = {'pretrained': True}\nnet = get_model(net, **options)\n", [("certain", 6), ("certain", 8)]),
    # handed on as a value, it may be called with anything
    ("factory = get_model\nnet = get_model(net, True, False)\n", [("certain", 6), ("certain", 8)]),
])
def test_a_branch_no_call_takes_is_not_shown_to_run(project, capsys, calls, confidences):
    """`if pretrained:` in a function every project call passes `pretrained=False` (or leaves
    the default) never runs: its load is not shown to fail, whatever the file it names holds."""
    write(project, {"models.py": FLAG_MODELS, "train.py": FLAG_TRAIN, "predict.py": FLAG_PREDICT + calls})
    assert [(f[3], f[1]) for f in findings(capsys, project, "TDL004") if f[0] == "models.py"] == confidences


def test_a_method_branch_no_call_takes(project, capsys):
    """A method's flag read by `if resume is not None:`: the only call, through an object of
    its class, passes None."""
    write(project, {"trainer.py": """\
import torch

class Trainer:
    def __init__(self, net):
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        self.net = net.to(self.device)

    def fit(self, epochs, resume=None):
        if resume is not None:
            self.net.load_state_dict(torch.load(resume))
        for _ in range(epochs):
            torch.save(self.net.state_dict(), 'last.pth')

trainer = Trainer(torch.nn.Linear(2, 2))
trainer.fit(3, resume=None)
"""})
    cli.main(["--isolated", "--no-cache", "--preview", "--show-evidence", "--select", "TDL004", str(project)])
    out = capsys.readouterr().out
    assert "this runs only when `resume` is given, and no call of `fit` in the project passes that " \
           "(trainer.py:15): no run reaches it" in out


def test_a_static_method_branch_no_call_takes(project, capsys):
    """A static method has no `self`: its first parameter is the callers' first argument.
    `path != None` asks for a path, and no call passes one."""
    write(project, {"trainer.py": """\
import torch

class Trainer:
    def __init__(self, net):
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        self.net = net.to(self.device)

    @staticmethod
    def test(model, loader, path=None):
        if path != None:
            model.load_state_dict(torch.load(path)['state_dict'])
        return [model(x) for x in loader]

trainer = Trainer(torch.nn.Linear(2, 2))
Trainer.test(trainer.net, [torch.ones(2)])
""", "train.py": "import torch\nnet = torch.nn.Linear(2, 2).cuda()\ntorch.save({'state_dict': net.state_dict()}, 'best.pth')\n"})
    assert [f[3] for f in findings(capsys, project, "TDL004") if f[0] == "trainer.py"] == ["possible"]
    write(project, {"trainer.py": (project / "trainer.py").read_text().replace("[torch.ones(2)])", "[], 'best.pth')")})
    assert [f[3] for f in findings(capsys, project, "TDL004") if f[0] == "trainer.py"] == ["certain"]


FOLLOWING_HEAD = """\
import torch


class Head(torch.nn.Module):
    def forward(self, x):
        anchors = torch.ones(3).cuda()
        return torch.zeros(3, device=x.device) + anchors
"""


@pytest.mark.parametrize("users, confidence", [
    # the only user moves everything with `.cuda()` and chooses no CPU: what `forward` follows is CUDA
    ({"train.py": "import torch\nfrom model import Head\nnet = Head().cuda()\nprint(net(torch.ones(3).cuda()))\n"},
     "possible"),
    # a configuration names the device; the trainer that reads it is written for CUDA
    ({"config.py": "import torch\nfrom model import Head\ndevice = torch.device('cuda')\nhead = Head()\n",
      "train.py": "import torch\nfrom config import head\nprint(head.cuda()(torch.ones(3).cuda()))\n"}, "possible"),
    # the trainer chooses the CPU where there is no GPU: the hardcoded anchors fail there
    ({"train.py": "import torch\nfrom model import Head\n"
                  "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                  "print(Head()(torch.ones(3).to(device)))\n"}, "certain"),
    # a test runs the head on the CPU, beside a CUDA-only trainer
    ({"train.py": "import torch\nfrom model import Head\nnet = Head().cuda()\nprint(net(torch.ones(3).cuda()))\n",
      "check_head.py": "import torch\nfrom model import Head\nprint(Head()(torch.ones(3, device=torch.device('cpu'))))\n"},
     "certain"),
])
def test_device_following_code_runs_where_its_users_do(project, capsys, users, confidence):
    """`forward` follows its input's device, so it runs wherever its callers put the input:
    where every project module that uses it is written for CUDA, that is a CUDA device."""
    write(project, {"model.py": FOLLOWING_HEAD, **users})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "model.py"] == [confidence]


LEARNER = """\
import torch


class Agent:
    def __init__(self):
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        self.net = torch.nn.Linear(2, 2).to(self.device)

    def train(self):
        \"\"\"Train a new model; test it with `test`.\"\"\"
        torch.save(self.net.state_dict(), 'agent.pth')

    def test(self, path):
        print("no model to test" if path is None else path)
        self._load(path)

    def _load(self, path):
        self.net.load_state_dict(torch.load(path))
"""


@pytest.mark.parametrize("runs, confidence", [
    # nothing calls `test`: the word in a docstring and a message calls nothing
    ("from learner import Agent\nAgent().train()\n", "possible"),
    ("from learner import Agent\nagent = Agent()\nagent.train()\nagent.test('agent.pth')\n", "certain"),
    # another file's `torch.load` is torch's, not a call of the agent's `load`
    ("import torch\nfrom learner import Agent\nstats = torch.load('stats.pt')\nAgent().train()\n", "possible"),
])
def test_a_method_nothing_calls_in_its_program(project, capsys, runs, confidence):
    """Each folder holds a program of its own (`dqn/`, `ppo/`, neither importing the other):
    what one calls does not call the other's methods of the same name."""
    other = "from learner import Agent\nagent = Agent()\nagent.test('agent.pth')\nagent._load('agent.pth')\n"
    write(project, {"dqn/learner.py": LEARNER, "dqn/run.py": runs, "ppo/learner.py": LEARNER, "ppo/run.py": other})
    assert [(f[0], f[3]) for f in findings(capsys, project, "TDL004") if f[0].endswith("learner.py")] == [
        ("dqn/learner.py", confidence), ("ppo/learner.py", "certain")]


@pytest.mark.parametrize("forward, confidence", [
    # zip pairs the rows with the lengths; the rows go into a CPU buffer that is moved whole
    ("        out = torch.zeros(2, 4)\n        for i, (row, n) in enumerate(zip(self.table, lengths)):\n"
     "            out[i, :n] = row[:n]\n        return out.to(lengths.device)\n", [("enc.py", 6, "TDL006", "possible")]),
    # the table itself meets the lengths
    ("        return self.table[:2] * lengths[:, None]\n", [("enc.py", 6, "TDL006", "certain")]),
])
def test_pairing_an_attribute_with_the_inputs_is_no_meeting(project, capsys, forward, confidence):
    """`zip` computes nothing with what it pairs: a meeting is where a pair is used."""
    write(project, {"enc.py": """\
import torch
from torch import nn
class Encoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.ones(8, 4)
    def forward(self, lengths):
""" + forward + "net = Encoding().to('cuda')\n"})
    assert findings(capsys, project, "TDL006") == confidence


@pytest.mark.parametrize("train, confidence", [
    # the agent's load, the algorithm's, the model's: the only call is commented out
    ("from agent import Agent\nagent = Agent()\n# agent.load('model.pth')\nagent.learn()\n", "possible"),
    ("from agent import Agent\nagent = Agent()\nagent.load('model.pth')\nagent.learn()\n", "certain"),
])
def test_a_chain_of_methods_nothing_calls(project, capsys, train, confidence):
    """`Agent.load` calls `Algorithm.load`, which calls `Model.load`: where nothing calls the
    first, the mentions of `load` in the others are in methods that never run."""
    write(project, {
        "model.py": "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = torch.nn.Linear(2, 2)\n    def load(self, path):\n"
                    "        self.load_state_dict(torch.load(path))\n    def save(self, path):\n"
                    "        torch.save(self.state_dict(), path)\n",
        "algo.py": "import torch\nfrom model import Model\nclass Algorithm:\n    def __init__(self):\n"
                   "        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                   "        self.model = Model().to(device)\n    def load(self, path):\n        self.model.load(path)\n"
                   "    def learn(self):\n        self.model.save('model.pth')\n",
        "agent.py": "from algo import Algorithm\nclass Agent:\n    def __init__(self):\n"
                    "        self.algo = Algorithm()\n    def load(self, path):\n        self.algo.load(path)\n"
                    "    def learn(self):\n        self.algo.learn()\n",
        "train.py": train})
    assert [f[3] for f in findings(capsys, project, "TDL004") if f[0] == "model.py"] == [confidence]


@pytest.mark.parametrize("fallback, confidence", [
    ('torch.device("cpu")', "certain"),
    # `torch.cuda` is a module: calling it raises, so the `else` branch chooses nothing
    ('torch.cuda("cpu")', "possible"),
])
def test_a_fallback_that_raises_is_no_cpu_path(project, capsys, fallback, confidence):
    write(project, {"train.py": "import torch\nif torch.cuda.is_available():\n    device = torch.device('cuda')\n"
                                f"else:\n    device = {fallback}\nnet = torch.nn.Linear(2, 2).to(device)\n"
                                "print(net(torch.ones(2).cuda()))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("choose, confidence", [
    # the trainer's own CPU choice sits in a helper whose one call is commented out
    ("        # self.device = self._get_device()\n        self.device = 'cuda'\n", "possible"),
    ("        self.device = self._get_device()\n", "certain"),
])
def test_a_cpu_choice_in_a_helper_nothing_calls_is_none(project, capsys, choose, confidence):
    """The loss takes the trainer's device; the trainer moves its model with `.cuda()` and its
    only CPU choice is in `_get_device`, which runs only where something calls it."""
    write(project, {
        "loss.py": "import torch\nclass Contrastive(torch.nn.Module):\n    def __init__(self, device):\n"
                   "        super().__init__()\n        self.device = device\n    def forward(self, x):\n"
                   "        mask = torch.eye(2).cuda()\n        return (x * mask).to(self.device)\n",
        "trainer.py": "import torch\nfrom loss import Contrastive\nclass Trainer:\n    def __init__(self):\n"
                      + choose + "        self.loss = Contrastive(self.device)\n"
                      "        self.net = torch.nn.Linear(2, 2).cuda()\n    def _get_device(self):\n"
                      "        return 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                      "print(Trainer().loss(torch.ones(2, 2).cuda()))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001") if f[0] == "loss.py"] == [confidence]


@pytest.mark.parametrize("flag, confidence", [
    # the script evaluates and exits: `train` is never called
    ("True", "possible"),
    ("False", "certain"),
])
def test_a_constant_flag_that_exits_first_leaves_the_rest_unrun(project, capsys, flag, confidence):
    write(project, {"run.py": f"""\
import sys
import torch

evaluation = {flag}
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(x):
    return x.cuda()


def test(x):
    return x.to(device)


if evaluation:
    print(test(torch.ones(2)))
    sys.exit(0)

print(train(torch.ones(2)))
"""})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == [confidence]


@pytest.mark.parametrize("built, confidence", [
    # a third-party library's loss: what it does with the labels is its code (it may move them)
    ("from metric_lib.losses import AngularLoss\n", "possible"),
    # torch's own modules compute with what they are handed
    ("from torch.nn import CosineEmbeddingLoss as AngularLoss\n", "certain"),
])
def test_a_value_handed_to_a_library_object_is_not_shown_to_meet(project, capsys, built, confidence):
    write(project, {
        "loss.py": "import torch\nfrom torch import nn\n" + built + "class Loss(nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n        self.fn = AngularLoss()\n"
                   "    def forward(self, emb):\n        anchor = torch.tensor([0, 1])\n"
                   "        return self.fn(emb, anchor)\n",
        "train.py": "import torch\nfrom loss import Loss\nloss = Loss().to('cuda')\n"
                    "print(loss(torch.rand(2, 3, device='cuda')))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL008")] == [confidence]


@pytest.mark.parametrize("built, certain", [
    ("Net(cfg)", True),
    ("Net()", False),  # `__init__` takes `cfg`: TypeError on every machine, before the line
    ("Net(cfg, K=13)", False),  # no parameter `K`
    ("Net(cfg, 1, 2)", False),  # too many positional arguments
    ("Net(*parts)", True),  # what a starred call binds is out of sight
])
def test_a_call_that_cannot_bind_its_arguments_stops_the_run_first(project, capsys, built, certain):
    write(project, {
        "nets/__init__.py": "from .model import Net\n",
        "nets/model.py": "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self, cfg, width=8):\n"
                         "        super().__init__()\n        self.fc = nn.Linear(width, 2)\n",
        "evaluate.py": "import torch\nimport nets\ncfg, parts = {}, ()\n"
                       "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                       f"model = nets.{built}.to(device)\nprint(model(torch.ones(8).cuda()))\n"})
    assert [f[3] == "certain" for f in findings(capsys, project, "TDL001")] == [certain]


def test_a_call_that_cannot_bind_inside_a_try_may_be_caught(project, capsys):
    write(project, {
        "model.py": "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self, cfg):\n"
                    "        super().__init__()\n",
        "evaluate.py": "import torch\nfrom model import Net\n"
                       "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                       "try:\n    model = Net().to(device)\nexcept TypeError:\n    model = Net(None).to(device)\n"
                       "print(model(torch.ones(8).cuda()))\n"})
    assert [f[3] for f in findings(capsys, project, "TDL001")] == ["certain"]


LOSSES = ("import torch\nfrom torch import nn\nclass BinaryDice(nn.Module):\n    def forward(self, p, t):\n"
          "        p = p.cuda()\n        return (p * t).sum()\n"
          "class Dice(nn.Module):\n    def forward(self, p, t):\n        return BinaryDice()(p, t)\n")


@pytest.mark.parametrize("extra, certain", [
    # the script builds `Dice`, which runs `BinaryDice`: a CPU run of the script reaches the line
    ("", True),
    # a helper nothing in the script names runs nowhere: its `.cuda()` does not make the script
    # GPU-only
    ("def inverse_freq(a):\n    return torch.tensor([a, 1 - a]).cuda()\n", True),
    # one the script calls does: its CPU choice is no path it runs
    ("def inverse_freq(a):\n    return torch.tensor([a, 1 - a]).cuda()\nw = inverse_freq(0.5)\n", False),
])
def test_a_class_the_importer_builds_runs_what_it_uses(project, capsys, extra, certain):
    write(project, {"losses.py": LOSSES, "train.py": (
        "import torch\nfrom losses import Dice\n" + extra
        + "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "loss = Dice().to(device)\nprint(loss(torch.ones(2, device=device), torch.ones(2, device=device)))\n")})
    assert [f[3] == "certain" for f in findings(capsys, project, "TDL001") if f[0] == "losses.py"] == [certain]


LOSS_TAKING_A_DEVICE = """\
import torch
class Loss(torch.nn.Module):
    def __init__(self, device):
        super().__init__()
        self.device = device
    def forward(self, x):
        empty = torch.tensor([], device='cuda:0')
        return x.sum() + len(empty)
"""


@pytest.mark.parametrize("setup, confidence", [
    # the trainer builds the loss where it chose the CPU: the hardcoded device fails there
    ("    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n", "certain"),
    # every run that builds the loss has set a GPU first (raises without CUDA) ...
    ("    rank = int(os.environ['LOCAL_RANK'])\n    torch.cuda.set_device(rank)\n"
     "    device = torch.device('cuda', rank)\n", "possible"),
    # ... or wrapped the model for GPUs (device ids work for GPU modules only)
    ("    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
     "    net = DDP(torch.nn.Linear(2, 2).to(device), device_ids=[0])\n", "possible"),
    # a device string the trainer chose, set as the GPU: its fix is the choice's, not the loss's
    ("    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n    torch.cuda.set_device(device)\n",
     "certain"),
])
def test_a_method_runs_only_where_every_run_that_builds_its_class_has_needed_cuda(project, capsys, setup,
                                                                                  confidence):
    write(project, {"loss.py": LOSS_TAKING_A_DEVICE,
                    "engine.py": "import os\nimport torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
                                 "from loss import Loss\ndef train():\n" + setup
                                 + "    criterion = Loss(device)\n    print(criterion(torch.ones(2, device=device)))\n",
                    "train.py": "from engine import train\nif __name__ == '__main__':\n    train()\n"})
    assert findings(capsys, project, "TDL002") == [("loss.py", 7, "TDL002", confidence)]


def test_a_class_built_also_where_cuda_is_not_needed_keeps_its_finding(project, capsys):
    # one trainer sets a GPU first, a CPU evaluation script builds the loss too: that run fails
    write(project, {"loss.py": LOSS_TAKING_A_DEVICE,
                    "engine.py": "import torch\nfrom loss import Loss\ndef train(rank):\n"
                                 "    torch.cuda.set_device(rank)\n    return Loss(torch.device('cuda', rank))\n",
                    "evaluate.py": "import torch\nfrom loss import Loss\n"
                                   "print(Loss(torch.device('cpu'))(torch.ones(2)))\n"})
    assert findings(capsys, project, "TDL002") == [("loss.py", 7, "TDL002", "certain")]


def test_a_class_a_project_class_derives_from_is_built_out_of_sight(project, capsys):
    # `Focal(Loss)` instances run `Loss.forward` without any `Loss(...)` call: not every run is seen
    write(project, {"loss.py": LOSS_TAKING_A_DEVICE + "class Focal(Loss):\n    pass\n",
                    "engine.py": "import torch\nfrom loss import Loss, Focal\ndef train(rank):\n"
                                 "    torch.cuda.set_device(rank)\n    return Loss(torch.device('cuda', rank))\n"
                                 "def evaluate():\n    return Focal(torch.device('cpu'))(torch.ones(2))\n"})
    assert findings(capsys, project, "TDL002") == [("loss.py", 7, "TDL002", "certain")]
