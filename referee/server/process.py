"""The ``serve`` command as a process: configuration checked once, metrics, one server or a
supervised set of workers, signals, and a clean drain.

``run`` takes a ``ServerConfig``; with ``workers`` above 1 it hands ``serve_one`` to the supervisor,
which forks the workers and keeps them up; each worker (or the one process) runs ``serve_one``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import logging
import os
import resource
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from referee import __version__
from referee.server import access, metrics, supervisor, tracing
from referee.server.app import SERVICE_NAME, create_server
from referee.server.config import ConnectionLimits, ServerConfig, add_arguments
from referee.server.console import address, say
from referee.server.cpus import usable_cpus
from referee.server.defaults import core_cap
from referee.server.flags import check_env
from referee.server.logs import configure_logging

log = logging.getLogger("referee.service")

# Middle-generation collections per full collection of the garbage collector (CPython: 10).
FULL_COLLECTION_EVERY = 1000


@dataclass(frozen=True, slots=True)
class Access:
    """What the access flags made, once, before any worker: the plan (its files checked) and the
    quota buckets every worker shares."""

    plan: access.AccessPlan
    quotas: access.QuotaTable | None = None


def run(config: ServerConfig) -> int:
    """Serve until SIGTERM or SIGINT; return the exit status (0 after a clean drain)."""
    configure_logging(config.log_format)
    problem = supervisor.port_in_use(config.host, config.port)
    if problem:
        say(f"remigio-referee serve: error: {problem}")
        return 1
    if config.otlp_endpoint and not tracing.available():
        say(f"remigio-referee serve: error: {tracing.MISSING}")
        return 1
    files = config.access
    try:
        # Checked here, once, so bad files stop the server before any worker starts.
        plan = access.AccessPlan.from_flags(
            files.tls_cert, files.tls_key, files.tls_client_ca, files.api_keys, files.health_port
        )
    except ValueError as error:
        say(f"remigio-referee serve: error: {error}")
        return 1
    warning = plan.warning(config.host, config.port)
    if warning:
        log.warning("%s", warning)
    # The buckets are made before the workers are forked, so every worker (and every worker
    # started in place of one that died) shares them.
    try:
        if config.runtime_dir:
            os.makedirs(config.runtime_dir, exist_ok=True)
        quotas = access.QuotaTable(directory=config.runtime_dir) if plan.key_file is not None else None
    except OSError as error:
        where = repr(config.runtime_dir) if config.runtime_dir else "the runtime directory"
        say(
            f"remigio-referee serve: error: cannot write in {where} ({error.strerror or error}); "
            "give a writable directory with --runtime-dir or REMIGIO_RUNTIME_DIR"
        )
        return 1
    try:
        stop_metrics = _start_metrics(config)
    except OSError as error:
        say(f"remigio-referee serve: error: {error}")
        return 1
    granted = Access(plan, quotas)
    try:
        if config.workers > 1:
            target = functools.partial(_serve_worker, config, granted)
            return supervisor.serve_workers(
                config.workers, config.host, config.port, plan.health_port, config.heartbeat_timeout_seconds, target
            )
        metrics.workers_running(1)
        return serve_one(config, granted, config.port)
    finally:
        stop_metrics()


def _serve_worker(config: ServerConfig, granted: Access, port: int, health_port: int | None, heartbeat_fd: int) -> int:
    """One worker: the server on the supervisor's shared ports, beating its heart to the parent."""
    granted = replace(granted, plan=replace(granted.plan, health_port=health_port))
    return serve_one(config, granted, port, reuse_port=True, heartbeat_fd=heartbeat_fd)


def _start_metrics(config: ServerConfig) -> Callable[[], None]:
    """Turn metrics on and serve ``/metrics`` from this process when ``--metrics-port`` asks for
    it (before any worker is forked, so every worker records); return what turns them off."""
    wanted = config.metrics
    if wanted.port is None:
        # Metrics are off: no process of this server writes files, whatever the environment says.
        os.environ.pop(metrics.DIRECTORY_ENV, None)
        return lambda: None
    metrics.enable(config.runtime_dir or metrics.default_runtime_dir())
    try:
        port, stop = metrics.serve(wanted.host, wanted.port, wanted.max_connections, wanted.timeout_seconds)
    except OSError:
        metrics.disable()
        raise
    say(f"remigio-referee: metrics on http://{address(wanted.host, port)}/metrics (pid {os.getpid()})")

    def stop_all() -> None:
        stop()
        metrics.disable()

    return stop_all


# Descriptors kept for what is not a connection: files, pipes, the dispute job processes, logs.
_SPARE_DESCRIPTORS = 256


