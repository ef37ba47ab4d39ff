"""Confidence tiers (docs/confidence.md): a finding is certain only with evidence that the
code can meet a machine where it breaks; the default output shows certain findings only.

The cases are the shapes that public repositories showed at first look (issue 25), written
from their description: code that needs CUDA anyway, devices that already fall back, files
that hold no tensors, round trips, and the evidence that makes a finding certain.
"""

from __future__ import annotations

import json
import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Confidence
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

TDL001, TDL002, TDL003, TDL004, TDL008 = (Rule.registry[c] for c in ("TDL001", "TDL002", "TDL003", "TDL004", "TDL008"))
# a device choice the script follows: a choice nothing reads is no evidence of a CPU path
FALLBACK = 'device = "cuda" if torch.cuda.is_available() else "cpu"; net = Net().to(device)\n'


def found(code: str, rule, path: str = "t.py", **options):
    """(line, column, confidence) of every finding, preview tier included."""
    result = lint_source(path, textwrap.dedent(code), [rule], preview=True, **options)
    return [(f.line, f.column, f.confidence.value) for f in result.findings]


def default(code: str, rule, path: str = "t.py"):
    return [(f.line, f.column) for f in lint_source(path, textwrap.dedent(code), [rule]).findings]


# -- TDL001/TDL002: evidence that the code runs without CUDA --------------------------------
# Both are default rules: each finding's own verdict decides whether it shows.

def test_a_preview_rule_reports_every_finding_as_possible_and_hides_it_by_default():
    code = """\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def forward(self, x):
            return x + torch.zeros(3)
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL008], preview=True).findings
    assert finding.confidence is Confidence.POSSIBLE
    assert lint_source("t.py", textwrap.dedent(code), [TDL008]).findings == []


def test_a_file_that_falls_back_to_the_cpu_makes_cuda_call_certain_with_its_evidence():
    code = "import torch\n" + FALLBACK + "def f(x):\n    return x.cuda()\ny = f(torch.ones(1))\n"
    (finding,) = lint_source("t.py", code, [TDL001]).findings
    assert (finding.line, finding.column, finding.confidence) == (4, 12, Confidence.CERTAIN)
    choice, runs = finding.evidence
    assert (choice.line, choice.column) == (2, 10)
    assert "runs without CUDA" in choice.message
    assert (runs.line, runs.message) == (3, "`f` runs there: the top level uses it")


def test_a_script_with_no_cpu_path_is_possible_only():
    code = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    assert found(code, TDL001) == [(2, 9, "possible")]
    assert default(code, TDL001) == []


def test_a_device_parameter_makes_the_function_device_generic():
    code = """\
    import torch
    def sample(model, n, current_device):
        z = torch.randn(n, 8).cuda()
        return model(z)
    """
    assert found(code, TDL001) == [(3, 9, "certain")]


@pytest.mark.parametrize("parameter", ["cuda_device", "gpu_device"])
def test_a_parameter_named_for_a_gpu_picks_which_gpu_not_whether_one(parameter):
    code = f"""\
    import torch
    class Trainer:
        def joint_train(self, epoch, loader, {parameter}):
            for x in loader:
                x.to({parameter})
        def train(self, epoch, loader):
            return self.joint_train(epoch, loader, torch.device("cuda"))
        def setup(self):
            self.criterion = torch.zeros(2).cuda()
    """
    assert found(code, TDL001) == [(9, 26, "possible")]


@pytest.mark.parametrize("method, confidence", [
    # a method that takes the device: the module's object follows its caller's choice
    ("def to_device(self, device):\n            self.device = device", "certain"),
    # one that follows an input's device is portable itself; the input may be what the
    # module's own code moved with `.cuda()`, so it shows no CPU path for `generate`
    ("def forward(self, text):\n            return self.net(text.to(text.device))", "possible"),
])
def test_a_module_is_device_generic_where_a_method_takes_the_device(method, confidence):
    code = f"""\
    import torch
    class Generator(torch.nn.Module):
        {method}
        def generate(self, n):
            return torch.zeros(n).cuda()
    """
    assert found(code, TDL001) == [(6, 16, confidence)]


def test_the_device_of_a_value_the_function_moved_itself_is_no_evidence():
    code = """\
    import torch
    def extract(loader):
        for samples, index in loader:
            index = index.cuda()
            out = torch.empty(3, device=index.device)
    """
    assert found(code, TDL001) == [(4, 17, "possible")]


@pytest.mark.parametrize("exit_call", ["quit('needs 2 GPUs')", "exit(1)", "sys.exit(1)",
                                       "raise SystemExit('no GPU')"])
def test_a_script_that_exits_without_gpus_has_no_default_finding(exit_call):
    code = f"""\
    import sys
    import torch
    if torch.cuda.device_count() < 2:
        {exit_call}
    {FALLBACK}model = torch.nn.Linear(2, 2).cuda()
    """
    assert default(code, TDL001) == []


def test_an_exit_only_when_the_user_asked_for_cuda_leaves_the_cpu_path():
    code = """\
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    if args.cuda and not torch.cuda.is_available():
        raise SystemExit("no GPU")
    def infer(model, x):
        return model(x.cuda())
    infer(print, torch.ones(1))
    """
    assert found(code, TDL001) == [(9, 18, "certain")]


# A hardcoded CUDA device (line 2) that `shift` uses, and a timing function whose own CPU
# fallback then always synchronizes CUDA: no CPU run of `throughput` gets past it.
SHIFT_ON_CUDA = """\
import torch
device = torch.device("cuda")

