"""The README's set-up instructions are ones a new user can follow, and what it shows is what they get."""

import os
import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_setup_pins_torch_and_says_how_to_get_the_cpu_build():
    first = README.split("```sh\n", 1)[1].splitlines()[0]
    assert "pip install torch==2.13.0" in first  # never an unpinned `pip install torch`
    assert "--index-url https://download.pytorch.org/whl/cpu" in README


def test_pre_commit_snippet_names_no_release_that_does_not_exist():
    revs = re.findall(r"^\s*rev: (\S+)", README, flags=re.M)
    assert revs and all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in revs)


def test_the_sample_summary_is_what_the_first_command_prints(tmp_path):
    root = Path(__file__).resolve().parent.parent
    lines = README.splitlines()
    found = next(i for i, line in enumerate(lines) if line.startswith("Found "))
    # as on a fresh clone: no verdicts recorded by earlier runs of the tracer on testdata/
    env = {**os.environ, "TORCHDEV_LINT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "torchdev_lint", "--no-cache", "testdata/"], cwd=root,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1
    assert lines[found:found + 2] == done.stdout.splitlines()[-2:]
    # the bundled project's hardcoded `.cuda()` is in the default output, as the README shows
    assert "testdata/project/train.py:28:5: TDL001" in done.stdout
