"""The referee's gRPC server (``grpc.aio``): wiring, connection limits, health, reflection, signals.

``create_server`` builds and starts one server in the running event loop and returns a ``Referee``
(tests bind ``127.0.0.1:0``); ``ServerThread`` runs one on a thread of its own for synchronous
code. ``add_arguments`` and ``run`` are the ``serve`` subcommand; with ``--workers N`` (N > 1) the
parent process supervises N worker processes sharing the port (``referee.service.supervisor``).

Where to plug in:

- access control (TLS, API keys, quotas): ``create_server(credentials=..., interceptors=[...])``;
  ``credentials`` are ``grpc.ServerCredentials`` for ``add_secure_port``, ``interceptors`` are
  ``grpc.aio.ServerInterceptor`` objects that see every call, the health service's included;
- per-call figures: ``servicer.call_observers`` is told of every referee call as it ends, with the
  status the client got; process figures (workers up, restarts): ``supervisor``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection as grpc_reflection

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.cpus import usable_cpus
from referee.limits import MESSAGE_BYTES
from referee.linking import load_engines
from referee.service import access, metrics, tracing
from referee.service.compute import ComputePool, DisputeJobs
from referee.service.health import SERVICE_NAME as HEALTH_SERVICE_NAME
from referee.service.health import HealthLimits, HealthService
from referee.service.servicer import (
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_CLIENT,
    DEFAULT_RECEIVE_TIMEOUT_SECONDS,
    DEFAULT_SOLVE_CAP_SECONDS,
    DEFAULT_STREAM_IDLE_SECONDS,
    RefereeServicer,
    ServiceLimits,
    add_to_server,
)
from referee.service.warden import DEFAULT_MAX_CONNECTIONS_PER_PEER, ConnectionWarden

log = logging.getLogger("referee.service")

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 50051
# Compute slots per process. Python runs one thread at a time, so more slots add no speed: two
# keep one long solve from holding up every short call, and fewer threads taking the interpreter
# lock from one another keep calls finishing in turn (a lower p99). More processes, not threads,
# use more cores.
DEFAULT_THREADS = 2
DEFAULT_MAX_CONCURRENT = 64
# One client's share of those: no client can keep the others out by keeping calls in flight.
DEFAULT_MAX_CALLS_PER_CLIENT = 16
DEFAULT_GRACE_SECONDS = 5.0
MAX_MESSAGE_BYTES = MESSAGE_BYTES
# The largest request or reply on the health port: a health message is a few dozen bytes.
HEALTH_PORT_MESSAGE_BYTES = 1024
# Middle-generation collections per full collection of the garbage collector (CPython: 10).
FULL_COLLECTION_EVERY = 1000
HEALTH_CHECK_EVERY_SECONDS = 0.5
# A worker writes a heartbeat to its parent this often, from its event loop; silent for
# DEFAULT_HEARTBEAT_TIMEOUT_SECONDS (stopped, or its loop blocked), it is killed and replaced.
HEARTBEAT_EVERY_SECONDS = 0.5
DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 5.0

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """HTTP/2 and connection limits, enforced by gRPC's core for every connection (docs/operations.md)."""

    max_streams_per_connection: int = 100
    # High, because one address is held to max_connections_per_peer by the warden: this cap is
    # for the server's memory, and a flood must not reach it between two of the warden's sweeps.
    max_connections: int = 10_000
    max_connection_idle_seconds: float = 60.0
    max_connection_age_seconds: float = 300.0
    max_connection_age_grace_seconds: float = 10.0
    keepalive_seconds: float = 60.0
    keepalive_timeout_seconds: float = 20.0
    min_client_ping_seconds: float = 10.0
    # A connection that has not finished its handshake by then is closed: a client sends its
    # HTTP/2 preface (after TLS) at once, and silent connections count against max_connections.
    handshake_timeout_seconds: float = 5.0
    max_connections_per_peer: int = DEFAULT_MAX_CONNECTIONS_PER_PEER

    def options(self) -> list[tuple[str, int]]:
        """These limits as gRPC channel arguments."""

        def ms(seconds: float) -> int:
            return max(1, round(seconds * 1000))

        return [
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.max_connection_idle_ms", ms(self.max_connection_idle_seconds)),
            ("grpc.max_connection_age_ms", ms(self.max_connection_age_seconds)),
            ("grpc.max_connection_age_grace_ms", ms(self.max_connection_age_grace_seconds)),
            # The server pings a connection with calls in flight to find a peer that went away.
            ("grpc.keepalive_time_ms", ms(self.keepalive_seconds)),
            ("grpc.keepalive_timeout_ms", ms(self.keepalive_timeout_seconds)),
            # A client pinging more often than this, or at all without calls, is sent GOAWAY
            # after two strikes: pings cost the server and prove nothing without calls.
            ("grpc.http2.min_ping_interval_without_data_ms", ms(self.min_client_ping_seconds)),
            ("grpc.http2.max_ping_strikes", 2),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.server_handshake_timeout_ms", ms(self.handshake_timeout_seconds)),
        ]


