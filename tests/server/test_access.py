"""TLS, mutual TLS, API keys and quotas on real server processes, with certificates made at test
time (trustme): who gets in, who does not, what they are told, what the log says, and that
certificates and keys can change under a running server."""

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
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import trustme
from commands import cli
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from servers import LISTENING, METRICS, ROOT, WORKERS, ServerProcess, refused_start, server_env

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api.convert import deal_to_proto
from referee.client import Referee, retry_delay
from referee.game.samples import sample_deals
from referee.server.access import UNAUTHENTICATED_MESSAGE, digest_of

ALICE = "alice-0123456789-abcdefghij"  # no rate
BOB = "bob-0123456789-abcdefghijkl"  # 5 calls a second
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C JK".split()
CASE_HAND = pb.HandDispute(cards=HAND, claimed_points=9)


@dataclass
class Pki:
    """Certificates and keys in files: the server's, a client's, and a client's from another CA."""

    directory: Path
    ca: trustme.CA

    def path(self, name: str) -> Path:
        return self.directory / name


def _write_leaf(cert: trustme.LeafCert, directory: Path, stem: str) -> None:
    cert.private_key_pem.write_to_path(directory / f"{stem}-key.pem")
    (directory / f"{stem}.pem").write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))


def _make_pki(directory: Path) -> Pki:
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(directory / "ca.pem")
    other.cert_pem.write_to_path(directory / "other-ca.pem")
    _write_leaf(ca.issue_cert("localhost", "127.0.0.1"), directory, "server")
    _write_leaf(ca.issue_cert("client@example.com"), directory, "client")
    _write_leaf(other.issue_cert("client@example.com"), directory, "stranger")
    return Pki(directory, ca)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return _make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(f"# partners\nalice {digest_of(ALICE).hex()}\nbob {digest_of(BOB).hex()} 5\n")
    return path


def _start(*args: str) -> ServerProcess:
    return ServerProcess("--port", "0", "--log-format", "json", "--dispute-jobs", "1", *args).listening()


@pytest.fixture(scope="module")
def tls_server(pki: Pki, key_file: Path) -> Iterator[ServerProcess]:
    """One TLS server with API keys for the tests that change nothing on it."""
    server = _start(
        "--tls-cert", str(pki.path("server.pem")), "--tls-key", str(pki.path("server-key.pem")),
        "--api-keys", str(key_file), "--metrics-port", "0",
    )  # fmt: skip
    yield server
    server.terminate()


def _secure(address: str, pki: Pki, client: str | None = None, ca: str = "ca.pem") -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki.path(ca).read_bytes(),
        private_key=pki.path(f"{client}-key.pem").read_bytes() if client else None,
        certificate_chain=pki.path(f"{client}.pem").read_bytes() if client else None,
    )
    return grpc.secure_channel(address, credentials)


def _bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def _code(call: object) -> grpc.StatusCode:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _solve_code(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    stub = referee_pb2_grpc.RefereeServiceStub(channel)
    return _code(lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5, metadata=metadata))


# TLS ------------------------------------------------------------------------------------------


def test_a_plain_text_client_is_refused_by_a_tls_server(tls_server: ServerProcess) -> None:
    with grpc.insecure_channel(tls_server.address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        code = _code(lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5, metadata=_bearer(ALICE)))
    assert code == grpc.StatusCode.UNAVAILABLE


def test_a_client_that_does_not_trust_the_servers_ca_is_refused(tls_server: ServerProcess, pki: Pki) -> None:
    with _secure(tls_server.address, pki, ca="other-ca.pem") as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        code = _code(lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5, metadata=_bearer(ALICE)))
    assert code == grpc.StatusCode.UNAVAILABLE


# Keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        _bearer("not-a-key-this-server-knows"),
        _bearer(digest_of(ALICE).hex()),  # the hash the key file holds for alice, sent as a key
        (("authorization", f"Basic {ALICE}"),),
        (("authorization", "Bearer"),),
    ],
    ids=["no key", "wrong key", "another name's hash", "not bearer", "empty"],
)
def test_calls_without_a_good_key_are_unauthenticated_with_one_message(
    tls_server: ServerProcess, pki: Pki, metadata: tuple[tuple[str, str], ...]
) -> None:
    with _secure(tls_server.address, pki) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        calls = [
            lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10, metadata=metadata),
            lambda: stub.CheckClose(pb.CheckCloseRequest(cards=HAND), timeout=10, metadata=metadata),
            lambda: stub.ScoreDeal(pb.ScoreDealRequest(), timeout=10, metadata=metadata),
            lambda: list(
                stub.CheckDisputes(iter([pb.CheckDisputesRequest(hand=CASE_HAND)]), timeout=10, metadata=metadata)
            ),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert caught.value.details() == UNAUTHENTICATED_MESSAGE


