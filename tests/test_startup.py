"""Start-up stays light: the static path (the pre-commit case: a few files) never imports
torch or the language server's libraries, and one file starts no worker processes."""

import os
import subprocess
import sys

from conftest import ROOT

PROBE = """
import sys
from torchdev_lint.cli import main
main(sys.argv[1:])
heavy = ("torch", "pygls", "lsprotocol", "multiprocessing", "importlib.metadata")
print({name: name in sys.modules for name in heavy}, file=sys.stderr)
"""


def imported(*args, cwd):
    process = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    return eval(process.stderr.strip().splitlines()[-1])


def test_one_file_imports_neither_torch_nor_the_server(tmp_path):
    (tmp_path / "bug.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    assert not any(imported("--isolated", "bug.py", cwd=tmp_path).values())
    assert not any(imported("--isolated", "--diff", "bug.py", cwd=tmp_path).values())


def test_many_files_in_workers_import_neither_torch_nor_the_server(tmp_path):
    for name in "abcd":
        (tmp_path / f"{name}.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    found = imported("--isolated", "-j", "2", "--format", "sarif", ".", cwd=tmp_path)
    assert found["multiprocessing"]  # workers did run
    assert not found["torch"] and not found["pygls"] and not found["lsprotocol"]