DEFAULT_CONNECTION_LIMITS = ConnectionLimits()
DEFAULT_LIMITS = ServiceLimits()
DEFAULT_HEALTH_LIMITS = HealthLimits()


@dataclass(eq=False)
class Referee:
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

    async def _watch_health(self) -> None:
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
    threads: int = DEFAULT_THREADS,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    max_calls_per_client: int | None = DEFAULT_MAX_CALLS_PER_CLIENT,
    limits: ServiceLimits = DEFAULT_LIMITS,
    connections: ConnectionLimits = DEFAULT_CONNECTION_LIMITS,
    reflection: bool = True,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    reuse_port: bool = False,
    dispute_jobs: int = 1,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    credentials: grpc.ServerCredentials | None = None,
    health_address: str | None = None,
    health_limits: HealthLimits = DEFAULT_HEALTH_LIMITS,
) -> Referee:
    """Build, bind and start a server in the running event loop; it reports SERVING.

    ``health_address`` adds a plain-text listener there serving the health service alone (with the
    same status), for probes that cannot speak the main port's TLS or present a certificate, with
    the main port's connection limits. ``health_limits`` caps the health Watch streams.
    """
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
    jobs = DisputeJobs(dispute_jobs)
    compute = ComputePool(threads, max(0, max_concurrent - threads), max_calls_per_client)
    servicer = RefereeServicer(compute, jobs, limits, max_message_bytes=max_message_bytes)
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
    )
    warden.start()
    referee = Referee(
        server, port, health_servicer, servicer, health_server=health_server, health_port=health_port, warden=warden
    )
    await referee.set_serving(True)
    referee._watch = asyncio.get_running_loop().create_task(referee._watch_health())
    return referee


