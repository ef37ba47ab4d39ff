"""The ``torchdev-lint`` entry point: hand the run to a warm resident process when one is up.

Loading LibCST takes about 0.3 s (it builds some 250 node classes), more than a pre-commit
run on one file should take. So the command keeps a resident checker (``resident.py``): a
process that has LibCST and every rule loaded and forks a fresh copy of itself for each run.
The copy runs the ordinary command line in the caller's directory, with the caller's
arguments, environment, umask and standard streams (the descriptors themselves travel over
the socket), so a run it serves is the same run the command would have made itself: only
the imports are already done. What a process may do and see cannot be handed over (ids and
groups, capabilities, namespaces, resource limits: ``context``), so a checker serves only a
caller whose context, as the kernel tells it, is its own.

This module is all the command loads on that path, so it imports nothing heavy. When no
checker answers, it starts one in the background for the next run and checks in this
process. It stays off on CI (``CI`` set: one-shot machines), with ``--no-daemon`` or
``TORCHDEV_LINT_DAEMON=0``, off POSIX, and for the ``trace``, ``confirm``, ``server`` and
``rules`` commands (the first two execute the user's code: it runs under the caller, where its
signals, terminal and time accounting are). The checker leaves after ``TORCHDEV_LINT_DAEMON_IDLE`` seconds without a run
(default 900) and is keyed by the tool's code, Python and the caller's context, so an upgrade
never talks to an old one and a caller with other privileges starts one of its own.
``torchdev-lint daemon status|stop`` shows or stops the checkers. It needs Linux (/proc):
elsewhere nothing tells a checker what its caller may do, and the command checks in its own process.

The socket lives in a directory only this user can enter. A socket's path holds at most
about 100 bytes (``sun_path``), so when the runtime directory is too deep for one (pytest's
temporary directories, a long ``$XDG_RUNTIME_DIR``) the checker's files go to a short one
instead, ``/tmp/torchdev-lint-UID/HASH`` (both 0700, checked to be this user's own), and
``-v`` says so.

Every entry point ends an unexpected exception (a bug, not a finding) the same way:
``report_crash`` prints one line, keeps the traceback in a file (``-v`` prints it), and the
status is 2, never 1, which means findings.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import sys

import torchdev_lint

ENV_SWITCH = "TORCHDEV_LINT_DAEMON"
ENV_RUNTIME_DIR = "TORCHDEV_LINT_RUNTIME_DIR"
_IN_PROCESS_COMMANDS = frozenset({"trace", "confirm", "server", "rules"})
_OFF, _ON = frozenset({"0", "false", "no", "off"}), frozenset({"1", "true", "yes", "on"})
_SOCKET_PATH_LIMIT = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_SOCKET_NAME_SIZE = len("/") + 20 + len(".sock")  # a key (code and context) per socket
_SHORT_BASE = "/tmp"  # where a runtime directory too deep for a socket is moved
EXIT_ERROR, EXIT_INTERRUPTED = 2, 130
HEADER = struct.Struct("!I")
STREAMS = ("stdin", "stdout", "stderr")
GO = b"go\n"
PACKAGE = os.path.dirname(os.path.abspath(torchdev_lint.__file__))


def main() -> int:
    argv = sys.argv[1:]
    try:
        if argv[:1] == ["daemon"]:
            return _daemon_command(argv[1:])
        if _wanted(argv, os.environ):
            served = _run_resident(argv)
            if served is not None:
                return served
        from torchdev_lint.cli import main as cli_main

        return cli_main(argv)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - a bug: one line and status 2, not a traceback and 1 (findings)
        return report_crash(argv)


def verbose(argv: list[str]) -> bool:
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "-v" in options or "--verbose" in options


def report_crash(argv: list[str], stream=None) -> int:
    """Say that the command failed on an internal error: one line on stderr naming the
    exception, the traceback printed under ``-v`` and otherwise kept in a file the line
    names. Call it from an ``except`` block; it returns the exit status (2)."""
    import tempfile
    import traceback

    stream = stream if stream is not None else sys.stderr
    error = sys.exc_info()[1]
    text = traceback.format_exc()
    summary = f"{type(error).__name__}: {error}".strip().splitlines()[0] if error else "unknown error"
    where = ""
    if verbose(argv):
        where = "; the traceback is above"
    else:
        try:
            tempfile.tempdir = None  # read TMPDIR again: a served run has the caller's environment
            handle, name = tempfile.mkstemp(prefix="torchdev-lint-crash-", suffix=".txt")
            with os.fdopen(handle, "w", encoding="utf-8", errors="replace") as log:
                log.write(f"torchdev-lint {torchdev_lint.__version__} on Python {sys.version.split()[0]}\n"
                          f"arguments: {argv!r}\n\n{text}")
            where = f"; the traceback is in {name}"
        except OSError:
            where = "; run again with -v to see the traceback"
    try:
        if verbose(argv):
            stream.write(text)
        stream.write(f"torchdev-lint: internal error (a bug in torchdev-lint, not a finding): {summary}{where}\n")
        stream.flush()
    except (AttributeError, OSError, ValueError):  # no stderr to say it on: the status still says it
        pass
    return EXIT_ERROR


def _wanted(argv: list[str], env) -> bool:
    if os.name != "posix" or not hasattr(socket, "send_fds") or argv[:1] and argv[0] in _IN_PROCESS_COMMANDS:
        return False
    options = argv[: argv.index("--")] if "--" in argv else argv
    if "--no-daemon" in options:
        return False
    switch = env.get(ENV_SWITCH, "").strip().lower()
    if switch in _OFF or switch in _ON:
        return switch in _ON
    return env.get("CI", "").strip().lower() in ("", *_OFF)


def runtime_dir(env=os.environ) -> str | None:
    """A directory only this user can enter (created 0700) that is shallow enough for a
    socket, or None when that cannot be had."""
    return _runtime(env)[0]


def _runtime(env) -> tuple[str | None, str | None]:
    """(the runtime directory or None, a note for -v: why none, or why another one)."""
    explicit = env.get(ENV_RUNTIME_DIR)
    if explicit:
        path = explicit
    elif env.get("XDG_RUNTIME_DIR"):
        path = os.path.join(env["XDG_RUNTIME_DIR"], "torchdev-lint")
    else:
        path = os.path.join(env.get("TMPDIR") or "/tmp", f"torchdev-lint-{os.getuid()}")
    path = os.path.abspath(path)
    if len(path.encode("utf-8", "surrogateescape")) + _SOCKET_NAME_SIZE <= _SOCKET_PATH_LIMIT:
        if _private_directory(path):
            return path, None
        return None, f"no resident checker: {path} is not a directory only this user can enter"
    # Too deep for a socket: the same directory of ours for the same long one, under /tmp.
    key = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    mine = os.path.join(_SHORT_BASE, f"torchdev-lint-{os.getuid()}")
    short = os.path.join(mine, key)
    if _private_directory(mine) and _private_directory(short):
        return short, f"the runtime directory {path} is too deep for a socket path; using {short}"
    return None, (f"no resident checker: the runtime directory {path} is too deep for a socket path, "
                  f"and {short} is not a directory only this user can enter")


def _private_directory(path: str) -> bool:
    """``path`` is (now) a directory of this user's that no one else can enter."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return False
    # Another user's directory (or a link to one) in /tmp could receive our descriptors.
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def fingerprint() -> str:
    """What a checker must share with the caller: this code, this Python, this import path."""
    digest = hashlib.sha256()
    for part in (torchdev_lint.__version__, sys.executable, sys.version, *sys.path[1:]):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    libcst = _libcst_init()
    for path in sorted(_python_files(PACKAGE)) + ([libcst] if libcst else []):
        try:
            info = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}\0{info.st_mtime_ns}\0{info.st_size}\0".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]


