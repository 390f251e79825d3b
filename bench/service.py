"""Load test of the gRPC referee on loopback: requests/s and latency per RPC, clients and workers.

Run from the repository root::

    python -m bench.service                 # default run (about three and a half minutes on 2 cores)
    python -m bench.service --quick         # a short run
    python -m bench.service --engines search --clients 32 --duration 10

For each server size (``--workers 1`` and ``--workers 2``) the referee is started as a
subprocess (``python -m referee.server``) on a free loopback port, waited for until
every worker listens and the health service answers SERVING, and stopped with SIGTERM at the
end, which must make it exit 0. Against it, for each engine (``rules.engine`` ENGINE_CPSAT and
ENGINE_SEARCH), each RPC (SolveHand, ScoreDeal) and each number of clients (1, 8, 32), the
clients run closed loops (a call, its reply, the next call) for a fixed duration.

The load generator must not be the bottleneck, nor take the server's CPU, so:

- every client has its own TCP connection, which is what lets the kernel spread the clients over
  the server's SO_REUSEPORT workers;
- the clients of a cell run in one process (``--client-processes`` deals them out to more),
  forked before any gRPC object exists;
- by default the clients are ``bench.h2client``: gRPC's HTTP/2 framing written by hand, all
  connections on one ``epoll`` loop, about 0.06 ms of CPU per call. ``--load-generator grpc``
  uses ``grpc.aio`` channels instead (``grpc.use_local_subchannel_pool`` keeps them from sharing
  a connection), about 0.25 ms per call: at 1,300 calls/s a third of a core, taken on a small
  machine from the server being measured. (A process per client cost about 0.5 ms.) The two
  load the server the same way: the same requests, one call in flight per connection;
- requests are serialized once, up front. With ``h2`` replies are decoded and checked after the
  clock stops (a call counts only with grpc-status 0 and one reply message); with ``grpc`` each
  reply is parsed as it comes. The check: a SolveHand reply holds a linking, a ScoreDeal reply a
  valid close.

The CPU time of the clients and of the server processes is measured per cell and printed in
cores, next to the machine's core count: on a small machine the clients compete with the
server for the same cores, and the figures say how much.

Requests come from fixed seeds, so two runs send the same requests:

- SolveHand: distinct 10-card end-of-deal hands (``bench.hands.end_of_deal``). The server
  caches best linkings per hand (an LRU per process), so the hands are handed out in order
  and none is sent twice to the same server under the same engine unless the pool runs out
  (the report says so if it does). The search engine's own caches of hand components stay
  warm across hands: that is the steady state of a long-running server.
- ScoreDeal: distinct 4-player deals dealt from a shuffled 108-card deck. The closer's 10
  shown cards are real linked groups (runs and same-rank groups, sometimes with a joker), so
  every close is valid, plus a discard; the three others hold 10 cards each; the rest is split
  into a discard pile and a stock, so every card of the deck is accounted for.

The target is printed next to the figures: SolveHand with 32 clients against
2 workers at 600 requests/s or more with p99 under 50 ms. A single run's p99 there depends on how
the kernel happened to split the 32 connections between the two workers (a split of 20 + 12 or
worse comes about one time in five; the clients of the busier worker wait longer), so that cell
is run ``--target-runs`` times (5), each on new connections, and its row is the median run by
p99; every run is printed under it. Then the same clients send at a fixed 600 calls/s in all
(``--target-rate``), each call's latency counted from when it was due, so a late reply also
counts against the calls it held back: the latency a client sees at the target's rate, where the
closed loops show it at saturation (32 calls always outstanding, so a call there waits mostly
for the 31 others: Little's law gives a mean of 32 / throughput). The verdict is the closed
loops'. A missed target does not change the exit status; an error, a bad reply or a server that
does not exit 0 makes it 1.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import multiprocessing
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as ``python bench/service.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# gRPC is imported, but no channel or server may exist before the clients are forked.
import grpc  # noqa: E402

from bench import h2client  # noqa: E402
from bench.hands import end_of_deal  # noqa: E402
from bench.machine import load_average  # noqa: E402
from bench.suite import Tree  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402
from referee.api.convert import deal_to_proto  # noqa: E402
from referee.game.cards import Card  # noqa: E402
from referee.game.samples import sample_deals  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
SEED = 20240601
WARMUP_SEED = SEED + 1

DEFAULT_DURATION = 5.0
QUICK_DURATION = 1.5
DEFAULT_HANDS = 240000
QUICK_HANDS = 6000
DEFAULT_DEALS = 48000
QUICK_DEALS = 4000
DEFAULT_WORKERS = (1, 2)
DEFAULT_CLIENTS = (1, 8, 32)
RPCS = ("SolveHand", "ScoreDeal")
ENGINES = {"cpsat": pb.ENGINE_CPSAT, "search": pb.ENGINE_SEARCH}
CALL_TIMEOUT = 10.0
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
PLAYERS = 4

# The target.
TARGET_RPC, TARGET_CLIENTS, TARGET_WORKERS = "SolveHand", 32, 2
TARGET_RPS, TARGET_P99_MS = 600.0, 50.0

METHODS = {rpc: f"/remigio.referee.v1.RefereeService/{rpc}" for rpc in RPCS}
REPLIES = {"SolveHand": pb.SolveHandResponse, "ScoreDeal": pb.ScoreDealResponse}
PID_KEY = "x-referee-pid"  # trailing metadata: the server process that answered
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]

# Serialized requests by (rpc, engine), set before the clients are forked (they inherit it).
POOLS: dict[tuple[str, str], list[bytes]] = {}


# Requests --------------------------------------------------------------------------------------


def solve_requests(hands: Sequence[Sequence[Card]], engine: int) -> list[bytes]:
    """SolveHand requests for ``hands`` under ``engine``, serialized."""
    rules = pb.RuleOptions(engine=engine)  # type: ignore[arg-type]
    return [pb.SolveHandRequest(cards=[c.code() for c in hand], rules=rules).SerializeToString() for hand in hands]


def make_deals(seed: int, count: int) -> list[pb.Deal]:
    """``count`` distinct end-of-deal states of 4 players, the closer with a valid close."""
    return [deal_to_proto(deal) for deal in sample_deals(seed, count, PLAYERS)]


def deal_requests(deals: Sequence[pb.Deal], engine: int) -> list[bytes]:
    """ScoreDeal requests for ``deals`` under ``engine``, serialized."""
    rules = pb.RuleOptions(engine=engine)  # type: ignore[arg-type]
    return [pb.ScoreDealRequest(deal=deal, rules=rules).SerializeToString() for deal in deals]


# Clients ---------------------------------------------------------------------------------------


@dataclass
class ClientResult:
    """What one client did in one cell."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    bad_replies: int = 0
    sent: int = 0
    last_done: float = 0.0
    first_error: str = ""
    server_pid: str = ""


