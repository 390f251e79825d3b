"""The gRPC servicer: it hands each call to its handler (``referee.service.handlers``), logs one line per call;
and its registration on a server, with request decoding that turns bytes that are no message into
the client's error rather than the server's (``Undecodable``).

Time: a call may spend on solving the smaller of the client's remaining deadline and the
server's solve cap. That budget is handed to the domain (``referee.linking.time_budget``), so
every CP-SAT solve inside the call stops by it and the call ends with DEADLINE_EXCEEDED rather
than running on; a call whose deadline has already passed is not solved at all.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.errors import RefereeError
from referee.limits import MESSAGE_BYTES, check_reply
from referee.linking import time_budget
from referee.service import handlers, metrics
from referee.service.disputes import judge_case_bytes, malformed
from referee.service.status import Busy, DeadlineExceeded, status_for, with_metadata

log = logging.getLogger("referee.service")

DEFAULT_SOLVE_CAP_SECONDS = 5.0
READ_AHEAD_PER_JOB = 8
PID_KEY = "x-referee-pid"
REQUEST_ID_KEY = "x-request-id"
# gRFC A66's method label: the full method name without its leading slash.
_METHOD_PREFIX = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name + "/"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

Reply = TypeVar("Reply", bound=Message)


class Undecodable:
    """A request that is not a valid message of its type.

    gRPC's own answer to a request it cannot decode is INTERNAL, "Exception deserializing
    request!", with a traceback in the server's log. A bad request is the client's error, so
    the methods are registered with a decoder (``add_to_server``) that hands them this instead:
    a unary call answers INVALID_ARGUMENT, a stream a MALFORMED verdict for that case alone.
    """

    __slots__ = ("type_name", "size")

    def __init__(self, type_name: str, size: int) -> None:
        self.type_name = type_name
        self.size = size

    def error(self) -> RefereeError:
        """The error a call reports for this request (the field: none, the whole request)."""
        return RefereeError("", f"{self.size} bytes", f"the request does not decode as a {self.type_name} message")


def _decoder(message_type: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    def decode(data: bytes) -> Message | Undecodable:
        try:
            return message_type.FromString(data)
        except DecodeError:  # its text only repeats the type's name
            return Undecodable(message_type.DESCRIPTOR.full_name, len(data))

    return decode


def add_to_server(servicer: RefereeServicer, server: grpc.Server) -> None:
    """Register the referee's methods on ``server``, as the generated code does but with each
    request decoded by ``_decoder`` (see ``Undecodable``)."""
    service = pb.DESCRIPTOR.services_by_name["RefereeService"]
    kinds = {(False, False): grpc.unary_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}
    handlers = {
        method.name: kinds[(method.client_streaming, method.server_streaming)](
            getattr(servicer, method.name),
            request_deserializer=_decoder(getattr(pb, method.input_type.name)),
            response_serializer=getattr(pb, method.output_type.name).SerializeToString,
        )
        for method in service.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


class RefereeServicer(referee_pb2_grpc.RefereeServiceServicer):
    """The referee over gRPC: SolveHand, CheckClose, ScoreDeal and the CheckDisputes stream."""

    def __init__(
        self,
        solve_cap_seconds: float = DEFAULT_SOLVE_CAP_SECONDS,
        dispute_jobs: int = 1,
        max_streams: int | None = None,
        max_message_bytes: int = MESSAGE_BYTES,
    ) -> None:
        self.solve_cap_seconds = solve_cap_seconds
        self.max_message_bytes = max_message_bytes
        self.dispute_jobs = dispute_jobs
        # A CheckDisputes stream holds one of the server's threads for as long as it lasts; capped
        # below the thread count, streams can never take every thread from the unary calls.
        self.max_streams = max_streams
        self._streams = threading.BoundedSemaphore(max_streams) if max_streams else None
        self._pool: Executor | None = None
        self._pool_lock = threading.Lock()

    def SolveHand(self, request: pb.SolveHandRequest, context: grpc.ServicerContext) -> pb.SolveHandResponse:
        """The best linking of a hand."""
        return self._call("SolveHand", handlers.solve_hand, request, context)

    def CheckClose(self, request: pb.CheckCloseRequest, context: grpc.ServicerContext) -> pb.CheckCloseResponse:
        """The verdict on a close and on the claims about it."""
        return self._call("CheckClose", handlers.check_close, request, context)

    def ScoreDeal(self, request: pb.ScoreDealRequest, context: grpc.ServicerContext) -> pb.ScoreDealResponse:
        """The scored deal, the updated match and the verdicts on the claims."""
        return self._call("ScoreDeal", handlers.score_deal, request, context)

    def CheckDisputes(
        self, request_iterator: Iterator[pb.CheckDisputesRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.CheckDisputesResponse]:
        """One verdict per case, in the order of the cases, judged in parallel.

        At most ``READ_AHEAD_PER_JOB × dispute_jobs`` cases are read ahead of the verdict being
        sent; a client that reads slowly holds back the server's writes, so the server stops
        reading cases instead of buffering them.
        """
        start = time.monotonic()
        metrics.call_started(_METHOD_PREFIX + "CheckDisputes")
        request_id = _request_id(context)
        context.set_trailing_metadata(((PID_KEY, str(os.getpid())), (REQUEST_ID_KEY, request_id)))
        pending: deque[Future[bytes]] = deque()
        window = READ_AHEAD_PER_JOB * self.dispute_jobs
        judged = 0
        code = grpc.StatusCode.OK
        slot = self._streams
        try:
            if slot is not None and not slot.acquire(blocking=False):
                slot = None  # not ours to release
                raise Busy(f"this server process already runs {self.max_streams} CheckDisputes streams; retry later")
            pool = self._dispute_pool()
            for case in request_iterator:
                if isinstance(case, Undecodable):
                    pending.append(_ready(malformed("", "", f"{case.size} bytes", case.error().message)))
                else:
                    pending.append(
                        pool.submit(
                            judge_case_bytes, case.SerializeToString(), self.solve_cap_seconds, self.max_message_bytes
                        )
                    )
                if len(pending) >= window:
                    judged += 1
                    yield _counted(pending.popleft().result())
            while pending:
                judged += 1
                yield _counted(pending.popleft().result())
        except Exception as error:
            for future in pending:
                future.cancel()
            status = status_for(error, request_id)
            code = status.code
            context.abort_with_status(status)
        finally:
            if slot is not None:
                slot.release()
            _log_call(f"CheckDisputes[{judged}]", code, time.monotonic() - start, request_id, context)

    def _dispute_pool(self) -> Executor:
        with self._pool_lock:
            if self._pool is None:
                if self.dispute_jobs == 1:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disputes")
                else:
                    # forkserver: the workers never inherit this process's gRPC threads.
                    context = multiprocessing.get_context("forkserver")
                    self._pool = ProcessPoolExecutor(max_workers=self.dispute_jobs, mp_context=context)
            return self._pool

    def _call(
        self, method: str, handler: Callable[[Message], Reply], request: Message, context: grpc.ServicerContext
    ) -> Reply:
        start = time.monotonic()
        metrics.call_started(_METHOD_PREFIX + method)
        request_id = _request_id(context)
        metadata = ((PID_KEY, str(os.getpid())), (REQUEST_ID_KEY, request_id))
        budget = self.solve_cap_seconds
        try:
            if isinstance(request, Undecodable):
                raise request.error()
            remaining = context.time_remaining()
            if remaining is not None:
                if remaining <= 0:
                    raise DeadlineExceeded("the deadline passed before the call was solved")
                budget = min(budget, remaining)
            with time_budget(budget - (time.monotonic() - start)):
                reply = handler(request)
            check_reply(reply.ByteSize(), self.max_message_bytes)
            if time.monotonic() - start > budget:
                raise DeadlineExceeded(f"the call overran its time budget of {budget:.3f} s")
        except Exception as error:  # every failure leaves through the one mapping in status.py
            elapsed = time.monotonic() - start
            status = status_for(error, request_id, time_cap_hit=elapsed >= budget)
            _log_call(method, status.code, elapsed, request_id, context)
            context.abort_with_status(with_metadata(status, metadata))
            raise AssertionError("abort_with_status returned") from None  # pragma: no cover
        context.set_trailing_metadata(metadata)
        _log_call(method, grpc.StatusCode.OK, time.monotonic() - start, request_id, context)
        return reply


def _counted(verdict: bytes) -> pb.CheckDisputesResponse:
    """A judged case's verdict, counted by outcome."""
    reply = pb.CheckDisputesResponse.FromString(verdict)
    metrics.dispute_judged(pb.DisputeOutcome.Name(reply.outcome).removeprefix("DISPUTE_OUTCOME_"))
    return reply


def _ready(verdict: pb.CheckDisputesResponse) -> Future[bytes]:
    """A verdict known at once, in the stream's queue of verdicts being judged."""
    future: Future[bytes] = Future()
    future.set_result(verdict.SerializeToString())
    return future


def _request_id(context: grpc.ServicerContext) -> str:
    """The client's ``x-request-id`` when it is a sane token, else a fresh one."""
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and _CLIENT_REQUEST_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex[:16]


def _log_call(
    method: str, code: grpc.StatusCode, seconds: float, request_id: str, context: grpc.ServicerContext
) -> None:
    metrics.call_ended(_METHOD_PREFIX + method.partition("[")[0], code.name, seconds)
    duration_ms = round(seconds * 1000, 2)
    fields = {
        "method": method,
        "code": code.name,
        "duration_ms": duration_ms,
        "request_id": request_id,
        "peer": context.peer(),
    }
    log.info("%s %s %.2fms request_id=%s", method, code.name, duration_ms, request_id, extra={"rpc": fields})


__all__ = ["DEFAULT_SOLVE_CAP_SECONDS", "PID_KEY", "REQUEST_ID_KEY", "RefereeServicer", "Undecodable", "add_to_server"]
