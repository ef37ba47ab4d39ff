"""The ``torchdev-lint`` entry point: hand the run to a warm resident process when one is up.

Loading LibCST takes about 0.3 s (it builds some 250 node classes), more than a pre-commit
run on one file should take. So the command keeps a resident checker (``resident.py``): a
process that has LibCST and every rule loaded and forks a fresh copy of itself for each run.
The copy runs the ordinary command line in the caller's directory, with the caller's
arguments, environment, umask and standard streams (the descriptors themselves travel over
the socket), so a run it serves is the same run the command would have made itself: only
the imports are already done.

This module is all the command loads on that path, so it imports nothing heavy. When no
checker answers, it starts one in the background for the next run and checks in this
process. It stays off on CI (``CI`` set: one-shot machines), with ``--no-daemon`` or
``TORCHDEV_LINT_DAEMON=0``, off POSIX, and for the ``trace``, ``server`` and ``rules``
commands. The checker leaves after ``TORCHDEV_LINT_DAEMON_IDLE`` seconds without a run
(default 900) and is keyed by the tool's code and Python, so an upgrade never talks to an
old one. ``torchdev-lint daemon status|stop`` shows or stops the checkers.
"""

from __future__ import annotations

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
_IN_PROCESS_COMMANDS = frozenset({"trace", "server", "rules"})
_OFF, _ON = frozenset({"0", "false", "no", "off"}), frozenset({"1", "true", "yes", "on"})
_SOCKET_PATH_LIMIT = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
HEADER = struct.Struct("!I")
STREAMS = ("stdin", "stdout", "stderr")
GO = b"go\n"
PACKAGE = os.path.dirname(os.path.abspath(torchdev_lint.__file__))


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["daemon"]:
        return _daemon_command(argv[1:])
    if _wanted(argv, os.environ):
        served = _run_resident(argv)
        if served is not None:
            return served
    from torchdev_lint.cli import main as cli_main

    return cli_main(argv)


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
    """A directory only this user can enter (created 0700), or None when that cannot be had."""
    explicit = env.get(ENV_RUNTIME_DIR)
    if explicit:
        path = explicit
    elif env.get("XDG_RUNTIME_DIR"):
        path = os.path.join(env["XDG_RUNTIME_DIR"], "torchdev-lint")
    else:
        path = os.path.join(env.get("TMPDIR") or "/tmp", f"torchdev-lint-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    # Another user's directory (or a link to one) in /tmp could receive our descriptors.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return path


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


def socket_path(directory: str) -> str:
    return os.path.join(directory, f"{fingerprint()}.sock")


def _run_resident(argv: list[str]) -> int | None:
    """The exit status of the run a resident checker made, or None to check in this process."""
    directory = runtime_dir()
    if directory is None:
        return None
    path = socket_path(directory)
    if len(path.encode("utf-8", "surrogateescape")) > _SOCKET_PATH_LIMIT:
        return None
    try:
        request = _request(argv)  # first: a socket opened now could take a closed stream's number
    except OSError:  # no current directory
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:  # no checker yet, or a stale socket
        connection.close()
        _start_resident(path)
        return None
    with connection:
        return _served(connection, request, verbose="-v" in argv or "--verbose" in argv)


def _request(argv: list[str]) -> tuple[bytes, list[int]]:
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
    }).encode("ascii")
    return HEADER.pack(len(payload)) + payload, descriptors


def _served(connection: socket.socket, request: tuple[bytes, list[int]], verbose: bool) -> int | None:
    data, descriptors = request
    try:
        sent = socket.send_fds(connection, [data], descriptors)
        connection.sendall(data[sent:])
        reader = connection.makefile("r", encoding="ascii")
        pid = int(reader.readline().split()[1])
    except (OSError, ValueError, IndexError):  # the checker went away before it took the run
        return None
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # Ctrl-C stops the run, not just us
        signal.signal(signum, lambda number, frame: _signal(pid, number))
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


def _daemon_command(argv: list[str]) -> int:
    if argv not in (["status"], ["stop"]):
        print("usage: torchdev-lint daemon status|stop", file=sys.stderr)
        return 2
    directory = runtime_dir()
    current = os.path.basename(socket_path(directory)) if directory else ""
    running = _running(directory) if directory else []
    for pid, name in running:
        if argv == ["stop"]:
            _signal(pid, signal.SIGTERM)
            print(f"stopped the resident process {pid}")
        else:
            state = "current" if f"{name}.sock" == current else "for other code (leaves when idle)"
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
