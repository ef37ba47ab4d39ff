"""benchmarks/sim_vs_real.py's comparison of a suite's runs on the real and the simulated GPU:
what it calls the same must be the same (its figures go into the results), read from JUnit XML
and verdict stores as pytest and the plugin write them."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _junit(cases: list[tuple[str, str, str]]) -> str:
    body = []
    for name, outcome, message in cases:
        inner = {"passed": "", "failed": f'<failure message="{message}">trace</failure>',
                 "skipped": f'<skipped message="{message}"/>'}[outcome]
        body.append(f'<testcase classname="tests.test_x" name="{name}">{inner}</testcase>')
    return f'<?xml version="1.0"?><testsuites><testsuite>{"".join(body)}</testsuite></testsuites>'


def test_it_counts_outcomes_and_messages_apart_from_the_exception_class(tmp_path):
    mixed = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    (tmp_path / "real.xml").write_text(_junit([
        ("test_mix", "failed", f"RuntimeError: {mixed}"),
        ("test_close", "failed", "AssertionError: not close"),
        ("test_ok", "passed", ""),
        ("test_reworded", "failed", "RuntimeError: one thing"),
    ]))
    (tmp_path / "sim.xml").write_text(_junit([
        ("test_mix", "failed", f"torchdev_lint.trace.runtime.SimulatedDeviceError: {mixed}"),
        ("test_close", "passed", ""),
        ("test_ok", "passed", ""),
        ("test_reworded", "failed", "RuntimeError: another thing"),
    ]))
    problem = {"by": "tests/test_x.py::test_mix", "code": "TDL100", "line": 3}
    for name, runtime in (("real", [problem]), ("sim", [problem, {**problem, "by": "tests/test_x.py::test_ok"}])):
        (tmp_path / f"{name}-verdicts").mkdir()
        (tmp_path / f"{name}-verdicts" / "verdicts.json").write_text(
            json.dumps({"files": {"key": {"confirmed": [], "runtime": runtime}}}))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_vs_real.py"), "--report-only",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("3 of 4 tests end the same")
    assert "tests.test_x::test_close" in lines[1]
    assert "1 of the 2 tests that fail on both say the same" in done.stdout
    assert "confirmed verdicts (line, code, test): real 0, sim 0, the same" in done.stdout
    assert "runtime verdicts (line, code, test): real 1, sim 2, DIFFERENT" in done.stdout
