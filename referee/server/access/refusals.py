"""Refused calls: the one place that logs and counts them, within a budget of log lines."""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Sequence

from referee.game.errors import shorten
from referee.server import metrics

log = logging.getLogger("referee.access")

# Refusals -----------------------------------------------------------------------------------


class Refusal(enum.Enum):
    """Why the access layer turned a call away."""

    UNAUTHENTICATED = "unauthenticated"
    QUOTA = "quota"


# At most this many refusal lines a second (and a burst of REFUSAL_LINES_BURST) reach the log; the
# rest are counted, and the next line written says how many were left out. A client refused
# thousands of times a second must not be able to fill the disk or drown the other lines.
REFUSAL_LINES_PER_SECOND = 10.0
REFUSAL_LINES_BURST = 50


class _LineBudget:
    """A token bucket for log lines, and the count of the lines it held back."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.last = float(burst), time.monotonic()
        self.held_back = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        """None when the line must be left out; else how many lines were left out before it."""
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens < 1:
                self.held_back += 1
                return None
            self.tokens -= 1
            held_back, self.held_back = self.held_back, 0
            return held_back


_refusal_lines = _LineBudget(REFUSAL_LINES_PER_SECOND, REFUSAL_LINES_BURST)


def refusal_line() -> int | None:
    """Take a line of the refusals' log budget (every refusal's line, the call log's included):
    None when the line must be left out, else how many were left out before it."""
    return _refusal_lines.take()


# Method names the log may print as they are; any other path is quoted, cut short and escaped.
_KNOWN_METHODS: set[str] = set()


def know_methods(paths: Sequence[str]) -> None:
    """Add the full method paths (``/package.Service/Method``) this server serves."""
    _KNOWN_METHODS.update(paths)


def method_label(path: str) -> str:
    """``path`` for a log line: itself when it is a method this server serves, else a short quote
    (a client chooses the path: written raw, a newline in it would forge a log line)."""
    if path in _KNOWN_METHODS:
        return path
    return "unknown method " + ascii(shorten(path))


def refused(reason: Refusal, key_name: str, method: str) -> None:
    """Record one refused call (``key_name`` is "" when no known key came with it).

    Every authentication failure and quota refusal passes here, once per refused call or
    CheckDisputes case: count them here. Only names are logged, never what a client sent, and
    no more than ``REFUSAL_LINES_PER_SECOND`` lines a second.
    """
    held_back = refusal_line()
    if held_back is not None:
        more = f" ({held_back} refusal lines left out before this one)" if held_back else ""
        log.info("refused %s: %s key=%s%s", method_label(method), reason.value, key_name or "-", more)
    if reason is Refusal.QUOTA:
        metrics.quota_refused(key_name)
    else:
        metrics.auth_failed(key_name or "-")
