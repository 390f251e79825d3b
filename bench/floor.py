"""The floor: the referee's cached path against bare gRPC servers that return the same bytes.

Run from the repository root::

    python -m bench.floor                          # 3 rounds of 5 s per server
    python -m bench.floor --quick                  # 1 round of 2 s
    python -m bench.floor --baseline ../referee-before   # another checkout's referee served beside

Every server runs as two processes sharing one loopback port (SO_REUSEPORT, as the referee's
``--workers 2``), and every one answers the same call, SolveHand of one hand, with the same reply:

- ``aio``: a bare ``grpc.aio`` server whose handler returns the reply's bytes;
- ``sync``: a bare ``grpc.server`` (a thread pool) doing the same;
- ``aio-stream``: the bare ``grpc.aio`` server with SolveHand registered as the referee registers
  it, a client stream of one message read by the handler (the referee's way of bounding the wait
  for a request: ``referee.server.servicer``), so the cost of that registration shows apart from
  the referee's own;
- ``referee``: this checkout's referee (``--workers 2``, the per-client cap lifted: every
  connection comes from one address), the hand solved once before the clock starts, so every
  measured call is a cached one;
- ``baseline`` (with ``--baseline DIR``): the referee of the checkout in DIR, run the same way, so
  two builds are measured back to back in one run.

The load is ``h2load`` (Debian's ``nghttp2-client``, ``make h2load`` installs it): 32 connections,
one call in flight on each, for ``--duration`` seconds after a second's warm-up; each call's
latency from its log file. Without ``h2load`` on the PATH (or with ``--load-generator h2``),
``bench.h2client`` drives the same load. The servers take turns, round after round, so a change
in the machine's load falls on all of them; each server's row is its median round by calls/s.
h2load sees HTTP statuses only, so before the rounds each server's reply is checked through a
gRPC channel (grpc-status OK and the reply's bytes), and the referee's calls are counted OK by its
own log afterwards: a call that failed would show there.

**Distinct calls** (``--distinct``): the referee servers get SolveHand calls on hands they have
not seen, with the search engine (``bench.hands.end_of_deal``, a fresh slice of the hands each
round, the same slice for every build), so every call is decoded, solved on a compute slot and
encoded; the bare servers still answer the one request with fixed bytes. ``bench.h2client``
drives the load (h2load sends one body).

The ratios are the referee's calls/s over each bare server's. Figures, never asserts: the exit
status is 1 only when a server fails to start, answers wrongly or does not stop.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from bench import h2client  # noqa: E402
from bench.machine import finish, load_average  # noqa: E402
from bench.service import HOST, Server, percentile  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402
from referee.api import handlers  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
METHOD = "/remigio.referee.v1.RefereeService/SolveHand"
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()
CONNECTIONS = 32
WORKERS = 2
DEFAULT_DURATION, QUICK_DURATION = 5.0, 2.0
DEFAULT_ROUNDS, QUICK_ROUNDS = 3, 1
WARM_UP = 1.0
CALL_TIMEOUT = 10.0
START_TIMEOUT = 60.0
SYNC_THREADS = 16


def request_bytes() -> bytes:
    """The one request every call sends."""
    return pb.SolveHandRequest(cards=HAND).SerializeToString()


def reply_bytes() -> bytes:
    """The reply the referee gives it (the bare servers return these bytes)."""
    return handlers.solve_hand(pb.SolveHandRequest.FromString(request_bytes())).SerializeToString()


# The bare servers ----------------------------------------------------------------------------------


def _bare_handlers(reply: bytes, answer: object) -> grpc.GenericRpcHandler:
    service, method = METHOD.lstrip("/").split("/")
    handler = grpc.unary_unary_rpc_method_handler(answer)  # bytes in, bytes out
    return grpc.method_handlers_generic_handler(service, {method: handler})


def serve_aio(port: int, reply: bytes, streamed: bool = False) -> None:
    """A bare ``grpc.aio`` server answering ``reply`` to every SolveHand, until SIGTERM; ``streamed``:
    SolveHand registered as a client stream whose one request the handler reads (``aio-stream``)."""
    import asyncio

    async def answer(_request: bytes, _context: grpc.aio.ServicerContext) -> bytes:
        return reply

    async def answer_read(_requests: object, context: grpc.aio.ServicerContext) -> bytes:
        await context.read()
        return reply

    async def main() -> None:
        server = grpc.aio.server()
        if streamed:
            service, method = METHOD.lstrip("/").split("/")
            handler = grpc.stream_unary_rpc_method_handler(answer_read)
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {method: handler}),))
        else:
            server.add_generic_rpc_handlers((_bare_handlers(reply, answer),))
        bound = server.add_insecure_port(f"{HOST}:{port}")
        await server.start()
        print(f"listening on {HOST}:{bound}", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop(0)

    asyncio.run(main())


def serve_sync(port: int, reply: bytes) -> None:
    """A bare ``grpc.server`` (a thread pool) answering ``reply`` to every SolveHand, until SIGTERM."""

    def answer(_request: bytes, _context: grpc.ServicerContext) -> bytes:
        return reply

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=SYNC_THREADS))
    server.add_generic_rpc_handlers((_bare_handlers(reply, answer),))
    bound = server.add_insecure_port(f"{HOST}:{port}")
    server.start()
    print(f"listening on {HOST}:{bound}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


class BareServer:
    """Two processes of a bare server (``aio`` or ``sync``) on one loopback port."""

    def __init__(self, kind: str, reply: bytes) -> None:
        self.kind = kind
        self.processes: list[subprocess.Popen[str]] = []
        self.port = 0
        for _ in range(WORKERS):
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.floor", "--bare", kind, "--port", str(self.port), "--reply", reply.hex()],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.processes.append(process)
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"listening on .*:(\d+)$", line.strip())
            if not found:
                raise RuntimeError(f"the bare {kind} server did not start: {line!r}")
            self.port = int(found.group(1))

    @property
    def target(self) -> str:
        """Where it listens."""
        return f"{HOST}:{self.port}"

    def stop(self) -> int | None:
        """SIGTERM to both; the first nonzero exit status, 0, or None when one had to be killed."""
        status: int | None = 0
        for process in self.processes:
            process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                code = process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                status = None
                continue
            if code and status == 0:
                status = code
        return status


# The load ------------------------------------------------------------------------------------------


@dataclass
class Round:
    """One server's calls in one round."""

    rate: float  # calls answered per second
    p50: float  # ms
    p99: float  # ms
    failed: int
    answered: int = 0  # calls answered OK, the warm-up's included (0: not counted)
    cpu: float = 0.0  # CPU seconds of the server's processes over the round (0: not measured)

    @property
    def cpu_ms_per_call(self) -> float | None:
        """The server's CPU per call answered, warm-up included; None when not measured."""
        return self.cpu / self.answered * 1000 if self.cpu and self.answered else None


