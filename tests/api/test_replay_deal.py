"""ReplayDeal: deal records through the handler and over gRPC (the session's real server on
127.0.0.1), the record cases of CheckDisputes, and malformed records.

The records are the shared simulated corpus (``played``): 2 to 10 players (and a few larger
tables), every rule option, seeded and explicit decks, reshuffles, closes of every kind and on the
first turn, unfinished deals. A complete legal record's ``result`` must be, byte for byte, what
ScoreDeal answers for the end state the reply itself reports; each violation code injected into
them (``test_replay``'s injections) comes back with its turn, seat, code and message.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Any

import grpc
import pytest
from played import Played, corpus
from servers import field_violation
from test_replay import INJECTIONS

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import convert, handlers, records
from referee.api.convert import deal_to_proto
from referee.api.disputes import judge_case
from referee.game.cards import deck
from referee.game.errors import RefereeError
from referee.game.rules import DiscardTaken, Engine, RuleSet
from referee.play.record import DrawSource, Record, Seat, Turn
from referee.play.replay import ViolationCode, replay
from referee.play.simulate import simulate

pytestmark = pytest.mark.timeout(120)

Stub = referee_pb2_grpc.RefereeServiceStub
FAST = RuleSet(engine=Engine.SEARCH)
CODES = {code: pb.ViolationCode.Value(f"VIOLATION_CODE_{code.name}") for code in ViolationCode}


def end_state(request: pb.ReplayDealRequest, response: pb.ReplayDealResponse) -> pb.ScoreDealRequest:
    """The ScoreDeal request of the end state a ReplayDeal reply reports (its hands, close and
    piles), under the request's rules and claims."""
    assert response.HasField("closer")
    return pb.ScoreDealRequest(
        deal=pb.Deal(
            players=response.hands,
            closer=response.closer,
            discard=response.discard,
            discard_pile=response.discard_pile,
            stock=response.stock,
            eliminated=request.record.eliminated,
        ),
        rules=request.rules,
        claims=request.claims,
    )


def claims_for(played: Played, rng: random.Random) -> pb.DealClaims | None:
    """Claims about a record's result, some right and some wrong, for about a third of the records."""
    if rng.random() < 0.66:
        return None
    claims = pb.DealClaims(close_kind=rng.randint(0, 7))
    if rng.random() < 0.5:
        claims.multiplier = rng.choice((1, 2, 10))
    for player in rng.sample(range(len(played.record.seats)), 2):
        claims.players.add(player=player, points=rng.choice((0, 9, 20)), score_change=rng.choice((0, -9, 40)))
    return claims


def bytes_of(message: pb.ScoreDealResponse) -> bytes:
    return message.SerializeToString(deterministic=True)


def check_answer(played: Played, request: pb.ReplayDealRequest, response: pb.ReplayDealResponse) -> None:
    """The reply agrees with the domain's replay of the record, state and all."""
    record = played.record
    result = replay(record)
    assert response.legal and not response.HasField("violation"), played.index
    assert response.turns_played == len(record.turns)
    assert response.complete == result.complete
    assert [(h.name, list(h.cards)) for h in response.hands] == [
        (h.name, [c.code() for c in h.cards]) for h in result.hands
    ]
    assert [h.score if h.HasField("score") else None for h in response.hands] == [s.score for s in record.seats]
    assert list(response.discard_pile.cards) == [c.code() for c in result.discard_pile]
    assert list(response.stock.cards) == [c.code() for c in result.stock]
    assert response.reshuffles == result.reshuffles
    if not result.complete:
        assert not response.HasField("result") and not response.claims and not response.discard
        assert response.to_play == result.to_play and not response.HasField("closer")
        return
    assert result.deal is not None
    assert end_state(request, response).deal == deal_to_proto(result.deal)
    assert response.discard == result.deal.discard.code() and not response.HasField("to_play")
    assert list(response.claims) == list(response.result.claims)


@pytest.fixture(scope="module")
def simulated() -> tuple[Played, ...]:
    """The simulated corpus, for every test here that reads it: a module fixture, so those tests run on
    one worker (tests/conftest.py) and the corpus is simulated there once, not on each worker."""
    return corpus()


# Thousands of records through the handler ------------------------------------------------------


def test_a_record_and_its_rules_round_trip_through_their_messages(simulated: tuple[Played, ...]) -> None:
    for played in simulated:
        record = played.record
        request = records.request_of(record)
        rules = convert.rules_from_proto(request.rules)
        assert rules == record.rules, played.index
        assert records.record_from_proto(request.record, rules) == record, played.index


