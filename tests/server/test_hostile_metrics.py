"""The metrics port against a hostile client: real server processes, and the server in this one.

Idle connections cost the parent no thread and at most ``--metrics-max-connections``
descriptors, each for at most ``--metrics-timeout`` seconds, while a scraper is still answered;
a parent whose descriptors are exhausted survives a worker's death and starts its replacement
once descriptors are free again; the port binds loopback unless ``--metrics-host`` says
otherwise; and a forked child keeps no copy of the port's sockets.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import resource
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from servers import LISTENING, METRICS, WORKERS, ServerProcess

from referee.server import defaults
from referee.server.config import add_arguments
from referee.server.metrics_http import MetricsServer, Render

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="/proc and SO_REUSEPORT")]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 2.0  # --metrics-timeout of the first server
CAP = defaults.METRICS_MAX_CONNECTIONS
CANNOT_START = re.compile(r"cannot start worker \d+ \((.+)\); trying again")


# What the tests read from a process -------------------------------------------------------------


def threads(pid: int) -> int:
    """The process's threads (``Threads`` in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def descriptors(pid: int) -> set[int]:
    """The process's open descriptors."""
    return {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}


def tcp_sockets(port: int) -> dict[str, str]:
    """Every IPv4 TCP socket whose local port is ``port``: its inode to its local address (hex)."""
    found = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, local_port = fields[1].rsplit(":", 1)
        if int(local_port, 16) == port:
            found[f"socket:[{fields[9]}]"] = address
    return found


def listening_address(port: int) -> str:
    """The local address (dotted) of the socket listening on ``port``."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, local_port = fields[1].rsplit(":", 1)
        if int(local_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
            return socket.inet_ntoa(int(address, 16).to_bytes(4, "little"))
    raise AssertionError(f"nothing listens on {port}")


def holds(pid: int, inodes: set[str]) -> set[str]:
    """Which of ``inodes`` (``socket:[N]``) the process holds a descriptor of."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return held & inodes


