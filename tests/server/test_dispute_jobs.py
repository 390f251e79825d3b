"""The dispute jobs on an event loop: cases go to a job in batches sized by how long its cases
take, each case gets its own verdict, a case cancelled while it waits is never judged, and the
cases a killed job had not yet been sent go to its replacement."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

import pytest

from referee.server.compute import BATCH_CASES, BATCH_SECONDS, DisputeJobs, JobLost

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX signals")


def echo(case: bytes, budget: float, max_bytes: int) -> bytes:
    """A verdict that names its case and the limits it was judged within."""
    return b"%s/%g/%d" % (case, budget, max_bytes)


def pause_then_echo(case: bytes, budget: float, max_bytes: int) -> bytes:
    """``echo``, after ``budget`` seconds of judging."""
    time.sleep(budget)
    return echo(case, budget, max_bytes)


def refuse_b(case: bytes, budget: float, max_bytes: int) -> bytes:
    """``echo``, except that a case starting with b raises."""
    if case.startswith(b"b"):
        raise ValueError(f"no case {case!r}")
    return echo(case, budget, max_bytes)


class Recorded:
    """A work function that records, on the job's thread, which cases it judged; a gate holds it."""

    def __init__(self) -> None:
        self.judged: list[bytes] = []
        self.gate = threading.Event()

    def __call__(self, case: bytes, budget: float, max_bytes: int) -> bytes:
        self.gate.wait(10)
        self.judged.append(case)
        return echo(case, budget, max_bytes)


def _on_a_loop(jobs: DisputeJobs, scenario: Callable[[DisputeJobs], Awaitable[None]]) -> None:
    """Run ``scenario(jobs)`` on an event loop, and stop the jobs after it."""

    async def run() -> None:
        try:
            await scenario(jobs)
        finally:
            jobs.shutdown()

    asyncio.run(run())


def test_cheap_cases_go_in_batches_and_each_gets_its_own_verdict() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        jobs.warm_up()
        cases = [b"c%03d" % n for n in range(200)]
        verdicts = await asyncio.gather(*(jobs.run(echo, case, 0.5, 100) for case in cases))
        assert verdicts == [case + b"/0.5/100" for case in cases]
        # The first case of each job goes alone; then its cases go up to BATCH_CASES at a time.
        assert jobs.batches < len(cases) / 4, jobs.batches
        assert jobs.batches >= len(cases) / BATCH_CASES

    _on_a_loop(DisputeJobs(2), scenario)


def test_cases_that_take_longer_than_a_batch_go_one_at_a_time() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        budget = BATCH_SECONDS * 2
        cases = [b"s%d" % n for n in range(8)]
        verdicts = await asyncio.gather(*(jobs.run(pause_then_echo, case, budget, 9) for case in cases))
        assert verdicts == [b"%s/%g/9" % (case, budget) for case in cases]
        assert jobs.batches == len(cases)

    _on_a_loop(DisputeJobs(1), scenario)


def test_an_error_in_one_case_fails_that_case_alone() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        cases = [b"a1", b"b2", b"a3", b"b4", b"a5"] * 10
        outcomes = await asyncio.gather(*(jobs.run(refuse_b, case, 1, 1) for case in cases), return_exceptions=True)
        for case, outcome in zip(cases, outcomes, strict=True):
            if case.startswith(b"b"):
                assert isinstance(outcome, ValueError) and case.decode() in str(outcome)
            else:
                assert outcome == case + b"/1/1"

    _on_a_loop(DisputeJobs(2), scenario)


def test_a_case_cancelled_while_it_waits_is_never_judged() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        work = Recorded()
        first = asyncio.ensure_future(jobs.run(work, b"first", 1, 1))
        await asyncio.sleep(0.05)  # sent alone (nothing judged yet), and held by the gate
        waiting = [asyncio.ensure_future(jobs.run(work, b"w%d" % n, 1, 1)) for n in range(3)]
        await asyncio.sleep(0.05)
        waiting[1].cancel()
        work.gate.set()
        assert await first == b"first/1/1"
        assert await waiting[0] == b"w0/1/1" and await waiting[2] == b"w2/1/1"
        with pytest.raises(asyncio.CancelledError):
            await waiting[1]
        assert work.judged == [b"first", b"w0", b"w2"]

    _on_a_loop(DisputeJobs(1), scenario)  # one job, on a thread: the work function records what it judged


def test_a_killed_job_fails_the_cases_it_held_and_its_replacement_judges_those_still_waiting() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        jobs.warm_up()
        assert await asyncio.gather(*(jobs.run(echo, b"warm%d" % n, 0, 0) for n in range(4)))
        # One slow case each, sent at once; the cases after them wait for their job.
        held = [asyncio.ensure_future(jobs.run(pause_then_echo, b"held%d" % n, 1.0, 0)) for n in range(2)]
        await asyncio.sleep(0.3)
        after = [asyncio.ensure_future(jobs.run(echo, b"after%d" % n, 0, 0)) for n in range(6)]
        await asyncio.sleep(0.05)
        victim = jobs.pids()[0]
        os.kill(victim, signal.SIGKILL)
        outcomes = await asyncio.wait_for(asyncio.gather(*held, return_exceptions=True), 10)
        assert sum(isinstance(outcome, JobLost) for outcome in outcomes) == 1, outcomes
        assert b"/1/0" in [outcome for outcome in outcomes if isinstance(outcome, bytes)][0]
        # Every waiting case is judged, those of the killed job by its replacement.
        assert await asyncio.wait_for(asyncio.gather(*after), 30) == [b"after%d/0/0" % n for n in range(6)]
        assert jobs.replaced == 1 and victim not in jobs.pids() and len(jobs.pids()) == 2

    _on_a_loop(DisputeJobs(2), scenario)


class NoReplacement(DisputeJobs):
    """Dispute jobs whose replacements are stopped before they take a case: once its first executor
    stops, a job can take no more."""

    def __init__(self, jobs: int) -> None:
        self.started = 0
        super().__init__(jobs)

    def _start(self) -> Executor:
        executor = super()._start()
        self.started += 1
        if self.started > self.jobs:
            executor.shutdown()
        return executor


def test_cases_waiting_for_a_job_that_can_take_no_more_fail_instead_of_waiting_for_ever() -> None:
    async def scenario(jobs: DisputeJobs) -> None:
        work = Recorded()
        first = asyncio.ensure_future(jobs.run(work, b"first", 1, 1))
        await asyncio.sleep(0.05)  # sent alone, and held by the gate
        waiting = [asyncio.ensure_future(jobs.run(work, b"w%d" % n, 1, 1)) for n in range(3)]
        await asyncio.sleep(0.05)
        jobs.shutdown()  # the job's executor stops; the batch it holds is judged still
        work.gate.set()
        assert await first == b"first/1/1"
        outcomes = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 10)
        assert all(isinstance(outcome, RuntimeError) for outcome in outcomes), outcomes
        assert work.judged == [b"first"]

    _on_a_loop(NoReplacement(1), scenario)
