"""Hostile input through the gateway: oversized bodies, malformed JSON, slow clients, many
connections. Envoy and the referee both stay up, every refusal is JSON, and health stays fast."""

from __future__ import annotations

import json
import os
import random
import socket
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from gateways import Gateway

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

HAND = ["AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK"]
HEALTH_SECONDS = 1.0  # what "fast" means for /healthz under attack, on a busy shared test machine


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway with short timeouts, so that slow clients are cut within the test."""
    started = Gateway(tmp_path_factory.mktemp("hostile") / "gw", headers_timeout="1s", idle_timeout="2s")
    try:
        yield started
    finally:
        started.stop()


def _healthy_and_serving(gateway: Gateway) -> None:
    assert gateway.alive(), "Envoy or the referee died"
    started = time.monotonic()
    reply = httpx.get(gateway.url + "/healthz", timeout=5)
    took = time.monotonic() - started
    assert reply.status_code == 200 and reply.json() == {"status": "SERVING"}
    assert took < HEALTH_SECONDS, f"/healthz took {took:.3f} s"
    solved = httpx.post(gateway.url + "/v1/hands:solve", json={"cards": HAND}, timeout=30)
    assert solved.status_code == 200 and solved.json()["linking"]["points"] == 9


def _status_json(reply: httpx.Response) -> dict[str, object]:
    assert reply.headers.get("content-type", "").startswith("application/json"), (reply.status_code, reply.text[:200])
    body: dict[str, object] = reply.json()
    assert isinstance(body.get("code"), int) and isinstance(body.get("message"), str), body
    return body


def test_oversized_bodies_are_refused_before_the_referee(gateway: Gateway) -> None:
    huge = b'{"cards": ["' + b"A" * (8 << 20) + b'"]}'
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            reply = client.post(
                gateway.url + "/v1/hands:solve", content=huge, headers={"content-type": "application/json"}
            )
            assert reply.status_code == 413 and _status_json(reply)["code"] == 8

        def chunks() -> Iterator[bytes]:  # no content-length: the size is only known as it comes
            yield b'{"cards": ["'
            for _ in range(64):
                yield b"A" * 65536
            yield b'"]}'

        reply = client.post(
            gateway.url + "/v1/disputes:check", content=chunks(), headers={"content-type": "application/json"}
        )
        assert reply.status_code == 413 and _status_json(reply)["code"] == 8
    # A gRPC message over the referee's limit is the referee's own RESOURCE_EXHAUSTED.
    with grpc.insecure_channel(f"127.0.0.1:{gateway.port}") as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        with pytest.raises(grpc.RpcError) as failed:
            stub.SolveHand(pb.SolveHandRequest(cards=["A" * (2 << 20)]), timeout=30)
        assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    _healthy_and_serving(gateway)
    assert not any(
        call["method"] == "SolveHand" and call["code"] != "OK" and "A" * 100 in json.dumps(call)
        for call in gateway.logged_calls()
    )


def _garbage(rng: random.Random) -> bytes:
    kinds = [
        lambda: os.urandom(rng.randrange(1, 2000)),
        lambda: b'{"cards": ' + b"[" * rng.randrange(1, 20000),
        lambda: b'{"cards": ["AH"], "rules": {"decks": ' + str(10 ** rng.randrange(10, 400)).encode() + b"}}",
        lambda: b'{"cards": ["\xff\xfe\xfd"]}',
        lambda: b'{"cards": ["AH"]' + b"}" * rng.randrange(1, 100),
        lambda: json.dumps({"cards": HAND, "rules": {"engine": "ENGINE_" + "X" * rng.randrange(1, 5000)}}).encode(),
        lambda: b"[" + b"{}," * rng.randrange(1, 100) + b"{}]",
        lambda: b'"just a string"',
        lambda: b"",
    ]
    return rng.choice(kinds)()


@pytest.mark.alone
def test_malformed_json_gets_json_errors_and_harms_nothing(gateway: Gateway) -> None:
    rng = random.Random(7)
    statuses: dict[int, int] = {}
    with httpx.Client(timeout=30) as client:
        for _ in range(120):
            path = rng.choice(["/v1/hands:solve", "/v1/closes:check", "/v1/deals:score", "/v1/disputes:check"])
            reply = client.post(gateway.url + path, content=_garbage(rng), headers={"content-type": "application/json"})
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            assert reply.status_code < 500, (reply.status_code, reply.text[:300])
            if reply.status_code != 200:  # "[{}, ...]" is a batch of empty cases: MALFORMED verdicts
                _status_json(reply)
    assert statuses.get(400, 0) > 70, statuses
    _healthy_and_serving(gateway)


def _open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(True)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the gateway closes ``sock`` (after any reply it sends) within ``seconds``."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return False


@pytest.mark.alone
def test_slow_clients_are_cut_and_hold_nothing(gateway: Gateway) -> None:
    headers_only = [_open(gateway.port) for _ in range(40)]
    for sock in headers_only:
        sock.sendall(b"POST /v1/hands:solve HTTP/1.1\r\nHost: referee\r\n")  # and never the rest
    slow_bodies = [_open(gateway.port) for _ in range(20)]
    for sock in slow_bodies:
        sock.sendall(b"POST /v1/hands:solve HTTP/1.1\r\nHost: referee\r\ncontent-type: application/json\r\n"
                     b"content-length: 1000\r\n\r\n{\"cards\": [")  # fmt: skip
    _healthy_and_serving(gateway)  # while they hang
    started = time.monotonic()
    assert all(_closed_within(sock, 8) for sock in headers_only + slow_bodies)
    assert time.monotonic() - started < 10
    for sock in headers_only + slow_bodies:
        sock.close()
    _healthy_and_serving(gateway)


@pytest.mark.alone
def test_many_connections_leave_health_fast_and_the_referee_unbothered(gateway: Gateway) -> None:
    idle = []
    try:
        for _ in range(600):
            idle.append(_open(gateway.port))
        _healthy_and_serving(gateway)
        # The referee sees Envoy's few upstream connections, not the clients'.
        sockets = [
            fd
            for fd in os.listdir(f"/proc/{gateway.referee.proc.pid}/fd")
            if "socket" in os.readlink(f"/proc/{gateway.referee.proc.pid}/fd/{fd}")
        ]
        assert len(sockets) < 100, len(sockets)
    finally:
        for sock in idle:
            sock.close()
    _healthy_and_serving(gateway)


def test_a_referee_that_is_gone_is_a_json_503_and_health_says_so(gateway: Gateway) -> None:
    """The last test of the module: it kills the module's referee."""
    gateway.referee.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        health = httpx.get(gateway.url + "/healthz", timeout=5)
        if health.status_code == 503:
            break
        time.sleep(0.1)
    assert health.status_code == 503
    assert health.json() == {"code": 14, "message": "the referee is not serving", "status": "NOT_SERVING"}
    reply = httpx.post(gateway.url + "/v1/hands:solve", json={"cards": HAND}, timeout=10)
    assert reply.status_code == 503 and _status_json(reply)["code"] == 14
    assert gateway.envoy.poll() is None
