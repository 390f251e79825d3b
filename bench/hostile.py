"""Throughput and health latency of the referee while each attack runs.

Run from the repository root::

    python -m bench.hostile                      # every attack, about a minute and a half
    python -m bench.hostile --attacks none,stalled --duration 3

The server runs as a subprocess (``--workers 2`` by default, its own defaults for every limit).
For each attack a fresh load runs for ``--duration`` seconds: ``--clients`` closed loops of
SolveHand (CP-SAT, distinct end-of-deal hands, ``bench.h2client``), while a prober on a
connection of its own asks the health service every 50 ms. The attack starts with the load and
is undone after it. Each row: the SolveHand calls answered per second and the calls that failed,
and the health checks' latency (p50, p99, max) and failures. The attacks:

- ``none``: the load alone, the row to compare with;
- ``stalled``: 50 calls that send HEADERS and never their DATA, over 5 connections that answer
  PINGs (``bench.stall``): each holds a coroutine until the receive timeout ends it;
- ``streams``: idle CheckDisputes and reflection streams, more than the caps allow;
- ``pings``: connections that send PINGs without calls until the server sends them away;
- ``connections``: 300 idle connections that sent the HTTP/2 preface;
- ``kill``: SIGKILL of one worker a second in (the parent forks a new one);
- ``stop``: SIGSTOP of one worker a second in (the parent kills and replaces it when its
  heartbeat is missed; until then the connections it holds wait).

A failed SolveHand in ``kill`` and ``stop`` is a call on a connection the kernel had given to the
worker that went away (in ``stop`` such calls hang until the worker is replaced, so the row's
window runs past ``--duration``); a failed health check there is the prober's own connection on
that worker. In the other rows nothing may fail. The exit status is 1 if the server did not exit
0 on SIGTERM at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

from bench import h2client  # noqa: E402
from bench.hands import end_of_deal  # noqa: E402
from bench.service import ENGINES, HOST, SEED, Server, solve_requests  # noqa: E402
from bench.stall import Staller  # noqa: E402

SERVICE = "/remigio.referee.v1.RefereeService"
ATTACKS = ("none", "stalled", "streams", "pings", "connections", "kill", "stop")
PROBE_EVERY = 0.05
CALL_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Row:
    """One attack's figures."""

    attack: str
    rps: float
    failed: int
    health_p50_ms: float
    health_p99_ms: float
    health_max_ms: float
    health_failed: int


# Attacks ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _stalling(server: Server, connections: int, calls: tuple[tuple[str, int], ...]) -> Iterator[None]:
    """``connections`` raw HTTP/2 connections, each opening ``calls`` (path, how many) and never finishing them."""
    stallers = [Staller(server.target) for _ in range(connections)]
    for staller in stallers:
        for path, count in calls:
            staller.stall(path, count)
    try:
        yield
    finally:
        for staller in stallers:
            staller.close()


def _stalled(server: Server) -> contextlib.AbstractContextManager[None]:
    return _stalling(server, 5, ((f"{SERVICE}/SolveHand", 10),))


def _streams(server: Server) -> contextlib.AbstractContextManager[None]:
    reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    return _stalling(server, 4, ((f"{SERVICE}/CheckDisputes", 6), (reflection, 6)))


@contextlib.contextmanager
def _pings(server: Server) -> Iterator[None]:
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            staller = Staller(server.target)
            try:
                while not stop.is_set() and not staller.goaway.is_set() and not staller.closed.is_set():
                    staller.ping(20)
                    time.sleep(0.01)
            except OSError:
                pass
            finally:
                staller.close()

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)


@contextlib.contextmanager
def _connections(server: Server) -> Iterator[None]:
    socks = []
    for _ in range(300):
        sock = socket.create_connection((HOST, server.port), timeout=5)
        sock.sendall(h2client.PREFACE + h2client._frame(h2client.SETTINGS, 0, 0))
        socks.append(sock)
    try:
        yield
    finally:
        for sock in socks:
            sock.close()


def _signal_a_worker(signum: int) -> Callable[[Server], contextlib.AbstractContextManager[None]]:
    @contextlib.contextmanager
    def attack(server: Server) -> Iterator[None]:
        worker = _live_workers(server)[0]
        timer = threading.Timer(1.0, os.kill, (worker, signum))
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            with contextlib.suppress(ProcessLookupError):
                if signum == signal.SIGSTOP:
                    os.kill(worker, signal.SIGKILL)  # the parent has done so already, unless it is slow

    return attack