def test_simulated_records_replay_legal_and_score_as_score_deal_through_the_handler(
    simulated: tuple[Played, ...],
) -> None:
    rng = random.Random(5)
    seen: Counter[str] = Counter()
    for played in simulated:
        request = records.request_of(played.record, claims_for(played, rng))
        response = handlers.replay_deal(request)
        check_answer(played, request, response)
        if response.complete:
            scored = handlers.score_deal(end_state(request, response))
            assert bytes_of(response.result) == bytes_of(scored), played.index
            seen["claims"] += len(response.claims)
            seen["complete"] += 1
        seen["seeded" if played.seeded else "explicit"] += 1
        seen[f"players {len(played.record.seats)}"] += 1
    assert seen["complete"] > 1400 and seen["claims"] > 1000, seen
    assert seen["seeded"] > 500 and seen["explicit"] > 500, seen
    assert all(seen[f"players {n}"] for n in range(2, 11)), seen


def test_more_records_of_every_table_size_through_the_handler() -> None:
    # 500 more records, every table size of two decks, a few stacked decks (first-turn closes).
    checked = 0
    for seed in range(500):
        players = 2 + seed % 9
        record = simulate(10_000 + seed, players, FAST, seeded=seed % 2 == 0, stacked=seed % 17 == 0)
        request = records.request_of(record)
        response = handlers.replay_deal(request)
        assert response.legal and response.turns_played == len(record.turns), seed
        if response.complete:
            assert bytes_of(response.result) == bytes_of(handlers.score_deal(end_state(request, response))), seed
            checked += 1
    assert checked > 450


# Over gRPC -------------------------------------------------------------------------------------


def test_simulated_records_over_grpc_score_as_score_deal_over_grpc(stub: Stub, simulated: tuple[Played, ...]) -> None:
    rng = random.Random(6)
    complete = 0
    for played in simulated[:300]:
        request = records.request_of(played.record, claims_for(played, rng))
        response = stub.ReplayDeal(request, timeout=30)
        check_answer(played, request, response)
        assert response.SerializeToString(deterministic=True) == handlers.replay_deal(request).SerializeToString(
            deterministic=True
        )
        if response.complete:
            scored = stub.ScoreDeal(end_state(request, response), timeout=30)
            assert bytes_of(response.result) == bytes_of(scored), played.index
            complete += 1
    assert complete > 250


@pytest.mark.parametrize("code", list(INJECTIONS), ids=lambda code: code.value)
def test_each_violation_over_grpc_names_its_turn_seat_and_code(
    stub: Stub, code: ViolationCode, simulated: tuple[Played, ...]
) -> None:
    rng = random.Random(f"grpc {code.value}")
    records_ = list(simulated)
    rng.shuffle(records_)
    found = 0
    for played in records_:
        made = INJECTIONS[code](played, rng)
        if made is None:
            continue
        record, turn = made
        expected = replay(record)
        assert expected.violation is not None
        request = records.request_of(record, pb.DealClaims(close_kind=pb.CLOSE_KIND_LINKED))
        response = stub.ReplayDeal(request, timeout=30)
        # A turn after the close leaves the deal closed by a legal close: complete, yet not legal.
        assert not response.legal and response.complete == (code is ViolationCode.TURN_AFTER_CLOSE)
        violation = response.violation
        assert (violation.turn, violation.code) == (turn, CODES[code])
        assert (violation.seat, violation.message) == (expected.violation.seat, expected.violation.message)
        assert response.turns_played == max(turn - 1, 0)
        assert list(response.stock.cards) == [c.code() for c in expected.stock]
        # Nothing after the violation is judged: no result, no claims answered.
        assert not response.HasField("result") and not response.claims
        found += 1
        if found == 3:
            break
    assert found == 3


def test_an_unfinished_record_is_legal_so_far_with_the_seat_to_play(stub: Stub) -> None:
    record = simulate(3, 4, FAST, closing=False, max_turns=9)
    response = stub.ReplayDeal(records.request_of(record), timeout=30)
    assert response.legal and not response.complete and response.turns_played == 9
    assert response.to_play == (record.dealer + 10) % 4
    assert not response.HasField("result") and not response.HasField("closer") and response.discard == ""