def shift(d):
    return torch.eye(4).to(device) + d

"""
SYNCED_THROUGHPUT = """\
def throughput(n):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    shift(torch.randn(n, 4, device=device))
    torch.cuda.synchronize(device)

"""


@pytest.mark.parametrize("timing, certain", [
    # the function that chose the CPU then always synchronizes CUDA: no CPU run gets past it
    ("    torch.cuda.synchronize(device)\n", False),
    ("    start = torch.cuda.Event(enable_timing=True)\n", False),
    # only when the device is CUDA: the CPU choice is a path
    ("    if device.type == 'cuda':\n        torch.cuda.synchronize(device)\n", True),
    # the function asserts what its CPU choice denies
    ("    assert device.type == 'cuda', 'GPU required'\n", False),
    ("    assert torch.cuda.is_available()\n", False),
    # an assert that says nothing of the machine
    ("    assert n > 0\n", True),
])
def test_a_cpu_choice_in_a_function_that_needs_cuda_anyway_is_no_cpu_path(timing, certain):
    code = SHIFT_ON_CUDA + textwrap.dedent("""\
    def throughput(n):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.randn(n, 4, device=device)
        shift(x)
    """) + timing + 'if __name__ == "__main__":\n    throughput(8)\n'
    assert default(code, TDL002) == ([(2, 23)] if certain else [])


def test_a_cpu_choice_elsewhere_in_the_file_still_counts():
    code = "import argparse\n" + SHIFT_ON_CUDA + SYNCED_THROUGHPUT + textwrap.dedent("""\
    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--cpu", action="store_true")
        args = parser.parse_args()
        run = "cpu" if args.cpu else "cuda"
        print(shift(torch.zeros(4, device=run)))
    """)
    [finding] = lint_source("t.py", code, [TDL002]).findings
    assert (finding.line, finding.column) == (3, 23)
    assert "offers --cpu on the command line" in " ".join(step.message for step in finding.evidence)


def test_a_choice_that_dies_without_cuda_reaches_nothing_though_another_choice_stands():
    code = SHIFT_ON_CUDA + textwrap.dedent("""\
    def report(use_cpu):
        print(torch.zeros(2, device="cpu" if use_cpu else "cuda:0"))

    """) + SYNCED_THROUGHPUT + 'if __name__ == "__main__":\n    throughput(8)\n'
    # the file's CPU path is report()'s choice, which never calls shift(); the choice that does
    # call it dies at torch.cuda.synchronize: no CPU run reaches line 2
    assert found(code, TDL002) == [(2, 23, "possible")]


def test_a_function_that_times_with_cuda_events_in_a_loop_is_for_gpus():
    code = "import torch\n" + FALLBACK + textwrap.dedent("""\
    def bench(model, xs):
        total = 0.0
        x0 = xs[0].cuda()
        for x in xs:
            if x is not None:
                start = torch.cuda.Event(enable_timing=True)
                total += 1
        return model(x0)
    """)
    assert default(code, TDL001) == []


def test_a_dataparallel_subclass_runs_where_gpus_are():
    code = "import torch\nimport torch.nn as nn\n" + FALLBACK + textwrap.dedent("""\
    class Parallel(nn.DataParallel):
        def scatter(self, x):
            return x.cuda()
    """)
    assert found(code, TDL001) == [(6, 16, "possible")]


@pytest.mark.parametrize("library", ["apex", "bitsandbytes as bnb", "triton"])
def test_a_file_that_imports_a_gpu_library_at_the_top_is_for_gpus(library):
    code = f"import torch\nimport {library}\n" + FALLBACK + "def f(x):\n    return x.cuda()\n"
    assert found(code, TDL001) == [(5, 12, "possible")]


def test_an_optional_gpu_library_leaves_the_cpu_path():
    code = "import torch\n" + FALLBACK + textwrap.dedent("""\
    try:
        import apex
    except ImportError:
        apex = None
    def f(x):
        return x.cuda()
    f(torch.ones(1))
    """)
    assert found(code, TDL001) == [(8, 12, "certain")]


def test_a_model_loaded_in_8_bits_needs_cuda():
    code = """\
    import torch
    from transformers import AutoModelForCausalLM
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)
    x = torch.zeros(2).to("cuda")
    """
    assert found(code, TDL002) == [(5, 23, "possible")]


def test_a_count_of_gpus_already_falls_back():
    code = """\
    import torch
    def place(rank, num_devices):
        return torch.device(f"cuda:{rank}") if num_devices > 0 else torch.device("cpu")
    """
    assert default(code, TDL002) == []


def test_a_computed_cuda_index_is_multi_gpu_code_and_only_possible():
    code = "import torch\n" + FALLBACK + 'def place(x, k):\n    return x.to("cuda:" + str(k))\n'
    assert [c for _, _, c in found(code, TDL002)] == ["possible"]


def test_the_old_torch_fallback_of_torch_accelerator_is_only_possible():
    code = """\
    import torch
    def train(model, device):
        if device == "auto":
            device = torch.accelerator.current_accelerator().type if hasattr(torch, "accelerator") else "cuda"
        model.to(device)
    """
    assert [c for _, _, c in found(code, TDL002)] == ["possible"]


def test_test_code_is_never_certain():
    code = "import torch\n" + FALLBACK + "def test_move():\n    assert torch.ones(1).cuda().sum() == 1\n"
    assert [c for _, _, c in found(code, TDL001, path="tests/test_move.py")] == ["possible"]


# -- TDL004: evidence that the file holds tensors and comes from elsewhere -------------------

def test_a_load_in_a_lone_script_is_possible_though_it_holds_weights():
    code = """\
    import torch
    def build(model, checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state)
        return model
    """
    result = lint_source("pkg/build.py", textwrap.dedent(code), [TDL004], preview=True)
    (finding,) = result.findings
    assert finding.confidence is Confidence.POSSIBLE  # no package here: a lone script
    # no machine without CUDA shown; weights; and whose file is it?
    assert [s.line for s in finding.evidence] == [1, 4, 3]
    assert "judged CUDA-only" in finding.evidence[0].message
    assert "nothing in the project saves weights" in finding.evidence[2].message


def test_a_package_module_load_is_certain_where_the_module_shows_a_cpu_path(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    code = "import torch\ndef build(model, checkpoint):\n    model.load_state_dict(torch.load(checkpoint))\n"
    # Linted alone (no project index): only the module itself can show a CPU path.
    (finding,) = lint_source(str(package / "build.py"), code, [TDL004], preview=True).findings
    assert finding.confidence is Confidence.POSSIBLE
    code += "def export(model, device, out):\n    torch.save(model.to(device).state_dict(), out)\n"
    (finding,) = lint_source(str(package / "build.py"), code, [TDL004]).findings
    assert finding.confidence is Confidence.CERTAIN
    assert [s.line for s in finding.evidence] == [1, 3, 3]  # CPU path, weights, saved from a device


def test_a_file_of_plain_objects_is_only_possible():
    code = "import torch\n" + FALLBACK + textwrap.dedent("""\
    def vocabulary(path):
        words = torch.load(path)
        return sorted(words)
    """)
    assert [c for _, _, c in found(code, TDL004)] == ["possible"]


def test_a_learning_rate_schedulers_state_holds_no_tensors():
    code = "import torch\n" + FALLBACK + textwrap.dedent("""\
    def resume(scheduler, path):
        scheduler.load_state_dict(torch.load(path + "/scheduler.pt"))
    """)
    assert [c for _, _, c in found(code, TDL004)] == ["possible"]


def test_a_checkpoint_saved_by_one_function_and_loaded_by_another_is_a_round_trip():
    code = "import torch\n" + FALLBACK + textwrap.dedent("""\
    def save(model, ckpt_path):
        torch.save(model.state_dict(), ckpt_path)
    def evaluate(model, ckpt_path):
        model.load_state_dict(torch.load(ckpt_path))
    """)
    assert [c for _, _, c in found(code, TDL004)] == ["possible"]


def test_a_load_from_another_runs_directory_is_no_round_trip():
    code = "import os\nimport torch\n" + FALLBACK + textwrap.dedent("""\
    def train(args, model):
        model.load_state_dict(torch.load(os.path.join(args.init_from, "model.pt")))
        torch.save(model.state_dict(), os.path.join(args.output_dir, "model.pt"))
    train(args, model)
    """)
    assert [c for _, _, c in found(code, TDL004)] == ["certain"]


def test_a_resume_of_the_scripts_own_checkpoints_is_only_possible():
    # The file saves checkpoints and resumes one: normally on the machine that wrote it.
    code = "import os\nimport torch\n" + FALLBACK + textwrap.dedent("""\
    def train(args, model):
        model.load_state_dict(torch.load(os.path.join(args.resume_from, "model.pt")))
        torch.save(model.state_dict(), os.path.join(args.output_dir, "model.pt"))
    """)
    assert found(code, TDL004) == [(5, 27, "possible")]


# -- TDL003: recall on values the code shows are tensors ------------------------------------

def test_a_value_checked_with_isinstance_is_a_tensor():
    code = """\
    import torch
    def move(inputs, device):
        for key in inputs:
            value = inputs[key]
            if isinstance(value, torch.Tensor):
                value.to(dtype=torch.float16, device=device)
            print(value)
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL003], preview=True).findings
    assert (finding.line, finding.column) == (6, 13)
    # the check says it is a tensor; the caller's `device` puts the rest there; `print(value)`
    # uses it as if it had moved
    assert [s.line for s in finding.evidence] == [5, 2, 7]
    assert finding.confidence is Confidence.CERTAIN


