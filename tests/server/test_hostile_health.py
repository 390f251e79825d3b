"""The health service against hostile clients, on real server processes: it needs no key, so
every bound holds for a caller without one.

A request naming a huge service is refused before it is decoded and leaves nothing behind;
unknown services are NOT_FOUND; Watch streams are capped per connection and per process; every
open watcher sees NOT_SERVING when the server drains, whichever others ended before; and the
plain-text health port has the main port's connection limits (calls that a gRPC library would not
make, HEADERS and then nothing, go over raw HTTP/2 with ``bench.stall``).
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servers import LISTENING, ServerProcess

from bench.stall import Staller
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.access import digest_of

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]

SERVICE = "remigio.referee.v1.RefereeService"
HEALTH_ON = re.compile(r"health on \S+:(\d+)")
KEY = "alice-0123456789-abcdefghij"
WATCHES_PER_CONNECTION = 2
WATCHES = 5
RECEIVE_TIMEOUT = 2.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Streams over MAX_CONCURRENT_STREAMS are reset at once: with REFUSED_STREAM (7), or on some
# connections with ENHANCE_YOUR_CALM (11): gRPC core picks one by the connection's timing (a whole
# connection of one or the other has been seen from the same build), and both refuse the stream.
REFUSED = ("RST 7", "RST 11")


class Server:
    """A server process with its main address and its plain-text health address."""

    def __init__(self, *args: str) -> None:
        self.process = ServerProcess(
            "--port", "0", "--log-format", "json", "--dispute-jobs", "1", "--health-port", "0", *args
        )
        self.address = f"127.0.0.1:{self.process.wait_for(LISTENING).group(2)}"
        self.health_address = f"127.0.0.1:{self.process.wait_for(HEALTH_ON).group(1)}"

    def serving(self, address: str | None = None) -> bool:
        """Health Check of the referee's service says SERVING, on a fresh connection."""
        with _channel(address or self.address) as fresh:
            reply = health_pb2_grpc.HealthStub(fresh).Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10)
        return reply.status == SERVING


def _channel(address: str) -> grpc.Channel:
    """A channel with a connection of its own (channels share connections by default)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


def _code(call: object) -> grpc.StatusCode:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _watch(
    channel: grpc.Channel, service: str = SERVICE, timeout: float = 30
) -> Iterator[health_pb2.HealthCheckResponse]:
    return health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service), timeout=timeout)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with API keys (so a call without one is refused, health's aside) and small watch caps."""
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"alice {digest_of(KEY).hex()}\n")
    running = Server(
        "--api-keys", str(keys),
        "--max-health-watches", str(WATCHES),
        "--max-health-watches-per-connection", str(WATCHES_PER_CONNECTION),
        "--receive-timeout", str(RECEIVE_TIMEOUT),
    )  # fmt: skip
    yield running
    running.process.kill()


def _watches_admitted(address: str) -> None:
    """Wait until the server has let go of the watches of the tests before (their ends are async)."""
    deadline = time.monotonic() + 10
    while True:
        with _channel(address) as probe:
            watches = [_watch(probe) for _ in range(WATCHES_PER_CONNECTION)]
            codes = [_code(lambda w=w: next(w)) for w in watches]
            for watch in watches:
                watch.cancel()
        if codes == [grpc.StatusCode.OK] * WATCHES_PER_CONNECTION or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def test_keyless_watches_naming_a_megabyte_service_are_refused_and_hold_nothing(server: Server) -> None:
    with _channel(server.address) as channel:
        solve = referee_pb2_grpc.RefereeServiceStub(channel).SolveHand
        assert _code(lambda: solve(pb.SolveHandRequest(cards=["AH"]), timeout=10)) == grpc.StatusCode.UNAUTHENTICATED
        before = server.process.rss_mb()
        name = "x" * 1_000_000  # under the main port's 1 MiB message limit: it reaches the servicer
        # 300 on one connection that stays open, 10 at a time. A server that kept the watches
        # would hold them until the connection closed (the grpc_health servicer: 220 MB more
        # here). What passes through leaves some memory with the allocator: 10 to 20 MB measured
        # at 10 calls in flight, 20 to 65 MB at 100 (the connection's MAX_CONCURRENT_STREAMS).
        watches: list[Iterator[health_pb2.HealthCheckResponse]] = []
        codes: Counter[grpc.StatusCode] = Counter()
        for _ in range(30):
            wave = [_watch(channel, name) for _ in range(10)]
            codes.update(_code(lambda w=w: next(w)) for w in wave)
            watches += wave
        assert codes == {grpc.StatusCode.INVALID_ARGUMENT: 300}, codes
        with pytest.raises(grpc.RpcError) as refused:
            next(_watch(channel, "y" * 300))
        assert refused.value.details() == "a health request is at most 256 bytes, not 303"
        # Measured with the connection and the calls still open.
        grown = _settled_growth(server, before)
        print(f"RSS {before:.0f} MB, +{grown:.1f} MB after 300 watches of a 1 MB name")
        assert grown < 50, f"the server grew by {grown:.0f} MB"
        del watches
    assert server.serving()


def _settled_growth(server: Server, before: float, within: float = 3) -> float:
    """The server's RSS growth since ``before``, once under 50 MB or after ``within`` seconds."""
    deadline = time.monotonic() + within
    while (grown := server.process.rss_mb() - before) >= 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    return grown


