"""The work of checking and fixing a file grows linearly with the file: counted, never timed.

A file of N generated blocks (a module class, a training loop with findings) is checked and
fixed at N and at 2N blocks. Doubling the file may double the work, not quadruple it. Work is
counted per line of torchdev-lint, exactly (a trace hook, not a clock): how often it runs, and
the calls it makes to code outside the package; a search through the file's whole text is such
a call (the text is handed over as a ``str`` whose ``in`` is Python code). A step that
scans the whole file for every finding or statement shows up as a line whose count grows
fourfold; that made a 5 MB file take minutes (benchmarks/bench_scaling.py times it)."""

import sys
import threading
from collections import Counter
from pathlib import Path

import torchdev_lint
import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import cli, files
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_to_fixpoint
from torchdev_lint.rule import Rule

PACKAGE = str(Path(torchdev_lint.__file__).resolve().parent)
RULES = [cls for _, cls in sorted(Rule.registry.items())]

HEADER = "import torch\nimport torch.nn as nn\nimport numpy as np\n"
BLOCK = '''
class Block{n}(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = torch.ones(dim)
        self.parts = [nn.ReLU()]

    def forward(self, x):
        mask = torch.zeros(x.shape[0])
        return self.proj(x) * self.scale + mask


def train_{n}(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.cuda()
    state = torch.load("w{n}.pt")
    for x, y in loader:
        out = model(x.cuda())
        print(out.numpy(), y.to("cuda"))
        optimizer.step()
'''


def program(blocks: int) -> str:
    return HEADER + "".join(BLOCK.format(n=n) for n in range(blocks))


class Text(str):
    """The file's text, whose searches (``needle in text``) the trace hook sees as calls."""

    def __contains__(self, needle):
        return super().__contains__(needle)


def work(task) -> Counter:
    """How often each line of torchdev-lint runs while ``task()`` runs, on every thread
    (files are checked on a thread with a large stack); a call from a line to code outside
    the package counts once more for that line."""
    counts: Counter = Counter()

    def ours(code) -> bool:
        return code.co_filename.startswith(PACKAGE)

    def where(frame) -> str:
        return f"{frame.f_code.co_filename[len(PACKAGE) + 1:]}:{frame.f_lineno}"

    def trace(frame, event, arg):
        if event == "call":
            caller = frame.f_back
            if caller is not None and ours(caller.f_code) and not ours(frame.f_code):
                counts[where(caller)] += 1
            return trace if ours(frame.f_code) else None
        if event == "line":
            counts[where(frame)] += 1
        return trace

    threading.settrace(trace)
    sys.settrace(trace)
    try:
        task()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    return counts


def superlinear(small: Counter, large: Counter) -> dict[str, tuple[int, int]]:
    """Lines that ran well beyond twice as often when the file doubled."""
    return {name: (small[name], count) for name, count in large.items() if count > 2.5 * small[name] + 20}


def check(blocks: int) -> Counter:
    lint_source("gen.py", program(blocks), RULES, preview=True)  # modules imported on first use: not the file's work
    return work(lambda: lint_source("gen.py", Text(program(blocks)), RULES, preview=True))


def test_checking_grows_linearly_with_the_file():
    small, large = check(8), check(16)
    assert sum(large.values()) > 1.8 * sum(small.values())  # the count does see the work
    assert superlinear(small, large) == {}


def test_fixing_grows_linearly_with_the_file():
    def fix(blocks):
        def task():
            result = lint_source("gen.py", Text(program(blocks)), RULES, preview=True)
            assert result.findings
            fix_to_fixpoint(result, lambda text: lint_source("gen.py", Text(text), RULES, preview=True), unsafe=True)
        return work(task)

    assert superlinear(fix(8), fix(16)) == {}


def test_the_report_reads_each_files_lines_once(tmp_path, monkeypatch, capsys):
    """The code frame under each finding takes its line from lines split once per file."""
    path = tmp_path / "gen.py"
    path.write_text(program(12))
    splits = Counter()

    class Lines(str):
        def splitlines(self, *args, **kwargs):
            splits[str(path)] += 1
            return super().splitlines(*args, **kwargs)

    real_read = files.read

    def read(name):
        source = real_read(name)
        if isinstance(source, files.SourceFile):
            source.text = Lines(source.text)
        return source

    monkeypatch.setattr(files, "read", read)
    status = cli.main(["--isolated", "--no-cache", "--preview", "-j", "1", "--output-format", "full", str(path)])
    out = capsys.readouterr().out
    assert status == 1 and out.count(" | ") > 100  # code frames for many findings were shown
    assert splits[str(path)] <= 2