def test_a_dropped_move_of_a_value_nothing_reads_again_is_possible():
    """MAML's learning rule: an attribute seeded in `__init__` and read elsewhere only to build
    parameters the module's own `.to()` moves; the drop may never meet the device."""
    code = """    import torch
    import torch.nn as nn
    class LearningRule(nn.Module):
        def __init__(self, device, lr=1e-3):
            super().__init__()
            self.lr = torch.ones(1) * lr
            self.lr.to(device)
            self.steps = 5
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL003], preview=True).findings
    assert finding.confidence is Confidence.POSSIBLE
    assert "nothing after the dropped move reads `self.lr`" in finding.evidence[-1].message


def test_an_early_exit_on_is_tensor_makes_a_tensor():
    code = """\
    import torch
    def move(x, device):
        if not torch.is_tensor(x):
            return x
        x.to(device)
        return x
    """
    result = lint_source("t.py", textwrap.dedent(code), [TDL003], preview=True)
    assert [(f.line, f.column) for f in result.findings] == [(5, 5)]
    assert fix_file(result).source.splitlines()[4] == "    x = x.to(device)"


def test_a_dict_of_tensors_batch_entry():
    code = """\
    def train(model, loader, device):
        for batch in loader:
            batch["input_ids"].to(device)
            model(**batch)
    """
    assert found(code, TDL003) == [(3, 9, "certain")]
    assert default(code, TDL003) == [(3, 9)]


def test_a_loop_copy_of_a_dict_value_gets_no_fix():
    code = """\
    import torch
    def move(inputs, device):
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor):
                value.to(device)
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL003], preview=True).findings
    assert finding.fix is None  # `value = value.to(device)` would leave inputs[key] behind


