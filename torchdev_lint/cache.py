"""Results per file, kept between runs so that an unchanged file is not parsed again.

An entry is keyed by everything its findings depend on: the file's path and text, the
linter's own code (version and source files, so a changed rule never serves stale results),
the rules enabled for the file, the settings, and the project-index facts the file depends
on. Entries are written to a temporary file and renamed into place, so a run killed
mid-write, or two runs sharing the cache, never leave a half-written entry; an entry that
cannot be read back whole is ignored and checked again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from torchdev_lint import __version__
from torchdev_lint.finding import Applicability, Confidence, Evidence, FileError, Finding, Fix

DIRNAME = ".torchdev_lint_cache"
_LAYOUT = "v1"  # bump when the entry format changes
_PACKAGE = Path(__file__).resolve().parent


def tool_fingerprint() -> str:
    """The linter's version and the size and time of each of its source files: a changed
    rule in a development checkout invalidates the cache just as a new release does."""
    digest = hashlib.blake2b(f"{__version__}/{_LAYOUT}".encode(), digest_size=16)
    for directory, subdirs, names in os.walk(_PACKAGE):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                info = os.stat(path)
                digest.update(f"{os.path.relpath(path, _PACKAGE)}:{info.st_size}:{info.st_mtime_ns};".encode())
    return digest.hexdigest()


# One file's findings, its error, and (hidden, set_aside): the possible findings the
# default output does not show (engine.FileResult).
Stored = tuple[list[Finding], "FileError | None", tuple[int, int]]


def _plain_stored(stored: Stored) -> list:
    findings, error, hidden = stored
    return [[_plain(f) for f in findings], dataclasses.asdict(error) if error is not None else None, list(hidden)]


def _stored(findings, error, hidden) -> Stored:
    return ([_finding(item) for item in findings], FileError(**error) if error is not None else None,
            (int(hidden[0]), int(hidden[1])))


class Cache:
    def __init__(self, directory: str | os.PathLike, fingerprint: str) -> None:
        self.directory = Path(directory)
        self.fingerprint = fingerprint

    def key(self, *parts: str | bytes) -> str:
        digest = hashlib.blake2b(self.fingerprint.encode(), digest_size=20)
        for part in parts:
            data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / _LAYOUT / key[:2] / f"{key}.json"

    def load(self, key: str) -> Stored | None:
        """The stored findings, error and hidden counts for ``key``; None when absent or
        unreadable."""
        data = self.get(key)
        try:
            return _stored(data["findings"], data["error"], data["hidden"])
        except (KeyError, TypeError, ValueError):
            return None

    def store(self, key: str, stored: Stored) -> None:
        self.put(key, dict(zip(("findings", "error", "hidden"), _plain_stored(stored))))

    def store_run(self, key: str, results: dict[str, Stored]) -> None:
        """Every file's findings, error and hidden counts of one run, in one entry
        (``runner.check_paths``)."""
        self.put(key, {"files": {path: _plain_stored(stored) for path, stored in results.items()}})

    def load_run(self, key: str) -> dict[str, Stored] | None:
        """What ``store_run`` stored under ``key``; None when absent or unreadable."""
        data = self.get(key)
        try:
            return {path: _stored(*entry) for path, entry in data["files"].items()}
        except (KeyError, TypeError, ValueError):
            return None

    def get(self, key: str) -> dict | None:
        """The JSON object stored under ``key``; None when absent or not whole."""
        try:
            data = json.loads(self._entry(key).read_bytes())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def put(self, key: str, value: dict) -> None:
        data = json.dumps({**value, "key": key}).encode()
        target = self._entry(key)
        try:
            if not target.parent.is_dir():
                self._create(target.parent)
        except OSError:
            return
        write_atomically(target, data)

    def _create(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        # Keep the cache out of version control and backups, as ruff and pytest do.
        for name, text in ((".gitignore", "# Created by torchdev-lint.\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                            "# This file is a cache directory tag created by torchdev-lint.\n")):
            if not (self.directory / name).exists():
                write_atomically(self.directory / name, text.encode())


def write_atomically(target: Path, data: bytes) -> None:
    """A temporary file in the same directory, renamed over the target: readers see the old
    entry or the new one, never part of one. A cache that cannot be written only costs speed."""
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _plain(finding: Finding) -> dict:
    """A finding as JSON data: everything but its tree node, and of its fix only how far
    it can be trusted (a run that fixes checks the file again to get the edits)."""
    data = {f.name: getattr(finding, f.name) for f in dataclasses.fields(finding)
            if f.name not in ("node", "fix", "confidence", "evidence")}
    data["fix"] = finding.fix.applicability.value if finding.fix else None
    data["confidence"] = finding.confidence.value
    data["evidence"] = [step.to_json() for step in finding.evidence]
    return data


def _finding(data: dict) -> Finding:
    fix = data.pop("fix")
    confidence = Confidence(data.pop("confidence"))
    evidence = tuple(Evidence(**step) for step in data.pop("evidence"))
    return Finding(**data, fix=Fix(Applicability(fix), []) if fix else None,
                   confidence=confidence, evidence=evidence)


def detached(finding: Finding) -> Finding:
    """The finding without its tree and edits: small, and picklable for worker processes."""
    return _finding(_plain(finding))
