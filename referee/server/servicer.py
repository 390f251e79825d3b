"""The gRPC servicer (``grpc.aio``): it admits calls, hands their work to the compute pool, and ends
every call in one place.

How a call runs:

- The event loop receives the request. A unary method is registered as a client stream of one
  message (``add_to_server``), so the servicer awaits the request itself, under the receive
  timeout: a client that sends HEADERS and never its DATA holds a coroutine, nothing more, and
  is ended after ``receive_timeout`` seconds.
- Only then does the call ask for a compute slot (``compute.ComputePool``); the request is decoded,
  handled and its reply encoded there, off the loop, within the call's time budget: the server's
  solve cap from when the slot takes the call, or less if the client's deadline comes first
  (``referee.game.linking.time_budget``).
- Except for a request answered before (the same bytes, ``Replies``): its reply is remembered,
  and sent from the loop. Answers depend on the request's bytes alone (a solve that ran out of
  time is an error, never remembered), so the remembered reply is the one a slot would compute,
  at the cost of a dictionary lookup; it is still a call: admitted by the client's share,
  counted against its quota, logged and metered.
- Every call, unary or stream, ends in ``_Call.end`` (a done callback of the call): the status the
  client actually got (CANCELLED when it cancelled) and the time taken. The log line is written
  there, and so is anything else that watches calls: append a function to ``call_observers``
  (per-call metrics plug in here).

Access control (TLS, API keys, quotas) plugs in as ``grpc.aio.ServerInterceptor`` objects given to
``server.create_server``; an interceptor wrapping these handlers sees unary methods as
``stream_unary`` handlers that take and return bytes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import grpc
import grpc.aio
from google.protobuf.message import DecodeError, Message

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import drawings, handlers
from referee.api.disputes import judge_case_bytes
from referee.api.wire import DECODED_FIRST_BYTES, check_counts, counts_within
from referee.game.errors import RefereeError, SolverError
from referee.game.limits import MESSAGE_BYTES, check_reply
from referee.game.linking import time_budget
from referee.server import access, logs, metrics, tracing
from referee.server.compute import ComputePool, DisputeJobs, JobLost
from referee.server.config import ServiceLimits
from referee.server.status import (
    Busy,
    DeadlineExceeded,
    QuotaExceeded,
    Unavailable,
    forget,
    status_for,
    with_metadata,
)

log = logging.getLogger("referee.service")

READ_AHEAD_PER_JOB = 8
PID_KEY = "x-referee-pid"
REQUEST_ID_KEY = "x-request-id"
# gRFC A66's method label: the full method name without its leading slash.
_METHOD_PREFIX = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name + "/"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class CallEnd(NamedTuple):
    """One finished call as the client saw it: what ``call_observers`` receive.

    A named tuple, made at every call's end: a frozen dataclass's fields are set one by one
    through ``object.__setattr__`` (2.1 µs against 0.8)."""

    method: str
    code: grpc.StatusCode
    seconds: float
    request_id: str
    peer: str
    items: int | None = None  # cases judged, for a stream
    trace_id: str | None = None  # the call's trace, when tracing is on
    key: str = ""  # the name of the call's API key ("" when keys are off); never the key
    # Cancelled before its request message arrived: the client cancelled, a gateway in front
    # refused what it was to turn into the request (JSON it could not read: the client got its
    # 400) and reset the call, or gRPC refused the message as larger than --max-message-bytes
    # (the client then got RESOURCE_EXHAUSTED, which gRPC does not tell the handler: it sees the
    # end of the messages, then the cancel).
    no_request: bool = False


call_observers: list[Callable[[CallEnd], None]] = []


_LINE = "%s %s %.2fms request_id=%s%s%s"
# A status code's name, read twice a call: an enum's ``name`` is a property (0.25 µs a read).
_CODE_NAMES = {code: code.name for code in grpc.StatusCode}


def _log_call(call: CallEnd) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    more = ""
    if call.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        # A client refused over its share (or its quota) may be refused thousands of times a second:
        # its lines share the refusals' budget, and the next line says how many were left out.
        held_back = access.refusal_line()
        if held_back is None:
            return
        more = f" ({held_back} refusal lines left out before this one)" if held_back else ""
    name = call.method if call.items is None else f"{call.method}[{call.items}]"
    extras = f" key={call.key}" if call.key else ""
    if call.no_request:
        extras += " no_request (cancelled before its request came: by the client, by a gateway that refused it, or over --max-message-bytes)"
    if call.trace_id is not None:
        extras += f" trace_id={call.trace_id}"
    args = (name, _CODE_NAMES[call.code], round(call.seconds * 1000, 2), call.request_id, extras, more)
    # Made and handled here rather than by ``log.info``, which walks the stack for the caller's
    # file and line (no format prints them) on every call.
    if not logs.write_direct(log, _LINE, args, _call_fields, call):
        fields = _call_fields(call)
        log.handle(log.makeRecord(log.name, logging.INFO, "", 0, _LINE, args, None, extra={"rpc": fields}))


def _call_fields(call: CallEnd) -> dict[str, object]:
    """The call's fields in a JSON line. The method is the method alone, a stream's case count
    in a field of its own."""
    fields: dict[str, object] = {
        "method": call.method,
        "code": _CODE_NAMES[call.code],
        "duration_ms": round(call.seconds * 1000, 2),
        "request_id": call.request_id,
        "peer": call.peer,
    }
    if call.items is not None:
        fields["cases"] = call.items
    if call.key:
        fields["key"] = call.key
    if call.no_request:
        fields["no_request"] = True
    if call.trace_id is not None:
        fields["trace_id"] = call.trace_id
    return fields


def _count_call(call: CallEnd) -> None:
    metrics.call_ended(_METHOD_PREFIX + call.method, _CODE_NAMES[call.code], call.seconds)


call_observers.extend((_log_call, _count_call))


@dataclass(slots=True, eq=False)
class _Call:
    """A call in progress: its id, start and the status it is ending with."""

    method: str
    context: grpc.aio.ServicerContext
    request_id: str
    start: float = field(default_factory=time.monotonic)
    code: grpc.StatusCode = grpc.StatusCode.OK
    items: int | None = None
    span: tracing.CallSpan | None = None
    key: str = field(default_factory=access.current_key_name)
    # The client's address behind trusted proxies, else the peer. Read while the call lives:
    # context.peer() in the done callback, once the call is gone, crashed the process now and
    # then (a segmentation fault in gRPC, seen with the cores busy).
    peer: str = ""
    client: str = ""  # the client's address without a port, seen through trusted proxies
    no_request: bool = False  # its messages ended before the request (``CallEnd.no_request``)

    def end(self, _context: object = None) -> None:
        """Report the call to every observer, with the status the client got."""
        code = grpc.StatusCode.CANCELLED if self.context.cancelled() else self.code
        seconds = time.monotonic() - self.start
        trace_id = None
        if self.span is not None:
            trace_id = self.span.trace_id
            self.span.end(code.name)
        no_request = self.no_request and code is grpc.StatusCode.CANCELLED
        ended = CallEnd(
            self.method, code, seconds, self.request_id, self.peer, self.items, trace_id, self.key, no_request
        )
        for observer in call_observers:
            try:
                observer(ended)
            except Exception:  # an observer's bug must not take the call's end with it
                log.exception("a call observer failed")


class Undecodable(RefereeError):
    """A request that is not a valid message of its type: the client's error (INVALID_ARGUMENT).

    gRPC's own answer to a request it cannot decode is INTERNAL with a traceback in the log; the
    servicer decodes requests itself so that a bad one is reported as the client's error.
    """

    def __init__(self, type_name: str, size: int) -> None:
        super().__init__("", f"{size} bytes", f"the request does not decode as a {type_name} message")


def _handled(
    handler: Callable[[Message], Message],
    message_type: type[Message],
    data: bytes,
    cap: float,
    deadline: float | None,
    max_bytes: int,
) -> bytes:
    """Decode, handle and encode one request, as a reply of at most ``max_bytes`` (one over it is
    the request's error): a compute slot's work.

    Its time budget starts here, when a slot takes the call (decoding counts, waiting for the slot
    does not): the solve cap, or less if the client's ``deadline`` (monotonic) comes first.
    """
    started = time.monotonic()
    budget = _budget(started, cap, deadline)
    return _replied(handler, _decoded(message_type, data), started, budget, max_bytes)


def _budget(started: float, cap: float, deadline: float | None) -> float:
    """The time budget of a call whose work starts at ``started`` (monotonic): the solve cap, or
    less if the client's ``deadline`` comes first; DeadlineExceeded when nothing is left."""
    budget = cap if deadline is None else min(cap, deadline - started)
    if budget <= 0:
        raise DeadlineExceeded("the deadline passed before the call was solved")
    return budget


def _decoded(message_type: type[Message], data: bytes) -> Message:
    """The request message of ``data``; Undecodable when it is none, LimitError when a count is
    over its limit (``check_counts``: found in the bytes before they are decoded)."""
    if len(data) < DECODED_FIRST_BYTES:
        # Small enough to decode first: the walk over its bytes, a Python loop over every field
        # (a tenth of a SolveHand's own work), is only needed when the decoded counts do not
        # already show it would find nothing, or when the bytes do not decode.
        request: Message | None
        try:
            request = message_type.FromString(data)
        except DecodeError:
            request = None
        if request is not None and counts_within(request):
            return request
        del request  # not kept alive by the walk's error
    check_counts(data, message_type.DESCRIPTOR)
    try:
        return message_type.FromString(data)
    except DecodeError:  # its text only repeats the type's name
        raise Undecodable(message_type.DESCRIPTOR.full_name, len(data)) from None


def _replied(
    handler: Callable[[Message], Message], request: Message, started: float, budget: float, max_bytes: int
) -> bytes:
    """The encoded reply to a decoded request, within ``budget`` seconds from ``started``."""
    try:
        with time_budget(budget - (time.monotonic() - started)):
            reply = handler(request).SerializeToString()
    except SolverError as error:
        if time.monotonic() - started >= budget:
            raise DeadlineExceeded("the time budget ran out before the solver proved an answer") from error
        raise
    if time.monotonic() - started > budget:
        raise DeadlineExceeded(f"the call overran its time budget of {budget:.3f} s")
    check_reply(len(reply), max_bytes)
    return reply


def _search_solve(request: Message) -> bool:
    return isinstance(request, pb.SolveHandRequest) and request.rules.engine == pb.ENGINE_SEARCH


# Calls answered on the event loop itself, by method: those whose request says their work is
# small. Handing a call to a compute slot and back costs about 0.2 ms of the loop's and the
# threads' time (a thread wakes, takes the interpreter lock from the loop, gives it back, the loop
# wakes), more than the search engine's solve of one hand (at most 11 cards: well under 0.1 ms
# on a typical hand, a few tenths on the worst ones the benchmarks know). Such a call is still
# admitted by its client's share first, and runs under its time budget; the loop runs one at a
# time, between the steps of the other calls, as it sends remembered replies. A request this
# large or larger is never decoded on the loop (a SolveHand request takes well under 100 bytes).
_INLINE: dict[str, Callable[[Message], bool]] = {"SolveHand": _search_solve}
_INLINE_REQUEST_BYTES = 1024


# Requests this large or larger always go to a compute slot, and their replies are not remembered
# (a SolveHand or CheckClose request takes well under 100 bytes, a ScoreDeal request of four
# players under a kilobyte), nor are replies this large or larger.
_REMEMBERED_REQUEST_BYTES = 2048
_REMEMBERED_REPLY_BYTES = 8192
# Replies remembered per process: at most this many, and at most this many bytes of requests and
# replies together (a few hundred KiB in practice: a SolveHand reply takes about 150 bytes).
_REMEMBERED_REPLIES = 4096
_REMEMBERED_BYTES = 8 * 1024 * 1024


class Replies:
    """The replies this process sent lately to small requests answered OK, by method and request
    bytes, least recent first, within a count and a byte budget."""

    __slots__ = ("_replies", "bytes", "max_bytes", "size")

    def __init__(self, size: int = _REMEMBERED_REPLIES, max_bytes: int = _REMEMBERED_BYTES) -> None:
        self._replies: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._replies)

    def get(self, method: str, data: bytes) -> bytes | None:
        """The reply sent to ``data`` lately (it is then the most recent), or None."""
        key = (method, data)
        reply = self._replies.get(key)
        if reply is not None:
            self._replies.move_to_end(key)
        return reply

    def remember(self, method: str, data: bytes, reply: bytes) -> None:
        """``reply`` answered ``data`` OK now; too large a request or reply is not remembered."""
        if len(data) >= _REMEMBERED_REQUEST_BYTES or len(reply) >= _REMEMBERED_REPLY_BYTES:
            return
        key = (method, data)
        if key in self._replies:
            return
        self._replies[key] = reply
        self.bytes += len(data) + len(reply)
        while len(self._replies) > self.size or self.bytes > self.max_bytes:
            (_, old), dropped = self._replies.popitem(last=False)
            self.bytes -= len(old) + len(dropped)