def get(url: str) -> tuple[int, str]:
    """GET ``url`` (no proxy): the status and the text."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as reply:
        return reply.status, reply.read().decode()


def sample(text: str, name: str) -> float:
    """One sample of a Prometheus text exposition (``name`` with its labels, as written)."""
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, f"no {name} in:\n{text}"
    return float(found.group(1))


def dropped(text: str, reason: str) -> float:
    return sample(text, f'referee_metrics_connections_dropped_total{{reason="{reason}"}}')


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (end of file or reset)."""
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` raw and read the whole reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def seconds_until_closed(port: int, send: bytes = b"", every: float = 0.0) -> float:
    """Connect, send ``send`` a byte at a time every ``every`` seconds (nothing if empty), and
    return the seconds until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        start = time.monotonic()
        for byte in send:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(every)
            if closed(sock):
                break
        while not closed(sock):
            assert time.monotonic() - start < 15, "never closed"
            time.sleep(0.05)
        return time.monotonic() - start


@pytest.fixture
def launched() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.kill()


# Idle connections ------------------------------------------------------------------------------


def test_idle_connections_pin_no_thread_and_few_descriptors_and_a_scraper_is_answered(
    launched: list[ServerProcess], tmp_path: Path
) -> None:
    # gRPC on every address; the metrics port stays on loopback all the same.
    server = ServerProcess(
        "--host", "0.0.0.0", "--port", "0", "--workers", "2", "--metrics-port", "0",
        "--metrics-timeout", str(TIMEOUT), "--runtime-dir", str(tmp_path), "--debug-pid",
    )  # fmt: skip
    launched.append(server)
    url = server.wait_for(METRICS).group(1)
    assert url.startswith("http://127.0.0.1:")
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert listening_address(port) == "127.0.0.1"
    server.wait_for(WORKERS)
    workers = [int(server.wait_for(LISTENING).group(3)) for _ in range(2)]
    parent = server.proc.pid
    threads_before, fds_before = threads(parent), len(descriptors(parent))
    before = get(url)[1]

    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(400)]
    try:
        # A worker killed now is forked again while the parent holds idle connections.
        os.kill(workers[0], signal.SIGKILL)
        opened = time.monotonic()
        status, text = get(url)  # a scraper among 400 idle connections
        scraped = time.monotonic() - opened
        assert status == 200
        assert scraped < 2, f"the scrape took {scraped:.2f}s"
        assert threads(parent) == threads_before, "a thread per connection"
        assert len(descriptors(parent)) <= fds_before + CAP + 2

        # The new worker keeps no copy of the port's sockets, the listener or a connection.
        replacement = int(server.wait_for(LISTENING).group(3))
        assert not holds(replacement, set(tcp_sockets(port))), "the new worker holds metrics sockets"
        assert sample(get(url)[1], "referee_workers_up") == 2

        # Every idle connection is closed: the oldest to make room, the rest at the timeout.
        deadline = time.monotonic() + TIMEOUT + 5
        while not all(closed(sock) for sock in idle):
            assert time.monotonic() < deadline, f"{sum(not closed(s) for s in idle)} idle connections still open"
            time.sleep(0.1)
    finally:
        for sock in idle:
            sock.close()
    after = get(url)[1]
    evicted = dropped(after, "evicted") - dropped(before, "evicted")
    timed_out = dropped(after, "timeout") - dropped(before, "timeout")
    assert evicted + timed_out == 400 and 0 < timed_out <= CAP, (evicted, timed_out)
    assert dropped(after, "full") == 0
    assert any("metrics port:" in line and "dropped" in line for line in server.lines)
    assert threads(parent) == threads_before

    # One connection that says nothing, and one that sends its request a byte every 0.3 s: both
    # are dropped at the timeout, unanswered.
    slow: list[float] = []
    sender = threading.Thread(
        target=lambda: slow.append(seconds_until_closed(port, b"GET /metrics HTTP/1.1\r\n\r\n", every=0.3))
    )
    sender.start()
    silent = seconds_until_closed(port)
    sender.join(timeout=20)
    assert TIMEOUT - 0.2 <= silent <= TIMEOUT + 1.5, silent
    assert slow and TIMEOUT - 0.2 <= slow[0] <= TIMEOUT + 1.5, slow


def test_only_get_of_metrics_is_answered_and_errors_are_short(launched: list[ServerProcess], tmp_path: Path) -> None:
    server = ServerProcess("--port", "0", "--metrics-port", "0", "--runtime-dir", str(tmp_path))
    launched.append(server)
    port = int(server.wait_for(METRICS).group(1).rsplit(":", 1)[1].split("/")[0])

    def status(request: bytes) -> tuple[str, bytes]:
        reply = exchange(port, request)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert len(reply) < 300 or head.startswith(b"HTTP/1.1 200"), reply
        assert b"Connection: close" in head
        return head.split(b"\r\n")[0].decode(), body

    assert status(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")[0] == "HTTP/1.1 200 OK"
    assert status(b"HEAD /metrics HTTP/1.1\r\n\r\n") == ("HTTP/1.1 200 OK", b"")
    assert status(b"GET / HTTP/1.0\r\n\r\n")[0] == "HTTP/1.1 200 OK"
    assert status(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")[0] == "HTTP/1.1 405 Method Not Allowed"
    assert status(b"GET /debug HTTP/1.1\r\n\r\n")[0] == "HTTP/1.1 404 Not Found"
    assert status(b"HELLO\r\n\r\n")[0] == "HTTP/1.1 400 Bad Request"
    assert status(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")[0].startswith("HTTP/1.1 431")
    # A scraper asking for gzip gets it.
    reply = exchange(port, b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
    assert b"Content-Encoding: gzip" in reply.partition(b"\r\n\r\n")[0]


# Out of descriptors ------------------------------------------------------------------------------


def test_a_parent_out_of_descriptors_survives_a_workers_death_and_restarts_it_once_they_free(
    launched: list[ServerProcess], tmp_path: Path
) -> None:
    server = ServerProcess(
        "--port", "0", "--workers", "2", "--metrics-port", "0", "--metrics-host", "0.0.0.0",
        "--metrics-max-connections", "1000", "--metrics-timeout", "60", "--runtime-dir", str(tmp_path),
    )  # fmt: skip
    launched.append(server)
    url = server.wait_for(METRICS).group(1)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert listening_address(port) == "0.0.0.0"  # --metrics-host said so
    server.wait_for(WORKERS)
    workers = [int(server.wait_for(LISTENING).group(3)) for _ in range(2)]
    parent = server.proc.pid
    threads_before, fds_before = threads(parent), len(descriptors(parent))
    limit = 256
    resource.prlimit(parent, resource.RLIMIT_NOFILE, (limit, resource.prlimit(parent, resource.RLIMIT_NOFILE)[1]))

    # Connections until every descriptor number under the limit is taken; more wait in the backlog.
    flood = []
    try:
        for _ in range(limit + 64):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            flood.append(sock)
        deadline = time.monotonic() + 15
        while not set(range(limit)) <= descriptors(parent):
            assert time.monotonic() < deadline, f"the parent holds {len(descriptors(parent))} descriptors"
            time.sleep(0.05)

        # A worker dies: its replacement needs more descriptors than the dead one gave back.
        os.kill(workers[0], signal.SIGKILL)
        failed = server.wait_for(CANNOT_START, timeout=10)
        assert failed.group(1) == os.strerror(errno.EMFILE)
        time.sleep(1)
        assert server.proc.poll() is None, "the supervisor died"
        assert threads(parent) == threads_before
    finally:
        for sock in flood:
            sock.close()

    # Descriptors free again: the worker is replaced, and nothing is left open by the failures.
    replacement = int(server.wait_for(LISTENING, timeout=20).group(3))
    assert replacement not in workers
    assert any(re.search(r"worker \d+ started \(pid \d+\) after \d+ failed starts", line) for line in server.lines)
    deadline = time.monotonic() + 10
    while len(descriptors(parent)) != fds_before:
        assert time.monotonic() < deadline, f"{len(descriptors(parent))} descriptors, {fds_before} before"
        time.sleep(0.1)
    status, text = get(url)
    assert status == 200
    assert sample(text, "referee_workers_up") == 2
    assert sample(text, "referee_worker_restarts_total") == 1
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0


# The server in this process ----------------------------------------------------------------------


def render(body: bytes) -> Render:
    """An exposition that is always ``body``."""
    return lambda accept, encoding: (body, [("Content-Type", "text/plain")])


def test_connections_that_are_all_being_answered_refuse_a_new_one_at_once() -> None:
    reasons: list[str] = []
    # A reply far larger than the socket buffers: readers that never read stay mid-reply.
    server = MetricsServer(
        "127.0.0.1", 0, render(b"x" * (64 << 20)), max_connections=2, timeout=5, on_drop=reasons.append
    )
    try:
        readers = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        for sock in readers:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", server.port)) as late:
            late.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert late.recv(100) == b""
        assert reasons == ["full"]
        assert server.open_connections() == 2
        for sock in readers:
            sock.close()
    finally:
        server.stop()


def test_a_forked_child_closes_its_copies_of_the_ports_sockets() -> None:
    server = MetricsServer("127.0.0.1", 0, render(b"up 1\n"), max_connections=4, timeout=5)
    idle = socket.create_connection(("127.0.0.1", server.port))
    try:
        deadline = time.monotonic() + 5
        while server.open_connections() < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        inodes = set(tcp_sockets(server.port))  # the listener and the accepted connection
        assert len(holds(os.getpid(), inodes)) == 2
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report which of them it still holds
            os.close(read)
            os.write(write, json.dumps(sorted(holds(os.getpid(), inodes))).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as reply:
            held = json.loads(reply.read())
        os.waitpid(pid, 0)
        assert held == []
        assert len(holds(os.getpid(), inodes)) == 2
        assert not closed(idle)  # the parent's connection is untouched
        assert get(f"http://127.0.0.1:{server.port}/metrics") == (200, "up 1\n")  # the parent serves on
    finally:
        idle.close()
        server.stop()


# Flags and manifests -----------------------------------------------------------------------------


def test_the_metrics_port_binds_loopback_unless_told_and_its_limits_have_env_twins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [name for name in os.environ if name.startswith("REMIGIO_")]:
        monkeypatch.delenv(name)

    def parsed(*argv: str) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return parser.parse_args(argv)

    args = parsed("--host", "0.0.0.0")
    assert (args.metrics_host, args.metrics_max_connections, args.metrics_timeout) == ("127.0.0.1", CAP, 5.0)
    monkeypatch.setenv("REMIGIO_METRICS_HOST", "0.0.0.0")
    monkeypatch.setenv("REMIGIO_METRICS_MAX_CONNECTIONS", "4")
    monkeypatch.setenv("REMIGIO_METRICS_TIMEOUT", "2.5")
    args = parsed()
    assert (args.metrics_host, args.metrics_max_connections, args.metrics_timeout) == ("0.0.0.0", 4, 2.5)
    assert parsed("--metrics-host", "::1").metrics_host == "::1"
    for bad in (["--metrics-max-connections", "0"], ["--metrics-timeout", "0"]):
        with pytest.raises(SystemExit):
            parsed(*bad)


def test_the_deployment_opens_the_metrics_port_to_the_pod_network() -> None:
    """The metrics port binds loopback by default: the manifest must say where Prometheus reaches it."""
    deployment = yaml.safe_load((ROOT / "deploy/kubernetes/base/deployment.yaml").read_text(encoding="utf-8"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {variable["name"]: variable.get("value") for variable in container["env"]}
    assert env["REMIGIO_METRICS_HOST"] == "0.0.0.0"
    assert env["REMIGIO_METRICS_PORT"] == str(
        next(port["containerPort"] for port in container["ports"] if port["name"] == "metrics")
    )
