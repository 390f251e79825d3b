"""The public Python client (``referee.client``) against real servers: the session's referee, and
small scripted servers on 127.0.0.1 for the refusals a client must ride out."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api.convert import deal_to_proto
from referee.client import Referee, retry_delay
from referee.game.samples import sample_deals

HAND = "AH 2H 3H 5C 5D 5S KS KD 9C JK"
CLOSE = "3H 4H 5H 6H JK 8H 9H 10H JH QH"


def test_each_method_takes_codes_or_messages_and_answers_as_the_stub_does(
    server_address: str, stub: referee_pb2_grpc.RefereeServiceStub
) -> None:
    deal = deal_to_proto(sample_deals(11, 1)[0])
    with Referee(server_address, timeout=30) as referee:
        solved = referee.solve_hand(HAND)
        assert solved == stub.SolveHand(pb.SolveHandRequest(cards=HAND.split()), timeout=30)
        assert referee.solve_hand(HAND.split()) == solved
        assert referee.solve_hand(pb.SolveHandRequest(cards=HAND.split())) == solved
        wrapped = referee.solve_hand(HAND, rules=pb.RuleOptions(wrap_runs=True))
        assert wrapped == stub.SolveHand(
            pb.SolveHandRequest(cards=HAND.split(), rules=pb.RuleOptions(wrap_runs=True)), timeout=30
        )
        close = referee.check_close(CLOSE, discard="2C")
        assert close.close.valid
        assert close == stub.CheckClose(pb.CheckCloseRequest(cards=CLOSE.split(), discard="2C"), timeout=30)
        scored = referee.score_deal(deal)
        assert scored == stub.ScoreDeal(pb.ScoreDealRequest(deal=deal), timeout=30)
        cases = [
            pb.CheckDisputesRequest(id=f"c{n}", hand=pb.HandDispute(cards=HAND.split(), claimed_points=p))
            for n, p in enumerate([solved.linking.points, solved.linking.points + 1, 0])
        ]
        verdicts = list(referee.check_disputes(iter(cases)))
    assert [v.id for v in verdicts] == ["c0", "c1", "c2"]
    assert verdicts[0].outcome == pb.DISPUTE_OUTCOME_CONFIRMED
    assert verdicts[1].outcome == pb.DISPUTE_OUTCOME_WRONG


def test_a_malformed_request_is_the_servers_invalid_argument(server_address: str) -> None:
    with Referee(server_address) as referee, pytest.raises(grpc.RpcError) as caught:
        referee.solve_hand("AH XX 3H")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cards[1]" in caught.value.details()


def test_bad_arguments_are_refused_at_once(tmp_path) -> None:
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        Referee("127.0.0.1:1", tls_cert=b"x")
    with pytest.raises(ValueError, match="api_key: a key is printable ASCII"):
        Referee("127.0.0.1:1", api_key="two words")
    with pytest.raises(ValueError, match="tls_ca: cannot read .*missing.pem"):
        Referee("127.0.0.1:1", tls_ca=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match=r"keepalive: a number of seconds above 0, not 0"):
        Referee("127.0.0.1:1", keepalive=0)
    with pytest.raises(ValueError, match=r"keepalive_timeout: a number of seconds above 0, not -1"):
        Referee("127.0.0.1:1", keepalive_timeout=-1)
    with pytest.raises(ValueError, match=r"timeout: a number of seconds above 0, not nan"):
        Referee("127.0.0.1:1", timeout=float("nan"))


def test_close_ends_the_channel(server_address: str) -> None:
    referee = Referee(server_address)
    referee.solve_hand("AH")
    referee.close()
    with pytest.raises(ValueError):
        referee.solve_hand("AH")


# Scripted servers -----------------------------------------------------------------------------


def _retry_info(seconds: float) -> tuple[tuple[str, bytes], ...]:
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(int(seconds * 1e9))
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    status = rpc_status.to_status(
        status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="over the rate", details=[detail])
    )
    return tuple(status.trailing_metadata)


class Scripted(referee_pb2_grpc.RefereeServiceServicer):
    """Refuses the first ``refusals`` SolveHand calls; ends the first ``refused_streams`` CheckDisputes streams after
    ``answer_first`` verdicts with RESOURCE_EXHAUSTED and a RetryInfo of ``wait`` seconds (or with ``code``, as a
    lost connection or a stopping server ends them)."""

    def __init__(
        self,
        refusals: int = 0,
        answer_first: int = 0,
        wait: float = 0.0,
        refused_streams: int = 1,
        code: grpc.StatusCode = grpc.StatusCode.RESOURCE_EXHAUSTED,
    ) -> None:
        self.code = code
        self.refused_streams = refused_streams
        self.refusals = refusals
        self.answer_first = answer_first
        self.wait = wait
        self.calls = 0
        self.streams: list[list[str]] = []
        self.refused_at: float | None = None
        self.started: list[float] = []
        self.lock = threading.Lock()

    def SolveHand(self, request: pb.SolveHandRequest, context: grpc.ServicerContext) -> pb.SolveHandResponse:
        with self.lock:
            self.calls += 1
            if self.calls <= self.refusals:
                context.abort(self.code, "busy")
        return pb.SolveHandResponse(linking=pb.Linking(points=len(request.cards)))

    def CheckDisputes(
        self, request_iterator: Iterator[pb.CheckDisputesRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.CheckDisputesResponse]:
        seen: list[str] = []
        self.started.append(time.monotonic())
        self.streams.append(seen)
        first = len(self.streams) <= self.refused_streams
        for case in request_iterator:
            if first and len(seen) == self.answer_first:
                self.refused_at = time.monotonic()
                if self.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    context.abort(self.code, "the connection was lost")
                context.abort_with_status(_Status(_retry_info(self.wait)))
            seen.append(case.id)
            yield pb.CheckDisputesResponse(id=case.id)


class _Status(grpc.Status):
    def __init__(self, trailers: tuple[tuple[str, bytes], ...]) -> None:
        self.code = grpc.StatusCode.RESOURCE_EXHAUSTED
        self.details = "over the rate"
        self.trailing_metadata = trailers


@pytest.fixture
def scripted() -> Iterator[Callable[[Scripted], str]]:
    servers: list[grpc.Server] = []

    def start(servicer: Scripted) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        referee_pb2_grpc.add_RefereeServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0)


def test_refused_calls_are_retried_by_grpcs_own_policy(scripted) -> None:
    servicer = Scripted(refusals=2)
    with Referee(scripted(servicer)) as referee:
        assert referee.solve_hand("AH 2H").linking.points == 2
    assert servicer.calls == 3


def test_refusals_beyond_the_policys_attempts_reach_the_caller(scripted) -> None:
    servicer = Scripted(refusals=10)
    with Referee(scripted(servicer)) as referee, pytest.raises(grpc.RpcError) as caught:
        referee.solve_hand("AH")
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert servicer.calls == 5


def test_a_stream_refused_midway_sends_the_unanswered_cases_again_after_the_retry_info(scripted) -> None:
    servicer = Scripted(answer_first=3, wait=0.3)
    cases = [pb.CheckDisputesRequest(id=f"c{n}") for n in range(10)]
    with Referee(scripted(servicer)) as referee:
        verdicts = [v.id for v in referee.check_disputes(iter(cases))]
    assert verdicts == [f"c{n}" for n in range(10)]
    assert servicer.streams[0] == ["c0", "c1", "c2"]
    assert servicer.streams[1] == [f"c{n}" for n in range(3, 10)]
    assert servicer.refused_at is not None


def test_the_wait_between_streams_is_the_retry_infos(scripted) -> None:
    servicer = Scripted(answer_first=1, wait=0.5)
    with Referee(scripted(servicer)) as referee:
        answers = referee.check_disputes(iter([pb.CheckDisputesRequest(id="a"), pb.CheckDisputesRequest(id="b")]))
        assert next(answers).id == "a"
        assert next(answers).id == "b"
    assert servicer.refused_at is not None and len(servicer.started) == 2
    # The second stream started no sooner than the server asked.
    assert servicer.started[1] - servicer.refused_at >= 0.5


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED])
def test_a_stream_lost_midway_sends_the_unanswered_cases_again_each_verdict_once(scripted, code) -> None:
    servicer = Scripted(answer_first=4, code=code, refused_streams=2)
    cases = [pb.CheckDisputesRequest(id=f"c{n}") for n in range(10)]
    with Referee(scripted(servicer)) as referee:
        verdicts = [v.id for v in referee.check_disputes(iter(cases))]
    assert verdicts == [f"c{n}" for n in range(10)]
    # Each stream took up where the last verdict left off.
    assert servicer.streams == [["c0", "c1", "c2", "c3"], ["c4", "c5", "c6", "c7"], ["c8", "c9"]]


def test_a_connection_lost_beyond_the_reconnect_time_stands(scripted) -> None:
    servicer = Scripted(answer_first=0, code=grpc.StatusCode.UNAVAILABLE, refused_streams=1000)
    with Referee(scripted(servicer)) as referee, pytest.raises(grpc.RpcError) as caught:
        list(referee.check_disputes(iter([pb.CheckDisputesRequest(id="a")]), reconnect=0.3))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert 2 <= len(servicer.streams) < 100  # sent again, with pauses between


def test_a_call_cancelled_by_a_stopping_server_is_sent_again(scripted) -> None:
    servicer = Scripted(refusals=2, code=grpc.StatusCode.CANCELLED)
    with Referee(scripted(servicer)) as referee:
        assert referee.solve_hand("AH 2H").linking.points == 2
    assert servicer.calls == 3


def test_retry_delay_reads_the_retry_info(scripted) -> None:
    servicer = Scripted(answer_first=0, wait=0.75, refused_streams=100)
    with Referee(scripted(servicer)) as referee, pytest.raises(grpc.RpcError) as caught:
        list(referee.check_disputes(iter([pb.CheckDisputesRequest(id="a")]), patience=0.1))
    assert retry_delay(caught.value) == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-ca", "missing.pem"], "--tls-ca: cannot read 'missing.pem'"),
        (["--api-key-file", "missing.key"], "--api-key-file 'missing.key'"),
    ],
)
def test_batch_connection_flags_that_do_not_fit_are_bad_usage(tmp_path, flags: list[str], message: str) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "a", "hand": {"cards": ["AH"]}}\n')
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "batch", str(cases), "--target", "127.0.0.1:1", *flags],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
