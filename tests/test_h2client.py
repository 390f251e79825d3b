"""The benchmark's lean HTTP/2 load generator (``bench.h2client``) against a real server."""

from __future__ import annotations

import socket
import threading
import time

import grpc
from hpack import Decoder

from bench import h2client
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

METHOD = "/remigio.referee.v1.RefereeService/SolveHand"
HANDS = (
    "AH 2H 3H 5C 5D 5S 9S 10S JS QS",
    "JK 4D 5D 7C 7H KS KD 2C 9H 10H",
    "AS AS AD 2D 3D QH QC JK JK 8C",
    "10C JC QC KC AC 3S 3S 3H 6D 6D",
)


def _requests() -> list[bytes]:
    return [pb.SolveHandRequest(cards=hand.split()).SerializeToString() for hand in HANDS]


def _run(target: str, pool: list[bytes], clients: int, seconds: float, period: float = 0.0, timeout: float = 10.0):
    start = time.monotonic() + 0.02
    made = [h2client.Client(first, clients, start) for first in range(clients)]
    connections = h2client.open_connections(target, METHOD, made, timeout)
    try:
        h2client.run(connections, pool, start + seconds, period, timeout)
    finally:
        h2client.close(connections)
    for client in made:
        h2client.settle(client)
    return made


def test_the_header_block_decodes_to_a_grpc_request() -> None:
    fields = Decoder().decode(h2client.header_block("127.0.0.1:5", METHOD, 2.5), raw=False)
    assert fields == [
        (":method", "POST"), (":scheme", "http"), (":path", METHOD), (":authority", "127.0.0.1:5"),
        ("content-type", "application/grpc"), ("te", "trailers"), ("grpc-timeout", "2500m"),
    ]


def test_closed_loops_get_the_replies_a_grpc_client_gets(server_address: str, stub: referee_pb2_grpc.RefereeServiceStub) -> None:
    pool = _requests()
    expected = [stub.SolveHand(pb.SolveHandRequest.FromString(request)) for request in pool]
    clients = _run(server_address, pool, clients=3, seconds=0.3)
    for client in clients:
        assert client.sent == len(client.calls) >= 2
        assert client.calls[0].metadata["x-referee-pid"].isdigit()
        for n, call in enumerate(client.calls):
            assert (call.status, call.failure) == (0, "")
            assert call.ended >= call.began
            (reply,) = call.replies()
            assert pb.SolveHandResponse.FromString(reply) == expected[(client.first + n * client.step) % len(pool)]


def test_a_refused_call_carries_its_status_and_message(server_address: str) -> None:
    pool = [pb.SolveHandRequest(cards=["AH", "XX", "3H"]).SerializeToString()]
    (client,) = _run(server_address, pool, clients=1, seconds=0.05)
    call = client.calls[0]
    assert call.status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "XX" in call.details and call.replies() == []


def test_paced_calls_are_timed_from_when_they_were_due(server_address: str) -> None:
    (client,) = _run(server_address, _requests(), clients=1, seconds=0.275, period=0.05)
    began = [call.began for call in client.calls]
    assert len(began) == 6
    assert all(abs(b - a - 0.05) < 1e-9 for a, b in zip(began, began[1:]))
    assert all(call.status == 0 for call in client.calls)


def test_a_call_with_no_reply_ends_at_its_deadline() -> None:
    # A listener that takes the connection and never answers.
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True)
    accepting.start()
    try:
        host, port = silent.getsockname()
        started = time.monotonic()
        (client,) = _run(f"{host}:{port}", _requests(), clients=1, seconds=0.01, timeout=0.2)
        assert time.monotonic() - started < 2
        (call,) = client.calls
        assert call.failure.startswith("DEADLINE_EXCEEDED") and call.status is None
        assert 0.19 < call.ended - call.began < 1
    finally:
        for sock in held:
            sock.close()
        silent.close()
