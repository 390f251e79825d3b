"""Where a call's CPU work runs: a bounded pool of compute slots, and the dispute job processes.

The gRPC server's event loop only receives, admits and sends; the domain work of a fully received
request runs here, off the loop, so the loop stays free for health checks and for the calls still
arriving. Admission is decided at once: a full pool (every slot busy and the queue full) refuses
the call with ``Busy`` (RESOURCE_EXHAUSTED) instead of letting it wait without bound.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ParamSpec, TypeVar

from referee.service.status import Busy

log = logging.getLogger("referee.service")

_P = ParamSpec("_P")
_T = TypeVar("_T")


class ComputePool:
    """``slots`` threads for the domain work of unary calls, and room for ``queue`` more calls waiting.

    Python runs one thread at a time, so more slots do not add speed; two keep one long solve
    from holding up every short call behind it. The bound counts calls admitted (running or
    waiting); a call beyond it is refused before it costs anything.
    """

    def __init__(self, slots: int, queue: int) -> None:
        self.slots = slots
        self.limit = slots + queue
        self.admitted = 0
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="compute")

    async def run(self, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``work(*args)`` on a compute slot; ``Busy`` at once when the pool and its queue are full."""
        if self.admitted >= self.limit:
            raise Busy(f"this server process already has {self.admitted} calls running or waiting; retry later")
        self.admitted += 1
        try:
            # A call cancelled while it waits is dropped from the queue by the executor.
            return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: work(*args, **kwargs))
        finally:
            self.admitted -= 1

    def shutdown(self) -> None:
        """Stop the threads once the work they hold is done."""
        self._executor.shutdown(wait=False, cancel_futures=True)


RETRY_SECONDS = 5.0


def _job_ready() -> int:
    """Load what judging needs (the engines, this process's metrics) before the first case, whose
    time budget must not pay for imports; the job process's id."""
    from referee.linking import load_engines
    from referee.service import metrics

    load_engines()
    metrics.ready()
    return os.getpid()


def _failed(future: Future[int]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


class JobLost(Exception):
    """A dispute job process died while it held one of this stream's cases."""


class DisputeJobs:
    """The processes that judge CheckDisputes cases, each replaced when it dies.

    Each job is an executor of one process, so a process that dies (killed, out of memory) fails
    only the cases it held; the job is replaced at once and the other streams go on. With one job
    the cases run on a thread of this process instead (there is no other core to use).

    The processes are spawned, not forked: a fork of a process that runs gRPC is unsafe, and the
    fork server would need a writable temporary directory for its socket.
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._executors: list[Executor] = [self._start() for _ in range(jobs)]
        self._started: list[Future[int] | None] = [None] * jobs
        self._load = [0] * jobs
        self._last_retry = 0.0
        self.replaced = 0

    def _start(self) -> Executor:
        if self.jobs == 1:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="disputes")
        return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def warm_up(self) -> None:
        """Start every job process now rather than on the first stream's first case."""
        for index, executor in enumerate(self._executors):
            self._started[index] = executor.submit(_job_ready)

    def healthy(self) -> bool:
        """False while a job process cannot be started (it died before its first answer); such a
        job is started again at most every ``RETRY_SECONDS``."""
        failed = [i for i, started in enumerate(self._started) if started is not None and _failed(started)]
        if failed and time.monotonic() - self._last_retry > RETRY_SECONDS:
            self._last_retry = time.monotonic()
            for index in failed:
                self._replace(index, self._executors[index])
        return not failed

    def pids(self) -> list[int]:
        """The job processes now running (none with a single in-process job)."""
        found: list[int] = []
        for executor in self._executors:
            processes = getattr(executor, "_processes", None) or {}
            found.extend(processes)
        return found

    async def run(
        self, work: Callable[[bytes, float, int], bytes], case: bytes, budget: float, max_bytes: int
    ) -> bytes:
        """``work(case, budget, max_bytes)`` on the least loaded job; ``JobLost`` if its process died meanwhile."""
        index = min(range(self.jobs), key=self._load.__getitem__)
        executor = self._executors[index]
        self._load[index] += 1
        try:
            try:
                future: Future[bytes] = executor.submit(work, case, budget, max_bytes)
            except (BrokenProcessPool, RuntimeError):
                self._replace(index, executor)
                executor = self._executors[index]
                future = executor.submit(work, case, budget, max_bytes)
            try:
                return await asyncio.wrap_future(future)
            except BrokenProcessPool:
                self._replace(index, executor)
                raise JobLost("a dispute job process died while judging this stream's cases") from None
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and task is not None and not task.cancelling():
                    # Not this stream's cancel: the case was dropped with a broken job's queue.
                    raise JobLost("a dispute job process died while judging this stream's cases") from None
                raise
        finally:
            self._load[index] -= 1

    def _replace(self, index: int, broken: Executor) -> None:
        if self._executors[index] is not broken:
            return  # another stream replaced it already
        log.error("a dispute job process died; starting another")
        # Its pending cases fail with BrokenProcessPool (each stream that lost one is told so);
        # cancelling them here would look like a cancel of the streams themselves.
        broken.shutdown(wait=False, cancel_futures=False)
        self._executors[index] = self._start()
        self._started[index] = self._executors[index].submit(_job_ready)
        self.replaced += 1

    def shutdown(self) -> None:
        """End the job processes without waiting for the cases they hold."""
        for executor in self._executors:
            executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["ComputePool", "DisputeJobs", "JobLost"]