def grpc_frame(message: bytes) -> bytes:
    """``message`` as a gRPC length-prefixed message (uncompressed)."""
    return b"\0" + len(message).to_bytes(4, "big") + message


def h2load_round(target: str, request: bytes, duration: float) -> Round:
    """``CONNECTIONS`` connections, one call in flight on each, for ``duration`` seconds after a
    warm-up; the calls' rate and latency from h2load's log of each call."""
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as directory:
        body, log = Path(directory) / "request", Path(directory) / "calls.tsv"
        body.write_bytes(grpc_frame(request))
        command = [
            "h2load",
            "-c",
            str(CONNECTIONS),
            "-m",
            "1",
            "-t",
            "1",
            "-D",
            f"{duration:g}",
            "--warm-up-time",
            f"{WARM_UP:g}",
            "-d",
            str(body),
            "-H",
            "content-type: application/grpc",
            "-H",
            "te: trailers",
            "--log-file",
            str(log),
            f"http://{target}{METHOD}",
        ]
        out = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60, check=True).stdout
        rows = [line.split("\t") for line in log.read_text().splitlines() if line]
    answered = [int(micros) / 1000 for _start, status, micros in rows if status == "200"]
    found = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out)
    failed = re.search(r"requests: .* (\d+) failed, (\d+) errored", out)
    # h2load logs no call of its warm-up, over which the server's CPU is measured too: its calls
    # are counted at the measured rate.
    return Round(
        rate=float(found.group(1)) if found else len(answered) / duration,
        p50=percentile(answered, 50),
        p99=percentile(answered, 99),
        failed=(int(failed.group(1)) + int(failed.group(2))) if failed else 0,
        answered=round(len(answered) * (duration + WARM_UP) / duration),
    )


