"""`target-devices`: the machines the code must run on, declared instead of inferred.

A script with no CPU path gets its hardcoded CUDA as *possible* under `auto`; a team that
says "this must run on a laptop" gets it as certain, and a GPU-only repository turns the
portability findings off while the device-mixing rules stay. The summary says what the
default output left out and how to ask for it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.finding import Confidence
from torchdev_lint.rule import Rule

# A research script: CUDA everywhere, no CPU branch, no device option.
GPU_SCRIPT = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    model = nn.Linear(4, 2).cuda()
    state = torch.load("weights.pt")
    model.load_state_dict(state)
    x = torch.randn(8, 4)
    x.to("cuda")
    print(model(x), x.cuda())
    torch.save(model.state_dict(), "weights.pt")
    """)


def codes(findings):
    return sorted((f.line, f.code, f.confidence.value) for f in findings)


def test_auto_sets_a_cuda_only_script_aside_and_counts_it():
    result = lint_source("t.py", GPU_SCRIPT, list(Rule.registry.values()))
    # the dropped move is certain whatever the machines; the hardcoded CUDA is possible, set
    # aside by `auto`, and so is the load, which may also read back what the script wrote
    assert codes(result.findings) == [(8, "TDL003", "certain")]
    assert (result.hidden, result.set_aside) == (4, 3)


def test_a_machine_without_cuda_makes_every_cuda_only_line_certain():
    result = lint_source("t.py", GPU_SCRIPT, list(Rule.registry.values()), target_devices=("cpu", "cuda"))
    assert [(line, code) for line, code, confidence in codes(result.findings) if confidence == "certain"] == [
        (4, "TDL001"), (8, "TDL002"), (8, "TDL003"), (9, "TDL001")]
    (hardcoded, *_) = [f for f in result.findings if f.code == "TDL001"]
    assert any("target-devices names cpu" in step.message for step in hardcoded.evidence)


def test_cuda_only_turns_portability_findings_off_and_keeps_the_rest():
    result = lint_source("t.py", GPU_SCRIPT, list(Rule.registry.values()), preview=True,
                         target_devices=("cuda",))
    assert {f.code for f in result.findings} == {"TDL003"}


def test_test_code_stays_possible_whatever_the_targets():
    code = "import torch\ndef test_forward():\n    assert torch.zeros(2).cuda().sum() == 0\n"
    (finding,) = lint_source("tests/test_m.py", code, [Rule.registry["TDL001"]], preview=True,
                             target_devices=("cpu",)).findings
    assert finding.confidence is Confidence.POSSIBLE


def test_the_setting_from_pyproject_the_command_line_and_its_errors(tmp_path, run_cli):
    (tmp_path / "train.py").write_text(GPU_SCRIPT)
    status, out, _ = run_cli("--no-cache", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert status == 1 and "TDL001" not in out
    assert "4 possible findings not shown (`--preview`); 3 of them in code judged CUDA-only" in out

    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\ntarget-devices = ["cpu", "cuda"]\n')
    status, out, _ = run_cli("--no-cache", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert out.count("TDL001") == 2 and "1 possible finding not shown (`--preview`).\n" in out
    # the command line overrides the configuration
    status, out, _ = run_cli("--no-cache", "--target-devices", "cuda", "--output-format", "concise",
                             "train.py", cwd=tmp_path)
    assert "TDL001" not in out and "TDL003" in out

    status, _, err = run_cli("--target-devices", "gpu", "train.py", cwd=tmp_path)
    assert status == 2 and "--target-devices: unknown device 'gpu'" in err
    (tmp_path / "pyproject.toml").write_text('[tool.torchdev-lint]\ntarget-devices = "everywhere"\n')
    status, _, err = run_cli("train.py", cwd=tmp_path)
    assert status == 2 and "'target-devices': unknown device 'everywhere'" in err


def test_the_count_of_hidden_findings_survives_the_cache(tmp_path, run_cli):
    (tmp_path / "train.py").write_text(GPU_SCRIPT)
    first = run_cli("--output-format", "concise", "train.py", cwd=tmp_path)
    second = run_cli("-v", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert "4 possible findings not shown" in first[1]
    assert second[1] == first[1]


def test_a_noqa_comment_hides_a_finding_from_the_count_too():
    code = GPU_SCRIPT.replace("nn.Linear(4, 2).cuda()", "nn.Linear(4, 2).cuda()  # noqa: TDL001")
    assert lint_source("t.py", code, list(Rule.registry.values())).hidden == 3


def test_the_evidence_says_why_auto_judged_the_file_cuda_only():
    result = lint_source("t.py", GPU_SCRIPT, [Rule.registry["TDL001"]], preview=True)
    assert all("judged CUDA-only (target-devices auto)" in f.evidence[-1].message for f in result.findings)


@pytest.mark.parametrize("value, shown", [("cpu,cuda", True), ("cuda", False), ("auto", False)])
def test_flake8_takes_the_setting(tmp_path, value, shown):
    (tmp_path / "train.py").write_text(GPU_SCRIPT)
    process = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TDL", "--tdl-target-devices", value,
         "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert ("TDL001" in process.stdout) is shown
    assert "TDL003" in process.stdout
