"""The command lines of the GitHub Action (action.yml), built from its inputs.

    python action/run.py install   # pip install torchdev-lint (a version, or the action's own copy)
    python action/run.py check     # torchdev-lint --format github [and --format sarif]

Inputs arrive as environment variables (INPUT_ARGS, INPUT_SRC, INPUT_VERSION, INPUT_SARIF,
INPUT_SARIF_FILE); ``args`` and ``src`` are split like a shell would (quotes respected).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ACTION = Path(__file__).resolve().parent.parent  # the repository the action runs from


def install_command(env: dict[str, str]) -> list[str]:
    version = env.get("INPUT_VERSION", "").strip()
    if not version:
        target = str(ACTION)  # the revision the workflow pinned with `uses: ...@ref`
    elif version == "latest":
        target = "torchdev-lint"
    else:
        target = f"torchdev-lint=={version}"
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", target]


def check_commands(env: dict[str, str]) -> list[list[str]]:
    """The SARIF run first (its findings never fail the step), then the annotations run,
    whose exit status is the step's: 1 for findings, 2 for files that could not be checked."""
    args = shlex.split(env.get("INPUT_ARGS", ""))
    src = shlex.split(env.get("INPUT_SRC", "").strip() or ".")
    commands = []
    if env.get("INPUT_SARIF", "false").strip().lower() == "true":
        sarif_file = env.get("INPUT_SARIF_FILE", "").strip() or "torchdev-lint.sarif"
        commands.append(["torchdev-lint", *args, "--format", "sarif", "--output-file", sarif_file,
                         "--exit-zero", *src])
    commands.append(["torchdev-lint", *args, "--format", "github", *src])
    return commands


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    if argv == ["install"]:
        return subprocess.call(install_command(env))
    if argv == ["check"]:
        status = 0
        for command in check_commands(env):
            print("+ " + shlex.join(command), flush=True)
            status = subprocess.call(command)
        return status
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
