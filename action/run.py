"""The command lines of the GitHub Action (action.yml), built from its inputs.

    python action/run.py install   # pip install torchdev-lint (the action's own copy, a commit, a wheel)
    python action/run.py check     # torchdev-lint --format github [and --format sarif]

Inputs arrive as environment variables (INPUT_ARGS, INPUT_SRC, INPUT_VERSION, INPUT_SARIF,
INPUT_SARIF_FILE, INPUT_TARGET_DEVICES, INPUT_CONFIRM, INPUT_CONFIRM_TIME_LIMIT); ``args`` and ``src`` are split like a shell would (quotes respected).

torchdev-lint is not on PyPI yet, so ``version`` never names a PyPI release: empty installs
the action's own revision, a path or URL ending in ``.whl`` installs that built wheel, and
anything else is a commit SHA (or tag) of the repository, installed from git.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ACTION = Path(__file__).resolve().parent.parent  # the repository the action runs from


REPOSITORY = "https://github.com/torchdev-lint/torchdev-lint"  # as [project.urls] in pyproject.toml


class InputError(ValueError):
    """An input the action cannot act on; the message says what to write instead."""


def install_target(version: str) -> str:
    """What pip installs for the ``version`` input."""
    version = version.strip()
    if not version:
        return str(ACTION)  # the revision the workflow pinned with `uses: ...@ref`
    if version.lower() == "latest" or version[:1].isdigit() and "." in version and len(version) < 16:
        raise InputError(
            f"version: '{version}': torchdev-lint is not published on PyPI yet. Leave `version` empty to "
            "install the action's own revision (the ref in `uses:`), or give a commit SHA of "
            f"{REPOSITORY} or the path or URL of a built wheel (.whl)")
    if version.endswith(".whl"):
        return version
    if any(c.isspace() or c in "@#;" for c in version):
        raise InputError(f"version: '{version}' is neither a commit SHA or tag nor a wheel")
    return f"torchdev-lint @ git+{REPOSITORY}@{version}"


def install_command(env: dict[str, str]) -> list[str]:
    target = install_target(env.get("INPUT_VERSION", ""))
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", target]


def check_commands(env: dict[str, str]) -> list[list[str]]:
    """The SARIF run first (its findings never fail the step), then the annotations run,
    whose exit status is the step's: 1 for findings, 2 for files that could not be checked."""
    args = shlex.split(env.get("INPUT_ARGS", ""))
    targets = env.get("INPUT_TARGET_DEVICES", "").strip()
    if targets:
        args = ["--target-devices", targets, *args]
    src = shlex.split(env.get("INPUT_SRC", "").strip() or ".")
    commands = []
    if env.get("INPUT_SARIF", "false").strip().lower() == "true":
        sarif_file = env.get("INPUT_SARIF_FILE", "").strip() or "torchdev-lint.sarif"
        commands.append(["torchdev-lint", *args, "--format", "sarif", "--output-file", sarif_file,
                         "--exit-zero", *src])
    confirm = env.get("INPUT_CONFIRM", "").strip()
    if confirm:
        # The project's tests first, on a simulated GPU: their verdicts then reach every later
        # run (the SARIF one below included); the step's status is the annotations run's.
        pytest_args = [] if confirm.lower() == "true" else shlex.split(confirm)
        commands.insert(0, ["torchdev-lint", "confirm", "--lint", ",".join(src), "--format", "concise",
                            "--time-limit", env.get("INPUT_CONFIRM_TIME_LIMIT", "").strip() or "1800",
                            *pytest_args])
    commands.append(["torchdev-lint", *args, "--format", "github", *src])
    return commands


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    if argv == ["install"]:
        try:
            command = install_command(env)
        except InputError as error:
            print(f"::error title=torchdev-lint action::{error}", flush=True)
            return 2
        print("+ " + shlex.join(command), flush=True)
        return subprocess.call(command)
    if argv == ["check"]:
        status = 0
        for command in check_commands(env):
            print("+ " + shlex.join(command), flush=True)
            status = subprocess.call(command)
            if command[1:2] == ["confirm"] and status == 2:
                print("::warning title=torchdev-lint confirm::the tests could not run to their end on the "
                      "simulated GPU (see the log): the findings below have the verdicts kept so far", flush=True)
        return status
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
