"""The gRPC service against a real server on 127.0.0.1 (port 0): answers, errors, limits, load.

Expected answers come from the domain called directly (``best_linking``, ``best_close``,
``score_deal``) and from the worked examples of RULES §8; the service must agree byte for byte.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest
from cases import HEAVY_HAND
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from servers import field_violation

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import convert, handlers
from referee.game import closing, scoring
from referee.game.cards import Card, deck, parse_cards
from referee.game.deal import Deal, PlayerHand
from referee.game.errors import SolverError, SolverTimeout
from referee.game.linking import best_linking, forget_linkings, observe_linkings
from referee.game.rules import RuleSet
from referee.server.app import SERVICE_NAME, ServerThread
from referee.server.config import ServiceLimits
from referee.server.servicer import Replies
from referee.server.status import status_for

pytestmark = pytest.mark.timeout(60)

RULES = RuleSet()
# Every heavy call gets joker points of its own, so the linking cache never answers it.
_fresh_joker_points = itertools.count(300)


def heavy_hand() -> pb.SolveHandRequest:
    """``HEAVY_HAND`` with joker points never asked before, on the CP-SAT engine (named, since
    the tests of deadlines and limits need a call that lasts)."""
    return pb.SolveHandRequest(
        cards=HEAVY_HAND.split(), rules=pb.RuleOptions(joker_points=next(_fresh_joker_points), engine=pb.ENGINE_CPSAT)
    )


def groups_of(linking: pb.Linking | pb.Close) -> list[list[str]]:
    """The groups as sorted lists of codes, in a stable order, for comparing with the rule book."""
    return sorted(sorted(group.cards) for group in linking.groups)


def _run_stub(address: str) -> tuple[grpc.Channel, referee_pb2_grpc.RefereeServiceStub]:
    chan = grpc.insecure_channel(address)
    grpc.channel_ready_future(chan).result(timeout=10)
    return chan, referee_pb2_grpc.RefereeServiceStub(chan)


@pytest.fixture
def own_server() -> Iterator[Callable[..., str]]:
    """A factory of extra servers with their own limits, each stopped after the test."""
    started = []

    def make(**kwargs: object) -> str:
        limits = {name: kwargs.pop(name) for name in ServiceLimits.__slots__ if name in kwargs}  # type: ignore[attr-defined]
        limits.setdefault("solve_cap_seconds", 60)
        server = ServerThread("127.0.0.1:0", limits=ServiceLimits(**limits), **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server.address

    yield make
    for server in started:
        server.stop(grace=0)


# RULES §8 ---------------------------------------------------------------------------------------

HANDS = [
    ("AH 2H 3H 5C 5D 5S KS KD 9C 4D", [["2H", "3H", "AH"], ["5C", "5D", "5S"]], ["9C", "4D", "KD", "KS"], 33),
    ("AH 2H 3H 5C 5D 5S KS KD 9C JK", [["2H", "3H", "AH"], ["5C", "5D", "5S"], ["JK", "KD", "KS"]], ["9C"], 9),
    ("QS KS AS 2S 3S 4S 7H 7D 7C 9D", [["2S", "3S", "4S"], ["7C", "7D", "7H"], ["AS", "KS", "QS"]], ["9D"], 9),
    ("2C 2C 9D 9D 4S 7H KH KH QC JK", [["JK", "KH", "KH"]], ["2C", "2C", "QC", "9D", "9D", "7H", "4S"], 43),
    ("JK JK 5H 9C KD QS 2D 6S 8H 3C", [["5H", "8H", "JK", "JK"]], ["3C", "9C", "2D", "KD", "6S", "QS"], 40),
]

CLOSES = [
    ("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C", "2C", pb.CLOSE_KIND_STRAIGHT_FLUSH, 5),
    ("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD", "KD", pb.CLOSE_KIND_REMIGIO, 10),
    ("AH 2H 3H 5H 7H 8H 9H JH QH KH 4C", "4C", pb.CLOSE_KIND_COLOR_CLEAN, 4),
    ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC", "KC", pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN, 6),
]

CLOSER_LINKED_CLEAN = "2S 3S 4S 6D 6C 6H 9C 10C JC QC"
OTHER_33 = "AH 2H 3H 5C 5D 5S KS KD 9C 4D"


def base_deal() -> pb.ScoreDealRequest:
    """RULES §8's HEAD_TO_HEAD example: the closer LINKED_CLEAN, the other hand 33 points."""
    return pb.ScoreDealRequest(
        deal=pb.Deal(
            players=[
                pb.Player(name="ana", cards=CLOSER_LINKED_CLEAN.split()),
                pb.Player(name="bob", cards=OTHER_33.split()),
            ],
            closer=0,
            discard="KH",
        )
    )


@pytest.mark.parametrize("hand, groups, unlinked, points", HANDS)
def test_solve_hand_on_the_rule_book_examples(stub, hand, groups, unlinked, points) -> None:
    reply = stub.SolveHand(pb.SolveHandRequest(cards=hand.split()), timeout=10)
    assert reply.linking.points == points
    assert groups_of(reply.linking) == groups
    assert list(reply.linking.unlinked) == unlinked
    domain = best_linking(parse_cards(hand.split()), RULES)
    assert reply == pb.SolveHandResponse(linking=convert.linking_to_proto(domain))
    assert reply.linking.points == domain.points


