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
    return [sys.executable, "-m", "torchdev_lint", "trace", "--format", "json", *args]


# key -> command line. Paths are relative to ROOT (the subprocess's working directory).
TRACES: dict[str, list[str]] = {}
for _code in RULE_PROGRAMS:
    _n = _code[-3:]
    for _kind in ("bug", "ok"):
        TRACES[f"{_code}-{_kind}"] = _trace("--mode", "sim", f"testdata/trace/tdl{_n}_{_kind}.py")
        # the same program on a real CUDA device (tests marked gpu; never prefetched)
        TRACES[f"{_code}-{_kind}-real"] = _trace("--mode", "real", f"testdata/trace/tdl{_n}_{_kind}.py")
TRACES.update({
    "TDL001-cpu-only": _trace("--mode", "cpu-only", "testdata/trace/tdl001_bug.py"),
    "TDL004-cpu-only": _trace("--mode", "cpu-only", "testdata/trace/tdl004_bug.py", "{gpu_checkpoint}"),
    "clean": _trace("--mode", "sim", "testdata/trace/clean_training.py", "--workers", "2"),
    "clean-real": _trace("--mode", "real", "testdata/trace/clean_training.py", "--workers", "2"),
    "keep-going-real": _trace("--mode", "real", "--keep-going", "testdata/trace/keep_going.py"),
    "keep-going": _trace("--mode", "sim", "--keep-going", "testdata/trace/keep_going.py"),
    "max-steps": _trace("--mode", "sim", "--max-steps", "3", "testdata/trace/long_training.py"),
    "timeout": _trace("--mode", "sim", "--timeout", "2", "testdata/trace/long_training.py", "plain"),
    "raise": _trace("--mode", "sim", "testdata/trace/crash.py", "raise"),
    "exit": _trace("--mode", "sim", "testdata/trace/crash.py", "exit"),
    "program-output": _trace("--mode", "sim", "--program-output", "{tmp}/program-output.txt",
                             "testdata/trace/crash.py", "exit"),
    "module": _trace("--mode", "sim", "-m", "testdata.trace.tdl003_bug"),
    "selfcheck": [sys.executable, "-m", "torchdev_lint.trace.selfcheck"],
})

# A checkpoint whose storages are tagged cuda:0, as torch.save writes it on a GPU machine,
# made on this CPU-only machine with an extra location tagger (see docs/trace.md).
MAKE_GPU_CHECKPOINT = """
import sys, torch, torch.nn as nn
registry = torch.serialization._package_registry
entry = (1, lambda storage: "cuda:0", lambda obj, location: None)
registry.append(entry); registry.sort(key=lambda e: e[0])
try:
    torch.save(nn.Linear(4, 2).state_dict(), sys.argv[1])
finally:
    registry.remove(entry)
"""


@dataclass
class Traced:
    returncode: int
    stdout: str
    stderr: str
    files: dict = field(default_factory=dict)  # name -> text of files the run wrote under {tmp}

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


def expected_lines(program: Path, marker: str = "expect") -> list[tuple[int, str, str]]:
    """[(line, status, code)] from `# expect: CODE` / `# expect not confirmed: CODE` comments."""
    out = []
    for number, text in enumerate(program.read_text().splitlines(), 1):
        match = re.search(rf"#\s*{marker}(?: (not confirmed))?:\s*(TDL\d+)", text)
        if match:
            out.append((number, "not confirmed" if match.group(1) else "confirmed", match.group(2)))
    return out
