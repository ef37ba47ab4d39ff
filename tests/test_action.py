"""The GitHub Action: its inputs, and the command lines its script builds and runs."""

import importlib.util
import json
import os
import subprocess
import sys

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
    assert target("0.1.0") == "torchdev-lint==0.1.0"
    assert target("latest") == "torchdev-lint"


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
           "INPUT_SRC": "testdata/project", "INPUT_ARGS": "--isolated --no-cache",
           "INPUT_SARIF": "true", "INPUT_SARIF_FILE": str(sarif_file)}
    process = subprocess.run([sys.executable, str(ROOT / "action" / "run.py"), "check"], cwd=ROOT, env=env,
                             capture_output=True, text=True)
    assert process.returncode == 1, process.stderr  # findings fail the step
    annotations = [line for line in process.stdout.splitlines() if line.startswith("::error ")]
    assert annotations and all("file=testdata/project/" in line for line in annotations)
    results = json.loads(sarif_file.read_text())["runs"][0]["results"]
    assert len(results) == len(annotations)