def test_the_right_key_opens_every_method_and_the_stream(tls_server: ServerProcess, pki: Pki) -> None:
    with Referee(tls_server.address, api_key=ALICE, tls_ca=pki.path("ca.pem")) as referee:
        assert referee.solve_hand(HAND).linking.points >= 0
        assert referee.check_close(HAND, discard="2C").close.reason or True
        scored = referee.score_deal(deal_to_proto(sample_deals(11, 1)[0]))
        assert len(scored.players) == 4
        cases = [pb.CheckDisputesRequest(id=f"c{n}", hand=CASE_HAND) for n in range(3)]
        assert [v.id for v in referee.check_disputes(cases)] == ["c0", "c1", "c2"]


def test_a_key_read_from_a_file_as_it_is_works_in_the_client_and_in_batch(
    tls_server: ServerProcess, pki: Pki, tmp_path: Path
) -> None:
    # keygen prints the key with a newline; an editor may add a carriage return or spaces.
    for text in (ALICE + "\n", f"  {ALICE}\r\n"):
        key_path = tmp_path / "partner.key"
        key_path.write_text(text, newline="")
        with Referee(tls_server.address, api_key=open(key_path).read(), tls_ca=pki.path("ca.pem")) as referee:
            assert referee.solve_hand(HAND).linking.points == 9
        cases = tmp_path / "cases.jsonl"
        cases.write_text(json.dumps({"id": "c0", "hand": {"cards": HAND, "claimed_points": 9}}) + "\n")
        out = tmp_path / "out.jsonl"
        command = [sys.executable, "-m", "referee.cli", "batch", str(cases), "-o", str(out), "--jobs", "1"]
        command += ["--target", tls_server.address, "--tls-ca", str(pki.path("ca.pem"))]
        command += ["--api-key-file", str(key_path)]
        env = {name: value for name, value in server_env().items() if name != "REMIGIO_API_KEY"}
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(out.read_text())["outcome"] == "DISPUTE_OUTCOME_CONFIRMED"
        by_env = subprocess.run(
            command[:-2], capture_output=True, text=True, cwd=ROOT, env={**env, "REMIGIO_API_KEY": text}, timeout=120
        )
        assert by_env.returncode == 0, by_env.stderr


def test_health_is_open_and_reflection_needs_a_key(tls_server: ServerProcess, pki: Pki) -> None:
    with _secure(tls_server.address, pki) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")

        def services(metadata: tuple[tuple[str, str], ...]) -> list[str]:
            (answer,) = reflection.ServerReflectionInfo(iter([ask]), timeout=10, metadata=metadata)
            return [service.name for service in answer.list_services_response.service]

        with pytest.raises(grpc.RpcError) as caught:
            services(())
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "remigio.referee.v1.RefereeService" in services(_bearer(ALICE))


def test_logs_name_the_key_and_never_hold_it(tls_server: ServerProcess, pki: Pki) -> None:
    with Referee(tls_server.address, api_key=ALICE, tls_ca=pki.path("ca.pem")) as referee:
        referee.solve_hand(HAND, rules=pb.RuleOptions(joker_points=21))
    with _secure(tls_server.address, pki) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        _code(lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10, metadata=_bearer(BOB + "x")))
    deadline = time.monotonic() + 10
    while not any('"key": "alice"' in line for line in list(tls_server.lines)):
        assert time.monotonic() < deadline, "no call line names the key alice:\n" + "\n".join(tls_server.lines)
        time.sleep(0.05)
    text = "\n".join(tls_server.lines)
    for secret in (ALICE, BOB, BOB + "x"):
        assert secret not in text


def _metric(server: ServerProcess, name: str, key: str) -> float:
    (url,) = [found.group(1) for line in list(server.lines) if (found := METRICS.search(line))]
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf'^{name}{{key="{re.escape(key)}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_refusals_are_counted_by_key_name(tls_server: ServerProcess, pki: Pki) -> None:
    failures = _metric(tls_server, "referee_auth_failures_total", "-")
    with _secure(tls_server.address, pki) as channel:
        assert _solve_code(channel, _bearer("nobody's key")) == grpc.StatusCode.UNAUTHENTICATED
        # Twelve calls at once against 5 a second: one after another, on a busy machine, they
        # took long enough for the bucket to fill again and none was refused.
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        calls = [
            stub.SolveHand.future(pb.SolveHandRequest(cards=HAND), timeout=10, metadata=_bearer(BOB)) for _ in range(12)
        ]
        codes = [_code(call.result) for call in calls]
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes
    assert _metric(tls_server, "referee_auth_failures_total", "-") == failures + 1
    assert _metric(tls_server, "referee_quota_refusals_total", "bob") >= codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)