def test_a_tokenizers_batch_encoding_moves_in_place():
    code = """\
    from transformers import AutoTokenizer
    def encode(texts, device):
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        encoded = tokenizer(texts, return_tensors="pt")
        encoded.to(device)
        return encoded
    """
    assert found(code, TDL003) == []


# -- fixes bound to the evidence ------------------------------------------------------------

def test_a_rank_index_never_ends_up_on_the_cpu():
    code = 'import torch\ndef setup(rank):\n    return torch.device("cuda", rank)\n'
    result = lint_source("t.py", code, [TDL002], preview=True)
    fixed = fix_file(result).source
    assert 'torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")' in fixed


def test_device_of_an_input_not_known_to_be_a_tensor_is_not_written():
    code = """\
    import torch
    import torch.nn as nn
    class Scatter(nn.Module):
        def forward(self, data_list):
            return torch.arange(len(data_list)) + data_list[0]
    """
    findings = lint_source("t.py", textwrap.dedent(code), [TDL008], preview=True).findings
    assert all(f.fix is None for f in findings)


# -- every way in agrees on the tier ---------------------------------------------------------

POSSIBLE_ONLY = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def test_cli_hides_possible_findings_and_preview_shows_them(tmp_path, run_cli):
    (tmp_path / "m.py").write_text(POSSIBLE_ONLY)
    status, out, _ = run_cli("--isolated", "m.py", cwd=tmp_path)
    assert status == 0 and "TDL001" not in out
    status, out, _ = run_cli("--isolated", "--preview", "--format", "concise", "m.py", cwd=tmp_path)
    assert status == 1 and out.splitlines()[0].endswith("(possible)")


