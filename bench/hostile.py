"""Throughput and health latency of the referee while each attack runs.

Run from the repository root::

    python -m bench.hostile                      # every attack, about three minutes
    python -m bench.hostile --quick              # 3 s per attack
    python -m bench.hostile --attacks stalled,flood --duration 3

The attacks run one at a time against a server subprocess (``--workers 2`` by default). For each,
a fresh load runs for ``--duration`` seconds: ``--clients`` closed loops of SolveHand (CP-SAT,
distinct end-of-deal hands, ``bench.h2client``), while a prober on a connection of its own asks
the health service every 50 ms. The attack starts with the load and is undone after it. Each row:
the SolveHand calls answered per second, the calls that failed and the answered calls' latency
(p50, p99); the health checks' latency (p50, p99, max) and failures; the growth of the workers'
resident memory over the row (``-`` when a worker was replaced); the server's log in KB/s; and
what the attack itself did.

Two servers, each section opening with ``none`` (the load alone, the row to compare with):

**Without keys**, its own defaults for every limit but one: the load's clients share one address,
so the per-client cap (``--max-calls-per-client``) is lifted.

- ``stalled``: 50 calls that send HEADERS and never their DATA, over 5 connections that answer
  PINGs (``bench.stall``): each holds a coroutine until the receive timeout ends it;
- ``streams``: idle CheckDisputes and reflection streams, more than the caps allow;
- ``pings``: connections that send PINGs without calls until the server sends them away;
- ``connections``: 300 idle connections that sent the HTTP/2 preface, 30 from each of ten
  addresses (127.0.1.1 to 127.0.1.10: under the per-address cap, so the server keeps them);
- ``kill``: SIGKILL of one worker a second in (the parent forks a new one);
- ``stop``: SIGSTOP of one worker a second in (the parent kills and replaces it when its
  heartbeat is missed; until then the connections it holds wait).

**With API keys** (``--api-keys``, the metrics port on, every limit at its default); the load
uses the key ``victim``. The attackers run in processes of their own (``bench.attackers``):

- ``oversized``: SolveHand requests of 800 KB with 200,000 card codes, over the count limit, 8 in
  flight on each of two connections, sent again as soon as they are refused (key ``attacker``);
- ``watches``: health Watch calls without a key naming a 1 MB service, 10 in flight on each of
  four connections that stay open;
- ``flood``: the key ``attacker`` keeps 90 cache-busting CheckClose calls in flight (11 cards,
  the audit engine) on connections reaching every worker; the load is the victim, its answered
  share and latency printed against the target (at least 95% answered, p99 under 100 ms);
- ``silent``: 1,100 TCP connections from 127.0.0.2 that never send a byte, reopened as the server
  closes them, while a fresh client (a new connection from 127.0.0.1) asks SolveHand every
  0.4 s: the fresh clients served, and the connections refused at the per-address cap (the
  server's metrics);
- ``logflood``: calls without a key whose method path is 8 KB long, 50 at a time on one
  connection: the refusal lines the server wrote;
- ``metrics``: 400 idle connections to the metrics port, reopened as they are closed: the
  parent's thread count before and during, and how long a scrape took meanwhile.

**Round three** (``bench.roundthree``, last): ``addresses`` and ``addresses200``, idle
connections from 10 and 200 loopback addresses, each under its per-address cap, together past
the referee's connection cap, and ``slowbodies``, 10,000 slow JSON bodies from 10 addresses
through the gateway at its defaults: a fresh client's calls answered, and what the attack met.

A failed SolveHand in ``kill`` and ``stop`` is a call on a connection the kernel had given to the
worker that went away (in ``stop`` such calls hang until the worker is replaced, so the row's
window runs past ``--duration``); a failed health check there is the prober's own connection on
that worker. In ``flood`` the victim's refused calls are the figure measured. In the other rows
nothing may fail. The exit status is 1 if a call or a health check failed in a row where nothing
may, if an attack did not run as designed (its requests answered other than refused, a fresh
client not served, a scrape unanswered), or if a server did not exit 0 on SIGTERM at the end. A
missed target does not change it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

from bench import h2client, roundthree  # noqa: E402
from bench.hands import end_of_deal  # noqa: E402
from bench.machine import finish, load_average  # noqa: E402
from bench.service import (  # noqa: E402
    CHANNEL_OPTIONS,
    ENGINES,
    HOST,
    REPO,
    SEED,
    Server,
    percentile,
    solve_requests,
)
from bench.stall import Staller  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2_grpc  # noqa: E402
from referee.server.access import keygen_lines  # noqa: E402

SERVICE = "/remigio.referee.v1.RefereeService"
PLAIN_ATTACKS = ("none", "stalled", "streams", "pings", "connections", "kill", "stop")
KEYED_ATTACKS = ("oversized", "watches", "flood", "silent", "logflood", "metrics")
ATTACKS = PLAIN_ATTACKS + KEYED_ATTACKS
# Rows where calls may fail: a worker goes away, or the victim's refusals are the figure.
MAY_FAIL = {"kill", "stop", "flood"}
PROBE_EVERY = 0.05
CALL_TIMEOUT = 10.0
READY_TIMEOUT = 60.0
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()  # 33 points
VICTIM_ANSWERED, VICTIM_P99_MS = 0.95, 100.0  # the flood's target
METRICS_ON = re.compile(r"metrics on (http://\S+/metrics)")
WORKER_GONE = re.compile(r"worker pid \d+ (?:sent no heartbeat for [\d.]+s|[^;\n]+ after [\d.]+s)")


@dataclass(frozen=True, slots=True)
class Row:
    """One attack's figures."""

    attack: str
    rps: float
    answered: int
    failed: int
    p50_ms: float
    p99_ms: float
    health_p50_ms: float
    health_p99_ms: float
    health_max_ms: float
    health_failed: int
    rss_mb: float | None  # the workers' growth over the row; None when a worker was replaced
    log_kb_s: float
    note: str = ""


