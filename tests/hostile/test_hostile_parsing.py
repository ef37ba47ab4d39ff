"""Files built to kill or stall a parser: each is one line naming the file (exit 2), or is
checked normally when it is valid and within the limits, and the other files of the run are
still reported. A subprocess timeout keeps a regression from hanging the suite; no test
asserts on time."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchdev_lint.limits import MAX_STRINGS

ROOT = Path(__file__).resolve().parents[2]
HEADER = "import torch\nx = torch.zeros(1)\n"


def run(*args, cwd, timeout=120):
    try:
        process = subprocess.run(
            [sys.executable, "-m", "torchdev_lint", "--isolated", "--preview", *map(str, args)],
            cwd=cwd, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchdev-lint {' '.join(map(str, args))} still running after {timeout} s")
    return process.returncode, process.stdout, process.stderr


HOSTILE = {
    # name: (text after the header and a finding, what the one error line says)
    "parens": ("y = " + "(" * 1500 + "1" + ")" * 1500 + "\n", ":4:205: error: syntax error: too many nested"),
    "lists": ("y = " + "[" * 2000 + "]" * 2000 + "\n", ":4:205: error: syntax error: too many nested"),
    "sum": ("b = " + "+".join(["x"] * 10000) + "\n", ":4:5: error: too complex to check"),
    "calls": ("y = x" + ".t()" * 5000 + "\n", ":4:5: error: too complex to check"),
    "nested_sums": ("y = " + "(x+x+x+x+" * 150 + "1" + ")" * 150 + "\n", ":4:5: error: too complex to check"),
    "strings": ("s = (\n" + "".join(f'    "part{i}"\n' for i in range(5000)) + ")\n",
                ":5:5: error: too complex to check"),
}


def test_deep_and_long_expressions_are_one_line_each(tmp_path):
    for name, (text, _) in HOSTILE.items():
        (tmp_path / f"{name}.py").write_text(HEADER + "z = x.cuda()\n" + text)
    (tmp_path / "z_bug.py").write_text(HEADER + "y = x.cuda()\n")
    status, out, err = run(".", cwd=tmp_path)
    assert status == 2, err
    assert "z_bug.py:3:5: TDL001" in out
    lines = err.strip().splitlines()
    assert len(lines) == len(HOSTILE), err
    # Only what CPython refuses is a syntax error: the sums, calls and strings are valid Python.
    for line, (name, (_, expected)) in zip(lines, sorted(HOSTILE.items())):
        assert line.startswith(f"torchdev-lint: {name}.py{expected}"), line


def test_named_explicitly_and_under_fix_too(tmp_path):
    for name, (text, _) in HOSTILE.items():
        (tmp_path / f"{name}.py").write_text(HEADER + "z = x.cuda()\n" + text)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    status, out, err = run("--fix", *sorted(before), cwd=tmp_path)
    assert status == 2 and len(err.strip().splitlines()) == len(HOSTILE), err
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == before


@pytest.mark.parametrize(
    "text",
    [
        # Just within the limits: checked, the finding inside found and fixed.
        "b = " + "+".join(["x"] * 400) + " + x.cuda()\n",
        "y = x" + ".t()" * 240 + ".cuda()\n",
        "y = " + "[" * 150 + "x.cuda()" + "]" * 150 + "\n",
        "b = " + "+".join(["x.cuda()"] * 160) + "\n",
        # 2900 on most Pythons; fewer on 3.12, whose C recursion cap LibCST's code generation hits.
        "s = (\n" + '    "a"\n' * (MAX_STRINGS - 100) + ")\ny = x.cuda()\n",
    ],
    ids=["sum-400", "calls-240", "lists-150", "cuda-sum-160", "strings-just-within"],
)
def test_large_but_valid_expressions_are_checked_and_fixed(tmp_path, text):
    path = tmp_path / "big.py"
    path.write_text(HEADER + text)
    status, out, err = run("big.py", cwd=tmp_path)
    assert status == 1 and err == "" and "TDL001" in out, err
    status, out, err = run("--fix", "big.py", cwd=tmp_path)
    assert status == 0 and err == "", err
    fixed = path.read_text()
    compile(fixed, "big.py", "exec")
    assert ".cuda()" not in fixed


def test_text_with_a_lone_surrogate_is_one_error_not_an_exception():
    """Only an editor (the language server) or an API caller can hand over such text: files
    are decoded strictly. LibCST's parser raised UnicodeEncodeError on it."""
    import torchdev_lint.rules  # noqa: F401  (registers the rules)
    from torchdev_lint.engine import lint_source
    from torchdev_lint.rule import Rule

    result = lint_source("buffer.py", 'import torch\nx = "\udcff".cuda()\n', list(Rule.registry.values()), preview=True)
    assert (result.error.line, result.error.column) == (2, 6)
    assert result.error.message == "cannot check: '\\udcff' is a lone surrogate, not a character"


def test_strings_past_what_this_python_writes_back_are_one_line(tmp_path):
    """The limit is per Python: on 3.12, 2900 adjacent strings parse but cannot be written back
    (positions, fixes), so they get the one-line answer before the parse, and so does every
    Python past LibCST's own limit."""
    path = tmp_path / "big.py"
    path.write_text(HEADER + "y = x.cuda()\n" + "s = (\n" + '    "a"\n' * (MAX_STRINGS + 1) + ")\n")
    before = path.read_bytes()
    for args in (["big.py"], ["--fix", "big.py"]):
        status, out, err = run(*args, cwd=tmp_path)
        expected = f"big.py:5:5: error: too complex to check: more than {MAX_STRINGS} adjacent string literals"
        assert status == 2 and err.strip().endswith(expected) and len(err.strip().splitlines()) == 1, err
    assert path.read_bytes() == before


def test_a_tree_too_deep_to_write_back_is_one_error_and_untouched(monkeypatch):
    """Should another shape pass the limits and still recurse too deep when written back, the
    file keeps its text and gets one error, not an internal error."""
    import libcst

    import torchdev_lint.rules  # noqa: F401  (registers the rules)
    from torchdev_lint.engine import lint_source
    from torchdev_lint.fixer import fix_file
    from torchdev_lint.rule import Rule

    source = HEADER + "y = x.cuda()\n"
    result = lint_source("deep.py", source, list(Rule.registry.values()), preview=True)
    assert [f.code for f in result.findings] == ["TDL001"]

    def too_deep(self):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(libcst.Module, "code", property(too_deep))
    outcome = fix_file(result)
    assert outcome.source == source and outcome.fixed == []
    assert outcome.error.message == "fix skipped: file too deeply nested to write back"
