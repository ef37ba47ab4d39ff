"""What runs on a (simulated) GPU showed about each finding, kept for the linter (docs/verdicts.md).

``pytest --simulate-gpu`` and ``torchdev-lint trace`` record here, per file *content* (its
SHA-256), which finding lines ran, on which machine and in which tests (or programs), which
findings a run confirmed and with what evidence, and each device problem no finding predicted
(TDL100, TDL101). The linter reads it: an edited file has another hash, so it forgets its
verdicts by itself.

Plain JSON and the standard library only: the linter imports this without torch or LibCST.
One file, ``verdicts.json`` in the project's cache directory, so that CI can keep it between
jobs. Writes take a lock, merge with what is there (pytest-xdist workers and parallel jobs
write at the same time) and rename a complete file into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from torchdev_lint.cache import write_atomically

FILENAME = "verdicts.json"
VERSION = 1
ENV_DIR = "TORCHDEV_LINT_CACHE_DIR"  # where a run records (set by `torchdev-lint confirm`)

CONFIRMED = "confirmed"
RAN_CLEAN = "ran clean"
NOT_REACHED = "not reached"
CANNOT_TELL = "ran where it cannot show"  # e.g. a hardcoded `.cuda()` that ran on a GPU
INVOLVED = "in a device problem"  # a recorded TDL100/TDL101 cites the line, no rule's criterion was met
STATUSES = (CONFIRMED, INVOLVED, RAN_CLEAN, CANNOT_TELL, NOT_REACHED)

MISMATCH_CODE, NO_GPU_CODE = "TDL100", "TDL101"
RUNTIME_NAMES = {MISMATCH_CODE: "device-mismatch", NO_GPU_CODE: "fails-without-gpu"}

# Rules whose bug shows only where CUDA is missing (a GPU run cannot show it), and those whose
# bug shows only where tensors are on an accelerator (a run without a GPU cannot): as
# trace/verdicts.py decides which run can tell a finding.
HARDCODED = ("TDL001", "TDL002")
ACCELERATOR_ONLY = ("TDL003", "TDL005", "TDL006", "TDL007", "TDL008", "TDL009", MISMATCH_CODE)
# Rules whose finding says the line fails on a machine without CUDA: a run on such a machine
# (`--simulate-gpu=cpu-only`) in which the line ran clean refutes a certain one.
REFUTED_WITHOUT_GPU = (*HARDCODED, "TDL004")
# GPU_UNUSED: a test on a machine with a (simulated) GPU that put nothing on it (no move, no
# device= but the CPU): its lines ran on the CPU, where no rule's bug can show.
GPU_UNUSED = "gpu-unused"
MACHINES = {"sim": "cuda:0 (a simulated GPU)", "real": "a GPU", "cpu-only": "a machine without a GPU",
            GPU_UNUSED: "the CPU (the tests put nothing on the GPU)"}
SHORT_MACHINES = {"sim": "a simulated GPU", "real": "a GPU", "cpu-only": "a machine without a GPU",
                  GPU_UNUSED: "the CPU"}
_KEPT_CONFIRMATIONS = 5  # per finding: the first few tests that confirmed it (their number is kept)


def content_hash(text: str) -> str:
    """The key of a file's verdicts: the SHA-256 of its text (as the linter reads it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def can_tell(code: str, mode: str) -> bool:
    """Whether a run in ``mode`` can show ``code``'s bug (trace/verdicts.py ``Judge.can_tell``)."""
    if mode == GPU_UNUSED:
        return False
    if code in HARDCODED:
        return mode == "cpu-only"
    return code not in ACCELERATOR_ONLY or mode != "cpu-only"


@dataclass
class Verdict:
    """One finding's verdict, as the linter shows it."""

    status: str
    headline: str  # what the finding's message adds: "confirmed by tests/t.py::test_x on a simulated GPU"
    evidence: str = ""  # what the run saw, for the evidence step
    by: str | None = None  # the first test (or program) that confirmed it
    runs: int = 0  # tests or programs that ran the line (where they can tell)
    machine: str | None = None

    def to_json(self) -> dict:
        return {"status": self.status, "headline": self.headline, "evidence": self.evidence, "by": self.by,
                "runs": self.runs, "machine": self.machine}

    @property
    def text(self) -> str:
        return f"{self.headline}: {self.evidence}" if self.evidence else self.headline