def test_the_served_certificates_expiry_is_a_metric(tls_server: ServerProcess, pki: Pki) -> None:
    from cryptography import x509

    (url,) = [found.group(1) for line in list(tls_server.lines) if (found := METRICS.search(line))]
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(r"^referee_tls_certificate_expiry_timestamp_seconds (\S+)$", text, re.M)
    assert found, text
    served = x509.load_pem_x509_certificate(pki.path("server.pem").read_bytes())
    assert float(found.group(1)) == served.not_valid_after_utc.timestamp()
    assert re.search(r'^referee_reload_failures_total\{file="api_keys"\} 0\.0$', text, re.M)
    assert re.search(r'^referee_reload_failures_total\{file="tls"\} 0\.0$', text, re.M)


# Mutual TLS and the health port ---------------------------------------------------------------


@pytest.fixture(scope="module")
def mtls_server(pki: Pki) -> Iterator[tuple[ServerProcess, int]]:
    server = _start(
        "--tls-cert", str(pki.path("server.pem")), "--tls-key", str(pki.path("server-key.pem")),
        "--tls-client-ca", str(pki.path("ca.pem")), "--health-port", "0",
    )  # fmt: skip
    found = server.wait_for(re.compile(r"health on \S+:(\d+)"))
    yield server, int(found.group(1))
    server.terminate()


def test_mutual_tls_wants_a_client_certificate_from_its_ca(mtls_server: tuple[ServerProcess, int], pki: Pki) -> None:
    server, _ = mtls_server
    for client in (None, "stranger"):
        with _secure(server.address, pki, client) as channel:
            assert _solve_code(channel) == grpc.StatusCode.UNAVAILABLE, client
    with Referee(
        server.address, tls_ca=pki.path("ca.pem"), tls_cert=pki.path("client.pem"), tls_key=pki.path("client-key.pem")
    ) as referee:
        assert referee.solve_hand(HAND).linking.points >= 0


def test_the_health_port_answers_in_plain_text_with_health_alone(mtls_server: tuple[ServerProcess, int]) -> None:
    _, health_port = mtls_server
    with grpc.insecure_channel(f"127.0.0.1:{health_port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        assert _code(lambda: stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=5)) == (
            grpc.StatusCode.UNIMPLEMENTED
        )


# Rotation -------------------------------------------------------------------------------------


def test_certificates_and_keys_rotate_without_a_restart(tmp_path: Path) -> None:
    first = _make_pki(tmp_path)
    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice {digest_of(ALICE).hex()}\n")
    server = _start(
        "--tls-cert", str(first.path("server.pem")), "--tls-key", str(first.path("server-key.pem")),
        "--api-keys", str(keys),
    )  # fmt: skip
    try:
        old_ca = first.path("ca.pem").read_bytes()
        with Referee(server.address, api_key=ALICE, tls_ca=old_ca) as referee:
            referee.solve_hand(HAND)
            # A new CA's certificate, written the way a rotation does it: key and certificate
            # each renamed into place.
            (tmp_path / "next").mkdir()
            second = _make_pki(tmp_path / "next")
            for name in ("server.pem", "server-key.pem"):
                second.path(name).replace(tmp_path / name)
            keys.with_suffix(".new").write_text(f"bob {digest_of(BOB).hex()}\n")
            keys.with_suffix(".new").replace(keys)
            new_ca = second.path("ca.pem").read_bytes()
            deadline = time.monotonic() + 15
            while True:
                with Referee(server.address, api_key=BOB, tls_ca=new_ca) as fresh:
                    try:
                        fresh.solve_hand(HAND, timeout=5)
                        break
                    except grpc.RpcError as error:
                        assert time.monotonic() < deadline, f"no rotation after 15 s: {error.code()}"
                        time.sleep(0.2)
            # The old connection goes on; a new one that trusts only the old CA does not.
            with pytest.raises(grpc.RpcError) as caught:
                referee.solve_hand(HAND)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED  # alice's key is gone
        with Referee(server.address, api_key=BOB, tls_ca=old_ca) as stale, pytest.raises(grpc.RpcError) as caught:
            stale.solve_hand(HAND, timeout=5)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert server.proc.poll() is None
    finally:
        server.terminate()


