"""The result cache: what a second run reuses, what it checks again, and what it survives
(two runs at once, a run killed mid-write, a damaged entry)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

from conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def tree(tmp_path):
    """A small project with findings in several files, and a clean one."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "testdata" / "project", work / "project")
    shutil.copytree(ROOT / "testdata" / "rules", work / "rules")
    (work / "clean.py").write_text("import torch\nx = torch.zeros(2)\n")
    return work


def lint(work, *args, cache="cache"):
    command = [sys.executable, "-m", "torchdev_lint", "--isolated", "--format", "json", "-v", *args, "."]
    command += ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    process = subprocess.run(command, cwd=work, capture_output=True, text=True, env=ENV)
    return process


def how_checked(process) -> dict[str, str]:
    """{path: "checked" | "cached"} from the --verbose lines."""
    lines = [line.split(" ", 2)[1:] for line in process.stderr.splitlines() if line.startswith("torchdev-lint: c")]
    return {path: how for how, path in lines}


def entries(cache):
    return [p for p in cache.rglob("*.json")]


def test_second_run_comes_from_the_cache_with_the_same_output(tmp_path):
    # In the preview tier, where the tree's findings are: all of them are possible.
    work = tree(tmp_path)
    first, second = lint(work, "--preview"), lint(work, "--preview")
    assert first.returncode == second.returncode == 1
    assert set(how_checked(first).values()) == {"checked"}
    assert set(how_checked(second).values()) == {"cached"}
    assert how_checked(first).keys() == how_checked(second).keys()
    assert json.loads(second.stdout) == json.loads(first.stdout) == json.loads(
        lint(work, "--preview", cache=None).stdout)
    assert json.loads(first.stdout)  # the tree has findings: they came back from the cache


def test_cache_is_ignored_by_git_and_off_with_no_cache(tmp_path):
    work = tree(tmp_path)
    lint(work, cache=None)
    assert not (work / ".torchdev_lint_cache").exists() and not (work / "cache").exists()
    subprocess.run([sys.executable, "-m", "torchdev_lint", "--isolated", "."], cwd=work, env=ENV,
                   capture_output=True)
    assert (work / ".torchdev_lint_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=work,
                            capture_output=True, text=True, check=True).stdout
    assert ".torchdev_lint_cache" not in status and "clean.py" in status


def test_editing_one_file_checks_only_that_file_again(tmp_path):
    # In the preview tier: the added .cuda() is a preview rule's finding.
    work = tree(tmp_path)
    lint(work, "--preview")
    train = work / "project" / "train.py"
    train.write_text(train.read_text() + "\nextra = torch.zeros(3).cuda()\n")
    after = lint(work, "--preview")
    rechecked = {path for path, how in how_checked(after).items() if how == "checked"}
    assert rechecked == {os.path.join("project", "train.py")}
    assert json.loads(after.stdout) == json.loads(lint(work, "--preview", cache=None).stdout)
    assert any(f["path"].endswith("train.py") and f["line"] == train.read_text().count("\n")
               for f in json.loads(after.stdout))


def test_other_rules_or_settings_are_checked_again(tmp_path):
    # In the preview tier: the tree's loads, and every finding under rules/, are possible.
    work = tree(tmp_path)
    lint(work, "--preview")
    narrowed = lint(work, "--preview", "--select", "TDL004")
    assert set(how_checked(narrowed).values()) == {"checked"}
    assert {f["code"] for f in json.loads(narrowed.stdout)} == {"TDL004"}
    (work / "pyproject.toml").write_text(
        '[tool.torchdev-lint]\npreview = true\nper-file-ignores = {"rules/*" = ["TDL"]}\n')
    configured = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--format", "json", "-v", "--cache-dir", "cache", "."],
        cwd=work, capture_output=True, text=True, env=ENV)
    assert not any(f["path"].startswith("rules") for f in json.loads(configured.stdout))


def test_two_concurrent_runs_sharing_a_cache_agree(tmp_path):
    work = tree(tmp_path)
    for copy in range(8):  # enough files for the two runs to overlap in time
        shutil.copytree(work / "rules", work / f"more{copy}")
    # In the preview tier, where the copies of rules/ have findings.
    expected = json.loads(lint(work, "--preview", cache=None).stdout)
    assert expected
    command = [sys.executable, "-m", "torchdev_lint", "--isolated", "--preview", "--format", "json", "-j", "1",
               "--cache-dir", "shared", "."]
    runs = [subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=ENV) for _ in range(2)]
    outputs = [run.communicate() for run in runs]
    assert [run.returncode for run in runs] == [1, 1], outputs
    assert json.loads(outputs[0][0]) == json.loads(outputs[1][0]) == expected
    for entry in entries(work / "shared"):
        json.loads(entry.read_text())  # every entry whole
    warm = lint(work, "--preview", cache=work / "shared")
    assert set(how_checked(warm).values()) == {"cached"}
    assert json.loads(warm.stdout) == expected


