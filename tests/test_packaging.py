"""torchdev-lint as a release: the sdist and the wheel `python -m build` makes, and the
check CI runs on them (.ci/package-check: it also installs the wheel in a fresh environment
and runs the command from there)."""

import configparser
import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from conftest import ROOT

SCRIPT = ROOT / ".ci" / "package-check"


def test_the_package_check_is_strict_bash_and_takes_no_arguments():
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    assert os.access(SCRIPT, os.X_OK)
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    refused = subprocess.run([str(SCRIPT), "extra"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert refused.returncode == 2 and "no arguments" in refused.stderr


def _backend_ready() -> bool:
    """`build` is installed and this environment has the build backend (setuptools>=77)."""
    if importlib.util.find_spec("build") is None:
        return False
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 77
    except Exception:  # noqa: BLE001 - no setuptools, or an odd version: cannot build here
        return False


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not _backend_ready():
        pytest.skip("needs `build` and setuptools>=77 (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("dist")
    process = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


@pytest.mark.slow
def test_the_wheel_carries_the_package_its_entry_points_and_no_tests(built):
    wheel, _ = built
    names = zipfile.ZipFile(wheel).namelist()
    package = [n for n in names if ".dist-info/" not in n]
    assert all(n.startswith("torchdev_lint/") for n in package), package
    assert not [n for n in names if "tests/" in n or "testdata/" in n or "__pycache__" in n]
    tracked = subprocess.run(["git", "ls-files", "torchdev_lint"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert set(tracked) <= set(package), sorted(set(tracked) - set(package))
    entry_points = configparser.ConfigParser()
    entry_points.read_string(zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode())
    assert entry_points["console_scripts"]["torchdev-lint"] == "torchdev_lint.launcher:main"
    assert entry_points["flake8.extension"]["TDL"] == "torchdev_lint.flake8_plugin:TorchDevLintChecker"
    assert entry_points["pytest11"]["torchdev_lint"] == "torchdev_lint.integrations.pytest_plugin"


@pytest.mark.slow
def test_the_sdist_carries_what_the_test_suite_needs(built):
    _, sdist = built
    members = {m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m}
    for needed in ("pyproject.toml", "README.md", "tests/conftest.py", "tests/test_cli.py",
                   "testdata/project/train.py", "docs/rules/TDL001.md", "action.yml", "action/run.py"):
        assert needed in members, needed
    assert not [m for m in members if "__pycache__" in m or m.endswith(".pyc") or ".torchdev_lint_cache" in m]
