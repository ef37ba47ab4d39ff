"""Parent side: run the program in a child process and read back what happened.

Never imports torch nor the user's code. The child gets its own session (process group), so
that on the hard time limit the program and its DataLoader workers are killed together.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

# Extra seconds after --timeout before the child is killed: the child stops itself at the
# timeout (SIGALRM), unless the program is stuck in a long C call or swallows the signal. Its
# clock starts before torch is imported, which alone can take over 10 s on a loaded machine
# with a CUDA build (the child then stops half a second after its start-up), so the grace
# leaves room for that.
GRACE_SECONDS = 30.0

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
    saves: str | None = None  # the registry of files earlier traced runs saved (see record_saves)
    env: dict = field(default_factory=dict)  # extra environment (a torchrun worker's RANK...)
    notes: list = field(default_factory=list)  # limits known before the run (torchrun: rank 0 only)
    rank: int | None = None  # one of the ranks ``run_ranks`` starts together (TDL011)
    world_size: int | None = None


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

    @property
    def limits(self) -> list[str]:
        """What this run did that the tracer does not model, in words."""
        return [*self.options.notes, *(e["what"] for e in self.of_kind("limit"))]

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
    if options.saves:
        cmd += ["--saves", options.saves]
    if options.world_size:
        cmd += ["--ranks", str(options.world_size)]
    cmd += ["--", options.target, *options.args]
    return cmd


def run(options: Options, output=None, peers_done: threading.Event | None = None) -> Run:
    """Run the program once; ``output`` is a file object for its stdout and stderr (None: this
    process's stderr, so the report on stdout stays clean). A file object without a file
    descriptor (a StringIO) gets the output once the program has ended. ``peers_done``: set
    when another rank of the same group has ended (``run_ranks``); this one then gets
    ``PEER_GRACE_SECONDS`` more before it is killed (it may wait for that rank for ever)."""
    handle, events = tempfile.mkstemp(prefix="torchdev-lint-trace-", suffix=".jsonl")
    os.close(handle)
    env = {**os.environ, **options.env}
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
        if peers_done is not None:
            out = _wait_with_peers(process, fileno is None, limit, peers_done)
            if out is None:
                _kill(process)
                result.killed = True
                result.outcome = {"kind": "killed", "reason": "peer"}
            elif fileno is None:
                sink.write(out.decode(errors="replace"))
        elif fileno is None:
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
        if options.saves:
            record_saves(options.saves, result)
    return result


# A rank whose peer has ended gets this long to end too: it may wait in a collective, or in
# the group's start, for a rank that will never come.
PEER_GRACE_SECONDS = 20.0
_POLL_SECONDS = 0.2


def _wait_with_peers(process: subprocess.Popen, piped: bool, limit: float | None,
                     peers_done: threading.Event) -> bytes | None:
    """Wait for ``process``; its output when piped (b"" otherwise), None when it must be killed
    (the time limit, or ``PEER_GRACE_SECONDS`` after a peer rank ended)."""
    started = time.monotonic()
    deadline = started + limit if limit else None
    chunks = b""
    while True:
        if getattr(peers_done, "cancelled", False):  # Ctrl-C in the tracer: end every rank now
            deadline = time.monotonic()
        elif peers_done.is_set():
            since = getattr(peers_done, "when", None) or time.monotonic()
            grace = since + PEER_GRACE_SECONDS
            deadline = grace if deadline is None else min(deadline, grace)
        if deadline is not None and time.monotonic() >= deadline:
            if piped:
                with contextlib.suppress(Exception):
                    process.stdout.close()
            return None
        try:
            if piped:
                out, _ = process.communicate(timeout=_POLL_SECONDS)
                return chunks + (out or b"")
            process.wait(timeout=_POLL_SECONDS)
            return b""
        except subprocess.TimeoutExpired:
            continue


RANK_WORLD = 2  # the ranks the tracer starts for TDL011: enough to see two share a device


def rank_env(rank: int, world: int, port: int) -> dict:
    """The environment torchrun gives the worker of ``rank`` on one node."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
            "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "ROLE_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "torchdev-lint-trace-ranks"}


