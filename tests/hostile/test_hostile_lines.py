"""Characters that ``str.splitlines`` takes for line ends but Python does not (a form feed is
whitespace; a vertical tab, ``\\x1c``, ``\\x85`` or ``\\u2028`` can sit in a string): line numbers
stay Python's in the report's code frames and in ``--add-noqa``, which used to write its
directive at the start of the next line and so comment out the statement (found by the fuzz
test: ``'#\\x0c\\nx = ...'``)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEPARATORS = ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"]


def run(*args, cwd):
    process = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", "--preview", *args],
        cwd=cwd, capture_output=True, text=True, encoding="utf-8", env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return process.returncode, process.stdout, process.stderr


def source(separator: str) -> str:
    return f'import torch\ns = "a{separator}b"\nx = torch.zeros(1).cuda()\n'


@pytest.mark.parametrize("separator", SEPARATORS, ids=ascii)
def test_code_frame_shows_the_reported_line(tmp_path, separator):
    (tmp_path / "f.py").write_text(source(separator), encoding="utf-8")
    status, out, _ = run("--output-format", "full", "f.py", cwd=tmp_path)
    assert status == 1
    assert out.splitlines()[:3] == [
        "f.py:3:5: TDL001 [*] `.cuda()` hardcodes a CUDA device: this line fails on machines without one (possible)",
        "  |",
        "3 | x = torch.zeros(1).cuda()",
    ]


@pytest.mark.parametrize("separator", SEPARATORS, ids=ascii)
def test_add_noqa_writes_on_the_reported_line(tmp_path, separator):
    path = tmp_path / "f.py"
    path.write_text(source(separator), encoding="utf-8")
    status, _, err = run("--add-noqa", "f.py", cwd=tmp_path)
    assert status == 0, err
    assert path.read_text(encoding="utf-8") == source(separator).replace(".cuda()\n", ".cuda()  # noqa: TDL001\n")