class ServerThread:
    """A server on an event loop in a thread of its own: for tests and in-process use from sync code."""

    def __init__(self, address: str = "127.0.0.1:0", **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="referee-server", daemon=True)
        self._thread.start()
        try:
            self.referee: Referee = self.call(create_server(address, **options))
        except BaseException:
            self._close_loop()
            raise
        self.port = self.referee.port
        self.address = f"127.0.0.1:{self.port}" if address.startswith("127.0.0.1:") else address

    def call(self, coroutine: Awaitable[_T], timeout: float | None = 60) -> _T:
        """Run ``coroutine`` on the server's loop and return its result."""
        future: Future[_T] = asyncio.run_coroutine_threadsafe(_awaited(coroutine), self._loop)
        return future.result(timeout)

    def stop(self, grace: float = 0) -> None:
        """Drain the server (see ``Referee.drain``) and end its thread."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self.call(self.referee.drain(grace), timeout=grace + 10)
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


# The serve subcommand -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``serve`` to ``parser``; each has a ``REMIGIO_*`` environment twin."""
    env = os.environ.get
    connection = DEFAULT_CONNECTION_LIMITS

    def option(flag: str, kind: Any, default: object, help_text: str, metavar: str | None = None, **more: Any) -> None:
        name = "REMIGIO_" + flag.lstrip("-").upper().replace("-", "_")
        # A string default goes through `type`, so a bad env value is reported like a bad flag.
        parser.add_argument(
            flag,
            type=kind,
            default=env(name, str(default)) if default is not None else env(name),
            metavar=metavar,
            help=f"{help_text} (env {name}; default {default if default is not None else 'see below'})",
            **more,
        )

    option("--host", str, DEFAULT_HOST, "address to listen on")
    option("--port", _port, DEFAULT_PORT, "port to listen on, 0 for any free one")
    option("--workers", _positive_int, 1, "server processes sharing the port, supervised by this one", "N")
    option("--threads", _positive_int, DEFAULT_THREADS, "compute slots per process: calls solved at the same time", "N")
    parser.add_argument("--no-reflection", dest="reflection", action="store_false", help="turn server reflection off")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env("REMIGIO_LOG_FORMAT", "text"),
        help="one log line per call as text or as JSON lines (env REMIGIO_LOG_FORMAT; default text)",
    )
    option(
        "--grace",
        _non_negative_float,
        DEFAULT_GRACE_SECONDS,
        "on SIGTERM/SIGINT, how long calls in flight may take to finish",
        "SECONDS",
    )
    option(
        "--max-concurrent",
        _positive_int,
        DEFAULT_MAX_CONCURRENT,
        "calls solving or waiting for a compute slot per process; more are refused with RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-calls-per-client",
        _positive_int,
        DEFAULT_MAX_CALLS_PER_CLIENT,
        "of those, calls of one client (its API key, or its address without keys); a key file's "
        "CONCURRENCY field overrides it per key",
        "N",
    )
    option(
        "--solve-cap",
        _positive_float,
        DEFAULT_SOLVE_CAP_SECONDS,
        "most time a call may take, also bounded by the client's deadline",
        "SECONDS",
    )
    option(
        "--dispute-jobs",
        _positive_int,
        None,
        "processes judging CheckDisputes cases, per server process (default: usable cores / workers; the cgroup CPU quota counts)",
        "N",
    )
    option("--max-message-bytes", _positive_int, MAX_MESSAGE_BYTES, "largest request or reply", "BYTES")
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=env("REMIGIO_METRICS_PORT"),
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, summed over the workers (env REMIGIO_METRICS_PORT; default off)",
    )
    option(
        "--metrics-host",
        str,
        metrics.DEFAULT_HOST,
        "address the metrics port binds; the metrics name API keys, so open it only to the scraper",
        "HOST",
    )
    option(
        "--metrics-max-connections",
        _positive_int,
        metrics.DEFAULT_MAX_CONNECTIONS,
        "connections open at once to the metrics port; a new one beyond them replaces the oldest that has not sent its request, or is closed",
        "N",
    )
    option(
        "--metrics-timeout",
        _positive_float,
        metrics.DEFAULT_TIMEOUT_SECONDS,
        "a metrics connection must send its request and take its reply within this long",
        "SECONDS",
    )
    parser.add_argument(
        "--runtime-dir",
        default=env("REMIGIO_RUNTIME_DIR") or None,
        metavar="DIR",
        help="a writable directory for the files the server keeps while it runs, such as the workers' metrics (env REMIGIO_RUNTIME_DIR; default /dev/shm, else the temporary directory)",
    )
    parser.add_argument(
        "--otlp-endpoint",
        type=_otlp_endpoint,
        default=env("REMIGIO_OTLP_ENDPOINT") or None,
        metavar="URL",
        help="send a span of every call to the OTLP/gRPC collector at URL, http://HOST:PORT or https://HOST:PORT; needs the otel extra (env REMIGIO_OTLP_ENDPOINT; default off)",
    )
    option(
        "--receive-timeout",
        _positive_float,
        DEFAULT_RECEIVE_TIMEOUT_SECONDS,
        "most time a unary call's request may take to arrive; then DEADLINE_EXCEEDED",
        "SECONDS",
    )
    option(
        "--stream-idle-timeout",
        _positive_float,
        DEFAULT_STREAM_IDLE_SECONDS,
        "a CheckDisputes stream that sends no case and reads no verdict this long is ended (DEADLINE_EXCEEDED)",
        "SECONDS",
    )
    option(
        "--max-streams",
        _positive_int,
        DEFAULT_MAX_STREAMS,
        "CheckDisputes streams per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-streams-per-client",
        _positive_int,
        DEFAULT_MAX_STREAMS_PER_CLIENT,
        "CheckDisputes streams per client address per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-health-watches",
        _positive_int,
        DEFAULT_HEALTH_LIMITS.max_watches,
        "health Watch streams per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-health-watches-per-connection",
        _positive_int,
        DEFAULT_HEALTH_LIMITS.max_watches_per_connection,
        "health Watch streams per connection; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-streams-per-connection",
        _positive_int,
        connection.max_streams_per_connection,
        "calls in flight on one HTTP/2 connection (its MAX_CONCURRENT_STREAMS)",
        "N",
    )
    option("--max-connections", _positive_int, connection.max_connections, "open connections per process", "N")
    option(
        "--max-connections-per-peer",
        _positive_int,
        connection.max_connections_per_peer,
        "open connections per client address per process; the newest beyond it are shut down (silent ones first)",
        "N",
    )
    option(
        "--handshake-timeout",
        _positive_float,
        connection.handshake_timeout_seconds,
        "a connection that has not finished its TLS and HTTP/2 handshake by then is closed",
        "SECONDS",
    )
    option(
        "--max-connection-idle",
        _positive_float,
        connection.max_connection_idle_seconds,
        "a connection with no call this long is closed (GOAWAY)",
        "SECONDS",
    )
    option(
        "--max-connection-age",
        _positive_float,
        connection.max_connection_age_seconds,
        "a connection this old is sent GOAWAY, so clients reconnect and spread over replicas",
        "SECONDS",
    )
    option(
        "--max-connection-age-grace",
        _positive_float,
        connection.max_connection_age_grace_seconds,
        "time the calls of an aged connection get to finish before it is closed",
        "SECONDS",
    )
    option(
        "--heartbeat-timeout",
        _positive_float,
        DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
        "with --workers above 1, a worker silent this long is killed and replaced",
        "SECONDS",
    )
    option("--tls-cert", str, None, "serve TLS with this PEM certificate chain, read again when it changes", "FILE")
    option("--tls-key", str, None, "the private key (PEM) of --tls-cert", "FILE")
    option(
        "--tls-client-ca", str, None, "mutual TLS: clients must present a certificate signed by this CA (PEM)", "FILE"
    )
    option(
        "--api-keys",
        str,
        None,
        "require an API key from this key file (NAME SHA256HEX [CALLS_PER_SECOND] lines)",
        "FILE",
    )
    option("--health-port", _port, None, "a plain-text listener serving the health service alone", "PORT")
    parser.add_argument(
        "--debug-pid",
        action="store_true",
        default=env("REMIGIO_DEBUG_PID", "") not in ("", "0"),
        help="name the serving process in every reply's trailing metadata (x-referee-pid); for debugging only (env REMIGIO_DEBUG_PID)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; return the exit status (0 after a clean drain)."""
    configure_logging(args.log_format)
    from referee.service import supervisor

    problem = supervisor.port_in_use(args.host, args.port)
    if problem:
        _say(f"remigio-referee: error: {problem}")
        return 1
    if args.otlp_endpoint and not tracing.available():
        _say(f"remigio-referee: error: {tracing.MISSING}")
        return 1
    try:
        # Checked here, once, so bad files stop the server before any worker starts.
        args.access = access.AccessPlan.from_flags(
            args.tls_cert, args.tls_key, args.tls_client_ca, args.api_keys, args.health_port
        )
    except ValueError as error:
        _say(f"remigio-referee: error: {error}")
        return 1
    warning = args.access.warning(args.host, args.port)
    if warning:
        log.warning("%s", warning)
    # The buckets are made before the workers are forked, so every worker (and every worker
    # started in place of one that died) shares them.
    try:
        if args.runtime_dir:
            os.makedirs(args.runtime_dir, exist_ok=True)
        args.quotas = access.QuotaTable(directory=args.runtime_dir) if args.access.key_file is not None else None
    except OSError as error:
        where = repr(args.runtime_dir) if args.runtime_dir else "the runtime directory"
        _say(
            f"remigio-referee: error: cannot write in {where} ({error.strerror or error}); "
            "give a writable directory with --runtime-dir or REMIGIO_RUNTIME_DIR"
        )
        return 1
    try:
        stop_metrics = _start_metrics(args)
    except OSError as error:
        _say(f"remigio-referee: error: {error}")
        return 1
    try:
        if args.workers > 1:
            return supervisor.serve_workers(args)
        metrics.workers_running(1)
        return serve(args, args.port)
    finally:
        stop_metrics()


def _start_metrics(args: argparse.Namespace) -> Callable[[], None]:
    """Turn metrics on and serve ``/metrics`` from this process when ``--metrics-port`` asks for
    it (before any worker is forked, so every worker records); return what turns them off."""
    if args.metrics_port is None:
        # Metrics are off: no process of this server writes files, whatever the environment says.
        os.environ.pop(metrics.DIRECTORY_ENV, None)
        return lambda: None
    metrics.enable(args.runtime_dir or metrics.default_runtime_dir())
    try:
        port, stop = metrics.serve(
            args.metrics_host, args.metrics_port, args.metrics_max_connections, args.metrics_timeout
        )
    except OSError:
        metrics.disable()
        raise
    _say(f"remigio-referee: metrics on http://{_address(args.metrics_host, port)}/metrics (pid {os.getpid()})")

    def stop_all() -> None:
        stop()
        metrics.disable()

    return stop_all


# Descriptors kept for what is not a connection: files, pipes, the dispute job processes, logs.
_SPARE_DESCRIPTORS = 256


def descriptor_room(max_connections: int) -> int:
    """Raise this process's descriptor limit to its hard limit; the connections that fit in it.

    gRPC's core takes a descriptor per connection: a connection cap above the limit would end in
    EMFILE (failed accepts, failed file opens) instead of a clean refusal.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    if soft == resource.RLIM_INFINITY:
        return max_connections
    room = max(1, soft - _SPARE_DESCRIPTORS)
    if max_connections > room:
        log.warning(
            "--max-connections %d is more than the descriptor limit allows: %d connections (limit %d)",
            max_connections,
            room,
            soft,
        )
        return room
    return max_connections


def serve(args: argparse.Namespace, port: int, reuse_port: bool = False, heartbeat_fd: int | None = None) -> int:
    """Run one server in this process until a signal, then drain it; the exit status."""
    return asyncio.run(_serve(args, port, reuse_port, heartbeat_fd))


async def _serve(args: argparse.Namespace, port: int, reuse_port: bool, heartbeat_fd: int | None) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    caught: list[signal.Signals] = []

    def on_signal(signum: signal.Signals) -> None:
        caught.append(signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    plan: access.AccessPlan = getattr(args, "access", None) or access.AccessPlan()
    try:
        interceptor = plan.interceptor(getattr(args, "quotas", None), self_metered=(SERVICE_NAME,))
        credentials = plan.credentials()
    except ValueError as error:  # the files changed since the parent read them
        _say(f"remigio-referee: error: {error}")
        return 1
    # SIGHUP reads the key file again (a server without keys has nothing to read, and lives on).
    loop.add_signal_handler(signal.SIGHUP, interceptor.keys.reload if interceptor and interceptor.keys else _no_reload)
    address = _address(args.host, port)
    try:
        referee = await create_server(
            address,
            threads=args.threads,
            max_concurrent=args.max_concurrent,
            max_calls_per_client=args.max_calls_per_client,
            limits=ServiceLimits(
                solve_cap_seconds=args.solve_cap,
                receive_timeout_seconds=args.receive_timeout,
                stream_idle_seconds=args.stream_idle_timeout,
                max_streams=args.max_streams,
                max_streams_per_client=args.max_streams_per_client,
                reveal_pid=args.debug_pid,
            ),
            connections=ConnectionLimits(
                max_streams_per_connection=args.max_streams_per_connection,
                max_connections=descriptor_room(args.max_connections),
                max_connection_idle_seconds=args.max_connection_idle,
                max_connection_age_seconds=args.max_connection_age,
                max_connection_age_grace_seconds=args.max_connection_age_grace,
                handshake_timeout_seconds=args.handshake_timeout,
                max_connections_per_peer=args.max_connections_per_peer,
            ),
            reflection=args.reflection,
            max_message_bytes=args.max_message_bytes,
            reuse_port=reuse_port,
            dispute_jobs=args.dispute_jobs or max(1, usable_cpus() // args.workers),
            interceptors=[interceptor] if interceptor is not None else [],
            credentials=credentials,
            health_address=_address(args.host, plan.health_port) if plan.health_port is not None else None,
            health_limits=HealthLimits(args.max_health_watches, args.max_health_watches_per_connection),
        )
    except OSError as error:
        _say(f"remigio-referee: error: {error}")
        return 1
    if args.otlp_endpoint:
        # Here, in the serving process: the exporter's thread and channel do not survive a fork.
        tracing.configure(args.otlp_endpoint)
    _tune_garbage_collector()
    beat = loop.create_task(_heartbeat(heartbeat_fd)) if heartbeat_fd is not None else None
    _say(f"remigio-referee: listening on {_address(args.host, referee.port)} (pid {os.getpid()})")
    if referee.health_port is not None:
        _say(f"remigio-referee: health on {_address(args.host, referee.health_port)} (pid {os.getpid()})")
    await stop.wait()
    log.info("%s received: draining for up to %gs", caught[0].name, args.grace)
    await referee.drain(args.grace)
    if beat is not None:
        beat.cancel()
    tracing.shutdown()  # the spans still waiting go to the collector
    _say(f"remigio-referee: stopped (pid {os.getpid()})")
    return 0


def _no_reload() -> None:
    log.info("SIGHUP received: no key file to read again")


async def _heartbeat(fd: int) -> None:
    """Tell the supervising parent, from the event loop, that this process still answers."""
    os.set_blocking(fd, False)
    while True:
        with contextlib.suppress(BlockingIOError):  # the parent is slow to read: it will see the next
            os.write(fd, b".")
        await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)


def _tune_garbage_collector() -> None:
    """Keep the garbage collector's full collections out of the way of calls.

    A full collection walks every tracked object the process holds, and every call in the
    process waits until it is done:

    - OR-Tools brings numpy and pandas along, so a loaded server holds about 55,000 objects
      that live as long as the process. Frozen here, they are never walked again (a full
      collection of them took 20 to 70 ms, and under load that was the slowest 1% of calls).
    - The caches of linkings and candidate groups hold 30,000 to 70,000 more once warm, and
      their turnover set off a full collection every 5 or 6 seconds under load: 6 to 37 ms
      each. A full collection now waits for 1,000 collections of the middle generation instead
      of 10 (about every 10 minutes under load); the young generations are collected as
      before, so cycles among a call's own objects still go at once.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


def _say(line: str) -> None:
    """One status line on stderr in a single write, so lines from several workers never interleave."""
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


# Logging ---------------------------------------------------------------------------------------


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; a call's fields (method, code, duration_ms, ...) at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "rpc", {}))
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(log_format: str = "text") -> None:
    """Log INFO and above to stderr, as text or as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLinesFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


# Argument types ----------------------------------------------------------------------------------


def _otlp_endpoint(text: str) -> str:
    try:
        return tracing.check_endpoint(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _port(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _positive_float(text: str) -> float:
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m referee.service.server``: the serve subcommand on its own."""
    parser = argparse.ArgumentParser(
        prog="python -m referee.service.server", description="Serve the Remigio referee over gRPC."
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


__all__ = [
    "SERVICE_NAME",
    "ConnectionLimits",
    "Referee",
    "ServerThread",
    "add_arguments",
    "configure_logging",
    "create_server",
    "run",
    "serve",
]


if __name__ == "__main__":
    sys.exit(main())
