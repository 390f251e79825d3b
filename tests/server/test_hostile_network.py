"""Faults of a real network between clients and two referee replicas (docs/operations.md,
"Keepalive"): each host a network namespace on a switch (``netns``), the replicas one DNS name
served on the client's host (``dnsstub``), the client's target ``dns://STUB/referee.test:PORT``.

- a replica's link cut (no reset: packets vanish) while ``batch --target`` runs, and while the
  public client calls: every verdict once and in order, the work finished through the other
  replica within the keepalive's bound;
- a replica stopped (SIGSTOP: its kernel still answers TCP, the server nothing), then resumed;
- a replica restarted at a new address behind the name.

The clients ping every second with a second to answer (``--keepalive 1 --keepalive-timeout 1``)
and the servers allow it (``--min-client-ping-interval 0.2``), so a dead link is found within
about 2 s, where the defaults find it within 25 s. Each test prints its recovery times
(``figure: ...``), which ``bench.network`` collects over several runs for docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cases import many_hand_cases
from dnsstub import DnsStub
from netns import Host, Network, unavailable
from servers import ROOT, ServerProcess, server_env
from test_batch import assert_verdicts, batch_command
from test_scaling import solved

pytestmark = [pytest.mark.timeout(180)]

NAME = "referee.test"
PORT = "50051"  # every replica on its own host, so one port for all of them
KEEPALIVE = ("--keepalive", "1", "--keepalive-timeout", "1")
KEEPALIVE_BOUND = 2.0  # seconds: a silent connection is found within keepalive + its timeout
# Detection takes keepalive + its timeout (2 s); the bound allows a loaded 2-core machine's
# start-up of the resent streams on the other replica.
BOUND_SECONDS = 20.0
# The servers allow the clients' pings, and ping too: a client cut off is dropped within 2 s,
# with the streams it held.
SERVER_OPTIONS = (
    *("--workers", "1", "--dispute-jobs", "1", "--log-format", "json"),
    *("--min-client-ping-interval", "0.2", "--keepalive", "1", "--keepalive-timeout", "1"),
)


@pytest.fixture
def network() -> Iterator[Network]:
    """A switch with no hosts yet; skipped where namespaces cannot be made."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with Network() as net:
        yield net


@dataclass
class Site:
    """Two replicas and a client host, the name resolving to both replicas."""

    network: Network
    client: Host
    hosts: list[Host]
    servers: list[ServerProcess | None]
    dns: DnsStub

    @property
    def target(self) -> str:
        """The client's target: the name, through the DNS server on the client's host."""
        return f"dns://127.0.0.1:{self.dns.port}/{NAME}:{PORT}"

    def serve(self, index: int, *options: str) -> ServerProcess:
        """Start (or start again) replica ``index`` at its host's address."""
        host = self.hosts[index]
        server = ServerProcess("--host", host.address, "--port", PORT, *SERVER_OPTIONS, *options, prefix=host.command())
        self.servers[index] = server
        server.listening(timeout=90)  # a busy 2-core machine starts a server slowly
        return server

    def publish(self) -> None:
        """The name resolves to every replica's current address."""
        self.dns.set(NAME, [host.address for host in self.hosts])


@pytest.fixture
def site(network: Network) -> Iterator[Site]:
    """Two replicas on their own hosts, and a client host whose DNS server names them."""
    client = network.host("client")
    hosts = [network.host("replica0"), network.host("replica1")]
    dns = client.run(DnsStub, {NAME: [host.address for host in hosts]})
    started = Site(network, client, hosts, [None, None], dns)
    try:
        yield started
    finally:
        for server in started.servers:
            if server is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.proc.pid, signal.SIGCONT)
                server.kill()
        dns.close()


def start_replicas(site: Site, *options: str) -> None:
    """Both replicas, serving."""
    for index in range(len(site.hosts)):
        site.serve(index, *options)


def figure(what: str, seconds: float) -> None:
    """Print a recovery time as bench.network collects it."""
    print(f"\nfigure: {what}: {seconds:.2f} s")


