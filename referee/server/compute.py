"""Where a call's CPU work runs: a bounded pool of compute slots, and the dispute job processes.

The gRPC server's event loop only receives, admits and sends; the domain work of a fully received
request runs here, off the loop, so the loop stays free for health checks and for the calls still
arriving. Admission is decided at once: a full pool (every slot busy and the queue full) refuses
the call with ``Busy`` (RESOURCE_EXHAUSTED) instead of letting it wait without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ParamSpec, TypeVar

from referee.server import job
from referee.server.status import Busy

log = logging.getLogger("referee.service")

_P = ParamSpec("_P")
_T = TypeVar("_T")


# How long a thread holding the interpreter keeps it while another waits for it, while domain work
# runs on a thread of this process (CPython's default, 5 ms, the rest of the time).
BUSY_SWITCH_SECONDS = 0.001


class _Interpreter:
    """The interpreter lock's switch interval, shortened while domain work runs on a thread.

    The event loop and the compute threads share one interpreter lock. A solve in pure Python
    holds it until another thread has waited the switch interval, and the loop waits for it at
    each step of a call (its headers, its message, its reply): with the compute slots busy, a
    call the loop answers at once (a remembered reply, a health check, a refusal) took 30 to
    150 ms at 5 ms, one interval per step and more when a compute thread won the lock back
    first; at 1 ms its p99 under a flood of heavy calls was 27 to 42 ms. With no domain work on
    a thread the short interval only costs: it made the loop yield more often to gRPC's own
    threads, about a tenth fewer cached calls a second (docs/benchmarks.md, "The floor").
    """

    idle_seconds = sys.getswitchinterval()
    working = 0  # threads of this process running domain work; counted on the event loop

    @classmethod
    def work_began(cls) -> None:
        cls.working += 1
        if cls.working == 1:
            sys.setswitchinterval(BUSY_SWITCH_SECONDS)

    @classmethod
    def work_ended(cls) -> None:
        cls.working -= 1
        if cls.working == 0:
            sys.setswitchinterval(cls.idle_seconds)


class ComputePool:
    """``slots`` threads for the domain work of unary calls, shared fairly between clients.

    Python runs one thread at a time, so more slots do not add speed; two keep one long solve
    from holding up every short call behind it. Admission is decided at once, before the call
    costs anything: the pool admits at most ``slots + queue`` calls (running or waiting), and one
    client at most ``per_client`` of them (or its own cap), so no client can fill the pool.
    Admitted calls that wait get a slot in turn by client (round robin), not in the order they
    came: a client with one call waiting goes ahead of another client's hundredth. And one client
    runs on at most ``slots - 1`` slots at once (when there are two or more), so another client's
    call finds a slot free at once rather than waiting for a long solve to end: the interpreter
    runs one thread at a time, so a client loses no speed by it.

    Everything but the work itself runs on the event loop, so the counts need no lock.
    """

    def __init__(self, slots: int, queue: int, per_client: int | None = None) -> None:
        self.slots = slots
        self.limit = slots + queue
        self.per_client = per_client or self.limit
        self.admitted = 0
        self.running = 0
        self.running_per_client = max(1, slots - 1)
        self._admitted_by: Counter[str] = Counter()
        self._running_by: Counter[str] = Counter()
        # Waiting calls by client, in the order the clients get their next turn.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="compute")

    async def run(
        self, client: str, cap: int | None, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``work(*args)`` on a compute slot, in ``client``'s turn; ``Busy`` at once when the pool is
        full or the client already has ``cap`` (by default ``per_client``) calls admitted."""
        self.admits(client, cap)
        self.admitted += 1
        self._admitted_by[client] += 1
        try:
            await self._turn(client)
            try:
                return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: work(*args, **kwargs))
            finally:
                self._release(client)
        finally:
            self.admitted -= 1
            self._admitted_by[client] -= 1
            if not self._admitted_by[client]:
                del self._admitted_by[client]

    def admits(self, client: str, cap: int | None) -> None:
        """``Busy`` when a call of ``client`` would not be admitted now (``run`` checks it again)."""
        if self.admitted >= self.limit:
            raise Busy(f"this server process already has {self.admitted} calls running or waiting; retry later")
        most = min(cap or self.per_client, self.limit)
        if self._admitted_by[client] >= most:
            raise Busy(f"this client already has {most} calls running or waiting on this server process; retry later")

    async def _turn(self, client: str) -> None:
        """Wait until a slot is free and it is ``client``'s turn; the slot is then taken."""
        if self._may_run(client) and client not in self._waiting:
            self._take(client)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(client, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # the slot was given just as the call went away
                self._release(client)
            else:
                self._drop(client, turn)
            raise

    def _may_run(self, client: str) -> bool:
        return self.running < self.slots and self._running_by[client] < self.running_per_client

    def _take(self, client: str) -> None:
        self.running += 1
        self._running_by[client] += 1
        _Interpreter.work_began()

    def _release(self, client: str) -> None:
        _Interpreter.work_ended()
        self.running -= 1
        self._running_by[client] -= 1
        if not self._running_by[client]:
            del self._running_by[client]
        self._pass_on()

    def _drop(self, client: str, turn: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(client)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(turn)
            if not waiting:
                del self._waiting[client]

    def _pass_on(self) -> None:
        """Give free slots to the waiting calls, one client after another."""
        while self.running < self.slots:
            client = next((name for name in self._waiting if self._may_run(name)), None)
            if client is None:
                return
            waiting = self._waiting.pop(client)
            turn = waiting.popleft()
            if waiting:
                self._waiting[client] = waiting  # its next call waits for the other clients' turns
            if turn.done():
                continue
            self._take(client)
            turn.set_result(None)

    def shutdown(self) -> None:
        """Stop the threads once the work they hold is done."""
        self._executor.shutdown(wait=False, cancel_futures=True)


RETRY_SECONDS = 5.0


def _failed(future: Future[int]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


class JobLost(Exception):
    """A dispute job process died while it held one of this stream's cases."""


# A job's cases go to its process in batches. One round trip per case cost the server about
# 0.6 ms of CPU between the two processes (pickling, pipes, the executor's threads and the loop's
# wake-ups; measured), more than the search engine takes to judge a case. So a job has one batch
# out at a time, and the cases that come meanwhile go together in its next: as many as it judges
# in about ``BATCH_SECONDS`` (from the time its cases have taken), at most ``BATCH_CASES`` and
# (beyond the first) ``BATCH_BYTES`` of them. Cheap cases go 16 at a time; a case that takes
# longer than that goes alone, so its verdict is not held back behind the others of its batch. A
# killed job loses a bounded number of cases, and a batch's verdicts come back in bounded memory.
BATCH_SECONDS = 0.01
BATCH_CASES = 16
BATCH_BYTES = 256 * 1024


class _Case:
    """A case waiting for its job, or judged in a batch: its call and its verdict's future."""

    __slots__ = ("call", "size", "verdict")

    def __init__(self, call: job.Judging) -> None:
        self.call = call
        self.size = len(call[1])
        self.verdict: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()


class DisputeJobs:
    """The processes that judge CheckDisputes cases, each replaced when it dies.

    Each job is an executor of one process, so a process that dies (killed, out of memory) fails
    only the cases it held; the job is replaced at once, the cases still waiting for it go to its
    replacement, and the other streams go on. With one job the cases run on a thread of this
    process instead (there is no other core to use). Everything but the judging runs on the event
    loop, so the counts need no lock.

    The processes are spawned, not forked: a fork of a process that runs gRPC is unsafe, and the
    fork server would need a writable temporary directory for its socket.
    """

    def __init__(self, jobs: int, committed_only: bool = False) -> None:
        self.jobs = jobs
        self.committed_only = committed_only  # handed to each job process (api.handlers)
        self._executors: list[Executor] = [self._start() for _ in range(jobs)]
        self._started: list[Future[int] | None] = [None] * jobs
        self._load = [0] * jobs  # cases each job holds: waiting or in a batch
        self._waiting: list[deque[_Case]] = [deque() for _ in range(jobs)]
        self._sending = [False] * jobs  # whether a batch is out to each job's current executor
        self._case_seconds: list[float | None] = [None] * jobs  # each job's time per case, lately
        self._next = 0
        self._last_retry = 0.0
        self.replaced = 0
        self.batches = 0  # sent, to any job

    def _start(self) -> Executor:
        if self.jobs == 1:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="disputes")
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=job.start,
            initargs=(os.getpid(), self.committed_only),
        )

    def warm_up(self) -> None:
        """Start every job process now rather than on the first stream's first case."""
        for index, executor in enumerate(self._executors):
            with job.sigint_ignored_while_spawning():
                self._started[index] = executor.submit(job.ready)

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
        """``work(case, budget, max_bytes)`` on the least loaded job; ``JobLost`` if its process died
        while it held the case."""
        # The least loaded job, ties taken in turn: a stream that sends one case at a time uses
        # every job, so a job that died is found by its next case or the one after, not never.
        self._next = (self._next + 1) % self.jobs
        order = [(self._next + step) % self.jobs for step in range(self.jobs)]
        index = min(order, key=self._load.__getitem__)
        waiting = _Case((work, case, budget, max_bytes))
        self._load[index] += 1
        in_process = self.jobs == 1  # the case runs on a thread of this process
        if in_process:
            _Interpreter.work_began()
        try:
            self._waiting[index].append(waiting)
            self._send(index)
            try:
                return await waiting.verdict
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):  # not yet sent: it is not judged at all
                    self._waiting[index].remove(waiting)
                raise
        finally:
            self._load[index] -= 1
            if in_process:
                _Interpreter.work_ended()

    def _send(self, index: int) -> None:
        """Send job ``index`` its next batch of waiting cases, unless it has one out already."""
        waiting = self._waiting[index]
        while waiting and not self._sending[index]:
            most = self._batch_cases(index)
            batch = [waiting.popleft()]
            size = batch[0].size
            while waiting and len(batch) < most and size + waiting[0].size <= BATCH_BYTES:
                size += waiting[0].size
                batch.append(waiting.popleft())
            try:
                executor, future = self._submit(index, [case.call for case in batch])
            except Exception as error:  # no process takes it: its cases fail, not wait for ever
                for case in batch:
                    if not case.verdict.done():
                        case.verdict.set_exception(error)
                continue
            self._sending[index] = True
            self.batches += 1
            asyncio.wrap_future(future).add_done_callback(functools.partial(self._judged, index, executor, batch))

    def _submit(self, index: int, calls: list[job.Judging]) -> tuple[Executor, Future[tuple[list[object], float]]]:
        """A batch submitted to job ``index``, replaced first if it is broken or stopped."""
        executor = self._executors[index]
        # A job's one process was spawned by its first submit (warm_up, _replace): none spawns here.
        try:
            return executor, executor.submit(job.judge_each, calls)
        except (BrokenProcessPool, RuntimeError):
            self._replace(index, executor)
            executor = self._executors[index]
            return executor, executor.submit(job.judge_each, calls)

    def _batch_cases(self, index: int) -> int:
        """How many cases job ``index`` judges in about ``BATCH_SECONDS``: one until it has judged any."""
        seconds = self._case_seconds[index]
        if seconds is None:
            return 1
        return BATCH_CASES if seconds <= 0 else max(1, min(BATCH_CASES, int(BATCH_SECONDS / seconds)))

    def _judged(
        self, index: int, executor: Executor, batch: list[_Case], done: asyncio.Future[tuple[list[object], float]]
    ) -> None:
        """A batch's verdicts to its cases (or ``JobLost`` to each, its job having died); the job's
        next batch sent."""
        if self._executors[index] is executor:
            self._sending[index] = False
        if done.cancelled() or isinstance(done.exception(), BrokenProcessPool):
            # Cancelled: dropped with a stopped job's queue; broken: its process died.
            if not done.cancelled():
                self._replace(index, executor)
            lost = JobLost("a dispute job process died while judging this stream's cases")
            outcomes: list[object] = [lost] * len(batch)
        elif (error := done.exception()) is not None:
            outcomes = [error] * len(batch)
        else:
            outcomes, seconds = done.result()
            each = seconds / len(batch)
            before = self._case_seconds[index]
            self._case_seconds[index] = each if before is None else (before + each) / 2
        for case, outcome in zip(batch, outcomes, strict=True):
            if case.verdict.done():
                continue  # its stream went away meanwhile
            if isinstance(outcome, BaseException):
                case.verdict.set_exception(outcome)
            else:
                case.verdict.set_result(outcome)  # type: ignore[arg-type]
        self._send(index)

    def _replace(self, index: int, broken: Executor) -> None:
        if self._executors[index] is not broken:
            return  # another stream replaced it already
        log.error("a dispute job process died; starting another")
        # Its batches fail with BrokenProcessPool (each stream that lost a case is told so);
        # cancelling them here would look like a cancel of the streams themselves.
        broken.shutdown(wait=False, cancel_futures=False)
        self._executors[index] = self._start()
        with job.sigint_ignored_while_spawning():
            self._started[index] = self._executors[index].submit(job.ready)
        self._sending[index] = False
        self.replaced += 1

    def shutdown(self) -> None:
        """End the job processes without waiting for the cases they hold.

        The executor's own stop is a message on the job's queue, and a job process did not always
        get it (a server process then waited for its job at exit, for ever, after saying it had
        stopped); a SIGTERM reaches it whatever it is doing.
        """
        for executor in self._executors:
            processes = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                with contextlib.suppress(OSError, ValueError):
                    process.terminate()


__all__ = ["BUSY_SWITCH_SECONDS", "ComputePool", "DisputeJobs", "JobLost"]