@dataclass(slots=True)
class Bench:
    """The server under attack and what its clients need."""

    server: Server
    workers: int
    key: str = ""  # the load's API key ("" without keys)
    attacker_key: str = ""
    metrics_url: str = ""


@dataclass(slots=True)
class Report:
    """What an attack says about itself: a note for its row, and what did not go as designed."""

    note: str = ""
    problems: list[str] = field(default_factory=list)
    attacker_cores: float | None = None  # the CPU its process took, in cores, when it had one


Attack = Callable[[Bench, Report], contextlib.AbstractContextManager[None]]


# Round one: raw HTTP/2 and processes ----------------------------------------------------------------


@contextlib.contextmanager
def _stalling(bench: Bench, connections: int, calls: tuple[tuple[str, int], ...]) -> Iterator[None]:
    """``connections`` raw HTTP/2 connections, each opening ``calls`` (path, how many) and never finishing them."""
    stallers = [Staller(bench.server.target) for _ in range(connections)]
    for staller in stallers:
        for path, count in calls:
            staller.stall(path, count)
    try:
        yield
    finally:
        for staller in stallers:
            staller.close()


def _stalled(bench: Bench, _report: Report) -> contextlib.AbstractContextManager[None]:
    return _stalling(bench, 5, ((f"{SERVICE}/SolveHand", 10),))


def _streams(bench: Bench, _report: Report) -> contextlib.AbstractContextManager[None]:
    reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    return _stalling(bench, 4, ((f"{SERVICE}/CheckDisputes", 6), (reflection, 6)))


@contextlib.contextmanager
def _pings(bench: Bench, _report: Report) -> Iterator[None]:
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            staller = Staller(bench.server.target)
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
def _connections(bench: Bench, report: Report) -> Iterator[None]:
    socks = []
    for n in range(300):
        sock = socket.socket()
        sock.bind((f"127.0.1.{n % 10 + 1}", 0))
        sock.settimeout(5)
        sock.connect((HOST, bench.server.port))
        sock.sendall(h2client.PREFACE + h2client.frame(h2client.SETTINGS, 0, 0))
        socks.append(sock)
    try:
        yield
    finally:
        report.note = f"{sum(map(still_open, socks))} of 300 still open at the end"
        for sock in socks:
            sock.close()


