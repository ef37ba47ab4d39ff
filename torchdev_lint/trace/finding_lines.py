"""Which tests ran each line that holds a static finding (for ``pytest --simulate-gpu``'s verdicts).

A whole suite cannot afford line coverage of everything, so only code objects that hold a
finding's line are traced line by line: the first time a code object of the project's own files
runs, its file is linted (every tier, through the linter's result cache) and its lines compared
with the findings; every other code object costs one dictionary look-up per call. Python 3.12+
uses ``sys.monitoring`` (a code object's calls and lines are switched off once decided); older
ones ``sys.settrace``. No torch here.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

_UNDECIDED = object()


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
            return known
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

    # -- Python < 3.12: sys.settrace -----------------------------------------------------------
    def _decide(self, code):
        found = self._lines(code)
        tracer = self._codes[code] = self._local_for(*found) if found else None
        return tracer

    def _make_global(self):
        """The global trace function: called on every Python call, so one look-up in locals."""
        lookup, decide, undecided = self._codes.get, self._decide, _UNDECIDED

        def tracer(frame, event, arg):
            found = lookup(frame.f_code, undecided)
            return decide(frame.f_code) if found is undecided else found

        return tracer

    def _local_for(self, real: str, mine: frozenset[int]):
        hit = self._hit

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno in mine:
                hit(real, frame.f_lineno)
            return local

        return local

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
    def start(self) -> bool:
        """Start, unless another tracer (coverage, a debugger) holds the hook: then False."""
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
        if sys.gettrace() is not None:
            return False
        self._global = self._make_global()
        threading.settrace(self._global)
        sys.settrace(self._global)
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
            return
        if sys.gettrace() == self._global:
            sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    def owners_of(self, real: str, line: int) -> set[str]:
        return self.hits.get((real, line), set())


def file_lines(findings) -> set[int]:
    """Every line a finding spans."""
    return {line for f in findings for line in range(f.line, f.end_line + 1)}

