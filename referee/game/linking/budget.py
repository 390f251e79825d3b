"""The time a call may spend, carried to every solve and every step of work inside it.

A context variable, so each server thread (and each asyncio task) carries its own budget. Engines
that can stop part-way (CP-SAT) ask ``seconds_left``; the others finish far inside any budget.
Work between solves (every hand looked up, every claim judged) asks ``check_time_left``, so a
call's whole work counts against its budget, not its solves alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from referee.game.errors import SolverTimeout

# The monotonic time by which the current call must be answered (None: no budget).
_DEADLINE: ContextVar[float | None] = ContextVar("referee_solve_deadline", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Within this block every solve ends by ``seconds`` from now, or raises SolverTimeout."""
    token = _DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def seconds_left() -> float | None:
    """What is left of the current budget (negative once spent); None outside any budget."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def check_time_left() -> None:
    """Raise SolverTimeout when the current budget is spent; return at once outside any budget."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise SolverTimeout("the time budget ran out before the call was answered")
