"""What ``pytest --simulate-gpu`` tells the user at the end: the device problems per test.

The process that runs a test (pytest's own, or a pytest-xdist worker) puts what the simulated
GPU found on the test's reports, as plain data (xdist sends reports to its controller as they
are); the process that prints (pytest's own, or xdist's controller, which runs no test) collects
it here from the reports. So the summary needs no torch, and a worker's tests are neither lost
nor listed twice. Light: no torch, no tracer machinery.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from torchdev_lint.trace.verdicts import MISMATCH_CODE

ATTRIBUTE = "torchdev_lint"  # the reports' attribute: {"mode", "simulated", "outcome", "problems", "unsupported"}
# Confirmed bugs that raise nothing where the test ran, so the test passes: a discarded move
# (TDL003), a checkpoint saved on a GPU loaded without map_location (TDL004: it fails on a
# machine without a GPU), optimizer state a move left behind (TDL005).
SILENT_CODES = ("TDL003", "TDL004", "TDL005")

MACHINE_WORDS = {
    "sim": "a simulated GPU (values computed on the CPU, placement tracked as on cuda:0)",
    "cpu-only": "a machine without a GPU (every CUDA request raises, as on a CPU-only build of torch)",
    "real": "the real GPU (device problems recorded as on the simulated one)",
}
SECTION = {"sim": "torchdev-lint: device problems on the simulated GPU",
           "cpu-only": "torchdev-lint: CUDA requests on a machine without a GPU",
           "real": "torchdev-lint: device problems on the GPU"}


@dataclass
class Problem:
    """One device problem of one test, worded by the tracer."""

    path: str
    line: int
    column: int
    code: str | None  # the static finding that predicted it (TDL001..), None when none did
    name: str
    evidence: str

    def render(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        if self.code is None:
            head = f"{where}: {self.name} (no static finding predicted it)"
        elif self.code == MISMATCH_CODE:
            head = f"{where}: {self.code} {self.name} (no static finding predicted it)"
        else:
            head = f"{where}: {self.code} {self.name} (the static finding that predicted it)"
        return f"{head}\n    {self.evidence}"

    def to_data(self) -> dict:
        return asdict(self)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


class Summary:
    """A pytest plugin object: collects the simulated GPU's data from the reports and prints
    the summary section (and the header line of a session-wide simulation)."""

    def __init__(self, mode: str | None):
        self.mode = mode  # the session-wide mode, None for single tests (marker, fixture)
        self.rows: dict[str, dict] = {}  # nodeid -> the latest data of that test or collector

    def take(self, report) -> None:
        data = getattr(report, ATTRIBUTE, None)
        if data:
            self.rows[report.nodeid] = data

    def pytest_runtest_logreport(self, report):
        self.take(report)

    def pytest_collectreport(self, report):
        self.take(report)

    def pytest_report_header(self, config):
        if self.mode is not None:
            return f"torchdev-lint: every test runs on {MACHINE_WORDS[self.mode]}"
        return None

    def pytest_terminal_summary(self, terminalreporter):
        if not self.rows:
            return
        mode = self.mode or next(iter(self.rows.values()))["mode"]
        write = terminalreporter.write_line
        simulated = sum(1 for data in self.rows.values() if data.get("simulated"))
        rows = [(owner, data, [Problem(**p) for p in data.get("problems", ())])
                for owner, data in self.rows.items()]
        rows = [row for row in rows if row[2]]
        unsupported = {owner: data["unsupported"] for owner, data in self.rows.items() if data.get("unsupported")}
        terminalreporter.write_sep("=", SECTION[mode])
        if not rows and not unsupported:
            write(f"no device problem in {plural(simulated, 'test')} run on {MACHINE_WORDS[mode]}")
            return
        for owner, data, problems in rows:
            write(f"{owner} {data['outcome'].upper()}")
            for problem in problems:
                for line in problem.render().splitlines():
                    write(f"  {line}")
        if rows:
            total = sum(len(problems) for _, _, problems in rows)
            predicted = sum(1 for _, _, ps in rows for p in ps if p.code not in (None, MISMATCH_CODE))
            write(f"{plural(total, 'device problem')} in {plural(len(rows), 'test')} ({predicted} predicted by a "
                  f"static finding), {plural(simulated, 'test')} run on {MACHINE_WORDS[mode]}")
        if unsupported:
            write(f"{plural(len(unsupported), 'test')} skipped: the simulated GPU cannot run them")
            for owner, reason in unsupported.items():
                write(f"  {owner}: {reason}")
