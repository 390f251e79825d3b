"""Scaling out: clients spread calls over the replicas behind one DNS name with gRPC's own
``dns:///`` resolver and ``round_robin`` policy (docs/operations.md, "Scaling out").

Two real server processes listen on the same port at two loopback addresses, and one name
resolves to both: ``localhost`` where it resolves to 127.0.0.1 and ::1, and a name served by a DNS
server on loopback (``dnsstub``) that resolves to 127.0.0.1 and 127.0.0.2, so the test runs
wherever ``localhost`` has one address only.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cases import many_hand_cases
from dnsstub import DnsStub
from servers import ServerProcess
from test_batch import assert_verdicts, run_batch

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform != "linux", reason="loopback addresses")]

NAME = "referee.test"


def localhost_addresses() -> set[str]:
    """The addresses ``localhost`` resolves to here."""
    try:
        return {info[4][0] for info in socket.getaddrinfo("localhost", 1, type=socket.SOCK_STREAM)}
    except OSError:
        return set()


def bindable(host: str) -> bool:
    """Whether a TCP socket can be bound on ``host`` (IPv6 may be off)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
    except OSError:
        return False
    return True


def c_ares_resolver() -> bool:
    """Whether gRPC resolves ``dns:`` targets with c-ares, the resolver that takes a DNS server in
    the target (``dns://127.0.0.1:PORT/name:port``); the native one ignores it."""
    return os.environ.get("GRPC_DNS_RESOLVER", "ares").lower() != "native"


def servers_on(*hosts: str, port: str = "0", options: tuple[str, ...] = ()) -> list[ServerProcess]:
    """One server process per host, all on the same port (a free one for "0"), logging JSON lines."""
    started: list[ServerProcess] = []
    try:
        for host in hosts:
            port = started[0].address.rpartition(":")[2] if started else port
            server = ServerProcess(
                "--host", host, "--port", port, "--log-format", "json", "--dispute-jobs", "1", *options
            )
            started.append(server)
            server.listening()
    except BaseException:
        for server in started:
            server.kill()
        raise
    return started


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Servers a test starts with ``servers_on``, stopped at its end."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.terminate()


def assert_both_judged(first: ServerProcess, second: ServerProcess, total: int) -> None:
    """Both servers judged cases, and together every case once (each logs a call as it ends)."""
    deadline = time.monotonic() + 10
    while first.judged() + second.judged() < total and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.judged() > 0 and second.judged() > 0, (first.judged(), second.judged())
    assert first.judged() + second.judged() == total


@pytest.mark.skipif(
    not {"127.0.0.1", "::1"} <= localhost_addresses(),
    reason=f"localhost resolves to {sorted(localhost_addresses())} here, not to both 127.0.0.1 and ::1 (/etc/hosts)",
)
@pytest.mark.skipif(not bindable("::1"), reason="no IPv6 loopback here")
def test_batch_through_dns_localhost_reaches_both_servers(servers: list[ServerProcess], tmp_path: Path) -> None:
    servers.extend(servers_on("127.0.0.1", "::1"))
    port = servers[0].address.rpartition(":")[2]
    path = tmp_path / "cases.jsonl"
    expected = many_hand_cases(path, seed=7, copies=20)
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--target", f"dns:///localhost:{port}", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert_verdicts(out, expected)
    assert_both_judged(servers[0], servers[1], len(expected))


@pytest.mark.skipif(not c_ares_resolver(), reason="GRPC_DNS_RESOLVER=native takes no DNS server in the target")
@pytest.mark.skipif(not bindable("127.0.0.2"), reason="127.0.0.2 is not a loopback address here")
def test_batch_through_a_dns_name_with_two_addresses_reaches_both_servers(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    servers.extend(servers_on("127.0.0.1", "127.0.0.2"))
    port = servers[0].address.rpartition(":")[2]
    path = tmp_path / "cases.jsonl"
    expected = many_hand_cases(path, seed=8, copies=20)
    out = tmp_path / "verdicts.jsonl"
    with DnsStub({NAME: ["127.0.0.1", "127.0.0.2"]}) as dns:
        target = f"dns://127.0.0.1:{dns.port}/{NAME}:{port}"
        result = run_batch(path, "-o", out, "--target", target, "--jobs", "2")
        assert (NAME, 1) in dns.questions  # gRPC asked our DNS server, not the system's
    assert result.returncode == 0, result.stderr
    assert_verdicts(out, expected)
    assert_both_judged(servers[0], servers[1], len(expected))


@pytest.mark.skipif(not c_ares_resolver(), reason="GRPC_DNS_RESOLVER=native takes no DNS server in the target")
def test_batch_through_a_dns_name_that_does_not_resolve_exits_4(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    many_hand_cases(path, seed=9, copies=1)
    with DnsStub({}) as dns:
        target = f"dns://127.0.0.1:{dns.port}/no-such.{NAME}:50051"
        result = run_batch(path, "-o", tmp_path / "out.jsonl", "--target", target, timeout=90)
    assert result.returncode == 4, result.stderr
    assert f"no referee server answers at {target}" in result.stderr


def solved(server: ServerProcess) -> int:
    """The SolveHand calls ``server`` has logged."""
    return sum(
        1 for line in list(server.lines) if line.startswith("{") and json.loads(line).get("method") == "SolveHand"
    )


@pytest.mark.skipif(not c_ares_resolver(), reason="GRPC_DNS_RESOLVER=native takes no DNS server in the target")
@pytest.mark.skipif(not bindable("127.0.0.2"), reason="127.0.0.2 is not a loopback address here")
@pytest.mark.parametrize("max_age", ["1", None], ids=["max-connection-age-1s", "default-age"])
def test_a_connection_age_makes_clients_find_a_replica_that_started_after_them(
    servers: list[ServerProcess], max_age: str | None
) -> None:
    options = ("--max-connection-age", max_age, "--max-connection-age-grace", "1") if max_age else ()
    with DnsStub({NAME: ["127.0.0.1"]}) as dns:
        servers.extend(servers_on("127.0.0.1", options=options))
        port = servers[0].address.rpartition(":")[2]
        channel_options = [
            ("grpc.lb_policy_name", "round_robin"),
            ("grpc.dns_min_time_between_resolutions_ms", 200),  # gRPC's default waits 30 s
        ]
        with grpc.insecure_channel(f"dns://127.0.0.1:{dns.port}/{NAME}:{port}", options=channel_options) as chan:
            stub = referee_pb2_grpc.RefereeServiceStub(chan)

            def call() -> None:
                stub.SolveHand(pb.SolveHandRequest(cards=["AH", "2H", "3H"]), timeout=20, wait_for_ready=True)

            call()
            # A second replica appears behind the name, after the client has connected.
            servers.extend(servers_on("127.0.0.2", port=port, options=options))
            dns.set(NAME, ["127.0.0.1", "127.0.0.2"])
            deadline = time.monotonic() + (30 if max_age else 4)
            while solved(servers[1]) == 0 and time.monotonic() < deadline:
                call()
                time.sleep(0.05)
            time.sleep(0.5)  # the last call's log line
    if max_age:
        # The first connection aged out, the client asked DNS again and now spreads its calls.
        assert solved(servers[1]) > 0, "the client never reached the new replica"
    else:
        # With the default age (300 s) the client keeps the one connection it has.
        assert solved(servers[1]) == 0 and solved(servers[0]) > 10
