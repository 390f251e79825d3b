"""The standard health service, ``grpc.health.v1.Health``, for the referee's ``grpc.aio`` servers.

The health service needs no key (probes carry none), so anyone who reaches a port may call it; it
is written for that caller:

- **A bounded request.** Check and Watch are registered as raw bytes, unary calls as client
  streams of one message like the referee's own methods: the request is read under the receive
  timeout (a call that sends HEADERS and nothing more is ended), and one over
  ``MAX_REQUEST_BYTES`` is refused ``INVALID_ARGUMENT`` before it is decoded; nothing of it is
  kept.
- **Known services only.** The services are named when the service is made (the whole server,
  "", and the referee's service); any other is ``NOT_FOUND``, for Watch too, so no stream is held
  for a name the server will never report.
- **Bounded watches.** A Watch stream lives as long as its client keeps it (up to its
  connection's maximum age), so there are at most ``max_watches`` per process and
  ``max_watches_per_connection`` per connection (the call's peer, address and port, names its
  connection); more are ``RESOURCE_EXHAUSTED``. Check is never capped.
- **Every watcher told.** Each Watch has a queue of its own that every status change is put on,
  so a watcher that ends takes nothing from the others: when the server drains, every open
  watcher sees NOT_SERVING.

``set(service, status)`` and ``enter_graceful_shutdown()`` are those of grpc_health's servicer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable

import grpc
import grpc.aio
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2

from referee.game.errors import shorten
from referee.server import defaults
from referee.server.config import HealthLimits

SERVICE_NAME: str = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A HealthCheckRequest holds one service name; the names served are a few dozen bytes.
MAX_REQUEST_BYTES = 256


class HealthService:
    """``grpc.health.v1.Health`` for ``services``, each NOT_SERVING until ``set``."""

    def __init__(
        self,
        services: Iterable[str],
        limits: HealthLimits | None = None,
        receive_timeout_seconds: float = defaults.HEALTH_RECEIVE_TIMEOUT_SECONDS,
    ) -> None:
        self.limits = limits or HealthLimits()
        self.receive_timeout_seconds = receive_timeout_seconds
        self._status = dict.fromkeys(services, NOT_SERVING)
        self._watchers: dict[str, set[asyncio.Queue[int]]] = {service: set() for service in self._status}
        self._watches_by_connection: Counter[str] = Counter()
        self.watches = 0
        self._shutting_down = False
        # Told the peer of every call (the connection warden: a caller's connection is kept).
        self.note_call: Callable[[str], None] = lambda _peer: None

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Serve Check and Watch on ``server`` (messages as bytes: no deserializer runs before the size check)."""
        handlers = {
            "Check": grpc.stream_unary_rpc_method_handler(self.Check),
            "Watch": grpc.stream_stream_rpc_method_handler(self.Watch),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))

    async def set(self, service: str, status: int) -> None:
        """Report ``status`` for ``service`` (a new name becomes known); ignored once shutting down."""
        if not self._shutting_down:
            self._set(service, status)

    async def enter_graceful_shutdown(self) -> None:
        """Report NOT_SERVING for every service, for good: later ``set`` calls are ignored."""
        self._shutting_down = True
        for service in list(self._status):
            self._set(service, NOT_SERVING)

    def _set(self, service: str, status: int) -> None:
        if self._status.get(service) == status:
            return
        self._status[service] = status
        # Only the server changes a status, a few times in a process's life: the queues stay short.
        for queue in self._watchers.setdefault(service, set()):
            queue.put_nowait(status)

    async def Check(self, _requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes | None:
        """The service's status now."""
        service = await self._service(context)
        if service is None:
            return None
        return _reply(self._status[service])

    async def Watch(self, _requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        """The service's status now, then each change, until the client or the server ends the call."""
        service = await self._service(context)
        if service is None:
            return
        connection = context.peer()
        if self.watches >= self.limits.max_watches:
            _refuse(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "too many health watches on this server process")
            return
        if self._watches_by_connection[connection] >= self.limits.max_watches_per_connection:
            _refuse(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this connection already has {self.limits.max_watches_per_connection} health watches",
            )
            return
        queue: asyncio.Queue[int] = asyncio.Queue()
        queue.put_nowait(self._status[service])
        watchers = self._watchers[service]
        watchers.add(queue)
        self.watches += 1
        self._watches_by_connection[connection] += 1
        try:
            sent = None
            while True:
                status = await queue.get()
                if status != sent:
                    await context.write(_reply(status))
                    sent = status
        finally:  # the client cancelled or went away, or the server stopped
            watchers.discard(queue)
            self.watches -= 1
            self._watches_by_connection[connection] -= 1
            if not self._watches_by_connection[connection]:
                del self._watches_by_connection[connection]

    async def _service(self, context: grpc.aio.ServicerContext) -> str | None:
        """The known service the call's request names; else None, with the call's status set.

        Statuses are set on the context, not raised with ``abort``: an exception's traceback would
        hold the request in the handler's frame until a full garbage collection.
        """
        self.note_call(context.peer())
        try:
            async with asyncio.timeout(self.receive_timeout_seconds):
                data = await context.read()
        except TimeoutError:
            message = f"the request did not arrive within the receive timeout of {self.receive_timeout_seconds:g} s"
            _refuse(context, grpc.StatusCode.DEADLINE_EXCEEDED, message)
            return None
        if not isinstance(data, bytes):  # EOF: the client ended its side without a request
            _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, "the call ended before its request message")
            return None
        if len(data) > MAX_REQUEST_BYTES:  # refused undecoded; the bytes go with this frame
            message = f"a health request is at most {MAX_REQUEST_BYTES} bytes, not {len(data)}"
            _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, message)
            return None
        try:
            service = health_pb2.HealthCheckRequest.FromString(data).service
        except DecodeError:
            _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, "the request is not a HealthCheckRequest")
            return None
        if service not in self._status:
            _refuse(context, grpc.StatusCode.NOT_FOUND, f"unknown service {shorten(service)!r}")
            return None
        return service


def _reply(status: int) -> bytes:
    return health_pb2.HealthCheckResponse(status=status).SerializeToString()


def _refuse(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str) -> None:
    """End the call with ``code`` once the handler returns."""
    context.set_code(code)
    context.set_details(message)


__all__ = [
    "MAX_REQUEST_BYTES",
    "SERVICE_NAME",
    "HealthService",
]