@dataclass
class FileVerdicts:
    """What the store knows of one file's content (``files[hash]`` of the JSON)."""

    data: dict = field(default_factory=dict)

    @property
    def path(self) -> str | None:
        return self.data.get("path")

    def lines_recorded(self) -> bool:
        return bool(self.data.get("lines_recorded"))

    def unobserved(self, line: int, end_line: int | None = None) -> bool:
        """Whether no line of [line, end_line] could have been seen running: a line without a call
        that the recording (Python < 3.12: from the torch calls) cannot see. Such a line that did
        not show up has no verdict, rather than "not reached"."""
        silent = self.data.get("unobserved")
        if not silent:
            return False
        silent = set(silent)
        return all(number in silent for number in range(line, (end_line or line) + 1))

    def confirmations(self, code: str, line: int, end_line: int | None = None) -> list[dict]:
        last = end_line or line
        return [c for c in self.data.get("confirmed", ())
                if c.get("code") == code and line <= int(c.get("line", 0)) <= last]

    def ran(self, line: int, end_line: int | None = None) -> dict[str, set[str]]:
        """Per machine (mode), the tests or programs in which a line of [line, end_line] ran."""
        out: dict[str, set[str]] = {}
        lines = self.data.get("lines") or {}
        for number in range(line, (end_line or line) + 1):
            for mode, owners in (lines.get(str(number)) or {}).items():
                out.setdefault(mode, set()).update(owners)
        return out

    def verdict(self, code: str, line: int, end_line: int | None = None) -> Verdict | None:
        """The finding's verdict, or None when no run recorded anything about its line."""
        confirmed = self.confirmations(code, line, end_line)
        if confirmed:
            first = confirmed[0]
            total = sum(int(c.get("count", 1)) for c in confirmed)
            others = f" (and {total - 1} more)" if total > 1 else ""
            machine = SHORT_MACHINES.get(first.get("mode") or "sim", "a simulated GPU")
            return Verdict(CONFIRMED, f"confirmed by {first.get('by')}{others} on {machine}",
                           first.get("evidence") or "", by=first.get("by"), runs=total, machine=first.get("mode"))
        cited = self.cited(line, end_line)
        if cited:
            problem = cited[0]
            return Verdict(INVOLVED, f"its line is part of the {problem.get('code')} at line {problem.get('line')} "
                                     f"found by {problem.get('by')}", problem.get("evidence") or "",
                           by=problem.get("by"), runs=len(cited), machine=problem.get("mode"))
        ran = self.ran(line, end_line)
        telling = {mode: owners for mode, owners in ran.items() if can_tell(code, mode)}
        if telling:
            mode, owners = max(telling.items(), key=lambda item: len(item[1]))
            count = sum(len(o) for o in telling.values())
            return Verdict(RAN_CLEAN, f"ran in {_runs(count, owners)} on {MACHINES.get(mode, mode)} "
                                      f"without a device problem", runs=count, machine=mode)
        if ran:
            mode, owners = next(iter(ran.items()))
            count = sum(len(o) for o in ran.values())
            where = "a machine without a GPU: `--simulate-gpu=cpu-only`" if code in HARDCODED else "a GPU"
            return Verdict(CANNOT_TELL, f"ran in {_runs(count, owners)} on {MACHINES.get(mode, mode)}, where this "
                                        f"rule's bug cannot show (it shows on {where})", runs=count, machine=mode)
        if self.lines_recorded() and not self.unobserved(line, end_line):
            return Verdict(NOT_REACHED, "not reached by the recorded runs on a simulated GPU")
        return None

    def cited(self, line: int, end_line: int | None = None) -> list[dict]:
        """The recorded device problems whose evidence names a line of [line, end_line] of this file."""
        path = self.path
        if not path:
            return []
        names = {path, os.path.basename(path)}
        out = []
        for problem in self.runtime():
            text = problem.get("evidence") or ""
            for number in range(line, (end_line or line) + 1):
                if any(re.search(rf"(?<![\w.]){re.escape(name)}:{number}(?!\d)", text) for name in names):
                    out.append(problem)
                    break
        return out

    def runtime(self) -> list[dict]:
        """The device problems no static finding predicted (TDL100, TDL101), as recorded."""
        return list(self.data.get("runtime", ()))

    def findings(self) -> list[dict]:
        """The static findings (every tier) the recording runs knew in this file."""
        return list(self.data.get("findings", ()))


def _runs(count: int, owners: set[str]) -> str:
    kind = "tests" if any("::" in o for o in owners) else "runs"
    if count == 1:
        return f"1 {kind[:-1]} ({next(iter(owners))})"
    return f"{count} {kind}"


