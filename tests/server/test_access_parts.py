"""The access layer's parts on their own: key files, the key ring, bearer metadata, the shared
token buckets (across real forked processes), the refusal status, TLS files and the bind warning."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
import trustme
from google.rpc import error_details_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server import access
from referee.server.access import (
    AccessInterceptor,
    ApiKey,
    KeyFileError,
    KeyRing,
    QuotaExceeded,
    QuotaTable,
    bearer_key,
    digest_of,
    exposure_warning,
    parse_keys,
    quota_status,
)
from referee.server.status import RETRY_PUSHBACK_KEY
from referee.server.tls import ServerCertificates, TlsFileError, TlsFiles, tls_files

ROOT = Path(__file__).resolve().parents[2]
ALICE_KEY = "alice-secret-key"
BOB_KEY = "bob-secret-key"


def _line(name: str, key: str, rate: str = "") -> str:
    return f"{name} {digest_of(key).hex()} {rate}".rstrip()


# Key files ------------------------------------------------------------------------------------


def test_a_key_file_gives_names_digests_and_rates() -> None:
    text = f"# the partners\n\n{_line('alice', ALICE_KEY, '5')}\n   {_line('bob', BOB_KEY)}   \n"
    alice, bob = parse_keys(text)
    assert alice == ApiKey("alice", digest_of(ALICE_KEY), 5.0)
    assert bob == ApiKey("bob", digest_of(BOB_KEY), None)
    assert ApiKey("slow", b"\0" * 32, 0.2).burst == 1.0 and alice.burst == 5.0
    assert parse_keys(alice.line() + "\n" + bob.line()) == (alice, bob)


def test_a_key_line_may_cap_the_key_s_calls_at_once_with_or_without_a_rate() -> None:
    capped = ApiKey("carol", digest_of("k3"), None, 4)
    both = ApiKey("dave", digest_of("k4"), 2.5, 8)
    assert capped.line().split()[2:] == ["-", "4"]
    assert both.line().split()[2:] == ["2.5", "8"]
    assert parse_keys(capped.line() + "\n" + both.line()) == (capped, both)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice", "line 1: want NAME SHA256HEX [CALLS_PER_SECOND|- [CONCURRENCY]], found 1 fields"),
        (f"alice {'A' * 64}", "line 1: the second field of 'alice' is not a SHA-256 in 64 lower-case hex digits"),
        (f"alice {'a' * 63}", "(it has 63 characters)"),
        (f"al ice {'a' * 64}", "line 1: the second field of 'al' is not a SHA-256"),
        (f"al/ice {'a' * 64}", "line 1: a key name is 1 to 64 letters"),
        (f"alice {'a' * 64} 0", "a rate is 0.001 to 1e+06 calls per second, not '0'"),
        (f"alice {'a' * 64} nan", "a rate is 0.001 to 1e+06 calls per second"),
        (f"alice {'a' * 64} 1e-300", "a rate is 0.001 to 1e+06 calls per second, not '1e-300'"),
        (f"alice {'a' * 64} inf", "a rate is 0.001 to 1e+06 calls per second"),
        (f"alice {'a' * 64} 1 0", "a key's concurrency is 1 to 10000 calls, not '0'"),
        (f"alice {'a' * 64} - 2.5", "a key's concurrency is a whole number of calls, not '2.5'"),
        (f"alice {'a' * 64} 1 2 3", "found 5 fields"),
        (f"# c\nalice {'a' * 64}\nalice {'b' * 64}", "line 3: the name 'alice' is taken by an earlier line"),
        (f"alice {'a' * 64}\nbob {'a' * 64}", "line 2: the hash of 'bob' is on an earlier line too"),
    ],
)
def test_a_broken_key_file_names_the_line_and_the_fault(text: str, expected: str) -> None:
    with pytest.raises(KeyFileError, match=None) as caught:
        parse_keys(text, "keys.txt")
    assert expected in str(caught.value)
    assert str(caught.value).startswith("keys.txt line")


def test_a_key_pasted_in_place_of_its_hash_is_never_quoted() -> None:
    with pytest.raises(KeyFileError) as caught:
        parse_keys(f"alice {ALICE_KEY}")
    assert ALICE_KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("metadata", "key"),
    [
        ((("authorization", "Bearer abc"),), "abc"),
        ((("authorization", "bearer   abc "),), "abc"),
        ((("x-other", "1"), ("authorization", "Bearer abc")), "abc"),
        ((), None),
        (None, None),
        ((("authorization", "Basic abc"),), None),
        ((("authorization", "Bearer "),), None),
        ((("authorization", "Bearer"),), None),
        ((("authorization", "Bearer a"), ("authorization", "Bearer b")), None),
        ((("authorization", "Bearer " + "k" * 600),), None),
    ],
)
def test_bearer_metadata(metadata: tuple[tuple[str, str], ...] | None, key: str | None) -> None:
    assert bearer_key(metadata) == key


def test_the_key_ring_finds_keys_by_their_hash_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(_line("alice", ALICE_KEY, "5") + "\n")
    ring = KeyRing(path)
    found = ring.find(ALICE_KEY)
    assert found is not None and found.name == "alice" and found.rate == 5.0
    assert ring.find(digest_of(ALICE_KEY).hex()) is None  # the hash is not the key
    assert ring.find(ALICE_KEY + "x") is None and ring.find("") is None and ring.find(None) is None


def test_a_broken_file_at_start_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot read the key file .*missing"):
        KeyRing(tmp_path / "missing")
    (tmp_path / "bad").write_text("alice nothex\n")
    with pytest.raises(KeyFileError, match="line 1"):
        KeyRing(tmp_path / "bad")


def test_a_broken_reload_keeps_the_keys_and_logs_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "keys"
    path.write_text(_line("alice", ALICE_KEY) + "\n")
    ring = KeyRing(path)
    path.write_text(_line("alice", ALICE_KEY) + "\nbob zzz\n")
    with caplog.at_level(logging.ERROR, logger="referee.access"):
        assert ring.reload() is False
    assert ring.find(ALICE_KEY) is not None
    assert "not reloaded" in caplog.text and "line 2" in caplog.text and "1 keys in force stay" in caplog.text
    path.write_text(_line("bob", BOB_KEY) + "\n")
    assert ring.reload() is True
    assert ring.find(ALICE_KEY) is None and ring.find(BOB_KEY) is not None


def test_the_watch_reloads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(_line("alice", ALICE_KEY) + "\n")
    ring = KeyRing(path)
    ring.watch(interval=0.05)
    try:
        # Replaced the way a Kubernetes secret is: a new file renamed over the old one.
        fresh = tmp_path / "keys.new"
        fresh.write_text(_line("bob", BOB_KEY) + "\n")
        fresh.replace(path)
        deadline = time.monotonic() + 10
        while ring.find(BOB_KEY) is None:
            assert time.monotonic() < deadline, "the changed file was never read again"
            time.sleep(0.02)
        assert ring.find(ALICE_KEY) is None
    finally:
        ring.stop()


def test_keygen_prints_a_key_and_the_line_that_admits_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "keygen", "partner-1", "--rate", "2.5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    key = done.stdout.strip()
    assert len(key) >= 22 and all(c.isalnum() or c in "-_" for c in key)  # >= 128 bits, URL-safe
    (line,) = done.stderr.strip().splitlines()
    (entry,) = parse_keys(line)
    assert entry.name == "partner-1" and entry.rate == 2.5 and entry.digest == digest_of(key)
    assert key not in done.stderr
    again = subprocess.run(
        [sys.executable, "-m", "referee.cli", "keygen", "partner-1"], capture_output=True, text=True, cwd=ROOT
    )
    assert again.stdout.strip() != key


def test_keygen_refuses_a_bad_name() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "keygen", "two words"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2 and "a key name is" in done.stderr and not done.stdout


# Quotas ---------------------------------------------------------------------------------------


def test_a_bucket_gives_its_burst_then_one_call_per_interval() -> None:
    table = QuotaTable(slots=8)
    try:
        assert [table.take("alice", 5, now=100.0) for _ in range(5)] == [0.0] * 5
        assert table.take("alice", 5, now=100.0) == pytest.approx(0.2)
        assert table.take("alice", 5, now=100.1) == pytest.approx(0.1)
        assert table.take("alice", 5, now=100.2) == 0.0
        assert table.take("bob", 5, now=100.2) == 0.0  # a bucket per name
        # A slow rate still has a burst of one call.
        assert table.take("slow", 0.5, now=0.0) == 0.0
        assert table.take("slow", 0.5, now=0.0) == pytest.approx(2.0)
    finally:
        table.close()


def test_a_full_table_gives_the_least_recently_used_slot_away() -> None:
    table = QuotaTable(slots=2)
    try:
        table.take("a", 1, now=1.0)
        table.take("b", 1, now=2.0)
        assert table.take("c", 1, now=2.5) == 0.0  # took a's slot
        assert table.take("b", 1, now=2.5) > 0  # b's bucket is still there, half full
        assert table.take("a", 1, now=2.5) == 0.0  # a starts again with a full bucket
    finally:
        table.close()


def test_forked_processes_share_one_bucket() -> None:
    table = QuotaTable(slots=8)
    try:
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        # A burst of 20 (rate 20, a fixed clock): four processes together get 20 calls, not 80.
        table.take("shared", 20.0, now=50.0)
        workers = [context.Process(target=_take_twenty, args=(table, results)) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        granted = sum(results.get(timeout=5) for _ in workers)
        assert granted == 19  # the parent took the first call
    finally:
        table.close()


def _take_twenty(table: QuotaTable, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    results.put(sum(table.take("shared", 20.0, now=50.0) == 0.0 for _ in range(20)))


def test_a_process_killed_holding_nothing_leaves_the_table_usable() -> None:
    # A worker restarted by the supervisor is forked again from the parent: it finds the
    # buckets the dead one left, and the lock the kernel released with it.
    table = QuotaTable(slots=8)
    try:
        context = multiprocessing.get_context("fork")
        first = context.Process(target=_take_and_die, args=(table,))
        first.start()
        first.join(30)
        assert first.exitcode == -9
        assert table.take("worker", 3.0, now=10.0) > 0  # the dead worker emptied the bucket
    finally:
        table.close()


def _take_and_die(table: QuotaTable) -> None:
    for _ in range(3):
        table.take("worker", 3.0, now=10.0)
    os.kill(os.getpid(), 9)


def test_a_quota_refusal_says_when_to_retry() -> None:
    status = quota_status(QuotaExceeded("alice", 0.25))
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "alice" in status.details and "0.250" in status.details
    trailers = dict(status.trailing_metadata)
    assert trailers[RETRY_PUSHBACK_KEY] == "250"
    decoded = rpc_status.status_pb2.Status.FromString(trailers["grpc-status-details-bin"])  # type: ignore[attr-defined]
    info = error_details_pb2.RetryInfo()
    assert decoded.details[0].Unpack(info)
    assert info.retry_delay.ToNanoseconds() == 250_000_000


# TLS files ------------------------------------------------------------------------------------


def _write_pair(cert: trustme.LeafCert, directory: Path) -> TlsFiles:
    cert.cert_chain_pems[0].write_to_path(directory / "cert.pem")
    cert.private_key_pem.write_to_path(directory / "key.pem")
    return TlsFiles(directory / "cert.pem", directory / "key.pem")


def test_tls_flags_go_together(tmp_path: Path) -> None:
    assert tls_files(None, None, None) is None
    with pytest.raises(TlsFileError, match="--tls-cert and --tls-key go together"):
        tls_files("c.pem", None, None)
    with pytest.raises(TlsFileError, match="--tls-client-ca needs --tls-cert"):
        tls_files(None, None, "ca.pem")


def test_tls_files_that_do_not_load_are_named(tmp_path: Path) -> None:
    ca = trustme.CA()
    files = _write_pair(ca.issue_cert("localhost"), tmp_path)
    files.load()
    with pytest.raises(TlsFileError, match="--tls-cert .*missing"):
        TlsFiles(tmp_path / "missing", files.key).load()
    ca.issue_cert("other").private_key_pem.write_to_path(tmp_path / "other-key.pem")
    with pytest.raises(TlsFileError, match="are not a certificate and its key"):
        TlsFiles(files.cert, tmp_path / "other-key.pem").load()
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(TlsFileError, match="--tls-client-ca .* holds no CA certificate"):
        TlsFiles(files.cert, files.key, tmp_path / "ca.pem").load()


def test_certificates_follow_their_files_and_a_bad_pair_keeps_the_old(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = trustme.CA()
    files = _write_pair(ca.issue_cert("localhost"), tmp_path)
    certificates = ServerCertificates(files, check_seconds=0)
    assert certificates.fetch() is None  # unchanged
    # Half a rotation: a new certificate beside the old key.
    fresh = ca.issue_cert("localhost")
    fresh.cert_chain_pems[0].write_to_path(files.cert)
    with caplog.at_level(logging.ERROR, logger="referee.access"):
        assert certificates.fetch() is None
    assert "do not load" in caplog.text
    fresh.private_key_pem.write_to_path(files.key)
    assert certificates.fetch() is not None
    assert certificates.fetch() is None


# Safe defaults --------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_binds_need_no_warning(host: str) -> None:
    assert exposure_warning(host, 50051, tls=False, keys=False) is None


def test_open_binds_say_what_is_exposed() -> None:
    warning = exposure_warning("0.0.0.0", 50051, tls=False, keys=False)
    assert warning is not None and "without TLS or API keys" in warning and "anyone" in warning
    plain = exposure_warning("10.0.0.5", 50051, tls=False, keys=True)
    assert plain is not None and "plain text" in plain
    assert exposure_warning("0.0.0.0", 50051, tls=True, keys=True) is None


# The interceptor on a grpc.aio server ---------------------------------------------------------


class _Echo(referee_pb2_grpc.RefereeServiceServicer):
    """Answers at once, and records the key name each call saw."""

    def __init__(self) -> None:
        self.names: list[str] = []

    async def SolveHand(self, request: pb.SolveHandRequest, context: object) -> pb.SolveHandResponse:
        self.names.append(access.current_key_name())
        try:
            access.take_call()  # as the referee's servicer does
        except QuotaExceeded as error:
            status = quota_status(error)
            await context.abort(status.code, status.details, status.trailing_metadata)  # type: ignore[attr-defined]
        return pb.SolveHandResponse(linking=pb.Linking(points=len(request.cards)))

    async def CheckDisputes(self, requests: object, context: object) -> AsyncIterator[pb.CheckDisputesResponse]:
        self.names.append(access.current_key_name())
        try:
            async for case in requests:  # type: ignore[attr-defined]
                access.take_call()
                yield pb.CheckDisputesResponse(id=case.id)
        except QuotaExceeded as error:  # what the servicer's one mapping does with it
            status = quota_status(error)
            await context.abort(status.code, status.details, status.trailing_metadata)  # type: ignore[attr-defined]


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[str, _Echo]]:
    """An aio server on 127.0.0.1 with the access interceptor: alice unlimited, bob 3 calls a second."""
    keys = tmp_path / "keys"
    keys.write_text(_line("alice", ALICE_KEY) + "\n" + _line("bob", BOB_KEY, "3") + "\n")
    echo = _Echo()
    ready: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    quotas = QuotaTable(slots=8)

    async def serve() -> None:
        # The echo servicer takes its own tokens, as the referee's does.
        interceptor = AccessInterceptor(KeyRing(keys), quotas, self_metered=("remigio.referee.v1.RefereeService",))
        server = grpc.aio.server(interceptors=[interceptor])
        referee_pb2_grpc.add_RefereeServiceServicer_to_server(echo, server)
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        ready.put(f"127.0.0.1:{port}")
        while not stop.is_set():
            await asyncio.sleep(0.02)
        await server.stop(0)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    try:
        yield ready.get(timeout=10), echo
    finally:
        stop.set()
        thread.join(10)
        quotas.close()


def test_the_interceptor_lets_health_through_and_wants_a_key_for_the_rest(guarded: tuple[str, _Echo]) -> None:
    address, echo = guarded
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        for metadata in (
            (),
            (("authorization", "Bearer nope"),),
            (("authorization", f"Bearer {digest_of(ALICE_KEY).hex()}"),),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                stub.SolveHand(pb.SolveHandRequest(cards=["AH"]), timeout=10, metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert caught.value.details() == access.UNAUTHENTICATED_MESSAGE
            with pytest.raises(grpc.RpcError) as caught:
                list(stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="a")]), timeout=10, metadata=metadata))
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        alice = (("authorization", f"Bearer {ALICE_KEY}"),)
        assert stub.SolveHand(pb.SolveHandRequest(cards=["AH", "2H"]), timeout=10, metadata=alice).linking.points == 2
        cases = [pb.CheckDisputesRequest(id=str(n)) for n in range(10)]
        assert [v.id for v in stub.CheckDisputes(iter(cases), timeout=10, metadata=alice)] == [
            str(n) for n in range(10)
        ]
    assert echo.names == ["alice", "alice"]  # the handlers saw the key's name; refused calls never ran


def test_the_interceptor_takes_a_token_per_call_and_per_case(guarded: tuple[str, _Echo]) -> None:
    address, echo = guarded
    bob = (("authorization", f"Bearer {BOB_KEY}"),)
    with grpc.insecure_channel(address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        outcomes = []
        for _ in range(4):
            try:
                stub.SolveHand(pb.SolveHandRequest(cards=["AH"]), timeout=10, metadata=bob)
                outcomes.append("ok")
            except grpc.RpcError as error:
                outcomes.append(error.code().name)
                refusal = error
        assert outcomes.count("ok") in (3, 4) and outcomes[-1] == "RESOURCE_EXHAUSTED"  # a burst of 3
        from referee.client import retry_delay

        assert 0 < (retry_delay(refusal) or 0) <= 1 / 3 + 0.01
        time.sleep(1.1)  # full again: 3 cases of 5 get verdicts, then the stream ends
        answered = []
        with pytest.raises(grpc.RpcError) as caught:
            for verdict in stub.CheckDisputes(
                iter([pb.CheckDisputesRequest(id=str(n)) for n in range(5)]), timeout=10, metadata=bob
            ):
                answered.append(verdict.id)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert answered == ["0", "1", "2"]
