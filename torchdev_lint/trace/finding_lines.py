"""Which tests ran each line that holds a static finding (for ``pytest --simulate-gpu``'s verdicts).

A whole suite cannot afford line coverage of everything, so only code objects that hold a
finding's line are traced line by line: the first time a code object of the project's own files
runs, its file is linted (every tier, through the linter's result cache) and its lines compared
with the findings; every other code object costs one dictionary look-up per call. Python 3.12+
uses ``sys.monitoring`` (a code object's calls and lines are switched off once decided); older
ones record a line when a torch call the simulator intercepts is made while the line runs
(``probe()``: a walk up the frames, per torch call only). No torch here.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

_UNDECIDED = object()
_STOP = object()


class FindingLines:
    """``hits[(real path, line)]``: the owners (test ids) during which a finding line ran.

    ``lines_of(real_path)`` gives the finding lines of a project file (an empty set for none);
    ``owner()`` names what runs now (the test, or the collector importing a module)."""

    def __init__(self, users, lines_of: Callable[[str], set[int]], owner: Callable[[], str | None]):
        self.users = users
        self.lines_of = lines_of
        self.owner = owner
        self.hits: dict[tuple[str, int], set[str]] = {}
        self.linted: dict[str, set[int]] = {}  # real path -> its finding lines
        self._files: dict[str, tuple[str, set[int]] | None] = {}  # co_filename -> (real path, lines)
        self._codes: dict = {}
        self.running = False
        self._tool = None
        self._deciding = threading.local()

    # -- deciding ----------------------------------------------------------------------------
    def _file(self, filename: str):
        known = self._files.get(filename, _UNDECIDED)
        if known is not _UNDECIDED:
            return None if known is _STOP else known
        self._files[filename] = None  # while it is linted (the linter's own threads run too)
        if filename not in self.users:
            return None
        real = self.users.real(filename)
        lines = self.linted.get(real)
        if lines is None:
            if getattr(self._deciding, "active", False):
                del self._files[filename]
                return None
            self._deciding.active = True
            try:
                lines = self.linted[real] = set(self.lines_of(real))
            except Exception:  # noqa: BLE001 - a file the linter cannot read has no finding to place
                lines = self.linted[real] = set()
            finally:
                self._deciding.active = False
        known = self._files[filename] = (real, lines) if lines else None
        return known

    def _lines(self, code) -> tuple[str, frozenset[int]] | None:
        known = self._file(code.co_filename)
        if known is None:
            return None
        real, lines = known
        mine = frozenset(line for _, _, line in code.co_lines() if line in lines)
        return (real, mine) if mine else None

    def _hit(self, real: str, line: int) -> None:
        owner = self.owner()
        if owner is None:
            return
        owners = self.hits.get((real, line))
        if owners is None:
            owners = self.hits[real, line] = set()
        owners.add(owner)

    # -- Python < 3.12: from the simulator's interception of each torch call ----------------------
    def probe(self):
        """The function the simulator calls on every torch call it intercepts (before Python
        3.12): it walks the Python frames above and records each one that stands on a finding
        line. A dictionary look-up per frame of a torch call, nothing per Python call: a global
        ``sys.settrace`` cost 2-6x on suites of many small Python calls. A finding line that
        makes no torch call at all (rare: every rule's line moves, makes, loads or reads a
        tensor, or builds a module or optimizer, which touches its parameters) is not seen."""
        files, decide, hit, getframe, undecided = self._files, self._file, self._hit, sys._getframe, _UNDECIDED
        stops = self._stops()
        for filename in {code.co_filename for code in stops}:
            files[filename] = _STOP  # pytest's runner: the frames above it are pytest's own

        def probe():
            frame = getframe(1)
            while frame is not None:
                code = frame.f_code
                filename = code.co_filename
                known = files.get(filename, undecided)
                if known is not None:
                    if known is undecided:
                        known = decide(filename)
                    elif known is _STOP:
                        if code in stops:
                            return
                        frame = frame.f_back
                        continue
                    if known is not None:
                        line = frame.f_lineno
                        if line in known[1]:
                            hit(known[0], line)
                frame = frame.f_back

        return probe

    @staticmethod
    def _stops() -> frozenset:
        """The code objects of pytest (and unittest) that call the project's code: a test function,
        a fixture, a unittest method, and the runner around them. The walk of a torch call ends
        at the first one, so pytest's own frames above a test (a dozen) cost nothing per call."""
        owners = {
            "_pytest.runner": ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown"),
            "_pytest.python": ("pytest_pyfunc_call",),
            "_pytest.fixtures": ("call_fixture_func", "_teardown_yield_fixture"),
            "unittest.case": ("TestCase._callSetUp", "TestCase._callTestMethod", "TestCase._callTearDown",
                              "TestCase._callCleanup"),
        }
        codes = set()
        for module_name, names in owners.items():
            module = sys.modules.get(module_name)
            for name in names:
                found = module
                for part in name.split("."):
                    found = getattr(found, part, None)
                code = getattr(found, "__code__", None)
                if code is not None:
                    codes.add(code)
        return frozenset(codes)

    # -- Python 3.12+: sys.monitoring ----------------------------------------------------------
    def _py_start(self, code, offset):
        monitoring = sys.monitoring
        found = self._lines(code)
        if found is not None:
            self._codes[code] = found
            monitoring.set_local_events(self._tool, code, monitoring.events.LINE)
        return monitoring.DISABLE

    def _line(self, code, line):
        found = self._codes.get(code)
        if found is not None and line in found[1]:
            self._hit(found[0], line)
        return None  # every test counts: lines are not switched off

    # -- control -------------------------------------------------------------------------------
    @property
    def by_probe(self) -> bool:
        """Whether the lines are recorded by ``probe()`` (Python < 3.12), not by sys.monitoring."""
        return getattr(sys, "monitoring", None) is None

    def start(self) -> bool:
        """Start; False when sys.monitoring has no free tool id (Python 3.12+)."""
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            for tool in (5, 4, 3):
                if monitoring.get_tool(tool) is None:
                    monitoring.use_tool_id(tool, "torchdev-lint verdicts")
                    monitoring.register_callback(tool, monitoring.events.PY_START, self._py_start)
                    monitoring.register_callback(tool, monitoring.events.LINE, self._line)
                    monitoring.set_events(tool, monitoring.events.PY_START)
                    self._tool = tool
                    self.running = True
                    return True
            return False
        # The simulator calls ``probe()`` on every torch call: no hook to hold, so coverage or a
        # debugger can run too.
        self.running = True
        return True

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        if self._tool is not None:
            monitoring = sys.monitoring
            monitoring.set_events(self._tool, 0)
            for code in self._codes:
                monitoring.set_local_events(self._tool, code, 0)
            monitoring.register_callback(self._tool, monitoring.events.PY_START, None)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.free_tool_id(self._tool)
            self._tool = None

    def imported(self) -> None:
        """Decide the project's imported modules that made no torch call: their finding lines did
        not run (the probe sees a file only from a torch call), so they are "not reached"."""
        if not self.by_probe:
            return
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str) and filename.endswith(".py") and filename in self.users:
                self._file(filename)

    def owners_of(self, real: str, line: int) -> set[str]:
        return self.hits.get((real, line), set())


def unobserved_lines(path: str, findings) -> set[int]:
    """The lines of findings ``probe()`` cannot see run: a finding whose lines hold no call (an
    assignment of a constant or an empty container, ``EVAL_DEVICE = "cuda"``, ``self.heads = {}``),
    so nothing the simulator intercepts happens there."""
    import ast

    from torchdev_lint import pyast

    try:
        with open(path, encoding="utf-8") as handle:
            tree = pyast.parse(handle.read())
    except (OSError, UnicodeDecodeError):
        return set()
    if tree is None:
        return set()
    called: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    out: set[int] = set()
    for f in findings:
        span = range(f.line, f.end_line + 1)
        if not any(line in called for line in span):
            out.update(span)
    return out


def file_lines(findings) -> set[int]:
    """Every line a finding spans."""
    return {line for f in findings for line in range(f.line, f.end_line + 1)}