def rank_options(base: Options, port: int, world: int = RANK_WORLD) -> list[Options]:
    """The options of each rank of a simulated ``torchrun --nproc-per-node=WORLD`` job of the
    program: on the simulated GPU with one device per rank, stopping at the first error."""
    out = []
    for rank in range(world):
        fields = {**base.__dict__, "mode": "sim", "keep_going": False, "devices": max(base.devices, world),
                  "env": {**base.env, **rank_env(rank, world, port)}, "rank": rank, "world_size": world,
                  "notes": [f"run as rank {rank} of {world} (torchrun's environment: RANK={rank}, "
                            f"LOCAL_RANK={rank}, WORLD_SIZE={world}), beside the other rank{'s' if world > 2 else ''}, "
                            f"on {world} simulated GPUs"]}
        out.append(Options(**fields))
    return out


def run_ranks(options: list[Options], output=None) -> list[Run]:
    """Run the ranks together (each in its own child, as torchrun would start them); when one
    ends, the others get ``PEER_GRACE_SECONDS`` more. The runs, in rank order."""
    peers_done = threading.Event()
    results: list[Run | None] = [None] * len(options)
    errors: list[BaseException] = []
    ended = [threading.Event() for _ in options]

    def one(index: int) -> None:
        try:
            results[index] = run(options[index], output, peers_done=peers_done)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(error)
        finally:
            if not peers_done.is_set():
                peers_done.when = time.monotonic()
                peers_done.set()
            ended[index].set()

    for index in range(len(options)):
        threading.Thread(target=one, args=(index,), daemon=True).start()
    # Waiting on our own events, not Thread.join: a join that Ctrl-C interrupts can leave the
    # thread marked as ended while it still runs.
    try:
        for event in ended:
            while not event.wait(_POLL_SECONDS):  # a wait with a timeout lets Ctrl-C in
                pass
    except KeyboardInterrupt:  # the ranks run in sessions of their own: Ctrl-C never reached them
        peers_done.cancelled = True
        peers_done.set()
        for event in ended:
            event.wait(10)
        raise
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


SAVES_KEPT = 1000


def saves_registry() -> str:
    """Where the tracer remembers the files its runs saved, so that a later run can tell its
    own checkpoints (saved on a simulated GPU) from the user's (TORCHDEV_LINT_TRACE_SAVES)."""
    path = os.environ.get("TORCHDEV_LINT_TRACE_SAVES")
    if path:
        return path
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "torchdev-lint", "trace-saves.jsonl")


def record_saves(registry: str, run: Run) -> None:
    entries = [{"file": e["file"], "size": e.get("size"), "mtime_ns": e.get("mtime_ns"), "site": e.get("site"),
                "locations": e.get("locations", []), "mode": run.mode, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "command": " ".join([*(["-m"] if run.options.module else []), run.options.target, *run.options.args])}
               for e in run.of_kind("save") if e.get("file") and e.get("mtime_ns")]
    if not entries:
        return
    try:
        os.makedirs(os.path.dirname(os.path.abspath(registry)), exist_ok=True)
        try:
            with open(registry, encoding="utf-8") as handle:
                kept = handle.readlines()[-SAVES_KEPT:]
        except OSError:
            kept = []
        kept += [json.dumps(e) + "\n" for e in entries]
        temporary = f"{registry}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.writelines(kept[-SAVES_KEPT:])
        os.replace(temporary, registry)
    except OSError:
        pass  # provenance is evidence, never a reason to fail a trace


def read_saves(registry: str | None) -> dict:
    """(realpath, size, mtime_ns) -> the entry an earlier traced run recorded."""
    out = {}
    try:
        with open(registry or "", encoding="utf-8") as handle:
            for line in handle:
                try:
                    e = json.loads(line)
                    out[(e["file"], e["size"], e["mtime_ns"])] = e
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        pass
    return out


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
