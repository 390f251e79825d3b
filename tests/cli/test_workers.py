"""The local worker processes of ``batch`` and ``fairplay`` (``referee.cli.workers``), real forked
processes: results in the order of the tasks, a worker that dies replaced and its work taken up,
and a run whose workers keep dying stopped."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from servers import descendants

from referee.cli.workers import LOSSES, Workers, WorkersLost

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forked workers and /proc")


def _square(n: int) -> tuple[int, int]:
    time.sleep(0.001 * (n % 3))  # finished out of order, given back in order
    return n, n * n


def _dies_once(n: int, marks: str) -> int:
    """``n``, but the first time task 5 runs its worker is killed (SIGKILL: no goodbye)."""
    mark = Path(marks) / "died"
    if n == 5 and not mark.exists():
        mark.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return n


def _always_dies(n: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return n  # pragma: no cover


def test_results_come_in_the_order_of_the_tasks() -> None:
    with Workers(2, "test") as workers:
        got = list(workers.in_order(_square, ((n,) for n in range(40)), in_flight=5))
    assert got == [(n, n * n) for n in range(40)]
    assert workers.losses == 0


def test_a_worker_killed_in_a_task_is_replaced_and_every_task_answered_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Workers(2, "test") as workers:
        got = list(workers.in_order(_dies_once, ((n, str(tmp_path)) for n in range(20)), in_flight=4))
    assert got == list(range(20))
    assert workers.losses == 1
    assert "remigio-referee test: a worker process ended abruptly" in capsys.readouterr().err


def test_workers_killed_between_tasks_are_replaced_at_the_next_submit() -> None:
    # One task in flight: after each of the first results no task is pending, and the dead
    # workers are found by the next submit (or the pool's own watch), not by a result.
    got = []
    others = set(descendants(os.getpid()))  # this process's other children are not the test's to kill
    with Workers(2, "test") as workers:
        for n, _ in workers.in_order(_square, ((n,) for n in range(6)), in_flight=1):
            got.append(n)
            if n == 1:
                for pid in set(descendants(os.getpid())) - others:
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)  # they are gone before the next task is submitted
    assert got == list(range(6))
    assert workers.losses == 1


def test_workers_that_keep_dying_stop_the_run() -> None:
    with Workers(2, "test") as workers, pytest.raises(WorkersLost, match=f"{LOSSES} times"):
        list(workers.in_order(_always_dies, ((n,) for n in range(4)), in_flight=2))
    assert workers.losses == LOSSES


def _big(n: int) -> bytes:
    """A result of 64 MiB, whose write into the result pipe takes a while (the reader drains
    64 KiB at a time): a worker can be killed in the middle of it."""
    return bytes([n]) + bytes(64 << 20)


def _kill_while_writing(others: set[int], done: threading.Event) -> None:
    """Kill the first worker seen blocked writing into a pipe (its result), once."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not done.is_set():
        for pid in set(descendants(os.getpid())) - others:
            try:
                with open(f"/proc/{pid}/wchan") as wchan:
                    if "pipe_write" in wchan.read():
                        os.kill(pid, signal.SIGKILL)
                        return
            except (OSError, ProcessLookupError):
                continue
        time.sleep(0.0005)


@pytest.mark.timeout(60)
def test_a_worker_killed_while_it_writes_its_result_does_not_hang_the_run() -> None:
    # The executor's reader of results waited for ever for the rest of the half message: the
    # worker's death was never noticed. The watch on the workers unsticks it.
    others = set(descendants(os.getpid()))
    done = threading.Event()
    killer = threading.Thread(target=_kill_while_writing, args=(others, done), daemon=True)
    with Workers(1, "test") as workers:
        killer.start()
        got = [(result[0], len(result)) for result in workers.in_order(_big, ((n,) for n in range(6)), in_flight=1)]
        done.set()
    assert got == [(n, (64 << 20) + 1) for n in range(6)]
    assert workers.losses == 1


def test_the_executor_still_has_what_the_watch_reads() -> None:
    # The watch on the workers reads two attributes of the standard library's executor (no public
    # way to see its processes or reach its result pipe): a Python that renames them fails here.
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    with Workers(1, "test") as workers:
        assert list(workers.in_order(_square, [(3,)], in_flight=1)) == [(3, 9)]
        pool = workers._pool
        assert all(isinstance(process, BaseProcess) for process in pool._processes.values())
        assert pool._processes
        assert isinstance(pool._result_queue._writer, Connection)
