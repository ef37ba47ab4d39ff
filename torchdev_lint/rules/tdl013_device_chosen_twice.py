from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import decisions
from torchdev_lint.analysis.decisions import MACHINE, USER, Placement
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.rule import Invalid, Rule, Valid

# Operators that need both operands on one device.
_ARITHMETIC = ("Add", "Subtract", "Multiply", "Divide", "FloorDivide", "Modulo", "Power", "MatrixMultiply")
# What each disagreement needs to show at run time.
# What each disagreement needs to show at run time, and the decision to keep.
_WHEN = {
    frozenset({MACHINE, USER}): ("the user asks for another device than the machine's pick (the CPU, or "
                                 "another GPU, on a machine with CUDA)", "the user's device"),
    frozenset({decisions.FIXED_GPU, decisions.RANK_GPU}): ("the process is not the first one (rank > 0)",
                                                           "each process's own device"),
}


class DeviceChosenTwice(Rule):
    """
    ## What it does
    Flags the place where a value placed by one device decision meets a value placed by
    another decision that can pick a different device: an arithmetic operation, a `torch`
    function given both (`torch.cat([a, b])`), or a module called on an input.

    The decisions that disagree are:

    - the machine's against the user's: `"cuda" if torch.cuda.is_available() else "cpu"` (a
      module-level `device` computed at import, a `get_device()` of the file, a helper that
      moves its argument to CUDA under `if torch.cuda.is_available():`, or such a device,
      argument-less function or helper of another module of the project: `from config import
      DEVICE`, `config.DEVICE`, `get_device()`, `utils.to_var(x)`) against a `device`
      parameter, an option (`args.device`, `"cuda" if args.cuda else "cpu"`, `--cpu`), or
      `self.device` set from one of these;
    - one GPU against each process's own: `"cuda:0"` against `f"cuda:{local_rank}"`.

    A move under an `if` is that test's decision: `if torch.cuda.is_available(): model.cuda()`
    is the machine's, `if args.cuda: x = x.cuda()` the user's (the value stays on the CPU
    otherwise). Values are followed through names, modules moved in place (`model.to(device)`
    as a statement), `self.<attr>` set in any method of the class, the file's own functions
    (what they return, their parameters read as the caller's arguments) and operations on them.

    It does not flag one decision used everywhere; two places that read the same decision (a
    helper handed the script's `device`, a class whose every construction in the file is
    handed the same kind of device the other value has); a device read from a value
    (`torch.zeros(n, device=x.device)`, `next(model.parameters()).device`); or an
    availability fallback used as the default of the user's option
    (`parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")`,
    then `args.device` everywhere).

    ## Why is this bad?
    The program works for its author, who runs it where both decisions pick the same
    device. As soon as a user chooses (`--cpu` on a machine with CUDA, `device="cuda:1"`,
    `Detector(device="cpu")`), one value goes where the user said and the other where the
    machine said, and the line raises "Expected all tensors to be on the same device". In a
    process group, `"cuda:0"` puts every process's tensors on the first GPU while the model of
    rank 1 is on `cuda:1`.

    The finding's evidence names both decisions, where each value was placed, and the line
    where they meet (`--show-evidence`).

    ## Fix
    Use the user's decision at the second place: the `device` parameter, `self.device`, or
    the `.device` of the value it meets (`torch.zeros(n, device=x.device)`), instead of the
    module-level device; the local rank's device instead of `"cuda:0"`. No automatic fix is
    offered: which of the two decisions is the user's, and whether the value is used
    elsewhere with the machine's pick, needs the author.

    Fix safety: there is no automatic fix.

    ## At run time
    `torchdev-lint trace --mode sim program.py --cpu` (or `--device cpu`, whatever option
    the program offers) confirms it: the simulated GPU is present, so the machine's decision
    picks CUDA while the option asks for the CPU, and the tracer reports the device mismatch
    at the meeting line. Without an option that makes the decisions disagree, both pick the
    simulated GPU and the run shows nothing ([trace](../trace.md)).

    ## When not to use
    When the code only ever runs with the machine's pick (no user ever chooses a device):
    then the two decisions cannot disagree.
    """

    code = "TDL013"
    preview = True  # new: first-look precision not measured on enough findings yet
    name = "device-chosen-twice"
    message = "Two device decisions that can disagree meet here: use the user's device at both places"

    VALID = [
        Valid("import torch\nimport torch.nn as nn\n"
              "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
              "model = nn.Linear(3, 2).to(device)\nx = torch.randn(4, 3).to(device)\ny = model(x)\n"),
        Valid("import torch\n\ndef shift(x):\n    return x + torch.ones(3, device=x.device)\n"),
        Valid("import argparse\nimport torch\nimport torch.nn as nn\nparser = argparse.ArgumentParser()\n"
              "parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
              "args = parser.parse_args()\nmodel = nn.Linear(3, 2).to(args.device)\n"
              "x = torch.zeros(4, 3, device=args.device)\nprint(model(x))\n"),
        Valid("import torch\nimport torch.nn as nn\n"
              "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
              "def prepare(batch, device):\n    return batch.to(device)\n"
              "model = nn.Linear(3, 2).to(device)\ny = model(prepare(torch.zeros(4, 3), device))\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\n"
            "DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "class Detector:\n"
            "    def __init__(self, device='cpu'):\n"
            "        self.model = nn.Linear(3, 2).to(device)\n"
            "        self.mean = torch.tensor([0.5, 0.5, 0.5]).to(DEVICE)\n\n"
            "    def __call__(self, x):\n"
            "        return self.model(x - self.mean)\n",
            12, 16,
        ),
        Invalid(
            "import argparse\nimport torch\nimport torch.nn as nn\n\n"
            "def to_device(batch):\n"
            "    if torch.cuda.is_available():\n"
            "        batch = batch.cuda()\n"
            "    return batch\n\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--cuda', action='store_true')\n"
            "args = parser.parse_args()\n"
            "model = nn.Linear(3, 2).to('cuda' if args.cuda else 'cpu')\n"
            "out = model(to_device(torch.zeros(4, 3)))\n",
            14, 7,
        ),
        Invalid(
            "import os\nimport torch\nimport torch.nn as nn\n\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "model = nn.Linear(3, 2).to(f'cuda:{local_rank}')\n"
            "x = torch.zeros(4, 3, device='cuda:0')\n"
            "y = model(x)\n",
            8, 5,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        # a decision imported from another module (`from config import DEVICE`, `to_var(x)`) need
        # not say "cuda" here; the other decision names a device, CUDA or a GPU
        return "device" in source or "cuda" in source or "gpu" in source

    def leave_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator).__name__ in _ARITHMETIC:
            self._meet(node, [node.left, node.right])

    def leave_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualified_name(node.func) or ""
        operands: list[cst.BaseExpression] = []
        for arg in node.args:
            if arg.keyword is not None or arg.star:
                continue
            value = arg.value
            operands += [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
        if qualified.startswith("torch.") and len(operands) >= 2:
            self._meet(node, operands)
        elif not qualified and operands and isinstance(node.func, (cst.Name, cst.Attribute)):
            self._meet(node, [node.func, *operands])  # a module called on its inputs

    def _meet(self, node: cst.CSTNode, operands: list[cst.BaseExpression]) -> None:
        where = decisions.where_of(self.ctx)
        placed = [(o, p) for o in operands if (p := decisions.placement_of(self.ctx, o, where)) is not None]
        for i, (first, a) in enumerate(placed):
            for second, b in placed[i + 1:]:
                if decisions.disagree(a.decision, b.decision) and not self._same_source(a, b):
                    self._report(node, (first, a), (second, b))
                    return

    def _same_source(self, a: Placement, b: Placement) -> bool:
        """A parameter that every call in the file hands a device agreeing with the other side."""
        module = self.ctx.ancestors[0]
        for this, other in ((a, b), (b, a)):
            if isinstance(this.decision.node, cst.Param):
                handed = decisions.passed(self.ctx, this.decision.node, module)
                if handed and all(d is not None and not decisions.disagree(d, other.decision) for d in handed):
                    return True
        return False

    def _report(self, node, first: tuple, second: tuple) -> None:
        (left, a), (right, b) = first, second
        when, keep = _WHEN[frozenset({a.decision.kind, b.decision.kind})]
        evidence = []
        for value, placement in (first, second):
            evidence.append((placement.decision.node, placement.decision.what))
            evidence += list(placement.steps)
        evidence.append((node, f"`{_short(left)}` and `{_short(right)}` meet here"))
        self.report(
            node,
            f"`{_short(left)}` is placed by {_who(a)} and `{_short(right)}` by {_who(b)}: they meet here on "
            f"different devices when {when}; use {keep} for both",
            evidence=evidence,
        )


def _short(node: cst.CSTNode) -> str:
    text = " ".join(code_of(node).split())
    return text if len(text) <= 40 else text[:37] + "..."


def _who(placement: Placement) -> str:
    kind = placement.decision.kind
    return {
        MACHINE: "the machine's choice",
        USER: "the user's choice",
        decisions.FIXED_GPU: "one fixed GPU",
        decisions.RANK_GPU: "each process's own GPU",
    }[kind]