def _check_reply(rpc: str, reply: Any) -> bool:
    if rpc == "SolveHand":
        return reply.HasField("linking") and reply.linking.points >= 0
    return bool(reply.close.valid) and len(reply.players) == PLAYERS


def _client_process(conn: Connection, generator: str) -> None:
    """A client process: run its share of each cell's clients on command until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    # What the parent built (the request pools, the hands they came from) is never freed here; a
    # full collection walking it would stall every client at once, and show as latency.
    gc.freeze()
    while True:
        command = conn.recv()
        if command is None:
            return
        if generator == "h2":
            conn.send(_h2_cell(conn, *command))
        else:
            conn.send(asyncio.run(_grpc_cell(conn, *command)))


_STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def _h2_cell(
    conn: Connection, target: str, rpc: str, engine: str, slots: Sequence[tuple[int, int, float]], period: float
) -> tuple[list[ClientResult], float] | None:
    """One cell's clients in this process, through ``bench.h2client``: one connection each; their
    results and this process's CPU seconds while they ran, or None when the parent gave up on the
    cell. Replies are decoded and checked after the clock stops."""
    clients = [h2client.Client(first, step, phase) for first, step, phase in slots]
    try:
        connections = h2client.open_connections(target, METHODS[rpc], clients, CALL_TIMEOUT)
    except OSError as error:
        conn.send(f"no connection: {error}")
        conn.recv()
        return None
    try:
        conn.send("ready")
        go = conn.recv()
        if go is None:
            return None
        start_at, stop_at = go
        for client in clients:
            client.start_at += start_at
        cpu_start = time.process_time()
        gc.disable()  # the run makes no cycles; a collection in it would only stall the clients
        try:
            h2client.run(connections, POOLS[(rpc, engine)], stop_at, period, CALL_TIMEOUT)
        finally:
            gc.enable()
        cpu = time.process_time() - cpu_start
    finally:
        h2client.close(connections)
    return [h2_result(rpc, client) for client in clients], cpu


def h2_result(rpc: str, client: h2client.Client) -> ClientResult:
    """A client's calls, decoded and checked."""
    h2client.settle(client)
    result = ClientResult(sent=client.sent)
    if client.calls:
        result.server_pid = client.calls[0].metadata.get(PID_KEY, "?")
        result.last_done = max(call.ended for call in client.calls)
    for call in client.calls:
        replies = call.replies()
        if call.failure or call.status != 0:
            # As a gRPC client names them: its deadline passed, or the connection went away.
            if call.failure:
                name = "DEADLINE_EXCEEDED" if call.failure.startswith("DEADLINE_EXCEEDED") else "UNAVAILABLE"
            else:
                name = _STATUS_NAMES.get(call.status, "UNKNOWN")
            result.errors[name] += 1
            result.first_error = result.first_error or call.failure or f"{name}: {call.details}"
        elif replies is None or len(replies) != 1:
            result.errors["UNKNOWN"] += 1
            got = "a malformed reply" if replies is None else f"{len(replies)} reply messages"
            result.first_error = result.first_error or f"grpc-status 0 with {got}"
        else:
            result.latencies_ms.append((call.ended - call.began) * 1000)
            if not _check_reply(rpc, REPLIES[rpc].FromString(replies[0])):
                result.bad_replies += 1
    return result