def test_configured_preview_and_no_preview(tmp_path, run_cli):
    (tmp_path / "m.py").write_text(POSSIBLE_ONLY)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdev-lint]\npreview = true\n")
    assert run_cli("m.py", cwd=tmp_path)[0] == 1
    assert run_cli("--no-preview", "m.py", cwd=tmp_path)[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\npreview = "yes"\n')
    status, _, err = run_cli("m.py", cwd=tmp_path)
    assert status == 2 and "'preview' must be true or false" in err


LOAD_SCRIPT = ("import sys\nimport torch\n" + FALLBACK + "model = torch.nn.Linear(2, 2)\n"
               "model.load_state_dict(torch.load(sys.argv[1]))\n"
               "def export(out):\n    torch.save(model.to(device).state_dict(), out)\n")


def test_json_and_sarif_carry_confidence_and_evidence(tmp_path, run_cli):
    (tmp_path / "m.py").write_text(LOAD_SCRIPT)
    _, out, _ = run_cli("--isolated", "--format", "json", "m.py", cwd=tmp_path)
    (finding,) = json.loads(out)
    assert (finding["code"], finding["confidence"]) == ("TDL004", "certain")
    assert finding["evidence"][0] == {"path": "m.py", "line": 3, "column": 10, "cell": None,
                                      "message": finding["evidence"][0]["message"]}
    _, out, _ = run_cli("--isolated", "--format", "sarif", "m.py", cwd=tmp_path)
    (result,) = json.loads(out)["runs"][0]["results"]
    assert result["properties"] == {"confidence": "certain"}
    assert [r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]] == [
        e["line"] for e in finding["evidence"]]