def test_solve_hand_is_order_free_and_canonical(stub) -> None:
    cards = "jk jk 5h 9c kd qs 2d 6s 8h 3c".split()
    first = stub.SolveHand(pb.SolveHandRequest(cards=cards), timeout=10)
    shuffled = cards[::-1]
    second = stub.SolveHand(pb.SolveHandRequest(cards=shuffled), timeout=10)
    assert first.SerializeToString() == second.SerializeToString()
    run = next(group for group in first.linking.groups if group.kind == pb.GROUP_KIND_RUN)
    assert list(run.cards) == ["5H", "JK", "JK", "8H"]
    assert list(run.stands_for) == ["5H", "6H", "7H", "8H"]


@pytest.mark.parametrize("cards, discard, kind, multiplier", CLOSES)
def test_check_close_of_11_cards_on_the_rule_book_examples(stub, cards, discard, kind, multiplier) -> None:
    reply = stub.CheckClose(pb.CheckCloseRequest(cards=cards.split()), timeout=10)
    assert (reply.close.valid, reply.close.discard, reply.close.kind, reply.close.multiplier) == (
        True,
        discard,
        kind,
        multiplier,
    )
    domain = closing.best_close(parse_cards(cards.split()), RULES)
    assert reply.close == convert.close_to_proto(domain)
    assert not reply.claims


@pytest.mark.parametrize("cards, discard, kind, multiplier", CLOSES)
def test_check_close_of_10_cards_and_a_discard(stub, cards, discard, kind, multiplier) -> None:
    shown = cards.split()
    shown.remove(discard)
    reply = stub.CheckClose(
        pb.CheckCloseRequest(cards=shown, discard=discard, claimed_kind=kind, claimed_multiplier=multiplier + 1),
        timeout=10,
    )
    assert (reply.close.valid, reply.close.kind, reply.close.multiplier) == (True, kind, multiplier)
    domain = closing.check_close(parse_cards(shown), Card.parse(discard), RULES)
    assert reply.close == convert.close_to_proto(domain)
    assert [(c.field, c.verdict) for c in reply.claims] == [
        ("claimed_kind", pb.VERDICT_CONFIRMED),
        ("claimed_multiplier", pb.VERDICT_WRONG),
    ]
    assert reply.claims[1].expected == str(multiplier)


@pytest.mark.parametrize(
    "joker_discard, eleven, ten",
    [
        (pb.JOKER_DISCARD_UNSPECIFIED, ("JK", pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN), pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN),
        (pb.JOKER_DISCARD_CLEAN, ("JK", pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN), pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN),
        (pb.JOKER_DISCARD_NOT_CLEAN, ("AH", pb.CLOSE_KIND_STRAIGHT_FLUSH), pb.CLOSE_KIND_STRAIGHT_FLUSH),
        (pb.JOKER_DISCARD_FORBIDDEN, ("AH", pb.CLOSE_KIND_STRAIGHT_FLUSH), pb.CLOSE_KIND_UNSPECIFIED),
    ],
)
def test_the_joker_discard_option_on_both_close_paths(stub, joker_discard, eleven, ten) -> None:
    run = "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H".split()
    rules = pb.RuleOptions(joker_discard=joker_discard)
    reply = stub.CheckClose(pb.CheckCloseRequest(cards=[*run, "JK"], rules=rules), timeout=10)
    assert (reply.close.discard, reply.close.kind) == eleven
    reply = stub.CheckClose(pb.CheckCloseRequest(cards=run, discard="JK", rules=rules), timeout=10)
    assert (reply.close.valid, reply.close.kind) == (ten != pb.CLOSE_KIND_UNSPECIFIED, ten)


@pytest.mark.parametrize(
    "cards, unlinked",
    [
        ("AH 2H 3H 5H 7H 8H 9H JH QH KH 4C", ["5H"]),  # a color close leaves its loose card
        ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC", []),
        ("AH 2H 3H 5C 5D 5S KS KD 9C 4D QD", ["9C", "4D", "KD", "KS"]),  # no close: what stays unlinked
    ],
)
def test_the_close_lists_its_unlinked_cards(stub, cards, unlinked) -> None:
    reply = stub.CheckClose(pb.CheckCloseRequest(cards=cards.split()), timeout=10)
    assert list(reply.close.unlinked) == unlinked
    shown = {card for group in reply.close.groups for card in group.cards}
    assert not shown & set(unlinked)


def test_a_confirmed_claim_carries_the_referees_value(stub) -> None:
    request = pb.CheckCloseRequest(cards="AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC".split(), claimed_multiplier=6)
    request.claimed_kind = pb.CLOSE_KIND_STRAIGHT_FLUSH_CLEAN
    reply = stub.CheckClose(request, timeout=10)
    assert [(c.verdict, c.expected) for c in reply.claims] == [
        (pb.VERDICT_CONFIRMED, "STRAIGHT_FLUSH_CLEAN"),
        (pb.VERDICT_CONFIRMED, "6"),
    ]