class VerdictStore:
    """``verdicts.json`` in a cache directory: read once per process, written under a lock."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILENAME
        self._files: dict | None = None

    @classmethod
    def for_root(cls, root: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> "VerdictStore":
        """The store of a project root: ``cache_dir``, else $TORCHDEV_LINT_CACHE_DIR, else the
        linter's cache directory in the root."""
        chosen = cache_dir or os.environ.get(ENV_DIR)
        return cls(chosen if chosen else Path(root) / ".torchdev_lint_cache")

    def exists(self) -> bool:
        return self.path.is_file()

    def files(self) -> dict:
        if self._files is None:
            self._files = _read(self.path).get("files", {})
        return self._files

    def lookup(self, text: str) -> FileVerdicts | None:
        """The verdicts of a file with this text; None when no run recorded it."""
        if not self.exists() and self._files is None:
            return None
        entry = self.files().get(content_hash(text))
        return FileVerdicts(entry) if isinstance(entry, dict) else None

    def record(self, updates: dict[str, dict], root: str | os.PathLike | None = None) -> None:
        """Merge ``updates`` ({content hash: file entry, as in docs/verdicts.md}) into the file,
        under a lock; entries of files that now have another content are dropped (``root``: what
        their paths are relative to)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        with _locked(self.directory / (FILENAME + ".lock")):
            data = _read(self.path)
            files = data.get("files") if isinstance(data.get("files"), dict) else {}
            for key, entry in updates.items():
                files[key] = merge(files.get(key) or {}, entry)
            if root is not None:
                files = _prune(files, Path(root))
            write_atomically(self.path, json.dumps({"version": VERSION, "files": files}, indent=1,
                                                    sort_keys=True).encode())
        self._files = None


def new_entry(path: str) -> dict:
    """An empty file entry (docs/verdicts.md)."""
    return {"path": path, "lines_recorded": False, "lines": {}, "findings": [], "confirmed": [], "runtime": []}


def finding_key(item: dict) -> tuple:
    return (item.get("code"), int(item.get("line", 0)), int(item.get("column", 0)))


def merge(old: dict, new: dict) -> dict:
    """Two entries of the same content: every run's lines, findings, confirmations and problems."""
    out = new_entry(new.get("path") or old.get("path") or "")
    out["lines_recorded"] = bool(old.get("lines_recorded") or new.get("lines_recorded"))
    # A line is unobserved when no recording run could see it (an empty list: all could).
    recorded = [entry for entry in (old, new) if entry.get("lines_recorded")]
    if recorded:
        silent = set.intersection(*(set(int(n) for n in entry.get("unobserved") or ()) for entry in recorded))
        if silent:
            out["unobserved"] = sorted(silent)
    for entry in (old, new):
        for line, modes in (entry.get("lines") or {}).items():
            target = out["lines"].setdefault(str(line), {})
            for mode, owners in modes.items():
                target[mode] = sorted(set(target.get(mode, ())) | set(owners))
    out["findings"] = _union(old.get("findings"), new.get("findings"), finding_key)
    out["confirmed"] = _confirmed(old.get("confirmed"), new.get("confirmed"))
    out["runtime"] = _union(old.get("runtime"), new.get("runtime"),
                            lambda r: (r.get("code"), int(r.get("line", 0)), r.get("by")))
    return out


def _union(old, new, key) -> list:
    seen: dict = {}
    for item in [*(old or ()), *(new or ())]:
        seen.setdefault(key(item), item)
    return sorted(seen.values(), key=lambda item: (int(item.get("line", 0)), str(item.get("code"))))


def _confirmed(old, new) -> list:
    """Per finding (code, line), the first few confirming tests, and how many there were."""
    by_finding: dict[tuple, list] = {}
    for item in [*(old or ()), *(new or ())]:
        kept = by_finding.setdefault((item.get("code"), int(item.get("line", 0))), [])
        if any(k.get("by") == item.get("by") for k in kept):
            continue
        if len(kept) < _KEPT_CONFIRMATIONS:
            kept.append(dict(item))
        else:
            kept[-1]["count"] = int(kept[-1].get("count", 1)) + int(item.get("count", 1))
    return [item for key in sorted(by_finding, key=lambda k: (k[1], str(k[0]))) for item in by_finding[key]]


def _prune(files: dict, root: Path) -> dict:
    """Drop the entries of files whose text has changed since (the verdicts of old content)."""
    kept = {}
    for key, entry in files.items():
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(entry, dict):
            continue
        if path:
            candidate = root / path
            try:
                text = candidate.read_bytes().decode("utf-8", "surrogateescape")
            except OSError:
                text = None
            if text is not None and content_hash(_as_read(text)) != key:
                continue
        kept[key] = entry
    return kept


