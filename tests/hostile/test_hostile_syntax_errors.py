"""Syntax errors of every kind are reported where CPython reports them: the line
``python -m py_compile`` names and the column of its caret."""

import re
import subprocess
import sys

BROKEN = {
    "unterminated_string": "s = 'abc\n",
    "unterminated_triple": 'x = 1\ns = """abc\n\ny = 2\n',
    "never_closed": "import torch\nx = torch.zeros(\n    3,\n",
    "stray_close": "x = 1)\n",
    "mismatched": "x = [1, 2)\n",
    "bad_dedent": "def f():\n        x = 1\n    y = 2\n",
    "unexpected_indent": "x = 1\n    y = 2\n",
    "expected_indent": "def f():\nreturn 1\n",
    "tabs_and_spaces": "if True:\n\tx = 1\n        y = 2\n",
    "leading_zero": "x = 0777\n",
    "missing_operand": "x = 1 +\n",
    "bad_parameter": "def f(:\n    pass\n",
    "keyword_target": "import torch\nclass = torch.zeros(1)\n",
    "missing_colon": "if x\n    pass\n",
    "invalid_character": "x = 1 € 2\n",
    "python2_print": "import torch\nprint 'hello'\n",
    "lambda_default": "f = lambda x=: x\n",
    "bad_fstring": "x = f'{'\n",
    "bad_continuation": "x = 1 + \\ 2\n",
    "walrus_target": "(a.b := 1)\n",
}


def py_compile_line(path):
    process = subprocess.run([sys.executable, "-m", "py_compile", str(path)], capture_output=True, text=True)
    assert process.returncode != 0, path
    return int(re.search(r'(?:", |\.py, )line (\d+)', process.stderr).group(1))


def test_syntax_errors_are_where_cpython_puts_them(tmp_path, run_cli):
    for name, text in BROKEN.items():
        (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    status, _, err = run_cli("--isolated", ".", cwd=tmp_path)
    assert status == 2
    reported = {}
    for line in err.strip().splitlines():
        match = re.match(r"torchdev-lint: (\w+)\.py:(\d+):(\d+): error: syntax error: ", line)
        assert match, line
        reported[match.group(1)] = (int(match.group(2)), int(match.group(3)))
    expected = {}
    for name, text in BROKEN.items():
        try:
            compile(text, name, "exec")
        except SyntaxError as error:
            assert error.lineno == py_compile_line(tmp_path / f"{name}.py")
            expected[name] = (error.lineno, error.offset)
    assert reported == expected
