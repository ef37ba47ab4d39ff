"""A progress bar on stderr for long runs: a sign of life on a terminal, nothing elsewhere."""

from __future__ import annotations

import shutil
import sys
import time

DELAY = 2.0  # seconds before the bar appears: short runs finish without one
_INTERVAL = 0.1  # at most ten redraws a second


class Progress:
    def __init__(self, total: int, stream=None, clock=time.monotonic) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.start = clock()
        self.drawn_at: float | None = None

    def update(self, done: int) -> None:
        now = self.clock()
        if now - self.start < DELAY or (self.drawn_at is not None and now - self.drawn_at < _INTERVAL):
            return
        self.drawn_at = now
        label = f" {done}/{self.total} files"
        width = max(10, min(40, shutil.get_terminal_size().columns - len(label) - 3))
        filled = width * done // max(self.total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}]{label}")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn_at is not None:
            self.stream.write("\r\x1b[K")  # erase the bar: the report follows on a clean line
            self.stream.flush()


def wanted(quiet: bool, fmt: str) -> bool:
    """Only for people watching a terminal: never in piped or machine-readable output."""
    return not quiet and fmt == "text" and sys.stderr.isatty() and sys.stdout.isatty()
