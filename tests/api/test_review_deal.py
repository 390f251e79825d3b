"""ReviewDeal over real gRPC: a legal record reviewed decision by decision, as the domain reviews
it; an illegal one answered with ReplayDeal's violation and not reviewed; a malformed one
INVALID_ARGUMENT naming the field; a long review bounded by the call's deadline."""

from __future__ import annotations

import random
import time

import grpc
import pytest
from servers import field_violation
from test_replay import INJECTIONS
from test_replay_deal import MALFORMED

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import handlers, jsonmsg, records
from referee.game.errors import RefereeError, SolverTimeout
from referee.game.linking import time_budget
from referee.game.rules import Engine, RuleSet
from referee.play.replay import ViolationCode, replay
from referee.play.review import BLUNDER_LOSS, INACCURACY_LOSS, MISTAKE_LOSS, DecisionKind, Mark, review_deal
from referee.play.simulate import simulate

Stub = referee_pb2_grpc.RefereeServiceStub
RULES = RuleSet(engine=Engine.SEARCH)
LOSS_MARKS = {
    pb.REVIEW_MARK_INACCURACY: INACCURACY_LOSS,
    pb.REVIEW_MARK_MISTAKE: MISTAKE_LOSS,
    pb.REVIEW_MARK_BLUNDER: BLUNDER_LOSS,
}


def review_request(seed: int, players: int = 3, **options: object) -> tuple[pb.ReviewDealRequest, object]:
    record = simulate(seed, players, RULES, **options)  # type: ignore[arg-type]
    replayed = records.request_of(record)
    return pb.ReviewDealRequest(record=replayed.record, rules=replayed.rules), record


@pytest.mark.parametrize("seed", [2, 7])
def test_a_legal_record_is_reviewed_turn_by_turn_as_the_domain_reviews_it(stub: Stub, seed: int) -> None:
    request, record = review_request(seed)
    response = stub.ReviewDeal(request, timeout=60)
    review = review_deal(record)  # type: ignore[arg-type]
    played = replay(record)  # type: ignore[arg-type]
    assert response.legal and not response.HasField("violation")
    assert response.shuffle_proof == records.shuffle_proof_to_proto(played.shuffle_proof)
    assert len(response.turns) == played.turns_played == len(record.turns)  # type: ignore[attr-defined]
    # Each turn is the record's own: its seat, the card drawn and the card thrown.
    for reviewed, turn, domain in zip(response.turns, record.turns, review.turns, strict=True):  # type: ignore[attr-defined]
        assert (reviewed.turn, reviewed.seat) == (domain.number, domain.seat)
        assert reviewed.thrown == turn.discard.code()
        assert reviewed.drawn == domain.drawn.code()
        assert reviewed.before.distance == domain.before.distance
        assert list(reviewed.before.outs) == [card.code() for card in domain.before.outs]
        kinds = [d.kind for d in reviewed.decisions]
        assert kinds[0] == pb.DECISION_KIND_DRAW
        if reviewed.closed:  # a close lays its card face down: no throw to judge
            assert kinds[-1] == pb.DECISION_KIND_CLOSE and reviewed.decisions[-1].choice == "CLOSE"
        else:
            assert kinds[-1] == pb.DECISION_KIND_THROW and reviewed.decisions[-1].choice == turn.discard.code()
        for decision, mine in zip(reviewed.decisions, domain.decisions, strict=True):
            assert decision.choice == mine.choice and decision.judged.loss == mine.loss
            assert list(decision.judged.best) == list(mine.judged.best)
            assert list(decision.omniscient.best) == list(mine.omniscient.best)
            # A loss mark is the highest threshold the loss reaches.
            reached = [mark for mark, floor in LOSS_MARKS.items() if decision.judged.loss >= floor]
            assert [m for m in decision.marks if m in LOSS_MARKS] == reached[-1:]
            # Agreement with the all-seeing choice is said only where the two bests differ.
            differs = set(decision.judged.best) != set(decision.omniscient.best)
            assert decision.HasField("agrees_with_omniscient") == differs
            if differs:
                assert decision.agrees_with_omniscient == (decision.choice in decision.omniscient.best)
    # Each seat's summary counts what its turns show.
    assert [s.name for s in response.seats] == [seat.name for seat in record.seats]  # type: ignore[attr-defined]
    for seat in response.seats:
        marks = [m for t in response.turns if t.seat == seat.seat for d in t.decisions for m in d.marks]
        assert seat.blunders == marks.count(pb.REVIEW_MARK_BLUNDER)
        assert seat.passed_closes == marks.count(pb.REVIEW_MARK_PASSED_CLOSE)
        assert seat.fed == marks.count(pb.REVIEW_MARK_FED)
        assert seat.HasField("accuracy") == (seat.decisions > 0)
        if seat.HasField("accuracy"):
            assert 0.0 <= seat.accuracy <= 100.0
    # The JSON mapping reads it back whole (the gateway and `review --json` write it).
    assert jsonmsg.parse(jsonmsg.to_json(response), pb.ReviewDealResponse()) == response


