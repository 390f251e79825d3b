"""Prometheus metrics: gRPC's per-call metrics under the names of gRFC A66, and the referee's own.

Every process that counts (the parent, each worker, each dispute job process) writes its values
to files of its own in one directory, prometheus_client's multiprocess mode, and ``/metrics`` in
the parent sums the files. A worker that dies leaves its files behind, so its counts are not
lost, and the worker started in its place writes new files under its new pid, so nothing is
counted twice; only its live gauges (calls in flight) go, when the parent reports it dead
(``process_died``).

Off by default: until ``enable`` has run in this process or in an ancestor (the directory is
then in the environment, which forked and spawned children inherit), every function that
records is a no-op that costs one attribute lookup.

The names (``docs/operations.md`` lists them for operators):

- ``grpc_server_call_started_total{grpc_method}`` and the histogram
  ``grpc_server_call_duration_seconds{grpc_method,grpc_status}``, gRFC A66's
  ``grpc.server.call.started`` and ``grpc.server.call.duration`` as Prometheus writes them; the
  method is ``remigio.referee.v1.RefereeService/SolveHand``, the status ``OK``,
  ``INVALID_ARGUMENT``, ...
- ``referee_solve_duration_seconds{engine}``, ``referee_linking_cache_hits_total``,
  ``referee_linking_cache_misses_total``, ``referee_replies_remembered_total``,
  ``referee_dispute_cases_total{outcome}``,
  ``referee_calls_in_flight{grpc_method}``, ``referee_workers_up``,
  ``referee_worker_restarts_total``, ``referee_auth_failures_total{key}``,
  ``referee_quota_refusals_total{key}``, ``referee_metrics_connections_dropped_total{reason}``,
  ``referee_build_info{version,api}``, ``referee_tls_certificate_expiry_timestamp_seconds`` and
  ``referee_reload_failures_total{file}``.
- The standard ``process_*`` and ``python_*`` collectors of prometheus_client, of the process that
  serves ``/metrics`` (the parent of ``--workers``, or the one server process).
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee import __version__
from referee.game.linking import observe_linkings
from referee.server import defaults
from referee.server.logs import process_id
from referee.server.metrics_http import DROP_REASONS, MetricsServer

# prometheus_client's own switch: a process with it in its environment writes to that directory.
DIRECTORY_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The directory's name under the runtime directory; the pid is the parent's, so a directory
# left by a parent that is gone can be told from one in use.
DIRECTORY_PREFIX = "remigio-metrics-"


# gRFC A66's buckets for call durations, in seconds (10 µs to 100 s).
CALL_BUCKETS = (
    0,
    0.00001,
    0.00005,
    0.0001,
    0.0003,
    0.0006,
    0.0008,
    0.001,
    0.002,
    0.003,
    0.004,
    0.005,
    0.006,
    0.008,
    0.01,
    0.013,
    0.016,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.065,
    0.08,
    0.1,
    0.13,
    0.16,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.65,
    0.8,
    1,
    2,
    5,
    10,
    20,
    50,
    100,
)
# An engine's solve of one hand: a cache hit never gets here, a CP-SAT solve takes milliseconds,
# the solve cap (5 s by default) bounds the tail.
SOLVE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


# The contract's package version: the API line clients code against (the package's semantic
# version follows it; README, "Versions and releases").
API_LINE = "v1"


@dataclass(frozen=True, slots=True)
class _Instruments:
    """The metrics of this process, made once the directory is known (``_instruments``)."""

    calls_started: Any
    call_duration: Any
    calls_in_flight: Any
    solve_duration: Any
    cache_hits: Any
    cache_misses: Any
    replies_remembered: Any
    dispute_cases: Any
    workers_up: Any
    worker_restarts: Any
    auth_failures: Any
    quota_refusals: Any
    connections_refused: Any
    build_info: Any
    metrics_dropped: Any
    tls_expiry: Any
    reload_failures: Any
    # The children of the per-call metrics, by method (and status): ``labels`` checks and joins
    # its values on every look-up, a few microseconds a call, for children that never change.
    call_children: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    duration_children: dict[tuple[str, str], Any] = field(default_factory=dict)

    def started_children(self, method: str) -> tuple[Any, Any]:
        """The calls started and the calls in flight of ``method``."""
        children = self.call_children.get(method)
        if children is None:
            children = self.call_children[method] = (
                self.calls_started.labels(method),
                self.calls_in_flight.labels(method),
            )
        return children

    def duration_child(self, method: str, status: str) -> Any:
        """The call duration of ``method`` ending with ``status``."""
        child = self.duration_children.get((method, status))
        if child is None:
            child = self.duration_children[(method, status)] = self.call_duration.labels(method, status)
        return child


# (pid, directory, metrics): a forked child, or a test's second ``enable``, makes its own.
_state: tuple[int, str, _Instruments] | None = None
_lock = threading.Lock()


# ``os.environ.get`` encodes the name, and when the variable is unset (metrics off) raises and
# catches a KeyError: 1.4 µs, asked three times a cached call. The mapping's own dictionary of
# encoded names and values (CPython's ``os._Environ``, which every change to ``os.environ`` goes
# through) answers the same in a twentieth of that; ``os.environ.get`` where there is none.
_environ_data: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_directory_key = os.environ.encodekey(DIRECTORY_ENV) if _environ_data is not None else None


def _directory() -> str | None:
    """The metrics directory in this process's environment (None or "" when metrics are off)."""
    if _environ_data is None:
        return os.environ.get(DIRECTORY_ENV)
    value = _environ_data.get(_directory_key)
    return None if value is None else os.environ.decodevalue(value)


