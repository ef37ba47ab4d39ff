"""The pre-commit hooks, tested with the real ``pre-commit try-repo`` on a scratch repository.

try-repo installs this checkout into a fresh environment with pip (from the package
registry) on every call, with a temporary store, so each call takes a while: hence `slow`.
With uncommitted changes to tracked files, try-repo tests a temporary commit of them (files
git does not track yet are left out).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout of torchdev-lint"),
]

BUGGY = """\
import torch

x = torch.zeros(3).cuda()
"""


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict]:
    """A scratch git repository with one committed, buggy file, and the environment to run
    pre-commit in (its own cache, no git variables from a calling hook)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.com",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "bug.py").write_text(BUGGY)
    for command in (["init", "-q"], ["add", "bug.py"], ["commit", "-q", "--no-gpg-sign", "-m", "buggy"]):
        subprocess.run(["git", *command], cwd=work, env=env, check=True, capture_output=True)
    return work, env


def try_repo(work: Path, env: dict, *hook: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), *hook, "--all-files", "--color", "never"],
        cwd=work, env=env, capture_output=True, text=True, timeout=540,
    )


def test_check_then_fix_then_pass(repo):
    work, env = repo

    check = try_repo(work, env, "torchdev-lint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "bug.py:3:5: TDL001" in check.stdout
    assert (work / "bug.py").read_text() == BUGGY  # the check hook changes nothing

    fix = try_repo(work, env, "torchdev-lint-fix")
    assert fix.returncode == 1, fix.stdout + fix.stderr
    assert "files were modified by this hook" in fix.stdout
    fixed = (work / "bug.py").read_text()
    assert ".cuda()" not in fixed and "x = torch.zeros(3).to(device)" in fixed

    again = try_repo(work, env)  # both hooks: nothing left to report or fix
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2
    assert (work / "bug.py").read_text() == fixed
