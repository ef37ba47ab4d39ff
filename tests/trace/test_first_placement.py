"""The simulator's op checks start with the first placement on its GPU (``placement_probe.py``).

Before anything is on the simulated GPU, every op is a CPU op that the dispatch mode would only
pass through: it is not entered, and CPU-only code (most of a test suite) does not pay for it.
From the first placement on, in every thread, an op that mixes devices fails as on a GPU: a
default CUDA generator handed to a CPU op, a thread that started before the placement, and a
placement made while the program's own dispatch mode was on.
"""

import pytest
from tracehelp import ROOT, printed_cases

PROBE = ROOT / "tests" / "trace" / "placement_probe.py"
MIXED = "ERR RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


def _printed(result) -> dict[str, str]:
    assert "DONE" in result.program_output, result.program_output[-2000:]
    return printed_cases(result)


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(PROBE.read_text().splitlines(), 1) if f"# mismatch: {marker}" in text)


@pytest.mark.traces("placement-generator")
def test_cpu_work_runs_without_the_dispatch_mode_until_a_default_generator_is_taken(traced):
    printed = _printed(traced("placement-generator"))
    assert printed["cpu work before any placement"] == "6.0"
    assert printed["dispatch modes before any placement"] == "0"
    assert printed["randn(generator=default cuda generator) on the CPU"] == (
        "ERR RuntimeError: Expected a 'cpu' device type for generator but found 'cuda'")
    assert printed["cuda.manual_seed, then cpu work"] == "cpu"


@pytest.mark.traces("placement-generator")
def test_the_default_generator_mismatch_is_reported_at_its_line(traced):
    [finding] = traced("placement-generator").at(_line("default generator"), "TDL100")
    assert finding["status"] == "confirmed"


@pytest.mark.traces("placement-late")
def test_a_placement_inside_the_programs_own_mode_is_checked_once_that_mode_ends(traced):
    printed = _printed(traced("placement-late"))
    assert printed["placed inside the program's mode"] == "cuda:0"
    assert printed["the program's mode left cleanly"] == "0"
    assert printed["mixing after the program's mode ends"] == MIXED
    assert printed["same device after the program's mode ends"] == "cuda:0"


@pytest.mark.traces("placement-late")
def test_a_thread_started_before_the_first_placement_is_checked(traced):
    result = traced("placement-late")
    assert _printed(result)["a thread started before the first placement mixes devices"] == MIXED
    [finding] = result.at(_line("older thread"), "TDL100")
    assert finding["status"] == "confirmed"