def enabled() -> bool:
    """Whether this process records metrics (``enable`` ran here or in an ancestor)."""
    return bool(_directory())


def _instruments() -> _Instruments | None:
    """This process's metrics, or None when metrics are off."""
    global _state
    directory = _directory()
    if not directory:
        return None
    state = _state
    pid = process_id()  # no system call: the metrics ask on every call
    if state is not None and state[0] == pid and state[1] == directory:
        return state[2]
    with _lock:
        state = _state
        if state is None or state[0] != pid or state[1] != directory:
            state = _state = (pid, directory, _make())
            observe_linkings(_LinkingMetrics())
    return state[2]


def _make() -> _Instruments:
    # prometheus_client chooses where values live when it is first imported: set here, so a
    # process that imported it before the directory was known writes to the directory's files.
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values

    values.ValueClass = values.MultiProcessValue()
    # The metrics are read from the files, never from a registry of this process; a registry of
    # our own keeps a second enable (a test's) from clashing with the first's names.
    registry = CollectorRegistry(auto_describe=False)
    method = ["grpc_method"]
    return _Instruments(
        calls_started=Counter(
            "grpc_server_call_started", "Calls started (gRFC A66 grpc.server.call.started).", method, registry=registry
        ),
        call_duration=Histogram(
            "grpc_server_call_duration_seconds",
            "Calls from start to final status (gRFC A66 grpc.server.call.duration).",
            ["grpc_method", "grpc_status"],
            buckets=CALL_BUCKETS,
            registry=registry,
        ),
        calls_in_flight=Gauge(
            "referee_calls_in_flight",
            "Calls started and not yet ended.",
            method,
            multiprocess_mode="livesum",
            registry=registry,
        ),
        solve_duration=Histogram(
            "referee_solve_duration_seconds",
            "An engine's solve of one hand (cache misses only).",
            ["engine"],
            buckets=SOLVE_BUCKETS,
            registry=registry,
        ),
        cache_hits=Counter(
            "referee_linking_cache_hits", "Best linkings found in the linking cache.", registry=registry
        ),
        cache_misses=Counter(
            "referee_linking_cache_misses", "Best linkings an engine had to solve.", registry=registry
        ),
        replies_remembered=Counter(
            "referee_replies_remembered",
            "Calls answered with the reply remembered from the same request, without a solve or a lookup.",
            registry=registry,
        ),
        dispute_cases=Counter(
            "referee_dispute_cases", "CheckDisputes cases judged, by outcome.", ["outcome"], registry=registry
        ),
        build_info=Gauge(
            "referee_build_info",
            "Always 1; its labels say which build serves: the package version and the API line.",
            ["version", "api"],
            multiprocess_mode="mostrecent",
            registry=registry,
        ),
        workers_up=Gauge(
            "referee_workers_up",
            "Worker processes running (set by the parent).",
            multiprocess_mode="mostrecent",
            registry=registry,
        ),
        worker_restarts=Counter(
            "referee_worker_restarts", "Worker processes started in place of one that died.", registry=registry
        ),
        auth_failures=Counter(
            "referee_auth_failures", "Calls refused for their credentials, by API key name.", ["key"], registry=registry
        ),
        quota_refusals=Counter(
            "referee_quota_refusals", "Calls refused over a key's quota, by API key name.", ["key"], registry=registry
        ),
        connections_refused=Counter(
            "referee_connections_refused",
            "Connections shut down by the server, by reason (per_peer: over a client address's cap).",
            ["reason"],
            registry=registry,
        ),
        metrics_dropped=Counter(
            "referee_metrics_connections_dropped",
            "Connections to the metrics port closed unanswered: full, evicted or timeout.",
            ["reason"],
            registry=registry,
        ),
        tls_expiry=Gauge(
            "referee_tls_certificate_expiry_timestamp_seconds",
            "When the served TLS certificate expires (its notAfter), in seconds since the epoch.",
            multiprocess_mode="mostrecent",
            registry=registry,
        ),
        reload_failures=Counter(
            "referee_reload_failures",
            "Files changed but not loaded (the previous ones stay in force), by file: api_keys or tls.",
            ["file"],
            registry=registry,
        ),
    )


