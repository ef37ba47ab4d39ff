"""TDL001 hardcoded-cuda-call in code that can only run where CUDA is: silent as TDL002 is for
its device strings (the same analysis, analysis/requirements.py), flagged where the code
around it could run anywhere."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.analysis.project_index import build
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

TDL001, TDL002 = Rule.registry["TDL001"], Rule.registry["TDL002"]


def findings(code, rules=(TDL001,), **options):
    """What the analysis finds, in every tier (tiers: tests/test_confidence.py)."""
    result = lint_source("t.py", textwrap.dedent(code), list(rules), preview=True, **options)
    return [(f.code, f.line, f.column) for f in result.findings]


@pytest.mark.parametrize("code", [
    # CUDA events and synchronize in the same function.
    "import torch\ndef bench(model, x):\n    torch.cuda.synchronize()\n    return model.cuda()(x.cuda())\n",
    # An NCCL group opened at the top of the script: the whole file needs CUDA.
    "import torch.distributed as dist\ndist.init_process_group(backend='nccl')\nmodel = Net().cuda()\n",
    # TensorRT imported in the same block.
    "def build(engine_path, x):\n    import tensorrt as trt\n    return x.cuda()\n",
    # FlowNet2's correlation kernel, imported at the top as optical-flow code does: no CPU back end.
    "from correlation_package.correlation import Correlation\ndevice = 'cuda' if torch.cuda.is_available() "
    "else 'cpu'\ndef warp(x):\n    return Correlation()(x, x.cuda())\n",
    # Timed by a function of the file named for CUDA.
    "def cuda_timer():\n    pass\ndef step(model, x):\n    with cuda_timer():\n        return model(x.cuda())\n",
    # A private helper only handed on from a test that requires two GPUs.
    "def _ddp_fn(rank):\n    m = Metric().cuda(rank)\n"
    "@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(_ddp_fn, world_size=2)\n",
    # A helper that needs CUDA itself, called first.
    "import torch\ndef flush():\n    torch.cuda.reset_peak_memory_stats()\n"
    "def run(model):\n    flush()\n    model.cuda()\n",
    # The current CUDA device is asked for first: that raises without CUDA.
    "import torch\ndef wrap(model):\n    device_id = torch.cuda.current_device()\n"
    "    return DDP(model.cuda(device_id), device_ids=[device_id])\n",
    # A helper that stops the run without CUDA, called after the line.
    "import torch\ndef distribute(model):\n    if torch.cuda.is_available():\n        model.to('cuda')\n"
    "    else:\n        raise NotImplementedError('needs a GPU')\n"
    "def evaluate(model):\n    x = torch.ones(2).cuda()\n    distribute(model)\n",
    "import sys\nimport torch\nif not torch.cuda.is_available():\n    sys.exit('needs a GPU')\nmodel = Net().cuda()\n",
])
def test_not_flagged_in_code_that_needs_cuda_anyway(code):
    assert findings(code) == []


@pytest.mark.parametrize("code, where", [
    # Memory readers return 0 without CUDA: they need nothing.
    ("import torch\ndef report(model):\n    model.cuda()\n    print(torch.cuda.max_memory_allocated())\n",
     (3, 5)),
    # A requirement only under a condition, or only in another function, says nothing here.
    ("import torch\ndef step(model, x, timing):\n    if timing:\n        torch.cuda.synchronize()\n"
     "    return model(x.cuda())\n", (5, 18)),
    ("import torch\ndef sync():\n    torch.cuda.synchronize()\ndef step(model):\n    return model.cuda()\n",
     (5, 12)),
    # A gloo group runs on the CPU.
    ("import torch.distributed as dist\ndist.init_process_group(backend='gloo')\nmodel = Net().cuda()\n",
     (3, 9)),
    # A private helper also called where no GPU is required.
    ("def _ddp_fn(rank):\n    m = Metric().cuda(rank)\n"
     "@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(_ddp_fn)\ndef test_cpu():\n    _ddp_fn(0)\n",
     (2, 9)),
    # Without CUDA the helper only returns: the run goes on.
    ("import torch\ndef distribute(model):\n    if not torch.cuda.is_available():\n        return\n"
     "    model.to('cuda')\ndef evaluate(model):\n    x = torch.ones(2).cuda()\n    distribute(model)\n", (7, 9)),
    # `set_device` of the device string the code chose goes with that choice: fixing the
    # choice fixes both.
    ("import torch\ndef main(rank, model):\n    device = f'cuda:{rank}'\n    torch.cuda.set_device(device)\n"
     "    model.cuda()\n", (5, 5)),
])
def test_flagged_where_the_code_could_run_anywhere(code, where):
    assert findings(code) == [("TDL001", *where)]


def test_code_that_sets_a_cuda_device_by_number_needs_cuda_anyway():
    # `torch.cuda.set_device` raises without CUDA whatever it is given: the `.cuda()` after
    # it costs no machine anything.
    code = "import torch\ndef main(rank, model):\n    torch.cuda.set_device(rank)\n    model.cuda()\n"
    assert findings(code) == []


def test_both_rules_agree_on_the_same_block():
    code = "import torch\ndef bench(model, x):\n    torch.cuda.synchronize()\n" \
           "    x = x.to('cuda')\n    return model.cuda()(x)\n"
    assert findings(code, (TDL001, TDL002)) == []
    code = code.replace("synchronize", "max_memory_allocated")
    assert findings(code, (TDL001, TDL002)) == [("TDL002", 4, 14), ("TDL001", 5, 12)]


def test_a_public_helper_is_silent_only_while_no_other_module_imports_it(tmp_path):
    helper = "def ddp_fn(rank):\n    Metric().cuda(rank)\n" \
             "@RunIf(min_cuda_gpus=2)\ndef test_reduce():\n    spawn(ddp_fn)\n"
    (tmp_path / "test_metric.py").write_text(helper)
    (tmp_path / "other.py").write_text("x = 1\n")
    path = str(tmp_path / "test_metric.py")
    index = build([path, str(tmp_path / "other.py")])
    assert lint_source(path, helper, [TDL001], index=index, preview=True).findings == []
    (tmp_path / "other.py").write_text("from test_metric import ddp_fn\nddp_fn(0)\n")
    index = build([path, str(tmp_path / "other.py")])
    assert [(f.line, f.column) for f in lint_source(path, helper, [TDL001], index=index, preview=True).findings] == [(2, 5)]
    # Without an index (one file at a time) a public function stays checked.
    assert [(f.line, f.column) for f in lint_source(path, helper, [TDL001], preview=True).findings] == [(2, 5)]


# -- what the fix may do safely ------------------------------------------------------------

def fix_of(code):
    from torchdev_lint.fixer import fix_file

    result = lint_source("t.py", textwrap.dedent(code), [TDL001], preview=True)
    [finding] = result.findings
    return finding.fix.applicability.value, fix_file(result, unsafe=True).source


@pytest.mark.parametrize("index", ["0", "1", "'cuda:1'", "int(os.environ['LOCAL_RANK'])",
                                   "torch.cuda.current_device()"])
def test_an_index_that_is_never_none_is_kept_by_a_safe_fix(index):
    code = f"import os\nimport torch\ndef load(x):\n    return x.cuda({index})\n"
    applicability, source = fix_of(code)
    assert applicability == "safe"
    assert f'x.to({index} if torch.cuda.is_available() else "cpu")' in source


@pytest.mark.parametrize("call", ["x.cuda(gpu)", "x.cuda(device=gpu)", "x.cuda(gpu, non_blocking=True)"])
def test_an_index_that_may_be_none_makes_the_fix_unsafe(call):
    # `.cuda(None)` moves to the current GPU; `.to(None)` moves nothing: with `gpu=None` the
    # fixed program would leave the tensor on the CPU of a GPU machine
    code = f"import torch\ndef load(x, gpu=None):\n    return {call}\n"
    assert findings(code) == [("TDL001", 3, 12)]
    assert fix_of(code)[0] == "unsafe"


def test_the_default_device_is_not_added_where_the_file_reads_a_device_it_does_not_bind():
    # `device` comes from the star import: a module-level default would replace it for
    # `model.to(device)` too. The default is spelled out where it is used instead.
    code = (
        "import torch\nfrom settings import *\n\n\ndef run(model, x):\n"
        "    model.to(device)\n    return model(x.cuda())\n"
    )
    applicability, source = fix_of(code)
    assert applicability == "safe"
    assert source == code.replace(
        "x.cuda()", 'x.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))')


def test_the_default_device_is_added_where_every_read_of_device_is_bound():
    # a parameter and a local of that name read in their own functions: nothing changes
    code = (
        "import torch\n\n\ndef place(model, device):\n    return model.to(device)\n\n\n"
        "def other(model):\n    device = 'cpu'\n    return model.to(device)\n\n\n"
        "def run(model, x):\n    return model(x.cuda())\n"
    )
    applicability, source = fix_of(code)
    assert applicability == "safe"
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in source
    assert "model(x.to(device))" in source


# -- code that runs only in a process group the file opens with NCCL -----------------------

DIST = textwrap.dedent("""\
    import torch
    import torch.distributed as dist


    def is_dist_avail_and_initialized():
        if not dist.is_available():
            return False
        if not dist.is_initialized():
            return False
        return True


    def get_world_size():
        if not is_dist_avail_and_initialized():
            return 1
        return dist.get_world_size()


    def sync(count):
        if not is_dist_avail_and_initialized():
            return
        t = torch.tensor([count], device="cuda")
        dist.all_reduce(t)
        return t.item()


    def mean(x):
        world_size = get_world_size()
        if world_size > 1:
            y = torch.tensor(x).cuda()
            dist.all_reduce(y)
            return y.item() / world_size
        return x


    def gather(data):
        if get_world_size() == 1:
            return [data]
        size = torch.tensor([len(data)], device="cuda")
        return size


    def init(args):
        args.dist_backend = "nccl"
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url)
    """)


def test_code_that_runs_only_in_a_process_group_the_file_opens_with_nccl_needs_cuda():
    # every group this file opens is NCCL, and these blocks run only inside one
    assert findings(DIST, (TDL001, TDL002)) == []


@pytest.mark.parametrize("change", [
    # the file also opens gloo groups: the same blocks run on a CPU
    ('    args.dist_backend = "nccl"\n', '    args.dist_backend = "nccl" if args.gpu else "gloo"\n'),
    ('dist.init_process_group(backend=args.dist_backend', 'dist.init_process_group(backend=args.backend'),
    # the file opens no group at all: whoever does may use gloo
    ("    dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n", "    pass\n"),
])
def test_a_group_that_may_not_be_nccl_says_nothing(change):
    code = DIST.replace(*change)
    assert findings(code, (TDL001, TDL002)) == [
        ("TDL002", 22, 38), ("TDL001", 30, 13), ("TDL002", 39, 45)]


@pytest.mark.parametrize("change", [
    # the guard does not return, or is true without a group too: the statement also runs without a
    # group, but the all_reduce after it raises there, so the function completes only in one (NCCL)
    ("        return\n    t = torch", "        print('alone')\n    t = torch"),
    ("if world_size > 1:", "if world_size >= 1:"),
])
def test_a_block_that_all_reduces_whenever_it_runs_needs_the_group(change):
    assert findings(DIST.replace(*change), (TDL001, TDL002)) == []


@pytest.mark.parametrize("change", [
    # a guard that is true without a group too, before code that needs no group
    ("if get_world_size() == 1:", "if get_world_size() == 2:"),
    # the helper answers True without a group
    ("    if not dist.is_initialized():\n        return False\n", ""),
])
def test_blocks_that_may_run_without_a_group_stay_flagged(change):
    code = DIST.replace(*change)
    assert findings(code, (TDL001, TDL002))


COMM = textwrap.dedent("""
    import pickle
    import torch
    from torch import distributed as dist


    def get_world_size():
        if not dist.is_available():
            return 1
        if not dist.is_initialized():
            return 1
        return dist.get_world_size()


    def all_gather(data):
        world_size = get_world_size()
        if world_size == 1:
            return [data]
        tensor = torch.ByteTensor(torch.ByteStorage.from_buffer(pickle.dumps(data))).to("cuda")
        sizes = [torch.IntTensor([0]).cuda() for _ in range(world_size)]
        dist.all_gather(sizes, torch.IntTensor([tensor.numel()]).cuda())
        return sizes
    """)
TRAIN = "import torch\n\ndef main(args):\n    if args.distributed:\n        torch.distributed.init_process_group(backend=\"nccl\", init_method=\"env://\")\n"
COMM_FINDINGS = [("TDL002", 19, 85), ("TDL001", 20, 14), ("TDL001", 21, 28)]


def lint_comm(tmp_path, train=TRAIN, comm=COMM):
    from torchdev_lint.analysis import project_index

    for name, text in {"comm.py": comm, "train.py": train}.items():
        (tmp_path / name).write_text(text)
    index = project_index.build([str(tmp_path / "comm.py")])
    result = lint_source(str(tmp_path / "comm.py"), comm, [TDL001, TDL002], index=index, preview=True)
    return [(f.code, f.line, f.column) for f in result.findings]


def test_a_process_group_helper_of_a_project_that_opens_nccl_groups_only(tmp_path):
    # maskrcnn-benchmark's `comm.all_gather` (copied into stylegan2-pytorch and many
    # detection projects): it runs only inside a process group, and the project's one
    # `init_process_group` is NCCL, so it runs on NVIDIA GPUs whatever its device strings say.
    assert lint_comm(tmp_path) == []
    assert findings(COMM, (TDL001, TDL002)) == COMM_FINDINGS  # alone: whoever opens a group may use gloo


@pytest.mark.parametrize(("train", "comm"), [
    # another backend, or one chosen at run time
    (TRAIN.replace('backend="nccl"', 'backend="gloo"'), COMM),
    (TRAIN.replace('backend="nccl"', "backend=args.backend"), COMM),
    # a launcher that picks the backend itself (gloo on a CPU)
    (TRAIN + "\nfrom accelerate import Accelerator\n", COMM),
    # no group opened anywhere in the project
    ("import torch\n", COMM),
    # the world size is also 1 under a test that says nothing about groups
    (TRAIN, COMM.replace("if not dist.is_available():", "if torch.cuda.device_count() < 2:")),
])
def test_a_process_group_helper_whose_groups_may_run_on_a_cpu(tmp_path, train, comm):
    assert lint_comm(tmp_path, train, comm) == COMM_FINDINGS


def test_another_project_in_the_same_run_does_not_decide(tmp_path):
    # one run over two projects: the gloo of the other one says nothing about this one
    from torchdev_lint.analysis import project_index

    (tmp_path / "proj").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "proj/comm.py").write_text(COMM)
    (tmp_path / "proj/train.py").write_text(TRAIN)
    (tmp_path / "other/run.py").write_text('import torch\ntorch.distributed.init_process_group("gloo")\n')
    index = project_index.build([str(tmp_path / "proj/comm.py"), str(tmp_path / "other/run.py")])
    result = lint_source(str(tmp_path / "proj/comm.py"), COMM, [TDL001, TDL002], index=index, preview=True)
    assert result.findings == []
    (tmp_path / "proj/train.py").write_text(TRAIN + '\ndef cpu():\n    torch.distributed.init_process_group("gloo")\n')
    index = project_index.build([str(tmp_path / "proj/comm.py"), str(tmp_path / "other/run.py")])
    result = lint_source(str(tmp_path / "proj/comm.py"), COMM, [TDL001, TDL002], index=index, preview=True)
    assert [(f.code, f.line, f.column) for f in result.findings] == COMM_FINDINGS


@pytest.mark.parametrize("loss, confidence", [
    # no weight: the module holds no tensor, and its `.cuda()` moves nothing
    ("torch.nn.CrossEntropyLoss()", "possible"),
    ("torch.nn.CrossEntropyLoss(reduction='sum')", "possible"),
    # a weight tensor: `.cuda()` moves it, and fails without CUDA
    ("torch.nn.CrossEntropyLoss(weight=torch.ones(3))", "certain"),
])
def test_a_loss_bound_to_a_name_that_holds_no_tensor(loss, confidence):
    code = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "def train(model, loader):\n    criterion = " + loss + "\n    model.to(device)\n"
            "    criterion.cuda()\n    for x, y in loader:\n        criterion(model(x.to(device)), y.to(device))\n")
    result = lint_source("t.py", code, [TDL001], preview=True)
    assert [(f.line, f.confidence.value) for f in result.findings] == [(6, confidence)]


@pytest.mark.parametrize("cast, confidence", [
    # a CUDA tensor type copies to the GPU, as `.cuda()` does: fails in the CPU run the script offers
    ("labels.type(torch.cuda.LongTensor)", "certain"),
    ("labels.type('torch.cuda.LongTensor')", "certain"),
])
def test_a_cast_to_a_cuda_tensor_type_is_a_hardcoded_cuda_call(cast, confidence):
    code = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "def step(model, x):\n    labels = torch.arange(4)\n    labels = " + cast + "\n"
            "    return model(x.to(device)), labels\n")
    result = lint_source("t.py", code, [TDL001], preview=True)
    assert [(f.line, f.column, f.confidence.value) for f in result.findings] == [(5, 14, confidence)]


@pytest.mark.parametrize("cast", [
    "labels.type(torch.LongTensor)",  # a CPU type
    "labels.type(torch.cuda.LongTensor if torch.cuda.is_available() else torch.LongTensor)",
    "labels.type(dtype)",
])
def test_other_casts_are_not_flagged(cast):
    code = ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "def step(labels, dtype):\n    return " + cast + "\n")
    assert findings(code) == []


@pytest.mark.parametrize("importer, confidence", [
    # the package exports the class only: the helper's device is the file's own 'cuda', always
    ("from .measure import Metric\n", "possible"),
    # another module imports the helper by name: it may hand it the CPU
    ("from .measure import Metric, measure\n", "certain"),
])
def test_a_device_parameter_every_call_fills_with_cuda_offers_no_cpu_path(tmp_path, importer, confidence):
    package = tmp_path / "metrics"
    package.mkdir()
    measure = ("import torch\ndef measure(model, device):\n    model.to(device)\n    return model(torch.ones(2).cuda())\n"
               "class Metric:\n    def __call__(self, model):\n        return measure(model, 'cuda')\n")
    (package / "__init__.py").write_text(importer)
    (package / "measure.py").write_text(measure)
    (tmp_path / "main.py").write_text("import torch\nfrom metrics import Metric\n"
                                      "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                                      "print(Metric()(torch.nn.Linear(2, 2).to(device)))\n")
    paths = [str(package / "__init__.py"), str(package / "measure.py"), str(tmp_path / "main.py")]
    index = build(paths)
    result = lint_source(paths[1], measure, [TDL001], index=index, preview=True)
    assert [(f.line, f.confidence.value) for f in result.findings] == [(4, confidence)]


# -- a module that holds nothing to move ------------------------------------------------------

LOSSES = """\
import torch.nn as nn