def test_an_invalid_close_is_an_ok_reply(stub) -> None:
    reply = stub.CheckClose(
        pb.CheckCloseRequest(cards=OTHER_33.split(), discard="QD", claimed_kind=pb.CLOSE_KIND_UNSPECIFIED), timeout=10
    )
    assert not reply.close.valid
    assert reply.close.kind == pb.CLOSE_KIND_UNSPECIFIED and reply.close.multiplier == 0
    assert "neither linked nor of one suit" in reply.close.reason
    assert [(c.field, c.verdict) for c in reply.claims] == [("claimed_kind", pb.VERDICT_CONFIRMED)]


def test_score_deal_head_to_head_example(stub) -> None:
    request = base_deal()
    request.claims.close_kind = pb.CLOSE_KIND_LINKED_CLEAN
    request.claims.players.add(player=1, points=33, score_change=0)
    request.claims.players.add(player=0, score_change=60, groups=[pb.ClaimedGroup(cards=["2S", "3S", "4S"])])
    reply = stub.ScoreDeal(request, timeout=10)
    assert reply.close.kind == pb.CLOSE_KIND_LINKED_CLEAN and reply.close.multiplier == 2
    assert [(p.name, p.closer, p.points, p.score_change, p.score) for p in reply.players] == [
        ("ana", True, 0, 66, 66),
        ("bob", False, 33, 0, 0),
    ]
    assert not reply.match_over and reply.winner == ""
    assert [(c.field, c.verdict) for c in reply.claims] == [
        ("claims.close_kind", pb.VERDICT_CONFIRMED),
        ("claims.players[0].points", pb.VERDICT_CONFIRMED),
        ("claims.players[0].score_change", pb.VERDICT_CONFIRMED),
        ("claims.players[1].groups", pb.VERDICT_VALID_NOT_BEST),
        ("claims.players[1].score_change", pb.VERDICT_WRONG),
    ]
    assert reply == handlers.score_deal(request)


def test_claim_verdicts_name_the_player_they_are_about(stub) -> None:
    request = base_deal()
    request.claims.multiplier = 2
    request.claims.players.add(player=1, points=30)
    request.claims.players.add(player=0, new_score=66)
    reply = stub.ScoreDeal(request, timeout=10)
    assert [(c.field, c.HasField("player"), c.player, c.player_name) for c in reply.claims] == [
        ("claims.multiplier", False, 0, ""),
        ("claims.players[0].points", True, 1, "bob"),
        ("claims.players[1].new_score", True, 0, "ana"),
    ]
    # The same in a dispute stream's verdict, and in its JSON as a client reads it.
    (verdict,) = stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="d", deal=request)]), timeout=10)
    assert list(verdict.claims) == list(reply.claims)
    assert '"playerName": "bob"' in json_format.MessageToJson(verdict)


def test_a_kind_claimed_of_a_false_close_says_why_there_is_no_kind(stub) -> None:
    request = pb.CheckCloseRequest(cards=OTHER_33.split(), discard="QD", claimed_kind=pb.CLOSE_KIND_LINKED)
    reply = stub.CheckClose(request, timeout=10)
    assert not reply.close.valid
    (claim,) = reply.claims
    assert (claim.field, claim.verdict, claim.claimed, claim.expected) == (
        "claimed_kind",
        pb.VERDICT_WRONG,
        "LINKED",
        "",
    )
    assert claim.reason == f"the close is not valid: {reply.close.reason}"
    assert not claim.HasField("player") and claim.player_name == ""


@pytest.mark.parametrize("mode", [pb.SCORING_MODE_POOL, pb.SCORING_MODE_ELIMINATION])
def test_score_deal_other_modes_agree_with_the_domain(stub, mode) -> None:
    request = base_deal()
    request.deal.players.add(cards="2D 2D 9D 9D 4S 7D KH QH QC JK".split(), score=90)
    request.deal.players[0].name = ""  # unnamed: "player1"
    request.rules.scoring.mode = mode
    reply = stub.ScoreDeal(request, timeout=10)
    domain = scoring.score_deal(
        Deal(
            players=(
                PlayerHand("player1", parse_cards(CLOSER_LINKED_CLEAN.split())),
                PlayerHand("bob", parse_cards(OTHER_33.split())),
                PlayerHand("player3", parse_cards("2D 2D 9D 9D 4S 7D KH QH QC JK".split()), 90),
            ),
            closer=0,
            discard=Card.parse("KH"),
        ),
        RULES.with_options(scoring=convert.rules_from_proto(request.rules).scoring),
    )
    assert [(p.name, p.points, p.score_change, p.score, p.eliminated) for p in reply.players] == [
        (p.name, p.points, p.score_change, p.score, p.eliminated) for p in domain.players
    ]
    assert (reply.match_over, reply.winner) == (domain.match_over, domain.winner or "")
    if mode == pb.SCORING_MODE_ELIMINATION:
        # 90 + 43 x 2 passes the limit of 100.
        assert reply.players[2].eliminated