async def _grpc_cell(
    conn: Connection, target: str, rpc: str, engine: str, slots: Sequence[tuple[int, int, float]], period: float
) -> tuple[list[ClientResult], float] | None:
    """One cell's clients in this process through ``grpc.aio``: one channel (one connection) each;
    their results and this process's CPU seconds, or None when the parent gave up on the cell."""
    channels = [grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) for _ in slots]
    try:
        try:
            ready = asyncio.gather(*(channel.channel_ready() for channel in channels))
            await asyncio.wait_for(ready, START_TIMEOUT)
            conn.send("ready")
        except TimeoutError:
            conn.send("no connection")
        go = conn.recv()  # nothing else runs on this loop yet, so blocking it is harmless
        if go is None:
            return None
        start_at, stop_at = go
        cpu_start = time.process_time()
        clients = (
            _client(channel, rpc, engine, first, step, start_at + phase, stop_at, period)
            for channel, (first, step, phase) in zip(channels, slots)
        )
        results = await asyncio.gather(*clients)
        return list(results), time.process_time() - cpu_start
    finally:
        for channel in channels:
            await channel.close()


async def _client(
    channel: grpc.aio.Channel,
    rpc: str,
    engine: str,
    first: int,
    step: int,
    start_at: float,
    stop_at: float,
    period: float = 0.0,
) -> ClientResult:
    """One client from ``start_at`` to ``stop_at``, sending requests first, first+step, ... of the
    pool: a closed loop (a call, its reply, the next call), or with ``period`` one call every
    ``period`` seconds, its latency counted from when it was due, so a late reply also counts
    against the calls it held back."""
    pool = POOLS[(rpc, engine)]
    call = channel.unary_unary(METHODS[rpc], request_serializer=None, response_deserializer=REPLIES[rpc].FromString)
    result = ClientResult()
    due = start_at
    await asyncio.sleep(max(0.0, due - time.monotonic()))
    index = first
    while (due if period else time.monotonic()) < stop_at:
        request = pool[index % len(pool)]
        index += step
        result.sent += 1
        if period:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            began, due = due, due + period
        else:
            began = time.monotonic()
        try:
            pending = call(request, timeout=CALL_TIMEOUT)
            reply = await pending
            elapsed_ms = (time.monotonic() - began) * 1000
            if not result.server_pid:
                # The first call also says which server process holds this connection.
                metadata = dict(await pending.trailing_metadata() or ())
                result.server_pid = str(metadata.get(PID_KEY, "?"))
        except grpc.RpcError as error:
            code = error.code()
            result.errors[code.name if code else "UNKNOWN"] += 1
            result.first_error = result.first_error or f"{code}: {error.details()}"
        else:
            result.latencies_ms.append(elapsed_ms)
            if not _check_reply(rpc, reply):
                result.bad_replies += 1
        result.last_done = time.monotonic()
    return result


