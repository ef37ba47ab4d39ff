"""Where something happened in the user's code: the innermost frame of the program's own files.

Capturing a site costs about a microsecond (a walk up ``f_back``), so the tracer does it only
when something worth reporting happens, never per op. A site is a plain list
``[path, line, end_line, col, end_col]`` (col 0-based, as ``co_positions`` gives it) so that it
can be written to JSON and compared as a tuple.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)  # torchdev_lint/


class UserFiles:
    """Decides, once per file name, whether a code object belongs to the traced program."""

    def __init__(self, root: str, script: str | None = None):
        self.root = os.path.realpath(root)
        self.script = os.path.realpath(script) if script else None
        self._cache: dict[str, bool] = {}
        self._real: dict[str, str] = {}

    def real(self, filename: str) -> str:
        path = self._real.get(filename)
        if path is None:
            path = self._real[filename] = os.path.realpath(filename)
        return path

    def __contains__(self, filename: str) -> bool:
        answer = self._cache.get(filename)
        if answer is None:
            answer = self._cache[filename] = self._decide(filename)
        return answer

    def _decide(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = self.real(filename)
        if path == self.script:
            return True
        if path.startswith(_PACKAGE + os.sep):
            return False
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        if any(p and path.startswith(os.path.realpath(p) + os.sep) for p in prefixes) and not \
                path.startswith(self.root + os.sep):
            return False
        return path.startswith(self.root + os.sep)


_POSITIONS: dict = {}


def position(code, lasti: int, lineno: int | None) -> tuple[int, int, int, int]:
    """(line, end_line, col, end_col) of the instruction at ``lasti`` (Python 3.11+), else the line."""
    positions = _POSITIONS.get(code)
    if positions is None:
        try:
            positions = _POSITIONS[code] = list(code.co_positions())
        except AttributeError:  # Python 3.10
            positions = _POSITIONS[code] = []
    index = lasti // 2
    if 0 <= index < len(positions):
        line, end_line, col, end_col = positions[index]
        if line is not None:
            return line, end_line or line, col or 0, end_col or 0
    line = lineno or code.co_firstlineno
    return line, line, 0, 0


def frame_site(frame, users: UserFiles) -> list:
    code = frame.f_code
    line, end_line, col, end_col = position(code, frame.f_lasti, frame.f_lineno)
    return [users.real(code.co_filename), line, end_line, col, end_col]


def user_frame(users: UserFiles, depth: int = 1):
    """The innermost frame of the program's own code above the caller, or None."""
    frame = sys._getframe(depth + 1)
    while frame is not None:
        if frame.f_code.co_filename in users:
            return frame
        frame = frame.f_back
    return None


def site(users: UserFiles, depth: int = 1) -> list | None:
    frame = user_frame(users, depth + 1)
    return frame_site(frame, users) if frame is not None else None


def stack(users: UserFiles, depth: int = 1, limit: int = 8) -> list[list]:
    """The user frames, innermost first (so a finding at a caller's line can match too)."""
    frames = []
    frame = sys._getframe(depth + 1)
    while frame is not None and len(frames) < limit:
        if frame.f_code.co_filename in users:
            frames.append(frame_site(frame, users))
        frame = frame.f_back
    return frames


def traceback_sites(tb, users: UserFiles) -> list[list]:
    """User frames of a traceback, innermost first."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in users:
            line, end_line, col, end_col = position(code, tb.tb_lasti, tb.tb_lineno)
            frames.append([users.real(code.co_filename), line, end_line, col, end_col])
        tb = tb.tb_next
    frames.reverse()
    return frames