def _as_read(text: str) -> str:
    # The linter hashes the text it decoded; a file that is not UTF-8 is rare and only costs
    # its entry's survival here.
    return text


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    return data


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (fcntl where there is one; elsewhere, none)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: last writer wins, each write still whole
        yield
        return
    try:
        handle = open(path, "a+b")
    except OSError:
        yield
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


# -- the linter's side ----------------------------------------------------------------------------

@dataclass
class Tally:
    """What the verdicts did to a run's output, for its summary line."""

    confirmed: int = 0  # findings shown as confirmed
    revealed: int = 0  # of those, possible findings the default output shows because of it
    ran_clean: int = 0  # findings (shown or not) whose lines ran where the bug would show, without it
    ran_clean_hidden: int = 0  # of those, possible findings left out of the default output
    not_reached: int = 0
    runtime: int = 0  # TDL100/TDL101 shown from the tests

    def add(self, other: "Tally") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in self.__dataclass_fields__)

    def words(self) -> str:
        parts = []
        if self.confirmed:
            revealed = f" ({self.revealed} of them possible, shown for that)" if self.revealed else ""
            parts.append(f"{self.confirmed} confirmed{revealed}")
        if self.ran_clean:
            hidden = f" ({self.ran_clean_hidden} of them possible, not shown)" if self.ran_clean_hidden else ""
            parts.append(f"{self.ran_clean} ran clean{hidden}")
        if self.not_reached:
            parts.append(f"{self.not_reached} not reached")
        if self.runtime:
            parts.append(f"{self.runtime} device problem{'s' if self.runtime != 1 else ''} no finding predicted "
                         "(TDL100/TDL101)")
        return "Verdicts of the tests on a simulated GPU: " + ", ".join(parts) + "." if parts else ""


_SET_ASIDE = "judged CUDA-only"  # the evidence step of a finding kept possible only by unknown intent


def apply(result, text: str, entry: FileVerdicts | None, *, preview: bool, enabled=None, suppressed=None,
          relint=None) -> Tally:
    """Give ``result``'s findings (an ``engine.FileResult``) their verdicts, in place: a confirmed
    finding is shown whatever its tier (``relint()`` gives the file's findings of every tier, to
    find a possible one the default output left out), a clean run is said in the evidence, and
    each recorded TDL100/TDL101 becomes a finding at its line. ``enabled(code)`` and
    ``suppressed(line, code)`` (a ``# noqa``) say which runtime codes may be shown."""
    from torchdev_lint.finding import Confidence, Evidence, Finding  # light: no LibCST

    tally = Tally()
    if entry is None:
        return tally
    shown = {(f.code, f.line) for f in result.findings}

    def mark(finding, verdict: Verdict) -> None:
        finding.verdict = verdict.to_json()
        finding.evidence = (*finding.evidence,
                            Evidence(finding.path, finding.line, finding.column, verdict.text, finding.cell))

    refuted = []
    for finding in result.findings:
        verdict = entry.verdict(finding.code, finding.line, finding.end_line)
        if verdict is None:
            continue
        mark(finding, verdict)
        if verdict.status == CONFIRMED:
            tally.confirmed += 1
        elif verdict.status == RAN_CLEAN:
            tally.ran_clean += 1
            if finding.code in REFUTED_WITHOUT_GPU and "cpu-only" in entry.ran(finding.line, finding.end_line) \
                    and finding.confidence is Confidence.CERTAIN:
                finding.confidence = Confidence.POSSIBLE  # the failure it claims did not happen there
                refuted.append(finding)
        elif verdict.status == NOT_REACHED:
            tally.not_reached += 1
    if refuted and not preview:
        result.findings = [f for f in result.findings if f not in refuted]
        result.hidden += len(refuted)
        tally.ran_clean_hidden += len(refuted)
    wanted = {(c.get("code"), int(c.get("line", 0))) for c in entry.data.get("confirmed", ())} - shown
    if wanted and relint is not None and not preview:
        for finding in relint():
            if (finding.code, finding.line) in shown or entry.verdict(
                    finding.code, finding.line, finding.end_line) is None:
                continue
            verdict = entry.verdict(finding.code, finding.line, finding.end_line)
            if verdict.status != CONFIRMED:
                continue
            finding.fix = None  # its edits were not computed for this tier: `--fix` leaves it
            mark(finding, verdict)
            result.findings.append(finding)
            shown.add((finding.code, finding.line))
            tally.confirmed += 1
            tally.revealed += 1
            if result.hidden:
                result.hidden -= 1
                if result.set_aside and any(_SET_ASIDE in step.message for step in finding.evidence):
                    result.set_aside -= 1
            result.set_aside = min(result.set_aside, result.hidden)
    if not preview:
        for item in entry.findings():
            key = (item.get("code"), int(item.get("line", 0)))
            if key in shown or item.get("confidence") != "possible" or (enabled and not enabled(key[0])):
                continue
            verdict = entry.verdict(key[0], key[1], item.get("end_line"))
            if verdict is not None and verdict.status == RAN_CLEAN:
                tally.ran_clean += 1
                tally.ran_clean_hidden += 1
    explained = {(f.line, f.code) for f in result.findings}
    for item in entry.runtime():
        code, line = item.get("code"), int(item.get("line", 0))
        if (line, code) in explained or (enabled is not None and not enabled(code)):
            continue
        if suppressed is not None and suppressed(line, code):
            continue
        by = item.get("by")
        machine = SHORT_MACHINES.get(item.get("mode") or "sim", "a simulated GPU")
        verdict = Verdict(CONFIRMED, f"found by {by} on {machine}", item.get("evidence") or "", by=by, runs=1,
                          machine=item.get("mode"))
        finding = Finding(result.path, line, int(item.get("column", 1)), int(item.get("end_line", line)),
                          int(item.get("end_column", int(item.get("column", 1)) + 1)), code,
                          RUNTIME_NAMES.get(code, item.get("name") or "device-problem"),
                          item.get("message") or item.get("evidence") or "a device problem",
                          confidence=Confidence.CERTAIN)
        mark(finding, verdict)
        result.findings.append(finding)
        explained.add((line, code))
        tally.runtime += 1
    result.findings.sort(key=Finding.sort_key)
    return tally