class Clients:
    """A fixed set of client processes, forked once; a cell's clients are dealt out to them in turn."""

    def __init__(self, processes: int, generator: str) -> None:
        context = multiprocessing.get_context("fork")
        self.conns: list[Connection] = []
        self.processes = []
        for n in range(processes):
            parent, child = context.Pipe()
            process = context.Process(
                target=_client_process, args=(child, generator), name=f"bench-clients-{n}", daemon=True
            )
            process.start()
            child.close()
            self.conns.append(parent)
            self.processes.append(process)

    def run(
        self,
        target: str,
        rpc: str,
        engine: str,
        first: int,
        clients: int,
        duration: float,
        server: Server,
        rate: float = 0.0,
    ) -> tuple[list[ClientResult], float, float, float]:
        """Run ``clients`` clients for ``duration`` seconds, client i sending requests first+i,
        first+i+clients, ... (closed loops, or ``rate`` calls per second in all, the clients taking
        turns); their results, the common start time and the cores used by the clients and by
        the server."""
        period = clients / rate if rate else 0.0
        slots: list[list[tuple[int, int, float]]] = [[] for _ in self.conns]
        for i in range(clients):
            slots[i % len(slots)].append((first + i, clients, i * period / clients))
        conns = [conn for conn, mine in zip(self.conns, slots) if mine]
        for conn, mine in zip(conns, slots):
            conn.send((target, rpc, engine, mine, period))
        answers = [conn.recv() for conn in conns]
        if any(answer != "ready" for answer in answers):
            for conn in conns:
                conn.send(None)
            [conn.recv() for conn in conns]
            raise RuntimeError(f"clients could not connect to {target}: {answers}")
        start_at = time.monotonic() + 0.05
        for conn in conns:
            conn.send((start_at, start_at + duration))
        time.sleep(max(0.0, start_at - time.monotonic()))
        cpu_before, wall_before = server.cpu_seconds(), time.monotonic()
        replies = [conn.recv() for conn in conns]
        wall = max(time.monotonic() - wall_before, 1e-9)
        server_cores = (server.cpu_seconds() - cpu_before) / wall
        results = [result for mine, _cpu in replies for result in mine]
        client_cores = sum(cpu for _mine, cpu in replies) / wall
        return results, start_at, client_cores, server_cores

    def close(self) -> None:
        """Stop the client processes."""
        for conn in self.conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)


