"""TDL002 hardcoded-device-string: the shapes real code takes, beyond the rule's own
examples (which tests/test_rule_examples.py runs): aliases, layouts, comments, scopes, the
configuration values it leaves alone, and switching it off for a CUDA-only project."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL002"]


def findings(code):
    return [(f.line, f.column) for f in lint_source("t.py", textwrap.dedent(code), [RULE], preview=True).findings]


def fixed(code, unsafe=False):
    result = lint_source("t.py", textwrap.dedent(code), [RULE], preview=True)
    outcome = fix_file(result, unsafe=unsafe)
    assert outcome.error is None
    again = lint_source("t.py", outcome.source, [RULE], preview=True)
    assert [f for f in again.findings if f.fix is not None and (unsafe or f.fix.applicability.value == "safe")] == []
    return outcome.source


DEFAULT = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'


# -- what is flagged -----------------------------------------------------------------------

@pytest.mark.parametrize("code, where", [
    ('import torch\nx = torch.ones(2).to("cuda")\n', (2, 22)),
    ('import torch\nx = torch.ones(2).to(device="cuda:1", non_blocking=True)\n', (2, 29)),
    ('import torch\ntorch.set_default_device("cuda")\n', (2, 26)),
    ('import torch\nstate = torch.load(path, "cuda")\n', (2, 26)),
    ('import torch\nd = torch.device(type="cuda")\n', (2, 23)),
    ('import torch\ng = torch.Generator(device="cuda")\n', (2, 28)),
    ('x = y.to("cuda:%d" % rank)\n', (1, 10)),
    ('x = y.to("cuda:" + str(rank))\n', (1, 10)),
    ('x = y.to("cuda:{}".format(rank))\n', (1, 10)),
    ('dev = "cuda"\n', (1, 7)),
    ('train_device: str = "cuda"\n', (1, 21)),
    ('import torch\ndef get_device():\n    return torch.device("cuda")\n', (3, 25)),
    # A test the runner picks on a CPU-only CI machine too, with no skip marker.
    ('import torch\ndef test_forward_gpu():\n    x = torch.ones(2, device="cuda")\n', (3, 30)),
])
def test_flagged(code, where):
    assert findings(code) == [where]


def test_both_branches_of_an_unrelated_condition_are_flagged():
    assert findings('x = y.to("cuda:0" if first else "cuda:1")\n') == [(1, 10), (1, 33)]


# -- what is not flagged -------------------------------------------------------------------

@pytest.mark.parametrize("code", [
    'import torch\nscaler = torch.cuda.amp.GradScaler(device="cuda")\n',
    'import torch\nx = torch.cuda.memory_allocated(device="cuda:0")\n',
    'import torch\nwith torch.cuda.device("cuda:1"):\n    pass\n',
    'import torch\nif x.device == torch.device("cuda"):\n    pass\n',
    'import torch\nassert model.device == torch.device("cuda", 0)\n',
    'import torch\nmock_to.assert_called_once_with(torch.device("cuda"))\n',
    'import torch\nstrategy.parallel_devices = [torch.device("cuda", 0), torch.device("cuda", 1)]\n',
    'import torch\nconfig.device = torch.device("cuda")\n',
    'settings = dict(device="cuda", lr=0.1)\n',
    'class Defaults:\n    device = "cuda"\n',
    'device_type = "cuda"\n',
    'if use_gpu:\n    device = "cuda"\n',
    'device = args.device or "cuda"\n',
    'import torch\nif not torch.cuda.is_available():\n    raise SystemExit("needs a GPU")\n'
    'model.to("cuda")\n',
    'import torch\nimport pytest\n@pytest.mark.skipif(not torch.cuda.is_available(), reason="gpu")\n'
    'def test_gpu():\n    torch.ones(1, device="cuda")\n',
    'def _launch_cuda_kernel(x):\n    return x.to("cuda")\n',
    'import os\ndevice = os.environ.get("DEVICE", "cuda")\n',
    'print("cuda")\nname = "cuda"\nlabel = f"cuda:{rank}"\n',
    'x = y.to(b"cuda")\n',
    'device = "cudafoo"\n',
    'from lightning.fabric.plugins import MixedPrecision\np = MixedPrecision("16-mixed", device="cuda")\n',
    # Devices as test data in a test that fakes the code under test.
    'import torch\nfrom unittest import mock\ndef test_strategy():\n'
    '    strategy = Strategy(device=torch.device("cuda"), accelerator=mock.Mock())\n',
    'import torch\ndef test_flops(monkeypatch):\n    monkeypatch.setattr(torch.cuda, "get_device_name", str)\n'
    '    assert flops(torch.device("cuda")) > 0\n',
])
def test_not_flagged(code):
    assert findings(code) == []


def test_a_configuration_section_overridden_by_exec_is_configuration():
    code = ('device = "cuda"\nbatch_size = 8\nexec(open("configurator.py").read())\n'
            'late_device = "cuda"\n')
    # Only the setting after the override is hardcoded.
    assert findings(code) == [(4, 15)]


# -- the fix's shapes ----------------------------------------------------------------------

def test_alias_of_torch_is_used_for_the_default():
    assert fixed('import torch as T\nx = T.zeros(1, device="cuda")\n') == (
        'import torch as T\n' + DEFAULT.replace("torch", "T") + 'x = T.zeros(1, device=device)\n'
    )


def test_from_import_of_device():
    assert fixed('import torch\nfrom torch import device as D\nmodel.to(D("cuda"))\n') == (
        'import torch\nfrom torch import device as D\n' + DEFAULT + 'model.to(device)\n'
    )


def test_multi_line_call_with_comments_keeps_its_layout():
    code = (
        "import torch\n"
        "x = torch.zeros(\n"
        "    3,  # rows\n"
        '    device="cuda",  # the GPU\n'
        "    dtype=torch.float16,\n"
        ")\n"
    )
    assert fixed(code) == (
        "import torch\n" + DEFAULT +
        "x = torch.zeros(\n"
        "    3,  # rows\n"
        "    device=device,  # the GPU\n"
        "    dtype=torch.float16,\n"
        ")\n"
    )


def test_indexed_string_in_a_multi_line_call():
    code = 'import torch\nstate = torch.load(\n    path,\n    map_location="cuda:0",\n)\n'
    assert fixed(code) == (
        'import torch\nstate = torch.load(\n    path,\n'
        '    map_location="cuda:0" if torch.cuda.is_available() else "cpu",\n)\n'
    )


def test_branch_of_an_unrelated_condition_gets_parentheses():
    assert fixed('import torch\nx = y.to("cuda:0" if first else "cpu")\n') == (
        'import torch\nx = y.to(("cuda:0" if torch.cuda.is_available() else "cpu") if first else "cpu")\n'
    )


def test_no_fix_that_would_need_an_import_of_torch():
    # The index is kept behind `torch.cuda.is_available()`, which needs torch imported.
    code = 'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("x").to("cuda:1")\n'
    (finding,) = lint_source("t.py", code, [RULE], preview=True).findings
    assert finding.fix is None
    # A plain "cuda" gets the default device, added with its `import torch`.
    code = 'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("x").to("cuda")\n'
    assert fixed(code) == (
        'from transformers import AutoModel\nimport torch\n' + DEFAULT
        + 'model = AutoModel.from_pretrained("x").to(device)\n'
    )


def test_nested_function_uses_the_enclosing_device_parameter():
    code = (
        "import torch\n"
        "def train(model, device):\n"
        "    def step(batch):\n"
        '        return model(batch.to("cuda"))\n'
        "    return step\n"
    )
    assert fixed(code, unsafe=True) == code.replace('batch.to("cuda")', "batch.to(device)")


def test_device_assigned_later_in_the_function_is_not_used_before_it_is_bound():
    code = (
        "import torch\n"
        "def main(model):\n"
        '    model.to(torch.device("cuda"))\n'
        '    device = "cpu"\n'
    )
    assert fixed(code) == code.replace(
        'torch.device("cuda")', 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    )


def test_forward_uses_its_tensor_input():
    code = (
        "import torch\nimport torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x):\n"
        '        return x + torch.ones(3, device="cuda")\n'
    )
    assert fixed(code, unsafe=True) == code.replace('device="cuda"', "device=x.device")


def test_forward_never_takes_the_device_of_an_input_read_by_string_keys():
    # `batch["mask"]`: `batch` is a mapping, `batch.device` would raise; `x` is the tensor
    code = (
        "import torch\nimport torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def forward(self, batch, x):\n"
        '        return batch["mask"] * x + torch.ones(3, device="cuda")\n'
    )
    assert findings(code) == [(5, 57)]
    assert fixed(code, unsafe=True) == code.replace('device="cuda"', "device=x.device")


def test_existing_device_keeps_torch_device_around_it():
    code = 'import torch\ndevice = "cpu"\nwith torch.device("cuda"):\n    pass\n'
    assert fixed(code, unsafe=True) == code.replace('torch.device("cuda")', "torch.device(device)")


def test_self_device_definition_and_its_uses_compose():
    code = (
        "import torch\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        '        self.device = torch.device("cuda")\n'
        '        self.model = model.to("cuda")\n'
    )
    assert fixed(code, unsafe=True) == (
        "import torch\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        '        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "        self.model = model.to(self.device)\n"
    )


def test_tdl001_and_tdl002_fixes_share_one_default_device():
    code = 'import torch\nx = torch.ones(1).cuda()\ny = torch.ones(1, device="cuda")\n'
    rules = [Rule.registry["TDL001"], RULE]
    result = lint_source("t.py", code, rules, preview=True)
    assert [f.code for f in result.findings] == ["TDL001", "TDL002"]
    assert fix_file(result).source == (
        "import torch\n" + DEFAULT + "x = torch.ones(1).to(device)\ny = torch.ones(1, device=device)\n"
    )


def test_message_names_the_string():
    (finding,) = lint_source("t.py", 'x = y.to("cuda:1")\n', [RULE], preview=True).findings
    assert finding.message.startswith('`"cuda:1"` hardcodes a CUDA device')


# -- switching it off ----------------------------------------------------------------------

def test_a_cuda_only_project_turns_the_rule_off_in_one_line(tmp_path, run_cli):
    (tmp_path / "train.py").write_text('import torch\nx = torch.zeros(3, device="cuda")\n')
    # a script with no CPU path: its finding is possible, shown with --preview
    status, out, _ = run_cli("--preview", tmp_path, cwd=tmp_path)
    assert status == 1 and "TDL002" in out
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nignore = ["TDL002"]\n')
    status, out, _ = run_cli("--preview", tmp_path, cwd=tmp_path)
    assert status == 0, out
    assert "TDL002" not in out


def test_tests_alone_can_turn_it_off(tmp_path, run_cli):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_gpu.py").write_text('import torch\nx = torch.zeros(3, device="cuda")\n')
    (tmp_path / "train.py").write_text('import torch\nx = torch.zeros(3, device="cuda")\n')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdev-lint]\nper-file-ignores = { "tests/*" = ["TDL002"] }\n'
    )
    status, out, _ = run_cli("--preview", tmp_path, cwd=tmp_path)
    assert status == 1
    assert "train.py" in out and "test_gpu.py" not in out


@pytest.mark.parametrize("code, where", [
    ('import torch\nout = move_to(out, "cuda:0")\n', (2, 20)),
    ('import torch\nx = to_device(x, "cuda")\n', (2, 18)),
    ('import torch\nx = utils.send_to_device(x, "cuda")\n', (2, 29)),
    ('import torch\ng = torch.Generator(device="cuda")\n', (2, 28)),
    ('import torch\nw = x.to(torch.cuda.current_device())\n', (2, 10)),
])
def test_positional_and_helper_device_positions(code, where):
    assert [(f.line, f.column) for f in lint_source("m.py", code, [RULE], preview=True).findings] == [where]


# -- code that can only run where CUDA is (analysis/requirements.py) ---------------------------

@pytest.mark.parametrize("code", [
    # The block already opens an NCCL process group and pins a CUDA device.
    """
    import torch
    import torch.distributed as dist
    def main():
        dist.init_process_group(backend="nccl")
        local_rank = dist.get_rank() % torch.cuda.device_count()
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(local_rank)
    """,
    # A benchmark timed by a function of the file named for CUDA.
    """
    import torch
    def cuda_timer(times):
        pass
    def benchmark(kernel):
        for batch in range(1, 17):
            q = torch.randn(batch, 8, device="cuda")
            with cuda_timer(times):
                kernel(q)
    """,
    # A TensorRT branch: the engine only runs on an NVIDIA GPU.
    """
    import torch
    def load(w, device, engine):
        if engine:
            import tensorrt as trt
            if device.type == "cpu":
                device = torch.device("cuda:0")
    """,
    # The module imports a CUDA-only library: the whole file needs CUDA.
    """
    import pycuda.driver as cuda
    import torch
    if __name__ == "__main__":
        pipe = pipe.to("cuda")
    """,
    # Every caller of a method already synchronises CUDA (through a helper).
    """
    import torch
    def flush():
        torch.cuda.reset_peak_memory_stats()
    class Profiler:
        def _setup(self):
            return make_pipe().to("cuda")
        def run(self):
            pipe = self._setup()
            flush()
    """,
    # A private helper only handed to a launcher from a test that requires two GPUs.
    """
    import torch
    def _ddp_fn(rank, world_size):
        metric = Metric().to(f"cuda:{rank}")
    @RunIf(min_cuda_gpus=2)
    def test_reduce():
        spawn(_ddp_fn, world_size=2)
    """,
    # A ROCm run of the test suite names its GPU "cuda".
    """
    def check(torch_device):
        device = torch_device if torch_device != "rocm" else "cuda"
    """,
])
def test_code_that_only_runs_on_cuda_is_not_flagged(code):
    assert findings(code) == []


@pytest.mark.parametrize("code, where", [
    # Reading memory statistics works without CUDA (they are 0): no requirement.
    ("""
    import torch
    def report(model):
        model.to("cuda")
        print(torch.cuda.max_memory_allocated())
    """, (4, 14)),
    # The requirement sits in another branch, or only under a condition.
    ("""
    import torch
    def run(model, profile):
        if profile:
            torch.cuda.synchronize()
        model.to("cuda")
    """, (6, 14)),
    # A gloo process group runs on CPUs.
    ("""
    import torch.distributed as dist
    def main(model):
        dist.init_process_group(backend="gloo")
        model.to("cuda")
    """, (5, 14)),
    # nanoGPT's DDP branch: a configurable backend, and `set_device` goes with the choice.
    ("""
    import torch
    from torch.distributed import init_process_group
    backend = "nccl"
    if ddp:
        init_process_group(backend=backend)
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    """, (7, 14)),
    # A mover named for CUDA is what a device argument would make portable.
    ("""
    def to_cuda(batch):
        return batch
    def step(batch, model):
        batch = to_cuda(batch)
        model.to("cuda")
    """, (6, 14)),
    # A public helper may be called from another module; a private one with one unguarded
    # use is not only used on GPUs.
    ("""
    def ddp_fn(rank):
        m = Metric().to(f"cuda:{rank}")
    @RunIf(min_cuda_gpus=2)
    def test_reduce():
        spawn(ddp_fn)
    """, (3, 21)),
    ("""
    def _ddp_fn(rank):
        m = Metric().to(f"cuda:{rank}")
    @RunIf(min_cuda_gpus=2)
    def test_reduce():
        spawn(_ddp_fn)
    def test_cpu():
        _ddp_fn(0)
    """, (3, 21)),
    # The requirement is in the caller's scope, not in a nested function defined there.
    ("""
    import torch
    def main():
        torch.cuda.synchronize()
        def later(model):
            model.to("cuda")
        return later
    """, (6, 18)),
])
def test_code_that_may_run_without_cuda_is_flagged(code, where):
    assert findings(code) == [where]


def test_devices_in_code_a_test_expects_to_raise_are_test_data():
    code = """
    import pytest
    import torch
    def test_wrong_device():
        with pytest.raises(ValueError, match="Device should be CPU"):
            CPUAccelerator().setup_device(torch.device("cuda"))
        CPUAccelerator().setup_device(torch.device("cuda"))
    """
    assert findings(code) == [(7, 48)]


def test_a_public_helper_counts_when_the_project_index_says_no_other_module_imports_it(tmp_path):
    from torchdev_lint.analysis import project_index

    helper = textwrap.dedent("""
    def ddp_fn(rank):
        m = Metric().to(f"cuda:{rank}")
    @RunIf(min_cuda_gpus=2)
    def test_reduce():
        spawn(ddp_fn)
    """)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("")
    (tests / "test_metric.py").write_text(helper)
    (tests / "test_other.py").write_text("import torch\n")

    def lint():
        index = project_index.build([str(tests / "test_metric.py")])
        result = lint_source(str(tests / "test_metric.py"), helper, [RULE], index=index, preview=True)
        return [(f.line, f.column) for f in result.findings]

    assert lint() == []
    assert findings(helper) == [(3, 21)]  # without the index, other modules may call it
    (tests / "test_other.py").write_text("from tests.test_metric import ddp_fn\nddp_fn(0)\n")
    assert lint() == [(3, 21)]
    (tests / "test_other.py").write_text("from .test_metric import *\n")
    assert lint() == [(3, 21)]


def test_a_loop_over_device_type_apis_takes_a_device_type():
    code = """
    from lightning.pytorch.plugins.precision import MixedPrecision, MixedPrecisionPlugin
    for plugin_cls in [MixedPrecision, MixedPrecisionPlugin]:
        plugin_cls(precision="bf16-mixed", device="cuda:0")
    for model_cls in [MixedPrecision, Net]:
        model_cls(device="cuda:0")
    """
    assert findings(code) == [(6, 22)]


PROFILER = """
import torch

