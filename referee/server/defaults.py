"""Every default of ``serve``, as plain values: the configuration (``config``) and the runtime
modules that use them read them here, so the configuration imports nothing it configures.

This module imports nothing. The gateway's image carries it with the connection warden.
"""

from __future__ import annotations

# Where to listen.
HOST, PORT = "127.0.0.1", 50051
# Compute slots per process. Python runs one thread at a time, so more slots add no speed: two
# keep one long solve from holding up every short call, and fewer threads taking the interpreter
# lock from one another keep calls finishing in turn (a lower p99). More processes, not threads,
# use more cores.
THREADS = 2
MAX_CONCURRENT = 64
# One client's share of those: no client can keep the others out by keeping calls in flight.
MAX_CALLS_PER_CLIENT = 16
GRACE_SECONDS = 5.0
HEARTBEAT_TIMEOUT_SECONDS = 5.0

# The servicer's budgets and caps.
SOLVE_CAP_SECONDS = 5.0
RECEIVE_TIMEOUT_SECONDS = 10.0
STREAM_IDLE_SECONDS = 30.0
MAX_STREAMS = 8
MAX_STREAMS_PER_CLIENT = 4

# The health service's watch streams.
HEALTH_MAX_WATCHES = 100
HEALTH_MAX_WATCHES_PER_CONNECTION = 4
HEALTH_RECEIVE_TIMEOUT_SECONDS = 10.0

# The metrics port: loopback unless told otherwise (the metrics name API keys, see
# docs/operations.md); a few connections at once, each exchange within a few seconds. Prometheus
# opens one connection per scrape and sends its request at once.
METRICS_HOST = "127.0.0.1"
METRICS_MAX_CONNECTIONS = 16
METRICS_TIMEOUT_SECONDS = 5.0

# The connection warden.
MAX_CONNECTIONS_PER_PEER = 64
FIRST_CALL_SECONDS = 10.0
# gRPC's core refuses at this many times the warden's cap: room for new clients while the warden
# sheds, and still a bound on what a flood faster than the sweeps can open.
CORE_CAP_FACTOR = 4


def core_cap(max_connections: int) -> int:
    """gRPC core's own connection cap for a warden cap of ``max_connections``."""
    return max_connections * CORE_CAP_FACTOR


__all__ = [
    "CORE_CAP_FACTOR",
    "FIRST_CALL_SECONDS",
    "GRACE_SECONDS",
    "HEALTH_MAX_WATCHES",
    "HEALTH_MAX_WATCHES_PER_CONNECTION",
    "HEALTH_RECEIVE_TIMEOUT_SECONDS",
    "HEARTBEAT_TIMEOUT_SECONDS",
    "HOST",
    "MAX_CALLS_PER_CLIENT",
    "MAX_CONCURRENT",
    "MAX_CONNECTIONS_PER_PEER",
    "MAX_STREAMS",
    "MAX_STREAMS_PER_CLIENT",
    "METRICS_HOST",
    "METRICS_MAX_CONNECTIONS",
    "METRICS_TIMEOUT_SECONDS",
    "PORT",
    "RECEIVE_TIMEOUT_SECONDS",
    "SOLVE_CAP_SECONDS",
    "STREAM_IDLE_SECONDS",
    "THREADS",
    "core_cap",
]
