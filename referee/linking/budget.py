"""The time a call may spend solving, carried to every solve inside it.

A context variable, so each server thread (and each asyncio task) carries its own budget. Engines
that can stop part-way (CP-SAT) ask ``seconds_left``; the others finish far inside any budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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