# -- the recording side (pytest --simulate-gpu, torchdev-lint trace) ----------------------------------

class Recording:
    """What one run (a pytest session or worker, a traced program) saw, per file, before it is
    merged into the store by content."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.path.realpath(root)
        self.entries: dict[str, dict] = {}  # real path -> entry

    def file(self, path: str, lines_recorded: bool = False) -> dict:
        real = os.path.realpath(path)
        entry = self.entries.get(real)
        if entry is None:
            relative = os.path.relpath(real, self.root)
            entry = self.entries[real] = new_entry(real if relative.startswith("..") else relative)
        entry["lines_recorded"] = entry["lines_recorded"] or lines_recorded
        return entry

    def unobserved(self, path: str, lines) -> None:
        """Lines of ``path`` the run could not have seen running (see ``FileVerdicts.unobserved``)."""
        entry = self.file(path)
        entry["unobserved"] = sorted(set(entry.get("unobserved") or ()) | {int(n) for n in lines})

    def finding(self, path: str, finding: dict) -> None:
        """A static finding (``Finding.to_json()``) the run knew in ``path``."""
        keep = ("code", "name", "line", "column", "end_line", "end_column", "message", "confidence")
        self.file(path)["findings"].append({k: finding.get(k) for k in keep})

    def ran(self, path: str, line: int, mode: str, owner: str) -> None:
        owners = self.file(path)["lines"].setdefault(str(line), {}).setdefault(mode, [])
        if owner not in owners:
            owners.append(owner)

    def confirm(self, path: str, code: str, line: int, column: int, by: str, mode: str, evidence: str) -> None:
        self.file(path)["confirmed"].append({"code": code, "line": line, "column": column, "by": by, "mode": mode,
                                             "evidence": evidence})

    def problem(self, path: str, code: str, line: int, column: int, by: str, mode: str, evidence: str, *,
                message: str, name: str | None = None, end_line: int | None = None,
                end_column: int | None = None) -> None:
        """A device problem no static finding predicted (TDL100, TDL101)."""
        self.file(path)["runtime"].append({
            "code": code, "name": name or RUNTIME_NAMES.get(code), "line": line, "column": column,
            "end_line": end_line or line, "end_column": end_column or column + 1, "message": message,
            "by": by, "mode": mode, "evidence": evidence})

    def updates(self) -> dict[str, dict]:
        """The entries keyed by the content each file has now (files that cannot be read are left out)."""
        from torchdev_lint import files  # the linter's own reading: the same text, the same hash

        out = {}
        for real, entry in self.entries.items():
            source = files.read(real)
            if not isinstance(source, files.SourceFile):
                continue
            key = content_hash(source.file_text)
            out[key] = merge(out.get(key) or {}, entry)
        return out

    def save(self, store: VerdictStore) -> int:
        """Merge into ``store``; how many files were recorded."""
        updates = self.updates()
        if updates:
            store.record(updates, self.root)
        return len(updates)
