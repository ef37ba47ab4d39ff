"""The machine-without-GPU mode and running a module."""

import pytest


@pytest.mark.traces("TDL001-cpu-only")
def test_cpu_only_mode_stops_where_a_machine_without_gpu_fails(traced):
    result = traced("TDL001-cpu-only")
    run = result.report["runs"][0]
    assert run["mode"] == "cpu-only"
    assert run["outcome"]["kind"] == "exception"
    assert run["outcome"]["type"] == "AssertionError"
    assert run["outcome"]["site"]["line"] == 5
    assert run["exit_status"] == 1
    finding = result.at(5, "TDL001")[0]
    assert finding["status"] == "confirmed"
    assert "raises AssertionError: Torch not compiled with CUDA enabled" in finding["evidence"]
    assert "AssertionError: Torch not compiled with CUDA enabled" in result.program_output  # its traceback


@pytest.mark.traces("TDL004-cpu-only")
def test_cpu_only_mode_fails_on_a_gpu_saved_checkpoint(traced):
    result = traced("TDL004-cpu-only")
    run = result.report["runs"][0]
    assert run["outcome"]["type"] == "RuntimeError"
    assert run["outcome"]["site"]["line"] == 17
    assert "Attempting to deserialize object on a CUDA device" in run["outcome"]["message"]
    finding = result.at(17, "TDL004")[0]
    assert finding["status"] == "confirmed"
    assert "fails on a machine without a GPU" in finding["evidence"] and "cuda:0" in finding["evidence"]


@pytest.mark.traces("TDL003-bug")
def test_a_module_runs_as_python_dash_m(traced):
    result = traced("TDL003-bug")
    assert result.report["runs"][0]["command"] == "python -m testdata.trace.tdl003_bug"
    finding = result.at(10, "TDL003")[0]
    assert finding["path"] == "testdata/trace/tdl003_bug.py"
    assert finding["status"] == "confirmed"
