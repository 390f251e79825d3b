"""The one place where an exception becomes a gRPC status.

- ``RefereeError`` (a malformed request): INVALID_ARGUMENT, with a ``google.rpc.BadRequest`` whose
  field violation names the field path and quotes the value.
- ``SolverTimeout``: DEADLINE_EXCEEDED.
- ``SolverError`` (any other): INTERNAL, unless the call's time had run out (DEADLINE_EXCEEDED).
- ``DeadlineExceeded`` (raised by the servicer): DEADLINE_EXCEEDED.
- ``Busy`` (raised by the servicer): RESOURCE_EXHAUSTED.
- ``QuotaExceeded`` (raised by the access layer): RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo``
  and gRPC's retry pushback saying when the key's bucket holds a call again.
- ``Unavailable`` (raised by the servicer, e.g. a dispute job process died): UNAVAILABLE, which
  clients may retry.
- Anything else: INTERNAL with a generic message carrying the request id; the traceback goes to
  the log under that id and never to the client.
"""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from referee.game.errors import RefereeError, SolverError, SolverTimeout

log = logging.getLogger("referee.service")

Metadata = Sequence[tuple[str, "str | bytes"]]

# gRPC's client retry policy waits this long (milliseconds) before its next attempt (gRFC A6).
RETRY_PUSHBACK_KEY = "grpc-retry-pushback-ms"


class DeadlineExceeded(Exception):
    """The call ran out of time (the client's deadline or the server's solve cap)."""


class Busy(Exception):
    """The server process has no room for this call now; the client may retry later."""


class QuotaExceeded(Exception):
    """A key's calls went over its rate; ``retry_after`` seconds from now its bucket holds a call."""

    def __init__(self, key_name: str, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"the key {key_name!r} is over its rate; retry in {retry_after:.3f} s")
        self.key_name = key_name
        self.retry_after = retry_after


class KeyRevoked(Exception):
    """The call's API key was removed from the key file while the call went on."""


class Unavailable(Exception):
    """The server process lost what this call needed (a job process died); the client may retry."""


class _Status(grpc.Status):
    """A concrete grpc.Status (the interface is abstract)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Metadata) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = tuple(trailing_metadata)


def status_for(error: BaseException, request_id: str, *, time_cap_hit: bool = False) -> grpc.Status:
    """The status to end a call with for ``error``; ``time_cap_hit`` says the call's time ran out.

    It never raises: a fault in making a status is itself INTERNAL, logged under the request id.
    """
    try:
        return _status_for(error, request_id, time_cap_hit)
    except Exception:
        log.exception("no status for an error (request id %s)", request_id)
        return _plain(code_pb2.INTERNAL, f"internal error (request id {request_id})")


def _status_for(error: BaseException, request_id: str, time_cap_hit: bool) -> grpc.Status:
    if isinstance(error, RefereeError):
        return invalid_argument(error)
    if isinstance(error, DeadlineExceeded):
        return _plain(code_pb2.DEADLINE_EXCEEDED, str(error))
    if isinstance(error, Busy):
        return _plain(code_pb2.RESOURCE_EXHAUSTED, str(error))
    if isinstance(error, QuotaExceeded):
        return quota_status(error)
    if isinstance(error, Unavailable):
        return _plain(code_pb2.UNAVAILABLE, str(error))
    if isinstance(error, KeyRevoked):
        return _plain(code_pb2.UNAUTHENTICATED, str(error))
    if isinstance(error, SolverError):
        if time_cap_hit or isinstance(error, SolverTimeout):
            return _plain(code_pb2.DEADLINE_EXCEEDED, "the time budget ran out before the solver proved an answer")
        log.error("solver error (request id %s)", request_id, exc_info=error)
        return _plain(code_pb2.INTERNAL, f"internal error (request id {request_id})")
    log.error("unexpected error (request id %s)", request_id, exc_info=error)
    return _plain(code_pb2.INTERNAL, f"internal error (request id {request_id})")


def forget(error: BaseException) -> None:
    """Let go of what ``error`` and the errors chained to it hold: their tracebacks' frames.

    Once a call's status is made, its error is of no more use, but its traceback holds the frames
    it passed through, and they hold the request (its bytes, the decoded message): kept alive in
    reference cycles until a full garbage collection, which the server runs rarely, every refused
    request would stay in memory.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
            current.__traceback__ = None
        pending.extend((current.__cause__, current.__context__))


def invalid_argument(error: RefereeError) -> grpc.Status:
    """INVALID_ARGUMENT with a BadRequest field violation naming the field and quoting the value (a short prefix)."""
    violation = error_details_pb2.BadRequest.FieldViolation(
        field=error.field, description=f"{error.message} (value: {error.value!r})"
    )
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.BadRequest(field_violations=[violation]))
    return rpc_status.to_status(status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=str(error), details=[detail]))


# No client is told to wait longer than a day (a rate's bucket refills sooner; and a Duration
# holds at most 10,000 years).
_LONGEST_RETRY_SECONDS = 86_400.0


def quota_status(error: QuotaExceeded) -> grpc.Status:
    """RESOURCE_EXHAUSTED with a RetryInfo detail, and gRPC's own retry pushback in the trailers."""
    retry_after = min(error.retry_after, _LONGEST_RETRY_SECONDS)
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(max(1_000_000, math.ceil(retry_after * 1e9)))
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    status = rpc_status.to_status(
        status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(error), details=[detail])
    )
    pushback = ((RETRY_PUSHBACK_KEY, str(max(1, math.ceil(retry_after * 1000)))),)
    return with_metadata(status, pushback)


# grpc.StatusCode by number: ``rpc_status.to_status`` finds it by walking the enum, for every
# refusal of a client over its share (hundreds a second under a flood).
_CODES = {code.value[0]: code for code in grpc.StatusCode}
_DETAILS_KEY = "grpc-status-details-bin"  # rpc_status's trailer, under gRPC's own name for it


def _plain(code: int, message: str) -> grpc.Status:
    """What ``rpc_status.to_status`` makes of a Status without details, made directly."""
    details = status_pb2.Status(code=code, message=message).SerializeToString()
    return _Status(_CODES[code], message, ((_DETAILS_KEY, details),))


def with_metadata(status: grpc.Status, metadata: Metadata) -> grpc.Status:
    """The same status with more trailing metadata (abort_with_status replaces what was set before)."""
    return _Status(status.code, status.details, tuple(status.trailing_metadata or ()) + tuple(metadata))


__all__ = [
    "RETRY_PUSHBACK_KEY",
    "Busy",
    "KeyRevoked",
    "DeadlineExceeded",
    "QuotaExceeded",
    "quota_status",
    "Unavailable",
    "forget",
    "invalid_argument",
    "status_for",
    "with_metadata",
]
