"""The GitHub Action: its inputs, and the command lines its script builds and runs."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

spec = importlib.util.spec_from_file_location("action_run", ROOT / "action" / "run.py")
action = importlib.util.module_from_spec(spec)
spec.loader.exec_module(action)


def test_action_metadata_is_a_composite_action_with_its_inputs():
    meta = yaml.safe_load((ROOT / "action.yml").read_text())
    assert {"args", "version", "src", "sarif", "sarif-file", "python-version"} <= set(meta["inputs"])
    steps = meta["runs"]["steps"]
    assert meta["runs"]["using"] == "composite"
    assert steps[0]["uses"].startswith("actions/setup-python@")
    assert [s["run"] for s in steps if "run" in s] == [
        'python "$GITHUB_ACTION_PATH/action/run.py" install', 'python "$GITHUB_ACTION_PATH/action/run.py" check']
    upload = steps[-1]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["if"] == "always() && inputs.sarif == 'true'"
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"


def test_install_command_for_each_kind_of_version():
    def target(version):
        return action.install_command({"INPUT_VERSION": version})[-1]

    assert target("") == str(ROOT)  # the action's own revision
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert target(sha) == f"torchdev-lint @ git+https://github.com/torchdev-lint/torchdev-lint@{sha}"
    assert target(" v0.2.0 ") == "torchdev-lint @ git+https://github.com/torchdev-lint/torchdev-lint@v0.2.0"
    assert target("dist/torchdev_lint-0.1.0-py3-none-any.whl") == "dist/torchdev_lint-0.1.0-py3-none-any.whl"
    # The repository the git URL names is the project's own (pyproject.toml's Repository).
    assert 'Repository = "https://github.com/torchdev-lint/torchdev-lint"' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("version", ["latest", "0.1.0", "1.2"])
def test_no_version_installs_from_pypi_where_torchdev_lint_is_not_published(version):
    with pytest.raises(action.InputError, match="not published on PyPI"):
        action.install_command({"INPUT_VERSION": version})
    process = subprocess.run([sys.executable, str(ROOT / "action" / "run.py"), "install"],
                             env={**os.environ, "INPUT_VERSION": version}, capture_output=True, text=True)
    assert process.returncode == 2
    assert process.stdout.startswith("::error title=torchdev-lint action::version: ")


def test_no_document_installs_torchdev_lint_from_pypi():
    """Until it is published, `pip install torchdev-lint` (or with an extra) fails for users:
    documents install from git at a commit, or a built wheel."""
    import re

    plain = re.compile(r"pip install ['\"]?torchdev-lint(\[[a-z,]+\])?(==[\d.]+)?(?!\s*@)['\"]?(\s|$)")
    for path in [ROOT / "action.yml", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not plain.search(line), f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def test_check_commands_split_inputs_like_a_shell():
    env = {"INPUT_ARGS": "--select TDL001,TDL004 --per-file-ignores 'tests/*:TDL004'",
           "INPUT_SRC": "src 'my scripts'"}
    assert action.check_commands(env) == [[
        "torchdev-lint", "--select", "TDL001,TDL004", "--per-file-ignores", "tests/*:TDL004",
        "--format", "github", "src", "my scripts"]]
    assert action.check_commands({}) == [["torchdev-lint", "--format", "github", "."]]
    sarif = action.check_commands({"INPUT_SARIF": "true", "INPUT_SARIF_FILE": "out.sarif"})
    assert sarif == [
        ["torchdev-lint", "--format", "sarif", "--output-file", "out.sarif", "--exit-zero", "."],
        ["torchdev-lint", "--format", "github", "."]]


def test_check_step_annotates_and_writes_sarif(tmp_path):
    sarif_file = tmp_path / "report.sarif"
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           # the preview tier: the bundled project's findings (its .cuda() calls) are possible
           "INPUT_SRC": "testdata/project", "INPUT_ARGS": "--isolated --no-cache --preview",
           "INPUT_SARIF": "true", "INPUT_SARIF_FILE": str(sarif_file)}
    process = subprocess.run([sys.executable, str(ROOT / "action" / "run.py"), "check"], cwd=ROOT, env=env,
                             capture_output=True, text=True)
    assert process.returncode == 1, process.stderr  # findings fail the step
    annotations = [line for line in process.stdout.splitlines() if line.startswith("::error ")]
    assert annotations and all("file=testdata/project/" in line for line in annotations)
    results = json.loads(sarif_file.read_text())["runs"][0]["results"]
    assert len(results) == len(annotations)


def test_the_target_devices_input_comes_before_the_user_args():
    meta = yaml.safe_load((ROOT / "action.yml").read_text())
    assert "target-devices" in meta["inputs"]
    env = {"INPUT_TARGET_DEVICES": " cpu,cuda ", "INPUT_ARGS": "--exit-zero", "INPUT_SRC": "src"}
    (command,) = action.check_commands(env)
    assert command[:4] == ["torchdev-lint", "--target-devices", "cpu,cuda", "--exit-zero"]
    assert action.check_commands({"INPUT_SRC": "src"})[0][:2] == ["torchdev-lint", "--format"]