def _check_code(address: str, service: str) -> grpc.StatusCode:
    with _channel(address) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        return _code(lambda: check(health_pb2.HealthCheckRequest(service=service), timeout=10))


def test_unknown_services_are_not_found_for_check_and_watch(server: Server) -> None:
    for address in (server.address, server.health_address):
        assert _check_code(address, "nope") == grpc.StatusCode.NOT_FOUND
        with _channel(address) as channel:
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as unknown:
                next(_watch(channel, "nope"))
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
            assert unknown.value.details() == "unknown service 'nope'"
            assert time.monotonic() - started < 5  # refused at once, not held open
        for service in ("", SERVICE):
            assert _check_code(address, service) == grpc.StatusCode.OK
    # The health port's message limit is health's own: a 2 KB request is refused before it is read.
    assert _check_code(server.health_address, "z" * 2000) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_watches_beyond_the_caps_are_refused_while_check_answers(server: Server) -> None:
    _watches_admitted(server.address)
    with contextlib.ExitStack() as stack:
        channels = [stack.enter_context(_channel(server.address)) for _ in range(3)]
        open_watches = []

        def watch(channel: grpc.Channel) -> grpc.StatusCode:
            call = _watch(channel)
            open_watches.append(call)
            return _code(lambda: next(call))

        try:
            # Per connection: two on the first, the third refused.
            assert [watch(channels[0]) for _ in range(3)] == [grpc.StatusCode.OK] * 2 + [
                grpc.StatusCode.RESOURCE_EXHAUSTED
            ]
            assert "this connection already has 2 health watches" in open_watches[-1].details()
            assert server.serving(server.address) and server.serving(server.health_address)
            # Per process: five in all (two more here, one on the health port), then refused.
            assert [watch(channels[1]) for _ in range(2)] == [grpc.StatusCode.OK] * 2
            with _channel(server.health_address) as probe:
                assert watch(probe) == grpc.StatusCode.OK
                assert watch(channels[2]) == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "too many health watches on this server process" in open_watches[-1].details()
                # Check is never capped.
                check = health_pb2_grpc.HealthStub(channels[2]).Check
                assert check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10).status == SERVING
                assert server.serving(server.address) and server.serving(server.health_address)
                open_watches[0].cancel()  # a slot is given back when its watch ends
                deadline = time.monotonic() + 10
                while (code := watch(channels[2])) != grpc.StatusCode.OK and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert code == grpc.StatusCode.OK
        finally:
            for call in open_watches:
                call.cancel()


def test_every_open_watcher_sees_not_serving_on_drain_after_another_ended() -> None:
    draining = Server("--grace", "10")
    try:
        with _channel(draining.address) as one, _channel(draining.address) as two:
            with _channel(draining.health_address) as three:
                ending = _watch(one)
                stays = [_watch(one), _watch(two), _watch(two, ""), _watch(three)]
                assert [next(w).status for w in [ending, *stays]] == [SERVING] * 5
                ending.cancel()
                time.sleep(0.3)  # the server has seen it end
                assert draining.serving()
                draining.process.proc.send_signal(signal.SIGTERM)
                started = time.monotonic()
                assert [next(w).status for w in stays] == [NOT_SERVING] * 4
                assert time.monotonic() - started < 5
                for watch in stays:
                    watch.cancel()
        assert draining.process.proc.wait(timeout=30) == 0
    finally:
        draining.process.kill()


def test_the_health_port_bounds_stalled_checks_like_the_main_port(server: Server) -> None:
    # 20,000 Health/Check calls that send HEADERS and no DATA, over four connections: at most
    # MAX_CONCURRENT_STREAMS (100) of each connection's are taken, the rest are refused at once,
    # and the ones taken end after the receive timeout.
    before = server.process.rss_mb()
    stallers = [Staller(server.health_address) for _ in range(4)]
    try:
        streams = [staller.stall("/grpc.health.v1.Health/Check", 5000) for staller in stallers]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # A copy: each staller's reader thread adds to ``ended`` meanwhile.
            refused = [sum(1 for how in list(s.ended.values()) if how in REFUSED) for s in stallers]
            if all(n >= 4900 for n in refused):
                break
            time.sleep(0.1)
        held = server.process.rss_mb()
        assert server.serving(server.health_address)
        assert server.serving(server.address)
        taken_per_connection = []
        for staller, sent in zip(stallers, streams, strict=True):
            taken = [s for s in sent if staller.ended.get(s) not in REFUSED]
            taken_per_connection.append(len(taken))
            assert len(taken) <= 100, len(taken)
            ended = staller.wait_ended(taken, timeout=RECEIVE_TIMEOUT + 10)
            assert set(ended.values()) == {"4"}, Counter(ended.values())  # DEADLINE_EXCEEDED
            assert len(ended) == len(taken)
    finally:
        for staller in stallers:
            staller.close()
    after = server.process.rss_mb()
    print(
        f"calls taken per connection {taken_per_connection}; RSS {before:.0f} MB, +{held - before:.1f} MB held, +{after - before:.1f} MB after"
    )
    assert held - before < 50 and after - before < 50
    assert server.serving(server.health_address)