class DiceLoss(nn.Module):
    def __init__(self, n_classes, smooth=1e-5):
        super().__init__()
        self.n_classes = n_classes
        self.smooth = smooth
        self.history = []

    def forward(self, x, y):
        return 1 - (x * y).sum() / (x.sum() + y.sum() + self.smooth)

class Weighted(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = nn.Parameter(weight)

class Wrapped(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

class Remembers(nn.Module):
    def forward(self, x):
        self.last = x
        return x
"""


@pytest.mark.parametrize("line, certain", [
    ("DiceLoss(2).cuda()", False),  # keeps only numbers: nothing to move, nothing fails
    ("DiceLoss(n_classes=2, smooth=0.1).cuda()", False),
    ("DiceLoss(model).cuda()", True),  # a module kept on self is registered: it moves
    ("Weighted(torch.ones(2)).cuda()", True),  # a parameter
    ("Wrapped(None).cuda()", False),
    ("Wrapped(nn.Linear(2, 2)).cuda()", True),
    ("Remembers().cuda()", True),  # what forward keeps is not known to be plain
])
def test_a_project_module_that_keeps_only_plain_values_moves_nothing(tmp_path, line, certain):
    script = ("import torch\nimport torch.nn as nn\nfrom losses import DiceLoss, Weighted, Wrapped, Remembers\n"
              "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
              f"model = nn.Linear(2, 2).to(device)\ncriterion = {line}\n")
    (tmp_path / "losses.py").write_text(LOSSES)
    (tmp_path / "train.py").write_text(script)
    path = str(tmp_path / "train.py")
    result = lint_source(path, script, [TDL001], index=build([path]), preview=True)
    [finding] = result.findings
    assert (finding.line, finding.column) == (6, 13)
    assert (finding.confidence.value == "certain") is certain