def h2client_round(target: str, request: bytes | Sequence[bytes], duration: float) -> Round:
    """The same load through ``bench.h2client`` (grpc-status checked on every call); with a sequence
    of requests, each connection takes its own in turn (connection n: n, n + 32, ...)."""
    pool = [request] if isinstance(request, bytes) else request
    clients = [h2client.Client(n, CONNECTIONS, 0.0) for n in range(CONNECTIONS)]
    start = h2client.drive(target, METHOD, clients, pool, WARM_UP + duration, timeout=CALL_TIMEOUT)
    latencies, failed, answered, since = [], 0, 0, start + WARM_UP
    for client in clients:
        for call in client.calls:
            ok = not call.failure and call.status == 0 and call.replies() is not None
            answered += ok
            if call.began < since:
                continue
            if not ok:
                failed += 1
            else:
                latencies.append((call.ended - call.began) * 1000)
    return Round(
        len(latencies) / duration, percentile(latencies, 50), percentile(latencies, 99), failed, answered=answered
    )


# Distinct calls per second of a round that a slice of hands has room for (more than a quiet
# machine's bare server answers), so no hand is asked twice in a round.
DISTINCT_RATE = 6_000
DISTINCT_SEED = 20261204


def distinct_requests(round_: int, duration: float) -> list[bytes]:
    """Round ``round_``'s SolveHand requests (search engine) on hands no round before it asked."""
    from bench.hands import end_of_deal
    from bench.service import ENGINES, solve_requests

    count = int(DISTINCT_RATE * (WARM_UP + duration))
    return solve_requests(end_of_deal(DISTINCT_SEED + round_, count, 10), ENGINES["search"])


