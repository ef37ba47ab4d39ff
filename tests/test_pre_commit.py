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
import yaml

ROOT = Path(__file__).resolve().parent.parent

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
needs_checkout = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="try-repo needs a git checkout of torchdev-lint"
)

BUGGY = """\
import torch

x = torch.zeros(3).cuda()
device = "cuda" if torch.cuda.is_available() else "cpu"
y = torch.ones(3, device=device)
"""
# BUGGY chooses the CPU where there is no GPU: its hardcoded `.cuda()` is certain, in the
# default tier the hooks show with no settings.


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict]:
    """A scratch git repository with one committed, buggy file (and its project's settings),
    and the environment to run pre-commit in (its own cache, no git variables from a calling hook)."""
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
    for command in (["init", "-q"], ["add", "bug.py"],
                    ["commit", "-q", "--no-gpg-sign", "-m", "buggy"]):
        subprocess.run(["git", *command], cwd=work, env=env, check=True, capture_output=True)
    return work, env


def try_repo(work: Path, env: dict) -> subprocess.CompletedProcess:
    """``pre-commit try-repo <this checkout> --all-files``: every hook in the manifest, in order
    (the check, then the fix). One call per step, as each call builds its own environment."""
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "--all-files", "--color", "never"],
        cwd=work, env=env, capture_output=True, text=True, timeout=540,
    )


def test_manifest():
    process = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True, text=True,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["torchdev-lint"]["entry"] == "torchdev-lint"
    assert hooks["torchdev-lint-fix"]["entry"] == "torchdev-lint --fix"
    for hook in hooks.values():
        # what the CLI lints: no notebooks until it reads them (it would parse their JSON)
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is True
        assert hook["minimum_pre_commit_version"] == "2.9.2"  # types_or


@pytest.mark.slow
@needs_git
@needs_checkout
def test_check_fails_fix_rewrites_then_both_pass(repo):
    work, env = repo

    first = try_repo(work, env)
    assert first.returncode == 1, first.stdout + first.stderr
    check, fix = first.stdout.split("- hook id: torchdev-lint\n", 1)[1].split("- hook id: torchdev-lint-fix\n", 1)
    # the check ran first, on the buggy file: it names the finding and changes nothing
    assert "bug.py:3:5: TDL001" in check
    assert "files were modified" not in check
    # the fix hook rewrote the file, and pre-commit fails a hook that modifies files
    assert "files were modified by this hook" in fix
    fixed = (work / "bug.py").read_text()
    assert fixed != BUGGY and ".cuda()" not in fixed

    second = try_repo(work, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("Passed") == 2 and "Failed" not in second.stdout
    assert (work / "bug.py").read_text() == fixed


def test_the_check_hook_shows_what_the_cli_shows_on_the_bundled_project(tmp_path, repo):
    """The README's job through pre-commit, default tier: the same findings as the CLI."""
    work, env = repo
    project = work / "project"
    shutil.copytree(ROOT / "testdata" / "project", project)
    subprocess.run(["git", "add", "project"], cwd=work, env=env, check=True)
    hook = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "torchdev-lint", "--files",
         *sorted(str(p.relative_to(work)) for p in project.glob("*.py")), "--color", "never"],
        cwd=work, env=env, capture_output=True, text=True, timeout=540,
    )
    cli = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--no-daemon", "--output-format", "concise", "project"],
        cwd=work, env=env, capture_output=True, text=True,
    )
    assert hook.returncode == cli.returncode == 1, hook.stdout + hook.stderr
    shown = sorted(line for line in cli.stdout.splitlines() if ": TDL" in line)
    assert any(": TDL001 " in line and "train.py:28:" in line for line in shown)
    for line in shown:  # the hook's text output carries each concise line's location and message
        location, message = line.split(" ", 1)
        assert location in hook.stdout and message.split(" ", 1)[1][:40] in hook.stdout