def test_piles_absent_or_empty(stub) -> None:
    request = base_deal()
    request.deal.discard_pile.SetInParent()  # given and empty
    assert stub.ScoreDeal(request, timeout=10).close.valid
    request.deal.stock.SetInParent()  # both piles given: the deck must be complete
    with pytest.raises(grpc.RpcError) as caught:
        stub.ScoreDeal(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violation(caught.value).field == "deal.stock"


def test_every_reply_names_the_process_and_the_request(stub) -> None:
    reply, call = stub.SolveHand.with_call(
        pb.SolveHandRequest(cards=["AH"]), metadata=(("x-request-id", "abc-123"),), timeout=10
    )
    trailing = dict(call.trailing_metadata())
    assert trailing["x-referee-pid"] == str(os.getpid())
    assert trailing["x-request-id"] == "abc-123"
    assert reply.linking.unlinked == ["AH"]


def test_a_request_answered_before_gets_the_remembered_reply_without_a_lookup_or_a_slot(own_server) -> None:
    """The first answer is computed on a compute slot; the same request again gets the reply the
    process remembers, with no lookup of the linking cache at all, even once that cache has let
    the answer go. Every lookup is seen where it ran (the linking observer is the metrics' hook)."""
    seen: list[tuple[str, str]] = []

    class Where:
        def looked_up(self, hit: bool) -> None:
            seen.append((threading.current_thread().name, "hit" if hit else "miss"))

        def solved(self, engine: str, seconds: float) -> None:
            pass

    # Rules of their own: no other test has this hand's answer in the cache.
    request = pb.SolveHandRequest(cards=OTHER_33.split(), rules=pb.RuleOptions(joker_points=next(_fresh_joker_points)))
    other = pb.SolveHandRequest(cards=OTHER_33.split()[:-1], rules=request.rules)
    chan, stub = _run_stub(own_server(threads=1))
    observe_linkings(Where())
    try:
        with chan:
            first = stub.SolveHand(request, timeout=10)
            again = stub.SolveHand(request, timeout=10)
            forget_linkings()
            lost = stub.SolveHand(request, timeout=10)
            different = stub.SolveHand(other, timeout=10)
    finally:
        observe_linkings(None)
    assert first == again == lost and first.linking.points == 33
    assert different.linking.points != 33
    # The first and the different request: a miss, solved on the compute slot; the other two: no lookup.
    assert seen == [("compute_0", "miss"), ("compute_0", "miss")]


def test_a_search_solve_runs_on_the_loop_and_a_cpsat_solve_on_a_slot(own_server) -> None:
    """A SolveHand with the search engine is small: it is answered on the event loop (no hand-off
    to a compute thread and back), with the very reply the domain gives; the same hand on CP-SAT
    still goes to a slot. Every lookup is seen where it ran."""
    seen: list[str] = []

    class Where:
        def looked_up(self, hit: bool) -> None:
            seen.append(threading.current_thread().name)

        def solved(self, engine: str, seconds: float) -> None:
            pass

    points = next(_fresh_joker_points)  # rules of their own: nothing cached
    search = pb.SolveHandRequest(
        cards=OTHER_33.split(), rules=pb.RuleOptions(joker_points=points, engine=pb.ENGINE_SEARCH)
    )
    cpsat = pb.SolveHandRequest(
        cards=OTHER_33.split(), rules=pb.RuleOptions(joker_points=points, engine=pb.ENGINE_CPSAT)
    )
    chan, stub = _run_stub(own_server(threads=1))
    observe_linkings(Where())
    try:
        with chan:
            on_loop = stub.SolveHand(search, timeout=10)
            on_slot = stub.SolveHand(cpsat, timeout=10)
    finally:
        observe_linkings(None)
    assert on_loop == handlers.solve_hand(search) and on_slot == handlers.solve_hand(cpsat)
    assert seen[0] != "compute_0" and seen[1:] == ["compute_0"]


def test_a_search_solve_keeps_the_clients_share_and_the_deadline(own_server) -> None:
    # Answered on the loop, it is still a call of its client: refused while the client has its
    # share of calls admitted (heavy ones holding the one slot), and a deadline already passed is
    # the client's answer.
    chan, stub = _run_stub(own_server(threads=1, max_calls_per_client=2))
    search = pb.SolveHandRequest(cards=OTHER_33.split(), rules=pb.RuleOptions(engine=pb.ENGINE_SEARCH))
    with chan:
        # The heavy calls last tens of milliseconds each: a round in which they were done before
        # the search call came proves nothing, and is tried again.
        for _ in range(20):
            heavy = [stub.SolveHand.future(heavy_hand(), timeout=30) for _ in range(2)]
            time.sleep(0.01)
            try:
                stub.SolveHand(search, timeout=10)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                assert "this client already has 2 calls" in str(error.details())
                break
            finally:
                for call in heavy:
                    assert call.result().linking.points == 2
        else:
            pytest.fail("the search call was never refused while the client had its share admitted")
        assert stub.SolveHand(search, timeout=10).linking.points == 33
    # The time budget holds on the loop too: a server whose cap no solve fits in answers
    # DEADLINE_EXCEEDED (a client's own tiny deadline may be beaten by a reply on loopback).
    chan, stub = _run_stub(own_server(threads=1, solve_cap_seconds=0.000_001))
    with chan, pytest.raises(grpc.RpcError) as caught:
        stub.SolveHand(pb.SolveHandRequest(cards=OTHER_33.split()[:9], rules=search.rules), timeout=10)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_the_text_log_lines_are_loggings_own() -> None:
    # The log's formatter writes the time of day once a second; every line is still the one
    # logging.Formatter writes, whatever the second and the milliseconds.
    from referee.server.logs import TextFormatter

    text = "%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"
    ours, theirs = TextFormatter(text), logging.Formatter(text)
    rng = random.Random(5)
    times = sorted(rng.uniform(0, 2e9) for _ in range(500)) + [time.time(), 1e9 + 0.9995, 1e9 + 1.0]
    for created in times:
        record = logging.makeLogRecord({"msg": "SolveHand OK %s", "args": ("1.00ms",), "name": "referee.service"})
        record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
        assert ours.format(record) == theirs.format(record)


def test_remembered_replies_are_bounded_by_count_and_bytes_and_skip_large_ones() -> None:
    replies = Replies(size=3, max_bytes=100)
    for n in range(5):
        replies.remember("SolveHand", bytes([n]), b"r%d" % n)
    assert len(replies) == 3 and replies.get("SolveHand", b"\0") is None  # the least recent went
    assert replies.get("SolveHand", b"\4") == b"r4"
    assert replies.get("CheckClose", b"\4") is None  # the method is part of the key
    replies.remember("SolveHand", b"x" * 10, b"y" * 60)  # 70 bytes: the others (9) make it 79
    assert replies.bytes == sum(len(k) + len(v) for k, v in [(b"\3", b"r3"), (b"\4", b"r4"), (b"x" * 10, b"y" * 60)])
    replies.remember("SolveHand", b"z", b"y" * 40)  # over 100 bytes: the least recent go first
    assert replies.bytes <= 100 and replies.get("SolveHand", b"z") == b"y" * 40
    assert replies.get("SolveHand", b"\3") is None
    big = Replies()
    big.remember("SolveHand", b"q" * 2048, b"r")  # too large a request
    big.remember("SolveHand", b"q", b"r" * 8192)  # too large a reply
    assert len(big) == 0 and big.bytes == 0


# Health and reflection -------------------------------------------------------------------------


@pytest.mark.parametrize("service", ["", SERVICE_NAME])
def test_health_check(channel, service) -> None:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_health_check_of_an_unknown_service_is_not_found(channel) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_watch(channel) -> None:
    stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
    try:
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        stream.cancel()


def test_reflection_lists_the_services(channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
    names = {service.name for reply in replies for service in reply.list_services_response.service}
    assert {SERVICE_NAME, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names


def test_reflection_describes_the_contract(channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE_NAME)
    reply = next(iter(stub.ServerReflectionInfo(iter([request]), timeout=5)))
    assert reply.file_descriptor_response.file_descriptor_proto


def test_reflection_can_be_turned_off(own_server) -> None:
    chan, _ = _run_stub(own_server(reflection=False))
    with chan:
        stub = reflection_pb2_grpc.ServerReflectionStub(chan)
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


# Malformed input ---------------------------------------------------------------------------------


def _solve(cards: str, **rules: object) -> tuple[str, pb.SolveHandRequest]:
    return "SolveHand", pb.SolveHandRequest(cards=cards.split(), rules=pb.RuleOptions(**rules))


def _close(cards: str, discard: str = "", **fields: object) -> tuple[str, pb.CheckCloseRequest]:
    return "CheckClose", pb.CheckCloseRequest(cards=cards.split(), discard=discard, **fields)


def _deal(change) -> tuple[str, pb.ScoreDealRequest]:  # type: ignore[no-untyped-def]
    request = base_deal()
    change(request)
    return "ScoreDeal", request


def _set(path: str, value: object):  # type: ignore[no-untyped-def]
    def change(request: pb.ScoreDealRequest) -> None:
        *parents, last = path.split(".")
        target: object = request
        for part in parents:
            name, _, index = part.partition("[")
            target = getattr(target, name)
            if index:
                target = target[int(index[:-1])]  # type: ignore[index]
        name, _, index = last.partition("[")
        if index:
            getattr(target, name)[int(index[:-1])] = value
        elif isinstance(value, list):
            getattr(target, name)[:] = value
        else:
            setattr(target, name, value)

    return change


def _bad_claim_group(request: pb.ScoreDealRequest) -> None:
    claim = request.claims.players.add(player=1)
    claim.groups.add(cards=["5C", "5D", "5S"])
    claim.groups.add(cards=["KS", "KD", "K?"])


def _third_nine(request: pb.ScoreDealRequest) -> None:
    request.deal.players[0].cards[7] = "9C"  # the closer's second 9C; bob's is then a third


MALFORMED = {
    "bad card code": (_solve("AH 2H 3H ZZ"), "cards[3]", "ZZ"),
    "bad card with a symbol": (_solve("AH 2H 3H 11♥"), "cards[3]", "11♥"),
    "too many cards": (
        _solve(" ".join(["2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "10C", "JC", "QC", "KC"])),
        "cards",
        12,
    ),
    "no cards": (_solve(""), "cards", 0),
    "too many copies": (_solve("AH 2H AH AH"), "cards[3]", "AH"),
    "too many jokers": (_solve("JK JK JK JK JK"), "cards[4]", "JK"),
    "copies beyond the decks option": (_solve("AH AH", decks=1), "cards[1]", "AH"),
    "decks out of range": (_solve("AH", decks=0), "rules.decks", 0),
    "joker points out of range": (_solve("AH", joker_points=-1), "rules.joker_points", -1),
    "unknown joker limit": (_solve("AH", joker_limit=42), "rules.joker_limit", 42),
    "unknown joker discard": (_solve("AH", joker_discard=9), "rules.joker_discard", 9),
    "unknown engine": (_solve("AH", engine=17), "rules.engine", 17),
    "multiplier without a kind": (
        _solve("AH", multipliers=[pb.Multiplier(multiplier=3)]),
        "rules.multipliers[0].kind",
        "CLOSE_KIND_UNSPECIFIED",
    ),
    "multiplier out of range": (
        _solve("AH", multipliers=[pb.Multiplier(kind=pb.CLOSE_KIND_LINKED, multiplier=0)]),
        "rules.multipliers[0].multiplier",
        0,
    ),
    "unknown scoring mode": (_solve("AH", scoring=pb.ScoringOptions(mode=9)), "rules.scoring.mode", 9),
    "close of 9 cards": (_close("AH 2H 3H 4H 5H 6H 7H 8H 9H"), "cards", 9),
    "close of 10 cards without a discard": (_close("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H"), "discard", ""),
    "close with a bad discard": (_close("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H", "1X"), "discard", "1X"),
    "close of 11 cards and a discard": (_close("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC", "KD"), "discard", "KD"),
    "close with a bad card": (_close("AH 2H 3H 4H 5H 6H 7H 8H 9H XX KC"), "cards[9]", "XX"),
    "close with a third copy as the discard": (_close("AH AH 3H 4H 5H 6H 7H 8H 9H 10H", "AH"), "discard", "AH"),
    "close with an unknown claimed kind": (
        _close("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC", claimed_kind=99),
        "claimed_kind",
        99,
    ),
    "deal of one player": (_deal(lambda r: r.deal.players.pop()), "deal.players", 1),
    "deal of eleven players": (_deal(lambda r: r.deal.players.extend([r.deal.players[1]] * 9)), "deal.players", 11),
    "closer out of range": (_deal(_set("deal.closer", 2)), "deal.closer", 2),
    "negative closer": (_deal(_set("deal.closer", -1)), "deal.closer", -1),
    "eliminated player in the deal": (_deal(_set("deal.eliminated", ["cy", "bob"])), "deal.players[1].name", "bob"),
    "same name twice": (_deal(_set("deal.players[1].name", "ana")), "deal.players[1].name", "ana"),
    "bad card in a hand": (_deal(_set("deal.players[1].cards[4]", "5Z")), "deal.players[1].cards[4]", "5Z"),
    "hand of 9 cards": (_deal(lambda r: r.deal.players[1].cards.pop()), "deal.players[1].cards", 9),
    "bad deal discard": (_deal(_set("deal.discard", "")), "deal.discard", ""),
    "bad card in the discard pile": (
        _deal(_set("deal.discard_pile.cards", ["QQ"])),
        "deal.discard_pile.cards[0]",
        "QQ",
    ),
    "bad card in the stock": (_deal(_set("deal.stock.cards", ["AD", "ZZ"])), "deal.stock.cards[1]", "ZZ"),
    "too many copies in a deal": (_deal(_third_nine), "deal.players[1].cards[8]", "9C"),
    "score already out": (
        _deal(lambda r: (_set("deal.players[1].score", -5)(r), _set("rules.scoring.mode", pb.SCORING_MODE_POOL)(r))),
        "deal.players[1].score",
        -5,
    ),
    "score too large": (_deal(_set("deal.players[0].score", 2_000_000_000)), "deal.players[0].score", 2_000_000_000),
    "bad card in a claimed group": (_deal(_bad_claim_group), "claims.players[0].groups[1].cards[2]", "K?"),
    "claim about no such player": (_deal(lambda r: r.claims.players.add(player=5)), "claims.players[0].player", 5),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_input_is_invalid_argument_naming_field_and_value(stub, case) -> None:
    (method, request), field, value = case
    with pytest.raises(grpc.RpcError) as caught:
        getattr(stub, method)(request, timeout=10)
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    violation = field_violation(error)
    assert violation.field == field
    assert repr(value) in violation.description
    assert field in error.details()


def test_the_same_malformed_request_through_the_handler_raises_the_same_field() -> None:
    # The command line calls the handlers directly: the same error, no gRPC in between.
    (_, request), field, _ = MALFORMED["bad card in a hand"]
    with pytest.raises(ValueError) as caught:
        handlers.score_deal(request)
    assert caught.value.field == field  # type: ignore[attr-defined]


# Errors nobody expects ----------------------------------------------------------------------------


def test_an_unexpected_error_is_internal_generic_and_logged(caplog) -> None:
    try:
        raise KeyError("secret internals")
    except KeyError as error:
        with caplog.at_level(logging.ERROR, logger="referee.service"):
            status = status_for(error, "req-42")
    assert status.code == grpc.StatusCode.INTERNAL
    assert status.details == "internal error (request id req-42)"
    assert "secret" not in status.details
    record = caplog.records[-1]
    assert "req-42" in record.getMessage() and record.exc_info is not None


@pytest.mark.parametrize(
    "error, time_cap_hit, code",
    [
        (SolverTimeout("CP-SAT proved no optimum within its time for AH"), False, grpc.StatusCode.DEADLINE_EXCEEDED),
        (SolverTimeout("the time budget ran out before solving AH"), True, grpc.StatusCode.DEADLINE_EXCEEDED),
        # The type decides, not the text: an error that happens to say UNKNOWN is still internal.
        (SolverError("CP-SAT found no proven optimum (UNKNOWN) for AH"), False, grpc.StatusCode.INTERNAL),
        (SolverError("CP-SAT found no proven optimum (MODEL_INVALID) for AH"), False, grpc.StatusCode.INTERNAL),
        (SolverError("CP-SAT found no proven optimum (MODEL_INVALID) for AH"), True, grpc.StatusCode.DEADLINE_EXCEEDED),
    ],
)
def test_solver_errors(error, time_cap_hit, code) -> None:
    status = status_for(error, "req-1", time_cap_hit=time_cap_hit)
    assert status.code == code
    assert "AH" not in status.details  # the hand stays in the log


# Limits ----------------------------------------------------------------------------------------


def test_a_1ms_deadline_is_deadline_exceeded_and_the_server_keeps_serving(stub) -> None:
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        stub.SolveHand(heavy_hand(), timeout=0.001)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < 2
    assert stub.SolveHand(pb.SolveHandRequest(cards=OTHER_33.split()), timeout=10).linking.points == 33
    assert stub.SolveHand(heavy_hand(), timeout=30).linking.points == 2  # the two left over


def test_the_server_solve_cap(own_server) -> None:
    # A cap well below what the heavy hand takes: the call either stops inside the solver or is
    # caught overrunning it after, and both say so.
    chan, stub = _run_stub(own_server(solve_cap_seconds=0.001))
    with chan:
        with pytest.raises(grpc.RpcError) as caught:
            stub.SolveHand(heavy_hand(), timeout=30)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "time budget" in caught.value.details()
        # The server still answers. Even one card may overrun a 1 ms cap on a busy machine, and
        # then the answer says so.
        try:
            assert stub.SolveHand(pb.SolveHandRequest(cards=["AH"]), timeout=10).linking.points == 1
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error
            assert "time budget" in error.details()


def test_a_message_over_the_size_limit_is_resource_exhausted(stub) -> None:
    huge = pb.SolveHandRequest(cards=["AH" * 512] * 1100)  # about 1.1 MiB
    assert huge.ByteSize() > 1 << 20
    with pytest.raises(grpc.RpcError) as caught:
        stub.SolveHand(huge, timeout=10)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stub.SolveHand(pb.SolveHandRequest(cards=["AH", "2H", "3H"]), timeout=10).linking.points == 0


def test_calls_beyond_the_concurrency_limit_are_resource_exhausted(own_server) -> None:
    chan, stub = _run_stub(own_server(threads=1, max_concurrent=2))
    with chan:
        calls = [stub.SolveHand.future(heavy_hand(), timeout=30) for _ in range(8)]
        codes = []
        for call in calls:
            try:
                call.result()
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                codes.append(error.code())
        assert set(codes) == {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, codes
        assert stub.SolveHand(pb.SolveHandRequest(cards=["AH"]), timeout=10).linking.points == 1


# Load ------------------------------------------------------------------------------------------


def _request_pool() -> list[tuple[str, object]]:
    rng = random.Random(20261130)
    cards = [card.code() for card in deck(2)]
    pool: list[tuple[str, object]] = []
    for _ in range(40):
        pool.append(("SolveHand", pb.SolveHandRequest(cards=rng.sample(cards, 10))))
    for _ in range(8):
        pool.append(("CheckClose", pb.CheckCloseRequest(cards=rng.sample(cards, 11))))
    for hand, *_ in HANDS[:2]:
        pool.append(("SolveHand", pb.SolveHandRequest(cards=hand.split(), rules=pb.RuleOptions(joker_points=25))))
    for _ in range(4):
        dealt = rng.sample(cards, 31)
        pool.append(
            (
                "ScoreDeal",
                pb.ScoreDealRequest(
                    deal=pb.Deal(
                        players=[pb.Player(cards=dealt[i * 10 : i * 10 + 10]) for i in range(3)],
                        closer=1,
                        discard=dealt[30],
                    ),
                ),
            )
        )
    pool.append(("ScoreDeal", base_deal()))
    return pool


def test_32_concurrent_clients_of_50_calls_agree_with_the_domain(server_address) -> None:
    pool = _request_pool()
    by_method = {"SolveHand": handlers.solve_hand, "CheckClose": handlers.check_close, "ScoreDeal": handlers.score_deal}
    clients, calls = 32, 50
    barrier = threading.Barrier(clients)

    def client(number: int) -> list[tuple[int, bytes]]:
        answers = []
        with grpc.insecure_channel(server_address) as chan:
            stub = referee_pb2_grpc.RefereeServiceStub(chan)
            grpc.channel_ready_future(chan).result(timeout=10)
            barrier.wait(timeout=20)
            for k in range(calls):
                index = (number * 7 + k) % len(pool)
                method, request = pool[index]
                answers.append((index, getattr(stub, method)(request, timeout=30).SerializeToString()))
        return answers

    with futures.ThreadPoolExecutor(clients) as executor:
        results = list(executor.map(client, range(clients), timeout=50))
    # The domain's answers are computed after the load, so the server solved every hand cold.
    expected = [by_method[method](request).SerializeToString() for method, request in pool]  # type: ignore[operator]
    answered = [pair for answers in results for pair in answers]
    assert len(answered) == clients * calls
    for index, answer in answered:
        assert answer == expected[index], pool[index]


_SMALL_CLOSE = pb.CheckCloseRequest(cards="AH 2H 3H 4H".split())


@contextlib.contextmanager
def _a_stream_held_open(stub: referee_pb2_grpc.RefereeServiceStub) -> Iterator[tuple[futures.Future, threading.Event]]:
    """A CheckDisputes stream that sends one case and then stays open until the event is set
    (at the latest on leaving); yields the future of its verdict ids and that event."""
    release = threading.Event()

    def held_open() -> Iterator[pb.CheckDisputesRequest]:
        yield pb.CheckDisputesRequest(id="held", close=_SMALL_CLOSE)
        release.wait(20)

    with futures.ThreadPoolExecutor(1) as reader:
        try:
            yield reader.submit(lambda: [reply.id for reply in stub.CheckDisputes(held_open(), timeout=30)]), release
        finally:
            release.set()


@contextlib.contextmanager
def _holding_the_stream_slot(
    stub: referee_pb2_grpc.RefereeServiceStub, refused: Callable[[], bool]
) -> Iterator[tuple[futures.Future, threading.Event]]:
    """A stream held open (``_a_stream_held_open``) that has the server's only stream slot, shown
    by ``refused()``, a second stream turned away. Until the held stream is in the servicer a
    second one may get through, and if that one takes the slot first it is the held stream that
    is turned away; so the held stream is opened again until the second one is refused."""
    deadline = time.monotonic() + 20
    while True:
        with _a_stream_held_open(stub) as (first, release):
            time.sleep(0.05)  # a head start
            if refused():
                yield first, release
                return
        assert time.monotonic() < deadline, "the held stream never took the slot"


def test_streams_beyond_the_stream_cap_are_resource_exhausted_and_unary_calls_go_on(own_server) -> None:
    # One stream at a time; the unary calls go on while it lasts.
    chan, stub = _run_stub(own_server(max_streams=1))

    def second_stream() -> grpc.StatusCode:
        try:
            list(stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="second", close=_SMALL_CLOSE)]), timeout=10))
        except grpc.RpcError as error:
            assert "CheckDisputes streams" in error.details()
            return error.code()
        return grpc.StatusCode.OK

    with (
        chan,
        _holding_the_stream_slot(stub, lambda: second_stream() == grpc.StatusCode.RESOURCE_EXHAUSTED) as (
            first,
            release,
        ),
    ):
        # The unary calls are answered while the stream lasts.
        assert stub.SolveHand(pb.SolveHandRequest(cards=["AH"]), timeout=10).linking.points == 1
        assert not first.done()
        release.set()
        assert first.result(timeout=20) == ["held"]
        # The slot is given back when the stream ends.
        assert second_stream() == grpc.StatusCode.OK


def test_the_client_gives_up_on_a_server_busy_for_too_long(own_server) -> None:
    # While the only stream slot stays taken, the client's retries (the batch command's too) end
    # after its patience with the server's RESOURCE_EXHAUSTED, rather than waiting forever.
    from referee.client import Referee

    address = own_server(max_streams=1)
    chan, stub = _run_stub(address)
    referee = Referee(address)

    def gives_up() -> bool:
        started = time.monotonic()
        try:
            cases = [pb.CheckDisputesRequest(id="late", close=_SMALL_CLOSE)]
            list(referee.check_disputes(cases, patience=0.3))
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert 0.3 <= time.monotonic() - started < 5  # it retried, then gave up
            return True
        return False

    with chan, referee, _holding_the_stream_slot(stub, gives_up) as (first, release):
        release.set()
        assert first.result(timeout=20) == ["held"]