def _python_files(directory: str):
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
            yield from _python_files(entry.path)
        elif entry.name.endswith(".py"):
            yield entry.path


def _libcst_init() -> str | None:
    for directory in sys.path[1:]:
        candidate = os.path.join(directory or ".", "libcst", "__init__.py")
        if os.path.isfile(candidate):
            return candidate
    return None


# What a run may do and see that a forked checker would otherwise have from itself, not from
# its caller; the keys are what -v names when they differ.
_STATUS_LINES = {  # lines of /proc/PID/status
    "user ids": ("Uid",), "group ids": ("Gid",), "supplementary groups": ("Groups",),
    "capability sets": ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"),
    "no_new_privs flag": ("NoNewPrivs",), "seccomp filters": ("Seccomp", "Seccomp_filters"),
}
_LINKS = {"root directory": "root", "mount namespace": "ns/mnt", "user namespace": "ns/user",
          "pid namespace": "ns/pid"}


def context(pid: int | str = "self") -> dict[str, str | None]:
    """What process ``pid`` may do and see, as the kernel tells it in /proc: a checker serves
    only a caller whose context equals its own. Raises OSError where /proc cannot tell
    (not Linux, or another process's details this one may not read)."""
    proc = f"/proc/{pid}"
    with open(f"{proc}/status", encoding="utf-8", errors="surrogateescape") as status:
        lines = dict(line.rstrip("\n").split(":", 1) for line in status if ":" in line)
    found: dict[str, str | None] = {
        what: " ".join(f"{name}={' '.join(lines.get(name, '?').split())}" for name in names)
        for what, names in _STATUS_LINES.items()
    }
    with open(f"{proc}/limits", encoding="ascii", errors="replace") as limits:
        found["resource limits"] = limits.read()
    for what, link in _LINKS.items():
        found[what] = os.readlink(f"{proc}/{link}")
    try:
        with open(f"{proc}/attr/current", "rb") as label:
            found["security label"] = label.read().decode("ascii", "replace")
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOENT):  # no security module labels processes
            raise
        found["security label"] = None
    return found