def one_class(lines: int) -> str:
    """One dataset class whose two methods grow: N loads in one, N saves in the other, so
    work per load that reads the whole method (or class) shows as growing fourfold."""
    loads = "".join(f"        self.part{n} = torch.load(self.path{n})\n" for n in range(lines))
    saves = "".join(
        f"        with open(self.path{n}, 'wb') as f:\n            torch.save(torch.ByteTensor(raw), f)\n"
        for n in range(lines)
    )
    return (
        "import pickle\nimport torch\n\n\nclass Parts:\n    def __init__(self):\n" + loads
        + "\n    def download(self):\n        raw = pickle.load(open('raw.pkl', 'rb'))\n" + saves
    )


def test_checking_one_growing_class_grows_linearly():
    def check_class(lines):
        return work(lambda: lint_source("gen.py", Text(one_class(lines)), RULES, preview=True))

    small, large = check_class(24), check_class(48)  # under the 64 saves read per class
    assert sum(large.values()) > 1.8 * sum(small.values())
    assert superlinear(small, large) == {}


def test_checking_a_growing_test_file_grows_linearly():
    """N tests that each load the file a fixture gives them: the file's fixtures are read
    once, not once per load."""
    def test_file(tests: int) -> str:
        fixture = ("import pytest\nimport torch\n\n\n@pytest.fixture\ndef ckpt(tmp_path):\n"
                   "    torch.save({}, tmp_path / 'c.pt')\n    return tmp_path / 'c.pt'\n")
        return fixture + "".join(f"\n\ndef test_{n}(ckpt):\n    torch.load(ckpt)\n" for n in range(tests))

    small = work(lambda: lint_source("test_gen.py", Text(test_file(40)), RULES, preview=True))
    large = work(lambda: lint_source("test_gen.py", Text(test_file(80)), RULES, preview=True))
    assert sum(large.values()) > 1.8 * sum(small.values())
    assert superlinear(small, large) == {}


def test_a_forward_that_rebinds_its_input_grows_linearly():
    """``x = F.relu(self.convK(x))`` N times, then a meeting: each rebinding of the input is
    followed once, not once per path through the rebindings (that grew as N to the power of
    the depth followed: a 500-line file took minutes)."""
    def forward(lines: int) -> str:
        layers = "".join(f"        self.conv{n} = nn.Conv2d(3, 3, 1)\n" for n in range(lines))
        steps = "".join(f"        x = F.relu(self.conv{n}(x))\n" for n in range(lines))
        return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n" + layers
                + "        self.bias = torch.zeros(3).to(device)\n"
                "    def forward(self, x):\n        x = x.to('cuda:0')\n" + steps
                + "        return x + self.bias\n")

    small = work(lambda: lint_source("gen.py", Text(forward(8)), RULES, preview=True))
    large = work(lambda: lint_source("gen.py", Text(forward(16)), RULES, preview=True))
    assert sum(large.values()) > 1.5 * sum(small.values())
    assert superlinear(small, large) == {}


def test_a_recursive_helper_of_many_branches_costs_a_bounded_amount():
    """A colour-space converter that calls itself from several branches, each binding the
    result again (a perceptual loss's ``color_space_transform``): following the returned value
    through every call with its own arguments multiplies at each level. The values followed
    for one question, and for one file, are bounded: 8 branches cost about what 4 do (a
    357-line loss took minutes)."""
    def converter(branches: int) -> str:
        cases = "".join(f"    elif mode == 'm{k}':\n        out = convert(x, 'm{k - 1}') * convert(x + 1, 'm0')\n"
                        for k in range(1, branches + 1))
        return ("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "def convert(x, mode):\n    if mode == 'm0':\n        out = x.to('cuda:0')\n" + cases
                + "    return out\n\n"
                f"def loss(x):\n    return convert(x, 'm{branches}') + torch.ones(2).to(device)\n")

    small = work(lambda: lint_source("gen.py", Text(converter(4)), RULES, preview=True))
    large = work(lambda: lint_source("gen.py", Text(converter(8)), RULES, preview=True))
    assert sum(large.values()) < 3 * sum(small.values())


def test_the_order_of_a_runs_calls_is_asked_in_linear_work(tmp_path):
    """The index asks, for every `.cuda()` and load of a file, whether every run makes a CUDA
    call first (a cache key asks it of all of them): each call is found by a lookup, not a scan
    of the file's calls, and a scope's CUDA calls are read once and a bounded number of them
    compared, here N guarded `synchronize()` calls that precede none of the N moves."""
    from torchdev_lint.analysis import project_index

    def ask(calls: int) -> None:
        text = ("import torch\ndef f(xs, flag):\n" + "    if flag:\n        torch.cuda.synchronize()\n" * calls
                + "".join(f"    y{n} = xs[{n}].cuda()\n" for n in range(calls)))
        index = project_index.ProjectIndex()
        index.add(str(tmp_path / "gen.py"), text)
        index.facts_for(str(tmp_path / "gen.py"))

    ask(10)  # modules imported on first use: not the file's work
    small, large = work(lambda: ask(100)), work(lambda: ask(200))
    assert sum(large.values()) > 1.5 * sum(small.values())
    assert superlinear(small, large) == {}
