"""The fuzz soak at the suite's size: 5,000 of ``bench.fuzz``'s mutated requests of every RPC
(deal records and dispute streams included) over real gRPC to a real server of two workers
(``bench.soak``, which ``make soak`` runs with 100,000), and the fuzzer's own guarantees.

The soak asserts what a soak of any size must show: no INTERNAL or UNKNOWN status, no worker
restarted and no process gone, health always SERVING, and the full soak's memory bound of 20 MB.
That bound holds at this size although the warm-up is shorter (1,000 requests; the full soak's is
5,000): what grows after it is the caches of linkings and candidate groups filling, which they do
a little at a time (the 5,000-request soak grew a worker by at most 3 MB; the 100,000-request soak
by 16 MB over 95,000 requests), while a leak of what the requests hold would show at once: 4,000
requests of 5 KB on average, and about 30 of them near the 1 MiB message limit. The health latency
is printed, not asserted: on a loaded test machine it measures the machine.
"""

from __future__ import annotations

import sys

import pytest

from bench.fuzz import DISPUTES, METHODS, REQUEST_TYPES, Fuzzer, encode, parse
from bench.soak import LOST, format_result, soak

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(sys.platform != "linux", reason="/proc")]

SUITE_REQUESTS = 5_000
SUITE_WARM_UP = 1_000
SUITE_GROWTH_MB = 20.0


def test_the_fuzzer_is_deterministic_and_reaches_every_method() -> None:
    first, again, other = Fuzzer(5), Fuzzer(5), Fuzzer(6)
    requests = [first.request(i) for i in range(400)]
    assert requests == [again.request(i) for i in range(400)]
    assert requests != [other.request(i) for i in range(400)]
    assert {method for method, _ in requests} == set(METHODS)
    assert all(1 <= len(messages) for method, messages in requests if method == DISPUTES)
    unary = [len(messages) for method, messages in requests if method != DISPUTES]
    assert 0 < unary.count(0) + sum(n > 1 for n in unary) < unary.count(1) / 10


def test_seeds_parse_and_encode_back_to_their_bytes() -> None:
    for method, seeds in Fuzzer(5).seeds.items():
        descriptor = REQUEST_TYPES[method].DESCRIPTOR
        for data in seeds:
            nodes = parse(data, descriptor)
            for node in nodes:
                if node.message is not None:
                    node.open()  # parsed and encoded again, not passed through
            assert encode(nodes) == data, method


def test_mutations_break_most_requests_and_keep_some_valid() -> None:
    fuzzer = Fuzzer(5)
    decoded = undecodable = 0
    for i in range(600):
        method, messages = fuzzer.request(i)
        for one in messages:
            try:
                REQUEST_TYPES[method].FromString(one)
                decoded += 1
            except Exception:
                undecodable += 1
    # Both sides of the decoder are soaked: bytes that decode (to reach the adapter's checks and
    # the domain) and bytes that do not.
    assert decoded > 3 * undecodable > 0, (decoded, undecodable)


# It measures the server's memory and its health meanwhile: with no other test beside it.
@pytest.mark.alone
def test_five_thousand_fuzzed_requests_no_internal_error_no_restart_bounded_memory() -> None:
    result = soak(SUITE_REQUESTS, seed=11, warm_up=SUITE_WARM_UP)
    print(format_result(result))
    totals = result.totals()
    assert sum(totals.values()) == SUITE_REQUESTS
    assert set(result.statuses) == {method.rsplit("/", 1)[1] for method in METHODS}
    # Every request is answered or refused as a client's error; a few are over the message limit.
    # (DEADLINE_EXCEEDED: the solve cap, on a machine loaded enough to stretch a solve past it.
    # LOST: the client's own core lost the status of a call the server ended while it was still
    # sending, bench.soak.CLIENT_LOST_STATUS; seen about once in 5,000 under load, never often.)
    allowed = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", LOST}
    assert set(totals) <= allowed, result.examples
    assert totals[LOST] <= SUITE_REQUESTS // 200, totals
    assert totals["OK"] > 1_000 and totals["INVALID_ARGUMENT"] > 1_000, totals
    assert (
        result.outcomes.get("MALFORMED", 0) > 0
        and result.outcomes.get("CONFIRMED", 0) + result.outcomes.get("WRONG", 0) > 0
    )
    misses = result.misses(max_growth_mb=SUITE_GROWTH_MB, health_p99_ms=float("inf"))
    assert not misses, misses