def check_reply(target: str, request: bytes, reply: bytes) -> str | None:
    """None when the server answers ``request`` with ``reply`` (grpc-status OK); else what it did."""
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        try:
            got = call(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            return f"{error.code()}: {error.details()}"
    return None if got == reply else f"another reply ({len(got)} bytes)"


# Main ----------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} round of {QUICK_DURATION:g} s")
    parser.add_argument("--duration", type=float, help=f"seconds measured per server and round ({DEFAULT_DURATION:g})")
    parser.add_argument("--rounds", type=int, help=f"rounds ({DEFAULT_ROUNDS})")
    parser.add_argument("--baseline", type=Path, help="a checkout of another build, whose referee is served beside")
    parser.add_argument(
        "--load-generator",
        choices=("h2load", "h2"),
        help="h2load (the default when on the PATH) or bench.h2client",
    )
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="the referees get SolveHand calls on hands they have not seen, with the search engine",
    )
    parser.add_argument("--bare", choices=("aio", "sync", "aio-stream"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--reply", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.duration = args.duration or (QUICK_DURATION if args.quick else DEFAULT_DURATION)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    if args.duration <= 0 or args.rounds < 1:
        parser.error(f"--duration must be above 0 and --rounds at least 1, not {args.duration:g} and {args.rounds}")
    if args.baseline is not None and not (args.baseline / "referee" / "server").is_dir():
        parser.error(f"--baseline: no referee checkout in {args.baseline}")
    if args.distinct and args.load_generator == "h2load":
        parser.error("--distinct: h2load sends one body; use --load-generator h2")
    if args.load_generator is None:
        args.load_generator = "h2load" if shutil.which("h2load") and not args.distinct else "h2"
    elif args.load_generator == "h2load" and not shutil.which("h2load"):
        parser.error("--load-generator h2load: h2load is not on the PATH (make h2load installs it)")
    return args


def _ok_calls(server: Server) -> int:
    """SolveHand calls the referee logged OK so far."""
    return len(re.findall(r"SolveHand OK ", server.log_since(0)))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the servers in turn and print the table; 1 if a server misbehaved."""
    args = parse_args(argv)
    if args.bare:
        reply = bytes.fromhex(args.reply)
        if args.bare == "sync":
            serve_sync(args.port, reply)
        else:
            serve_aio(args.port, reply, streamed=args.bare == "aio-stream")
        return 0
    request, reply = request_bytes(), reply_bytes()
    measure = h2load_round if args.load_generator == "h2load" else h2client_round
    print(
        f"bench.floor: {CONNECTIONS} connections, one call each, {WORKERS} processes per server, "
        f"{args.rounds} x {args.duration:g} s, load generator {args.load_generator}"
        + (", the referees on distinct hands (search engine)" if args.distinct else "")
    )
    print(f"cpus: {os.cpu_count()}; load average at start: {load_average()}")
    servers: dict[str, BareServer | Server] = {}
    problems: list[str] = []
    try:
        servers["aio"] = BareServer("aio", reply)
        servers["sync"] = BareServer("sync", reply)
        servers["aio-stream"] = BareServer("aio-stream", reply)
        servers["referee"] = Server(WORKERS)
        if args.baseline is not None:
            servers["baseline"] = Server(WORKERS, root=args.baseline.resolve())
        for server in servers.values():
            if isinstance(server, Server):
                server.wait_ready()
        for name, server in servers.items():
            if (wrong := check_reply(server.target, request, reply)) is not None:
                problems.append(f"{name} answered {wrong}")
        if problems:
            raise RuntimeError("; ".join(problems))
        logged_before = {name: _ok_calls(s) for name, s in servers.items() if isinstance(s, Server)}
        rounds: dict[str, list[Round]] = {name: [] for name in servers}
        for n in range(args.rounds):
            distinct = distinct_requests(n, args.duration) if args.distinct else None
            for name, server in servers.items():
                cpu_before = server.tree_cpu() if isinstance(server, Server) else 0.0
                if distinct is not None and isinstance(server, Server):
                    result = h2client_round(server.target, distinct, args.duration)
                else:
                    result = measure(server.target, request, args.duration)
                if isinstance(server, Server):
                    result = replace(result, cpu=server.tree_cpu() - cpu_before)
                rounds[name].append(result)
                per_call = result.cpu_ms_per_call
                print(
                    f"  round {n + 1} {name:<8} {result.rate:>8.0f} calls/s  p50 {result.p50:6.2f} ms  "
                    f"p99 {result.p99:6.2f} ms  failed {result.failed}"
                    + (f"  server CPU {per_call:.3f} ms/call" if per_call is not None else ""),
                    flush=True,
                )
        for name, server in servers.items():
            if isinstance(server, Server):
                logged = _ok_calls(server) - logged_before[name]
                if not logged:
                    problems.append(f"{name} logged no OK call")
    finally:
        for name, server in servers.items():
            if server.stop() != 0:
                problems.append(f"{name} did not stop cleanly")
    rows = {name: sorted(found, key=lambda r: r.rate)[(len(found) - 1) // 2] for name, found in rounds.items()}
    print(f"{'server':<9} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} {'x aio':>6} {'x sync':>6}")
    for name, row in rows.items():
        failed = sum(r.failed for r in rounds[name])
        print(
            f"{name:<9} {row.rate:>8.0f} {row.p50:>7.2f} {row.p99:>7.2f} {failed:>6} "
            f"{row.rate / rows['aio'].rate:>6.2f} {row.rate / rows['sync'].rate:>6.2f}"
        )
    for name, found in rounds.items():
        per_call = [r.cpu_ms_per_call for r in found if r.cpu_ms_per_call is not None]
        if per_call:
            print(
                f"{name}: server CPU per call answered (warm-up included), median of rounds {statistics.median(per_call):.3f} ms"
            )
    spread = {name: statistics.pstdev([r.rate for r in found]) for name, found in rounds.items()}
    print("spread of calls/s over rounds (sd): " + ", ".join(f"{name} {sd:.0f}" for name, sd in spread.items()))
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
