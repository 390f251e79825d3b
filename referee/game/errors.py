"""Errors of the referee: each one names the field and the value at fault.

A domain error names its field relative to the object it checks (a rule set says ``decks``, a
deal ``players[2].cards[7]``); the adapter roots it once, with ``rooted_at``, at the request's
field the object came from (``rules.decks``, ``deal.players[2].cards[7]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# The most of a bad value an error quotes: a client that sends a megabyte of junk gets a short
# error (gRPC clients refuse trailers over their metadata limit, so a long quote would hide the
# error itself), and logs stay small.
QUOTED_CHARS = 32
# ... and of its UTF-8 bytes: gRPC percent-encodes every byte of a non-ASCII character in the
# status message, so 32 four-byte characters would take 384 bytes there alone.
QUOTED_BYTES = 64


def shorten(value: object) -> object:
    """``value`` itself when short; else its first ``QUOTED_CHARS`` characters (bytes) and an ellipsis."""
    if isinstance(value, str):
        cut = value[:QUOTED_CHARS]
        while len(cut.encode("utf-8", "surrogatepass")) > QUOTED_BYTES:
            cut = cut[:-1]
        return value if cut == value else cut + "…"
    if isinstance(value, bytes | bytearray):
        return value if len(value) <= QUOTED_CHARS else bytes(value[:QUOTED_CHARS]) + b"..."
    text = repr(value)
    return value if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "…"


class RefereeError(ValueError):
    """A request the referee cannot judge; it names the field and the value at fault (a short prefix of it)."""

    def __init__(self, field: str, value: object, message: str) -> None:
        self.field = field
        # No value (a field left out) is quoted as empty, never as the word None.
        self.value = "" if value is None else shorten(value)
        self.message = message
        super().__init__(f"{field}: {message} ({self.value!r})" if field else f"{message} ({self.value!r})")

    def at(self, root: str) -> RefereeError:
        """The same error with its field path placed under ``root``."""
        if not root:
            return self
        if not self.field:
            field = root
        elif self.field.startswith("["):
            field = root + self.field
        else:
            field = f"{root}.{self.field}"
        return type(self)(field, self.value, self.message)


@contextmanager
def rooted_at(root: str) -> Iterator[None]:
    """Re-raise a ``RefereeError`` from inside with its field path placed under ``root``."""
    try:
        yield
    except RefereeError as error:
        raise error.at(root) from None


class InvalidCardError(RefereeError):
    """A card code that is not in the notation of the rule book."""


class InvalidOptionError(RefereeError):
    """A rule option out of its range."""


class InvalidDealError(RefereeError):
    """An end-of-deal state that breaks the deal's counts or the deck."""


class InvalidShuffleError(RefereeError):
    """A shuffle of a deal record that cannot be replayed: an unknown algorithm, a seed that is not 32 bytes in hex."""


class InvalidRecordError(RefereeError):
    """A deal record that is not one a deal could leave: seats, dealer, deck or a turn out of shape."""


class InvalidNotationError(RefereeError):
    """Text that is not a deal record in the notation of ``docs/records.md``; the field names the line."""


class LimitError(RefereeError):
    """A request field over its size limit (``referee.game.limits``): too many elements or characters."""


class SolverError(RuntimeError):
    """The solver gave no proven answer: a fault of the referee, not of the request."""


class SolverTimeout(SolverError):
    """The solver's time (its own cap or the call's budget) ran out before it proved an answer."""


class EngineDisagreementError(RuntimeError):
    """Two engines in audit mode gave different answers for one hand."""
