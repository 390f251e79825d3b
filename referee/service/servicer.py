"""The gRPC servicer: it converts, delegates to the handlers of ``convert``, and logs one line per call.

Time: a call may spend on solving the smaller of the client's remaining deadline and the
server's solve cap. The domain's engines take no per-call time budget, so the handler runs in
the call's thread and the budget is checked before and after it: a call whose deadline has
already passed is not solved at all, and one that overran its budget ends with
DEADLINE_EXCEEDED instead of a late answer (the answer stays in the linking cache, so a retry
is quick). The engine's own wall-clock cap bounds each solve in between.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from typing import Callable, TypeVar

import grpc
from google.protobuf.message import Message

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.service import convert
from referee.service.status import DeadlineExceeded, status_for, with_metadata

log = logging.getLogger("referee.service")

DEFAULT_SOLVE_CAP_SECONDS = 5.0
PID_KEY = "x-referee-pid"
REQUEST_ID_KEY = "x-request-id"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

Reply = TypeVar("Reply", bound=Message)


class RefereeServicer(referee_pb2_grpc.RefereeServiceServicer):
    """The referee over gRPC: SolveHand, CheckClose and ScoreDeal."""

    def __init__(self, solve_cap_seconds: float = DEFAULT_SOLVE_CAP_SECONDS) -> None:
        self.solve_cap_seconds = solve_cap_seconds

    def SolveHand(self, request: pb.SolveHandRequest, context: grpc.ServicerContext) -> pb.SolveHandResponse:
        """The best linking of a hand."""
        return self._call("SolveHand", convert.solve_hand, request, context)

    def CheckClose(self, request: pb.CheckCloseRequest, context: grpc.ServicerContext) -> pb.CheckCloseResponse:
        """The verdict on a close and on the claims about it."""
        return self._call("CheckClose", convert.check_close, request, context)

    def ScoreDeal(self, request: pb.ScoreDealRequest, context: grpc.ServicerContext) -> pb.ScoreDealResponse:
        """The scored deal, the updated match and the verdicts on the claims."""
        return self._call("ScoreDeal", convert.score_deal, request, context)

    def _call(
        self, method: str, handler: Callable[[Message], Reply], request: Message, context: grpc.ServicerContext
    ) -> Reply:
        start = time.monotonic()
        request_id = _request_id(context)
        metadata = ((PID_KEY, str(os.getpid())), (REQUEST_ID_KEY, request_id))
        budget = self.solve_cap_seconds
        try:
            remaining = context.time_remaining()
            if remaining is not None:
                if remaining <= 0:
                    raise DeadlineExceeded("the deadline passed before the call was solved")
                budget = min(budget, remaining)
            reply = handler(request)
            if time.monotonic() - start > budget:
                raise DeadlineExceeded(f"the call overran its time budget of {budget:.3f} s")
        except Exception as error:  # every failure leaves through the one mapping in status.py
            elapsed = time.monotonic() - start
            status = status_for(error, request_id, time_cap_hit=elapsed >= budget)
            _log_call(method, status.code, elapsed, request_id, context)
            context.abort_with_status(with_metadata(status, metadata))
            raise AssertionError("abort_with_status returned")  # pragma: no cover
        context.set_trailing_metadata(metadata)
        _log_call(method, grpc.StatusCode.OK, time.monotonic() - start, request_id, context)
        return reply


def _request_id(context: grpc.ServicerContext) -> str:
    """The client's ``x-request-id`` when it is a sane token, else a fresh one."""
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and _CLIENT_REQUEST_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex[:16]


def _log_call(method: str, code: grpc.StatusCode, seconds: float, request_id: str, context: grpc.ServicerContext) -> None:
    duration_ms = round(seconds * 1000, 2)
    fields = {"method": method, "code": code.name, "duration_ms": duration_ms, "request_id": request_id, "peer": context.peer()}
    log.info("%s %s %.2fms request_id=%s", method, code.name, duration_ms, request_id, extra={"rpc": fields})


__all__ = ["DEFAULT_SOLVE_CAP_SECONDS", "PID_KEY", "REQUEST_ID_KEY", "RefereeServicer"]
