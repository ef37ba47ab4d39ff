"""The child's side channel: events go to a JSON-lines file, never to the program's stdout.

Each distinct event (by its key) is written once, as soon as it happens, so a run that is
killed at its hard time limit still leaves its evidence behind; repeats are only counted.
"""

from __future__ import annotations

import itertools
import json
import os
import threading


class Recorder:
    def __init__(self, path: str):
        self.path = path
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._seen: dict[tuple, dict] = {}
        self._seq = itertools.count(1)
        self.last_seq = 0  # the number of the latest event
        self._file = open(path, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        if os.getpid() != self.pid:  # a forked DataLoader worker: the parent reports
            return
        with self._lock:
            self._file.write(json.dumps(record, default=str) + "\n")
            self._file.flush()

    def event(self, key: tuple, record: dict) -> bool:
        """Record ``record`` unless an event with ``key`` was recorded before; True if new."""
        if os.getpid() != self.pid:
            return False
        with self._lock:
            known = self._seen.get(key)
            if known is not None:
                known["count"] += 1
                return False
            record = {"type": "event", "seq": next(self._seq), **record}
            record["count"] = 1
            self.last_seq = record["seq"]
            self._seen[key] = record
            self._file.write(json.dumps(record, default=str) + "\n")
            self._file.flush()
            return True

    def counts(self) -> list[list]:
        return [[r["seq"], r["count"]] for r in self._seen.values() if r["count"] > 1]

    def close(self) -> None:
        if os.getpid() == self.pid:
            self._file.close()