def test_show_evidence_prints_each_step(tmp_path, run_cli):
    (tmp_path / "m.py").write_text(LOAD_SCRIPT)
    _, out, _ = run_cli("--isolated", "--show-evidence", "--format", "concise", "m.py", cwd=tmp_path)
    assert out.splitlines()[1].startswith("  = evidence: m.py:3:10: the file runs without CUDA")


def test_flake8_agrees_on_the_tier(tmp_path):
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(POSSIBLE_ONLY)
    base = [sys.executable, "-m", "flake8", "--select", "TDL", "--isolated", "m.py"]
    plain = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True)
    assert plain.stdout == ""
    preview = subprocess.run([*base, "--tdl-preview"], cwd=tmp_path, capture_output=True, text=True)
    assert preview.stdout.strip().endswith("(possible)") and "TDL001" in preview.stdout


def test_a_noqa_for_a_hidden_finding_is_still_used():
    code = POSSIBLE_ONLY.replace(".cuda()\n", ".cuda()  # noqa: TDL001\n")
    rules = [TDL001, Rule.registry["TDL090"]]
    assert lint_source("t.py", code, rules).findings == []


def test_a_tensor_the_caller_passes_in_is_never_made_a_buffer():
    """The caller may pass an nn.Parameter: as a buffer it would silently stop training."""
    code = """\
    import torch
    import torch.nn as nn
    class Prior(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = torch.as_tensor(weight)  # the caller's tensor itself, when it is one
        def forward(self, x):
            return x * self.weight
    """
    rule = Rule.registry["TDL006"]
    (finding,) = lint_source("t.py", textwrap.dedent(code), [rule], preview=True).findings
    assert finding.fix is None
    copied = textwrap.dedent(code).replace("torch.as_tensor(weight)", "torch.tensor(weight)")
    (finding,) = lint_source("t.py", copied, [rule], preview=True).findings
    assert finding.fix is not None  # torch.tensor copies: a buffer of the copy is right


def test_a_factory_finding_names_the_input_it_takes_the_device_from():
    code = """\
    import torch
    import torch.nn as nn
    class Pos(nn.Module):
        def forward(self, x):
            return x + torch.ones(3)
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL008], preview=True).findings
    (step,) = finding.evidence
    assert (step.line, step.column) == (4, 23) and "`x` is an input of `forward`" in step.message


# -- what another file says: a module runs where the code that imports it runs ---------------

DATA = """\
import torch
def collate(samples):
    return torch.stack(samples).cuda()
"""


@pytest.mark.parametrize("train, certain", [
    # the script that imports the helper chooses the CPU where there is no GPU
    ("import torch\nfrom data import collate\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "model = Net().to(device)\n", True),
    # an import the script never reads runs none of the helper's code
    ("import torch\nfrom data import collate\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "model = Net().to(device)\n", None),
    # a choice nothing follows is boilerplate, not a CPU path
    ("import torch\nfrom data import collate\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "model = Net().cuda()\n", False),
    ("import argparse\nfrom data import collate\np = argparse.ArgumentParser()\n"
     "p.add_argument('--cpu', action='store_true')\nargs = p.parse_args()\n"
     "model = Net().to('cpu' if args.cpu else 'cuda')\n", True),
    # a CPU literal that only says where outputs go, or where a file's tensors land, is no choice
    ("import torch\nfrom data import collate\ncpu = torch.device('cpu')\nmodel = Net().cuda()\n", False),
    ("import torch\nfrom data import collate\nstate = torch.load('m.pt', map_location={'cuda:0': 'cpu'})\n", False),
])
def test_a_helper_module_runs_where_its_importers_do(tmp_path, train, certain):
    from torchdev_lint.analysis import project_index

    (tmp_path / "data.py").write_text(DATA)
    # the script builds its batches with the helper (but where ``certain`` is None)
    (tmp_path / "train.py").write_text(train + ("batch = collate(samples)\n" if certain is not None else ""))
    certain = bool(certain)
    index = project_index.build([str(tmp_path / "data.py"), str(tmp_path / "train.py")])
    (finding,) = lint_source(str(tmp_path / "data.py"), DATA, [TDL001], preview=True, index=index).findings
    assert (finding.confidence is Confidence.CERTAIN) is certain
    if certain:
        assert "code that imports it runs without CUDA (train.py:" in finding.evidence[0].message


def test_an_exit_under_an_option_does_not_make_the_file_cuda_only():
    """allennlp's trainer: `raise` when AMP is asked for on the CPU is about AMP, not the file."""
    code = """\
    import torch
    class Trainer:
        def __init__(self, model, use_amp, cuda_device):
            self.cuda_device = cuda_device
            if use_amp:
                if not torch.cuda.is_available():
                    raise ValueError("Using AMP requires a cuda device")
            model.cuda()
    """
    (finding,) = lint_source("t.py", textwrap.dedent(code), [TDL001], preview=True).findings
    assert not any("needs CUDA anyway" in step.message for step in finding.evidence)


