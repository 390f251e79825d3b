"""A deal's review (``referee.play.review``) as the contract's ReviewDealResponse.

Only this direction: a review is the referee's answer, never a client's input. The enum tables are
built from the members' names, so a mark or a decision kind added to the domain without its twin in
the contract fails at import rather than at a call.
"""

from __future__ import annotations

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api.records import shuffle_proof_to_proto, violation_to_proto
from referee.game.cards import card_codes
from referee.play.replay import Replay
from referee.play.review import DealReview, Decision, DecisionKind, Mark, Progress, SeatReview, TurnReview, Verdict

_KINDS = {kind: pb.DecisionKind.Value(f"DECISION_KIND_{kind.name}") for kind in DecisionKind}
_MARKS = {mark: pb.ReviewMark.Value(f"REVIEW_MARK_{mark.name}") for mark in Mark}


def unreviewed(replayed: Replay) -> pb.ReviewDealResponse:
    """The answer for a record that broke a rule: its first violation, nothing reviewed."""
    response = pb.ReviewDealResponse(legal=replayed.legal, shuffle_proof=shuffle_proof_to_proto(replayed.shuffle_proof))
    if replayed.violation is not None:
        response.violation.CopyFrom(violation_to_proto(replayed.violation))
    return response


def review_to_proto(review: DealReview, replayed: Replay) -> pb.ReviewDealResponse:
    """The answer for a legal record: each seat's summary and every turn reviewed."""
    response = unreviewed(replayed)
    response.seats.extend(_seat(seat) for seat in review.seats)
    response.turns.extend(_turn(turn) for turn in review.turns)
    return response


def _seat(seat: SeatReview) -> pb.SeatReview:
    message = pb.SeatReview(
        seat=seat.seat,
        name=seat.name,
        decisions=seat.decisions,
        average_loss=seat.average_loss,
        inaccuracies=seat.inaccuracies,
        mistakes=seat.mistakes,
        blunders=seat.blunders,
        passed_closes=seat.passed_closes,
        fed=seat.fed,
        omniscient_differs=seat.omniscient_differs,
        omniscient_agrees=seat.omniscient_agrees,
    )
    if seat.accuracy is not None:
        message.accuracy = seat.accuracy
    return message


def _turn(turn: TurnReview) -> pb.ReviewedTurn:
    return pb.ReviewedTurn(
        turn=turn.number,
        seat=turn.seat,
        before=_progress(turn.before),
        drawn=turn.drawn.code(),
        thrown=turn.thrown.code(),
        closed=turn.closed,
        decisions=[_decision(decision) for decision in turn.decisions],
    )


def _progress(progress: Progress) -> pb.HandProgress:
    return pb.HandProgress(
        distance=progress.distance,
        improving=progress.improving,
        points=progress.points,
        unseen=progress.unseen,
        outs=card_codes(progress.outs),
    )


def _decision(decision: Decision) -> pb.ReviewedDecision:
    message = pb.ReviewedDecision(
        kind=_KINDS[decision.kind],
        choice=decision.choice,
        judged=_judgment(decision.judged),
        omniscient=_judgment(decision.omniscient),
        marks=[_MARKS[mark] for mark in decision.marks],
    )
    agrees = decision.agrees_with_omniscient
    if agrees is not None:
        message.agrees_with_omniscient = agrees
    return message


def _judgment(verdict: Verdict) -> pb.DecisionJudgment:
    return pb.DecisionJudgment(
        options=[pb.ReviewOption(choice=option.choice, value=option.value) for option in verdict.options],
        best=verdict.best,
        loss=verdict.loss,
    )


__all__ = ["review_to_proto", "unreviewed"]