def test_a_broken_key_file_keeps_the_keys_and_sighup_reloads(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice {digest_of(ALICE).hex()}\n")
    server = _start("--api-keys", str(keys))
    try:
        with Referee(server.address, api_key=ALICE) as referee:
            referee.solve_hand(HAND)
            keys.write_text(f"alice {digest_of(ALICE).hex()}\nbroken line\n")
            server.wait_for(re.compile(r"API keys not reloaded.*line 2"), timeout=15)
            referee.solve_hand(HAND)  # alice still in
            keys.write_text(f"bob {digest_of(BOB).hex()}\n")
            os.utime(keys, ns=(0, 0))  # the watch may miss it; SIGHUP may not
            server.proc.send_signal(__import__("signal").SIGHUP)
            server.wait_for(re.compile(r"API keys reloaded"), timeout=15)
            with pytest.raises(grpc.RpcError) as caught:
                referee.solve_hand(HAND)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert server.proc.poll() is None
    finally:
        server.terminate()


# Quotas ---------------------------------------------------------------------------------------


def _pid(call: grpc.Call) -> str:
    return dict(call.trailing_metadata() or ()).get("x-referee-pid", "")


def _bob_pids(server: ServerProcess) -> set[int]:
    pids = set()
    for line in list(server.lines):
        if line.startswith("{") and "bob" in line:
            pids.add(json.loads(line)["pid"])
    return pids


@pytest.mark.alone
def test_a_rate_of_5_is_one_bucket_for_both_workers(key_file: Path) -> None:
    server = ServerProcess(
        "--port", "0", "--workers", "2", "--log-format", "json", "--dispute-jobs", "1", "--api-keys", str(key_file),
        "--debug-pid",
    )  # fmt: skip
    try:
        found = server.wait_for(re.compile(r"workers on (\S+):(\d+)"))
        address = f"{found.group(1)}:{found.group(2)}"
        for _ in range(2):
            server.wait_for(re.compile(r"listening on"))
        # Connections of their own (no shared subchannel), which the kernel spreads over the workers
        # by a hash: 4 that reached each worker (all 8 landed on one about one time in 128).
        by_worker: dict[str, list[grpc.Channel]] = {}
        channels: list[grpc.Channel] = []
        while len(channels) < 64 and sum(min(len(held), 4) for held in by_worker.values()) < 8:
            channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
            channels.append(channel)
            _, call = referee_pb2_grpc.RefereeServiceStub(channel).SolveHand.with_call(
                pb.SolveHandRequest(cards=["AH"]), timeout=10, metadata=_bearer(ALICE)
            )
            by_worker.setdefault(_pid(call), []).append(channel)
        assert len(by_worker) == 2, f"{len(channels)} connections reached one worker only"
        stubs = [referee_pb2_grpc.RefereeServiceStub(channel) for held in by_worker.values() for channel in held[:4]]
        ok_pids: set[str] = set()
        ok, refused, delays = 0, 0, []
        start = time.monotonic()
        for _ in range(5):
            for stub in stubs:
                try:
                    _, call = stub.SolveHand.with_call(
                        pb.SolveHandRequest(cards=["AH"]), timeout=10, metadata=_bearer(BOB)
                    )
                    ok += 1
                    ok_pids.add(_pid(call))
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                    refused += 1
                    delays.append(retry_delay(error))
        elapsed = time.monotonic() - start
        for channel in channels:
            channel.close()
        # A burst of 5 and 5 a second, across both processes: per process it would be twice that.
        assert ok <= 5 + 5 * elapsed + 1, (ok, elapsed)
        assert refused >= 40 - (5 + 5 * elapsed + 1)
        assert all(delay is not None and 0 < delay <= 1.0 for delay in delays), delays
        assert ok_pids and "" not in ok_pids, "no call got through, or a reply without its pid"
        # Both workers took part: bob's calls (answered or refused) are in the logs of two pids.
        deadline = time.monotonic() + 10
        while len(_bob_pids(server)) < 2:
            assert time.monotonic() < deadline, f"bob's calls reached one worker only: {_bob_pids(server)}"
            time.sleep(0.05)
    finally:
        server.terminate()


@pytest.mark.alone
def test_each_case_of_a_stream_counts_and_the_client_waits_as_told(tls_server: ServerProcess, pki: Pki) -> None:
    cases = [pb.CheckDisputesRequest(id=f"c{n}", hand=CASE_HAND) for n in range(12)]
    with _secure(tls_server.address, pki) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        time.sleep(1.2)  # bob's bucket full again, whatever ran before
        answered = []
        with pytest.raises(grpc.RpcError) as caught:
            for verdict in stub.CheckDisputes(iter(cases), timeout=30, metadata=_bearer(BOB)):
                answered.append(verdict.id)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert len(answered) <= 6 and retry_delay(caught.value) is not None
    with Referee(tls_server.address, api_key=BOB, tls_ca=pki.path("ca.pem")) as referee:
        start = time.monotonic()
        assert [v.id for v in referee.check_disputes(cases)] == [c.id for c in cases]
        assert time.monotonic() - start >= 1.0  # 12 cases at 5 a second take their time


# Clients --------------------------------------------------------------------------------------


def test_the_node_client_over_tls_with_a_key(tls_server: ServerProcess, pki: Pki) -> None:
    from test_node_client import CLIENT, NODE_MODULES, node_binary

    call = {"method": "SolveHand", "request": {"cards": HAND}}
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    address = f"localhost:{tls_server.address.rpartition(':')[2]}"
    runs = {}
    for name, key in (("with", ALICE), ("without", "")):
        done = subprocess.run(
            [node_binary(), str(CLIENT), address, "--tls-ca", str(pki.path("ca.pem"))],
            input=json.dumps(call) + "\n",
            capture_output=True,
            text=True,
            env={**env, "REMIGIO_API_KEY": key},
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads(done.stdout)
    assert "reply" in runs["with"] and runs["with"]["reply"]["linking"]["points"] >= 0
    assert runs["without"]["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]


def test_batch_through_a_tls_server_with_keys(tls_server: ServerProcess, pki: Pki, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(json.dumps({"id": f"c{n}", "hand": {"cards": HAND, "claimed_points": 9}}) + "\n" for n in range(20))
    )
    key = tmp_path / "key.txt"
    key.write_text(BOB + "\n")  # 5 a second: the batch waits as the server says
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "referee.cli", "batch", str(cases), "-o", str(out)]
    command += ["--target", tls_server.address, "--jobs", "2", "--tls-ca", str(pki.path("ca.pem"))]
    env = {key: value for key, value in os.environ.items() if key != "REMIGIO_API_KEY"}
    done = subprocess.run(
        [*command, "--api-key-file", str(key)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"c{n}" for n in range(20)]
    refused = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert refused.returncode == 4 and "UNAUTHENTICATED" in refused.stderr
    by_env = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env={**env, "REMIGIO_API_KEY": ALICE}, timeout=120
    )
    assert by_env.returncode == 0, by_env.stderr
    assert BOB not in done.stderr + refused.stderr and ALICE not in by_env.stderr


def _batch_in_process(target: str, tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c0", "hand": {"cards": HAND, "claimed_points": 9}}) + "\n")
    return cli("batch", str(cases), "-o", str(tmp_path / "out.jsonl"), "--jobs", "1", "--target", target, *options)


def test_batch_says_what_to_give_each_server_it_cannot_use(
    tls_server: ServerProcess, mtls_server: tuple[ServerProcess, int], pki: Pki, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("REMIGIO_API_KEY", raising=False)
    ca = ("--tls-ca", str(pki.path("ca.pem")))
    # Plain text at a TLS port: not "no server", but TLS and the flag that turns it on.
    plain = _batch_in_process(tls_server.address, tmp_path)
    assert plain.returncode == 4
    assert "the port speaks TLS: give the CA that signed its certificate with --tls-ca FILE" in plain.stderr
    # A CA that did not sign the server's certificate.
    other = _batch_in_process(tls_server.address, tmp_path, "--tls-ca", str(pki.path("other-ca.pem")))
    assert other.returncode == 4 and "certificate was not accepted" in other.stderr and "--tls-ca" in other.stderr
    # No key: which flag or variable gives one.
    keyless = _batch_in_process(tls_server.address, tmp_path, *ca)
    assert keyless.returncode == 4 and "UNAUTHENTICATED" in keyless.stderr
    assert "give one with --api-key-file FILE or the variable REMIGIO_API_KEY" in keyless.stderr
    wrong = tmp_path / "wrong.key"
    wrong.write_text("not-a-key-of-this-server\n")
    refused = _batch_in_process(tls_server.address, tmp_path, *ca, "--api-key-file", str(wrong))
    assert refused.returncode == 4 and f"the key of --api-key-file {wrong} was refused" in refused.stderr
    # Mutual TLS without a client certificate: one is needed, and the flags that give it.
    server, health_port = mtls_server
    certless = _batch_in_process(server.address, tmp_path, *ca)
    assert certless.returncode == 4
    assert "it wants a client certificate (mutual TLS): give --tls-cert FILE and --tls-key FILE" in certless.stderr
    stranger = ("--tls-cert", str(pki.path("stranger.pem")), "--tls-key", str(pki.path("stranger-key.pem")))
    refused_cert = _batch_in_process(server.address, tmp_path, *ca, *stranger)
    assert refused_cert.returncode == 4 and "did not accept the client certificate of --tls-cert" in refused_cert.stderr
    # TLS at a plain-text port.
    tls_at_plain = _batch_in_process(f"127.0.0.1:{health_port}", tmp_path, *ca)
    assert tls_at_plain.returncode == 4 and "the port speaks plain text, not TLS" in tls_at_plain.stderr
    for run in (plain, other, keyless, refused, certless, refused_cert, tls_at_plain):
        assert "Traceback" not in run.stderr


# Logs ------------------------------------------------------------------------------------------


def test_with_json_logs_every_line_the_server_writes_is_a_json_object(pki: Pki, key_file: Path) -> None:
    server = ServerProcess(
        "--port", "0", "--workers", "2", "--log-format", "json", "--dispute-jobs", "1", "--metrics-port", "0",
        "--tls-cert", str(pki.path("server.pem")), "--tls-key", str(pki.path("server-key.pem")),
        "--api-keys", str(key_file),
    )  # fmt: skip
    try:
        server.wait_for(WORKERS)
        server.listening()
        server.wait_for(LISTENING)
        cases = [pb.CheckDisputesRequest(id=f"c{n}", hand=CASE_HAND) for n in range(3)]
        with Referee(server.address, api_key=ALICE, tls_ca=pki.path("ca.pem")) as referee:
            assert referee.solve_hand(HAND).linking.points == 9
            assert len(list(referee.check_disputes(cases))) == 3
            with pytest.raises(grpc.RpcError):
                referee.solve_hand(["ZZ"])
        with _secure(server.address, pki) as channel:
            assert _solve_code(channel) == grpc.StatusCode.UNAUTHENTICATED  # a call without a key
        # Failed TLS handshakes: a plain-text client, and bytes that are neither TLS nor HTTP/2.
        with grpc.insecure_channel(server.address) as channel:
            assert _solve_code(channel) == grpc.StatusCode.UNAVAILABLE
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            with contextlib.suppress(OSError):
                sock.recv(100)
        deadline = time.monotonic() + 10
        while not any('"method": "CheckDisputes"' in line for line in list(server.lines)):
            assert time.monotonic() < deadline, "\n".join(server.lines)
            time.sleep(0.05)
    finally:
        server.terminate()
    lines = list(server.lines)
    logged = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
        assert isinstance(record, dict) and {"time", "level", "logger", "pid", "message"} <= record.keys(), line
        logged.append(record)
    messages = [record["message"] for record in logged]
    for said in ("2 workers on", "metrics on", "listening on", "refused", "SIGTERM received", "stopped (pid"):
        assert any(said in message for message in messages), f"no line says {said!r}: {messages}"
    assert sum(message.startswith("listening on") for message in messages) == 2
    calls = [record for record in logged if "method" in record]
    assert {call["method"] for call in calls} == {"SolveHand", "CheckDisputes"}
    (stream,) = [call for call in calls if call["method"] == "CheckDisputes"]
    assert stream["cases"] == 3 and stream["code"] == "OK" and stream["key"] == "alice"
    assert not any("cases" in call for call in calls if call["method"] != "CheckDisputes")
    assert sorted(call["code"] for call in calls if call["method"] == "SolveHand") == ["INVALID_ARGUMENT", "OK"]


# Safe defaults --------------------------------------------------------------------------------


def test_an_open_bind_without_tls_or_keys_is_warned_about_at_start() -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the warning comes first, then the bind fails,
    # so nothing ever listens beyond loopback.
    done = refused_start("--host", "192.0.2.1", "--port", "0")
    assert done.returncode == 1
    assert "listening on 192.0.2.1:0 without TLS or API keys: anyone who can reach this port" in done.stderr
    assert "cannot bind" in done.stderr
