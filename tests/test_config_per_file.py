"""Settings per file: the nearest pyproject.toml with [tool.torchdev-lint] governs each file,
whatever the order of the arguments; `extend`, .gitignore, command-line excludes and
per-file ignores, ruff-like globs, and the commands that show what was resolved.

CUDA and LOAD have no CPU path, so their findings are possible since confidence tiers: the
tests that look at findings run in the preview tier (`--preview`, `preview=True`)."""

import subprocess

import pytest

from torchdev_lint import api, config

CUDA = "import torch\nx = torch.zeros(3)\ny = x.cuda()\n"
LOAD = "import torch\nstate = torch.load(p)\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def codes(out):
    return sorted(line.split(": ")[0] + " " + line.split(": ")[1].split()[0]
                  for line in out.splitlines() if ": TDL" in line)


@pytest.fixture
def nested(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchdev-lint]\nignore = ["TDL004"]\nexclude = ["lib/vendor"]\n')
    write(tmp_path / "a.py", CUDA + LOAD)
    write(tmp_path / "lib" / "vendor" / "v.py", CUDA)
    write(tmp_path / "pkg" / "pyproject.toml", '[tool.torchdev-lint]\nselect = ["TDL004"]\n')
    write(tmp_path / "pkg" / "b.py", CUDA + LOAD)
    return tmp_path


def test_each_file_gets_its_nearest_configuration_in_any_order(nested, run_cli):
    first = run_cli("--preview", "--output-format", "concise", "a.py", "pkg/b.py", cwd=nested)[1]
    second = run_cli("--preview", "--output-format", "concise", "pkg/b.py", "a.py", cwd=nested)[1]
    assert codes(first) == codes(second) == ["a.py:3:5 TDL001", "pkg/b.py:5:9 TDL004"]


def test_fix_never_touches_a_file_its_configuration_excludes(nested, run_cli):
    # pre-commit names every staged file; the first one here is governed by pkg's config
    run_cli("--preview", "--fix", "pkg/b.py", "lib/vendor/v.py", cwd=nested)
    assert (nested / "lib" / "vendor" / "v.py").read_text() == CUDA


def test_extend_inherits_and_keeps_the_base_patterns_meaning(nested, run_cli):
    write(nested / "pkg" / "pyproject.toml", '[tool.torchdev-lint]\nextend = "../pyproject.toml"\n'
          'extend-select = ["TDL"]\n')
    write(nested / "pkg" / "lib" / "vendor" / "w.py", CUDA)  # not the root's lib/vendor: still checked
    out = run_cli("--preview", "--output-format", "concise", ".", cwd=nested)[1]
    assert codes(out) == ["a.py:3:5 TDL001", "pkg/b.py:3:5 TDL001", "pkg/lib/vendor/w.py:3:5 TDL001"]
    write(nested / "pkg" / "pyproject.toml", '[tool.torchdev-lint]\nextend = "pyproject.toml"\n')
    status, _, err = run_cli(".", cwd=nested)
    assert status == 2 and "'extend' makes a cycle" in err


def test_gitignore_is_respected_unless_told_otherwise(tmp_path, run_cli):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path / ".gitignore", "generated/\n")
    write(tmp_path / "generated" / "g.py", CUDA)
    write(tmp_path / "m.py", CUDA)
    assert run_cli("--isolated", "--show-files", ".", cwd=tmp_path)[1].split() == ["m.py"]
    shown = run_cli("--isolated", "--show-files", "--no-respect-gitignore", ".", cwd=tmp_path)[1]
    assert sorted(shown.split()) == ["generated/g.py", "m.py"]


