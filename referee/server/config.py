"""The server's configuration: every ``serve`` flag, its ``REMIGIO_*`` environment twin, and the
one frozen ``ServerConfig`` they make.

``add_arguments`` defines the flags; ``ServerConfig.from_args`` reads them once, in the process
that starts the server, and the config is handed to whatever needs a part of it (the supervisor,
each worker, ``create_server``). Nothing else reads the flags.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from referee.game.limits import MESSAGE_BYTES
from referee.server import defaults
from referee.server.flags import env_name, with_env

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

ENV_PREFIX = "REMIGIO_"


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """The servicer's budgets and caps (each is a ``serve`` flag; docs/operations.md)."""

    solve_cap_seconds: float = defaults.SOLVE_CAP_SECONDS
    receive_timeout_seconds: float = defaults.RECEIVE_TIMEOUT_SECONDS
    stream_idle_seconds: float = defaults.STREAM_IDLE_SECONDS
    max_streams: int = defaults.MAX_STREAMS
    max_streams_per_client: int = defaults.MAX_STREAMS_PER_CLIENT
    reveal_pid: bool = False


@dataclass(frozen=True, slots=True)
class HealthLimits:
    """Watch streams at once per process and per connection."""

    max_watches: int = defaults.HEALTH_MAX_WATCHES
    max_watches_per_connection: int = defaults.HEALTH_MAX_WATCHES_PER_CONNECTION


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """HTTP/2 and connection limits, enforced by gRPC's core for every connection (docs/operations.md)."""

    max_streams_per_connection: int = 100
    # For the server's memory. The warden holds it, shedding connections that never called or
    # idle longest; gRPC's core refuses only at core_connections (core_cap: room above it), so a
    # new client is let in to call while the silent ones are shed (docs/operations.md).
    max_connections: int = 10_000
    core_connections: int | None = None
    max_connection_idle_seconds: float = 60.0
    max_connection_age_seconds: float = 300.0
    max_connection_age_grace_seconds: float = 10.0
    # The server's own pings find a client that went away while its calls were in flight; a
    # minute is enough for that, since each stream also has --stream-idle-timeout.
    keepalive_seconds: float = 60.0
    keepalive_timeout_seconds: float = 20.0
    # Below the public client's 15 s pings (referee.client.KEEPALIVE_SECONDS) with room to spare,
    # so a client's keepalive is never taken for abuse (docs/operations.md, "Keepalive").
    min_client_ping_seconds: float = 10.0
    # A connection that has not finished its handshake by then is closed: a client sends its
    # HTTP/2 preface (after TLS) at once, and silent connections count against max_connections.
    handshake_timeout_seconds: float = 5.0
    max_connections_per_peer: int = defaults.MAX_CONNECTIONS_PER_PEER
    # A connection that has made no call this long after it was opened is closed: it only holds
    # a slot (a client connects to call; one that reconnects later loses nothing).
    first_call_seconds: float = defaults.FIRST_CALL_SECONDS

    def options(self) -> list[tuple[str, int]]:
        """These limits as gRPC channel arguments."""

        def ms(seconds: float) -> int:
            return max(1, round(seconds * 1000))

        return [
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.max_allowed_incoming_connections", self.core_connections or defaults.core_cap(self.max_connections)),
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


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """The Prometheus endpoint: off when ``port`` is None."""

    port: int | None = None
    host: str = defaults.METRICS_HOST
    max_connections: int = defaults.METRICS_MAX_CONNECTIONS
    timeout_seconds: float = defaults.METRICS_TIMEOUT_SECONDS


@dataclass(frozen=True, slots=True)
class AccessConfig:
    """The files of TLS and API keys, and the plain-text health port; all off by default."""

    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    api_keys: str | None = None
    health_port: int | None = None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``serve`` was asked for, read once from the flags and the environment."""

    host: str = defaults.HOST
    port: int = defaults.PORT
    workers: int = 1
    threads: int = defaults.THREADS
    max_concurrent: int = defaults.MAX_CONCURRENT
    max_calls_per_client: int = defaults.MAX_CALLS_PER_CLIENT
    dispute_jobs: int | None = None  # None: usable cores / workers
    max_message_bytes: int = MESSAGE_BYTES
    reflection: bool = True
    # Deal records whose deck order was not committed are the violation UNCOMMITTED_SHUFFLE.
    require_committed_shuffle: bool = False
    log_format: str = "text"
    grace_seconds: float = defaults.GRACE_SECONDS
    heartbeat_timeout_seconds: float = defaults.HEARTBEAT_TIMEOUT_SECONDS
    service: ServiceLimits = field(default_factory=ServiceLimits)
    connections: ConnectionLimits = field(default_factory=lambda: ConnectionLimits())
    health: HealthLimits = field(default_factory=HealthLimits)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    access: AccessConfig = field(default_factory=AccessConfig)
    runtime_dir: str | None = None
    otlp_endpoint: str | None = None
    # Proxies (CIDR networks) whose x-forwarded-for names the client: a gateway in front.
    trusted_proxies: str = ""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServerConfig:
        """The config of parsed ``serve`` flags (``add_arguments``; ``flags.check_env`` has
        reported any variable that did not convert)."""
        return cls(
            host=args.host,
            port=args.port,
            workers=args.workers,
            threads=args.threads,
            max_concurrent=args.max_concurrent,
            max_calls_per_client=args.max_calls_per_client,
            dispute_jobs=args.dispute_jobs,
            max_message_bytes=args.max_message_bytes,
            reflection=args.reflection,
            require_committed_shuffle=args.require_committed_shuffle,
            log_format=args.log_format,
            grace_seconds=args.grace,
            heartbeat_timeout_seconds=args.heartbeat_timeout,
            service=ServiceLimits(
                solve_cap_seconds=args.solve_cap,
                receive_timeout_seconds=args.receive_timeout,
                stream_idle_seconds=args.stream_idle_timeout,
                max_streams=args.max_streams,
                max_streams_per_client=args.max_streams_per_client,
                reveal_pid=args.debug_pid,
            ),
            connections=ConnectionLimits(
                max_streams_per_connection=args.max_streams_per_connection,
                max_connections=args.max_connections,
                max_connection_idle_seconds=args.max_connection_idle,
                max_connection_age_seconds=args.max_connection_age,
                max_connection_age_grace_seconds=args.max_connection_age_grace,
                handshake_timeout_seconds=args.handshake_timeout,
                max_connections_per_peer=args.max_connections_per_peer,
                first_call_seconds=args.first_call_timeout,
                keepalive_seconds=args.keepalive,
                keepalive_timeout_seconds=args.keepalive_timeout,
                min_client_ping_seconds=args.min_client_ping_interval,
            ),
            health=HealthLimits(args.max_health_watches, args.max_health_watches_per_connection),
            metrics=MetricsConfig(
                args.metrics_port, args.metrics_host, args.metrics_max_connections, args.metrics_timeout
            ),
            access=AccessConfig(args.tls_cert, args.tls_key, args.tls_client_ca, args.api_keys, args.health_port),
            runtime_dir=args.runtime_dir,
            otlp_endpoint=args.otlp_endpoint,
            trusted_proxies=args.trusted_proxies or "",
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``serve`` to ``parser``; each has a ``REMIGIO_*`` environment twin."""
    connection = ConnectionLimits()
    add = with_env(parser, ENV_PREFIX, os.environ, mark=False)

    def option(
        flag: str,
        kind: Any,
        default: object,
        help_text: str,
        metavar: str | None = None,
        *,
        unset: str = "off",
        **more: Any,
    ) -> None:
        """A flag and its twin; ``unset`` says in the help what a None default means."""
        name = env_name(ENV_PREFIX, flag)
        # A default passes through ``kind`` as a value from the environment would.
        add(
            flag,
            type=kind,
            default=kind(str(default)) if default is not None else None,
            metavar=metavar,
            help=f"{help_text} (env {name}; default {default if default is not None else unset})",
            **more,
        )

    option("--host", str, defaults.HOST, "address to listen on")
    option("--port", _port, defaults.PORT, "port to listen on, 0 for any free one")
    option("--workers", _positive_int, 1, "server processes sharing the port, supervised by this one", "N")
    option(
        "--threads", _positive_int, defaults.THREADS, "compute slots per process: calls solved at the same time", "N"
    )
    parser.add_argument(
        "--no-reflection", dest="reflection", action="store_false", help="turn server reflection off (default on)"
    )
    add(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="one log line per call as text or as JSON lines (env REMIGIO_LOG_FORMAT; default text)",
    )
    option(
        "--grace",
        _non_negative_float,
        defaults.GRACE_SECONDS,
        "on SIGTERM/SIGINT, how long calls in flight may take to finish",
        "SECONDS",
    )
    option(
        "--max-concurrent",
        _positive_int,
        defaults.MAX_CONCURRENT,
        "calls solving or waiting for a compute slot per process; more are refused with RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-calls-per-client",
        _positive_int,
        defaults.MAX_CALLS_PER_CLIENT,
        "of those, calls of one client (its API key, or its address without keys); a key file's "
        "CONCURRENCY field overrides it per key",
        "N",
    )
    option(
        "--solve-cap",
        _positive_float,
        defaults.SOLVE_CAP_SECONDS,
        "most time a call may take, also bounded by the client's deadline",
        "SECONDS",
    )
    option(
        "--dispute-jobs",
        _positive_int,
        None,
        "processes judging CheckDisputes cases, per server process",
        "N",
        unset="usable cores / workers, the cgroup CPU quota counted",
    )
    option("--max-message-bytes", _positive_int, MESSAGE_BYTES, "largest request or reply", "BYTES")
    add(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, summed over the workers (env REMIGIO_METRICS_PORT; default off)",
    )
    option(
        "--metrics-host",
        str,
        defaults.METRICS_HOST,
        "address the metrics port binds; the metrics name API keys, so open it only to the scraper",
        "HOST",
    )
    option(
        "--metrics-max-connections",
        _positive_int,
        defaults.METRICS_MAX_CONNECTIONS,
        "connections open at once to the metrics port; a new one beyond them replaces the oldest that has not sent its request, or is closed",
        "N",
    )
    option(
        "--metrics-timeout",
        _positive_float,
        defaults.METRICS_TIMEOUT_SECONDS,
        "a metrics connection must send its request and take its reply within this long",
        "SECONDS",
    )
    add(
        "--runtime-dir",
        metavar="DIR",
        help="a writable directory for the files the server keeps while it runs, such as the workers' metrics (env REMIGIO_RUNTIME_DIR; default /dev/shm, else the temporary directory)",
    )
    add(
        "--otlp-endpoint",
        type=_otlp_endpoint,
        metavar="URL",
        help="send a span of every call to the OTLP/gRPC collector at URL, http://HOST:PORT or https://HOST:PORT; needs the otel extra (env REMIGIO_OTLP_ENDPOINT; default off)",
    )
    option(
        "--receive-timeout",
        _positive_float,
        defaults.RECEIVE_TIMEOUT_SECONDS,
        "most time a unary call's request may take to arrive; then DEADLINE_EXCEEDED",
        "SECONDS",
    )
    option(
        "--stream-idle-timeout",
        _positive_float,
        defaults.STREAM_IDLE_SECONDS,
        "a CheckDisputes stream that sends no case and reads no verdict this long is ended (DEADLINE_EXCEEDED)",
        "SECONDS",
    )
    option(
        "--max-streams",
        _positive_int,
        defaults.MAX_STREAMS,
        "CheckDisputes streams per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-streams-per-client",
        _positive_int,
        defaults.MAX_STREAMS_PER_CLIENT,
        "CheckDisputes streams per client address per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-health-watches",
        _positive_int,
        HealthLimits().max_watches,
        "health Watch streams per process; more are RESOURCE_EXHAUSTED",
        "N",
    )
    option(
        "--max-health-watches-per-connection",
        _positive_int,
        HealthLimits().max_watches_per_connection,
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
    option(
        "--max-connections",
        _positive_int,
        connection.max_connections,
        "open connections per process; past it those that never called, then those idle longest, are shut down",
        "N",
    )
    option(
        "--max-connections-per-peer",
        _positive_int,
        connection.max_connections_per_peer,
        "open connections per client address (IPv6: per /64) per process; the newest beyond it are shut down "
        "(silent ones first)",
        "N",
    )
    option(
        "--first-call-timeout",
        _positive_float,
        connection.first_call_seconds,
        "a connection that has made no call by then is closed",
        "SECONDS",
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
        "--keepalive",
        _positive_float,
        connection.keepalive_seconds,
        "ping a connection with calls in flight after this long without data from the client",
        "SECONDS",
    )
    option(
        "--keepalive-timeout",
        _positive_float,
        connection.keepalive_timeout_seconds,
        "a client that does not answer a ping this long is dropped (its calls end)",
        "SECONDS",
    )
    option(
        "--min-client-ping-interval",
        _positive_float,
        connection.min_client_ping_seconds,
        "a client pinging more often than this (or at all without calls) is sent GOAWAY after two strikes",
        "SECONDS",
    )
    option(
        "--heartbeat-timeout",
        _positive_float,
        defaults.HEARTBEAT_TIMEOUT_SECONDS,
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
        "require an API key from this key file (NAME SHA256HEX [CALLS_PER_SECOND|- [CONCURRENCY]] lines)",
        "FILE",
    )
    option("--health-port", _port, None, "a plain-text listener serving the health service alone", "PORT")
    option(
        "--trusted-proxies",
        _networks,
        None,
        "proxies (CIDR,...) whose x-forwarded-for names the client, for per-client limits and logs: "
        "a gateway in front; from any other peer the header is ignored",
        "CIDR,...",
        unset="none",
    )
    add(
        "--require-committed-shuffle",
        action="store_true",
        help="judge only deal records whose deck order was committed before the deal (a shuffle with "
        "server_seed_hash): any other is the violation UNCOMMITTED_SHUFFLE, for platforms that promise "
        "provably fair deals (env REMIGIO_REQUIRE_COMMITTED_SHUFFLE; default off)",
    )
    add(
        "--debug-pid",
        action="store_true",
        help="name the serving process in every reply's trailing metadata (x-referee-pid); for debugging only (env REMIGIO_DEBUG_PID; default off)",
    )


# Argument types ----------------------------------------------------------------------------------


def check_endpoint(url: str) -> str:
    """``url`` if it is an OTLP/gRPC endpoint (``http://host:port`` or ``https://host:port``), else ValueError."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise ValueError(f"an OTLP endpoint is http://HOST:PORT or https://HOST:PORT, not {url[:80]!r}")
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"an OTLP endpoint is http://HOST:PORT or https://HOST:PORT, not {url[:80]!r}") from None
    return url


def parse_networks(text: str) -> tuple[Network, ...]:
    """``CIDR,CIDR,...`` (a bare address is a /32 or /128); ValueError naming the bad item."""
    networks = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"not an address or CIDR network: {item[:64]!r}") from None
    return tuple(networks)


def _otlp_endpoint(text: str) -> str:
    try:
        return check_endpoint(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _networks(text: str) -> str:
    try:
        parse_networks(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


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


__all__ = [
    "AccessConfig",
    "ConnectionLimits",
    "HealthLimits",
    "MetricsConfig",
    "Network",
    "ServerConfig",
    "ServiceLimits",
    "add_arguments",
    "check_endpoint",
    "parse_networks",
]