def test_every_mark_and_decision_kind_of_the_domain_has_its_twin_in_the_contract() -> None:
    assert {f"REVIEW_MARK_{mark.name}" for mark in Mark} == set(pb.ReviewMark.keys()) - {"REVIEW_MARK_UNSPECIFIED"}
    assert {f"DECISION_KIND_{kind.name}" for kind in DecisionKind} == set(pb.DecisionKind.keys()) - {
        "DECISION_KIND_UNSPECIFIED"
    }


@pytest.mark.parametrize("code", [ViolationCode.DRAWN_MISMATCH, ViolationCode.FALSE_CLOSE], ids=lambda c: c.name)
def test_an_illegal_record_gets_replay_deals_violation_and_no_review(stub: Stub, code: ViolationCode) -> None:
    from played import corpus

    rng = random.Random(f"review {code.name}")
    for played in corpus():
        made = INJECTIONS[code](played, rng)
        if made is not None:
            break
    else:
        pytest.fail(f"no record of the corpus takes a {code.name}")
    record, _ = made
    replayed = records.request_of(record)
    answer = stub.ReplayDeal(replayed, timeout=30)
    response = stub.ReviewDeal(pb.ReviewDealRequest(record=replayed.record, rules=replayed.rules), timeout=30)
    assert not response.legal
    assert response.violation == answer.violation
    assert not response.turns and not response.seats


@pytest.mark.parametrize(
    "case", [v for k, v in MALFORMED.items() if k != "claim"], ids=[k for k in MALFORMED if k != "claim"]
)
def test_a_malformed_record_is_invalid_argument_naming_the_field(stub: Stub, case: tuple) -> None:  # type: ignore[type-arg]
    make, field, value = case
    replayed = make()
    request = pb.ReviewDealRequest(record=replayed.record, rules=replayed.rules)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ReviewDeal(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = field_violation(caught.value)
    assert violation.field == field, violation
    with pytest.raises(RefereeError) as direct:
        handlers.review_deal(request)
    assert direct.value.field == field


def test_a_long_review_ends_at_the_calls_deadline_and_the_server_answers_on(stub: Stub) -> None:
    request, _ = review_request(5, 4, closing=False, max_turns=120)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        stub.ReviewDeal(request, timeout=0.3)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5
    # The review itself stops at its budget, turn by turn, rather than running to its end.
    record = simulate(5, 4, RULES, closing=False, max_turns=120)
    started = time.monotonic()
    with pytest.raises(SolverTimeout), time_budget(0.05):
        review_deal(record)
    assert time.monotonic() - started < 1.5
    # The compute slot it held is free again: a small review is answered.
    small, _ = review_request(3, 2, closing=False, max_turns=4)
    assert stub.ReviewDeal(small, timeout=60).legal
