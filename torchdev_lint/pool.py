"""Worker processes for checking many files at once, robust to a worker that dies.

``concurrent.futures`` gives up on the whole pool when one worker dies (a hostile file can
crash a native parser), and cannot say which file did it. Here each worker takes one item at
a time over its own pipe, so the parent always knows what a dead worker was holding: that
item gets a result from ``on_crash``, a fresh worker takes its place, and the run goes on.
"""

from __future__ import annotations

import os
import traceback
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _context():
    import multiprocessing  # only runs with workers pay for it: start-up matters for one file

    # fork starts a worker in milliseconds with the parent's modules already imported;
    # where it is unavailable, spawn re-imports (what is sent must then be picklable).
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


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