def ready() -> None:
    """Make this process's metrics now, when they are on, so that the linking cache and the
    engines report from the first hand on (a worker or dispute job process calls it at start)."""
    _instruments()


# Recording ------------------------------------------------------------------------------------


def call_started(method: str) -> None:
    """A call to ``method`` (``package.Service/Method``) began."""
    made = _instruments()
    if made is None:
        return
    started, in_flight = made.started_children(method)
    started.inc()
    in_flight.inc()


def call_ended(method: str, status: str, seconds: float) -> None:
    """A call to ``method`` ended with ``status`` (a status code's name) after ``seconds``."""
    made = _instruments()
    if made is None:
        return
    # Out of flight first: a scrape that sees the call's duration counted sees it ended as well.
    made.started_children(method)[1].dec()
    made.duration_child(method, status).observe(seconds)


def reply_remembered() -> None:
    """A call was answered with the reply its process remembered from the same request."""
    made = _instruments()
    if made is not None:
        made.replies_remembered.inc()


def dispute_judged(outcome: str) -> None:
    """A CheckDisputes case was judged with ``outcome`` (``CONFIRMED``, ``MALFORMED``, ...)."""
    made = _instruments()
    if made is not None:
        made.dispute_cases.labels(outcome).inc()


def auth_failed(key: str) -> None:
    """A call was refused for its credentials; ``key`` names the API key (never the secret)."""
    made = _instruments()
    if made is not None:
        made.auth_failures.labels(key).inc()


def quota_refused(key: str) -> None:
    """A call was refused because the key ``key`` is over its quota."""
    made = _instruments()
    if made is not None:
        made.quota_refusals.labels(key).inc()


def connection_refused(reason: str) -> None:
    """The server shut down a connection for ``reason`` (``per_peer``)."""
    made = _instruments()
    if made is not None:
        made.connections_refused.labels(reason).inc()


def workers_running(count: int) -> None:
    """The parent's count of worker processes running now (and the build it runs)."""
    made = _instruments()
    if made is not None:
        made.workers_up.set(count)
        made.build_info.labels(__version__, API_LINE).set(1)


def certificate_loaded(expires: float | None) -> None:
    """The server loaded a TLS certificate that expires at ``expires`` (seconds since the epoch;
    None when it could not be read), and a reload that fails is counted from now on at 0."""
    made = _instruments()
    if made is not None:
        made.reload_failures.labels("tls")
        if expires is not None:
            made.tls_expiry.set(expires)


def keys_loaded() -> None:
    """The server loaded its API key file: a reload that fails is counted from now on at 0."""
    made = _instruments()
    if made is not None:
        made.reload_failures.labels("api_keys")


def reload_failed(file: str) -> None:
    """A watched file (``api_keys`` or ``tls``) changed but did not load; the previous one stays."""
    made = _instruments()
    if made is not None:
        made.reload_failures.labels(file).inc()


def worker_restarted() -> None:
    """The parent started a worker in place of one that died."""
    made = _instruments()
    if made is not None:
        made.worker_restarts.inc()


def process_died(pid: int) -> bool:
    """Drop the live gauges of a process that is gone (its counts stay); False when the directory
    could not be read now (no descriptor left, say), so the caller tries again later."""
    directory = os.environ.get(DIRECTORY_ENV)
    if directory:
        from prometheus_client import multiprocess

        try:
            multiprocess.mark_process_dead(pid, directory)
        except OSError:
            return False
    return True


class _LinkingMetrics:
    """The linking cache's lookups and the engines' solves, as the domain reports them."""

    def looked_up(self, hit: bool) -> None:
        """One lookup of the linking cache."""
        made = _instruments()
        if made is not None:
            (made.cache_hits if hit else made.cache_misses).inc()

    def solved(self, engine: str, seconds: float) -> None:
        """One hand solved by ``engine``."""
        made = _instruments()
        if made is not None:
            made.solve_duration.labels(engine).observe(seconds)


