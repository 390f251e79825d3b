"""A fuzz soak of every RPC: ``bench.fuzz``'s mutated requests over real gRPC to a real server.

Run from the repository root::

    python -m bench.soak                            # 100,000 requests (make soak)
    python -m bench.soak --requests 5000 --seed 7   # the suite's size
    python -m bench.soak --json soak.json           # the figures as JSON too

Method. A server subprocess (``--workers 2`` by default: a supervisor and two workers, each with
its dispute job processes) on a loopback port, with its metrics port on and every limit at its
default but one: the soak's clients share one address, so the per-client cap
(``--max-calls-per-client``) is lifted and every request reaches the code it tests. ``--requests``
requests of ``bench.fuzz`` (mutations of valid requests of every RPC, deal records included; the
same for the same ``--seed``) go out ``--in-flight`` at a time over ``--channels`` connections,
CheckDisputes as streams of one to six cases (at most four streams at a time: the per-client
stream cap). Meanwhile a separate process asks the health service ``Check`` every 50 ms on a
connection of its own, so the fuzzer's own work does not delay its clock.

Reported: each status code's count by method (and the dispute verdicts' outcomes); the worker
restarts (the supervisor's ``referee_worker_restarts_total`` and the processes that went away);
every server process's resident memory at the start, after the warm-up (the first
``--warm-up`` requests: caches fill to their working size) and at the end, its growth measured
from the warm-up; the health checks' latency (p50, p99, max) and failures.

Targets: no INTERNAL or UNKNOWN status, no restart and no process gone, no process grown by
``--max-growth-mb`` (20) or more, health p99 under 100 ms and no failed health check. The exit
status is 1 when one is missed, with the missed ones named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from bench.fuzz import DISPUTES, Fuzzer  # noqa: E402
from bench.machine import load_average  # noqa: E402
from bench.service import CHANNEL_OPTIONS, REPO, Server, percentile  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402

DEFAULT_REQUESTS = 100_000
DEFAULT_SEED = 20261201
CALL_TIMEOUT = 30.0
STREAMS_AT_ONCE = 4
PROGRESS_EVERY = 10_000
# The targets.
HEALTH_P99_MS = 100.0
MAX_GROWTH_MB = 20.0
FAILING = ("INTERNAL", "UNKNOWN")
# What grpc.aio's client reports when one of its own operations on a call fails: a server that
# ends a call (refusing it) while the client is still sending its messages, as the fuzzer's
# unframed calls do, can leave the client without the status the server sent (its log has it).
# Not the server's INTERNAL, so counted apart, as LOST.
CLIENT_LOST_STATUS = "Internal error from Core"
LOST = "LOST"
METRICS_ON = r"metrics on (http://\S+/metrics)"
RESTARTS = "referee_worker_restarts_total"


@dataclass
class Memory:
    """One server process's resident memory (MB) at the start, after the warm-up and at the end
    (None where it was not running)."""

    name: str
    pid: int
    start: float | None
    warm: float | None
    end: float | None

    @property
    def growth(self) -> float | None:
        """MB grown from the warm-up to the end."""
        return None if self.warm is None or self.end is None else self.end - self.warm


@dataclass
class Result:
    """What a soak measured."""

    requests: int
    seed: int
    seconds: float
    statuses: dict[str, dict[str, int]]
    outcomes: dict[str, int]
    examples: dict[str, str]
    restarts: int
    gone: list[str]
    memory: list[Memory]
    health_ms: list[float] = field(repr=False)
    health_failures: list[str]
    settings: dict[str, object]

    def totals(self) -> Counter[str]:
        """Each status code's count over every method."""
        total: Counter[str] = Counter()
        for codes in self.statuses.values():
            total.update(codes)
        return total

    def misses(self, max_growth_mb: float = MAX_GROWTH_MB, health_p99_ms: float = HEALTH_P99_MS) -> list[str]:
        """The targets missed, each in a phrase."""
        missed = []
        totals = self.totals()
        for code in FAILING:
            if totals[code]:
                missed.append(f"{totals[code]} {code}")
        if self.restarts:
            missed.append(f"{self.restarts} worker restarts")
        if self.gone:
            missed.append(f"processes gone: {', '.join(self.gone)}")
        for memory in self.memory:
            if memory.growth is not None and memory.growth >= max_growth_mb:
                missed.append(f"{memory.name} grew {memory.growth:.1f} MB")
        p99 = percentile(self.health_ms, 0.99) if self.health_ms else float("inf")
        if p99 >= health_p99_ms:
            missed.append(f"health p99 {p99:.1f} ms")
        if self.health_failures:
            missed.append(f"{len(self.health_failures)} health checks failed ({Counter(self.health_failures)})")
        return missed