def test_discard_taken_is_a_rule_option_of_the_request(stub: Stub) -> None:
    # From the canonical deck ana is dealt AC (the top card) and throws it; beto takes it and
    # throws it back: allowed by default, a violation when forbidden.
    ace = deck(2)[0]
    record = Record(
        seats=(Seat("ana"), Seat("beto")),
        dealer=1,
        deck=deck(2),
        turns=(Turn(DrawSource.STOCK, ace), Turn(DrawSource.DISCARD, ace)),
        rules=FAST,
    )
    request = records.request_of(record)
    assert stub.ReplayDeal(request, timeout=30).legal
    request.rules.discard_taken = pb.DISCARD_TAKEN_FORBIDDEN
    response = stub.ReplayDeal(request, timeout=30)
    assert (response.violation.turn, response.violation.code) == (2, pb.VIOLATION_CODE_DISCARD_TAKEN)
    assert replay(replace(record, rules=FAST.with_options(discard_taken=DiscardTaken.FORBIDDEN))).violation


# Malformed records -----------------------------------------------------------------------------


def _base() -> pb.ReplayDealRequest:
    record = simulate(11, 3, FAST, seeded=False)
    request = records.request_of(record)
    assert len(request.record.turns) >= 4
    return request


def _seeded() -> pb.ReplayDealRequest:
    return records.request_of(simulate(12, 3, FAST))


def _set(request: pb.ReplayDealRequest, change: str) -> pb.ReplayDealRequest:
    record = request.record
    if change == "card":
        record.turns[3].discard = "1H"
    elif change == "drawn":
        record.turns[2].drawn = "ZZ"
    elif change == "extra copy":
        # A third copy of the top card, in place of the last card that is not one.
        last = max(i for i, code in enumerate(record.deck.cards) if code != record.deck.cards[0])
        record.deck.cards[last] = record.deck.cards[0]
    elif change == "short deck":
        del record.deck.cards[-1]
    elif change == "dealer":
        record.dealer = 3
    elif change == "seat":
        record.turns[1].seat = 7
    elif change == "one seat":
        del record.seats[1:]
    elif change == "two names":
        record.seats[1].name = record.seats[0].name
    elif change == "eliminated seat":
        record.eliminated.append(record.seats[0].name)
    elif change == "draw":
        record.turns[0].draw = pb.DRAW_SOURCE_UNSPECIFIED
    elif change == "restock card":
        record.turns[0].restock.cards.extend(["AH", "XX"])
    elif change == "no order":
        record.ClearField("deck")
    elif change == "too many seats":
        record.seats.extend(pb.Seat(name=f"p{i}") for i in range(8))
    elif change == "turns":
        record.turns.extend([record.turns[0]] * 1000)
    elif change == "name":
        record.seats[0].name = "n" * 65
    elif change == "discard taken":
        request.rules.discard_taken = 7
    elif change == "claim":
        request.claims.players.add(player=5, points=3)
    elif change == "restock total":
        for turn in record.turns[:5]:
            turn.restock.cards.extend([*record.deck.cards, *record.deck.cards])
    return request


def _set_shuffle(request: pb.ReplayDealRequest, change: str) -> pb.ReplayDealRequest:
    shuffle = request.record.shuffle
    if change == "algorithm":
        shuffle.algorithm = "remigio-shuffle-v2"
    elif change == "seed":
        shuffle.server_seed = "xy" * 32
    elif change == "short seed":
        shuffle.server_seed = "ab" * 31
    elif change == "hash":
        shuffle.server_seed_hash = "00"
    elif change == "client seed":
        shuffle.client_seed = "ñ" * 33
    return request


