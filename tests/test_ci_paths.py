"""CI formats place a finding at the same path however the job is run: from the repository
root, from a subfolder, or with absolute arguments (docs/ci.md). GitHub, GitLab and SARIF
give paths from the repository root; JSON gives the path as named (docs/json-output.md).
A file that cannot be checked shows in each CI format, not only on standard error."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHDEV_LINT_DAEMON": "0"}
# A certain finding, shown by default: the file falls back to the CPU, and its load of weights
# (which its export saves from the GPU) without map_location fails on a machine without one.
MODEL = ("import sys\nimport torch\n\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
         "model = torch.nn.Linear(2, 2)\nmodel.load_state_dict(torch.load(sys.argv[1]))\n"
         "def export(out):\n    torch.save(model.to(device).state_dict(), out)\n")
BROKEN = "def f(:\n    pass\n"


@pytest.fixture
def repository(tmp_path):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "mypkg" / "model.py").write_text(MODEL)
    return root


def run(fmt, *args, cwd):
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", "--no-cache", "--format", fmt, *map(str, args)],
                             cwd=cwd, capture_output=True, text=True, env=ENV, timeout=300)
    assert process.returncode in (1, 2), process.stderr
    return process


def paths(fmt, output) -> list[str]:
    if fmt == "github":
        return [line.split("file=")[1].split(",")[0] for line in output.splitlines()]
    if fmt == "gitlab":
        return [issue["location"]["path"] for issue in json.loads(output)]
    if fmt == "sarif":
        (sarif_run,) = json.loads(output)["runs"]
        assert sarif_run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/repo/")
        return [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif_run["results"]]
    return [finding["path"] for finding in json.loads(output)]


def ways_to_run(root):
    """(working directory, argument) pairs that all name mypkg/model.py."""
    return [(root, "."), (root, "mypkg"), (root / "mypkg", "."), (root / "mypkg", "model.py"),
            (root / "mypkg", root / "mypkg" / "model.py"), (root.parent, root)]


@pytest.mark.parametrize("fmt", ["github", "gitlab", "sarif"])
def test_ci_formats_give_paths_from_the_repository_root(repository, fmt):
    for cwd, argument in ways_to_run(repository):
        assert paths(fmt, run(fmt, argument, cwd=cwd).stdout) == ["mypkg/model.py"], (cwd, argument)


def test_json_gives_the_path_as_named(repository):
    package = repository / "mypkg"
    assert paths("json", run("json", ".", cwd=repository).stdout) == ["mypkg/model.py"]
    assert paths("json", run("json", "model.py", cwd=package).stdout) == ["model.py"]
    named = package / "model.py"
    assert paths("json", run("json", named, cwd=package).stdout) == [str(named)]


def test_outside_a_checkout_the_configuration_root_stands_in(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdev-lint]\n")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "model.py").write_text(MODEL)
    assert paths("gitlab", run("gitlab", ".", cwd=tmp_path / "mypkg").stdout) == ["mypkg/model.py"]


def test_a_file_that_cannot_be_checked_is_annotated_in_each_ci_format(repository):
    (repository / "mypkg" / "broken.py").write_text(BROKEN)
    package = repository / "mypkg"

    github = run("github", ".", cwd=package)
    assert github.returncode == 2
    (annotation,) = [line for line in github.stdout.splitlines() if "broken.py" in line]
    assert annotation.startswith("::error title=torchdev-lint (TDL000),file=mypkg/broken.py,line=1,col=7::")
    assert annotation.endswith("TDL000 torchdev-lint could not check this file: syntax error: invalid syntax")

    gitlab = run("gitlab", ".", cwd=package)
    (issue,) = [i for i in json.loads(gitlab.stdout) if i["check_name"] == "TDL000"]
    assert issue["location"] == {"path": "mypkg/broken.py", "lines": {"begin": 1, "end": 1}}
    assert issue["severity"] == "critical" and "syntax error" in issue["description"]
    assert len({i["fingerprint"] for i in json.loads(gitlab.stdout)}) == 2

    sarif = json.loads(run("sarif", ".", cwd=package).stdout)
    (invocation,) = sarif["runs"][0]["invocations"]
    (notification,) = invocation["toolExecutionNotifications"]
    assert not invocation["executionSuccessful"]
    location = notification["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "mypkg/broken.py" and location["region"]["startLine"] == 1

    # JSON keeps its contract (an array of findings): the file is named on standard error.
    as_json = run("json", ".", cwd=package)
    assert as_json.returncode == 2 and "broken.py:1:7: error: syntax error" in as_json.stderr
    assert [f["code"] for f in json.loads(as_json.stdout)] == ["TDL004"]
