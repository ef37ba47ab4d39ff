"""TDL011 (every-process-on-gpu-zero): files that start a group of processes and pick one
fixed GPU without ever setting each process's device; what counts as setting it, as a rank
index, as code outside the group; and the fix that sets the device after the start."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Applicability, Confidence
from torchdev_lint.fixer import fix_file
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL011"]
HEAD = "import os\nimport torch\nimport torch.distributed as dist\n"
START = "dist.init_process_group('nccl')\n"


def lint(code, preview=True):
    return lint_source("example.py", HEAD + textwrap.dedent(code), [RULE], preview=preview)


def positions(code):
    """(line, column) of each finding, lines counted after the three import lines."""
    return [(f.line - 3, f.column) for f in lint(code).findings]


@pytest.mark.parametrize("code", [
    # Each process sets its device (or sees one GPU only).
    START + "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\nmodel = Net().cuda()\n",
    START + "torch.accelerator.set_device_index(rank)\nmodel = Net().cuda()\n",
    START + "with torch.cuda.device(rank):\n    model = Net().cuda()\n",
    "os.environ['CUDA_VISIBLE_DEVICES'] = str(rank)\n" + START + "model = Net().cuda()\n",
    # A CPU group, or no group at all.
    "dist.init_process_group(backend='gloo')\nmodel = Net().cuda()\n",
    "model = Net().cuda()\nx = torch.zeros(2, device='cuda')\n",
    # Devices indexed by the rank.
    START + "model = Net().cuda(local_rank)\n",
    START + "device = torch.device(f'cuda:{rank}')\nmodel = Net().to(device)\n",
    START + "model = Net().to(torch.device('cuda', local_rank))\n",
    # Device types, not devices.
    START + "with torch.autocast('cuda'):\n    pass\nscaler = torch.amp.GradScaler('cuda')\n"
    "with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n    pass\n",
    START + "if str(device) == 'cuda':\n    pass\n",
    # A library that places each process itself.
    "from accelerate import Accelerator\n" + START + "model = Net().cuda()\n",
    "import lightning as L\n" + START + "model = Net().cuda()\n",
    # Code that runs in one process at most, or outside the group.
    START + "if dist.get_rank() == 0:\n    evaluate(Net().cuda())\n",
    START + "if is_main_process():\n    evaluate(Net().cuda())\n",
    START + "if args.local_rank in [-1, 0]:\n    probe = torch.zeros(1, device='cuda')\n",
    "if args.distributed:\n    " + START + "    device = torch.device('cuda', args.local_rank)\n"
    "else:\n    device = torch.device('cuda')\n",
    "if not args.distributed:\n    model = Net().cuda()\nelse:\n    " + START
    + "    model = Net().cuda(args.gpu)\n",
    "if world_size > 1:\n    " + START + "if world_size == 1:\n    model = Net().cuda()\n",
    # A helper from elsewhere that, by its name, may set the device.
    START + "device = utils.get_device('cuda')\nmask = torch.ones(2, device='cuda')\n",
    START + "init_distributed_mode(args)\nmodel = Net().cuda()\n",
    # Somebody else's init_process_group (a Ray/vLLM stateless group).
    "from .utils import stateless_init_process_group\ng = stateless_init_process_group(a, p, r, w)\n"
    "v = torch.tensor([0], device='cuda')\n",
    # LOCAL_RANK not read from the environment: a test patching it in.
    "with mock.patch.dict(os.environ, {'LOCAL_RANK': '1'}):\n    device = torch.device('cuda')\n",
    # Processes that talk through the CPU (RPC, gloo) may share a GPU on purpose.
    "import torch.multiprocessing as mp\nfrom torch.distributed import rpc\n"
    "def run(rank):\n    rpc.init_rpc(f'w{rank}', rank=rank, world_size=2)\n    x = torch.ones(1).cuda()\n"
    "mp.spawn(run, nprocs=2)\n",
    "import torch.multiprocessing as mp\n"
    "def run(rank):\n    dist.init_process_group('gloo', rank=rank, world_size=2)\n    x = torch.ones(1).cuda()\n"
    "mp.spawn(run, nprocs=2)\n",
    # A group of one process.
    "dist.init_process_group('nccl', rank=0, world_size=1)\nmodel = Net().cuda()\n",
    # Spawned code from another file sets its device there.
    "import torch.multiprocessing as mp\nfrom .launch import run\nmp.spawn(run, nprocs=2)\n"
    "def stats():\n    return torch.zeros(1).cuda()\n",
    # A helper module (no __main__ block): the caller may set the device after the start;
    # only the starting function itself counts.
    "def init_distributed():\n    dist.init_process_group('nccl')\n"
    "def all_gather(x):\n    size = torch.tensor([x.numel()], device='cuda')\n",
])
def test_not_flagged(code):
    assert positions(code) == []


@pytest.mark.parametrize("code, where", [
    (START + "model = Net().cuda()\n", [(2, 9)]),
    (START + "x = torch.zeros(2, device='cuda:0')\n", [(2, 5)]),
    (START + "device = torch.device('cuda')\nmodel = Net().to(device)\n", [(2, 10)]),
    (START + "model = Net().to('cuda')\n", [(2, 9)]),
    # torchrun's LOCAL_RANK read, no group started in this file.
    ("local_rank = int(os.environ['LOCAL_RANK'])\nmodel = Net().cuda()\n", [(2, 9)]),
    ("rank = os.environ.get('LOCAL_RANK', '0')\nmodel = Net().cuda()\n", [(2, 9)]),
    ("rank = int(os.getenv('LOCAL_RANK', 0))\nmodel = Net().cuda()\n", [(2, 9)]),
    # mp.spawn: the spawned function picks GPU 0 in every process.
    ("import torch.multiprocessing as mp\ndef run(rank):\n    x = torch.ones(1).cuda()\n"
     "mp.spawn(run, nprocs=2)\n", [(3, 9)]),
    # One finding per file, at the first pick; a guard for CUDA is no guard for the rank.
    (START + "if torch.cuda.is_available():\n    model = Net().cuda()\nbatch = batch.cuda()\n",
     [(3, 13)]),
    # The helper that starts the group picks GPU 0 itself.
    ("def init_distributed():\n    dist.init_process_group('nccl')\n    return torch.device('cuda')\n",
     [(3, 12)]),
])
def test_flagged(code, where):
    assert positions(code) == where


def test_finding_is_possible_and_names_the_start_and_every_pick():
    code = START + "model = Net().cuda()\nbatch = batch.to('cuda')\n"
    (finding,) = lint(code).findings
    assert finding.confidence is Confidence.POSSIBLE
    assert [(e.line - 3, e.column) for e in finding.evidence] == [(1, 1), (2, 9), (3, 9)]
    assert "process group starts here" in finding.evidence[0].message
    assert lint(code, preview=False).findings == []


def fixed(code):
    outcome = fix_file(lint(code), unsafe=True)
    assert outcome.error is None
    return outcome.source[len(HEAD):]


@pytest.mark.parametrize("code, after", [
    # The local rank bound after the start: set the device once it is bound.
    (START + "local_rank = int(os.environ['LOCAL_RANK'])\nmodel = Net().cuda()\n",
     START + "local_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\n"
     "model = Net().cuda()\n"),
    # An `args.local_rank` the code already has, inside a function.
    ("def main(args):\n    " + START
     + "    model = Net().cuda()\n    return DDP(model, device_ids=[args.local_rank])\n",
     "def main(args):\n    " + START + "    torch.cuda.set_device(args.local_rank)\n    model = Net().cuda()\n"
     "    return DDP(model, device_ids=[args.local_rank])\n"),
    # torchrun's variable read elsewhere in the file.
    ("def rank():\n    return int(os.environ['LOCAL_RANK'])\n" + START + "model = Net().cuda()\n",
     "def rank():\n    return int(os.environ['LOCAL_RANK'])\n" + START
     + "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))\nmodel = Net().cuda()\n"),
])
def test_fix_sets_the_device_after_the_start(code, after):
    (finding,) = lint(code).findings
    assert finding.fix.applicability is Applicability.UNSAFE
    assert fixed(code) == after
    assert lint(after).findings == []


@pytest.mark.parametrize("code", [
    START + "model = Net().cuda()\n",  # no local rank in sight
    "if dist.init_process_group('nccl') is None:\n    local_rank = 0\nmodel = Net().cuda()\n",
    "import torch.multiprocessing as mp\ndef run(rank):\n    x = torch.ones(1).cuda()\nmp.spawn(run, nprocs=2)\n",
    # The model is placed before the device could be set: setting it after would not move it.
    "def main(local_rank):\n    model = Net().cuda()\n    " + START + "    return model\n",
    START + "device = torch.device('cuda')\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
])
def test_no_fix_without_a_local_rank_and_a_start_statement(code):
    (finding,) = lint(code).findings
    assert finding.fix is None