def still_open(sock: socket.socket) -> bool:
    """Whether the server has not closed this connection (what it sent is read and dropped)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def _signal_a_worker(signum: int) -> Attack:
    @contextlib.contextmanager
    def attack(bench: Bench, _report: Report) -> Iterator[None]:
        worker = _live_workers(bench.server)[0]
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
    """The worker processes alive now (the parent's children that serve; the server itself with one)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == server.process.pid and b"referee.server" in cmdline and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return sorted(found) or [server.process.pid]


@contextlib.contextmanager
def _nothing(_bench: Bench, _report: Report) -> Iterator[None]:
    yield


# Round two: attackers in processes of their own ---------------------------------------------------


@contextlib.contextmanager
def _attacker(bench: Bench, report: Report, attack: str, *args: str, target: str = "") -> Iterator[dict[str, float]]:
    """``python -m bench.attackers ATTACK`` against the server, from when it is ready until the
    block ends; the dict it yields holds the attacker's outcomes once the block has ended."""
    command = [sys.executable, "-m", "bench.attackers", attack, target or bench.server.target]
    command += ["--workers", str(bench.workers), *args]
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    outcomes: dict[str, float] = {}
    try:
        ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT)
        line = process.stdout.readline().strip() if ready else ""
        if line != "ready":
            raise RuntimeError(f"the {attack} attacker did not start (exit status {process.poll()})")
        yield outcomes
    finally:
        try:
            out, _ = process.communicate(timeout=60)  # closes its stdin: the attack ends
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
            report.problems.append(f"the {attack} attacker did not stop")
        if process.returncode != 0:
            report.problems.append(f"the {attack} attacker exited with status {process.returncode}")
        lines = out.strip().splitlines()
        if lines:
            outcomes.update(json.loads(lines[-1]))
        # The attacker is the only child reaped meanwhile: the CPU it took from the machine's cores.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = children.ru_utime + children.ru_stime - children_before.ru_utime - children_before.ru_stime
        outcomes["cores"] = report.attacker_cores = cpu / outcomes["seconds"] if outcomes.get("seconds") else 0.0


def _count(outcomes: dict[str, float], *names: str) -> int:
    return int(sum(outcomes.get(name, 0) for name in names))


def _others(outcomes: dict[str, float], *expected: str) -> dict[str, float]:
    return {name: n for name, n in outcomes.items() if name not in (*expected, "seconds", "cores")}


def _rate(n: float, outcomes: dict[str, float]) -> str:
    seconds = outcomes.get("seconds", 0.0)
    return f"{n / seconds:,.0f}/s" if seconds else "?/s"


def _refusals(name: str, what: str, connections: int, keyed: bool) -> Attack:
    """An attack whose every request must be refused INVALID_ARGUMENT, sent again as soon as it
    is, on ``connections`` connections, with the key "attacker" when ``keyed``; ``what`` names
    one request in the note."""

    @contextlib.contextmanager
    def attack(bench: Bench, report: Report) -> Iterator[None]:
        flags = ["--connections", str(connections)] + (["--key", bench.attacker_key] if keyed else [])
        with _attacker(bench, report, name, *flags) as outcomes:
            yield
        refused = _count(outcomes, "INVALID_ARGUMENT")
        report.note = f"{refused:,} {what} refused ({_rate(refused, outcomes)})"
        if others := _others(outcomes, "INVALID_ARGUMENT"):
            report.problems.append(f"{name}: not refused INVALID_ARGUMENT: {others}")

    return attack


@contextlib.contextmanager
def _flood(bench: Bench, report: Report) -> Iterator[None]:
    with _attacker(bench, report, "flood", "--key", bench.attacker_key, "--in-flight", "90") as outcomes:
        yield
    answered, refused = _count(outcomes, "OK"), _count(outcomes, "RESOURCE_EXHAUSTED")
    report.note = f"attacker: {answered:,} answered ({_rate(answered, outcomes)}), {refused:,} refused"
    if answered == 0 or _others(outcomes, "OK", "RESOURCE_EXHAUSTED", "CANCELLED"):
        report.problems.append(f"flood: the attacker was not served its share, or got other codes: {outcomes}")


