"""JSON through the gateway against native gRPC, on the same hand, back to back.

    python -m bench.gateway [--seconds S] [--connections N] [--rounds R] [--concurrency C]

One referee process (one worker) and Envoy in front of it (``--concurrency`` worker threads,
by default the gateway's own: two on a machine of two cores or more), both on loopback. Each round measures, one after the other with the same number of
closed-loop connections: native gRPC straight to the referee, native gRPC through the gateway,
and JSON over HTTP/1.1 through the gateway, all asking SolveHand for the same hand; the order of
the three turns by one place each round, so no mode always runs first or last. Calls a second,
p50 and p99 latency and failures per mode (the median round), the CPU each process spent per
call (the referee with its child processes, Envoy, and this load generator), the gateway's
resident memory before and after, and the JSON-to-native ratio, as a table and one JSON line.

The load generators cost little CPU on purpose (the machine's cores are shared with what they
measure): gRPC through bench/h2client.py, JSON through the small HTTP/1.1 client below (requests
encoded ahead, one epoll for every connection, replies parsed by Content-Length). Their own CPU
per call is printed, so a mode cannot win or lose by its client's cost unseen.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import h2client
from gateway.__main__ import DEFAULT_CONCURRENCY
from gateway.envoy import GatewayConfig, render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
HAND = ["AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK"]
METHOD = "/remigio.referee.v1.RefereeService/SolveHand"
LISTENING = re.compile(r"listening on \S+:(\d+)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and its live descendants, in seconds."""
    total, pending = 0.0, [pid]
    ticks = os.sysconf("SC_CLK_TCK")
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue  # gone meanwhile
    return total


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Mode:
    """One mode's figures."""

    name: str
    calls: int
    failed: int
    seconds: float
    latencies: list[float]
    # CPU seconds spent during the mode: the referee (with its children), Envoy, this client.
    cpu: dict[str, float] = field(default_factory=dict)

    def cpu_ms_per_call(self, who: str) -> float:
        """``who``'s CPU per call, in ms."""
        return 1000 * self.cpu.get(who, float("nan")) / max(self.calls, 1)

    @property
    def rate(self) -> float:
        """Successful calls a second."""
        return (self.calls - self.failed) / self.seconds

    def percentile(self, q: float) -> float:
        """The q-th percentile latency, in ms."""
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def grpc_mode(name: str, target: str, connections: int, seconds: float) -> Mode:
    """Closed-loop gRPC calls to ``target`` for ``seconds``."""
    request = pb.SolveHandRequest(cards=HAND).SerializeToString()  # the client frames it
    clients = [h2client.Client(first=n, step=connections, start_at=0.0) for n in range(connections)]
    h2client.drive(target, METHOD, clients, [request], seconds, timeout=10)
    latencies, failed, calls = [], 0, 0
    for client in clients:
        for call in client.calls:
            calls += 1
            replies = call.replies()
            if call.status != 0 or not replies or pb.SolveHandResponse.FromString(replies[0]).linking.points != 9:
                failed += 1
            else:
                latencies.append(call.ended - call.began)
    return Mode(name, calls, failed, seconds, latencies)


