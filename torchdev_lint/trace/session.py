"""Parent side: run the program in a child process and read back what happened.

Never imports torch nor the user's code. The child gets its own session (process group), so
that on the hard time limit the program and its DataLoader workers are killed together.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

# Extra seconds after --timeout before the child is killed: the child stops itself at the
# timeout (SIGALRM), unless the program is stuck in a long C call or swallows the signal.
GRACE_SECONDS = 10.0

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The runner is started with -c, so sys.path[0] is '' (then replaced by the script's directory,
# as `python SCRIPT` would have it); torchdev_lint is found even when it is not installed.
_BOOT = (
    "import sys; sys.path.insert(0, {parent!r}); "
    "from torchdev_lint.trace.runner import main; sys.path.pop(0); sys.exit(main())"
)


@dataclass
class Options:
    target: str
    args: list[str] = field(default_factory=list)
    module: bool = False
    mode: str = "auto"
    keep_going: bool = False
    max_steps: int | None = None
    timeout: float | None = 300.0
    root: str = "."
    devices: int = 1
    cwd: str | None = None  # the program's working directory (default: this process's)


@dataclass
class Run:
    """What one child run left behind."""

    options: Options
    mode: str | None = None
    torch: str | None = None
    python: str | None = None
    error: str | None = None  # the tracer could not run the program at all
    events: list[dict] = field(default_factory=list)
    outcome: dict = field(default_factory=dict)
    lines: dict[str, dict[int, int]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    returncode: int | None = None
    killed: bool = False

    def executed(self, path: str, first: int, last: int) -> int | None:
        """The event number current when a line in [first, last] of ``path`` first ran, or None."""
        lines = self.lines.get(path)
        if not lines:
            return None
        seqs = [seq for line, seq in lines.items() if first <= line <= last]
        return min(seqs) if seqs else None

    def of_kind(self, *kinds: str) -> list[dict]:
        return [e for e in self.events if e.get("kind") in kinds]

    @property
    def stopped_early(self) -> bool:
        return self.killed or self.outcome.get("kind") in ("stopped", "exception", "interrupted")


def command(options: Options, events: str) -> list[str]:
    cmd = [sys.executable, "-c", _BOOT.format(parent=_PACKAGE_PARENT), "--events", events,
           "--mode", options.mode, "--root", os.path.abspath(options.root), "--devices", str(options.devices)]
    if options.keep_going:
        cmd.append("--keep-going")
    if options.max_steps is not None:
        cmd += ["--max-steps", str(options.max_steps)]
    if options.timeout:
        cmd += ["--timeout", str(options.timeout)]
    if options.module:
        cmd.append("--module")
    cmd += ["--", options.target, *options.args]
    return cmd


def run(options: Options, output=None) -> Run:
    """Run the program once; ``output`` is a file object for its stdout and stderr (None: this
    process's stderr, so the report on stdout stays clean). A file object without a file
    descriptor (a StringIO) gets the output once the program has ended."""
    handle, events = tempfile.mkstemp(prefix="torchdev-lint-trace-", suffix=".jsonl")
    os.close(handle)
    env = dict(os.environ)
    if options.mode == "cpu-only":
        env["CUDA_VISIBLE_DEVICES"] = ""  # on a CUDA machine: behave as one without a GPU
    sink = output if output is not None else sys.stderr
    try:
        sink.flush()
    except (AttributeError, OSError, ValueError):
        pass
    try:
        fileno = sink.fileno()
    except (AttributeError, OSError, ValueError):
        fileno = None
    started = time.monotonic()
    result = Run(options)
    process = subprocess.Popen(
        command(options, events), stdout=fileno if fileno is not None else subprocess.PIPE,
        stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=options.cwd,
    )
    try:
        limit = options.timeout + GRACE_SECONDS if options.timeout else None
        if fileno is None:
            out, _ = process.communicate(timeout=limit)
            sink.write(out.decode(errors="replace"))
        else:
            process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(process)
        result.killed = True
    except KeyboardInterrupt:
        _kill(process)
        raise
    finally:
        result.returncode = process.returncode
        result.seconds = round(time.monotonic() - started, 3)
        _read(result, events)
        os.unlink(events)
    return result


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _read(result: Run, path: str) -> None:
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a kill
                    continue
    except OSError as error:
        result.error = f"could not read the tracer's events: {error}"
        return
    counts: dict[int, int] = {}
    for record in records:
        kind = record.get("type")
        if kind == "start":
            result.mode = record.get("mode")
            result.torch = record.get("torch")
            result.python = record.get("python")
            if record.get("error"):
                result.error = record["error"]
        elif kind == "event":
            result.events.append(record)
        elif kind == "end":
            result.outcome = record.get("outcome") or {}
            result.steps = record.get("steps", 0)
            result.files = record.get("files", [])
            result.lines = {f: {line: seq for line, seq in pairs}
                            for f, pairs in (record.get("lines") or {}).items()}
            counts = {seq: n for seq, n in record.get("counts", [])}
    for event in result.events:
        if event["seq"] in counts:
            event["count"] = counts[event["seq"]]
    if not result.outcome:
        if result.killed:
            result.outcome = {"kind": "killed", "reason": "timeout"}
        elif result.error is None:
            result.outcome = {"kind": "crashed", "status": result.returncode}
            if result.mode is None:
                result.error = (f"the tracer's child process exited with status {result.returncode} "
                                "before starting the program")