def socket_path(directory: str, caller: dict) -> str:
    """The socket of the checker for this code and the caller's ``context``."""
    digest = hashlib.sha256(fingerprint().encode("ascii") + json.dumps(caller, sort_keys=True).encode("ascii"))
    return os.path.join(directory, f"{digest.hexdigest()[:20]}.sock")


def _run_resident(argv: list[str]) -> int | None:
    """The exit status of the run a resident checker made, or None to check in this process."""
    try:
        caller = context()
    except OSError as error:
        _say(argv, f"not served by the resident checker: this process's context cannot be read ({error})")
        return None
    directory, note = _runtime(os.environ)
    if note:
        _say(argv, note)
    if directory is None:
        return None
    path = socket_path(directory, caller)
    if len(path.encode("utf-8", "surrogateescape")) > _SOCKET_PATH_LIMIT:  # cannot happen: checked above
        return None
    try:
        request = _request(argv, caller)  # first: a socket opened now could take a closed stream's number
    except OSError:  # no current directory
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:  # no checker yet, or a stale socket
        connection.close()
        _say(argv, "not served by the resident checker: none is up for this code and context yet (starting one)")
        _start_resident(path)
        return None
    with connection:
        return _served(connection, request, verbose=verbose(argv))


def _say(argv: list[str], note: str) -> None:
    if verbose(argv):
        print(f"torchdev-lint: {note}", file=sys.stderr)


