"""Helpers for the tracer's tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "trace"
RULE_PROGRAMS = ["TDL001", "TDL002", "TDL003", "TDL004", "TDL005", "TDL006", "TDL007", "TDL008", "TDL009"]


def _trace(*args: str) -> list[str]:
    """The arguments of `torchdev-lint trace` (run in-process, see conftest.Pool)."""
    return ["--format", "json", *args]


# key -> `torchdev-lint trace` arguments, relative to ROOT. {shared}: the pool's directory.
TRACES: dict[str, list[str]] = {}
for _code in RULE_PROGRAMS:
    _n = _code[-3:]
    for _kind in ("bug", "ok"):
        TRACES[f"{_code}-{_kind}"] = _trace("--mode", "sim", f"testdata/trace/tdl{_n}_{_kind}.py")
        # the same program on a real CUDA device (tests marked gpu; never prefetched)
        TRACES[f"{_code}-{_kind}-real"] = _trace("--mode", "real", f"testdata/trace/tdl{_n}_{_kind}.py")
# TDL003's program also checks running a module, as `python -m` does.
TRACES["TDL003-bug"] = _trace("--mode", "sim", "-m", "testdata.trace.tdl003_bug")
# tdl004_bug.py loads a checkpoint saved on a GPU before the run (gpu_checkpoint.py writes one
# with cuda:0 location tags, without the tracer; see Pool._run and DEPENDS).
TRACES["TDL004-bug"] = _trace("--mode", "sim", "testdata/trace/tdl004_bug.py", "{shared}/gpu_saved.pt")
TRACES["TDL004-bug-real"] = _trace("--mode", "real", "testdata/trace/tdl004_bug.py", "{shared}/gpu_saved.pt")
TRACES.update({
    "TDL001-cpu-only": _trace("--mode", "cpu-only", "testdata/trace/tdl001_bug.py"),
    "TDL004-cpu-only": _trace("--mode", "cpu-only", "testdata/trace/tdl004_bug.py", "{shared}/gpu_saved.pt"),
    "clean": _trace("--mode", "sim", "testdata/trace/clean_training.py", "--workers", "2"),
    "surface": _trace("--mode", "sim", "testdata/trace/gpu_surface.py"),
    "clean-real": _trace("--mode", "real", "testdata/trace/clean_training.py", "--workers", "2"),
    "keep-going": _trace("--mode", "sim", "--keep-going", "testdata/trace/keep_going.py"),
    "keep-going-real": _trace("--mode", "real", "--keep-going", "testdata/trace/keep_going.py"),
    "max-steps": _trace("--mode", "sim", "--max-steps", "3", "testdata/trace/long_training.py"),
    "timeout": _trace("--mode", "sim", "--timeout", "2", "testdata/trace/long_training.py", "plain"),
    "exit": _trace("--mode", "sim", "testdata/trace/crash.py", "exit"),
    # real-program shapes (tests/trace/test_trace_real_shapes.py)
    "ddp-torchrun": _trace("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "testdata/trace/ddp_train.py"),
    "hardcoded-uses": _trace("testdata/trace/hardcoded_uses.py"),
    "legacy": _trace("testdata/trace/legacy_types.py"),
    "roundtrip": _trace("--mode", "sim", "--single-run", "testdata/trace/checkpoint_roundtrip.py",
                        "{shared}/roundtrip.pt"),
    "earlier-save": _trace("--mode", "sim", "testdata/trace/tdl004_bug.py", "{shared}/roundtrip.pt"),
    "meta": _trace("--mode", "sim", "testdata/trace/meta_device.py"),
    "device-errors": _trace("--mode", "sim", "--keep-going", "--single-run", "testdata/trace/device_errors.py"),
    "TDL005-keep-going": _trace("--mode", "sim", "--keep-going", "testdata/trace/tdl005_bug.py"),
    "ansi": _trace("--mode", "sim", "testdata/trace/crash.py", "ansi"),
    "cpu-program": _trace("--mode", "sim", "testdata/trace/crash.py"),
    "device-mix": _trace("--mode", "sim", "--single-run", "testdata/trace/device_mix.py"),
    "propagation": _trace("--mode", "sim", "--single-run", "tests/trace/propagation_probe.py"),
    "generators": _trace("--mode", "sim", "--single-run", "tests/trace/generator_probe.py"),
    "placement-generator": _trace("--mode", "sim", "--single-run", "tests/trace/placement_probe.py", "generator"),
    "placement-late": _trace("--mode", "sim", "--single-run", "tests/trace/placement_probe.py", "late"),
    "torch-func": _trace("--mode", "sim", "--single-run", "testdata/trace/torch_func.py"),
    "torch-func-bug": _trace("--mode", "sim", "--single-run", "testdata/trace/torch_func.py", "bug"),
    "own-tags": _trace("testdata/trace/tdl004_own_tags.py", "{shared}/own_tags.pt"),
    "own-tags-cpu-only": _trace("--mode", "cpu-only", "testdata/trace/tdl004_own_tags.py", "{shared}/own_tags_cpu.pt"),
})
# TDL013's shapes, run with the option that makes the two device decisions disagree (and one
# without it, where they agree).
TRACES.update({
    "TDL006-loss": _trace("--mode", "sim", "--single-run", "testdata/trace/tdl006_loss.py"),
    "TDL013-detector": _trace("--mode", "sim", "--single-run", "testdata/trace/tdl013_detector.py", "--cpu"),
    "TDL013-detector-agree": _trace("--mode", "sim", "--single-run", "testdata/trace/tdl013_detector.py"),
    "TDL013-helper": _trace("--mode", "sim", "--single-run", "testdata/trace/tdl013_helper.py"),
    "TDL013-device-option": _trace("--mode", "sim", "--single-run", "testdata/trace/tdl013_device_option.py",
                                   "--device", "cpu"),
})
# The rules' demo programs (testdata/rules), as a user traces them (auto: the GPU if there is one);
# -sim: on the simulated GPU even where there is a real one (tests marked gpu compare the two).
RULE_DEMOS = ["tdl002", "tdl006", "tdl007", "tdl008", "tdl009"]
for _name in RULE_DEMOS:
    TRACES[f"rules-{_name}"] = _trace(f"testdata/rules/{_name}_before.py")
    TRACES[f"rules-{_name}-sim"] = _trace("--mode", "sim", f"testdata/rules/{_name}_before.py")
# Run as real subprocesses: the command line end to end (program output on stderr).
SUBPROCESS = {
    "raise": [sys.executable, "-m", "torchdev_lint", "trace", *_trace("--mode", "sim", "testdata/trace/crash.py", "raise")],
    "selfcheck": [sys.executable, "-m", "torchdev_lint.trace.selfcheck"],
    "gpu-checkpoint": [sys.executable, "testdata/trace/gpu_checkpoint.py", "{shared}/gpu_saved.pt"],
}
# runs that need the checkpoint another command writes
DEPENDS = {"TDL004-cpu-only": "gpu-checkpoint", "TDL004-bug": "gpu-checkpoint", "TDL004-bug-real": "gpu-checkpoint",
           "earlier-save": "roundtrip"}


@dataclass
class Traced:
    returncode: int
    stdout: str
    stderr: str
    files: dict = field(default_factory=dict)  # name -> text of files the run wrote in its directory

    @property
    def program_output(self) -> str:
        """The traced program's own stdout and stderr."""
        return self.files.get("program-output.txt", self.stderr)

    @property
    def report(self) -> dict:
        return json.loads(self.stdout)

    @property
    def findings(self) -> list[dict]:
        return self.report["findings"]

    def at(self, line: int, code: str | None = None) -> list[dict]:
        return [f for f in self.findings if f["line"] == line and (code is None or f["code"] == code)]

    @property
    def confirmed(self) -> list[dict]:
        return [f for f in self.findings if f["status"] == "confirmed"]


def printed_cases(result) -> dict[str, str]:
    """What a probe program printed (probe_cases.case), case name -> answer, a simulated
    device's error in a GPU's words (the tracer raises SimulatedDeviceError where torch would
    raise RuntimeError)."""
    out = {}
    for line in result.program_output.splitlines():
        name, sep, rest = line.partition(" | ")
        if sep:
            out[name] = rest.replace("ERR SimulatedDeviceError:", "ERR RuntimeError:")
    return out


def expected_lines(program: Path, marker: str = "expect") -> list[tuple[int, str, str]]:
    """[(line, status, code)] from `# expect: CODE` / `# expect not confirmed: CODE` comments."""
    out = []
    for number, text in enumerate(program.read_text().splitlines(), 1):
        match = re.search(rf"#\s*{marker}(?: (not confirmed))?:\s*(TDL\d+)", text)
        if match:
            out.append((number, "not confirmed" if match.group(1) else "confirmed", match.group(2)))
    return out
