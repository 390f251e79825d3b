"""What every benchmark prints about the machine it ran on, and how it ends."""

from __future__ import annotations

import os
from collections.abc import Sequence


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, or ``n/a`` where the system has none."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def finish(problems: Sequence[str]) -> int:
    """Print the load at the end and each problem found; the exit status (1 if any)."""
    print(f"load average at the end: {load_average()}")
    for problem in problems:
        print(f"not as designed: {problem}")
    return 1 if problems else 0


__all__ = ["finish", "load_average"]
