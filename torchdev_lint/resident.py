"""The resident checker: LibCST and the rules loaded once, a forked copy for each run.

Started in the background by the command (``launcher.py``) as
``python -m torchdev_lint.resident SOCKET``. Each run is served by a child forked from the
warm process, so it starts with the modules imported but with none of another run's state;
the child takes on the caller's directory, environment, umask and standard streams and runs
the ordinary command line. What it cannot take on (ids, groups, capabilities, namespaces,
resource limits) must already be the caller's: it serves only a caller whose context, read
from /proc/PID of the process at the other end of the socket, equals its own. A lock file held
for the process's life keeps one checker per key and carries its pid for
``torchdev-lint daemon status|stop``.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

from torchdev_lint.launcher import GO, HEADER, STREAMS, context, report_crash

_DEFAULT_IDLE_SECONDS = 900.0
_WATCH_SECONDS = 2  # how often a quiet checker looks whether its code still exists
_CODE = os.path.dirname(os.path.abspath(__file__))
_PEER_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


def main(path: str) -> int:
    lock = open(path[: -len(".sock")] + ".lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another checker for this key is up or starting
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _warm_up()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under another name first, then renamed into place: a run that
    # finds the socket can connect (between bind and listen it would be refused, and check
    # in its own process, on a loaded machine often). The rename also replaces a socket left
    # by a checker that was killed.
    ready = path[: -len(".sock")] + ".new"
    try:
        os.unlink(ready)  # left by a checker killed while it started
    except FileNotFoundError:
        pass
    listener.bind(ready)
    os.chmod(ready, 0o600)
    listener.listen(64)
    os.replace(ready, path)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        _serve_forever(listener, lock, float(os.environ.get("TORCHDEV_LINT_DAEMON_IDLE") or _DEFAULT_IDLE_SECONDS))
    finally:
        os.unlink(path)  # ours: the lock keeps other checkers of this key from binding it
    return 0


def _serve_forever(listener: socket.socket, lock, idle: float) -> None:
    """Fork a run per connection; stop a run whose caller went away (killed by a timeout,
    say), so that nothing keeps working for nobody; leave after ``idle`` quiet seconds."""
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    # Linux tells a hang-up apart from the request still waiting to be read (POLLRDHUP).
    hang_up = getattr(select, "POLLRDHUP", 0)
    runs: dict[int, tuple[socket.socket, int, int]] = {}
    quiet_since = time.monotonic()
    while True:
        events = poller.poll(_WATCH_SECONDS * 1000)
        if _code_gone():
            return  # its environment was deleted (pre-commit's temporary ones): nobody can use it
        if runs or events:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= idle:
            return
        for descriptor, _ in events:
            if descriptor != listener.fileno():  # the caller hung up: its run is over or orphaned
                connection, pid, pidfd = runs.pop(descriptor)
                poller.unregister(descriptor)
                connection.close()
                _stop(pid, pidfd)
                continue
            connection, _ = listener.accept()
            caller = _caller(connection)
            if caller is None:
                connection.close()
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                lock.close()
                _serve(connection, caller)  # never returns
            try:
                if not hang_up:
                    raise OSError("no POLLRDHUP")
                runs[connection.fileno()] = (connection, pid, os.pidfd_open(pid))
                poller.register(connection, hang_up)
            except (AttributeError, OSError):  # not Linux: a run cannot be watched
                connection.close()


def _code_gone() -> bool:
    """The package or the interpreter this checker runs was deleted since it started."""
    return not (os.path.isdir(_CODE) and os.path.exists(sys.executable))


def _stop(pid: int, pidfd: int) -> None:
    """SIGTERM the run's process group if the run is still going (a pidfd never names a
    recycled pid)."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
        os.killpg(pid, signal.SIGTERM)
    except OSError:  # done already
        pass
    finally:
        os.close(pidfd)