def json_mode(name: str, port: int, connections: int, seconds: float) -> Mode:
    """Closed-loop JSON calls over HTTP/1.1 keep-alive connections for ``seconds``."""
    body = json.dumps({"cards": HAND}).encode()
    request = (
        b"POST /v1/hands:solve HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    poller = select.epoll()
    state: dict[int, tuple[socket.socket, bytearray, float]] = {}
    latencies: list[float] = []
    calls = failed = 0
    start = time.monotonic()
    stop = start + seconds
    for sock in socks:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        poller.register(sock.fileno(), select.EPOLLIN)
        state[sock.fileno()] = (sock, bytearray(), time.monotonic())
        sock.sendall(request)
    open_calls = len(socks)
    while open_calls:
        for fd, _ in poller.poll(1.0):
            sock, buffer, began = state[fd]
            data = sock.recv(1 << 16)
            if not data:
                raise SystemExit("the gateway closed a connection")
            buffer += data
            head_end = buffer.find(b"\r\n\r\n")
            if head_end < 0:
                continue
            head = bytes(buffer[:head_end]).decode("latin-1")
            length = int(re.search(r"(?im)^content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
            if len(buffer) < head_end + 4 + length:
                continue
            now = time.monotonic()
            reply = bytes(buffer[head_end + 4 : head_end + 4 + length])
            del buffer[: head_end + 4 + length]
            calls += 1
            if not head.startswith("HTTP/1.1 200") or b'"points":9}' not in reply:
                failed += 1
            else:
                latencies.append(now - began)
            if now < stop:
                state[fd] = (sock, buffer, now)
                sock.sendall(request)
            else:
                open_calls -= 1
    poller.close()
    for sock in socks:
        sock.close()
    return Mode(name, calls, failed, time.monotonic() - start, latencies)


class Stack:
    """The referee and Envoy in front of it, on loopback."""

    def __init__(self, folder: Path, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMIGIO_")}
        self.referee = subprocess.Popen(
            [sys.executable, "-m", "referee.server", "--port", "0", "--trusted-proxies", "127.0.0.1/32",
             "--max-calls-per-client", "64"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its group: the dispute job processes go with it
        )  # fmt: skip
        assert self.referee.stderr is not None
        for line in self.referee.stderr:
            if found := LISTENING.search(line):
                self.referee_port = int(found.group(1))
                break
        else:
            os.killpg(self.referee.pid, signal.SIGKILL)
            self.referee.wait()
            raise SystemExit("the referee did not start")
        # Its log, a line per call, read and dropped: a full pipe would stop the referee.
        threading.Thread(target=lambda: [None for _ in self.referee.stderr or ()], daemon=True).start()
        descriptor_set = folder / "referee.binpb"
        subprocess.run([sys.executable, "-m", "gateway", "descriptors", str(descriptor_set)], cwd=ROOT, check=True)
        self.port = _free_port()
        config = GatewayConfig(
            str(descriptor_set), listen_port=self.port, admin_port=_free_port(), upstream_port=self.referee_port
        )
        (folder / "envoy.yaml").write_text(render(config))
        envoy = Path(sys.executable).parent / "envoy"
        self.envoy = subprocess.Popen(
            [str(envoy), "-c", str(folder / "envoy.yaml"), "--concurrency", str(concurrency), "--disable-hot-restart",
             "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()  # neither is left running behind the error
        raise SystemExit("the gateway did not become healthy")

    def measured(self, run: Callable[[], Mode]) -> Mode:
        """``run()``, with the CPU the referee, Envoy and this process spent during it."""
        before = (_cpu_seconds(self.referee.pid), _cpu_seconds(self.envoy.pid), _own_cpu_seconds())
        mode = run()
        after = (_cpu_seconds(self.referee.pid), _cpu_seconds(self.envoy.pid), _own_cpu_seconds())
        mode.cpu = {who: end - start for who, start, end in zip(("referee", "envoy", "client"), before, after)}
        return mode

    def stop(self) -> None:
        """Stop both."""
        self.envoy.kill()
        self.envoy.wait()
        os.killpg(self.referee.pid, signal.SIGKILL)
        self.referee.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per mode and round (default 5)")
    parser.add_argument("--connections", type=int, default=8, help="closed-loop connections (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median round's figures are kept (default 3)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"Envoy's worker threads (default {DEFAULT_CONCURRENCY}: the gateway's own default)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(Path(tmp), args.concurrency)
        try:
            rss_before = _rss_mb(stack.envoy.pid)
            direct = f"127.0.0.1:{stack.referee_port}"
            through = f"127.0.0.1:{stack.port}"
            runs: dict[str, Callable[[], Mode]] = {
                "native gRPC, direct": lambda: grpc_mode("native gRPC, direct", direct, args.connections, args.seconds),
                "native gRPC, gateway": lambda: grpc_mode(
                    "native gRPC, gateway", through, args.connections, args.seconds
                ),
                "JSON, gateway": lambda: json_mode("JSON, gateway", stack.port, args.connections, args.seconds),
            }
            grpc_mode("warm-up", direct, args.connections, 1.0)
            grpc_mode("warm-up", through, args.connections, 1.0)
            json_mode("warm-up", stack.port, args.connections, 1.0)
            rounds: list[dict[str, Mode]] = []
            names = list(runs)
            for number in range(args.rounds):
                order = names[number % len(names) :] + names[: number % len(names)]
                measured = {name: stack.measured(runs[name]) for name in order}
                rounds.append({name: measured[name] for name in names})
            rss_after = _rss_mb(stack.envoy.pid)
        finally:
            stack.stop()
    ordered = sorted(
        rounds, key=lambda modes: modes["JSON, gateway"].rate / max(modes["native gRPC, direct"].rate, 1e-9)
    )
    median = ordered[len(ordered) // 2]
    print(
        f"{'mode':<22} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7}"
        f" {'CPU ms/call: referee':>21} {'envoy':>6} {'client':>7}"
    )
    for mode in median.values():
        print(
            f"{mode.name:<22} {mode.rate:>9.0f} {mode.percentile(50):>8.2f} {mode.percentile(99):>8.2f} {mode.failed:>7}"
            f" {mode.cpu_ms_per_call('referee'):>21.2f} {mode.cpu_ms_per_call('envoy'):>6.2f}"
            f" {mode.cpu_ms_per_call('client'):>7.2f}"
        )
    ratio = median["JSON, gateway"].rate / max(median["native gRPC, direct"].rate, 1e-9)
    print(f"JSON / native gRPC: {ratio:.0%}; gateway memory {rss_before:.0f} MB at start, {rss_after:.0f} MB after")
    summary = {
        "connections": args.connections,
        "envoy_concurrency": args.concurrency,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "modes": {
            name: {
                "rate": round(m.rate),
                "p50_ms": round(m.percentile(50), 2),
                "p99_ms": round(m.percentile(99), 2),
                "failed": m.failed,
                "cpu_ms_per_call": {who: round(m.cpu_ms_per_call(who), 3) for who in ("referee", "envoy", "client")},
            }
            for name, m in median.items()
        },
        "json_to_native": round(ratio, 3),
        "gateway_rss_mb": [round(rss_before, 1), round(rss_after, 1)],
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