MALFORMED = {
    "card": (lambda: _set(_base(), "card"), "record.turns[3].discard", "1H"),
    "drawn": (lambda: _set(_base(), "drawn"), "record.turns[2].drawn", "ZZ"),
    "extra copy": (lambda: _set(_base(), "extra copy"), "record.deck.cards[107]", None),
    "short deck": (lambda: _set(_base(), "short deck"), "record.deck.cards", "107"),
    "dealer": (lambda: _set(_base(), "dealer"), "record.dealer", "3"),
    "seat": (lambda: _set(_base(), "seat"), "record.turns[1].seat", "7"),
    "one seat": (lambda: _set(_base(), "one seat"), "record.seats", "1"),
    "too many seats": (lambda: _set(_base(), "too many seats"), "record.seats", "11"),
    "two names": (lambda: _set(_base(), "two names"), "record.seats[1].name", "ana"),
    "eliminated seat": (lambda: _set(_base(), "eliminated seat"), "record.seats[0].name", "ana"),
    "draw": (lambda: _set(_base(), "draw"), "record.turns[0].draw", "DRAW_SOURCE_UNSPECIFIED"),
    "restock card": (lambda: _set(_base(), "restock card"), "record.turns[0].restock.cards[1]", "XX"),
    "restock total": (lambda: _set(_base(), "restock total"), "record.turns[4].restock", "1080"),
    "no order": (lambda: _set(_base(), "no order"), "record.deck", ""),
    "turns": (lambda: _set(_base(), "turns"), "record.turns", None),
    "name": (lambda: _set(_base(), "name"), "record.seats[0].name", None),
    "discard taken": (lambda: _set(_base(), "discard taken"), "rules.discard_taken", "7"),
    "claim": (lambda: _set(_base(), "claim"), "claims.players[0].player", "5"),
    "algorithm": (lambda: _set_shuffle(_seeded(), "algorithm"), "record.shuffle.algorithm", "remigio-shuffle-v2"),
    "seed": (lambda: _set_shuffle(_seeded(), "seed"), "record.shuffle.server_seed", None),
    "short seed": (lambda: _set_shuffle(_seeded(), "short seed"), "record.shuffle.server_seed", None),
    "hash": (lambda: _set_shuffle(_seeded(), "hash"), "record.shuffle.server_seed_hash", "00"),
    "client seed": (lambda: _set_shuffle(_seeded(), "client seed"), "record.shuffle.client_seed", None),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_record_is_invalid_argument_naming_the_field(stub: Stub, case: tuple) -> None:  # type: ignore[type-arg]
    make, field, value = case
    request = make()
    with pytest.raises(grpc.RpcError) as caught:
        stub.ReplayDeal(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = field_violation(caught.value)
    assert violation.field == field, violation
    if value is not None:
        assert violation.description.endswith((f"(value: {value})", f"(value: '{value}')")), violation
    # The handler called directly names the same field.
    with pytest.raises(RefereeError) as direct:
        handlers.replay_deal(make())
    assert direct.value.field == field


def test_a_request_that_sets_both_a_deck_and_a_shuffle_keeps_the_last_one() -> None:
    # The oneof keeps one order: a client cannot send both, whatever it sets.
    request = _seeded()
    request.record.deck.cards.append("AH")
    assert request.record.WhichOneof("order") == "deck"
    with pytest.raises(RefereeError) as caught:
        handlers.replay_deal(request)
    assert caught.value.field == "record.deck.cards"


# CheckDisputes with record cases ---------------------------------------------------------------


def _record_cases(simulated: tuple[Played, ...]) -> list[tuple[pb.CheckDisputesRequest, int]]:
    """Record cases with their expected outcomes: claims right, wrong, none; violations; malformed."""
    cases = []
    complete = next(p for p in simulated if len(p.record.turns) > 6 and p.record.turns[-1].close)
    request = records.request_of(complete.record)
    answer = handlers.replay_deal(request).result
    closer = next(i for i, player in enumerate(answer.players) if player.closer)
    right = pb.DealClaims(
        close_kind=answer.close.kind,
        players=[pb.PlayerClaim(player=closer, score_change=answer.players[closer].score_change)],
    )
    wrong = pb.DealClaims(multiplier=answer.close.multiplier + 1)
    cases.append(
        (
            pb.CheckDisputesRequest(id="right", record=records.request_of(complete.record, right)),
            pb.DISPUTE_OUTCOME_CONFIRMED,
        )
    )
    cases.append(
        (
            pb.CheckDisputesRequest(id="wrong", record=records.request_of(complete.record, wrong)),
            pb.DISPUTE_OUTCOME_WRONG,
        )
    )
    cases.append((pb.CheckDisputesRequest(id="none", record=request), pb.DISPUTE_OUTCOME_NO_CLAIM))
    rng = random.Random(8)
    for code in (ViolationCode.CARD_NOT_IN_HAND, ViolationCode.FALSE_CLOSE, ViolationCode.SEED_MISMATCH):
        made = next(m for p in simulated if (m := INJECTIONS[code](p, rng)) is not None)
        illegal = records.request_of(made[0], right)
        cases.append((pb.CheckDisputesRequest(id=code.value, record=illegal), pb.DISPUTE_OUTCOME_ILLEGAL))
    bad = records.request_of(complete.record)
    bad.record.turns[2].discard = "QQ"
    cases.append((pb.CheckDisputesRequest(id="bad", record=bad), pb.DISPUTE_OUTCOME_MALFORMED))
    return cases


def test_check_disputes_answers_record_cases_and_an_illegal_one_is_illegal(
    stub: Stub, simulated: tuple[Played, ...]
) -> None:
    cases = _record_cases(simulated)
    verdicts = list(stub.CheckDisputes(iter([case for case, _ in cases]), timeout=60))
    assert [v.id for v in verdicts] == [case.id for case, _ in cases]
    for (case, outcome), verdict in zip(cases, verdicts, strict=True):
        assert verdict.outcome == outcome, (case.id, verdict)
        assert verdict == judge_case(case)
        if outcome == pb.DISPUTE_OUTCOME_MALFORMED:
            assert verdict.error.field == "record.record.turns[2].discard" and verdict.error.value == "QQ"
            continue
        assert verdict.WhichOneof("answer") == "record"
        assert verdict.record == handlers.replay_deal(case.record)
        assert list(verdict.claims) == list(verdict.record.claims)
        if outcome == pb.DISPUTE_OUTCOME_ILLEGAL:
            assert not verdict.record.legal and not verdict.claims
            assert verdict.record.violation.code == CODES[ViolationCode(case.id)]


def test_a_record_in_the_notation_is_replayed_and_reviewed_as_its_message(stub: Stub) -> None:
    from referee.play.record import format_notation

    record = simulate(9, 3, FAST)
    text = format_notation(record)
    as_message = records.request_of(record)
    assert stub.ReplayDeal(pb.ReplayDealRequest(notation=text), timeout=30) == stub.ReplayDeal(as_message, timeout=30)
    reviewed = stub.ReviewDeal(pb.ReviewDealRequest(notation=text), timeout=60)
    assert reviewed == stub.ReviewDeal(
        pb.ReviewDealRequest(record=as_message.record, rules=as_message.rules), timeout=60
    )
    # The rules' fields that are set override the notation's tags.
    forbidden = pb.RuleOptions(discard_taken=pb.DISCARD_TAKEN_FORBIDDEN)
    overridden = stub.ReplayDeal(pb.ReplayDealRequest(notation=text, rules=forbidden), timeout=30)
    as_message.rules.discard_taken = pb.DISCARD_TAKEN_FORBIDDEN
    assert overridden == stub.ReplayDeal(as_message, timeout=30)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r.replace("1. ", "1. zz ", 1), "line "),
        (lambda r: r + "\n" + "%" * 200_001, "at most 200000 characters"),
    ],
    ids=["bad line", "too long"],
)
def test_a_malformed_notation_is_invalid_argument_naming_the_notation(stub: Stub, change: Any, says: str) -> None:
    from referee.play.record import format_notation

    text = change(format_notation(simulate(9, 3, FAST)))
    for call, message in ((stub.ReplayDeal, pb.ReplayDealRequest), (stub.ReviewDeal, pb.ReviewDealRequest)):
        with pytest.raises(grpc.RpcError) as caught:
            call(message(notation=text), timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violation = field_violation(caught.value)
        assert violation.field == "notation" and says in violation.description, violation


def test_a_record_and_its_notation_both_are_refused(stub: Stub) -> None:
    from referee.play.record import format_notation

    record = simulate(9, 3, FAST)
    request = records.request_of(record)
    request.notation = format_notation(record)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ReplayDeal(request, timeout=30)
    assert field_violation(caught.value).field == "notation"


def test_stop_after_turn_replays_the_first_turns_of_a_record_or_its_notation(stub: Stub) -> None:
    from referee.play.record import format_notation

    record = simulate(9, 3, FAST)
    request = records.request_of(record)
    for stop in (0, 1, 5, len(record.turns)):
        cut = records.request_of(replace(record, turns=record.turns[:stop]))
        expected = stub.ReplayDeal(cut, timeout=30)
        request.stop_after_turn = stop
        assert stub.ReplayDeal(request, timeout=30) == expected
        written = pb.ReplayDealRequest(notation=format_notation(record), stop_after_turn=stop)
        assert stub.ReplayDeal(written, timeout=30) == expected
    for stop in (-1, len(record.turns) + 1):
        request.stop_after_turn = stop
        with pytest.raises(grpc.RpcError) as caught:
            stub.ReplayDeal(request, timeout=30)
        assert field_violation(caught.value).field == "stop_after_turn"