# The receive timeout's sweep runs this often at most (and at least eight times per timeout).
_ARRIVALS_SWEEP_SECONDS = 0.25


class Arrivals:
    """The receive timeout of every call waiting for its request message, kept by one timer.

    A call enters itself and leaves (two dictionary operations) where ``asyncio.timeout`` made a
    timer handle, pushed it on the loop's heap and cancelled it, on every call. The timer runs only
    while calls wait, every eighth of the timeout (at most ``_ARRIVALS_SWEEP_SECONDS``), and
    cancels the calls whose time is up: a request that does not come is given up between the
    timeout and an eighth more.
    """

    __slots__ = ("_loop", "_step", "_timer", "_waiting", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._step = min(seconds / 8, _ARRIVALS_SWEEP_SECONDS)
        # The waiting calls' tasks, in the order they began to wait, and when their time is up
        # (loop time); None once the sweep has cancelled the task.
        self._waiting: dict[asyncio.Task[object], float | None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def read(self, context: grpc.aio.ServicerContext) -> object:
        """The call's next message (or EOF); TimeoutError when it has not come within ``seconds``."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        waiting = self._waiting
        waiting[task] = loop.time() + self.seconds
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(self._step, self._sweep)
        cancelling = task.cancelling()
        try:
            return await context.read()
        except asyncio.CancelledError:
            # The sweep's cancel, and no one else's (a client that cancelled stays cancelled).
            if task in waiting and waiting[task] is None and task.uncancel() <= cancelling:
                raise TimeoutError from None
            raise
        finally:
            del waiting[task]

    def _sweep(self) -> None:
        self._timer = None
        loop = self._loop
        if loop is None or not self._waiting:
            return
        now = loop.time()
        # Every call waits the same time, so the first in is the first due: stop at one not due.
        for task, due in self._waiting.items():
            if due is None:
                continue
            if due > now:
                break
            self._waiting[task] = None  # a value changed, not a key: the walk goes on
            task.cancel()
        self._timer = loop.call_later(self._step, self._sweep)


def add_to_server(servicer: RefereeServicer, server: grpc.aio.Server) -> None:
    """Register the referee's methods on ``server``: unary methods as client streams of one message
    (so the servicer awaits the request under its receive timeout), every message as raw bytes."""
    service = pb.DESCRIPTOR.services_by_name["RefereeService"]
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(servicer.CheckDisputes)
        else:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(servicer.unary(method.name))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


_HANDLERS: dict[str, Callable[..., Message]] = {
    "SolveHand": handlers.solve_hand,
    "CheckClose": handlers.check_close,
    "ScoreDeal": handlers.score_deal,
    "ReplayDeal": handlers.replay_deal,
    "ReviewDeal": handlers.review_deal,
    "DrawAnswer": drawings.draw_answer,
}
# The methods whose replies are remembered: a replayed or reviewed record is judged turn by turn,
# every time (its requests are large, and rarely sent twice), so ReplayDeal and ReviewDeal always go
# to a compute slot.
_REMEMBERED = frozenset({"SolveHand", "CheckClose", "ScoreDeal"})


class RefereeServicer:
    """The referee over gRPC: SolveHand, CheckClose, ScoreDeal, ReplayDeal, ReviewDeal and the CheckDisputes
    stream."""

    def __init__(
        self,
        compute: ComputePool,
        jobs: DisputeJobs,
        limits: ServiceLimits | None = None,
        max_message_bytes: int = MESSAGE_BYTES,
        proxies: access.TrustedProxies | None = None,
    ) -> None:
        self.compute = compute
        self.proxies = proxies or access.TrustedProxies()
        self.jobs = jobs
        self.limits = limits or ServiceLimits()
        self.max_message_bytes = max_message_bytes
        self.streams = 0
        self._streams_by_client: Counter[str] = Counter()
        self._replies = Replies()
        self._arrivals = Arrivals(self.limits.receive_timeout_seconds)
        # Told the peer of every call (the connection warden: a caller's connection is kept).
        self.note_call: Callable[[str], None] = _ignore

    def unary(self, name: str) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], object]:
        """The handler of the unary method ``name`` (registered as a stream of one request)."""
        handler = _HANDLERS[name]
        message_type = getattr(pb, f"{name}Request")

        async def call(
            requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
        ) -> bytes | None:  # None: the status set on the context ends the call
            return await self._unary(name, handler, message_type, context)

        call.__name__ = name
        return call

    def _begin(self, method: str, context: grpc.aio.ServicerContext) -> _Call:
        metrics.call_started(_METHOD_PREFIX + method)
        peer = context.peer()
        self.note_call(peer)
        # Read once: gRPC builds the metadata's tuple afresh at each read.
        metadata = context.invocation_metadata()
        if self.proxies.networks:
            client = self.proxies.client_address(peer, metadata)
            # The log names the peer, or the client when the peer is a trusted proxy that forwarded the call.
            shown = peer if client == access.client_address(peer) else client
        else:  # no proxy trusted: the client is the peer's address
            client, shown = access.client_address(peer), peer
        call = _Call(method, context, _request_id(metadata), peer=shown, client=client)
        if tracing.enabled():
            call.span = tracing.begin(_METHOD_PREFIX + method, metadata)
        context.add_done_callback(call.end)
        return call

    def _metadata(self, call: _Call) -> tuple[tuple[str, str], ...]:
        if self.limits.reveal_pid:
            return ((PID_KEY, str(logs.process_id())), (REQUEST_ID_KEY, call.request_id))
        return ((REQUEST_ID_KEY, call.request_id),)

    async def _unary(
        self,
        method: str,
        handler: Callable[[Message], Message],
        message_type: type[Message],
        context: grpc.aio.ServicerContext,
    ) -> bytes | None:
        call = self._begin(method, context)
        try:
            reply = await self._answer(call, handler, message_type, context)
        except asyncio.CancelledError:  # gRPC cancels the handler when the client cancels or goes away
            call.code = grpc.StatusCode.CANCELLED
            raise
        except Exception as error:  # every failure leaves through the one mapping in status.py
            status = self._failed(call, error)
        else:
            context.set_trailing_metadata(self._metadata(call))
            return reply
        # A unary call ends with no reply message only through abort. Raised here, outside the
        # except clause, the abort chains no error, and its traceback holds this frame alone, in
        # which no request lives (it lived in ``_answer``'s frame, let go with the error).
        await context.abort(status.code, status.details, status.trailing_metadata)
        return None  # pragma: no cover (abort raises)

    async def _answer(
        self,
        call: _Call,
        handler: Callable[[Message], Message],
        message_type: type[Message],
        context: grpc.aio.ServicerContext,
    ) -> bytes:
        """The reply to the call's one request: what a unary call does between its start and its end."""
        method = call.method
        access.take_call()  # the key's quota, before anything is read or computed
        key = access.current_key()
        # A client is its key, or its address when keys are off: its calls share its fair share.
        client = key.name if key is not None else call.client
        concurrency = key.concurrency if key is not None else None
        self.compute.admits(client, concurrency)  # a client over its share is refused before it is read
        data = await self._receive(context, call)
        remembered = method in _REMEMBERED
        remaining = context.time_remaining()
        if remembered and (reply := self._replies.get(method, data)) is not None:
            # A deadline already passed is the client's answer, as it would be on a compute slot.
            if remaining is not None and remaining <= 0:
                raise DeadlineExceeded("the deadline passed before the call was answered")
            metrics.reply_remembered()
            return reply
        deadline = None if remaining is None else time.monotonic() + remaining
        cap = self.limits.solve_cap_seconds
        reply = None
        small = _INLINE.get(method)
        if small is not None and len(data) < _INLINE_REQUEST_BYTES:
            # Decoded here to read what the call asks (a few microseconds); a call that is not
            # small after all is decoded again on its slot, as any other.
            started = time.monotonic()
            budget = _budget(started, cap, deadline)
            request = _decoded(message_type, data)
            if small(request):
                reply = _replied(handler, request, started, budget, self.max_message_bytes)
        if reply is None:
            reply = await self.compute.run(
                client, concurrency, _handled, handler, message_type, data, cap, deadline, self.max_message_bytes
            )
        if remembered:
            self._replies.remember(method, data, reply)
        return reply

    def _failed(self, call: _Call, error: Exception) -> grpc.Status:
        """The status to end the call with for ``error``, and ``error`` let go of.

        The error's traceback holds the frames it passed through, and they hold the request (its
        bytes, the decoded message) in reference cycles that only a full garbage collection frees,
        which the server runs rarely: cleared here, a refused request leaves nothing behind.
        """
        status = with_metadata(status_for(error, call.request_id), self._metadata(call))
        forget(error)
        call.code = status.code
        return status

    def _fail(self, call: _Call, context: grpc.aio.ServicerContext, error: Exception) -> None:
        """End a stream with the status of ``error``, set on the context (a stream sends no more)."""
        status = self._failed(call, error)
        context.set_trailing_metadata(status.trailing_metadata)
        context.set_code(status.code)
        context.set_details(status.details)

    async def _receive(self, context: grpc.aio.ServicerContext, call: _Call) -> bytes:
        """The one request message, within the receive timeout."""
        # Until it comes: a call cancelled meanwhile (a gateway that could not read the JSON it
        # was turning into this request resets the call) ended with no request.
        call.no_request = True
        try:
            data = await self._arrivals.read(context)
        except TimeoutError:
            raise DeadlineExceeded(
                f"the request did not arrive within the receive timeout of {self.limits.receive_timeout_seconds:g} s"
            ) from None
        if data is grpc.aio.EOF:
            call.no_request = True
            await _cancel_lands()
            raise RefereeError("", "no message", "the call ended before its request message")
        assert isinstance(data, bytes)
        call.no_request = False
        return data

    async def CheckDisputes(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        """One verdict per case, in the order of the cases, judged in parallel.

        At most ``READ_AHEAD_PER_JOB × jobs`` cases are read ahead of the verdict being sent; a
        client that reads slowly holds back the server's writes, so the server stops reading
        cases instead of buffering them. A stream with nothing to judge that neither sends a case
        nor reads a verdict for ``stream_idle_seconds`` is ended (DEADLINE_EXCEEDED).
        """
        call = self._begin("CheckDisputes", context)
        call.items = 0
        client = call.client
        admitted = False
        try:
            context.set_trailing_metadata(self._metadata(call))
            self._admit_stream(client)
            admitted = True
            await self._judge_stream(call, context)
        except asyncio.CancelledError:
            call.code = grpc.StatusCode.CANCELLED
            raise
        except Exception as error:
            self._fail(call, context, error)
        finally:
            if admitted:
                self._release_stream(client)

    def _admit_stream(self, client: str) -> None:
        if self.streams >= self.limits.max_streams:
            raise Busy(f"this server process already runs {self.streams} CheckDisputes streams; retry later")
        if self._streams_by_client[client] >= self.limits.max_streams_per_client:
            raise Busy(
                f"this client already runs {self.limits.max_streams_per_client} CheckDisputes streams "
                "on this server process; retry later"
            )
        self.streams += 1
        self._streams_by_client[client] += 1

    def _release_stream(self, client: str) -> None:
        self.streams -= 1
        self._streams_by_client[client] -= 1
        if not self._streams_by_client[client]:
            del self._streams_by_client[client]

    async def _judge_stream(self, call: _Call, context: grpc.aio.ServicerContext) -> None:
        idle = _Idleness()
        window = asyncio.Semaphore(READ_AHEAD_PER_JOB * self.jobs.jobs)
        verdicts: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()
        over_quota: list[QuotaExceeded] = []

        async def read_cases() -> None:
            while True:
                await window.acquire()
                case = await context.read()
                idle.touch()
                if case is grpc.aio.EOF:
                    await _cancel_lands()
                    verdicts.put_nowait(None)
                    return
                assert isinstance(case, bytes)
                try:
                    access.take_call()  # each case is a call against the key's quota
                except QuotaExceeded as refusal:
                    # The cases read before get their verdicts; the stream then ends with the refusal.
                    over_quota.append(refusal)
                    verdicts.put_nowait(None)
                    return
                idle.judging += 1
                verdicts.put_nowait(asyncio.ensure_future(self._judge(case, idle)))

        async def write_verdicts() -> None:
            while (verdict := await verdicts.get()) is not None:
                reply = await verdict
                _count_verdict(reply)
                # Counted as judged before the write: a client that cancels as soon as it has read
                # the last verdict cancels this task inside the write, and the case was judged.
                assert call.items is not None
                call.items += 1
                await context.write(reply)
                idle.touch()
                window.release()

        reader = asyncio.ensure_future(read_cases())
        writer = asyncio.ensure_future(write_verdicts())
        tasks = {reader, writer}
        try:
            limit = self.limits.stream_idle_seconds
            while not writer.done():
                done, _ = await asyncio.wait(
                    tasks, timeout=min(limit / 4, _STREAM_CHECK_SECONDS), return_when=asyncio.FIRST_EXCEPTION
                )
                for task in done:
                    if task.cancelled():  # only this handler cancels them, in the finally below
                        raise RuntimeError("a task of the stream was cancelled from outside")
                    if task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                tasks -= done
                access.check_key()  # a key removed from the key file ends its open streams
                if idle.seconds() > limit:
                    raise DeadlineExceeded(
                        f"the stream was idle for more than {limit:g} s (no case sent, no verdict read)"
                    )
            if over_quota:
                raise over_quota[0]
        finally:
            reader.cancel()
            writer.cancel()
            while not verdicts.empty():
                pending = verdicts.get_nowait()
                if pending is not None:
                    pending.cancel()

    async def _judge(self, case: bytes, idle: _Idleness) -> bytes:
        try:
            return await self.jobs.run(judge_case_bytes, case, self.limits.solve_cap_seconds, self.max_message_bytes)
        except JobLost as error:
            raise Unavailable(f"{error}; send the stream again") from None
        finally:
            idle.judging -= 1
            idle.touch()


# A stream checks its idleness and its key at least this often.
_STREAM_CHECK_SECONDS = 0.25

# A client that cancels is first seen as the end of its messages (EOF), and gRPC cancels the
# handler a moment later (measured: well under a millisecond): waiting this long after an EOF lets
# a cancel land, so the call is logged CANCELLED rather than as a request that ended early.
_CANCEL_LANDS_SECONDS = 0.005


async def _cancel_lands() -> None:
    await asyncio.sleep(_CANCEL_LANDS_SECONDS)


class _Idleness:
    """How long a stream has waited on its client with no case being judged."""

    __slots__ = ("last", "judging")

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.judging = 0

    def touch(self) -> None:
        """Something happened on the stream now."""
        self.last = time.monotonic()

    def seconds(self) -> float:
        """How long the stream has waited on its client (0 while a case is being judged)."""
        return 0.0 if self.judging else time.monotonic() - self.last


def _count_verdict(verdict: bytes) -> None:
    """A judged case's verdict, counted by outcome (when metrics are on)."""
    if metrics.enabled():
        outcome = pb.CheckDisputesResponse.FromString(verdict).outcome
        metrics.dispute_judged(pb.DisputeOutcome.Name(outcome).removeprefix("DISPUTE_OUTCOME_"))


def _ignore(_peer: str) -> None:
    pass


def _request_id(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The client's ``x-request-id`` (in the call's ``metadata``) when it is a sane token, else a fresh one."""
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and _CLIENT_REQUEST_ID.fullmatch(value):
            return value
    return _fresh_ids.next()


class _RequestIds:
    """Fresh request ids of 16 hex digits: 8 random ones per process, then a count from a random
    start. Unique within the process and, but for a chance of one in four billion, across the
    workers; a uuid4 per call cost the event loop more than the rest of a cached call's bookkeeping."""

    def __init__(self) -> None:
        self.restart()
        os.register_at_fork(after_in_child=self.restart)  # a forked worker draws its own

    def restart(self) -> None:
        """A new random prefix and start."""
        self._prefix = os.urandom(4).hex()
        self._count = itertools.count(int.from_bytes(os.urandom(4), "big"))

    def next(self) -> str:
        """A fresh id."""
        return f"{self._prefix}{next(self._count) & 0xFFFFFFFF:08x}"


_fresh_ids = _RequestIds()


__all__ = [
    "PID_KEY",
    "REQUEST_ID_KEY",
    "CallEnd",
    "RefereeServicer",
    "Undecodable",
    "add_to_server",
    "call_observers",
]
