"""Each rule's runnable program: the simulated GPU confirms the finding at the line the static
rule reports; the corrected program confirms nothing. Lines come from `# expect:` comments."""

import pytest
from tracehelp import DATA, RULE_PROGRAMS, expected_lines

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.rule import Rule

# Without their static rule, these bugs still show at run time, as a TDL100 mismatch whose
# evidence names the root-cause line (the origin the simulator tags on the tensor).
VISIBLE_AS_MISMATCH = {"TDL003", "TDL006", "TDL007", "TDL008"}


def _program(code: str, kind: str):
    return DATA / f"tdl{code[-3:]}_{kind}.py"


@pytest.mark.parametrize("code", [pytest.param(c, marks=pytest.mark.traces(f"{c}-bug")) for c in RULE_PROGRAMS])
def test_bug_program_is_confirmed_at_the_static_line(code, traced):
    result = traced(f"{code}-bug")
    expected = expected_lines(_program(code, "bug"))
    assert expected, "the program marks its bug lines"
    name = _program(code, "bug").name
    if code not in Rule.registry:
        if code not in VISIBLE_AS_MISMATCH:
            pytest.skip(f"{code} has no static rule yet and no runtime-only symptom")
        for line, status, _ in expected:
            assert any(f["code"] == "TDL100" and f"{name}:{line}" in f["evidence"] for f in result.confirmed), \
                result.stdout
        return
    for line, status, expected_code in expected:
        found = result.at(line, expected_code)
        assert found, f"no {expected_code} at line {line}:\n{result.stdout}\n{result.program_output}"
        assert found[0]["status"] == status, found[0]
        assert found[0]["evidence"]
        if status == "confirmed":
            assert f"{name}:" in found[0]["evidence"]
    assert result.returncode == 1, result.stderr
    assert not [f for f in result.findings if f["code"] == "TDL100"], "the rule explains every mismatch"


@pytest.mark.parametrize("code", [pytest.param(c, marks=pytest.mark.traces(f"{c}-ok")) for c in RULE_PROGRAMS])
def test_correct_program_confirms_nothing(code, traced):
    result = traced(f"{code}-ok")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.confirmed == []
    run = result.report["runs"][0]
    assert run["mode"] == "sim"
    assert run["outcome"] == {"kind": "exit", "status": 0}, run


@pytest.mark.traces("TDL001-bug")
def test_auto_mode_adds_a_cpu_only_run_for_hardcoded_devices(traced):
    runs = traced("TDL001-bug").report["runs"]
    assert [r["mode"] for r in runs] == ["sim", "cpu-only"]
    assert runs[1]["keep_going"] is True
    finding = traced("TDL001-bug").at(5, "TDL001")[0]
    assert finding["mode"] == "cpu-only"
    assert "Torch not compiled with CUDA enabled" in finding["evidence"]


@pytest.mark.traces("TDL005-bug")
def test_tdl005_is_honest_about_parameter_identity(traced):
    result = traced("TDL005-bug")
    lines = {text.split("=")[0].strip(): n for n, text in
             enumerate(_program("TDL005", "bug").read_text().splitlines(), 1) if "torch.optim." in text}
    harmless = result.at(lines["adam"], "TDL005")[0]
    assert harmless["status"] == "not confirmed"
    assert "kept the parameters' identity" in harmless["evidence"]
    replaced = result.at(lines["sgd"], "TDL005")[0]
    assert replaced["status"] == "confirmed"
    assert "replaced 2 of the parameters" in replaced["evidence"] and "training does nothing" in replaced["evidence"]
    real = result.at(lines["adagrad"], "TDL005")[0]
    assert "held state (sum)" in real["evidence"] and "stayed on cpu" in real["evidence"]
    assert "_foreach_addcmul_" in real["evidence"]