def lines_of(path: Path) -> int:
    """Lines written so far to ``path``."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait for ``check()`` to be true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# Batch -------------------------------------------------------------------------------------


def start_batch(site: Site, cases: Path, out: Path) -> subprocess.Popen[str]:
    """``batch --target`` over the name from the client's host, two jobs."""
    argv = batch_command(cases, "-o", out, "--target", site.target, "--jobs", "2", *KEEPALIVE)
    return subprocess.Popen(
        site.client.command(*argv),
        cwd=ROOT,
        env=server_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@dataclass
class Progress:
    """When the verdicts of a batch were written: (time.monotonic(), lines so far) at each change."""

    steps: list[tuple[float, int]]

    def stall_after(self, moment: float) -> float:
        """The longest wait for a verdict from ``moment`` on: the fault's cost to the batch."""
        times = [moment] + [at for at, _ in self.steps if at > moment]
        return max(later - earlier for earlier, later in zip(times, times[1:], strict=False)) if len(times) > 1 else 0.0


def follow(batch: subprocess.Popen[str], out: Path, until: int | None = None, timeout: float = 120) -> Progress:
    """Watch the batch's output until it has ``until`` lines (None: until the batch ends with status 0)."""
    progress = Progress([])
    deadline = time.monotonic() + timeout
    while True:
        written = lines_of(out)
        if not progress.steps or written != progress.steps[-1][1]:
            progress.steps.append((time.monotonic(), written))
        if until is not None and written >= until:
            return progress
        if batch.poll() is not None:
            break
        if time.monotonic() > deadline:
            batch.kill()
            break
        time.sleep(0.01)
    stderr = batch.stderr.read() if batch.stderr else ""
    assert batch.returncode == 0, f"the batch ended {batch.returncode}:\n{stderr}"
    return progress


def test_a_cut_link_is_silent(network: Network) -> None:
    """The harness's cut is a pulled cable: a peer closing its end while cut reaches nobody."""
    import socket

    server_host, client_host = network.host("server"), network.host("client")
    listener = server_host.run(socket.create_server, (server_host.address, 0))
    with listener:
        peer = client_host.run(socket.create_connection, (server_host.address, listener.getsockname()[1]), 5)
        accepted, _ = listener.accept()
        with peer, accepted:
            server_host.link.cut()
            accepted.close()  # a FIN (a RST, as data is unread) that must not arrive
            peer.sendall(b"anyone?")
            peer.settimeout(1.0)
            with pytest.raises(TimeoutError):
                peer.recv(16)  # neither the close nor a reset: nothing
            server_host.link.mend()
            peer.settimeout(15)
            with contextlib.suppress(ConnectionResetError):
                assert peer.recv(16) == b""  # the mended link carries the close at last


def run_fault_on_batch(site: Site, tmp_path: Path, seed: int, fault: Callable[[], None]) -> tuple[Progress, float]:
    """A batch over both replicas, ``fault()`` once its first verdicts are written; the batch's
    progress and the moment of the fault, once every verdict is checked: each once, in order."""
    cases = tmp_path / "cases.jsonl"
    expected = many_hand_cases(cases, seed=seed, copies=20)  # 820 cases, 7 chunks
    out = tmp_path / "verdicts.jsonl"
    batch = start_batch(site, cases, out)
    try:
        follow(batch, out, until=1, timeout=60)
        at = time.monotonic()
        written = lines_of(out)
        fault()
        # Chunks of 128 cases, two jobs: with three chunks still to send, each job's channel
        # sends one to the replica at fault, whose connection still looks alive.
        assert written <= len(expected) - 3 * 128, f"the batch was too far on ({written}/{len(expected)})"
        progress = follow(batch, out)
    finally:
        batch.kill()
    assert_verdicts(out, expected)
    return progress, at


def test_batch_finishes_through_the_other_replica_when_a_link_is_cut(site: Site, tmp_path: Path) -> None:
    start_replicas(site)
    progress, cut = run_fault_on_batch(site, tmp_path, 11, site.hosts[0].link.cut)
    stall, finished = progress.stall_after(cut), progress.steps[-1][0] - cut
    figure("batch, link cut: longest wait for a verdict", stall)
    figure("batch, link cut: cut to the last verdict", finished)
    assert stall < BOUND_SECONDS


def test_batch_finishes_when_a_replica_is_stopped_then_resumed(site: Site, tmp_path: Path) -> None:
    start_replicas(site)
    stopped = site.servers[0]
    assert stopped is not None
    resume = threading.Timer(3 * KEEPALIVE_BOUND, os.killpg, (stopped.proc.pid, signal.SIGCONT))

    def stop() -> None:
        os.killpg(stopped.proc.pid, signal.SIGSTOP)  # half-dead: its kernel still takes packets
        resume.start()  # back while the batch runs, after keepalive has given it up

    try:
        progress, at = run_fault_on_batch(site, tmp_path, 12, stop)
    finally:
        resume.cancel()
        os.killpg(stopped.proc.pid, signal.SIGCONT)
    stall = progress.stall_after(at)
    figure("batch, replica stopped: longest wait for a verdict", stall)
    assert stall < BOUND_SECONDS


def test_batch_finishes_when_a_replica_restarts_at_a_new_address(site: Site, tmp_path: Path) -> None:
    start_replicas(site, "--grace", "1")

    def restart() -> None:
        site.dns.set(NAME, [site.hosts[1].address])
        old = site.servers[0]
        assert old is not None
        old.terminate()  # drains: streams in flight finish or end UNAVAILABLE within the grace
        site.hosts[0] = site.hosts[0].readdress(site.network.spare_address())
        site.serve(0, "--grace", "1")
        site.publish()

    progress, at = run_fault_on_batch(site, tmp_path, 14, restart)
    figure("batch, replica restarted at a new address: longest wait for a verdict", progress.stall_after(at))


# The public client -------------------------------------------------------------------------


@dataclass
class Calls:
    """What ``netclient`` did: each call's kind, start, end and status."""

    calls: list[dict[str, object]]

    def failed(self) -> list[dict[str, object]]:
        """The calls that did not end OK."""
        return [call for call in self.calls if call["code"] != "OK"]

    def held_up_after(self, moment: float) -> float:
        """The longest any call waited after ``moment`` (from then, or from its start if later)."""
        waits = [float(c["end"]) - max(float(c["start"]), moment) for c in self.calls if float(c["end"]) > moment]  # type: ignore[arg-type]
        return max(waits, default=0.0)


@contextlib.contextmanager
def calling(site: Site, *options: str) -> Iterator[list[Calls]]:
    """``netclient`` calling from the client's host while the block runs; its calls, once it has stopped."""
    argv = [sys.executable, str(ROOT / "tests" / "netclient.py"), site.target, *options]
    client = subprocess.Popen(
        site.client.command(*argv),
        cwd=ROOT,
        env=server_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result: list[Calls] = []
    try:
        assert client.stdout is not None and client.stdin is not None
        assert client.stdout.readline().strip() == "ready", client.stderr.read() if client.stderr else ""
        yield result
        out, err = client.communicate("stop\n", timeout=90)
        assert client.returncode == 0, err
        result.append(Calls(json.loads(out.strip().splitlines()[-1])["calls"]))
    finally:
        client.kill()


def assert_every_call_succeeded(calls: Calls, bound: float = BOUND_SECONDS) -> None:
    """No call failed (retried on the other replica instead), none took longer than ``bound``."""
    assert not calls.failed(), calls.failed()[:5]
    kinds = {str(call["kind"]) for call in calls.calls}
    assert kinds == {"unary", "stream"}, kinds
    longest = max(float(c["end"]) - float(c["start"]) for c in calls.calls)  # type: ignore[arg-type]
    assert longest < bound, f"a call took {longest:.1f} s"


def test_the_client_rides_out_a_cut_link(site: Site) -> None:
    start_replicas(site)
    with calling(site) as result:
        time.sleep(0.5)
        cut = time.monotonic()
        site.hosts[0].link.cut()
        time.sleep(4)  # keepalive (1 s) and its timeout (1 s), with room for the retries
    (calls,) = result
    recovery = calls.held_up_after(cut)
    figure("client, link cut: longest wait for a call", recovery)
    assert_every_call_succeeded(calls)
    # Calls go on to the cut replica until keepalive gives it up (its connection looks alive):
    # those wait at least the keepalive timeout.
    assert recovery > 0.5, "no call was caught on the cut link"


def test_the_client_rides_out_a_stopped_replica_and_uses_it_again_once_resumed(site: Site) -> None:
    start_replicas(site)
    stopped = site.servers[0]
    assert stopped is not None
    with calling(site) as result:
        time.sleep(0.5)
        at = time.monotonic()
        os.killpg(stopped.proc.pid, signal.SIGSTOP)
        time.sleep(4)
        os.killpg(stopped.proc.pid, signal.SIGCONT)
        # Resumed, it first answers the calls it was sent before the client gave it up (their
        # connections are closed): those settle, then new calls must come.
        time.sleep(1)
        before = solved(stopped)
        wait_until(lambda: solved(stopped) > before, 30, "the resumed replica to answer new calls")
    (calls,) = result
    recovery = calls.held_up_after(at)
    figure("client, replica stopped: longest wait for a call", recovery)
    assert_every_call_succeeded(calls)
    assert recovery > 0.5, "no call was caught on the stopped replica"


def test_the_client_finds_a_replica_restarted_at_a_new_address(site: Site) -> None:
    # Connections age out each second, so clients ask DNS again and find the moved replica.
    options = ("--max-connection-age", "1", "--max-connection-age-grace", "1", "--grace", "1")
    start_replicas(site, *options)
    with calling(site) as result:
        time.sleep(0.5)
        site.dns.set(NAME, [site.hosts[1].address])
        old = site.servers[0]
        assert old is not None
        old.terminate()
        site.hosts[0] = site.hosts[0].readdress(site.network.spare_address())
        moved = site.serve(0, *options)
        published = time.monotonic()
        site.publish()
        wait_until(lambda: solved(moved) > 0, 30, "a call to reach the replica at its new address")
        found = time.monotonic() - published
    (calls,) = result
    figure("client, replica restarted at a new address: in DNS to its first call served", found)
    assert_every_call_succeeded(calls)