def flush():
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

class Profiler:
    def __init__(self, config):
        self.config = config

    def setup_pipeline(self):
        pipe = self.config.pipeline_cls.from_pretrained()
        pipe.to("cuda")
        return pipe

    def run(self):
        pipe = self.setup_pipeline()
        flush()
        return pipe()
"""


def lint_profiler(tmp_path, other, profiler=PROFILER):
    from torchdev_lint.analysis import project_index

    package = tmp_path / "prof"
    package.mkdir(exist_ok=True)
    (package / "profiling_utils.py").write_text(textwrap.dedent(profiler))
    (package / "profile_all.py").write_text(textwrap.dedent(other))
    index = project_index.build([str(package / "profiling_utils.py")])
    result = lint_source(str(package / "profiling_utils.py"), textwrap.dedent(profiler), [RULE], index=index, preview=True)
    return [(f.line, f.column) for f in result.findings]


def test_a_public_method_only_code_that_needs_cuda_calls(tmp_path):
    # diffusers' pipeline profiler: `setup_pipeline` is called only by `run`, which needs a
    # GPU anyway (`flush` resets CUDA's peak-memory counters, which raises without one);
    # the other module builds the profiler and calls `run`, never `setup_pipeline`.
    other = "from profiling_utils import Profiler\n\nProfiler(None).run()\n"
    assert lint_profiler(tmp_path, other) == []
    assert findings(PROFILER) == [(14, 17)]  # without the index, other modules may call it


@pytest.mark.parametrize(("other", "profiler"), [
    # another module calls the method (or reaches it by name) itself
    ("from profiling_utils import Profiler\n\nProfiler(None).setup_pipeline()\n", PROFILER),
    ("from profiling_utils import Profiler\n\ngetattr(Profiler(None), 'setup_pipeline')()\n", PROFILER),
    # the file itself calls it other than through `self`, where no GPU is needed
    ("x = 1\n", PROFILER + "\nProfiler(None).setup_pipeline()\n"),
    # one caller in the class does not need CUDA
    ("x = 1\n", PROFILER + "\n    def warm(self):\n        return self.setup_pipeline()\n"),
])
def test_a_public_method_that_code_without_cuda_may_call_is_flagged(tmp_path, other, profiler):
    assert lint_profiler(tmp_path, other, profiler) == [(14, 17)]


@pytest.mark.parametrize("between, certain", [
    ("def loader(data):\n    return iter(data)\n", False),  # nothing reads the first value
    ("print(device)\n", True),  # read before it is bound again
    ("def place(x):\n    return x.to(device)\nplace(w)\n", True),  # a function reads it
])
def test_a_device_bound_again_before_anything_reads_it_places_nothing(between, certain):
    code = ('import torch\ndevice = "cuda:0"\nw = torch.ones(2)\n' + between
            + 'device = "cuda:0" if torch.cuda.is_available() else "cpu"\nw = w.to(device)\n')
    result = lint_source("t.py", code, [RULE], preview=True)
    first = [f for f in result.findings if f.line == 2]
    assert [f.confidence.value for f in first] == ["certain" if certain else "possible"]


@pytest.mark.parametrize("again, certain", [
    # the new binding reads the first value only where CUDA is present
    ('device = torch.device(device if torch.cuda.is_available() else "cpu")\n', False),
    ('device = device if torch.cuda.is_available() else "cpu"\n', False),
    # it reads it on every machine (the file runs without CUDA elsewhere): the literal is placed
    ('device = torch.device(device)\nother = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
     'x = torch.ones(2).to(other)\n', True),
])
def test_a_device_bound_again_from_itself_under_a_cuda_test(again, certain):
    code = 'import torch\ndevice = "cuda:0"\n' + again + "w = torch.ones(2).to(device)\n"
    result = lint_source("t.py", code, [RULE], preview=True)
    assert [f.confidence.value for f in result.findings if f.line == 2] == ["certain" if certain else "possible"]


SHADOWED = (
    'import torch\ndevice = "cuda"\n'
    'def train(model, device="cuda" if torch.cuda.is_available() else "cpu"):\n'
    '    return model.to(device)\n'
    'train(torch.nn.Linear(2, 2))\n'
)


@pytest.mark.parametrize("code, certain", [
    (SHADOWED, False),  # every function reads its own `device` parameter
    (SHADOWED.replace("def train(model, device=", "def train(model, dev="), True),  # reads the global
    (SHADOWED + "def evaluate(model):\n    return model.to(device)\nevaluate(torch.nn.Linear(2, 2))\n", True),
    (SHADOWED + "def evaluate(model):\n    global device\n    print(device)\n    device = 'cpu'\n"
     "evaluate(torch.nn.Linear(2, 2))\n", True),
    (SHADOWED + "print(device)\n", True),
])
def test_a_script_device_that_each_function_shadows_places_nothing(code, certain):
    from torchdev_lint.analysis import project_index
    index = project_index.ProjectIndex()
    index.add("train.py", code)
    result = lint_source("train.py", code, [RULE], preview=True, index=index)
    assert [f.confidence.value for f in result.findings if f.line == 2] == ["certain" if certain else "possible"]


# -- a device constant read only in other modules (the forty-ninth first look) -------------

CONSTANT_PROJECT = {
    "config.py": 'CUDA_DEVICE = "cuda"\nCPU_DEVICE = "cpu"\n',
    "teacher.py": """\
        import torch
        from config import CUDA_DEVICE
        DEFAULT_DEVICE = torch.device(CUDA_DEVICE if torch.cuda.is_available() else "cpu")
    """,
    "trainer.py": """\
        import torch
        from config import *
        def best_device():
            if torch.cuda.is_available():
                return CUDA_DEVICE
            return CPU_DEVICE
        def report(device):
            print("on GPU" if device == CUDA_DEVICE else "on CPU")
    """,
}


def constant_finding(files):
    from torchdev_lint.analysis import project_index
    index = project_index.ProjectIndex()
    for name, text in files.items():
        index.add(name, textwrap.dedent(text))
    (finding,) = lint_source("config.py", files["config.py"], [RULE], preview=True, index=index).findings
    return finding


def test_a_constant_its_importers_read_only_under_a_cuda_test_places_nothing():
    finding = constant_finding(CONSTANT_PROJECT)
    assert (finding.line, finding.confidence.value) == (1, "possible")
    assert any("read by the modules that import it only where CUDA is asked for" in e.message
               for e in finding.evidence)


@pytest.mark.parametrize("importer", [
    "import torch\nfrom config import CUDA_DEVICE\nmodel = torch.nn.Linear(2, 2).to(CUDA_DEVICE)\n",
    "import torch\nimport config\nmodel = torch.nn.Linear(2, 2).to(config.CUDA_DEVICE)\n",
])
def test_one_importer_that_places_with_it_keeps_the_finding(importer):
    finding = constant_finding({**CONSTANT_PROJECT, "train.py": importer})
    assert not any("read by the modules that import it" in e.message for e in finding.evidence)


@pytest.mark.parametrize("script, evidence", [
    # another module's constant, read only as the default of the user's option
    ("import argparse\nimport torch\nimport config as cfg\nparser = argparse.ArgumentParser()\n"
     "parser.add_argument('--device', default=cfg.CUDA_DEVICE)\nargs = parser.parse_args()\n"
     "device = torch.device(args.device if torch.cuda.is_available() else 'cpu')\n", True),
    # the option's name, help or type read nothing from it; another read places with it
    ("import argparse\nimport torch\nimport config as cfg\nparser = argparse.ArgumentParser()\n"
     "parser.add_argument('--device', default='cpu', help=cfg.CUDA_DEVICE)\n"
     "model = torch.nn.Linear(2, 2).to(cfg.CUDA_DEVICE)\n", False),
])
def test_a_constant_read_only_as_an_options_default_is_the_users_choice(script, evidence):
    finding = constant_finding({**CONSTANT_PROJECT, "train.py": script})
    assert any("read by the modules that import it" in e.message for e in finding.evidence) == evidence


@pytest.mark.parametrize("use, flagged", [
    # only the default of the user's option, as `default='cuda:0'` written in the call is
    ("parser.add_argument('--device', default=DEVICE, type=str)", False),
    ("parser.add_argument('--device', default=DEVICE, type=str)\n    model.to(DEVICE)", True),  # it places too
])
def test_a_device_string_that_only_defaults_an_option_is_the_users_choice(use, flagged):
    code = ("import argparse\nimport torch\n\ndef run(model):\n    DEVICE = 'cuda:0'\n"
            f"    parser = argparse.ArgumentParser()\n    {use}\n"
            "    args = parser.parse_args()\n    return model.to(args.device)\n")
    found = [(f.line, f.column) for f in lint_source("t.py", code, [RULE], preview=True).findings]
    assert found == ([(5, 14)] if flagged else [])


LOCAL = ("import torch\ndef build(x):\n{declared}    DEVICE = 'cuda'\n"
         "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n{read}    return x.to(device)\n")


@pytest.mark.parametrize("declared, read, certain", [
    ("", "", False),  # bound to a local name nothing reads: it places nothing
    ("", "    x = x.to(DEVICE)\n", True),
    ("    global DEVICE\n", "", True),  # the module's name: other code may read it
])
def test_a_device_bound_to_a_local_nothing_reads_places_nothing(declared, read, certain):
    result = lint_source("t.py", LOCAL.format(declared=declared, read=read), [RULE], preview=True)
    line = 4 if declared else 3
    assert [f.confidence.value == "certain" for f in result.findings if f.line == line] == [certain]
