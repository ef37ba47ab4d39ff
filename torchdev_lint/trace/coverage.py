"""Which lines of the program's own files ran, and when (to tell "not reached" from "ran, harmless").

For each executed line we keep the sequence number of the recorder at its first execution, so
that a verdict can say whether a line ran before or after an event.
Python 3.12+ uses ``sys.monitoring`` (each line location is disabled after its first hit, so the
cost is near zero); Python 3.10/3.11 use ``sys.settrace`` with a local tracer only in user code.
"""

from __future__ import annotations

import sys
import threading


class LineRecorder:
    def __init__(self, users, seq):
        self.users = users
        self.seq = seq  # callable returning the current sequence number
        self.lines: dict[str, dict[int, int]] = {}
        self._tool = None

    def _hit(self, filename: str, line: int) -> None:
        lines = self.lines.get(filename)
        if lines is None:
            lines = self.lines[filename] = {}
        if line not in lines:
            lines[line] = self.seq()

    # -- Python 3.12+ -------------------------------------------------------------------
    def _monitor_line(self, code, line):
        if code.co_filename in self.users:
            self._hit(code.co_filename, line)
        return sys.monitoring.DISABLE

    # -- Python < 3.12 ------------------------------------------------------------------
    def _global(self, frame, event, arg):
        filename = frame.f_code.co_filename
        if filename not in self.users:
            return None
        if frame.f_lineno:  # 0 for a module's own "call" event
            self._hit(filename, frame.f_lineno)
        return self._local

    def _local(self, frame, event, arg):
        if event == "line":
            filename = frame.f_code.co_filename
            lines = self.lines.get(filename)
            if lines is None or frame.f_lineno not in lines:
                self._hit(filename, frame.f_lineno)
        return self._local

    def start(self) -> None:
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            for tool in (monitoring.COVERAGE_ID, 4, 5):
                if monitoring.get_tool(tool) is None:
                    monitoring.use_tool_id(tool, "torchdev-lint trace")
                    monitoring.register_callback(tool, monitoring.events.LINE, self._monitor_line)
                    monitoring.set_events(tool, monitoring.events.LINE)
                    self._tool = tool
                    return
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self) -> None:
        if self._tool is not None:
            monitoring = sys.monitoring
            monitoring.set_events(self._tool, 0)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.free_tool_id(self._tool)
            self._tool = None
            return
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    def as_json(self) -> dict[str, list[list[int]]]:
        """{real path: [[line, last event number when it first ran], ...]}"""
        merged: dict[str, dict[int, int]] = {}
        for filename, lines in self.lines.items():
            target = merged.setdefault(self.users.real(filename), {})
            for line, seq in lines.items():
                target[line] = min(seq, target.get(line, seq))
        return {f: sorted([line, seq] for line, seq in lines.items()) for f, lines in merged.items()}
