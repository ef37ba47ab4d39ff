"""The child process: install the instrumentation, run the program as ``python`` would, and
write what happened to the events file.

Started by ``session.run`` as ``python -c <boot> --events FILE [options] -- TARGET ARGS...``.
The program's stdout and stderr are its own; nothing of the tracer's goes there except the
traceback of an uncaught exception, printed as Python would.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import signal
import sys
import time
import traceback

from torchdev_lint.trace import sites, text
from torchdev_lint.trace.coverage import LineRecorder
from torchdev_lint.trace.recorder import Recorder


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="torchdev-lint-trace-runner")
    parser.add_argument("--events", required=True)
    parser.add_argument("--mode", default="auto", choices=("auto", "sim", "real", "cpu-only"))
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--root", required=True)
    parser.add_argument("--module", action="store_true")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--saves")
    parser.add_argument("--ranks", type=int)  # one of the ranks the tracer starts together (TDL011)
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


@contextlib.contextmanager
def instrumented(rt):
    """Everything the chosen mode needs, undone on exit."""
    from torchdev_lint.trace import hooks, modes, sim
    from torchdev_lint.trace.runtime import guard_storage_attributes

    patches = sim.Patches()

    def enter_modes():
        stack = contextlib.ExitStack()
        if rt.sim:
            stack.callback(rt.exit_dispatch)
            if rt.on_accelerator:
                rt.enter_dispatch()
        stack.enter_context(modes.TraceFunctionMode(rt))
        return stack

    try:
        undo_guard = guard_storage_attributes()  # provenance is kept on storages in every mode
        if undo_guard is not None:
            patches.on_undo(undo_guard)
        if rt.sim:
            rt.dispatch_mode = sim.SimDispatchMode
            sim.patch_cuda(rt, patches)
            sim.patch_serialization(rt, patches)
            sim.patch_storage(rt, patches)
            sim.patch_torchscript(rt, patches)
        if rt.mode == "cpu-only":
            sim.patch_no_cuda(rt, patches)
        if rt.mode != "real":
            sim.patch_distributed(rt, patches)
        sim.patch_threads(enter_modes, patches)
        hooks.install(rt, patches)
        with contextlib.ExitStack() as stack:
            stack.enter_context(enter_modes())
            yield
    finally:
        patches.undo()


_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _trim(te: traceback.TracebackException, seen: set) -> None:
    """Hide the tracer's and runpy's frames, so the traceback reads as the program's own."""
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not f.filename.startswith(_OURS) and "runpy" not in f.filename])
    for nested in (te.__cause__, te.__context__):
        if nested is not None:
            _trim(nested, seen)


def print_traceback(error: BaseException) -> None:
    te = traceback.TracebackException(type(error), error, error.__traceback__)
    _trim(te, set())
    sys.stderr.write("".join(te.format()))


def _resolve_mode(requested: str, torch) -> tuple[str, str | None]:
    if requested == "auto":
        return ("real" if torch.cuda.is_available() else "sim"), None
    if requested == "real" and not torch.cuda.is_available():
        return requested, "--mode real needs a CUDA device, and torch.cuda.is_available() is False here"
    if requested == "sim" and torch.cuda.is_available():
        return requested, None  # allowed: the simulator never reaches CUDA
    return requested, None


def main(argv: list[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    recorder = Recorder(options.events)
    try:
        import torch
    except ImportError as error:
        recorder.write({"type": "start", "error": f"cannot import torch: {error}"})
        return 3
    mode, problem = _resolve_mode(options.mode, torch)
    recorder.write({"type": "start", "mode": mode, "requested": options.mode, "torch": torch.__version__,
                    "python": sys.version.split()[0], "pid": os.getpid(),
                    "keep_going": options.keep_going, "error": problem})
    if problem:
        return 3

    from torchdev_lint.trace.runtime import Runtime, StopTracing

    target = options.target
    script = None if options.module else os.path.abspath(target)
    users = sites.UserFiles(options.root, script)
    rt = Runtime(mode, options.keep_going, users, recorder, device_count=options.devices)
    rt.max_steps = options.max_steps
    rt.ranks = options.ranks
    if options.saves:
        from torchdev_lint.trace.session import read_saves

        rt.earlier_saves = read_saves(options.saves)
    lines = LineRecorder(users, lambda: recorder.last_seq)

    # Make the process look like `python SCRIPT ARGS` / `python -m MODULE ARGS`.
    sys.argv = [target, *options.args]
    if options.module:
        sys.path[0] = os.getcwd()
    else:
        sys.path[0] = os.path.dirname(script)

    def on_timeout(signum, frame):
        raise StopTracing("timeout")

    outcome: dict = {}
    status = 0
    main_module = sys.modules["__main__"]
    try:
        with instrumented(rt):
            if options.timeout:
                left = max(0.5, options.timeout - (time.monotonic() - started))
                signal.signal(signal.SIGALRM, on_timeout)
                signal.setitimer(signal.ITIMER_REAL, left)
            lines.start()
            try:
                if options.module:
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(script, run_name="__main__")
                outcome = {"kind": "exit", "status": 0}
            finally:
                lines.stop()
                if options.timeout:
                    signal.setitimer(signal.ITIMER_REAL, 0)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            print(code, file=sys.stderr)
            status = 1
        outcome = {"kind": "exit", "status": status}
    except StopTracing as stop:
        frames = sites.traceback_sites(stop.__traceback__, users)
        outcome = {"kind": "stopped", "reason": stop.reason, "site": frames[0] if frames else None}
    except KeyboardInterrupt:
        outcome = {"kind": "interrupted"}
        status = 130
    except BaseException as error:  # noqa: BLE001 - the program's own failure, reported
        print_traceback(error)
        frames = sites.traceback_sites(error.__traceback__, users)
        if isinstance(error, SyntaxError) and error.filename and error.filename in users and error.lineno:
            column = max((error.offset or 1) - 1, 0)
            frames.insert(0, [users.real(error.filename), error.lineno, error.lineno, column, column])
        full = text.clean(str(error)).strip()
        outcome = {"kind": "exception", "type": type(error).__name__, "message": text.sentence(full),
                   "site": frames[0] if frames else None, "stack": frames[:8], "status": 1}
        if full != outcome["message"]:
            outcome["full_message"] = full
        status = 1
    finally:
        sys.modules["__main__"] = main_module
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()

    files = set()
    if script:
        files.add(os.path.realpath(script))
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if filename and filename in users:
            files.add(users.real(filename))
    executed = lines.as_json()
    files.update(executed)
    recorder.write({"type": "end", "outcome": outcome, "steps": rt.steps,
                    "seconds": round(time.monotonic() - started, 3), "files": sorted(files),
                    "lines": executed, "counts": recorder.counts()})
    recorder.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
