"""The CheckDisputes stream on real servers: every verdict, in order; bounded while the client reads slowly.

Where the cases of a slow reader's stream wait (measured on 127.0.0.1, 2 cores, cases of about
300 bytes and verdicts of about 1.4 kB):

- in the servicer: at most ``READ_AHEAD_PER_JOB × dispute_jobs`` cases read ahead of the verdict
  being sent (16 with 2 jobs);
- on the way back: the verdicts the server has sent that the client has not read, within the
  client's HTTP/2 receive window (64 kB, about 50 verdicts, with BDP probing off; gRPC's BDP
  probing widens it as verdicts arrive, to a few thousand verdicts);
- on the way in: the cases the client has sent that the server has not read, within the
  server's HTTP/2 receive window (widened by BDP probing to a few MB) and the kernel's socket
  buffers: the bulk, about 15,000-17,500 cases (about 5 MB), measured after a 2-3 s stall.

So the client's count of cases ahead of the verdicts it has read plateaus at about 17,500,
while a servicer that drains its request iterator into memory (measured with one) goes past
50,000 within the same run. The server's own memory stays flat (+6 MB measured): the transport
holds those megabytes, not Python objects. The tests assert bounds with a margin over those
figures.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import cases
import grpc
import pytest
from google.protobuf import json_format
from servers import ServerProcess

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.app import ServerThread
from referee.server.compute import DisputeJobs
from referee.server.config import ServiceLimits
from referee.server.servicer import READ_AHEAD_PER_JOB

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]


STREAM_CASES = 10_000
# Cases the client may have sent ahead of the verdicts it has read: measured plateau about
# 17,500 (see the module docstring); a draining servicer passes 50,000.
CLIENT_AHEAD_BOUND = 35_000
# Growth of the server's resident memory while a client reads slowly: measured about 6 MB.
RSS_GROWTH_BOUND_MB = 100
# Cases the servicer may have pulled ahead of the verdicts a client (BDP probing off) has read:
# measured 63 = the 16 read ahead + about 47 verdicts in the client's 64 kB window.
SERVER_AHEAD_BOUND = 500


def _parsed(lines: list[cases.CaseLine]) -> list[tuple[pb.CheckDisputesRequest, cases.Expected]]:
    """The lines that are case messages (unreadable lines cannot travel on the stream)."""
    out = []
    for line in lines:
        case = pb.CheckDisputesRequest()
        try:
            json_format.Parse(line.text, case)
        except json_format.ParseError:
            continue
        out.append((case, line.expected))
    return out


def _numbered(
    base: list[tuple[pb.CheckDisputesRequest, cases.Expected]], count: int
) -> Iterator[tuple[pb.CheckDisputesRequest, str]]:
    """``count`` cases cycling through ``base``, each with a fresh id; yields (case, expected outcome)."""
    for n in range(count):
        template, expected = base[n % len(base)]
        case = pb.CheckDisputesRequest()
        case.CopyFrom(template)
        case.id = f"{n:06d}"
        yield case, expected.outcome


def test_ten_thousand_cases_through_one_stream_in_order(stub: referee_pb2_grpc.RefereeServiceStub) -> None:
    base = _parsed(cases.mixed_cases(seed=5))
    assert {expected.outcome for _, expected in base} == {"CONFIRMED", "WRONG", "INVALID", "NO_CLAIM", "MALFORMED"}
    numbered = list(_numbered(base, STREAM_CASES))
    replies = stub.CheckDisputes((case for case, _ in numbered), timeout=90)
    got = [(reply.id, pb.DisputeOutcome.Name(reply.outcome)) for reply in replies]
    assert len(got) == STREAM_CASES, "verdicts missing"
    assert [case_id for case_id, _ in got] == [case.id for case, _ in numbered], "verdicts out of order"
    wrong = [
        (case_id, outcome, want)
        for (case_id, outcome), (_, want) in zip(got, numbered)
        if outcome != f"DISPUTE_OUTCOME_{want}"
    ]
    assert not wrong, wrong[:10]


# A slow reader against a server process ---------------------------------------------------------


@pytest.fixture(scope="module")
def server_process() -> Iterator[ServerProcess]:
    """A server process judging cases in 2 worker processes."""
    server = ServerProcess("--port", "0", "--dispute-jobs", "2").listening()
    try:
        yield server
    finally:
        server.terminate()


class Counted:
    """An endless supply of cases that counts how many the stream has taken."""

    def __init__(self, base: list[tuple[pb.CheckDisputesRequest, cases.Expected]], limit: int = 1_000_000) -> None:
        self.base = base
        self.limit = limit
        self.taken = 0

    def __iter__(self) -> Iterator[pb.CheckDisputesRequest]:
        for case, _ in _numbered(self.base, self.limit):
            self.taken += 1
            yield case


class RssSampler:
    """The highest RSS of a process, sampled every 20 ms by a thread."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.peak = server.rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.server.rss_mb())

    def stop(self) -> float:
        """Stop sampling; the peak RSS in MB."""
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak


# The plateau of cases in flight depends on how fast the server reads: with no other test beside it.
@pytest.mark.alone
def test_a_slow_reader_keeps_the_server_bounded(server_process: ServerProcess) -> None:
    base = _parsed(list(cases.deal_cases(40, seed=9)))
    with grpc.insecure_channel(server_process.address) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        # Warm up: the worker pool starts and the 40 deals are solved once (they are cached after).
        warm = list(stub.CheckDisputes((case for case, _ in _numbered(base, 200)), timeout=60))
        assert len(warm) == 200
        baseline = server_process.rss_mb()
        sampler = RssSampler(server_process)
        supply = Counted(base)
        call = stub.CheckDisputes(iter(supply), timeout=90)
        read, ahead = 0, []
        try:
            for reply in call:
                assert reply.id == f"{read:06d}", "verdicts out of order"
                read += 1
                if read == 1:
                    time.sleep(2.0)  # a client that stops reading for a while
                elif read <= 2_000:
                    time.sleep(0.0005)  # then reads slowly
                ahead.append(supply.taken - read)
                if read == 12_000:
                    break
        finally:
            call.cancel()
        peak = sampler.stop()
    assert read == 12_000
    assert max(ahead) < CLIENT_AHEAD_BOUND, f"the client got {max(ahead)} cases ahead of the verdicts it read"
    assert supply.taken < 12_000 + CLIENT_AHEAD_BOUND
    assert peak - baseline < RSS_GROWTH_BOUND_MB, f"server RSS grew from {baseline:.0f} MB to {peak:.0f} MB"


class CountingJobs(DisputeJobs):
    """The real dispute jobs, counting the cases the servicer has pulled from the stream to judge."""

    pulled = 0

    async def run(self, *args):  # type: ignore[no-untyped-def]
        """The real run, counted."""
        self.pulled += 1
        return await super().run(*args)


def test_the_servicer_reads_a_bounded_number_of_cases_ahead() -> None:
    server = ServerThread("127.0.0.1:0", limits=ServiceLimits(solve_cap_seconds=60))
    servicer = server.running.servicer
    servicer.jobs.shutdown()
    servicer.jobs = CountingJobs(2)
    port = server.port
    base = _parsed(list(cases.deal_cases(40, seed=9)))
    try:
        # BDP probing off: the client's receive window stays at 64 kB instead of widening.
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", 0)]) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            supply = Counted(base)
            call = stub.CheckDisputes(iter(supply), timeout=90)
            read, server_ahead, stalled = 0, [], 0
            try:
                for reply in call:
                    assert reply.id == f"{read:06d}"
                    read += 1
                    if read in (1, 500):
                        time.sleep(1.0)
                        stalled = max(stalled, servicer.jobs.pulled - read)
                    server_ahead.append(servicer.jobs.pulled - read)
                    if read == 1_200:
                        break
            finally:
                call.cancel()
    finally:
        server.stop()
    assert stalled >= READ_AHEAD_PER_JOB * 2, "the servicer did not read ahead at all"
    assert max(server_ahead) < SERVER_AHEAD_BOUND, f"the servicer pulled {max(server_ahead)} cases ahead of the reader"