# A run whose cache writes stop halfway through its third file's results: where kill -9 lands.
KILLED_MID_WRITE = textwrap.dedent(
    """\
    import os, sys, time
    from torchdev_lint import cache, cli

    real_fdopen, written = os.fdopen, []

    class HalfWriter:
        def __init__(self, handle):
            self.handle = handle
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.handle.close()
        def write(self, data):
            result = data.startswith(b'{"findings"')  # not .gitignore, not the index's
            if not result or sum(written) < 2:
                written.append(result)
                return self.handle.write(data)
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            print("half written", file=sys.stderr, flush=True)
            time.sleep(600)

    cache.os.fdopen = lambda handle, mode: HalfWriter(real_fdopen(handle, mode))
    cli.main(["--isolated", "-j", "1", "--cache-dir", "cache", "."])
    """
)


def test_kill_9_in_the_middle_of_a_cache_write_leaves_no_broken_entry(tmp_path):
    work = tree(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE], cwd=work, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr.readline().strip() == "half written"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    results = [e for e in entries(work / "cache") if "findings" in json.loads(e.read_text())]
    assert len(results) == 2  # the third never reached its name; every entry there is whole
    after = lint(work)
    assert list(how_checked(after).values()).count("cached") == 2
    assert json.loads(after.stdout) == json.loads(lint(work, cache=None).stdout)


def test_a_damaged_entry_is_checked_again_and_replaced(tmp_path):
    work = tree(tmp_path)
    expected = json.loads(lint(work).stdout)
    for entry in entries(work / "cache"):
        entry.write_text(entry.read_text()[:20])
    damaged = lint(work)
    assert set(how_checked(damaged).values()) == {"checked"}
    assert json.loads(damaged.stdout) == expected
    assert set(how_checked(lint(work)).values()) == {"cached"}


def test_editing_a_base_class_checks_its_subclasses_again(tmp_path):
    """A file's results depend on the project index facts it uses: here, whether the base
    class imported from a sibling module is an ``nn.Module``."""
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "__init__.py").write_text("")
    (work / "pkg" / "base.py").write_text("from torch import nn\n\nclass Base(nn.Module):\n    pass\n")
    (work / "pkg" / "model.py").write_text(
        "import torch\nfrom .base import Base\n\nclass Net(Base):\n    def __init__(self):\n"
        "        super().__init__()\n        self.layers = [torch.nn.Linear(2, 2)]\n")
    (work / "pkg" / "other.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    first = lint(work, "--preview")  # TDL007 is a preview rule
    assert {f["code"] for f in json.loads(first.stdout) if f["path"].endswith("model.py")} == {"TDL007"}
    (work / "pkg" / "base.py").write_text("class Base:\n    pass\n")
    after = lint(work, "--preview")
    assert {path for path, how in how_checked(after).items() if how == "checked"} == {
        os.path.join("pkg", "base.py"), os.path.join("pkg", "model.py")}
    assert json.loads(after.stdout) == json.loads(lint(work, "--preview", cache=None).stdout)
    assert not any(f["path"].endswith("model.py") for f in json.loads(after.stdout))


def test_changing_a_signature_another_file_calls_checks_the_caller_again(tmp_path):
    """Whether a call can bind its arguments is a fact of the callee's file, here behind a
    package's re-export: a script's line after `Net()` runs once `Net` stops requiring `cfg`."""
    work = tmp_path / "work"
    (work / "nets").mkdir(parents=True)
    (work / "nets" / "__init__.py").write_text("from .model import Net\n")
    model = work / "nets" / "model.py"
    model.write_text("from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self, cfg):\n"
                     "        super().__init__()\n")
    (work / "evaluate.py").write_text(
        "import torch\nfrom nets import Net\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "model = Net().to(device)\nprint(model(torch.ones(2).cuda()))\n")
    first = lint(work, "--preview")
    assert [f["confidence"] for f in json.loads(first.stdout) if f["code"] == "TDL001"] == ["possible"]
    model.write_text("from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self, cfg=None):\n"
                     "        super().__init__()\n")
    after = lint(work, "--preview")
    assert [f["confidence"] for f in json.loads(after.stdout) if f["code"] == "TDL001"] == ["certain"]
