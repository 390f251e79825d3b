"""Round three of the hostile bench (``python -m bench.hostile`` runs it last): idle connections
from many addresses against the referee, and slow request bodies from many addresses through
the gateway, each with a fresh client's calls as the figure.

Rows:

- ``addresses``: 10 loopback addresses each keep 30 idle TCP connections to a referee with
  ``--max-connections 200`` (reopening each one shed), and ``addresses200``: 200 addresses each
  keep 8 against ``--max-connections 1000`` (the defaults scaled: every address under its
  per-address cap of 64, all of them past the process's cap). A fresh client (a new channel from
  127.0.0.1) asks SolveHand every 0.25 s, each within 2 s. Target: at least 90% answered.
- ``slowbodies``: 10,000 JSON POSTs from 10 addresses (1,000 each) through ``python -m gateway
  run`` at its defaults, each announcing 1 MB and sending a byte every 10 s, reopened as the
  gateway ends them; a fresh client POSTs /v1/hands:solve on a new connection every 0.25 s, each
  within 2 s. Targets: at least 95% answered 200 within 2 s, every slow body ended within the
  request time limit (``--json-timeout``, 30 s), Envoy's RSS under 250 MB. The attack as found:
  each slow body once (those the gateway ends stay ended).
- ``slowbodies-reopen``: the same, with a new slow body opened at once for each the gateway
  ends. Figures only, no bound: the attacker, on the same two cores, reconnects about as fast as
  Envoy and the warden can shed, so thousands of connections are always between two sweeps
  (docs/operations.md, "The gateway": a per-address limit in the kernel or the load balancer is
  the answer to that flood).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.service import REPO
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()  # 33 points
JSON_HAND = ["AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK"]
LISTENING = re.compile(r"listening on (\S+):(\d+) \(pid")
SLOW_BODY_LIMIT = 30.0  # the gateway's default --json-timeout


@dataclass(frozen=True, slots=True)
class Row:
    attack: str
    tried: int
    answered: int
    p99_ms: float
    note: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _attacker(attack: str, target: str, *args: str) -> Iterator[dict[str, float]]:
    command = [sys.executable, "-m", "bench.attackers", attack, target, *args]
    process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    outcomes: dict[str, float] = {}
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        if not ready or process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {attack} attacker did not start")
        yield outcomes
    finally:
        out, _ = process.communicate(timeout=120)
        lines = out.strip().splitlines()
        if lines:
            outcomes.update(json.loads(lines[-1]))


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies) or [float("nan")]
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


def _grpc_victim(target: str, seconds: float) -> tuple[int, int, list[float]]:
    tried, latencies = 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tried += 1
        started = time.monotonic()
        with grpc.insecure_channel(target) as channel, contextlib.suppress(grpc.RpcError):
            reply = referee_pb2_grpc.RefereeServiceStub(channel).SolveHand(pb.SolveHandRequest(cards=HAND), timeout=2)
            if reply.linking.points == 33:
                latencies.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, 0.25 - (time.monotonic() - started)))
    return tried, len(latencies), latencies


def _json_victim(url: str, seconds: float) -> tuple[int, int, list[float]]:
    tried, latencies = 0, []
    body = json.dumps({"cards": JSON_HAND}).encode()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tried += 1
        started = time.monotonic()
        request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(request, timeout=2) as reply:  # a new connection each time
                if reply.status == 200:
                    latencies.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, 0.25 - (time.monotonic() - started)))
    return tried, len(latencies), latencies


def _referee(*flags: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "referee.server", "--port", "0", "--dispute-jobs", "1", *flags]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        found = LISTENING.search(line)
        if found:
            _drain(process)
            return process, f"{found.group(1)}:{found.group(2)}"
    raise RuntimeError("the referee did not start")


def _drain(process: subprocess.Popen[str]) -> None:
    """Read what ``process`` writes, in the background, so it never blocks on a full pipe."""

    def drain() -> None:
        assert process.stdout is not None
        for _ in process.stdout:
            pass

    threading.Thread(target=drain, daemon=True).start()


def addresses(count: int, per_address: int, cap: int, seconds: float) -> tuple[Row, list[str]]:
    """Idle connections from ``count`` addresses against a referee capped at ``cap``."""
    server, target = _referee("--max-connections", str(cap))
    try:
        args = ("--source", "127.0.5.1", "--sources", str(count), "--count", str(per_address))
        with _attacker("silent", target, *args) as outcomes:
            tried, answered, latencies = _grpc_victim(target, seconds)
    finally:
        server.kill()
        server.wait()
    name = "addresses" if count == 10 else f"addresses{count}"
    note = (
        f"{count} addresses x {per_address} idle past a cap of {cap}: "
        f"{outcomes.get('closed by the server', 0):,.0f} shed, the victim {answered / max(1, tried):.0%} answered"
    )
    problems = [] if answered >= 0.9 * tried else [f"{name}: the victim got {answered} of {tried} answers"]
    return Row(name, tried, answered, _p99(latencies), note), problems


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def slowbodies(count: int, seconds: float, reopen: bool = False) -> tuple[Row, list[str]]:
    """``count`` slow bodies from 10 addresses through the gateway at its defaults; with
    ``reopen``, a new one for each the gateway ends (figures only: see the module's doc)."""
    port, referee_port = _free_port(), _free_port()
    command = [sys.executable, "-m", "gateway", "run", "--listen", f"127.0.0.1:{port}", "--concurrency", "1"]
    command += ["--admin-port", str(_free_port()), "--upstream", f"127.0.0.1:{referee_port}"]
    gateway = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert gateway.stdout is not None
    try:
        for line in gateway.stdout:
            if "the referee desk" in line:
                break
        else:
            raise RuntimeError("the gateway did not start")
        _drain(gateway)
        children = Path(f"/proc/{gateway.pid}/task/{gateway.pid}/children").read_text().split()
        envoy = next(int(c) for c in children if Path(f"/proc/{c}/exe").resolve().name == "envoy")
        rss_before = _rss_mb(envoy)
        args = ("--source", "127.0.6.1", "--sources", "10", "--count", str(count // 10), "--byte-every", "10")
        args += ("--reopen",) if reopen else ("--no-reopen",)
        rss_peak = rss_before
        with _attacker("slowbodies", f"127.0.0.1:{port}", *args) as outcomes:
            tried, answered, latencies = _json_victim(f"http://127.0.0.1:{port}/v1/hands:solve", seconds)
            rss_peak = max(rss_peak, _rss_mb(envoy))
            # Past the request time limit: every slow body of the first wave has met it.
            time.sleep(max(0.0, SLOW_BODY_LIMIT + 2 - seconds))
            rss_peak = max(rss_peak, _rss_mb(envoy))
    finally:
        gateway.terminate()
        gateway.wait(30)
    note = (
        f"{count:,} slow bodies from 10 addresses: {outcomes.get('ended by the server', 0):,.0f} ended, "
        f"{outcomes.get('answered 408', 0):,.0f} of them with 408, the longest lived {outcomes.get('longest', 0):.1f} s, "
        f"the oldest still open {outcomes.get('oldest_open', 0):.1f} s; Envoy's RSS {rss_before:.0f} -> "
        f"{rss_peak:.0f} MB; the victim {answered / max(1, tried):.0%} answered within 2 s"
    )
    name = "slowbodies-reopen" if reopen else "slowbodies"
    problems: list[str] = []
    if reopen:
        return Row(name, tried, answered, _p99(latencies), note), problems
    if answered < 0.95 * tried:
        problems.append(f"slowbodies: the victim got {answered} of {tried} answers within 2 s")
    if max(outcomes.get("longest", 0), outcomes.get("oldest_open", 0)) > SLOW_BODY_LIMIT + 1:
        problems.append(f"slowbodies: a slow body lived past the request time limit ({outcomes})")
    if rss_peak >= 250:
        problems.append(f"slowbodies: Envoy's RSS reached {rss_peak:.0f} MB")
    return Row(name, tried, answered, _p99(latencies), note), problems


HEADER = f"{'attack':<12} {'tried':>6} {'answered':>8} {'p99 ms':>7}  the attack"


def run(seconds: float, slow_bodies: int = 10_000, only: Sequence[str] = ()) -> list[str]:
    """Every round-three row, printed; what missed its bound."""
    print(f"-- round three: many addresses and slow bodies; a fresh client's calls for {seconds:g} s", flush=True)
    print(HEADER, flush=True)
    problems: list[str] = []
    rows = {
        "addresses": lambda: addresses(10, 30, 200, seconds),
        "addresses200": lambda: addresses(200, 8, 1_000, seconds),
        "slowbodies": lambda: slowbodies(slow_bodies, seconds),
        "slowbodies-reopen": lambda: slowbodies(slow_bodies, seconds, reopen=True),
    }
    for name, measure in rows.items():
        if only and name not in only:
            continue
        row, found = measure()
        print(f"{row.attack:<12} {row.tried:>6} {row.answered:>8} {row.p99_ms:>7.1f}  {row.note}", flush=True)
        problems += found
    return problems


ROWS = ("addresses", "addresses200", "slowbodies", "slowbodies-reopen")

if __name__ == "__main__":
    print(f"cpus: {os.cpu_count()}")
    sys.exit(1 if run(10.0) else 0)
