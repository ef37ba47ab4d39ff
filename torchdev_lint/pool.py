"""Worker processes for checking many files at once, robust to a worker that dies.

``concurrent.futures`` gives up on the whole pool when one worker dies (a hostile file can
crash a native parser), and cannot say which file did it. Here each worker takes one item at
a time over its own pipe, so the parent always knows what a dead worker was holding: that
item gets a result from ``on_crash``, a fresh worker takes its place, and the run goes on.

How workers start is chosen, not left to the platform's default (which Python 3.14 changes
from fork to forkserver on Linux):

- ``fork`` when this process runs a single thread, on Linux. A forked worker starts in
  milliseconds with LibCST and the rules already imported, and sees the caller's state as
  it is. The command line is single-threaded, so it always gets fork.
- ``forkserver`` otherwise. Forking a process that runs other threads can copy a lock one of
  them held, and deadlock the child; Python 3.12+ warns about it ("This process is
  multi-threaded, use of fork() may lead to deadlocks"). That happens where the linter is
  called from a threaded host: an editor plugin, a test runner with worker threads (pytest-
  xdist), a program with native thread pools. The fork server is a fresh single-threaded
  process that imports the checks once (``_PRELOAD``) and forks each worker from itself.
  Off Linux too: macOS system libraries may start threads of their own, which makes fork
  unsafe there (Python's own default is spawn on macOS).
- ``spawn`` where there is no fork server (Windows): each worker imports everything again.

Measured on a shared 2-core Linux machine (load average 4 to 6), the whole command on 50
files, ``-j 2 --no-cache``, 5 interleaved runs each, median (best): fork 4.2 s (3.8),
forkserver 4.5 s (3.7), spawn 8.8 s (6.6). Starting two workers alone, median: fork 0.08 s,
forkserver 0.08 s once its server runs, spawn 3.6 s. Fork stays the choice where it is
safe; forkserver costs one fresh interpreter's imports per run, spawn one per worker. With
forkserver and spawn the function and items are pickled, so they must be importable by name
(``runner.Job`` is kept picklable for that).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


ENV_START_METHOD = "TORCHDEV_LINT_START_METHOD"
# What a worker imports to check a file, loaded once in the fork server and so in every
# worker it forks (the function and its job are unpickled there: they name these modules).
_PRELOAD = ["torchdev_lint.runner", "torchdev_lint.rules", "libcst"]


def start_method() -> str:
    """How workers are started (see the module's docstring): ``fork`` on Linux while this
    process runs one thread, else ``forkserver``, else ``spawn``; ``TORCHDEV_LINT_START_METHOD``
    chooses one (to measure them, or to work around a platform)."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    chosen = os.environ.get(ENV_START_METHOD, "").strip()
    if chosen in methods:
        return chosen
    if "fork" in methods and sys.platform.startswith("linux") and _threads() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _threads() -> int:
    """The threads of this process: the kernel's count, which sees threads that the
    ``threading`` module never started (a native library's, a host application's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _context():
    import multiprocessing  # only runs with workers pay for it: start-up matters for one file

    context = multiprocessing.get_context(start_method())
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload(_PRELOAD)  # not the caller's __main__: nothing of its runs again
    return context


def _serve(fn, connection) -> None:
    while True:
        task = connection.recv()
        if task is None:
            return
        index, item = task
        try:
            connection.send((index, True, fn(item)))
        except Exception:  # a bug, not a crash: reported in the parent with its traceback
            connection.send((index, False, traceback.format_exc()))


class _Worker:
    def __init__(self, context, fn) -> None:
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(fn, theirs), daemon=True)
        self.process.start()
        theirs.close()
        self.task: tuple[int, object] | None = None

    def give(self, task) -> None:
        self.task = task
        self.connection.send(task)

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except OSError:
            pass
        self.connection.close()
        self.process.join(timeout=5)
        if self.process.is_alive():  # pragma: no cover - a worker stuck on exit
            self.process.kill()
            self.process.join()


def ordered_map(
    fn: Callable[[Item], Result],
    items: Sequence[Item],
    jobs: int,
    on_crash: Callable[[Item, int | None], Result],
    on_result: Callable[[int], None] | None = None,
) -> list[Result]:
    """``[fn(item) for item in items]`` across ``jobs`` processes, in the items' order.

    ``on_crash(item, exitcode)`` stands in for an item whose worker died (a negative exit
    code is the signal that killed it); ``on_result(done)`` is called after each item.
    With one job, or one item, everything runs in this process."""
    results: list = [None] * len(items)
    if jobs <= 1 or len(items) <= 1:
        for index, item in enumerate(items):
            results[index] = fn(item)
            if on_result:
                on_result(index + 1)
        return results
    from multiprocessing.connection import wait

    context = _context()
    tasks = iter(enumerate(items))
    workers = [_Worker(context, fn) for _ in range(min(jobs, len(items)))]
    done = 0
    try:
        for worker in workers:
            worker.give(next(tasks))
        busy = {worker.connection: worker for worker in workers}
        while busy:
            for connection in wait(list(busy)):
                worker = busy.pop(connection)
                try:
                    index, ok, value = connection.recv()
                except (EOFError, OSError):
                    worker.process.join()
                    index, item = worker.task
                    value = on_crash(item, worker.process.exitcode)
                    worker.connection.close()
                    workers.remove(worker)
                    worker = None
                else:
                    if not ok:
                        raise RuntimeError(f"checking {items[index]!r} failed in a worker process:\n{value}")
                results[index] = value
                done += 1
                if on_result:
                    on_result(done)
                task = next(tasks, None)
                if task is not None:
                    if worker is None:  # the one that died
                        worker = _Worker(context, fn)
                        workers.append(worker)
                    worker.give(task)
                    busy[worker.connection] = worker
    finally:
        for worker in workers:
            worker.stop()
    return results
