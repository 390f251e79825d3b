"""The referee's gRPC server: wiring, limits, health, reflection, signals and worker processes.

``create_server`` builds and starts one server (tests bind ``127.0.0.1:0``). ``add_arguments``
and ``run`` are the ``serve`` subcommand. With ``--workers N`` (N > 1) the parent forks N
processes before any gRPC object exists, each runs its own server on the same port with
SO_REUSEPORT (the kernel spreads connections across them), and the parent forwards SIGTERM and
SIGINT to them and waits.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection as grpc_reflection

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.limits import MESSAGE_BYTES
from referee.linking import load_engines
from referee.service import metrics
from referee.service.servicer import DEFAULT_SOLVE_CAP_SECONDS, RefereeServicer, add_to_server

log = logging.getLogger("referee.service")

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 50051
# Two threads per process gave the lowest p99 under load (bench.service, 2 cores, 32 clients:
# p99 about 1.7x the median with 2 threads, 2.0-2.4x with 4 to 8): with more, the threads
# take the interpreter lock from one another in no fixed order, so calls finish out of turn.
# Each process is one core's worth of Python; more processes, not threads, use more cores.
DEFAULT_THREADS = 2
DEFAULT_MAX_CONCURRENT = 64
DEFAULT_GRACE_SECONDS = 5.0
MAX_MESSAGE_BYTES = MESSAGE_BYTES
# Middle-generation collections per full collection of the garbage collector (CPython: 10).
FULL_COLLECTION_EVERY = 1000


def create_server(
    address: str = "127.0.0.1:0",
    *,
    max_workers: int = DEFAULT_THREADS,
    max_concurrent_rpcs: int = DEFAULT_MAX_CONCURRENT,
    reflection: bool = True,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    reuse_port: bool = False,
    solve_cap_seconds: float = DEFAULT_SOLVE_CAP_SECONDS,
    dispute_jobs: int = 1,
) -> tuple[grpc.Server, int, health.HealthServicer]:
    """Build, bind and start a server; return it, the bound port and its health servicer (SERVING)."""
    load_engines()  # before the first call, so no caller waits for an engine's import
    metrics.ready()
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # gRPC turns SO_REUSEPORT on by default on Linux; a lone server must own its port.
        ("grpc.so_reuseport", 1 if reuse_port else 0),
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="referee"),
        options=options,
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    servicer = RefereeServicer(
        solve_cap_seconds, dispute_jobs, max_streams=max(1, max_workers - 1), max_message_bytes=max_message_bytes
    )
    add_to_server(servicer, server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection:
        _enable_reflection(server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as error:
        raise OSError(f"cannot bind {address}: {error}") from None
    if port == 0:
        raise OSError(f"cannot bind {address}")
    server.start()
    for service in ("", SERVICE_NAME):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return server, port, health_servicer


def _enable_reflection(server: grpc.Server) -> None:
    names = (SERVICE_NAME, health.SERVICE_NAME, grpc_reflection.SERVICE_NAME)
    grpc_reflection.enable_server_reflection(names, server)


def drain(server: grpc.Server, health_servicer: health.HealthServicer, grace: float) -> None:
    """Report NOT_SERVING, refuse new calls, and let calls in flight finish within ``grace`` seconds."""
    health_servicer.enter_graceful_shutdown()
    server.stop(grace).wait(grace + 5)


# The serve subcommand -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``serve`` to ``parser``."""
    env = os.environ.get
    parser.add_argument(
        "--host",
        default=env("REMIGIO_HOST", DEFAULT_HOST),
        help=f"address to listen on (env REMIGIO_HOST; default {DEFAULT_HOST})",
    )
    # A string default goes through `type`, so a bad REMIGIO_PORT is reported like a bad --port.
    parser.add_argument(
        "--port",
        type=_port,
        default=env("REMIGIO_PORT", str(DEFAULT_PORT)),
        help=f"port to listen on, 0 for any free one (env REMIGIO_PORT; default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=env("REMIGIO_WORKERS", "1"),
        metavar="N",
        help="server processes sharing the port with SO_REUSEPORT (env REMIGIO_WORKERS; default 1)",
    )
    parser.add_argument(
        "--threads",
        type=_positive_int,
        default=DEFAULT_THREADS,
        metavar="N",
        help=f"threads per server process; CheckDisputes streams may hold all but one, or the one there is (default {DEFAULT_THREADS})",
    )
    parser.add_argument("--no-reflection", dest="reflection", action="store_false", help="turn server reflection off")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env("REMIGIO_LOG_FORMAT", "text"),
        help="one log line per call as text or as JSON lines (env REMIGIO_LOG_FORMAT; default text)",
    )
    parser.add_argument(
        "--grace",
        type=_non_negative_float,
        default=DEFAULT_GRACE_SECONDS,
        metavar="SECONDS",
        help=f"on SIGTERM/SIGINT, how long calls in flight may take to finish (default {DEFAULT_GRACE_SECONDS:g})",
    )
    parser.add_argument(
        "--max-concurrent",
        type=_positive_int,
        default=DEFAULT_MAX_CONCURRENT,
        metavar="N",
        help=f"calls in progress per process; more are refused with RESOURCE_EXHAUSTED (default {DEFAULT_MAX_CONCURRENT})",
    )
    parser.add_argument(
        "--solve-cap",
        type=_positive_float,
        default=DEFAULT_SOLVE_CAP_SECONDS,
        metavar="SECONDS",
        help=f"most time a call may take, also bounded by the client's deadline (default {DEFAULT_SOLVE_CAP_SECONDS:g})",
    )
    parser.add_argument(
        "--dispute-jobs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="processes judging CheckDisputes cases, per server process (default: cores / workers)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=env("REMIGIO_METRICS_PORT"),
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, summed over the workers (env REMIGIO_METRICS_PORT; default off)",
    )
    parser.add_argument(
        "--runtime-dir",
        default=env("REMIGIO_RUNTIME_DIR") or None,
        metavar="DIR",
        help="a writable directory for the files the server keeps while it runs, such as the workers' metrics (env REMIGIO_RUNTIME_DIR; default /dev/shm, else the temporary directory)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=MAX_MESSAGE_BYTES,
        metavar="BYTES",
        help=f"largest request or reply (default {MAX_MESSAGE_BYTES})",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; return the exit status (0 after a clean drain)."""
    configure_logging(args.log_format)
    try:
        stop_metrics = _start_metrics(args)
    except OSError as error:
        _say(f"remigio-referee: error: {error}")
        return 1
    try:
        if args.workers > 1:
            return _serve_workers(args)
        metrics.workers_running(1)
        return _serve(args, args.port, reuse_port=False)
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
        port, stop = metrics.serve(args.host, args.metrics_port)
    except OSError:
        metrics.disable()
        raise
    _say(f"remigio-referee: metrics on http://{_address(args.host, port)}/metrics (pid {os.getpid()})")

    def stop_all() -> None:
        stop()
        metrics.disable()

    return stop_all


def _serve(args: argparse.Namespace, port: int, reuse_port: bool) -> int:
    """Run one server in this process until a signal, then drain it."""
    stop = threading.Event()
    caught: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        caught.append(signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    address = _address(args.host, port)
    try:
        server, bound, health_servicer = create_server(
            address,
            max_workers=args.threads,
            max_concurrent_rpcs=args.max_concurrent,
            reflection=args.reflection,
            max_message_bytes=args.max_message_bytes,
            reuse_port=reuse_port,
            solve_cap_seconds=args.solve_cap,
            dispute_jobs=args.dispute_jobs or max(1, (os.cpu_count() or 1) // args.workers),
        )
    except OSError as error:
        _say(f"remigio-referee: error: {error}")
        return 1
    _tune_garbage_collector()
    _say(f"remigio-referee: listening on {_address(args.host, bound)} (pid {os.getpid()})")
    # A timed wait, so the signal handler runs promptly in this (the main) thread.
    while not stop.wait(0.2):
        pass
    log.info("%s received: draining for up to %gs", signal.Signals(caught[0]).name, args.grace)
    drain(server, health_servicer, args.grace)
    _say(f"remigio-referee: stopped (pid {os.getpid()})")
    return 0


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


def _serve_workers(args: argparse.Namespace) -> int:
    """Fork ``args.workers`` servers on one port, forward signals to them, wait for them."""
    try:
        reservation = _reserve_port(args.host, args.port)
    except OSError as error:
        where = _address(args.host, args.port)
        _say(f"remigio-referee: error: cannot bind {where}: {error.strerror or error}")
        return 1
    # Held open until the workers are gone, so port 0 resolves once and the port stays ours.
    with reservation:
        return _run_workers(args, reservation.getsockname()[1])


def _run_workers(args: argparse.Namespace, port: int) -> int:
    # Fork, not spawn: each child starts from this process, and no gRPC object exists yet.
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_worker, args=(args, port), name=f"referee-worker-{n}", daemon=False)
        for n in range(args.workers)
    ]
    for worker in workers:
        worker.start()
    metrics.workers_running(len(workers))
    stopping = threading.Event()

    def forward(_signum: int, _frame: object) -> None:
        stopping.set()
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    _say(f"remigio-referee: {args.workers} workers on {_address(args.host, port)} (parent pid {os.getpid()})")
    failed = False
    gone: set[int] = set()
    while any(worker.exitcode is None for worker in workers):
        for worker in workers:
            worker.join(0.2)
        for worker in workers:
            if worker.exitcode is not None and worker.pid is not None and worker.pid not in gone:
                gone.add(worker.pid)
                metrics.process_died(worker.pid)
        metrics.workers_running(len(workers) - len(gone))
        if not stopping.is_set() and any(worker.exitcode is not None for worker in workers):
            # One worker died on its own: take the others down too rather than serve with fewer.
            failed = True
            log.error("a worker exited unexpectedly; stopping the others")
            forward(signal.SIGTERM, None)
    return 0 if not failed and all(worker.exitcode == 0 for worker in workers) else 1


def _worker(args: argparse.Namespace, port: int) -> None:
    parent = os.getppid()
    _stop_with_parent()
    if os.getppid() != parent:  # the parent died before the request above took effect
        sys.exit(1)
    sys.exit(_serve(args, port, reuse_port=True))


def _stop_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies, so no worker outlives it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (a free port for 0) with SO_REUSEPORT, so the workers can bind it too."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


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


__all__ = ["SERVICE_NAME", "add_arguments", "configure_logging", "create_server", "drain", "run"]


if __name__ == "__main__":
    sys.exit(main())
