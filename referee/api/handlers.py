"""The request handlers: one function per RPC, each converts the request, calls the domain and
converts the answer back.

They are pure functions of the request message; the gRPC servicer, the CheckDisputes stream and
the command line all call them, so all answer the same, byte for byte. Every error, the mapping's
or the domain's, names its field relative to its own object; the handler roots it once at the
request's field with ``rooted_at``.
"""

from __future__ import annotations

from dataclasses import replace

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import records, reviews
from referee.api.convert import (
    cards_from_proto,
    claim_to_proto,
    close_kind_from_proto,
    close_to_proto,
    deal_claims_from_proto,
    deal_from_proto,
    linking_to_proto,
    rules_from_proto,
)
from referee.game import closing, scoring
from referee.game.cards import Card
from referee.game.claims import DealClaims, judge_close_claims, judge_deal_claims
from referee.game.deal import Deal
from referee.game.errors import InvalidCardError, InvalidNotationError, InvalidRecordError, RefereeError, rooted_at
from referee.game.limits import HAND_CARDS, NOTATION
from referee.game.linking import best_linking
from referee.game.rules import RuleSet
from referee.play.record import Record, parse_notation
from referee.play.replay import Replay, replay
from referee.play.review import review_deal as review_of

CLOSE_SHOWN = 10


def solve_hand(request: pb.SolveHandRequest) -> pb.SolveHandResponse:
    """SolveHand: the best linking of 1 to 11 cards."""
    rules = _rules(request.rules)
    cards = cards_from_proto(request.cards, "cards", HAND_CARDS)
    linking = best_linking(cards, rules, field="cards")
    answer = pb.SolveHandResponse()
    linking_to_proto(linking, into=answer.linking)
    return answer


def check_close(request: pb.CheckCloseRequest) -> pb.CheckCloseResponse:
    """CheckClose: the best close of 11 cards, or the close of 10 shown cards and a discard."""
    rules = _rules(request.rules)
    cards = cards_from_proto(request.cards, "cards", HAND_CARDS)
    if len(cards) == CLOSE_SHOWN + 1:
        if request.discard:
            raise InvalidCardError(
                "discard", request.discard, "with 11 cards the referee picks the discard; leave it empty"
            )
        close = closing.best_close(cards, rules, field="cards")
    elif len(cards) == CLOSE_SHOWN:
        if not request.discard:
            raise InvalidCardError("discard", request.discard, "with 10 shown cards the discard is required")
        close = closing.check_close(cards, Card.parse(request.discard, "discard"), rules, field="cards")
    else:
        raise InvalidCardError("cards", len(cards), "a close takes 11 cards, or 10 shown cards and a discard")
    kind = None
    if request.HasField("claimed_kind"):
        kind = close_kind_from_proto(request.claimed_kind, "claimed_kind")
    multiplier = request.claimed_multiplier if request.HasField("claimed_multiplier") else None
    # An explicit CLOSE_KIND_UNSPECIFIED claims that no valid close exists.
    claims = judge_close_claims(close, kind, multiplier, no_close=request.HasField("claimed_kind") and kind is None)
    return pb.CheckCloseResponse(close=close_to_proto(close), claims=[claim_to_proto(c) for c in claims])


def score_deal(request: pb.ScoreDealRequest) -> pb.ScoreDealResponse:
    """ScoreDeal: check and score an end-of-deal state, update the match, judge the claims."""
    rules = _rules(request.rules)
    with rooted_at("deal"):
        deal = deal_from_proto(request.deal)
    with rooted_at("claims"):
        claims = deal_claims_from_proto(request.claims)
    return _scored(deal, rules, claims)


def _scored(
    deal: Deal, rules: RuleSet, claims: DealClaims, into: pb.ScoreDealResponse | None = None
) -> pb.ScoreDealResponse:
    """ScoreDeal's answer on a deal, its rules and claims already read; written into ``into``
    when given (a field of a larger answer: no copy of it made there afterwards)."""
    with rooted_at("deal"):
        result = scoring.score_deal(deal, rules)
    verdicts = judge_deal_claims(claims, result, [player.cards for player in deal.players], rules)
    # Set field by field rather than made and copied in: a copy walks the whole answer again.
    answer = pb.ScoreDealResponse() if into is None else into
    answer.close.CopyFrom(close_to_proto(result.close))
    answer.players.extend(
        [
            pb.PlayerResult(
                name=player.name,
                closer=player.closer,
                linking=linking_to_proto(player.linking),
                points=player.points,
                score_change=player.score_change,
                score=player.score,
                eliminated=player.eliminated,
            )
            for player in result.players
        ]
    )
    answer.match_over = result.match_over
    answer.winner = result.winner or ""
    answer.claims.extend([claim_to_proto(c) for c in verdicts])
    return answer