def _request(argv: list[str], caller: dict) -> tuple[bytes, list[int]]:
    streams, descriptors = [], []
    for number, name in enumerate(STREAMS):
        stream = getattr(sys, name)
        try:
            os.fstat(number)
        except OSError:  # `torchdev-lint - <&-`: the run must see the stream closed, as here
            streams.append(None)
            continue
        descriptors.append(number)
        streams.append([getattr(stream, "encoding", None), getattr(stream, "errors", None)])
    umask = os.umask(0)
    os.umask(umask)
    payload = json.dumps({
        "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask, "streams": streams,
        "context": caller,
    }).encode("ascii")
    return HEADER.pack(len(payload)) + payload, descriptors


def _served(connection: socket.socket, request: tuple[bytes, list[int]], verbose: bool) -> int | None:
    data, descriptors = request
    try:
        sent = socket.send_fds(connection, [data], descriptors)
        connection.sendall(data[sent:])
        reader = connection.makefile("r", encoding="ascii", errors="replace")
        word, detail = reader.readline().rstrip("\n").split(" ", 1)
        if word == "refused":  # the checker may do or see what this process may not
            if verbose:
                print(f"torchdev-lint: not served by the resident checker: {detail}", file=sys.stderr)
            return None
        pid = int(detail)
    except (OSError, ValueError):  # the checker went away before it took the run
        return None
    # Ctrl-C stops the run, not just us; the caller's handlers come back when the run ends
    # (a host that runs the command in-process keeps its own Ctrl-C)
    previous = {signum: signal.signal(signum, lambda number, frame: _signal(pid, number))
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    if verbose:
        print(f"torchdev-lint: checked by the resident process {pid} (--no-daemon checks here)", file=sys.stderr)
    try:
        connection.sendall(GO)  # the run starts only now: our line comes first, Ctrl-C reaches it
        reply = reader.readline().split()
        return int(reply[1])
    except (OSError, ValueError, IndexError):
        print(f"torchdev-lint: error: the resident process {pid} died before it finished this run; "
              "run again with --no-daemon", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def _start_resident(path: str) -> None:
    """Start a checker in the background for the next run; it gives up if one is starting."""
    import subprocess

    directory = os.path.dirname(path)
    try:
        with open(path[: -len(".sock")] + ".log", "wb") as log:
            subprocess.Popen(
                [sys.executable, "-m", "torchdev_lint.resident", path],
                # The runtime directory, not the caller's, becomes sys.path[0]: a project's own
                # `libcst/` must not shadow the real one in a process that outlives the run.
                cwd=directory, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True,
            )
    except OSError:
        pass


DAEMON_HELP = """\
usage: torchdev-lint daemon status|stop

The resident checker keeps LibCST loaded between runs of the command.
  status   list the resident checkers of this user
  stop     stop them (the next run checks in its own process and starts a new one)
It is turned off by --no-daemon, TORCHDEV_LINT_DAEMON=0, and when CI is set."""


def _daemon_command(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(DAEMON_HELP)
        return 0
    if argv not in (["status"], ["stop"]):
        print(DAEMON_HELP.splitlines()[0], file=sys.stderr)
        return EXIT_ERROR
    directory = runtime_dir()
    try:
        current = os.path.basename(socket_path(directory, context())) if directory else ""
    except OSError:  # no context: no checker is current for this process
        current = ""
    running = _running(directory) if directory else []
    for pid, name in running:
        if argv == ["stop"]:
            _signal(pid, signal.SIGTERM)
            print(f"stopped the resident process {pid}")
        else:
            state = "current" if f"{name}.sock" == current else "for other code or context (leaves when idle)"
            print(f"resident process {pid}: {state}")
    if not running:
        print("no resident process")
    return 0


def _running(directory: str) -> list[tuple[int, str]]:
    """(pid, key) of each live checker: its lock file is locked while it lives."""
    import fcntl

    found = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.name.endswith(".lock"):
            continue
        with open(entry.path) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:  # held: its checker is alive and wrote its pid there
                text = lock.read().strip()
                if text.isdigit():
                    found.append((int(text), entry.name[: -len(".lock")]))
    return found
