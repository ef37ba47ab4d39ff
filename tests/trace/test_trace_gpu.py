"""The same programs on a real CUDA device: the real-device verdicts must match the simulated
ones. Skipped without CUDA (this project's CI and development machines have none).

On a GPU machine: `python -m pytest -m gpu tests/trace -s` also prints the programs' own error
output, i.e. the exact error strings the GPU raised (record them in docs/trace.md).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tracehelp import RULE_DEMOS, RULE_PROGRAMS


def _cuda() -> bool:
    if not (Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi")):
        return False  # no driver: do not even import torch
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    return probe.stdout.strip() == "True"


CUDA = os.environ.get("TORCHDEV_LINT_NO_GPU") is None and _cuda()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="needs a CUDA device")]


def _verdicts(result) -> set[tuple]:
    return {(f["path"], f["line"], f["code"], f["status"]) for f in result.findings}


@pytest.mark.parametrize("kind", ["bug", "ok"])
@pytest.mark.parametrize("code", RULE_PROGRAMS)
def test_real_device_verdicts_match_the_simulator(code, kind, traced):
    real = traced(f"{code}-{kind}-real")
    simulated = traced(f"{code}-{kind}")
    print(f"--- {code} {kind} on the GPU: the program's output ---\n{real.program_output}")
    assert real.report["runs"][0]["mode"] == "real"
    assert _verdicts(real) == _verdicts(simulated), (real.stdout, simulated.stdout)


def test_clean_script_on_the_gpu(traced):
    real = traced("clean-real")
    assert real.report["runs"][0]["outcome"] == {"kind": "exit", "status": 0}, real.program_output
    assert real.findings == []


def test_keep_going_on_the_gpu_matches(traced):
    real = traced("keep-going-real")
    print(f"--- keep_going.py on the GPU ---\n{real.program_output}")
    simulated = traced("keep-going")
    assert {(f["line"], f["code"]) for f in real.confirmed} == {(f["line"], f["code"]) for f in simulated.confirmed}


@pytest.mark.parametrize("name", RULE_DEMOS)
def test_rule_demos_give_the_simulators_verdicts_on_the_gpu(name, traced):
    real = traced(f"rules-{name}")  # auto mode: the GPU
    simulated = traced(f"rules-{name}-sim")
    assert real.report["runs"][0]["mode"] == "real"
    assert _verdicts(real) == _verdicts(simulated), (real.stdout, simulated.stdout)