def test_an_option_the_script_sets_from_the_machine_is_read_as_that_test():
    """`args.cuda = not args.no_cuda and torch.cuda.is_available()`: `if args.cuda or
    args.mixmode:` guards its body when both options were set with an availability check, even
    with a star import in the file; an option set from the user's wish alone does not."""
    code = """\
    import argparse
    import torch
    from models import *
    parser = argparse.ArgumentParser()
    parser.add_argument("--no_cuda", action="store_true")
    parser.add_argument("--mixmode", action="store_true")
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    args.mixmode = args.no_cuda and args.mixmode and torch.cuda.is_available()
    labels = torch.zeros(3)
    if args.cuda or args.mixmode:
        labels = labels.cuda()
    if args.mixmode:
        labels = labels.cuda()
    if args.fast:
        labels = labels.cuda()
    """
    assert [line for line, _, _ in found(code, TDL001)] == [17]


@pytest.mark.parametrize("smoke_test, certain", [
    ("", True),
    # a `__main__` block of its own (a smoke test of its collate) leaves what importers call theirs
    ("if __name__ == '__main__':\n    print(collate([torch.ones(2)]))\n", True),
])
def test_a_helper_module_with_a_main_block_runs_where_its_importers_do(tmp_path, smoke_test, certain):
    from torchdev_lint.analysis import project_index

    data = DATA + smoke_test
    train = ("import torch\nfrom data import collate\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
             "model = Net().to(device)\nprint(model(collate([torch.ones(2)])))\n")
    (tmp_path / "data.py").write_text(data)
    (tmp_path / "train.py").write_text(train)
    index = project_index.build([str(tmp_path / "data.py"), str(tmp_path / "train.py")])
    (finding,) = lint_source(str(tmp_path / "data.py"), data, [TDL001], preview=True, index=index).findings
    assert (finding.confidence is Confidence.CERTAIN) is certain


@pytest.mark.parametrize("choice, certain", [
    ("device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')", True),
    # a flag the function sets to a constant: every run takes the same branch
    ("cuda = True\n    device = torch.device('cuda:0' if cuda else 'cpu')", False),
    ("cuda = args.cuda\n    device = torch.device('cuda:0' if cuda else 'cpu')", True),
    # `is_available` left uncalled is a function: always true, never the CPU
    ("device = 'cuda:0' if torch.cuda.is_available else 'cpu'", False),
])
def test_a_condition_no_run_can_change_chooses_no_cpu(choice, certain):
    code = ("import torch\n\ndef main(args):\n    " + choice + "\n"
            "    model = torch.nn.Linear(2, 2).to(device)\n    x = torch.zeros(2).cuda()\n")
    (finding,) = lint_source("t.py", code, [TDL001], preview=True).findings
    assert (finding.confidence is Confidence.CERTAIN) is certain


def test_a_module_level_setting_still_chooses_the_cpu():
    """``USE_CUDA = True`` at the top of a script is a setting its user edits."""
    code = ("import torch\nUSE_CUDA = True\ndevice = torch.device('cuda' if USE_CUDA else 'cpu')\n"
            "model = torch.nn.Linear(2, 2).to(device)\nx = torch.zeros(2).cuda()\n")
    (finding,) = lint_source("t.py", code, [TDL001], preview=True).findings
    assert finding.confidence is Confidence.CERTAIN
