from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import distributed, tree
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# Parameters that hold the local rank in a function `mp.spawn` runs.
_RANK_PARAMETERS = ("local_rank", "gpu", "rank", "gpu_id", "device_id", "proc_id")
_MAX_EVIDENCE_PICKS = 3


class EveryProcessOnGpuZero(Rule):
    """
    ## What it does
    Flags a file that starts a group of processes (`torch.distributed.init_process_group`
    with a GPU backend or none, `torch.multiprocessing.spawn`, or a read of torchrun's
    `LOCAL_RANK`) and picks its device without the rank: `.cuda()` with no index,
    `torch.device("cuda")`, `.to("cuda")`, `device="cuda:0"`, or
    `device = "cuda" if ... else "cpu"`, while it never sets each process's device:
    no `torch.cuda.set_device(...)`, `torch.accelerator.set_device_index(...)`,
    `with torch.cuda.device(...)`, nor `CUDA_VISIBLE_DEVICES`, and no call of a helper from
    elsewhere whose name says it may set it (`utils.get_device(...)`, `setup_device()`,
    `init_distributed_mode(args)`, `setup_ddp(rank)`). `LOCAL_RANK` counts where it is read
    from the environment (`os.environ["LOCAL_RANK"]`, `.get`, `os.getenv`), and
    `init_process_group` where it is torch's. One finding per file, at the
    first such pick.

    In a file that is no entry point (no `if __name__ == "__main__":` block, and the group
    starts inside a function), only picks in the function that starts the group count: the
    caller in another file may set the device after it returns. `mp.spawn` counts only when
    the function it spawns is defined in the same file.

    It does not flag files that start a `gloo`/`mpi` group or RPC (`rpc.init_rpc`): their
    processes talk through the CPU and may share a GPU on purpose; nor a group of
    `world_size=1`, files that import a library that places
    each process itself (Accelerate, Lightning, the `transformers` Trainer, Ignite's
    `distributed`, Horovod), device names with an index from the rank
    (`f"cuda:{rank}"`, `torch.device("cuda", local_rank)`, `.cuda(local_rank)`), nor picks
    in code that runs in one process at most or outside the group: under
    `if rank == 0:`, `if is_main_process():`, `if not args.distributed:`,
    `if local_rank == -1:`, in the `else:` of `if args.distributed:`, or in the other branch
    of the `if` that starts the group. `autocast("cuda")` and `GradScaler("cuda")` name a
    device type, not a device.

    ## Why is this bad?
    Every process of the group runs the same code, and `"cuda"` means the *current* device,
    which is GPU 0 until the process sets it. So every rank puts its model and batches on
    GPU 0: NCCL fails with "Duplicate GPU detected", GPU 0 runs out of memory, or
    `DistributedDataParallel(model, device_ids=[local_rank])` raises because the module is
    on another device than the one named. On one GPU (or on a CPU machine) the code works.

    ## Fix
    Inserts `torch.cuda.set_device(<local rank>)` right after the group starts (after the
    statement that binds the local rank, if that comes later in the same block), with the
    local rank the code already has (and no pick of the same function comes before that line):
    a `local_rank` name, an `args.local_rank` attribute,
    `int(os.environ["LOCAL_RANK"])` where the file reads it, or the rank parameter of the
    function `mp.spawn` runs. Without one of those, or when the group does not start in a
    statement line of its own, no fix is offered.

    Fix safety: unsafe. On several nodes only the *local* rank is right, and the code
    after the start now runs on another device than before (which is the point, but
    anything that relied on GPU 0, like a checkpoint loaded with `map_location="cuda:0"`,
    needs a look).

    ## At run time
    `torchdev-lint trace` runs the program again as two ranks of one process group
    (torchrun's environment, a gloo group, two simulated GPUs): two ranks putting tensors on
    the same device index confirm it, with each rank's first use; each rank on its own device
    refutes it ([trace](../trace.md)).

    ## When not to use
    When a launcher gives each process a single visible GPU (`CUDA_VISIBLE_DEVICES` set
    per process outside the code): then `"cuda"` is that process's GPU.
    """

    code = "TDL011"
    preview = True  # new: first-look precision not measured on enough findings yet
    name = "every-process-on-gpu-zero"
    message = "The processes of a group all pick the same GPU: set each one's device from its local rank"
    fix_title = "Set the device from the local rank after the group starts"

    VALID = [
        Valid("import os\nimport torch\nimport torch.distributed as dist\n"
              "dist.init_process_group('nccl')\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
              "torch.cuda.set_device(local_rank)\nmodel = Net().cuda()\n"),
        Valid("import torch\nimport torch.distributed as dist\n"
              "def main(rank, world_size):\n    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
              "    device = torch.device('cuda', rank)\n    model = Net().to(device)\n"),
        Valid("import torch\nimport torch.distributed as dist\n"
              "dist.init_process_group('gloo')\nmodel = Net().cuda()\n"),
        Valid("import torch\nmodel = Net().cuda()\nx = torch.zeros(3, device='cuda')\n"),
        Valid("import torch\nimport torch.distributed as dist\n"
              "def main(args):\n    if args.distributed:\n        dist.init_process_group('nccl')\n"
              "        device = torch.device(f'cuda:{args.local_rank}')\n"
              "    else:\n        device = torch.device('cuda')\n    return device\n"),
        Valid("import torch\nimport torch.distributed as dist\n"
              "dist.init_process_group('nccl')\nif dist.get_rank() == 0:\n    probe = Net().cuda()\n"),
    ]
    INVALID = [
        Invalid(
            "import os\nimport torch\nimport torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "def main():\n    dist.init_process_group(backend='nccl')\n"
            "    local_rank = int(os.environ['LOCAL_RANK'])\n"
            "    model = Net().cuda()\n"
            "    model = DDP(model, device_ids=[local_rank])\n",
            9, 13,
            "import os\nimport torch\nimport torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "def main():\n    dist.init_process_group(backend='nccl')\n"
            "    local_rank = int(os.environ['LOCAL_RANK'])\n"
            "    torch.cuda.set_device(local_rank)\n"
            "    model = Net().cuda()\n"
            "    model = DDP(model, device_ids=[local_rank])\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n"
            "def worker(rank, world_size):\n"
            "    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
            "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "    model = Net().to(device)\n\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n",
            7, 14,
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n"
            "def worker(rank, world_size):\n"
            "    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
            "    torch.cuda.set_device(rank)\n"
            "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "    model = Net().to(device)\n\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch.distributed import init_process_group\n\n"
            "def setup():\n    init_process_group()\n\n"
            "def train(model, loader):\n    setup()\n"
            "    model.to(torch.device('cuda'))\n\n"
            "if __name__ == '__main__':\n    train(Net(), loader)\n",
            9, 14,
            None,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return ("init_process_group" in source or "spawn" in source or "LOCAL_RANK" in source) and "cuda" in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.starts: list[tuple[cst.CSTNode, str, tuple]] = []
        self.picks: list[tuple[cst.CSTNode, str, tuple]] = []
        self.sets_device = False
        self.module: cst.Module | None = None
        self.order: dict[int, int] = {}  # starts and picks (by id) in source order

    def _visit(self, node: cst.CSTNode) -> None:
        if self.sets_device:
            return
        if (distributed.sets_device(self.ctx, node) or distributed.may_set_device(self.ctx, node)
                or distributed.communicates_on_cpu(self.ctx, node)):
            self.sets_device = True
            return
        started = distributed.starts_group(self.ctx, node)
        if started is not None:
            self.order[id(node)] = len(self.order)
            self.starts.append((node, started, tuple(self.ctx.ancestors)))
            return
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        picked = distributed.fixed_pick(node, parent)
        if picked is not None and not distributed.outside_group(self.ctx.ancestors):
            where = node.value if isinstance(node, cst.Assign) else node
            self.order[id(where)] = len(self.order)
            self.picks.append((where, picked, tuple(self.ctx.ancestors)))

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node

    def visit_Call(self, node: cst.Call) -> None:
        self._visit(node)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._visit(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._visit(node)

    def end_of_file(self) -> None:
        if self.sets_device or not self.starts or not self.picks:
            return
        if self.module is None or distributed.placed_by_library(self.module) is not None:
            return
        picks = [p for p in self.picks
                 if not any(distributed.other_branch(p[2], start[2]) for start in self.starts)]
        if not distributed.is_entry_point(self.module, self.starts):
            # A helper another file calls: only its own function is sure to run in the group
            # (the caller may set the device after it returns).
            functions = {id(distributed.function_of(s[2])) for s in self.starts}
            picks = [p for p in picks if id(distributed.function_of(p[2])) in functions]
        if not picks:
            return
        start = self.starts[0]
        pick, why, _ = picks[0]
        self.report(
            pick,
            f"Every process of the group picks the same GPU here ({why}) and the file never "
            f"sets each process's device: call `torch.cuda.set_device(local_rank)` after the "
            f"group starts",
            fix=lambda: self._fix(),
            evidence=[(start[0], start[1]), (pick, why),
                      *[(p[0], "the same GPU again") for p in picks[1:_MAX_EVIDENCE_PICKS]]],
        )

    def _fix(self) -> Fix | None:
        start = next((s for s in self.starts if isinstance(s[0], cst.Call)
                      and code_of(s[0].func).endswith("init_process_group")), None)
        if start is None:
            return None
        node, _, ancestors = start
        statement, block = _statement_and_block(ancestors)
        if statement is None or not isinstance(statement, cst.SimpleStatementLine):
            return None
        function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
        scope = function or ancestors[0]
        index = next(i for i, s in enumerate(block.body) if s is statement)
        found = self._local_rank(scope, function, block, index)
        if found is None:
            return None
        rank, at = found
        # A pick of the same function before the new line would stay on GPU 0: no fix.
        between = {id(s) for s in block.body[index + 1:at + 1]}
        if any(distributed.function_of(p[2]) is function and (
                self.order[id(p[0])] < self.order[id(node)] or any(id(a) in between for a in p[2]))
               for p in self.picks):
            return None
        index = at
        torch_name = self.ctx.imports.local_name_for("torch")
        line = cst.parse_statement(f"{torch_name or 'torch'}.cuda.set_device({rank})\n")

        def edit(updated: cst.CSTNode) -> cst.CSTNode:
            body = list(updated.body)
            body.insert(index + 1, line)
            return updated.with_changes(body=body)

        return Fix(Applicability.UNSAFE, [(block, edit)], needs_torch=torch_name is None)

    def _local_rank(self, scope: cst.CSTNode, function: cst.FunctionDef | None,
                    block: cst.CSTNode, index: int) -> tuple[str, int] | None:
        """The code of the local rank where the group starts (``block.body[index]``), and
        the index of the statement to insert after: the start, or the later statement of
        the same block that binds a ``local_rank`` name."""
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)] if function else []
        if "local_rank" in params:
            return "local_rank", index
        if "local_rank" in self.ctx.bindings(scope):
            for i, statement in enumerate(block.body):
                if isinstance(statement, cst.SimpleStatementLine) and any(
                    isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Name) and t.target.value == "local_rank" for t in small.targets)
                    for small in statement.body
                ):
                    return "local_rank", max(i, index)
            return None
        for node in tree.collect(scope, cst.Attribute):
            if node.attr.value == "local_rank" and isinstance(node.value, cst.Name):
                return code_of(node), index
        if "LOCAL_RANK" in self.ctx.source and self.ctx.imports.local_name_for("os") == "os":
            return 'int(os.environ["LOCAL_RANK"])', index
        spawned = any(s[1].startswith("processes are spawned") for s in self.starts)
        if spawned and params and params[0] in _RANK_PARAMETERS:
            return params[0], index
        return None


def _statement_and_block(ancestors):
    """The statement holding the innermost node and the block (module or indented body)
    holding that statement."""
    for parent, child in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(child, cst.BaseStatement):
            if isinstance(parent, (cst.Module, cst.IndentedBlock)):
                return child, parent
            return None, None
    return None, None
