"""The worker processes of a local run (``batch --jobs N``, ``fairplay --jobs N``).

Forked, so each starts from the main process with the work's code already loaded. A pool of
``multiprocessing`` waits for ever on a task whose worker died (killed, or out of memory): the
run hung. Here the tasks run on a ``ProcessPoolExecutor``, which says when a worker is gone; the
pool is then made anew and every task in flight submitted again (the work is a pure function of
its task: judged twice, a case has the same verdict, and only the main process writes). When the
workers die ``LOSSES`` times in one run, whatever kills them is not by chance: ``WorkersLost``.

The executor learns of a death by the worker's sentinel, unless the worker died while it wrote
a result: its thread that reads results then waits for the rest of a message that never comes,
and the run hung all the same. So the oldest task is awaited a second at a time, and a pool with
a worker dead and still no result after ``STUCK_SECONDS`` is unstuck (``_unstick``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

_R = TypeVar("_R")

LOSSES = 3  # times the workers may die in one run; then the run stops (WorkersLost)
WATCH_SECONDS = 1.0  # how often the oldest task's wait looks at the workers
STUCK_SECONDS = 2.0  # a worker dead this long and the pool not told: it is stuck (``_unstick``)


class WorkersLost(Exception):
    """The workers died too often in one run: the run stops, what it wrote is kept."""


class Workers:
    """``jobs`` forked worker processes, each running ``initializer`` (if any) first; a context
    manager. Ctrl-C, which the terminal sends to every process of the group, is the main
    process's to act on: a worker ignores it (no KeyboardInterrupt of its own), and ends with
    the pool."""

    def __init__(self, jobs: int, command: str, initializer: Callable[[], None] | None = None) -> None:
        self.jobs = jobs
        self.initializer = initializer
        self.command = command  # named in what the run says of a lost worker
        self.losses = 0
        self._pool = self._new()

    def _new(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.jobs,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_starts,
            initargs=(self.initializer,),
        )

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        # Tasks not started are dropped; those running finish (a chunk's work) and the workers exit.
        self._pool.shutdown(wait=True, cancel_futures=True)

    def in_order(self, work: Callable[..., _R], tasks: Iterable[tuple[Any, ...]], in_flight: int) -> Iterator[_R]:
        """``work(*task)`` for each task, the results in the order of the tasks.

        At most ``in_flight`` tasks at once keeps memory flat however long the input; the oldest
        is awaited first, so the results leave in order. A worker lost makes the pool anew and
        submits again every task in flight, the oldest first."""
        waiting: deque[tuple[Any, ...]] = deque()  # tasks taken from ``tasks``, not yet submitted
        pending: deque[tuple[tuple[Any, ...], Future[_R]]] = deque()
        source = iter(tasks)
        while True:
            try:
                while len(pending) < in_flight:
                    if not waiting:
                        task = next(source, None)
                        if task is None:
                            break
                        waiting.append(task)
                    pending.append((waiting[0], self._pool.submit(work, *waiting[0])))
                    waiting.popleft()
                if not pending:
                    return
                result = self._result(pending[0][1])
            except BrokenProcessPool:  # found by a result awaited or by a submit
                self._lost()
                waiting.extendleft(reversed([task for task, _ in pending]))
                pending.clear()
                continue
            pending.popleft()
            yield result

    def _result(self, future: Future[_R]) -> _R:
        """The future's result, the workers looked at every WATCH_SECONDS while it is awaited."""
        dead_since: float | None = None
        while True:
            try:
                return future.result(timeout=WATCH_SECONDS)
            except FuturesTimeout:
                pass
            if not self._a_worker_ended():
                dead_since = None
            elif dead_since is None:
                dead_since = time.monotonic()
            elif time.monotonic() - dead_since >= STUCK_SECONDS:
                self._unstick()
                dead_since = None

    def _processes(self) -> list[BaseProcess]:
        # The executor's own table of its processes: no public way to see them.
        return list((getattr(self._pool, "_processes", None) or {}).values())

    def _a_worker_ended(self) -> bool:
        return any(process.exitcode is not None for process in self._processes())

    def _unstick(self) -> None:
        """Make the pool find out that it is broken: its other workers are killed and this
        process's end of the result pipe closed, so the half message's reader meets the pipe's
        end, and the executor fails every task in flight (BrokenProcessPool)."""
        for process in self._processes():
            with contextlib.suppress(OSError):
                process.kill()
        results = getattr(self._pool, "_result_queue", None)
        if results is not None:
            with contextlib.suppress(OSError):
                results._writer.close()

    def _lost(self) -> None:
        """A worker died: count it, stop when it happens too often, else make the pool anew."""
        self.losses += 1
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.losses >= LOSSES:
            raise WorkersLost(f"a worker process ended abruptly {self.losses} times (killed, or out of memory?)")
        print(
            f"remigio-referee {self.command}: a worker process ended abruptly (killed, or out of memory?); "
            "starting the workers again and taking up the work they held",
            file=sys.stderr,
        )
        self._pool = self._new()


def _worker_starts(initializer: Callable[[], None] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer()


__all__ = ["LOSSES", "Workers", "WorkersLost"]