# Whether this process judges only records whose deck order was committed before the deal
# (``serve --require-committed-shuffle``, ``replay``/``batch --require-committed-shuffle``): set
# once when the process starts, before any call, and handed to the processes it starts.
_committed_only = False


def require_committed_shuffles(on: bool) -> None:
    """Judge only records whose deck order was committed (else UNCOMMITTED_SHUFFLE), or any."""
    global _committed_only
    _committed_only = on


def committed_shuffles_required() -> bool:
    """Whether ``require_committed_shuffles`` is on in this process."""
    return _committed_only


def replay_deal(request: pb.ReplayDealRequest, into: pb.ReplayDealResponse | None = None) -> pb.ReplayDealResponse:
    """ReplayDeal: play a deal record turn by turn up to its first violation; a complete legal
    record is scored by ScoreDeal's own path, so its result is what ScoreDeal gives its end state.

    The answer is written into ``into`` when given (a dispute case's verdict: no copy of it made
    there afterwards); on an error ``into`` may be left half written."""
    record, rules = record_of(request)
    with rooted_at("claims"):
        claims = deal_claims_from_proto(request.claims)
    records.check_claimed_players(claims, len(record.seats))
    with rooted_at("record"), records.proto_paths():
        result = replay(record, _committed_only)
    response = records.replay_to_proto(result, into)
    if result.deal is not None:
        # ScoreDeal's own path on the end state, without writing it as a message and reading it
        # back: the replay's deal is what ``deal_from_proto`` would read from ``deal_to_proto``'s
        # message (tests/api/test_replay_deal.py holds every record of its corpus to ScoreDeal's answer).
        scored = _scored(result.deal, rules, claims, into=response.result)
        response.claims.extend(scored.claims)
    return response


def review_deal(request: pb.ReviewDealRequest) -> pb.ReviewDealResponse:
    """ReviewDeal: a legal record reviewed decision by decision; an illegal one answered with its
    first violation, as ReplayDeal names it, and not reviewed."""
    record, result = replayed_for_review(request)
    if not result.legal:
        return reviews.unreviewed(result)
    return reviews.review_to_proto(review_of(record), result)


def replayed_for_review(request: pb.ReviewDealRequest) -> tuple[Record, Replay]:
    """The request's record and its replay, checked as ReviewDeal checks it (DrawAnswer draws
    a review from the same, reviewing once)."""
    record, _ = record_of(request)
    with rooted_at("record"), records.proto_paths():
        return record, replay(record, _committed_only)


def record_of(request: pb.ReplayDealRequest | pb.ReviewDealRequest) -> tuple[Record, RuleSet]:
    """The request's record and rules: its DealRecord under its rules, or its record in the
    notation under the notation's tags, overridden by the rules' fields that are set; cut after
    ``stop_after_turn`` when a ReplayDealRequest sets it."""
    if not request.notation:
        rules = _rules(request.rules)
        with rooted_at("record"):
            record = records.record_from_proto(request.record, rules)
    elif request.HasField("record"):
        raise InvalidRecordError("notation", request.notation[:40], "give the record or its notation, not both")
    else:
        NOTATION.check_length(request.notation, "notation")
        try:
            written = parse_notation(request.notation)
        except RefereeError as error:  # named by its line: the line is part of the notation field
            raise InvalidNotationError("notation", error.value, f"{error.field}: {error.message}") from None
        options = records.rules_to_proto(written.rules)
        options.MergeFrom(request.rules)
        rules = _rules(options)
        record = replace(written, rules=rules)
    if isinstance(request, pb.ReplayDealRequest) and request.HasField("stop_after_turn"):
        stop = request.stop_after_turn
        if not 0 <= stop <= len(record.turns):
            raise InvalidRecordError("stop_after_turn", stop, f"a turn of the record, 0 to {len(record.turns)}")
        record = replace(record, turns=record.turns[:stop])
    return record, rules


def _rules(options: pb.RuleOptions) -> RuleSet:
    with rooted_at("rules"):
        return rules_from_proto(options)


__all__ = ["check_close", "record_of", "replay_deal", "replayed_for_review", "review_deal", "score_deal", "solve_hand"]
