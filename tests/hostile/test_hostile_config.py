"""Configuration mistakes: each is one line naming the file and the key, exit 2, and nothing
is checked under settings the user did not write."""

import pytest

BUG = "import torch\nx = torch.zeros(1).cuda()\n"

MISTAKES = {
    # pyproject.toml text: what the one error line must contain after the file's name
    'tool = 5\n': "'tool' must be a table, not a number",
    '[tool]\ntorchdev-lint = 5\n': "[tool.torchdev-lint] must be a table, not a number",
    '[tool]\ntorchdev-lint = "strict"\n': "[tool.torchdev-lint] must be a table, not a string",
    '[tool.torchdev-lint]\nunsafe-fixes = "false"\n': "'unsafe-fixes' must be true or false, not a string",
    '[tool.torchdev-lint]\nunsafe-fixes = 0\n': "'unsafe-fixes' must be true or false, not a number",
    '[tool.torchdev-lint]\nignore = "TDL001"\nselect = [1]\n': "'select' must be a list of strings: 1 is a number",
    '[tool.torchdev-lint]\nexclude = {a = 1}\n': "'exclude' must be a list of strings: {'a': 1} is a table",
    '[tool.torchdev-lint]\nper-file-ignores = ["x"]\n': "'per-file-ignores' must be a table, not an array",
    '[tool.torchdev-lint]\nignore = ["TDL999"]\n': "ignore: unknown rule code or prefix 'TDL999'",
    '[tool.torchdev-lint\nignore = ["TDL001"]\n': "cannot read configuration",
    '[tool.torchdev-lint]\nignore = ["TDL001"\n': "cannot read configuration",
}


@pytest.mark.parametrize("text", MISTAKES)
def test_a_configuration_mistake_is_one_line_naming_file_and_key(tmp_path, run_cli, text):
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    (tmp_path / "bug.py").write_text(BUG)
    status, out, err = run_cli("--no-cache", "bug.py", cwd=tmp_path)
    assert status == 2 and out == "" and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"torchdev-lint: error: {tmp_path / 'pyproject.toml'}: ") or line.startswith(
        "torchdev-lint: error: pyproject.toml: "), line
    assert MISTAKES[text] in line


def test_a_pyproject_that_is_not_utf8_is_named(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_bytes('[tool.torchdev-lint]\nignore = ["TDL001"]  # é\n'.encode("latin-1"))
    (tmp_path / "bug.py").write_text(BUG)
    status, out, err = run_cli("--no-cache", "bug.py", cwd=tmp_path)
    assert status == 2 and out == "", err
    (line,) = err.strip().splitlines()
    assert "pyproject.toml: cannot read configuration" in line


def test_a_broken_nested_pyproject_is_not_skipped_for_the_one_above(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nselect = ["TDL004"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[project\n")
    (tmp_path / "sub" / "bug.py").write_text(BUG)
    status, out, err = run_cli("--no-cache", "sub/bug.py", cwd=tmp_path)
    assert status == 2 and "sub/pyproject.toml: cannot read configuration" in err, err
