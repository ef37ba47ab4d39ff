"""Start-up stays light: the static path (the pre-commit case: a few files) never imports
torch or the language server's libraries, one file starts no worker processes, and a run
whose files all come from the cache never runs LibCST (importing it costs more than the run).

The toy files have no CPU path, so their findings are possible since confidence tiers: the
runs are in the preview tier (`--preview`), so that there are findings to report and fix."""

import os
import subprocess
import sys

from conftest import ROOT

PROBE = """
import sys
from torchdev_lint.cli import main
main(sys.argv[1:])
heavy = ("torch", "pygls", "lsprotocol", "multiprocessing", "importlib.metadata")
found = {name: name in sys.modules for name in heavy}
found["libcst ran"] = "libcst._nodes" in sys.modules
print(found, file=sys.stderr)
"""


def run(*args, cwd):
    process = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    return process.stdout, eval(process.stderr.strip().splitlines()[-1])


def imported(*args, cwd):
    found = run(*args, cwd=cwd)[1]
    del found["libcst ran"]
    return found


def test_one_file_imports_neither_torch_nor_the_server(tmp_path):
    (tmp_path / "bug.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    assert not any(imported("--isolated", "--preview", "bug.py", cwd=tmp_path).values())
    assert not any(imported("--isolated", "--preview", "--diff", "bug.py", cwd=tmp_path).values())


def test_many_files_in_workers_import_neither_torch_nor_the_server(tmp_path):
    for name in "abcd":
        (tmp_path / f"{name}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    found = imported("--isolated", "--preview", "-j", "2", "--format", "sarif", ".", cwd=tmp_path)
    assert found["multiprocessing"]  # workers did run
    assert not found["torch"] and not found["pygls"] and not found["lsprotocol"]


def test_a_run_served_from_the_cache_never_runs_libcst(tmp_path):
    (tmp_path / "bug.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    (tmp_path / "clean.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    first, found = run("--isolated", "--preview", "-j", "1", "bug.py", "clean.py", cwd=tmp_path)
    assert found["libcst ran"]  # nothing cached yet: both files were parsed
    again, found = run("--isolated", "--preview", "-j", "1", "bug.py", "clean.py", cwd=tmp_path)
    assert not found["libcst ran"]
    assert again == first and "bug.py:3:1: TDL001" in again
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    edited, found = run("--isolated", "--preview", "-j", "1", "bug.py", "clean.py", cwd=tmp_path)
    assert found["libcst ran"] and "clean.py:2:5: TDL001" in edited
