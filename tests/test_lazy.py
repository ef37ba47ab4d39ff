"""The deferred import the CLI uses for LibCST: a package registered with ``defer_import`` runs
once, on its first real use, and then is the ordinary module, on every supported Python.

Python 3.12.3 changed ``importlib.util._LazyModule`` so that a subclass of it recursed for ever
(every CLI run died with RecursionError on 3.12.3+ and 3.13); these tests run on each Python of
the CI matrix (``.ci/run``)."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from torchdev_lint.lazy import defer_import

PACKAGE = {
    "__init__.py": """
        import sys
        sys.lazy_runs = getattr(sys, "lazy_runs", 0) + 1
        from .part import VALUE
        """,
    "part.py": "VALUE = 42\n",
    "extra.py": "EXTRA = 'extra'\n",
}
USER = "import lazypkg\n\ndef read():\n    return lazypkg.VALUE\n"


@pytest.fixture
def package(tmp_path, monkeypatch):
    root = tmp_path / "lazypkg"
    root.mkdir()
    for name, text in PACKAGE.items():
        (root / name).write_text(textwrap.dedent(text))
    (tmp_path / "lazyuser.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "lazy_runs", 0, raising=False)
    yield root
    for name in [n for n in sys.modules if n.startswith(("lazypkg", "lazyuser"))]:
        del sys.modules[name]


def test_the_package_runs_on_first_use_only_and_once(package):
    defer_import("lazypkg")
    import lazypkg
    import lazyuser  # another module's `import lazypkg` does not run it either

    assert sys.lazy_runs == 0
    assert lazyuser.read() == 42
    assert lazypkg.VALUE == 42 and sys.lazy_runs == 1
    assert type(lazypkg) is type(sys)  # the plain module from now on


def test_a_submodule_import_runs_the_package_first(package):
    defer_import("lazypkg")
    from lazypkg.extra import EXTRA

    assert EXTRA == "extra" and sys.lazy_runs == 1
    assert sys.modules["lazypkg"].VALUE == 42


def test_a_missing_attribute_is_an_attribute_error_after_the_run(package):
    defer_import("lazypkg")
    import lazypkg

    with pytest.raises(AttributeError):
        lazypkg.nothing_here
    assert sys.lazy_runs == 1
    assert not hasattr(lazypkg, "nothing_here")


def test_a_package_that_fails_is_not_left_half_imported(package):
    (package / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    defer_import("lazypkg")
    import lazypkg

    with pytest.raises(ImportError, match="broken on purpose"):
        lazypkg.VALUE
    assert "lazypkg" not in sys.modules


def test_an_imported_or_unknown_package_is_left_alone(package):
    import lazypkg

    defer_import("lazypkg")
    defer_import("no_such_package_here")
    assert sys.modules["lazypkg"] is lazypkg and "no_such_package_here" not in sys.modules


def test_the_command_line_checks_a_file_with_libcst_deferred(tmp_path):
    """The real CLI in a fresh interpreter, where LibCST is deferred: on Python 3.12.3+ the old
    stand-in raised RecursionError here, and a crash must never pass for 'findings'."""
    # no CPU path: its finding is possible since confidence tiers, hence --preview
    (tmp_path / "bug.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from torchdev_lint.cli import main; sys.exit(main(sys.argv[1:]))",
         "--isolated", "--preview", "--no-cache", "bug.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1, done.stderr
    assert "bug.py:3:1: TDL001" in done.stdout and done.stderr == ""
