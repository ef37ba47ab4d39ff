"""Verdicts from events, without running anything (the parent's logic on synthetic runs)."""

import os

from torchdev_lint.finding import Finding
from torchdev_lint.trace import verdicts
from torchdev_lint.trace.session import Options, Run

PATH = os.path.realpath("train.py")


def _finding(code, line, end_line=None):
    return Finding(path="train.py", line=line, column=5, end_line=end_line or line, end_column=20,
                   code=code, name=code.lower(), message="m")


def _site(line, end_line=None):
    return [PATH, line, end_line or line, 4, 19]


def _run(events, lines=(), outcome=None, mode="sim"):
    run = Run(Options(target="train.py"), mode=mode, torch="2.13.0")
    for seq, event in enumerate(events, 1):
        event.setdefault("seq", seq)
    run.events = events
    run.lines = {PATH: {line: 0 for line in lines}}
    run.outcome = outcome or {"kind": "exit", "status": 0}
    return run


def _judge(findings, *runs):
    return verdicts.judge(findings, list(runs), verdicts.Where(os.getcwd()))


def test_not_reached_when_the_line_never_ran_and_says_why():
    run = _run([], lines=[1, 2], outcome={"kind": "stopped", "reason": "max-steps:2"})
    run.steps = 2
    [traced] = _judge([_finding("TDL003", 40)], run)
    assert traced.status == "not reached"
    assert "--max-steps" in traced.evidence


def test_tdl005_followed_move_is_not_confirmed():
    move = {"kind": "optimizer-before-move", "site": _site(27), "stack": [_site(27)], "optimizer": "Adam",
            "move_site": _site(28), "move": "Net.to(cuda:0)", "outcome": "followed", "src": "cpu", "dst": "cuda:0"}
    [traced] = _judge([_finding("TDL005", 27)], _run([move], lines=[27, 28]))
    assert traced.status == "not confirmed"
    assert "kept the parameters' identity" in traced.evidence


def test_tdl005_replaced_parameters_are_confirmed():
    move = {"kind": "optimizer-before-move", "site": _site(27), "stack": [_site(27)], "optimizer": "SGD",
            "move_site": _site(28), "move": "Net.to(cuda:0)", "outcome": "params-replaced", "replaced": 2,
            "src": "cpu", "dst": "cuda:0"}
    orphan = {"kind": "orphaned-step", "site": _site(27), "stack": [_site(27)], "step_site": _site(35),
              "no_grad": True}
    [traced] = _judge([_finding("TDL005", 27)], _run([move, orphan], lines=[27, 28, 35]))
    assert traced.status == "confirmed"
    assert "training does nothing" in traced.evidence


def test_a_multi_line_call_matches_by_line_range():
    discard = {"kind": "discarded-move", "site": _site(41, 42), "what": ".to(cuda:0)", "src": "cpu",
               "dst": "cuda:0", "new": True}
    [traced] = _judge([_finding("TDL003", 41, 42)], _run([discard], lines=[42]))
    assert traced.status == "confirmed"


def test_the_most_telling_verdict_wins_across_runs():
    request_sim = {"kind": "cuda-request", "site": _site(28), "what": ".cuda()", "target": "cuda:0", "raised": False}
    request_cpu = dict(request_sim, raised=True)
    findings = [_finding("TDL001", 28)]
    [traced] = _judge(findings, _run([request_sim], lines=[28]), _run([request_cpu], lines=[28], mode="cpu-only"))
    assert traced.status == "confirmed" and traced.mode == "cpu-only"
    [alone] = _judge(findings, _run([request_sim], lines=[28]))
    assert alone.status == "not confirmed" and "only where CUDA is missing" in alone.evidence
    assert "--single-run" not in alone.evidence  # it was not passed
    [single] = verdicts.judge(findings, [_run([request_sim], lines=[28])], verdicts.Where(os.getcwd()),
                              single_run=True)
    assert "drop --single-run" in single.evidence


def test_mismatches_explained_by_a_finding_are_not_tdl100():
    origin = {"kind": "discarded-to-result", "site": _site(39), "what": ".to(cuda:0)"}
    explained = {"kind": "mismatch", "op": "aten.addmm", "devices": ["cuda:0", "cpu"], "site": _site(44),
                 "stack": [_site(44)], "operands": [{"arg": 1, "device": "cpu", "shape": [4], "origin": origin}]}
    unexplained = {"kind": "mismatch", "op": "aten.add", "devices": ["cuda:0", "cpu"], "site": _site(50),
                   "stack": [_site(50), _site(60)], "count": 3,
                   "operands": [{"arg": 0, "device": "cpu", "shape": [2]}]}
    discard = {"kind": "discarded-move", "site": _site(39), "what": ".to(cuda:0)", "src": "cpu", "dst": "cuda:0",
               "new": True}
    traced = _judge([_finding("TDL003", 39)], _run([discard, explained, unexplained], lines=[39, 44, 50]))
    assert [(t.code, t.line, t.status) for t in traced] == [("TDL003", 39, "confirmed"), ("TDL100", 50, "confirmed")]
    assert "aten.addmm at train.py:44" in traced[0].evidence
    assert "(3 times)" in traced[1].evidence and "called from train.py:60" in traced[1].evidence
    # without the TDL003 finding (rule ignored), the same mismatch is reported as TDL100
    alone = _judge([], _run([discard, explained], lines=[39, 44]))
    assert [(t.code, t.line) for t in alone] == [("TDL100", 44)]
    assert "whose move result was discarded" in alone[0].evidence


def test_a_real_gpu_crash_with_the_mismatch_message_is_a_tdl100():
    outcome = {"kind": "exception", "type": "RuntimeError", "site": _site(12), "status": 1,
               "message": "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"}
    traced = _judge([], _run([], lines=[12], outcome=outcome, mode="real"))
    assert [(t.code, t.line) for t in traced] == [("TDL100", 12)]


def test_a_real_gpu_foreach_failure_after_a_stale_optimizer_state_is_tdl005():
    move = {"kind": "optimizer-before-move", "site": _site(20), "stack": [_site(20)], "optimizer": "Adagrad",
            "move_site": _site(21), "move": "Linear.to(cuda:0)", "outcome": "state-left-behind", "stale": ["sum"],
            "stale_devices": ["cpu"], "src": "cpu", "dst": "cuda:0"}
    outcome = {"kind": "exception", "type": "RuntimeError", "site": _site(23), "status": 1,
               "message": "Tensors of the same index must be on the same device and the same dtype except "
                          "`step` tensors that can be CPU and float32/64 notwithstanding"}
    traced = _judge([_finding("TDL005", 20)], _run([move], lines=[20, 21, 23], outcome=outcome, mode="real"))
    assert [(t.code, t.status) for t in traced] == [("TDL005", "confirmed")]
    assert "failed at train.py:23: Tensors of the same index" in traced[0].evidence
