"""The tracer's verdict on TDL013 (device-chosen-twice): on the simulated GPU
`torch.cuda.is_available()` is true, so the machine's decision picks CUDA; the program's own
option (`--cpu`, `--device cpu`, no `--cuda`) sends the other value to the CPU, and the two
meet at the finding's line. Run without such an option, both decisions agree: not confirmed."""

import pytest
from tracehelp import DATA, expected_lines

CASES = {
    "TDL013-detector": "tdl013_detector.py",
    "TDL013-helper": "tdl013_helper.py",
    "TDL013-device-option": "tdl013_device_option.py",
}


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.traces(k)) for k in CASES])
def test_the_option_that_makes_the_decisions_disagree_confirms_it(key, traced):
    result = traced(key)
    ((line, status, code),) = expected_lines(DATA / CASES[key])
    (finding,) = result.at(line, code)
    assert finding["status"] == "confirmed", finding
    assert "the two device decisions disagreed" in finding["evidence"]
    assert "cuda:0 and cpu" in finding["evidence"] and f"{CASES[key]}:{line}" in finding["evidence"]
    assert result.returncode == 1, result.stdout
    # the mismatch is the finding's: no TDL100 beside it
    assert [f["code"] for f in result.findings] == ["TDL013"], result.findings


@pytest.mark.traces("TDL013-detector-agree")
def test_without_the_option_both_decisions_pick_the_simulated_gpu(traced):
    result = traced("TDL013-detector-agree")
    (finding,) = result.findings
    assert finding["code"] == "TDL013" and finding["status"] == "not confirmed"
    assert "--cpu" in finding["evidence"]
    assert result.returncode == 0, result.stdout