class FreshClients:
    """A new connection every ``every`` seconds, one SolveHand on it: how many were served."""

    def __init__(self, bench: Bench, every: float = 0.4) -> None:
        self.bench = bench
        self.every = every
        self.tried = 0
        self.latencies_ms: list[float] = []
        self.failures: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        metadata = (("authorization", f"Bearer {self.bench.key}"),) if self.bench.key else ()
        while not self.done.wait(self.every):
            self.tried += 1
            started = time.perf_counter()
            with grpc.insecure_channel(self.bench.server.target, options=CHANNEL_OPTIONS) as channel:
                stub = referee_pb2_grpc.RefereeServiceStub(channel)
                try:
                    reply = stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5, metadata=metadata)
                    if reply.linking.points == 33:
                        self.latencies_ms.append((time.perf_counter() - started) * 1000)
                    else:
                        self.failures.append(f"{reply.linking.points} points")
                except grpc.RpcError as error:
                    self.failures.append(error.code().name)

    def __enter__(self) -> FreshClients:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join(10)


def _metric(bench: Bench, name: str) -> float:
    """One sample of the server's metrics (``name`` with its labels, as written); 0 when absent."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(bench.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


PER_PEER_REFUSED = 'referee_connections_refused_total{reason="per_peer"}'


@contextlib.contextmanager
def _silent(bench: Bench, report: Report) -> Iterator[None]:
    refused_before = _metric(bench, PER_PEER_REFUSED)
    args = ("--count", "1100", "--source", "127.0.0.2")
    with _attacker(bench, report, "silent", *args) as outcomes, FreshClients(bench) as fresh:
        yield
    refused = _metric(bench, PER_PEER_REFUSED) - refused_before
    served = len(fresh.latencies_ms)
    slowest = f", the slowest in {max(fresh.latencies_ms):.0f} ms" if served else ""
    report.note = (
        f"fresh clients: {served} of {fresh.tried} served{slowest}; {refused:,.0f} connections refused at "
        f"the per-address cap ({_count(outcomes, 'closed by the server'):,} closed in all)"
    )
    if fresh.failures or not fresh.tried:
        report.problems.append(f"silent: fresh clients not served: {fresh.failures}")


@contextlib.contextmanager
def _logflood(bench: Bench, report: Report) -> Iterator[None]:
    start = bench.server.log_size()
    with _attacker(bench, report, "logflood") as outcomes:
        yield
    seconds = outcomes.get("seconds", 0.0) or 1.0
    refusals = [line for line in bench.server.log_since(start).splitlines() if "refused" in line]
    calls = _count(outcomes, *_others(outcomes))
    written = sum(len(line) + 1 for line in refusals)
    longest = max((len(line) for line in refusals), default=0)
    report.note = (
        f"{calls:,} calls refused ({_rate(calls, outcomes)}); {len(refusals)} refusal lines, "
        f"{written / seconds:,.0f} B/s, the longest {longest} bytes"
    )
    if _count(outcomes, "OK", "unanswered"):
        report.problems.append(f"logflood: calls answered or left open: {outcomes}")


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no thread count for {pid}")


@contextlib.contextmanager
def _metrics(bench: Bench, report: Report) -> Iterator[None]:
    parent = bench.server.process.pid
    port = bench.metrics_url.rsplit(":", 1)[1].split("/")[0]
    before = _threads(parent)
    seen = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            seen.append(_threads(parent))

    sampler = threading.Thread(target=sample, daemon=True)
    args = ("--count", "400", "--source", "127.0.0.1")
    scrape_ms = float("nan")
    with _attacker(bench, report, "silent", *args, target=f"127.0.0.1:{port}") as outcomes:
        sampler.start()
        try:
            yield
            started = time.perf_counter()
            try:
                _metric(bench, "referee_workers_up")
                scrape_ms = (time.perf_counter() - started) * 1000
            except OSError as error:
                report.problems.append(f"metrics: a scrape under the attack failed: {error}")
        finally:
            done.set()
            sampler.join(5)
    report.note = (
        f"parent threads: {before} before, at most {max(seen)} during; a scrape in {scrape_ms:.0f} ms; "
        f"{_count(outcomes, 'opened'):,} connections opened, {_count(outcomes, 'closed by the server'):,} closed"
    )


ATTACK_OF: dict[str, Attack] = {
    "none": _nothing,
    "stalled": _stalled,
    "streams": _streams,
    "pings": _pings,
    "connections": _connections,
    "kill": _signal_a_worker(signal.SIGKILL),
    "stop": _signal_a_worker(signal.SIGSTOP),
    "oversized": _refusals("oversized", "requests of 800 KB", connections=2, keyed=True),
    "watches": _refusals("watches", "watches of a 1 MB name", connections=4, keyed=False),
    "flood": _flood,
    "silent": _silent,
    "logflood": _logflood,
    "metrics": _metrics,
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


def _rss_mb(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def measure(
    bench: Bench, attack: str, pool: Sequence[bytes], first: int, clients: int, duration: float
) -> tuple[Row, list[str]]:
    """One attack under load: the row, and what did not go as designed."""
    server = bench.server
    loads = [h2client.Client(first=first + n, step=clients, start_at=0.0) for n in range(clients)]
    metadata = (("authorization", f"Bearer {bench.key}"),) if bench.key else ()
    connections = h2client.open_connections(server.target, f"{SERVICE}/SolveHand", loads, CALL_TIMEOUT, metadata)
    stop = threading.Event()
    latencies: list[float] = []
    health_failures: list[str] = []
    prober = threading.Thread(target=_probe_health, args=(server.target, stop, latencies, health_failures))
    report = Report()
    with ATTACK_OF[attack](bench, report):
        workers = _live_workers(server)
        rss_before, log_before = _rss_mb(workers), server.log_size()
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
        log_kb_s = (server.log_size() - log_before) / 1024 / window
        rss_mb = None
        with contextlib.suppress(OSError):  # a worker that went away since
            if _live_workers(server) == workers:
                rss_mb = _rss_mb(workers) - rss_before
        replaced = WORKER_GONE.findall(server.log_since(log_before))
    answered, failed, solve_ms = 0, 0, []
    for load in loads:
        h2client.settle(load)
        for call in load.calls:
            replies = call.replies()
            if call.status == 0 and not call.failure and replies is not None and len(replies) == 1:
                answered += 1
                solve_ms.append((call.ended - call.began) * 1000)
            else:
                failed += 1
    ordered = sorted(latencies) or [float("nan")]
    row = Row(
        attack=attack,
        rps=answered / window,
        answered=answered,
        failed=failed,
        p50_ms=percentile(solve_ms, 50),
        p99_ms=percentile(solve_ms, 99),
        health_p50_ms=ordered[len(ordered) // 2],
        health_p99_ms=ordered[max(0, int(len(ordered) * 0.99) - 1)],
        health_max_ms=ordered[-1],
        health_failed=len(health_failures),
        rss_mb=rss_mb,
        log_kb_s=log_kb_s,
        note=report.note
        if report.attacker_cores is None
        else f"{report.note}; the attacker took {report.attacker_cores:.2f} cores",
    )
    problems = list(report.problems)
    if attack == "flood":
        share = answered / max(1, answered + failed)
        met = share >= VICTIM_ANSWERED and row.p99_ms < VICTIM_P99_MS
        note = f"victim: {share:.1%} answered ({'target met' if met else 'target missed'}); {row.note}"
        row = dataclasses.replace(row, note=note)
    elif failed and attack not in MAY_FAIL:
        problems.append(f"{attack}: {failed} SolveHand calls failed")
    if replaced and attack not in ("kill", "stop"):
        problems.append(f"{attack}: a worker was replaced ({'; '.join(replaced)})")
    if health_failures and attack not in MAY_FAIL - {"flood"}:
        problems.append(f"{attack}: {len(health_failures)} health checks failed ({sorted(set(health_failures))})")
    return row, problems


HEADER = (
    f"{'attack':<12} {'req/s':>6} {'failed':>6} {'p50 ms':>7} {'p99 ms':>7} {'health p50':>10} {'p99 ms':>7} "
    f"{'max ms':>7} {'failed':>6} {'RSS MB':>7} {'log KB/s':>8}  the attack"
)


def format_row(row: Row) -> str:
    """A line of the table."""
    rss = "-" if row.rss_mb is None else f"{row.rss_mb:+.1f}"
    return (
        f"{row.attack:<12} {row.rps:>6.0f} {row.failed:>6} {row.p50_ms:>7.1f} {row.p99_ms:>7.1f} "
        f"{row.health_p50_ms:>10.2f} {row.health_p99_ms:>7.2f} {row.health_max_ms:>7.2f} {row.health_failed:>6} "
        f"{rss:>7} {row.log_kb_s:>8.1f}  {row.note}".rstrip()
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="server processes (default 2)")
    parser.add_argument("--clients", type=int, default=16, help="SolveHand closed loops (default 16)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per attack (default 8)")
    parser.add_argument("--quick", action="store_true", help="3 seconds per attack")
    parser.add_argument(
        "--attacks",
        default=",".join(ATTACKS + roundthree.ROWS),
        help=f"comma-separated, of {', '.join(ATTACKS + roundthree.ROWS)} (default all)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.duration = 3.0
    args.attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    if not args.attacks or any(a not in ATTACK_OF and a not in roundthree.ROWS for a in args.attacks):
        parser.error(f"--attacks takes {', '.join(ATTACKS + roundthree.ROWS)}")
    if args.workers < 1 or args.clients < 1 or args.duration <= 0:
        parser.error("--workers and --clients must be at least 1, --duration more than 0")
    return args


def run_section(
    title: str, bench: Bench, attacks: Sequence[str], pool: Sequence[bytes], args: argparse.Namespace
) -> list[str]:
    """Every attack against one server, ``none`` first, then its stop; what did not go as designed."""
    server = bench.server
    problems: list[str] = []
    print(title, flush=True)
    try:
        server.wait_ready()
        if bench.key:
            found = server.log_search(METRICS_ON.pattern)
            bench.metrics_url = found.group(1) if found else ""
        for number, attack in enumerate(["none", *[a for a in attacks if a != "none"]]):
            row, found_problems = measure(bench, attack, pool, number * 8_000, args.clients, args.duration)
            print(format_row(row), flush=True)
            problems += found_problems
    except Exception:
        print(f"server log (last lines):\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        status = server.stop()
        print(f"server: stopped with SIGTERM, {'exit status 0' if status == 0 else f'exit status {status}'}")
    if status != 0:
        problems.append(f"the server did not exit 0 on SIGTERM ({status})")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Run every attack under load and print the table; 1 if something did not go as designed."""
    args = parse_args(argv)
    print(f"bench.hostile: {args.workers} workers, {args.clients} SolveHand clients (CP-SAT), {args.duration:g}s each")
    print(f"cpus: {os.cpu_count()}; load average at start: {load_average()}")
    # Each server has caches of its own: both sections send the same hands, none twice to a server.
    pool = solve_requests(end_of_deal(SEED, 60_000, 10), ENGINES["cpsat"])
    problems: list[str] = []
    plain = [a for a in args.attacks if a in PLAIN_ATTACKS]
    if not plain and not [a for a in args.attacks if a in KEYED_ATTACKS]:
        args.attacks = [a for a in args.attacks if a in roundthree.ROWS]
    keyed = [a for a in args.attacks if a in KEYED_ATTACKS]
    print(HEADER, flush=True)
    if plain:
        title = "-- without keys; the per-client cap lifted (the load is one address)"
        problems += run_section(title, Bench(Server(args.workers), args.workers), plain, pool, args)
    if keyed:
        with tempfile.TemporaryDirectory(prefix="bench-hostile-") as directory:
            victim_key, victim_line = keygen_lines("victim")
            attacker_key, attacker_line = keygen_lines("attacker")
            keys = Path(directory) / "keys.txt"
            keys.write_text(f"{victim_line}\n{attacker_line}\n", encoding="utf-8")
            extra = ["--api-keys", str(keys), "--metrics-port", "0", "--runtime-dir", directory]
            server = Server(args.workers, extra=extra, one_client=False)
            title = "-- with API keys, every limit at its default (the load uses the key victim)"
            problems += run_section(title, Bench(server, args.workers, victim_key, attacker_key), keyed, pool, args)
    three = [a for a in args.attacks if a in roundthree.ROWS]
    if three:
        problems += roundthree.run(max(args.duration, 10.0), only=three)
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