def _descriptor_limit() -> int | None:
    """Raise this process's descriptor limit to its hard limit; the connections that fit in it
    (None: no limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, soft - _SPARE_DESCRIPTORS)


def connection_caps(limits: ConnectionLimits) -> ConnectionLimits:
    """``limits`` with the warden's cap and gRPC core's within the descriptors this process has."""
    cap = descriptor_room(limits.max_connections)
    core = core_cap(cap)
    room = _descriptor_limit()
    return replace(limits, max_connections=cap, core_connections=core if room is None else max(cap, min(core, room)))


def descriptor_room(max_connections: int) -> int:
    """Raise this process's descriptor limit to its hard limit; the connections that fit in it.

    gRPC's core takes a descriptor per connection: a connection cap above the limit would end in
    EMFILE (failed accepts, failed file opens) instead of a clean refusal.
    """
    room = _descriptor_limit()
    if room is None:
        return max_connections
    if max_connections > room:
        log.warning(
            "--max-connections %d is more than the descriptor limit allows: %d connections (limit %d)",
            max_connections,
            room,
            room + _SPARE_DESCRIPTORS,
        )
        return room
    return max_connections


def serve_one(
    config: ServerConfig, granted: Access, port: int, reuse_port: bool = False, heartbeat_fd: int | None = None
) -> int:
    """Run one server in this process until a signal, then drain it; the exit status."""
    return asyncio.run(_serve(config, granted, port, reuse_port, heartbeat_fd))


async def _serve(config: ServerConfig, granted: Access, port: int, reuse_port: bool, heartbeat_fd: int | None) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    caught: list[signal.Signals] = []

    def on_signal(signum: int, _frame: object) -> None:
        caught.append(signal.Signals(signum))
        if not loop.is_closed():  # closed: a start that failed, on its way out with status 1
            loop.call_soon_threadsafe(stop.set)

    # asyncio's handler for SIGHUP (here until the keys are read) points the interpreter's wakeup
    # descriptor at the loop, so the plain handlers below wake it from any thread a signal lands on.
    loop.add_signal_handler(signal.SIGHUP, _no_reload)
    # Plain handlers, not the loop's: a closed loop puts back SIGTERM's default, which kills; a
    # process that has drained must still exit 0 when one more comes (``supervisor.stop_signals_ignored``).
    for signum in supervisor.STOP_SIGNALS:
        signal.signal(signum, on_signal)
    # A worker starts with them blocked (its supervisor forks it so): one that came since is handled now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, supervisor.STOP_SIGNALS)
    plan = granted.plan
    try:
        proxies = access.TrustedProxies.parse(config.trusted_proxies)
        interceptor = plan.interceptor(granted.quotas, self_metered=(SERVICE_NAME,), proxies=proxies)
        credentials = plan.credentials()
    except ValueError as error:  # the files changed since the parent read them
        say(f"remigio-referee serve: error: {error}")
        return 1
    # SIGHUP reads the key file again (a server without keys has nothing to read, and lives on).
    loop.add_signal_handler(signal.SIGHUP, interceptor.keys.reload if interceptor and interceptor.keys else _no_reload)
    try:
        running = await create_server(
            address(config.host, port),
            threads=config.threads,
            max_concurrent=config.max_concurrent,
            max_calls_per_client=config.max_calls_per_client,
            limits=config.service,
            connections=connection_caps(config.connections),
            reflection=config.reflection,
            committed_only=config.require_committed_shuffle,
            max_message_bytes=config.max_message_bytes,
            reuse_port=reuse_port,
            dispute_jobs=config.dispute_jobs or max(1, usable_cpus() // config.workers),
            interceptors=[interceptor] if interceptor is not None else [],
            credentials=credentials,
            health_address=address(config.host, plan.health_port) if plan.health_port is not None else None,
            health_limits=config.health,
            trusted_proxies=proxies,
        )
    except OSError as error:
        say(f"remigio-referee serve: error: {error}")
        return 1
    if config.otlp_endpoint:
        # Here, in the serving process: the exporter's thread and channel do not survive a fork.
        tracing.configure(config.otlp_endpoint)
    tune_garbage_collector()
    beat = loop.create_task(_heartbeat(heartbeat_fd)) if heartbeat_fd is not None else None
    say(
        f"remigio-referee: listening on {address(config.host, running.port)} (pid {os.getpid()}, "
        f"version {__version__}, API {metrics.API_LINE})"
    )
    if running.health_port is not None:
        say(f"remigio-referee: health on {address(config.host, running.health_port)} (pid {os.getpid()})")
    await stop.wait()
    log.info("%s received: draining for up to %gs", caught[0].name, config.grace_seconds)
    await running.drain(config.grace_seconds)
    if beat is not None:
        beat.cancel()
    tracing.shutdown()  # the spans still waiting go to the collector
    supervisor.stop_signals_ignored()
    say(f"remigio-referee: stopped (pid {os.getpid()})")
    return 0


def _no_reload() -> None:
    log.info("SIGHUP received: no key file to read again")


async def _heartbeat(fd: int) -> None:
    """Tell the supervising parent, from the event loop, that this process still answers."""
    os.set_blocking(fd, False)
    while True:
        with contextlib.suppress(BlockingIOError):  # the parent is slow to read: it will see the next
            os.write(fd, b".")
        await asyncio.sleep(supervisor.HEARTBEAT_EVERY_SECONDS)


def tune_garbage_collector() -> None:
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m referee.server``: the serve subcommand on its own."""
    parser = argparse.ArgumentParser(
        prog="python -m referee.server", description="Serve the Remigio referee over gRPC."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    check_env(parser, args)
    return run(ServerConfig.from_args(args))


__all__ = ["Access", "descriptor_room", "main", "run", "serve_one", "tune_garbage_collector"]
