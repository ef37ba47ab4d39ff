"""Realistic runs: a clean training script, several bugs in one run, limits, failures."""

import os
import sys
import time

import pytest
from tracehelp import DATA, ROOT

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.rule import Rule
from torchdev_lint.trace import session


@pytest.mark.traces("clean")
def test_clean_training_script_has_no_false_mismatch(traced):
    result = traced("clean")
    run = result.report["runs"][0]
    assert run["outcome"] == {"kind": "exit", "status": 0}, result.program_output
    assert result.findings == [], result.stdout
    assert result.returncode == 0
    assert "accuracy" in result.program_output  # the program's own output, kept out of the report
    assert [limit for limit in run["limits"] if limit.startswith("DataLoader worker processes (num_workers=2)")]


@pytest.mark.traces("surface")
def test_correct_code_across_the_api_surface_has_no_false_mismatch(traced):
    """MultiheadAttention, Transformer, LSTM with packed sequences, ctc_loss with CPU lengths,
    one_hot, CPU indices, a custom autograd.Function, torch.compile, GradScaler, autocast..."""
    result = traced("surface")
    assert result.report["runs"][0]["outcome"] == {"kind": "exit", "status": 0}, result.program_output
    assert result.findings == [], result.stdout
    assert "surface ok" in result.program_output
    assert "torch.compile ran the model eagerly (compiled kernels are not simulated)" in \
        result.report["runs"][0]["limits"]


@pytest.mark.traces("keep-going")
def test_keep_going_finds_every_planted_bug_in_one_run(traced):
    result = traced("keep-going")
    run = result.report["runs"][0]
    assert run["outcome"] == {"kind": "exit", "status": 0}, result.program_output
    source = (DATA / "keep_going.py").read_text().splitlines()
    bugs = [(n, line.split("# bug:")[1].strip()) for n, line in enumerate(source, 1) if "# bug:" in line]
    assert len(bugs) >= 4
    # the checkpoint this run saved and loads back is no bug: a machine without a GPU saves it on the CPU
    # (the static rule sees this round trip itself; test_trace_real_shapes has one only the run shows)
    [round_trip] = [n for n, line in enumerate(source, 1) if "# round trip: TDL004" in line]
    assert not [f for f in result.at(round_trip, "TDL004") if f["status"] == "confirmed"], result.stdout
    for line, code in bugs:
        if code == "TDL100" or code not in Rule.registry:
            assert any(f["code"] == "TDL100" and f"keep_going.py:{line}" in f["evidence"]
                       for f in result.confirmed), (line, result.stdout)
        else:
            assert [f for f in result.at(line, code) if f["status"] == "confirmed"], (line, code, result.stdout)


@pytest.mark.traces("max-steps")
def test_max_steps_stops_a_training_loop_that_never_ends(traced):
    run = traced("max-steps").report["runs"][0]
    assert run["outcome"]["kind"] == "stopped"
    assert run["outcome"]["reason"] == "max-steps:3"
    assert run["optimizer_steps"] == 3
    assert "after 3 optimizer steps" in run["summary"]


@pytest.mark.traces("timeout")
def test_timeout_stops_a_long_program(traced):
    result = traced("timeout")
    run = result.report["runs"][0]
    assert run["outcome"]["kind"] == "stopped" and run["outcome"]["reason"] == "timeout"
    assert run["seconds"] < 2 + session.GRACE_SECONDS  # stopped by the time limit, before the hard kill
    assert result.returncode == 0


def test_a_program_that_ignores_the_time_limit_is_killed(monkeypatch, capsys):
    monkeypatch.setattr(session, "GRACE_SECONDS", 1.0)
    options = session.Options(target=str(DATA / "long_training.py"), args=["stubborn"], mode="sim",
                              timeout=1.0, root=str(DATA))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    started = time.monotonic()
    with open(os.devnull, "w") as sink:
        run = session.run(options, sink)
    assert run.killed and run.outcome == {"kind": "killed", "reason": "timeout"}
    assert time.monotonic() - started < 30


@pytest.mark.traces("raise")
def test_a_program_that_raises_is_reported_with_its_line(traced):
    result = traced("raise")
    run = result.report["runs"][0]
    assert run["outcome"]["kind"] == "exception"
    assert run["outcome"]["type"] == "ValueError"
    assert run["outcome"]["message"] == "the program's own error"
    assert run["outcome"]["site"] == {"path": "testdata/trace/crash.py", "line": 9, "column": 5}
    assert run["exit_status"] == 1
    # it failed before any finding could be reached: nothing was traced, and the status says so
    assert result.returncode == 2
    assert ("torchdev-lint trace: error: the program could not be traced: it raised ValueError at "
            "testdata/trace/crash.py:9: the program's own error (exit status 1)\n") in result.stderr
    assert "ValueError: the program's own error" in result.stderr
    assert "torchdev_lint" not in result.stderr.split("Traceback")[1]  # the tracer's frames are hidden
    assert "tensor sum 3.0" in result.stderr


@pytest.mark.traces("exit")
def test_a_program_that_exits_with_status_3(traced):
    result = traced("exit")
    run = result.report["runs"][0]
    assert run["outcome"] == {"kind": "exit", "status": 3}
    assert run["exit_status"] == 3
    assert "exited with status 3" in run["summary"]
    assert result.returncode == 0
    # --program-output: the program's stdout and stderr went to the file, not the tracer's stderr
    assert "tensor sum 3.0" in result.files["program-output.txt"]
    assert "leaving with status 3" in result.files["program-output.txt"]
    assert "leaving with status 3" not in result.stderr


@pytest.mark.traces("selfcheck")
def test_simulator_internals_smoke(traced):
    """The torch internals the simulator relies on still behave (run per supported torch version)."""
    import json

    result = traced("selfcheck")
    report = json.loads(result.stdout)
    # "warning: ..." is a missing optimisation or a torch behaviour the simulator works around
    assert report["checks"] and all(v == "ok" or v.startswith("warning: ") for v in report["checks"].values()), report
    assert result.returncode == 0, report
    if not report["tested"]:
        pytest.skip(f"torch {report['torch']} passes the smoke test but is not a tested version")
    assert result.returncode == 0
    assert sys.version_info >= (3, 10)