def _live_workers(server: Server) -> list[int]:
    """The worker processes alive now (the parent's children that serve)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == server.process.pid and b"referee.server" in cmdline and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return sorted(found)


@contextlib.contextmanager
def _nothing(_server: Server) -> Iterator[None]:
    yield


ATTACK_OF: dict[str, Callable[[Server], contextlib.AbstractContextManager[None]]] = {
    "none": _nothing,
    "stalled": _stalled,
    "streams": _streams,
    "pings": _pings,
    "connections": _connections,
    "kill": _signal_a_worker(signal.SIGKILL),
    "stop": _signal_a_worker(signal.SIGSTOP),
}


# Measuring ----------------------------------------------------------------------------------------


def _probe_health(target: str, stop: threading.Event, latencies: list[float], failures: list[str]) -> None:
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        with contextlib.suppress(grpc.RpcError):
            health.Check(health_pb2.HealthCheckRequest(), timeout=5)  # connected before the clock
        while not stop.is_set():
            started = time.perf_counter()
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(), timeout=2)
                if reply.status != health_pb2.HealthCheckResponse.SERVING:
                    failures.append(f"status {reply.status}")
                latencies.append((time.perf_counter() - started) * 1000)
            except grpc.RpcError as error:
                failures.append(error.code().name)
            stop.wait(PROBE_EVERY)


def measure(server: Server, attack: str, pool: Sequence[bytes], first: int, clients: int, duration: float) -> Row:
    """One attack under load: the row."""
    loads = [h2client.Client(first=first + n, step=clients, start_at=0.0) for n in range(clients)]
    connections = h2client.open_connections(server.target, f"{SERVICE}/SolveHand", loads, CALL_TIMEOUT)
    stop = threading.Event()
    latencies: list[float] = []
    health_failures: list[str] = []
    prober = threading.Thread(target=_probe_health, args=(server.target, stop, latencies, health_failures))
    with ATTACK_OF[attack](server):
        started = time.monotonic()
        for load in loads:
            load.start_at = started
        prober.start()
        try:
            h2client.run(connections, pool, started + duration, timeout=CALL_TIMEOUT)
        finally:
            stop.set()
            prober.join(10)
            h2client.close(connections)
        window = time.monotonic() - started
    answered = failed = 0
    for load in loads:
        h2client.settle(load)
        for call in load.calls:
            replies = call.replies()
            if call.status == 0 and not call.failure and replies is not None and len(replies) == 1:
                answered += 1
            else:
                failed += 1
    ordered = sorted(latencies) or [float("nan")]
    return Row(
        attack=attack,
        rps=answered / window,
        failed=failed,
        health_p50_ms=ordered[len(ordered) // 2],
        health_p99_ms=ordered[max(0, int(len(ordered) * 0.99) - 1)],
        health_max_ms=ordered[-1],
        health_failed=len(health_failures),
    )


HEADER = f"{'attack':<12} {'req/s':>7} {'failed':>6} {'health p50':>10} {'p99 ms':>7} {'max ms':>7} {'failed':>6}"


def format_row(row: Row) -> str:
    """A line of the table."""
    return (
        f"{row.attack:<12} {row.rps:>7.0f} {row.failed:>6} {row.health_p50_ms:>10.2f} {row.health_p99_ms:>7.2f} "
        f"{row.health_max_ms:>7.2f} {row.health_failed:>6}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="server processes (default 2)")
    parser.add_argument("--clients", type=int, default=16, help="SolveHand closed loops (default 16)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per attack (default 8)")
    parser.add_argument(
        "--attacks", default=",".join(ATTACKS), help=f"comma-separated, of {', '.join(ATTACKS)} (default all)"
    )
    args = parser.parse_args(argv)
    args.attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    if not args.attacks or any(a not in ATTACK_OF for a in args.attacks):
        parser.error(f"--attacks takes {', '.join(ATTACKS)}")
    if args.workers < 1 or args.clients < 1 or args.duration <= 0:
        parser.error("--workers and --clients must be at least 1, --duration more than 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every attack under load and print the table; 1 if the server did not stop cleanly."""
    args = parse_args(argv)
    print(f"bench.hostile: {args.workers} workers, {args.clients} SolveHand clients (CP-SAT), {args.duration:g}s each")
    print(f"cpus: {os.cpu_count()}; load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pool = solve_requests(end_of_deal(SEED, 60_000, 10), ENGINES["cpsat"])
    server = Server(args.workers)
    status: int | None = None
    try:
        server.wait_ready()
        print(HEADER, flush=True)
        for number, attack in enumerate(args.attacks):
            row = measure(server, attack, pool, number * 8_000, args.clients, args.duration)
            print(format_row(row), flush=True)
    except Exception:
        print(f"server log (last lines):\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        status = server.stop()
    print(f"server: stopped with SIGTERM, {'exit status 0' if status == 0 else f'exit status {status}'}")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