# The directory and the endpoint (the parent) -----------------------------------------------------


def default_runtime_dir() -> str:
    """Where the server keeps files it writes at run time when no directory is given.

    ``/dev/shm`` first: memory, not disk, and writable in a container with a read-only root
    file system (Docker and Kubernetes mount it apart); Python's multiprocessing needs it for
    its semaphores anyway. Else the system's temporary directory.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    import tempfile

    return tempfile.gettempdir()


def enable(runtime_dir: str) -> Path:
    """Make a fresh metrics directory under ``runtime_dir`` and turn metrics on in this process
    and every process it starts from now on; return the directory.

    Directories left under ``runtime_dir`` by servers that are gone (killed before they could
    clean up) are removed first. Raises OSError naming the directory when it cannot be written.
    """
    base = Path(runtime_dir)
    try:
        base.mkdir(parents=True, exist_ok=True)
        for old in base.glob(DIRECTORY_PREFIX + "*"):
            pid = old.name.removeprefix(DIRECTORY_PREFIX)
            if pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid))):
                shutil.rmtree(old, ignore_errors=True)
        directory = base / f"{DIRECTORY_PREFIX}{os.getpid()}"
        directory.mkdir(mode=0o700)
    except OSError as error:
        raise OSError(
            f"cannot make the metrics directory under {str(base)!r} ({error.strerror or error}); "
            "give a writable one with --runtime-dir or REMIGIO_RUNTIME_DIR"
        ) from None
    os.environ[DIRECTORY_ENV] = str(directory)
    _instruments()
    return directory


def disable() -> None:
    """Turn metrics off in this process and remove its directory (the parent, at exit)."""
    global _state
    directory = os.environ.pop(DIRECTORY_ENV, None)
    with _lock:
        _state = None
    observe_linkings(None)
    if "prometheus_client.values" in sys.modules:
        from prometheus_client import values

        values.ValueClass = values.MutexValue
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(
    host: str,
    port: int,
    max_connections: int = defaults.METRICS_MAX_CONNECTIONS,
    timeout: float = defaults.METRICS_TIMEOUT_SECONDS,
) -> tuple[int, Callable[[], None]]:
    """Serve ``/metrics`` (the sum over every process's files) on ``host:port`` from a thread of
    this process, at most ``max_connections`` at once, each exchange within ``timeout`` seconds
    (``metrics_http``); return the bound port and a function that stops it."""
    from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, multiprocess
    from prometheus_client.exposition import choose_encoder

    directory = os.environ.get(DIRECTORY_ENV)
    if not directory:
        raise RuntimeError("metrics.serve before metrics.enable")
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    # The standard collectors read this process, the one serving /metrics, when it is scraped.
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)

    def render(accept: str, accept_encoding: str) -> tuple[bytes, list[tuple[str, str]]]:
        encoder, content_type = choose_encoder(accept)
        body = encoder(registry)
        headers = [("Content-Type", content_type)]
        if _gzip_accepted(accept_encoding):
            body = gzip.compress(body, compresslevel=6)
            headers.append(("Content-Encoding", "gzip"))
        return body, headers

    made = _instruments()
    if made is not None:
        for reason in DROP_REASONS:  # every reason shows from the start, at 0
            made.metrics_dropped.labels(reason)
    try:
        server = MetricsServer(
            host, port, render, max_connections=max_connections, timeout=timeout, on_drop=_metrics_connection_dropped
        )
    except OSError as error:
        raise OSError(f"cannot serve metrics on {host}:{port}: {error.strerror or error}") from None
    return server.port, server.stop


def _gzip_accepted(accept_encoding: str) -> bool:
    return any(part.split(";", 1)[0].strip().lower() == "gzip" for part in accept_encoding.split(","))


def _metrics_connection_dropped(reason: str) -> None:
    made = _instruments()
    if made is not None:
        made.metrics_dropped.labels(reason).inc()


__all__ = [
    "CALL_BUCKETS",
    "DIRECTORY_ENV",
    "auth_failed",
    "call_ended",
    "call_started",
    "certificate_loaded",
    "default_runtime_dir",
    "disable",
    "dispute_judged",
    "reply_remembered",
    "enable",
    "enabled",
    "keys_loaded",
    "process_died",
    "quota_refused",
    "ready",
    "reload_failed",
    "serve",
    "worker_restarted",
    "workers_running",
]
