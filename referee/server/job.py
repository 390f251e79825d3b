"""What a dispute job process runs besides the cases: its watch on the server process that
started it, and its readiness.

A job process is spawned and imports only what its work names: this module, the adapter that
judges a case and, once ready, the engines and the metrics. This module imports neither gRPC nor
asyncio, so a job starts faster and stays smaller for its whole life (a test checks the libraries
a job process has loaded).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

# One case to judge: ``work(case, budget_seconds, max_bytes)``, in these four.
Judging = tuple[Callable[[bytes, float, int], bytes], bytes, float, int]

# How often a job process checks that the server process that started it is still there.
PARENT_CHECK_SECONDS = 1.0


@contextlib.contextmanager
def sigint_ignored_while_spawning() -> Iterator[None]:
    """SIGINT ignored, on the main thread, while a job process may be spawned (on submit).

    A spawned process inherits an ignored signal, so a Ctrl-C that reaches the process group while
    a job is still starting (importing its parent's main module, before its own initializer) finds
    it ignoring SIGINT too; the server process stops its jobs itself. Elsewhere than the main
    thread a handler cannot be set: submits there go as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def start(parent: int, committed_only: bool) -> None:
    """The job process's initializer: what its server holds to (``committed_only``, see
    ``referee.api.handlers.require_committed_shuffles``), and the watch on ``parent``.

    SIGINT is ignored before anything is imported: a Ctrl-C that reaches a job still importing
    (a busy machine) printed a KeyboardInterrupt traceback from the middle of the import."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from referee.api import handlers

    handlers.require_committed_shuffles(committed_only)
    watch_parent(parent)


def watch_parent(parent: int) -> None:
    """End this job process when ``parent`` (the server process) is gone.

    A job process holds both ends of its own work queue, so it never sees the queue close: a
    server process that died without sending it the stop (killed, out of memory) would leave it
    waiting for work for ever, with the memory of a loaded process.

    Ctrl-C in a terminal signals the whole process group: the server drains and stops its jobs
    itself, so a job ignores SIGINT (it printed a KeyboardInterrupt traceback after "stopped").
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def judge_each(calls: list[Judging]) -> tuple[list[object], float]:
    """A batch of cases, each ``work(case, budget, max_bytes)``: their verdicts in order (an error
    raised by one case in its place: it fails that case alone), and the seconds they took."""
    started = time.monotonic()
    verdicts: list[object] = []
    for work, case, budget, max_bytes in calls:
        try:
            verdicts.append(work(case, budget, max_bytes))
        except Exception as error:
            verdicts.append(error)
    return verdicts, time.monotonic() - started


def ready() -> int:
    """Load what judging needs (the engines, this process's metrics) before the first case, whose
    time budget must not pay for imports; the job process's id."""
    from referee.game.linking import load_engines
    from referee.server import metrics

    load_engines()
    metrics.ready()
    return os.getpid()


__all__ = [
    "PARENT_CHECK_SECONDS",
    "Judging",
    "judge_each",
    "ready",
    "sigint_ignored_while_spawning",
    "start",
    "watch_parent",
]