def _warm_up() -> None:
    """Load what a run loads: the command line, the rules, LibCST and its native parser."""
    import libcst

    from torchdev_lint import cli, engine  # noqa: F401  (cli registers the rules)
    from torchdev_lint.rule import Rule

    libcst.parse_module("pass\n")
    engine.lint_source("warm_up.py", "import torch\nx = torch.zeros(1).cuda()\n", list(Rule.registry.values()))


def _caller(connection: socket.socket) -> int | None:
    """The pid of the process that connected, as the kernel says (SO_PEERCRED); None when
    it is another user's or the kernel cannot say."""
    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
    except (AttributeError, OSError):
        return None
    pid, uid, _ = _PEER_CREDENTIALS.unpack(credentials)
    return pid if uid == os.getuid() else None


def _refusal(caller: int, claimed: dict) -> str | None:
    """Why this process may not serve process ``caller`` (None: it may). Its context as read
    from /proc/CALLER and as the caller says it must both equal this process's own; what
    cannot be read is not assumed to match."""
    try:
        own, seen = context(), context(caller)
    except OSError as error:
        return f"the caller's context cannot be read ({error})"
    for what, value in own.items():
        if seen[what] != value:
            return f"the caller's {what} {'differ' if what.endswith('s') else 'differs'}"
    if claimed != own:
        return "the caller's account of its context is not the kernel's"
    return None


def _serve(connection: socket.socket, caller: int) -> None:
    """In the forked child: become the caller's process, run the command, report its status;
    or say why not and leave, for the caller to run the command itself."""
    code = 2
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setpgid(0, 0)  # a group of its own, so that stopping the run stops its workers too
        request = _receive(connection)
        refusal = _refusal(caller, request["context"])
        if refusal:
            connection.sendall(f"refused {refusal}\n".encode("ascii", "replace"))
            os._exit(code)
        connection.sendall(f"pid {os.getpid()}\n".encode("ascii"))
        if connection.recv(len(GO), socket.MSG_WAITALL) != GO:
            os._exit(code)  # the caller went away before the run began
        code = _run(request)
    except BaseException:  # noqa: BLE001 - the status must reach the caller whatever happened
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream and stream.flush()
            except (OSError, ValueError):
                pass
        try:
            connection.sendall(f"exit {code}\n".encode("ascii"))
        except OSError:
            pass
        os._exit(code)


def _receive(connection: socket.socket) -> dict:
    data, descriptors, _flags, _address = socket.recv_fds(connection, 1 << 16, len(STREAMS))
    while len(data) < HEADER.size:
        data += _more(connection)
    (size,) = HEADER.unpack_from(data)
    while len(data) < HEADER.size + size:
        data += _more(connection)
    request = json.loads(data[HEADER.size: HEADER.size + size])
    received = iter(descriptors)
    for number, (name, stream) in enumerate(zip(STREAMS, request["streams"])):
        if stream is None:
            os.close(number)
            setattr(sys, name, None)
            continue
        descriptor = next(received)
        os.dup2(descriptor, number)
        os.close(descriptor)
        setattr(sys, name, _text_stream(number, *stream))
    return request


def _more(connection: socket.socket) -> bytes:
    chunk = connection.recv(1 << 16)
    if not chunk:
        raise EOFError("the caller closed the connection mid-request")
    return chunk


def _text_stream(number: int, encoding: str | None, errors: str | None) -> io.TextIOWrapper:
    """The stream as Python would have opened it in the caller (stderr is line-buffered)."""
    raw = open(number, "rb" if number == 0 else "wb", buffering=-1, closefd=False)
    interactive = os.isatty(number)
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors,
                            line_buffering=interactive or number == 2, write_through=number == 2)


def _run(request: dict) -> int:
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    sys.argv = ["torchdev-lint", *request["argv"]]
    try:
        from torchdev_lint.cli import main as cli_main

        return cli_main(request["argv"])
    except SystemExit as leaving:  # argparse's errors, --help and --version
        if leaving.code is None or isinstance(leaving.code, int):
            return leaving.code or 0
        print(leaving.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception:  # noqa: BLE001 - a bug: said as the command in its own process says it
        return report_crash(request["argv"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
