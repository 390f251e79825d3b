"""The benchmark's lean HTTP/2 load generator (``bench.h2client``) against a real server."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest
from hpack import Decoder, Encoder
from protobytes import unknown_field

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
    made = [h2client.Client(first, clients, 0.0) for first in range(clients)]
    h2client.drive(target, METHOD, made, pool, seconds, period, timeout)
    return made


def test_the_header_block_decodes_to_a_grpc_request() -> None:
    fields = Decoder().decode(h2client.header_block("127.0.0.1:5", METHOD, 2.5), raw=False)
    assert fields == [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", METHOD),
        (":authority", "127.0.0.1:5"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", "2500m"),
    ]


def test_closed_loops_get_the_replies_a_grpc_client_gets(
    server_address: str, stub: referee_pb2_grpc.RefereeServiceStub
) -> None:
    pool = _requests()
    expected = [stub.SolveHand(pb.SolveHandRequest.FromString(request)) for request in pool]
    clients = _run(server_address, pool, clients=3, seconds=1.0)
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
    (client,) = _run(server_address, pool, clients=1, seconds=0.2)
    call = client.calls[0]
    assert call.status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "XX" in call.details and call.replies() == []


def test_a_request_larger_than_a_frame_is_split_and_answered(
    server_address: str, stub: referee_pb2_grpc.RefereeServiceStub
) -> None:
    # 40 KB in a field the server does not know (protobuf keeps and ignores it): more than the
    # 16 KiB frame an HTTP/2 peer takes before its SETTINGS say otherwise.
    request = pb.SolveHandRequest(cards=HANDS[0].split()).SerializeToString() + unknown_field(40_000)
    assert len(request) > 2 * h2client.DEFAULT_MAX_FRAME
    (client,) = _run(server_address, [request], clients=1, seconds=0.2)
    expected = stub.SolveHand(pb.SolveHandRequest.FromString(request))
    assert client.calls
    for call in client.calls:
        assert (call.status, call.failure) == (0, "")
        assert call.replies() == [expected.SerializeToString()]


def test_data_frames_follow_the_servers_max_frame_size() -> None:
    # A real socket pair: the client's side a connection, the other the server's, read raw.
    ours, theirs = socket.socketpair()
    try:
        conn = h2client.Connection(h2client.Client(0, 1, 0.0), ours, b"")
        request = bytes(range(256)) * 200  # 51,200 bytes
        conn.send_call(request, 0.0)
        before = _frames(theirs)
        allowed = 20_000
        settings = (h2client.SETTINGS_MAX_FRAME_SIZE).to_bytes(2, "big") + allowed.to_bytes(4, "big")
        conn.feed(h2client.frame(h2client.SETTINGS, 0, 0, settings), 0.0)
        window = h2client.frame(h2client.WINDOW_UPDATE, 0, 0, len(request).to_bytes(4, "big"))
        conn.feed(window, 0.0)  # the first call used most of the connection's window
        conn.stream = -1  # the first call is not answered; the next one goes on a new stream
        conn.send_call(request, 0.0)
        after = _frames(theirs)
    finally:
        ours.close()
        theirs.close()
    body = h2client.grpc_message(request)
    for frames, most in ((before, h2client.DEFAULT_MAX_FRAME), (after, allowed)):
        data = [(flags, payload) for kind, flags, payload in frames if kind == h2client.DATA]
        assert len(data) == -(-len(body) // most)  # as few frames as the limit allows
        assert all(len(payload) <= most for _, payload in data)
        assert [flags for flags, _ in data] == [0] * (len(data) - 1) + [h2client.END_STREAM]
        assert b"".join(payload for _, payload in data) == body


def _frames(sock: socket.socket) -> list[tuple[int, int, bytes]]:
    """The frames waiting on ``sock`` (the sender's sendall has returned): (type, flags, payload) each."""
    sock.setblocking(False)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    frames, at = [], 0
    while at < len(data):
        length, kind, flags = int.from_bytes(data[at : at + 3], "big"), data[at + 3], data[at + 4]
        frames.append((kind, flags, data[at + 9 : at + 9 + length]))
        at += 9 + length
    return frames


def test_paced_calls_are_timed_from_when_they_were_due(server_address: str) -> None:
    (client,) = _run(server_address, _requests(), clients=1, seconds=0.275, period=0.05)
    began = [call.began for call in client.calls]
    assert len(began) == 6
    assert all(abs(b - a - 0.05) < 1e-9 for a, b in zip(began, began[1:]))
    assert all(call.status == 0 for call in client.calls)


class _Peer:
    """A scripted server: it takes one connection, reads the client's preface, then runs ``script``."""

    def __init__(self, script) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()

    def _serve(self, script) -> None:
        sock = self.listener.accept()[0]
        self.held.append(sock)
        got = b""
        while len(got) < len(h2client.PREFACE):
            got += sock.recv(1 << 16)
        script(sock)

    @property
    def target(self) -> str:
        host, port = self.listener.getsockname()
        return f"{host}:{port}"

    def close(self) -> None:
        for sock in self.held:
            sock.close()
        self.listener.close()


def _goaway(last_stream: int) -> bytes:
    return h2client.frame(h2client.GOAWAY, 0, 0, last_stream.to_bytes(4, "big") + bytes(4))


def test_a_call_with_no_reply_ends_at_its_deadline() -> None:
    peer = _Peer(lambda sock: None)  # takes the connection and never answers
    try:
        started = time.monotonic()
        # Calls start for 0.1 s, and the first lasts its whole deadline of 0.2 s: it is the only one.
        (client,) = _run(peer.target, _requests(), clients=1, seconds=0.1, timeout=0.2)
        assert time.monotonic() - started < 5  # the run does not wait past the deadline
        (call,) = client.calls
        assert call.failure.startswith("DEADLINE_EXCEEDED") and call.status is None
        assert 0.19 < call.ended - call.began < 1
    finally:
        peer.close()


def test_goaway_fails_a_call_the_server_never_took_and_ends_the_client() -> None:
    peer = _Peer(lambda sock: (time.sleep(0.05), sock.sendall(_goaway(0))))
    try:
        started = time.monotonic()
        (client,) = _run(peer.target, _requests(), clients=1, seconds=5, timeout=5)
        assert time.monotonic() - started < 2  # nothing left to do: the run ends, it does not wait
        (call,) = client.calls  # no call after the GOAWAY, though the client had 5 s left
        assert call.failure == "GOAWAY from the server before it took the call"
    finally:
        peer.close()


def test_a_call_the_server_took_before_its_goaway_still_ends_normally() -> None:
    reply = pb.SolveHandResponse(linking=pb.Linking(points=7)).SerializeToString()

    def script(sock: socket.socket) -> None:
        time.sleep(0.05)  # the call's frames have come by now
        encoder = Encoder()
        head = encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        tail = encoder.encode([("grpc-status", "0"), ("x-referee-pid", "42")])
        body = h2client.grpc_message(reply)
        sock.sendall(
            _goaway(1)
            + h2client.frame(h2client.HEADERS, h2client.END_HEADERS, 1, head)
            + h2client.frame(h2client.DATA, 0, 1, body)
            + h2client.frame(h2client.HEADERS, h2client.END_HEADERS | h2client.END_STREAM, 1, tail)
        )

    peer = _Peer(script)
    try:
        (client,) = _run(peer.target, _requests(), clients=1, seconds=5, timeout=5)
        (call,) = client.calls
        assert (call.status, call.failure, call.metadata["x-referee-pid"]) == (0, "", "42")
        assert call.replies() == [reply]
    finally:
        peer.close()


def test_a_lost_connection_fails_the_call_in_flight() -> None:
    peer = _Peer(lambda sock: (time.sleep(0.05), sock.shutdown(socket.SHUT_RDWR)))
    try:
        (client,) = _run(peer.target, _requests(), clients=1, seconds=5, timeout=5)
        (call,) = client.calls
        assert call.failure == "connection closed by the server" and call.ended > call.began
    finally:
        peer.close()


def test_the_benchmark_counts_each_call_as_a_grpc_client_would() -> None:
    from bench.service import h2_result

    def framed(*messages: bytes) -> bytearray:
        return bytearray(b"".join(h2client.grpc_message(m) for m in messages))

    good = pb.SolveHandResponse(linking=pb.Linking(points=3)).SerializeToString()
    client = h2client.Client(0, 1, 0.0)
    client.calls = [
        h2client.Call(1.0, 1.002, framed(good), status=0, metadata={"x-referee-pid": "77"}),
        h2client.Call(2.0, 2.5, failure="DEADLINE_EXCEEDED: no reply within the call's deadline"),
        h2client.Call(3.0, 3.1, failure="connection closed by the server"),
        h2client.Call(4.0, 4.1, status=3, details="cards[1]: not a card code"),
        h2client.Call(5.0, 5.1, framed(good, good), status=0),
        h2client.Call(6.0, 6.1, framed(pb.SolveHandResponse().SerializeToString()), status=0),
    ]
    client.sent = len(client.calls)
    result = h2_result("SolveHand", client)
    assert result.server_pid == "77" and result.sent == 6 and result.last_done == 6.1
    assert result.latencies_ms == pytest.approx([2.0, 100.0])
    assert result.bad_replies == 1  # the reply without a linking
    assert result.errors == {"DEADLINE_EXCEEDED": 1, "UNAVAILABLE": 1, "INVALID_ARGUMENT": 1, "UNKNOWN": 1}
    assert result.first_error.startswith("DEADLINE_EXCEEDED")
