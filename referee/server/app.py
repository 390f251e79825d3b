"""One gRPC server (``grpc.aio``) of the referee: the servicer, health, reflection, connection limits.

``create_server`` builds and starts one server in the running event loop and returns a
``RunningServer`` (tests bind ``127.0.0.1:0``); ``ServerThread`` runs one on a thread of its own
for synchronous code. The process around it (flags, signals, workers) is ``referee.server.process``.

Where to plug in:

- access control (TLS, API keys, quotas): ``create_server(credentials=..., interceptors=[...])``;
  ``credentials`` are ``grpc.ServerCredentials`` for ``add_secure_port``, ``interceptors`` are
  ``grpc.aio.ServerInterceptor`` objects that see every call, the health service's included;
- per-call figures: ``servicer.call_observers`` is told of every referee call as it ends, with the
  status the client got; process figures (workers up, restarts): ``supervisor``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection as grpc_reflection

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import handlers
from referee.game.limits import MESSAGE_BYTES
from referee.game.linking import load_engines
from referee.server import access, defaults, metrics
from referee.server.compute import ComputePool, DisputeJobs
from referee.server.config import ConnectionLimits, HealthLimits, ServiceLimits
from referee.server.health import SERVICE_NAME as HEALTH_SERVICE_NAME
from referee.server.health import HealthService
from referee.server.servicer import RefereeServicer, add_to_server
from referee.server.warden import ConnectionWarden

log = logging.getLogger("referee.service")

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name
# The largest request or reply on the health port: a health message is a few dozen bytes.
HEALTH_PORT_MESSAGE_BYTES = 1024
HEALTH_CHECK_EVERY_SECONDS = 0.5

_T = TypeVar("_T")


@dataclass(eq=False)
class RunningServer:
    """A started server: the gRPC server, its bound port, its health service and its servicer."""

    server: grpc.aio.Server
    port: int
    health: HealthService
    servicer: RefereeServicer
    _watch: asyncio.Task[None] | None = field(default=None, repr=False)
    draining: bool = False
    # The plain-text listener of the health service alone (``health_address``), when there is one.
    health_server: grpc.aio.Server | None = None
    warden: ConnectionWarden | None = None
    health_port: int | None = None

    async def set_serving(self, serving: bool) -> None:
        """Report SERVING or NOT_SERVING for the whole server and for the referee's service."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", SERVICE_NAME):
            await self.health.set(service, status)

    def can_serve(self) -> bool:
        """Whether this process can answer every method now (not draining, its job processes up)."""
        return not self.draining and self.servicer.jobs.healthy()

    def watch_health(self) -> None:
        """Follow ``can_serve`` in the health service from now on (until ``drain``)."""
        self._watch = asyncio.get_running_loop().create_task(self._follow_health())

    async def _follow_health(self) -> None:
        serving = True
        while True:
            await asyncio.sleep(HEALTH_CHECK_EVERY_SECONDS)
            now = self.can_serve()
            if now != serving and not self.draining:
                log.warning("health: %s", "SERVING" if now else "NOT_SERVING (the dispute job processes cannot start)")
                await self.set_serving(now)
                serving = now

    async def drain(self, grace: float) -> None:
        """Report NOT_SERVING, refuse new calls, and let calls in flight finish within ``grace`` seconds."""
        self.draining = True
        if self._watch is not None:
            self._watch.cancel()
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.health_server is not None:
            await self.health_server.stop(0)
        self.servicer.compute.shutdown()
        self.servicer.jobs.shutdown()
        if self.warden is not None:
            self.warden.stop()