def test_command_line_excludes_and_per_file_ignores(tmp_path, run_cli):
    write(tmp_path / "tests" / "unit" / "test_a.py", CUDA + LOAD)
    write(tmp_path / "tests" / "test_b.py", CUDA)
    write(tmp_path / "src" / "m.py", CUDA)
    out = run_cli("--isolated", "--preview", "--output-format", "concise", "--per-file-ignores", "tests/**/*.py:TDL001",
                  ".", cwd=tmp_path)[1]
    assert codes(out) == ["src/m.py:3:5 TDL001", "tests/unit/test_a.py:5:9 TDL004"]
    shown = run_cli("--isolated", "--show-files", "--extend-exclude", "src", ".", cwd=tmp_path)[1]
    assert shown.split() == ["tests/test_b.py", "tests/unit/test_a.py"]
    shown = run_cli("--isolated", "--show-files", "--exclude", "unit", ".", cwd=tmp_path)[1]
    assert shown.split() == ["src/m.py", "tests/test_b.py"]


def test_command_line_patterns_are_paths_from_the_working_directory(nested, run_cli):
    """A file under a nested configuration (pkg/, its own root) still matches the patterns
    given on the command line as paths from where the command runs, as ruff's do."""
    out = run_cli("--preview", "--output-format", "concise", ".", cwd=nested)[1]
    assert codes(out) == ["a.py:3:5 TDL001", "pkg/b.py:5:9 TDL004"]
    out = run_cli("--preview", "--output-format", "concise", "--per-file-ignores", "pkg/*.py:TDL004", ".",
                  cwd=nested)[1]
    assert codes(out) == ["a.py:3:5 TDL001"]
    shown = run_cli("--show-files", "--extend-exclude", "./pkg/b.py", ".", cwd=nested)[1]
    assert shown.split() == ["a.py"]
    shown = run_cli("--show-files", "--extend-exclude", "b.py", ".", cwd=nested)[1]
    assert shown.split() == ["a.py"]  # a bare name matches anywhere, as before


def test_globs_match_as_ruff_does():
    assert config.matches_any("tests/x.py", ["tests/**/*.py"])
    assert config.matches_any("tests/a/b/x.py", ["tests/**/*.py"])
    assert config.matches_any("pkg/gen_a.py", ["gen_*.py"])  # a bare name matches anywhere
    assert config.matches_any("src/b/x.py", ["src/{a,b}/*.py"])
    assert not config.matches_any("src/c/x.py", ["src/{a,b}/*.py"])
    assert config.matches_any("docs/conf.py", ["docs/"])


def test_show_settings_says_which_configuration_governs_a_file(nested, run_cli):
    status, out, _ = run_cli("--show-settings", "pkg/b.py", cwd=nested)
    assert status == 0
    assert f"configuration: {(nested / 'pkg' / 'pyproject.toml').resolve()}" in out
    assert "rules: TDL004" in out.splitlines()


def test_the_api_resolves_settings_per_file_too(nested, monkeypatch):
    monkeypatch.chdir(nested)
    findings, errors = api.check_paths(["."], preview=True)
    assert [(f.path, f.code) for f in findings] == [("a.py", "TDL001"), ("pkg/b.py", "TDL004")]


def test_each_pyproject_of_a_tree_is_read_once(tmp_path, monkeypatch):
    """A walk asks for the settings of every directory: a directory without a configuration
    of its own takes its parent's answer instead of reading every pyproject.toml above it."""
    from torchdev_lint import config, files

    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\nignore = ["TDL004"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # not ours
    for i in range(30):
        directory = tmp_path / "sub" / f"d{i}" / "deeper"
        directory.mkdir(parents=True)
        (directory / "m.py").write_text("x = 1\n")
    reads = []
    real = config._read
    monkeypatch.setattr(config, "_read", lambda path: reads.append(path) or real(path))
    resolver = config.Resolver()
    found, errors = files.discover([str(tmp_path)], resolver)
    assert len(found) == 30 and not errors
    assert all(resolver.for_path(path).ignore == ["TDL004"] for path in found)
    assert sorted(reads) == sorted([tmp_path / "pyproject.toml", tmp_path / "sub" / "pyproject.toml",
                                    tmp_path / "pyproject.toml"])  # found once, loaded once