# The server ------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (0 when unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """The referee as a subprocess on a free loopback port."""

    def __init__(
        self,
        workers: int,
        threads: int | None = None,
        extra: Sequence[str] = (),
        one_client: bool = True,
        root: Path = REPO,
    ) -> None:
        """``one_client``: every client of the benchmark counts as one (they share an address and
        have no key), so the per-client cap is lifted; ``extra``: more ``serve`` flags; ``root``:
        the checkout whose ``referee`` runs (another build's, to compare two back to back)."""
        self.workers = workers
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", prefix="bench-service-")
        command = [
            sys.executable,
            "-m",
            "referee.server",
            "--host",
            HOST,
            "--port",
            "0",
            "--workers",
            str(workers),
            # Each reply names its process, so the report can show how connections were spread.
            "--debug-pid",
        ]
        if one_client:
            # Every simulated client comes from one address: one client's fair share would cap them all.
            command += ["--max-calls-per-client", "100000"]
        command += extra
        if threads is not None:
            command += ["--threads", str(threads)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
        self.process = subprocess.Popen(
            command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log
        )
        self.port = 0
        self.pids: list[int] = []

    @property
    def target(self) -> str:
        """Where the server listens."""
        return f"{HOST}:{self.port}"

    def _log_text(self, start: int = 0) -> str:
        """The log from byte ``start`` on, read without moving the file offset the server writes at."""
        fd, chunks = self.log.fileno(), []
        while chunk := os.pread(fd, 1 << 20, start):
            chunks.append(chunk)
            start += len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def log_size(self) -> int:
        """Bytes the server has written to its log (stderr) so far."""
        return os.fstat(self.log.fileno()).st_size

    def log_search(self, pattern: str) -> re.Match[str] | None:
        """The first match of ``pattern`` in the server's log so far."""
        return re.search(pattern, self._log_text())

    def log_since(self, start: int) -> str:
        """What the server has logged from byte ``start`` (a ``log_size``) on."""
        return self._log_text(start)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's stderr."""
        return "\n".join(self._log_text().splitlines()[-lines:])

    def wait_ready(self) -> None:
        """Wait until every worker listens and the health service answers SERVING."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        deadline = time.monotonic() + START_TIMEOUT
        pattern = re.compile(r"listening on 127\.0\.0\.1:(\d+) \(pid (\d+)[,)]")
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.process.returncode}:\n{self.log_tail()}")
            found = pattern.findall(self._log_text())
            if len(found) >= self.workers:
                self.port = int(found[0][0])
                self.pids = [int(pid) for _, pid in found]
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start in {START_TIMEOUT:g}s:\n{self.log_tail()}")
            time.sleep(0.05)
        if self.workers > 1:
            self.pids.append(self.process.pid)
        with grpc.insecure_channel(self.target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server's health did not turn SERVING in {START_TIMEOUT:g}s")
                time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """CPU time of the server processes so far."""
        return sum(_cpu_seconds(pid) for pid in self.pids)

    def cpu_by_worker(self) -> list[float]:
        """CPU seconds of each worker process so far (the parent of several workers left out)."""
        return [_cpu_seconds(pid) for pid in self.pids[: self.workers]]

    def tree_cpu(self) -> float:
        """CPU seconds so far of the server's processes, all of them: its workers, their dispute
        jobs and the parent of several workers."""
        tree = Tree(self.process.pid)
        tree.sample()
        return sum(tree.cpu.values())

    def stop(self) -> int | None:
        """SIGTERM, then wait; the exit status, or None when it had to be killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        return self.process.returncode


def warm_up(server: Server, requests: dict[tuple[str, str], list[bytes]], channels: int = 8) -> None:
    """Send a few requests not in the measured pools on several connections, to load every worker."""
    for n in range(channels):
        with grpc.insecure_channel(server.target, options=CHANNEL_OPTIONS) as channel:
            for (rpc, _engine), pool in requests.items():
                call = channel.unary_unary(METHODS[rpc], request_serializer=None, response_deserializer=None)
                for request in pool[n::channels]:
                    call(request, timeout=CALL_TIMEOUT)


# Figures ---------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``; nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass
class Row:
    """One cell of the table."""

    workers: int
    engine: str
    rpc: str
    clients: int
    requests: int
    errors: int
    bad: int
    rps: float
    p50: float
    p99: float
    client_cores: float
    server_cores: float
    first_error: str = ""
    spread: str = ""

    def target(self) -> str:
        """The target, where it applies, and whether this row meets it."""
        if (self.rpc, self.clients, self.workers) != (TARGET_RPC, TARGET_CLIENTS, TARGET_WORKERS):
            return ""
        met = self.rps >= TARGET_RPS and self.p99 < TARGET_P99_MS and self.errors == 0
        return f"target >= {TARGET_RPS:.0f}/s, p99 < {TARGET_P99_MS:.0f} ms: {'met' if met else 'MISSED'}"


def measure(
    clients: Clients, server: Server, rpc: str, engine: str, first: int, count: int, duration: float, rate: float = 0.0
) -> tuple[Row, int]:
    """One cell (closed loops, or ``rate`` calls per second in all); the row and how many pool
    requests it used up."""
    results, start_at, client_cores, server_cores = clients.run(
        server.target, rpc, engine, first, count, duration, server, rate
    )
    # The window: from the common start to the last reply (a call in flight at the end finishes).
    window = max(max(r.last_done for r in results) - start_at, 1e-9)
    latencies = [ms for r in results for ms in r.latencies_ms]
    errors = sum(sum(r.errors.values()) for r in results)
    row = Row(
        workers=server.workers,
        engine=engine,
        rpc=rpc,
        clients=count,
        requests=len(latencies) + errors,
        errors=errors,
        bad=sum(r.bad_replies for r in results),
        rps=len(latencies) / window,
        p50=percentile(latencies, 50),
        p99=percentile(latencies, 99),
        client_cores=client_cores,
        server_cores=server_cores,
        first_error=next((r.first_error for r in results if r.first_error), ""),
        spread=_spread(server, results),
    )
    return row, count * max(r.sent for r in results)


def median_row(runs: Sequence[Row]) -> Row:
    """One row for several runs of a cell: the median run by p99 (its rate, latencies, CPU and
    split of connections), with the requests, errors and bad replies of all of them."""
    if len(runs) == 1:
        return runs[0]
    middle = sorted(runs, key=lambda r: r.p99)[(len(runs) - 1) // 2]
    return Row(
        workers=middle.workers,
        engine=middle.engine,
        rpc=middle.rpc,
        clients=middle.clients,
        requests=sum(r.requests for r in runs),
        errors=sum(r.errors for r in runs),
        bad=sum(r.bad for r in runs),
        rps=middle.rps,
        p50=middle.p50,
        p99=middle.p99,
        client_cores=middle.client_cores,
        server_cores=middle.server_cores,
        first_error=next((r.first_error for r in runs if r.first_error), ""),
        spread=middle.spread,
    )


def _spread(server: Server, results: Sequence[ClientResult]) -> str:
    """How many client connections each server process held, e.g. "17+15"."""
    held = Counter(r.server_pid for r in results)
    workers = [str(pid) for pid in server.pids[: server.workers]]
    counts = [held.pop(pid, 0) for pid in workers]
    return "+".join(str(n) for n in counts) + (f"+{sum(held.values())}?" if held else "")


HEADER = (
    f"{'workers':>7} {'engine':>6} {'rpc':<9} {'clients':>7} {'requests':>8} {'errors':>6} {'bad':>3} "
    f"{'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'cli cpu':>7} {'srv cpu':>7} {'conns':>7}  target"
)


def format_row(row: Row) -> str:
    """A line of the table."""
    return (
        f"{row.workers:>7} {row.engine:>6} {row.rpc:<9} {row.clients:>7} {row.requests:>8} {row.errors:>6} {row.bad:>3} "
        f"{row.rps:>7.0f} {row.p50:>7.2f} {row.p99:>7.2f} {row.client_cores:>7.2f} {row.server_cores:>7.2f} {row.spread:>7}  {row.target()}"
    ).rstrip()


# Main ------------------------------------------------------------------------------------------


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"every value must be at least 1: {text!r}")
    return values


def _engine_list(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [v for v in values if v not in ENGINES]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"engines are {', '.join(ENGINES)}, not {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.service", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"a short run: {QUICK_DURATION:g}s per cell, smaller pools"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"how long the clients run per cell (default {DEFAULT_DURATION:g}, --quick {QUICK_DURATION:g})",
    )
    parser.add_argument(
        "--engines",
        type=_engine_list,
        default=tuple(ENGINES),
        metavar="LIST",
        help="engines to load, comma-separated (default cpsat,search)",
    )
    parser.add_argument(
        "--workers",
        type=_int_list,
        default=DEFAULT_WORKERS,
        metavar="LIST",
        help="server sizes, comma-separated (default 1,2)",
    )
    parser.add_argument(
        "--clients",
        type=_int_list,
        default=DEFAULT_CLIENTS,
        metavar="LIST",
        help="numbers of concurrent clients, comma-separated (default 1,8,32)",
    )
    parser.add_argument(
        "--target-runs",
        type=int,
        default=5,
        metavar="N",
        help="runs of the target's cell, each on new connections; its row is their median (default 5)",
    )
    parser.add_argument(
        "--target-rate",
        type=float,
        default=TARGET_RPS,
        metavar="CALLS_PER_S",
        help=f"after the target's cell, the same clients at this fixed rate in all (0: skip; default {TARGET_RPS:g})",
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        metavar="N",
        help="processes the clients are dealt out to (default 1)",
    )
    parser.add_argument(
        "--load-generator",
        choices=("h2", "grpc"),
        default="h2",
        help="h2: bench.h2client, HTTP/2 frames by hand, little CPU per call (default); grpc: grpc.aio channels",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="threads per server process (default: the server's own default)",
    )
    parser.add_argument(
        "--rpcs", default=",".join(RPCS), metavar="LIST", help="RPCs to load (default SolveHand,ScoreDeal)"
    )
    parser.add_argument(
        "--hands",
        type=int,
        default=None,
        metavar="N",
        help=f"distinct SolveHand requests (default {DEFAULT_HANDS}, --quick {QUICK_HANDS})",
    )
    parser.add_argument(
        "--deals",
        type=int,
        default=None,
        metavar="N",
        help=f"distinct ScoreDeal requests (default {DEFAULT_DEALS}, --quick {QUICK_DEALS})",
    )
    args = parser.parse_args(argv)
    args.duration = args.duration or (QUICK_DURATION if args.quick else DEFAULT_DURATION)
    if args.duration <= 0:
        parser.error("--duration must be more than 0")
    if args.client_processes < 1:
        parser.error("--client-processes must be at least 1")
    if args.target_runs < 1:
        parser.error("--target-runs must be at least 1")
    if not 0 <= args.target_rate < float("inf"):
        parser.error("--target-rate must be 0 or more")
    args.hands = args.hands or (QUICK_HANDS if args.quick else DEFAULT_HANDS)
    args.deals = args.deals or (QUICK_DEALS if args.quick else DEFAULT_DEALS)
    args.rpcs = tuple(part.strip() for part in args.rpcs.split(",") if part.strip())
    if not args.rpcs or any(rpc not in RPCS for rpc in args.rpcs):
        parser.error(f"--rpcs takes {', '.join(RPCS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load test and print the table; 1 on errors, bad replies or an unclean server exit."""
    args = parse_args(argv)
    cpus = os.cpu_count() or 1
    print(
        f"bench.service: gRPC load on loopback, {platform.python_implementation()} {platform.python_version()}, "
        f"grpcio {grpc.__version__}, {platform.machine()}"
    )
    print(f"cpus: {cpus} (os.cpu_count); load average at start: {load_average()}")
    if cpus <= 4:
        print(
            f"note: only {cpus} cores here; the clients run on the same cores as the server and "
            "compete with it, so the figures are a lower bound for the server alone "
            "('cli cpu' and 'srv cpu' are the cores each side used during the cell)"
        )
    started = time.monotonic()
    hands = end_of_deal(SEED, args.hands, 10) if "SolveHand" in args.rpcs else []
    deals = make_deals(SEED, args.deals) if "ScoreDeal" in args.rpcs else []
    warm_hands = end_of_deal(WARMUP_SEED, 16, 10)
    warm_deals = make_deals(WARMUP_SEED, 16)
    warm: dict[tuple[str, str], list[bytes]] = {}
    for engine in args.engines:
        if "SolveHand" in args.rpcs:
            POOLS[("SolveHand", engine)] = solve_requests(hands, ENGINES[engine])
            warm[("SolveHand", engine)] = solve_requests(warm_hands, ENGINES[engine])
        if "ScoreDeal" in args.rpcs:
            POOLS[("ScoreDeal", engine)] = deal_requests(deals, ENGINES[engine])
            warm[("ScoreDeal", engine)] = deal_requests(warm_deals, ENGINES[engine])
    print(f"requests (fixed seed {SEED}, built in {time.monotonic() - started:.1f}s):")
    if hands:
        print(
            f"  SolveHand: {len(hands)} distinct requests, 10-card end_of_deal hands; handed out in order, "
            "none sent twice to one server under one engine unless the pool runs out"
        )
    if deals:
        print(
            f"  ScoreDeal: {len(deals)} distinct requests, {PLAYERS}-player deals from a shuffled 108-card deck, "
            "the closer's 10 cards in linked groups (a valid close), the rest in discard pile and stock"
        )
    processes = min(args.client_processes, max(args.clients))
    how = (
        "bench.h2client (HTTP/2 by hand, one epoll loop)"
        if args.load_generator == "h2"
        else "grpc.aio channels (asyncio tasks)"
    )
    print(
        f"duration {args.duration:g}s per cell; closed loop, one connection per client; load generator: {how} "
        f"in {processes} process{'es' if processes > 1 else ''}; per-call deadline {CALL_TIMEOUT:g}s"
    )
    print(
        "columns: requests = calls completed, errors = calls failed, bad = replies that failed the check "
        "(SolveHand: a linking; ScoreDeal: a valid close), req/s = successful calls per second, "
        "p50/p99 = latency of successful calls, cli/srv cpu = cores used by clients/server, "
        "conns = client connections held by each server worker process (SO_REUSEPORT spreads them)"
    )

    clients = Clients(processes, args.load_generator)
    rows: list[Row] = []
    paced_rows: list[Row] = []
    exits: dict[int, int | None] = {}
    wrapped: list[str] = []
    failed = False
    print()
    print(HEADER, flush=True)
    try:
        for workers in args.workers:
            server = Server(workers, args.threads)
            try:
                server.wait_ready()
                warm_up(server, warm)
                for engine in args.engines:
                    for rpc in args.rpcs:
                        cursor = 0
                        for count in args.clients:
                            target_cell = (rpc, count, workers) == (TARGET_RPC, TARGET_CLIENTS, TARGET_WORKERS)
                            runs = []
                            for _ in range(args.target_runs if target_cell else 1):
                                run, used = measure(clients, server, rpc, engine, cursor, count, args.duration)
                                cursor += used
                                runs.append(run)
                            row = median_row(runs)
                            rows.append(row)
                            print(format_row(row), flush=True)
                            if len(runs) > 1:
                                each = "; ".join(f"{r.rps:.0f}/s p99 {r.p99:.1f} ({r.spread})" for r in runs)
                                print(f"        {len(runs)} runs, the row is their median: {each}", flush=True)
                            if target_cell and args.target_rate:
                                paced, used = measure(
                                    clients, server, rpc, engine, cursor, count, args.duration, args.target_rate
                                )
                                cursor += used
                                paced_rows.append(paced)
                                print(
                                    f"        at a fixed {args.target_rate:g} calls/s in all: {paced.rps:.0f}/s served, "
                                    f"p50 {paced.p50:.2f} ms, p99 {paced.p99:.2f} ms ({paced.spread}, "
                                    f"{paced.errors} errors, {paced.bad} bad)",
                                    flush=True,
                                )
                            if row.first_error:
                                print(f"        first error: {row.first_error}", flush=True)
                        pool = len(POOLS[(rpc, engine)])
                        if cursor > pool:
                            wrapped.append(f"workers={workers} {engine} {rpc}: {cursor} requests from a pool of {pool}")
            except Exception:
                print(f"server log (last lines):\n{server.log_tail()}", file=sys.stderr)
                raise
            finally:
                exits[workers] = server.stop()
    finally:
        clients.close()

    print()
    for workers, status in exits.items():
        state = (
            "exit status 0" if status == 0 else ("killed after no exit" if status is None else f"exit status {status}")
        )
        print(f"server --workers {workers}: stopped with SIGTERM, {state}")
        failed |= status != 0
    if wrapped:
        print("pool ran out (some requests were sent twice, a server cache hit is possible): " + "; ".join(wrapped))
    else:
        print("no request was sent twice to the same server under the same engine")
    for row in rows:
        if row.target():
            print(
                f"{row.engine}: SolveHand, {row.clients} clients, {row.workers} workers: {row.rps:.0f} req/s, "
                f"p99 {row.p99:.2f} ms -> {row.target()}"
            )
    for row in paced_rows:
        print(
            f"{row.engine}: SolveHand, {row.clients} clients at a fixed {args.target_rate:g} calls/s in all, "
            f"{row.workers} workers: {row.rps:.0f}/s served, p99 {row.p99:.2f} ms"
        )
    errors = sum(row.errors for row in rows + paced_rows)
    bad = sum(row.bad for row in rows + paced_rows)
    if errors or bad:
        print(f"FAILED: {errors} errors, {bad} bad replies")
        failed = True
    print(f"load average at end: {load_average()}; total time {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