async def create_server(
    address: str = "127.0.0.1:0",
    *,
    threads: int = defaults.THREADS,
    max_concurrent: int = defaults.MAX_CONCURRENT,
    max_calls_per_client: int | None = defaults.MAX_CALLS_PER_CLIENT,
    limits: ServiceLimits | None = None,
    connections: ConnectionLimits | None = None,
    reflection: bool = True,
    max_message_bytes: int = MESSAGE_BYTES,
    reuse_port: bool = False,
    dispute_jobs: int = 1,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    credentials: grpc.ServerCredentials | None = None,
    health_address: str | None = None,
    health_limits: HealthLimits | None = None,
    trusted_proxies: access.TrustedProxies | None = None,
    committed_only: bool = False,
) -> RunningServer:
    """Build, bind and start a server in the running event loop; it reports SERVING.

    ``health_address`` adds a plain-text listener there serving the health service alone (with the
    same status), for probes that cannot speak the main port's TLS or present a certificate, with
    the main port's connection limits. ``health_limits`` caps the health Watch streams.
    ``trusted_proxies`` are believed about the client's address (``x-forwarded-for``), for the
    per-client limits and the log. ``committed_only``: deal records whose deck order was not
    committed are the violation UNCOMMITTED_SHUFFLE, here and in the dispute jobs.
    """
    limits = limits or ServiceLimits()
    connections = connections or ConnectionLimits()
    health_limits = health_limits or HealthLimits()
    load_engines()  # before the first call, so no caller waits for an engine's import
    metrics.ready()
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # gRPC turns SO_REUSEPORT on by default on Linux; a lone server must own its port.
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        *connections.options(),
    ]
    # No maximum_concurrent_rpcs: gRPC's limit would refuse health checks too. Work is bounded
    # by the compute pool and the stream caps instead, and waiting calls hold only coroutines.
    server = grpc.aio.server(interceptors=list(interceptors), options=options)
    handlers.require_committed_shuffles(committed_only)
    jobs = DisputeJobs(dispute_jobs, committed_only)
    compute = ComputePool(threads, max(0, max_concurrent - threads), max_calls_per_client)
    servicer = RefereeServicer(compute, jobs, limits, max_message_bytes=max_message_bytes, proxies=trusted_proxies)
    add_to_server(servicer, server)
    # NOT_SERVING until the server has started (``set_serving`` below).
    health_servicer = HealthService(("", SERVICE_NAME), health_limits, limits.receive_timeout_seconds)
    health_servicer.add_to_server(server)
    access.know_methods(
        [f"/{SERVICE_NAME}/{method.name}" for method in pb.DESCRIPTOR.services_by_name["RefereeService"].methods]
    )
    access.know_methods([f"/{HEALTH_SERVICE_NAME}/Check", f"/{HEALTH_SERVICE_NAME}/Watch"])
    if reflection:
        names = (SERVICE_NAME, HEALTH_SERVICE_NAME, grpc_reflection.SERVICE_NAME)
        grpc_reflection.enable_server_reflection(names, server)
        access.know_methods([f"/{grpc_reflection.SERVICE_NAME}/ServerReflectionInfo"])
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as error:
        jobs.shutdown()
        raise OSError(f"cannot bind {address}: {error}") from None
    if port == 0:
        jobs.shutdown()
        raise OSError(f"cannot bind {address}")
    health_server, health_port = None, None
    if health_address is not None:
        # The main port's connection limits, and a message limit that fits health's messages alone.
        health_options = [
            ("grpc.max_receive_message_length", HEALTH_PORT_MESSAGE_BYTES),
            ("grpc.max_send_message_length", HEALTH_PORT_MESSAGE_BYTES),
            ("grpc.so_reuseport", 1 if reuse_port else 0),
            *connections.options(),
        ]
        health_server = grpc.aio.server(options=health_options)
        health_servicer.add_to_server(health_server)
        try:
            health_port = health_server.add_insecure_port(health_address)
        except RuntimeError as error:
            jobs.shutdown()
            raise OSError(f"cannot bind the health port {health_address}: {error}") from None
        await health_server.start()
    jobs.warm_up()
    await server.start()
    warden = ConnectionWarden(
        {port} | ({health_port} if health_port else set()),
        connections.max_connections_per_peer,
        metrics.connection_refused,
        max_connections=connections.max_connections,
        first_call_seconds=connections.first_call_seconds,
    )
    servicer.note_call = health_servicer.note_call = warden.note_call
    warden.start()
    running = RunningServer(
        server, port, health_servicer, servicer, health_server=health_server, health_port=health_port, warden=warden
    )
    await running.set_serving(True)
    running.watch_health()
    return running


class ServerThread:
    """A server on an event loop in a thread of its own: for tests and in-process use from sync code."""

    def __init__(self, address: str = "127.0.0.1:0", **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="referee-server", daemon=True)
        self._thread.start()
        try:
            self.running: RunningServer = self.call(create_server(address, **options))
        except BaseException:
            self._close_loop()
            raise
        self.port = self.running.port
        self.address = f"127.0.0.1:{self.port}" if address.startswith("127.0.0.1:") else address

    def call(self, coroutine: Awaitable[_T], timeout: float | None = 60) -> _T:
        """Run ``coroutine`` on the server's loop and return its result."""
        future: Future[_T] = asyncio.run_coroutine_threadsafe(_awaited(coroutine), self._loop)
        return future.result(timeout)

    def stop(self, grace: float = 0) -> None:
        """Drain the server (see ``RunningServer.drain``) and end its thread."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self.call(self.running.drain(grace), timeout=grace + 10)
        self._close_loop()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


__all__ = [
    "SERVICE_NAME",
    "RunningServer",
    "ServerThread",
    "create_server",
]
