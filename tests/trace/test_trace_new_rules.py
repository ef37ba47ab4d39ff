"""The tracer's verdict on TDL010 (a loss whose CPU weight meets device data): the simulated
GPU run confirms the static finding at the loss's construction, with the operation where the
weight met the device; after the rule's fix the program runs clean on the simulated GPU. And
on TDL012 (a moved copy of a new Parameter): the copy is a plain attribute that the module
move leaves on the CPU, where the forward meets it.

A confirmed finding's own failure is not reported a second time as a TDL100 (a device mix no
finding explains). TDL011 is judged over two ranks: tests/trace/test_trace_tdl011.py."""

import importlib.util
import json
import shutil

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

PROGRAM = ROOT / "testdata" / "rules" / "tdl010_before.py"


def trace(run_cli, path):
    status, out, err = run_cli("trace", "--mode", "sim", "--single-run", "--format", "json", path)
    return status, json.loads(out)


def test_sim_confirms_the_loss_weight_left_on_the_cpu(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    status, report = trace(run_cli, program)
    assert status != 0
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL010"]
    assert (finding["line"], finding["column"]) == (15, 13)
    assert finding["status"] == "confirmed"
    assert "torch.tensor at" in finding["evidence"] and "program.py:15" in finding["evidence"]
    assert "nll_loss" in finding["evidence"]
    # the crash at :21 is the confirmed finding's: no TDL100 beside it
    assert [f["code"] for f in report["findings"]] == ["TDL010"], report["findings"]
    # not a distributed program: one run, no ranks
    assert len(report["runs"]) == 1 and not any("run as rank" in limit for limit in report["runs"][0]["limits"])


def test_after_the_fix_the_simulated_gpu_run_is_clean(tmp_path, run_cli):
    program = shutil.copy(PROGRAM, tmp_path / "program.py")
    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL010", "--fix", "--unsafe-fixes", program)
    assert status == 0, out + err
    assert "criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0])).to(device)" in program.read_text()
    status, report = trace(run_cli, program)
    assert status == 0, report
    assert [f for f in report["findings"] if f["code"] in ("TDL010", "TDL100")] == []


MOVED = ROOT / "testdata" / "rules" / "tdl012_moved_before.py"


def test_sim_confirms_the_parameter_copy_left_behind_and_the_fix(tmp_path, run_cli):
    program = shutil.copy(MOVED, tmp_path / "program.py")
    status, report = trace(run_cli, program)
    assert status != 0
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL012"]
    assert (finding["line"], finding["status"]) == (11, "confirmed")
    assert "stayed on cpu" in finding["evidence"] and "aten.mul" in finding["evidence"]
    assert [f["code"] for f in report["findings"]] == ["TDL012"], report["findings"]  # no TDL100 beside it

    status, out, err = run_cli("--isolated", "--preview", "--select", "TDL012", "--fix", program)
    assert status == 0, out + err
    status, report = trace(run_cli, program)
    assert status == 0, report
    assert [f for f in report["findings"] if f["code"] in ("TDL012", "TDL100")] == []