# The server's processes ----------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(parent, []).append(int(stat.parent.name))
    return found


def _role(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "helper"
    if b"resource_tracker" in command:
        return "its resource tracker"
    return "dispute job" if b"spawn_main" in command else "helper"


def server_processes(root: int) -> dict[int, str]:
    """The processes of a server by pid, named by their place: the supervisor, its workers, and
    each worker's dispute job processes (and their resource tracker)."""
    children = _children()
    named = {root: "supervisor"}
    for w, worker in enumerate(sorted(children.get(root, [])), 1):
        named[worker] = f"worker {w}"
        roles: Counter[str] = Counter()
        for helper in sorted(children.get(worker, [])):
            role = _role(helper)
            roles[role] += 1
            named[helper] = f"worker {w}, {role}" + (f" {roles[role]}" if role != "its resource tracker" else "")
    return named


def rss_mb(pid: int) -> float | None:
    """A process's resident memory in MB, or None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _metric(url: str, name: str) -> float:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


# The health prober (its own process) ----------------------------------------------------------------


class _Prober:
    """``bench.prober`` as a subprocess, started before the server so its imports overlap the
    server's start."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.prober"],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _line(self, timeout: float) -> str:
        assert self.process.stdout is not None
        if not select.select([self.process.stdout], [], [], timeout)[0]:
            return ""
        return self.process.stdout.readline().strip()

    def start(self, target: str) -> None:
        """Probe ``target`` from now on."""
        assert self.process.stdin is not None
        self.process.stdin.write(target + "\n")
        self.process.stdin.flush()
        if self._line(60) != "ready":
            raise RuntimeError("the health prober did not connect")

    def stop(self) -> tuple[list[float], list[str]]:
        """Stop probing; the latencies (ms) and the failures."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        line = self._line(30)
        self.process.stdin.close()
        self.process.wait(10)
        if not line:
            return [], ["no report"]
        found = json.loads(line)
        return found["latencies_ms"], found["failures"]

    def kill(self) -> None:
        """End it if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# The fuzzing clients ----------------------------------------------------------------------------------


class _Load:
    """Send the fuzzer's requests ``in_flight`` at a time; count the statuses by method."""

    def __init__(
        self, fuzzer: Fuzzer, target: str, channels: int, in_flight: int, say: Callable[[str], None] | None = None
    ) -> None:
        self.fuzzer = fuzzer
        self.target = target
        self.channel_count = channels
        self.in_flight = in_flight
        self.statuses: dict[str, Counter[str]] = {}
        self.outcomes: Counter[str] = Counter()
        # The first error message of each method and code: what a refusal said.
        self.examples: dict[str, str] = {}
        self.next = 0
        self.say = say

    async def run(self, stops: Sequence[int], at_each: Callable[[int], None]) -> None:
        """Send requests 0 to ``stops[-1]`` - 1, pausing at each of ``stops`` (once every call
        before it has ended) to call ``at_each`` with it."""
        channels = [grpc.aio.insecure_channel(self.target, options=CHANNEL_OPTIONS) for _ in range(self.channel_count)]
        streams = asyncio.Semaphore(STREAMS_AT_ONCE)
        try:
            for stop in stops:
                await asyncio.gather(*(self._client(channels, streams, stop) for _ in range(self.in_flight)))
                at_each(stop)
        finally:
            for channel in channels:
                await channel.close()

    async def _client(self, channels: Sequence[grpc.aio.Channel], streams: asyncio.Semaphore, stop: int) -> None:
        while self.next < stop:
            index = self.next
            self.next += 1
            method, messages = self.fuzzer.request(index)
            channel = channels[index % len(channels)]
            if method == DISPUTES:
                async with streams:
                    code = await self._stream(channel, messages)
            elif len(messages) == 1:
                code = await self._unary(channel, method, messages[0])
            else:
                code = await self._unframed(channel, method, messages)
            name = method.rsplit("/", 1)[1]
            self.statuses.setdefault(name, Counter())[code] += 1
            if self.say is not None and index % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                totals = sum((Counter(codes) for codes in self.statuses.values()), Counter())
                self.say(f"{index + 1:,} requests sent: {dict(totals.most_common())}")

    async def _unary(self, channel: grpc.aio.Channel, method: str, data: bytes) -> str:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            await call(data, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as error:
            return self._error(method, error)
        return "OK"

    async def _unframed(self, channel: grpc.aio.Channel, method: str, messages: list[bytes]) -> str:
        """A unary method called as a client stream of ``messages`` (none, or several)."""
        call = channel.stream_unary(method, request_serializer=None, response_deserializer=None)
        try:
            await call(iter(messages), timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as error:
            return self._error(method, error)
        return "OK"

    def _error(self, method: str, error: grpc.aio.AioRpcError) -> str:
        code = str(error.code().name)
        if error.code() is grpc.StatusCode.INTERNAL and error.details() == CLIENT_LOST_STATUS:
            code = LOST
        self.examples.setdefault(f"{method.rsplit('/', 1)[1]} {code}", (error.details() or "")[:200])
        return code

    async def _stream(self, channel: grpc.aio.Channel, cases: list[bytes]) -> str:
        call = channel.stream_stream(DISPUTES, request_serializer=None, response_deserializer=None)
        try:
            async for verdict in call(iter(cases), timeout=CALL_TIMEOUT):
                outcome = pb.CheckDisputesResponse.FromString(verdict).outcome
                self.outcomes[pb.DisputeOutcome.Name(outcome).removeprefix("DISPUTE_OUTCOME_")] += 1
        except grpc.aio.AioRpcError as error:
            return self._error(DISPUTES, error)
        return "OK"


# The soak ---------------------------------------------------------------------------------------------


def soak(
    requests: int = DEFAULT_REQUESTS,
    seed: int = DEFAULT_SEED,
    *,
    warm_up: int | None = None,
    workers: int = 2,
    in_flight: int = 16,
    channels: int = 4,
    dispute_jobs: int = 2,
    progress: bool = False,
) -> Result:
    """Run one soak against a fresh server; what it measured."""
    warm_up = min(requests // 5, 5_000) if warm_up is None else warm_up
    clock = time.monotonic()

    def say(what: str) -> None:
        if progress:
            print(f"{time.monotonic() - clock:6.1f} s  {what}", file=sys.stderr)

    fuzzer = Fuzzer(seed)
    with tempfile.TemporaryDirectory(prefix="soak-") as runtime:
        # Two dispute job processes a worker, so the job processes' path is soaked too (with
        # one, cases are judged on a thread of the worker).
        extra = ["--dispute-jobs", str(dispute_jobs), "--metrics-port", "0", "--runtime-dir", runtime]
        prober = _Prober()
        server = Server(workers, extra=extra, one_client=True)
        try:
            server.wait_ready()
            say("server ready")
            found = server.log_search(METRICS_ON)
            assert found is not None, server.log_tail()
            metrics = found.group(1)
            restarts_before = _metric(metrics, RESTARTS)
            names = server_processes(server.process.pid)
            start = {pid: rss_mb(pid) for pid in names}
            prober.start(server.target)
            say("health prober ready")
            load = _Load(fuzzer, server.target, channels, in_flight, say if progress else None)
            began = time.monotonic()
            memory: dict[int, dict[int, float | None]] = {}

            def measure(stop: int) -> None:
                named = server_processes(server.process.pid)
                memory[stop] = {pid: rss_mb(pid) for pid in named}
                names.update(named)
                say(f"{stop:,} requests sent")

            asyncio.run(load.run((warm_up, requests), measure))
            seconds = time.monotonic() - began
            warm_with, end_with = memory[warm_up], memory[requests]
            health_ms, health_failures = prober.stop()
            restarts = int(_metric(metrics, RESTARTS) - restarts_before)
        finally:
            prober.kill()
            stopped = server.stop()
            say(f"server stopped: exit status {stopped}")
            if progress:
                print(server.log_tail(12), file=sys.stderr)
    rows = [
        Memory(names[pid], pid, start.get(pid), warm_with.get(pid), end_with.get(pid))
        for pid in sorted(names, key=lambda p: (names[p], p))
    ]
    gone = [
        f"{names[pid]} (pid {pid})" for pid in names if pid in start or pid in warm_with if end_with.get(pid) is None
    ]
    settings: dict[str, object] = {
        "workers": workers,
        "in_flight": in_flight,
        "channels": channels,
        "warm_up": warm_up,
        "server_flags": ["--workers", str(workers), "--max-calls-per-client", "100000", *extra[:4]],
    }
    return Result(
        requests=requests,
        seed=seed,
        seconds=seconds,
        statuses={method: dict(sorted(codes.items())) for method, codes in sorted(load.statuses.items())},
        outcomes=dict(sorted(load.outcomes.items())),
        examples=dict(sorted(load.examples.items())),
        restarts=restarts,
        gone=gone,
        memory=rows,
        health_ms=health_ms,
        health_failures=health_failures,
        settings=settings,
    )


# The report -------------------------------------------------------------------------------------------


def _commit() -> str:
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        return found.stdout.strip() or "?"
    except OSError:
        return "?"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def format_result(result: Result) -> str:
    """The soak's figures as the Markdown tables of docs/benchmarks.md."""
    totals = result.totals()
    codes = sorted(totals, key=lambda code: (-totals[code], code))
    lines = [
        f"{result.requests:,} requests (seed {result.seed}) in {result.seconds:.0f} s "
        f"({result.requests / result.seconds:.0f} requests/s); {result.restarts} worker restarts",
        "",
        "| method | " + " | ".join(codes) + " |",
        "|---|" + "---:|" * len(codes),
    ]
    for method, counts in result.statuses.items():
        lines.append(f"| {method} | " + " | ".join(f"{counts.get(code, 0):,}" for code in codes) + " |")
    lines.append("| **all** | " + " | ".join(f"**{totals[code]:,}**" for code in codes) + " |")
    if result.outcomes:
        lines += ["", "Dispute verdicts: " + ", ".join(f"{name} {n:,}" for name, n in result.outcomes.items())]
    lines += ["", "| process | RSS start (MB) | after warm-up | end | growth |", "|---|---:|---:|---:|---:|"]
    for memory in result.memory:
        growth = "-" if memory.growth is None else f"{memory.growth:+.1f}"
        lines.append(f"| {memory.name} | {_mb(memory.start)} | {_mb(memory.warm)} | {_mb(memory.end)} | {growth} |")
    health = result.health_ms
    if health:
        lines += [
            "",
            f"Health Check: {len(health):,} checks, p50 {percentile(health, 0.5):.1f} ms, "
            f"p99 {percentile(health, 0.99):.1f} ms, max {max(health):.1f} ms, {len(result.health_failures)} failed",
        ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="requests in all (default 100,000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the fuzzer's seed")
    parser.add_argument(
        "--warm-up", type=int, default=None, help="requests before the memory baseline (default a fifth, at most 5,000)"
    )
    parser.add_argument("--workers", type=int, default=2, help="the server's worker processes (default 2)")
    parser.add_argument("--in-flight", type=int, default=16, help="calls in flight at once (default 16)")
    parser.add_argument("--channels", type=int, default=4, help="connections to the server (default 4)")
    parser.add_argument("--max-growth-mb", type=float, default=MAX_GROWTH_MB, help="the memory target (default 20)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak, print its tables and the targets missed; 1 when one was."""
    args = parse_args(argv)
    print(
        f"{platform.node()}: load {load_average()}, commit {_commit()}, Python {platform.python_version()}",
        file=sys.stderr,
    )
    result = soak(
        args.requests,
        args.seed,
        warm_up=args.warm_up,
        workers=args.workers,
        in_flight=args.in_flight,
        channels=args.channels,
        progress=True,
    )
    print(format_result(result))
    for what, details in result.examples.items():
        print(f"{what}: {details}", file=sys.stderr)
    print(f"load after: {load_average()}", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=1) + "\n")
    missed = result.misses(args.max_growth_mb)
    if missed:
        print("targets missed: " + "; ".join(missed), file=sys.stderr)
        return 1
    print("every target met", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
