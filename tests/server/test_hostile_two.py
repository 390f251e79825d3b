"""Hostile clients, second round, against real server processes: each attack, and the bound it meets.

- refused requests with huge repeated fields leave no memory behind (every RPC with such a field);
- one address holding a thousand silent connections does not keep fresh clients out;
- a client's method path cannot forge or flood log lines;
- a key removed from the key file ends the streams it opened;
- rates are bounded, key files are read again when their text changes, reflection is metered,
  wrong keys are throttled per address.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from protobytes import varint
from servers import METRICS, ROOT, ServerProcess, server_env

from bench.stall import Staller
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.access import digest_of
from referee.server.access.refusals import REFUSAL_LINES_BURST, REFUSAL_LINES_PER_SECOND

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]

SERVICE = "/remigio.referee.v1.RefereeService"
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()  # 33 points


def _repeated(number: int, code: bytes, count: int) -> bytes:
    """``count`` elements of a repeated string field ``number`` holding ``code``."""
    element = varint(number << 3 | 2) + varint(len(code)) + code
    return element * count


def _nested(number: int, inner: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(inner)) + inner


# About 800 KB each: a request over a count limit, for every RPC with a big repeated field.
_CARDS = _repeated(1, b"AC", 200_000)
OVERSIZED = {
    "SolveHand cards": ("SolveHand", _repeated(1, b"AC", 200_000)),
    "CheckClose cards": ("CheckClose", _repeated(1, b"AC", 200_000)),
    # ScoreDealRequest.deal (1) -> Deal.discard_pile (4) -> Pile.cards (1)
    "ScoreDeal discard pile": ("ScoreDeal", _nested(1, _nested(4, _CARDS))),
    # ScoreDealRequest.deal (1) -> Deal.players (1), each with one card (Player.cards = 2)
    "ScoreDeal players": ("ScoreDeal", _nested(1, _repeated(1, _repeated(2, b"AC", 1), 130_000))),
    # ScoreDealRequest.deal (1) -> Deal.eliminated (6)
    "ScoreDeal eliminated": ("ScoreDeal", _nested(1, _repeated(6, b"ann", 160_000))),
}


def _refuse_many(address: str, method: str, request: bytes, count: int) -> None:
    """Send ``request`` ``count`` times, 8 at a time; each must be INVALID_ARGUMENT."""
    options = [("grpc.max_send_message_length", 4 << 20)]
    with grpc.insecure_channel(address, options=options) as channel:
        call = channel.unary_unary(f"{SERVICE}/{method}")
        sent = 0
        while sent < count:
            futures = [call.future(request, timeout=30) for _ in range(min(8, count - sent))]
            for future in futures:
                assert future.code() == grpc.StatusCode.INVALID_ARGUMENT, future.details()
            sent += len(futures)


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerProcess]:
    server = ServerProcess("--port", "0", "--log-format", "json", "--dispute-jobs", "1").listening()
    yield server
    server.kill()


@pytest.mark.parametrize("case", OVERSIZED.values(), ids=OVERSIZED.keys())
def test_refused_requests_with_huge_repeated_fields_leave_no_memory_behind(
    plain: ServerProcess, case: tuple[str, bytes]
) -> None:
    method, request = case
    assert 700_000 < len(request) < 1 << 20
    _refuse_many(plain.address, method, request, 50)  # the process's pools are warm
    before = plain.rss_mb()
    _refuse_many(plain.address, method, request, 600)  # 480 MB sent; the leak kept ~400 KB a call
    grown = plain.rss_mb() - before
    print(f"{method}: {grown:+.1f} MB over 600 refused requests of {len(request):,} bytes")
    assert grown < 50


@pytest.mark.slow
def test_5000_refused_800_kb_requests_grow_the_server_by_less_than_50_mb(plain: ServerProcess) -> None:
    method, request = OVERSIZED["SolveHand cards"]
    _refuse_many(plain.address, method, request, 50)
    before = plain.rss_mb()
    _refuse_many(plain.address, method, request, 5_000)
    assert plain.rss_mb() - before < 50


def test_the_refusal_of_an_over_count_field_names_the_field_and_its_count(plain: ServerProcess) -> None:
    with grpc.insecure_channel(plain.address, options=[("grpc.max_send_message_length", 4 << 20)]) as channel:
        call = channel.unary_unary(f"{SERVICE}/ScoreDeal")
        with pytest.raises(grpc.RpcError) as caught:
            call(OVERSIZED["ScoreDeal discard pile"][1], timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith("deal.discard_pile.cards: at most 216 cards")


# Silent connections --------------------------------------------------------------------------


def test_fresh_clients_are_served_while_one_address_holds_1100_silent_connections(tmp_path: Path) -> None:
    server = ServerProcess(
        "--port", "0", "--metrics-port", "0", "--runtime-dir", str(tmp_path), "--dispute-jobs", "1"
    )  # fmt: skip
    metrics_url = server.wait_for(METRICS).group(1)
    server.listening()
    host, port = server.address.rsplit(":", 1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def attack() -> None:
        """Keep 1,100 silent connections open from 127.0.0.9, opening new ones as they are closed."""
        while not stop.is_set():
            while len(held) < 1_100 and not stop.is_set():
                sock = socket.socket()
                sock.bind(("127.0.0.9", 0))
                try:
                    sock.connect((host, int(port)))
                    sock.setblocking(False)
                    held.append(sock)
                except OSError:
                    sock.close()
                    time.sleep(0.01)
            for sock in list(held):
                try:
                    if sock.recv(65536) == b"":
                        raise OSError("closed")
                except BlockingIOError:
                    pass
                except OSError:
                    held.remove(sock)
                    sock.close()
            time.sleep(0.05)

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        time.sleep(2)
        served = 0
        for _ in range(20):
            with grpc.insecure_channel(server.address) as channel:
                stub = referee_pb2_grpc.RefereeServiceStub(channel)
                try:
                    served += stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5).linking.points == 33
                except grpc.RpcError:
                    pass
        with __import__("urllib.request").request.urlopen(metrics_url, timeout=10) as reply:
            text = reply.read().decode()
    finally:
        stop.set()
        attacker.join(10)
        for sock in held:
            sock.close()
        server.kill()
    assert served == 20
    refused = re.search(r'referee_connections_refused_total\{reason="per_peer"\} (\S+)', text)
    assert refused is not None and float(refused.group(1)) >= 1_000 - 64
    lines = [line for line in server.lines if "over a client's cap of 64 (127.0.0.9 held more)" in line]
    assert lines, "the refusals are logged"


def test_a_silent_connection_is_closed_after_the_handshake_timeout() -> None:
    server = ServerProcess("--port", "0", "--handshake-timeout", "1", "--dispute-jobs", "1").listening()
    try:
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            started = time.monotonic()
            while sock.recv(65536):
                pass
            closed_after = time.monotonic() - started
    finally:
        server.kill()
    assert 0.5 < closed_after < 5


# Log lines ------------------------------------------------------------------------------------


def _keyed_server(tmp_path: Path, lines: str, *more: str) -> tuple[ServerProcess, Path]:
    keys = tmp_path / "keys.txt"
    keys.write_text(lines)
    server = ServerProcess("--port", "0", "--api-keys", str(keys), "--dispute-jobs", "1", *more).listening()
    return server, keys


ALICE = "alice-key-0123456789-abcdefghijklmnop"
BOB = "bob-key-0123456789-abcdefghijklmnopqr"


def test_a_method_path_cannot_forge_or_flood_log_lines(tmp_path: Path) -> None:
    server, _ = _keyed_server(tmp_path, f"alice {digest_of(ALICE).hex()}\n")
    try:
        forged = (
            f"{SERVICE}/SolveHand\n2026-12-01 00:00:00,000 INFO pid=1 referee.service: SolveHand OK 1.00ms key=alice"
        )
        staller = Staller(server.address)
        try:
            staller.wait_ended([staller.call(forged, b"")], timeout=10)
            streams = [staller.call("/" + "x" * 8_000, b"") for _ in range(300)]
            staller.wait_ended(streams, timeout=20)
        finally:
            staller.close()
        time.sleep(0.5)
    finally:
        server.kill()
    assert not [line for line in server.lines if line.startswith("2026-12-01 00:00:00")], "a forged line"
    refusals = [line for line in server.lines if "refused" in line]
    assert refusals and all(len(line) < 400 for line in refusals)
    # The path is quoted, cut short and escaped: its newline never reaches the log.
    assert any("refused unknown method '/remigio.referee.v1.RefereeServi\\u2026'" in line for line in refusals)
    # 300 refusals of 8 KB paths: a few dozen short lines, the rest counted.
    assert len(refusals) < 100
    assert sum(len(line) for line in server.lines) < 60_000


# Keys -------------------------------------------------------------------------------------------


def test_a_removed_key_ends_its_open_stream_within_a_second(tmp_path: Path) -> None:
    server, keys = _keyed_server(
        tmp_path, f"alice {digest_of(ALICE).hex()}\nbob {digest_of(BOB).hex()}\n", "--stream-idle-timeout", "60"
    )
    release = threading.Event()

    def cases() -> Iterator[pb.CheckDisputesRequest]:
        yield pb.CheckDisputesRequest(id="1", hand=pb.HandDispute(cards=HAND, claimed_points=33))
        release.wait(30)  # the stream stays open, sending nothing more

    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            stream = stub.CheckDisputes(cases(), timeout=30, metadata=(("authorization", f"Bearer {ALICE}"),))
            assert next(stream).id == "1"
            keys.write_text(f"bob {digest_of(BOB).hex()}\n")  # alice is removed
            removed = time.monotonic()
            with pytest.raises(grpc.RpcError) as caught:
                next(stream)
            ended_after = time.monotonic() - removed
            release.set()
            # bob's calls go on
            reply = stub.SolveHand(
                pb.SolveHandRequest(cards=HAND), timeout=10, metadata=(("authorization", f"Bearer {BOB}"),)
            )
            assert reply.linking.points == 33
    finally:
        release.set()
        server.kill()
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert ended_after < 1.0 + 0.5  # the file watch and the stream's check, with a busy machine's margin


def test_a_key_file_rewritten_with_the_same_size_and_time_is_read_again(tmp_path: Path) -> None:
    # Two keys of one length, so the file's size does not change.
    carol, dave = "c" * 43, "d" * 43
    server, keys = _keyed_server(tmp_path, f"partner {digest_of(carol).hex()}\n")
    try:
        stamp = keys.stat()
        keys.write_text(f"partner {digest_of(dave).hex()}\n")
        os.utime(keys, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert keys.stat().st_size == stamp.st_size
        server.wait_for(re.compile(r"API keys reloaded"), timeout=10)
        with grpc.insecure_channel(server.address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            reply = stub.SolveHand(
                pb.SolveHandRequest(cards=HAND), timeout=10, metadata=(("authorization", f"Bearer {dave}"),)
            )
            assert reply.linking.points == 33
    finally:
        server.kill()


def test_a_rate_too_small_to_mean_anything_is_refused_by_keygen_and_in_a_key_file(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "referee.cli", "keygen", "partner", "--rate", "1e-300"]
    done = subprocess.run(command, cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "a rate is 0.001 to 1e+06 calls per second" in done.stderr
    keys = tmp_path / "keys.txt"
    keys.write_text(f"partner {digest_of(ALICE).hex()} 1e-300\n")
    server = ServerProcess("--port", "0", "--api-keys", str(keys))
    try:
        assert server.proc.wait(timeout=60) == 1
    finally:
        server.kill()
    assert any("a rate is 0.001 to 1e+06" in line for line in server.lines)


def test_reflection_calls_count_against_the_key_s_quota(tmp_path: Path) -> None:
    server, _ = _keyed_server(tmp_path, f"bob {digest_of(BOB).hex()} 2\n")
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            codes = []
            for _ in range(4):
                request = reflection_pb2.ServerReflectionRequest(list_services="")
                try:
                    list(
                        stub.ServerReflectionInfo(
                            iter([request]), timeout=10, metadata=(("authorization", f"Bearer {BOB}"),)
                        )
                    )
                    codes.append("OK")
                except grpc.RpcError as error:
                    codes.append(error.code().name)
    finally:
        server.kill()
    assert codes[:2] == ["OK", "OK"] and "RESOURCE_EXHAUSTED" in codes[2:]


def test_wrong_keys_from_one_address_are_throttled_and_not_each_logged(tmp_path: Path) -> None:
    server, _ = _keyed_server(tmp_path, f"alice {digest_of(ALICE).hex()}\n")
    try:
        codes: dict[str, int] = {}
        with grpc.insecure_channel(server.address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            started = time.monotonic()
            for n in range(400):
                try:
                    stub.SolveHand(
                        pb.SolveHandRequest(cards=HAND), timeout=10, metadata=(("authorization", f"Bearer guess{n}"),)
                    )
                except grpc.RpcError as error:
                    codes[error.code().name] = codes.get(error.code().name, 0) + 1
            took = time.monotonic() - started
            # The right key still works from the same address.
            reply = stub.SolveHand(
                pb.SolveHandRequest(cards=HAND), timeout=10, metadata=(("authorization", f"Bearer {ALICE}"),)
            )
            assert reply.linking.points == 33
        time.sleep(0.3)
    finally:
        server.kill()
    assert codes.get("UNAUTHENTICATED", 0) >= 100 and codes.get("RESOURCE_EXHAUSTED", 0) >= 100, codes
    # The log's budget: a burst, then so many lines a second (a busy machine takes longer over the
    # 400 calls, and is allowed the lines of that time).
    logged = len([line for line in server.lines if "refused" in line])
    assert logged <= REFUSAL_LINES_BURST + REFUSAL_LINES_PER_SECOND * took + 1, (logged, took)
    assert logged < 400


def test_the_refusal_counts_stay_in_the_json_log_as_fields(tmp_path: Path) -> None:
    server, _ = _keyed_server(tmp_path, f"alice {digest_of(ALICE).hex()}\n", "--log-format", "json")
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            with pytest.raises(grpc.RpcError):
                stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10)
        time.sleep(0.3)
    finally:
        server.kill()
    refusals = [json.loads(line) for line in server.lines if line.startswith("{") and "refused" in line]
    assert [line["message"] for line in refusals] == [f"refused {SERVICE}/SolveHand: unauthenticated key=-"]
