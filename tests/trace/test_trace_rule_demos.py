"""The rules' demo programs (testdata/rules/*_before.py), traced as a user would: each verdict says
what the run showed. "confirmed" where the bug bit, "not reached" where the run stopped before the
line (or the use that would show its bug) could matter, "not confirmed" only for a line that ran
and did no harm; and no mismatch left unexplained. On a GPU machine (tests/trace/test_trace_gpu.py)
the same programs give the same verdicts on the GPU as on the simulated one."""

import pytest

# program -> {(line, code): status}: every finding of the program
VERDICTS = {
    "tdl002": {
        (12, "TDL002"): "not reached",  # EVAL_DEVICE: the run without a GPU stops at :34, before its use at :36
        (16, "TDL002"): "confirmed",
        (17, "TDL002"): "confirmed",
        (23, "TDL002"): "confirmed",
        (34, "TDL002"): "confirmed",
    },
    "tdl006": {
        (17, "TDL006"): "confirmed",  # mean: the forward fails at :21 on it
        (18, "TDL006"): "not reached",  # std and mask: never used before that failure
        (31, "TDL006"): "not reached",
    },
    "tdl007": {
        (18, "TDL007"): "confirmed",
        (19, "TDL007"): "not reached",  # heads: the forward fails in the blocks first
    },
    "tdl008": {
        (20, "TDL008"): "confirmed",
        (28, "TDL008"): "not reached",  # ran in the CPU forward only: the GPU forward fails at :21 first
        (34, "TDL008"): "not reached",
    },
    "tdl009": {
        (19, "TDL009"): "confirmed",
        (20, "TDL009"): "not reached",  # the program stops at the first .numpy(), :19
        (23, "TDL009"): "not reached",
    },
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.traces(f"rules-{n}")) for n in VERDICTS])
def test_each_verdict_says_what_the_run_showed(name, traced):
    result = traced(f"rules-{name}")
    got = {(f["line"], f["code"]): f["status"] for f in result.findings}
    assert got == VERDICTS[name], result.stdout
    for f in result.findings:
        if f["status"] == "not reached":
            assert "stopped" in f["evidence"], f
