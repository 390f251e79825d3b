"""The referee's one drawing of an answer: DrawAnswer, the dispute report and the desk.

Each question is answered as its own method answers it (the handlers, the dispute judge), read
back from the reply into domain values (``referee.api.convert``, ``referee.api.records``) and
drawn by ``referee.render``. A dispute verdict is drawn here for the report too, so a case looks
the same in the report as in the desk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from referee import render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import handlers, records
from referee.api.convert import (
    close_from_proto,
    close_kind_from_proto,
    deal_result_from_proto,
    linking_from_proto,
)
from referee.api.disputes import judge_case
from referee.game.cards import Card, parse_cards, sort_cards
from referee.game.errors import RefereeError, rooted_at
from referee.game.limits import DRAWN_TURNS
from referee.play.replay import replay
from referee.play.review import review_deal


@dataclass(frozen=True, slots=True)
class Picture:
    """One drawing and what it shows."""

    caption: str
    svg: str


CLAIMED, ANSWER = "Claimed", "The referee"


def draw_answer(request: pb.DrawAnswerRequest) -> pb.DrawAnswerResponse:
    """DrawAnswer: the pictures of the answer to the request's question."""
    question = request.WhichOneof("question")
    if question is None:
        raise RefereeError("question", "", "no question: set one of solve_hand, check_close, score_deal, "
                           "replay_deal, review_deal or dispute")  # fmt: skip
    DRAWN_TURNS.check_count(request.turns, "turns")
    with rooted_at(question):
        pictures = _DRAW[question](getattr(request, question), tuple(request.turns))
    return pb.DrawAnswerResponse(drawings=[pb.Drawing(caption=p.caption, svg=p.svg) for p in pictures])


def _solve_hand(request: pb.SolveHandRequest, _: tuple[int, ...]) -> list[Picture]:
    reply = handlers.solve_hand(request)
    return [Picture("The best linking", render.linking_svg(linking_from_proto(reply.linking)))]


def _check_close(request: pb.CheckCloseRequest, _: tuple[int, ...]) -> list[Picture]:
    reply = handlers.check_close(request)
    return [Picture("The close", render.close_svg(close_from_proto(reply.close)))]


def _score_deal(request: pb.ScoreDealRequest, _: tuple[int, ...]) -> list[Picture]:
    reply = handlers.score_deal(request)
    return [Picture("The deal scored", render.deal_svg(deal_result_from_proto(reply)))]


def _replay_deal(request: pb.ReplayDealRequest, _turns: tuple[int, ...]) -> list[Picture]:
    reply = handlers.replay_deal(request)  # every check and error of ReplayDeal first
    record, _ = handlers.record_of(request)
    replayed = replay(record, handlers.committed_shuffles_required())
    pictures = [Picture("The deal as replayed", render.replay_svg(replayed))]
    if reply.HasField("result"):
        pictures.append(
            Picture("The deal scored", render.deal_svg(deal_result_from_proto(reply.result), "The deal scored"))
        )
    return pictures


def _review_deal(request: pb.ReviewDealRequest, turns: tuple[int, ...]) -> list[Picture]:
    record, replayed = handlers.replayed_for_review(request)  # ReviewDeal's checks and errors
    if not replayed.legal:
        return [Picture("Not reviewed: the first violation", render.replay_svg(replayed))]
    return [Picture("The review", render.review_svg(record, review_deal(record), turns=turns or None))]


def _dispute(request: pb.CheckDisputesRequest, _: tuple[int, ...]) -> list[Picture]:
    verdict = judge_case(request)
    claimed, answer = verdict_drawings(verdict, request)
    return [Picture(CLAIMED, svg) for svg in claimed] + [Picture(ANSWER, svg) for svg in answer]


_DRAW = {
    "solve_hand": _solve_hand,
    "check_close": _check_close,
    "score_deal": _score_deal,
    "replay_deal": _replay_deal,
    "review_deal": _review_deal,
    "dispute": _dispute,
}

# A part that cannot be drawn (a card of a malformed case): left out, the claims table and the
# error still say what happened.
_UNDRAWABLE = (RefereeError, ValueError, KeyError, IndexError)


def verdict_drawings(
    verdict: pb.CheckDisputesResponse, case: pb.CheckDisputesRequest | None
) -> tuple[list[str], list[str]]:
    """The drawings of a dispute's claim (from its case) and of the referee's answer (from its
    verdict); a part that cannot be drawn is left out."""
    answer: list[str] = []
    try:
        kind = verdict.WhichOneof("answer")
        if kind == "hand":
            answer.append(render.linking_svg(linking_from_proto(verdict.hand), "The best linking"))
        elif kind == "close":
            answer.append(render.close_svg(close_from_proto(verdict.close), "The close"))
        elif kind == "deal":
            answer.append(render.deal_svg(deal_result_from_proto(verdict.deal), "The deal scored"))
        elif kind == "record":
            replayed = records.replay_from_proto(verdict.record)
            answer.append(render.replay_svg(replayed))
            if replayed.complete and replayed.legal and verdict.record.HasField("result"):
                answer.append(render.deal_svg(deal_result_from_proto(verdict.record.result), "The deal scored"))
    except _UNDRAWABLE:
        answer = []
    try:
        claimed = [] if case is None else _claimed(case)
    except _UNDRAWABLE:
        claimed = []
    return claimed, answer


def _claimed(case: pb.CheckDisputesRequest) -> list[str]:
    kind = case.WhichOneof("dispute")
    if kind == "hand":
        hand = case.hand
        cards = parse_cards(list(hand.cards))
        groups = [parse_cards(list(group.cards)) for group in hand.claimed_groups]
        if groups:
            return [render.claimed_svg(groups, _left_out(cards, groups), "The claimed linking")]
        if hand.HasField("claimed_points"):
            return [render.cards_svg(sort_cards(cards), "The hand", f"claimed: {hand.claimed_points} points")]
        return []
    if kind == "close":
        close = case.close
        said = []
        if close.HasField("claimed_kind"):
            named = close_kind_from_proto(close.claimed_kind, "claimed_kind")
            said.append("no valid close" if named is None else named.value)
        if close.HasField("claimed_multiplier"):
            said.append(f"×{close.claimed_multiplier}")
        note = f"claimed: {' '.join(said)}" if said else ""
        discard = Card.parse(close.discard) if close.discard else None
        return [render.cards_svg(sort_cards(parse_cards(list(close.cards))), "The close as sent", note, discard)]
    if kind == "deal":
        players = case.deal.deal.players
        drawings = []
        for claim in case.deal.claims.players:
            groups = [parse_cards(list(group.cards)) for group in claim.groups]
            if not groups or not 0 <= claim.player < len(players):
                continue
            player = players[claim.player]
            name = player.name or f"player{claim.player + 1}"
            cards = parse_cards(list(player.cards))
            drawings.append(render.claimed_svg(groups, _left_out(cards, groups), f"{name}: the claimed linking"))
        return drawings
    return []


def _left_out(cards: Sequence[Card], groups: Sequence[Sequence[Card]]) -> tuple[Card, ...]:
    """The cards of the hand in no claimed group (none when the groups use cards it lacks)."""
    left = Counter(cards)
    for group in groups:
        left.subtract(group)
    if any(count < 0 for count in left.values()):
        return ()
    return sort_cards(left.elements())


__all__ = ["ANSWER", "CLAIMED", "Picture", "draw_answer", "verdict_drawings"]
