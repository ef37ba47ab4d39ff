"""The tracer's verdict on TDL006 where the module is never moved (issue 40's loss): the
finding is at the line that fails, so the crash there confirms it, and the device mix
recorded there is that finding's, not a second (TDL100) one."""

import pytest
from tracehelp import DATA, expected_lines


@pytest.mark.traces("TDL006-loss")
def test_a_loss_nobody_moves_fails_where_its_weights_meet_the_labels(traced):
    result = traced("TDL006-loss")
    ((line, _, code),) = expected_lines(DATA / "tdl006_loss.py")
    (finding,) = result.at(line, code)
    assert finding["status"] == "confirmed", finding
    assert "indices should be either on cpu or on the same device" in finding["evidence"]
    assert [f["code"] for f in result.findings] == ["TDL006"], result.findings
