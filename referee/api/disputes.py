"""Judging one dispute case (the CheckDisputes stream and ``remigio-referee batch``)."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import convert, handlers
from referee.game.claims import judge_linking, judge_value
from referee.game.errors import RefereeError, SolverError, SolverTimeout, rooted_at, shorten
from referee.game.limits import CASE_ID, HAND_CARDS, check_reply
from referee.game.linking import best_linking, time_budget

_WRONG = {pb.VERDICT_WRONG, pb.VERDICT_VALID_NOT_BEST}


def judge_case(case: pb.CheckDisputesRequest) -> pb.CheckDisputesResponse:
    """The verdict on one case; a case that cannot be judged is MALFORMED, never an exception."""
    kind = case.WhichOneof("dispute")
    try:
        CASE_ID.check_length(case.id, "id")
    except RefereeError as error:
        # The verdict echoes the id: a long one is cut, so the verdict stays small.
        return malformed(str(shorten(case.id)), error.field, str(error.value), error.message)
    verdict = pb.CheckDisputesResponse(id=case.id)
    legal = True
    try:
        with rooted_at(kind or ""):
            if kind == "hand":
                claims = _judge_hand(case.hand, verdict)
            elif kind == "close":
                reply = handlers.check_close(case.close)
                verdict.close.CopyFrom(reply.close)
                claims = list(reply.claims)
            elif kind == "deal":
                reply = handlers.score_deal(case.deal)
                verdict.deal.CopyFrom(reply)
                claims = list(reply.claims)
            elif kind == "record":
                replayed = handlers.replay_deal(case.record, into=verdict.record)
                claims = list(replayed.claims)
                legal = replayed.legal
            else:
                raise RefereeError("dispute", "", "a case holds one of hand, close, deal or record")
    except RefereeError as error:
        return pb.CheckDisputesResponse(
            id=case.id,
            outcome=pb.DISPUTE_OUTCOME_MALFORMED,
            error=pb.CaseError(field=error.field, value=str(error.value), message=error.message),
        )
    verdict.claims.extend(claims)
    # A record that breaks a rule has no result to claim anything of: the violation is the verdict.
    verdict.outcome = outcome(claims) if legal else pb.DISPUTE_OUTCOME_ILLEGAL
    return verdict


def judge_case_bytes(case: bytes, budget_seconds: float | None = None, max_bytes: int | None = None) -> bytes:
    """``judge_case`` on a serialized case, within a time budget, as a verdict of at most ``max_bytes``
    (one over it is MALFORMED instead): for worker processes.

    Bytes that are no case are a MALFORMED verdict for that case alone (the stream goes on).
    """
    try:
        request = pb.CheckDisputesRequest.FromString(case)
    except DecodeError:  # its text only repeats the type's name
        name = pb.CheckDisputesRequest.DESCRIPTOR.full_name
        return malformed(
            "", "", f"{len(case)} bytes", f"the request does not decode as a {name} message"
        ).SerializeToString()
    try:
        with time_budget(budget_seconds):
            verdict = judge_case(request).SerializeToString()
        if max_bytes is not None:
            check_reply(len(verdict), max_bytes)
        return verdict
    except RefereeError as error:
        return malformed(request.id, error.field, str(error.value), error.message).SerializeToString()
    except SolverTimeout as error:
        return malformed(request.id, "", "", f"could not be judged in time: {error}").SerializeToString()
    except SolverError as error:
        return malformed(request.id, "", "", f"could not be judged: {error}").SerializeToString()


def outcome(claims: list[pb.ClaimVerdict]) -> pb.DisputeOutcome:
    """The case's outcome: INVALID beats WRONG beats CONFIRMED; no claim is NO_CLAIM."""
    return outcome_of({claim.verdict for claim in claims})


def outcome_of(verdicts: set[pb.Verdict]) -> pb.DisputeOutcome:
    """The outcome of a case whose claims got ``verdicts`` (as ``outcome``)."""
    if not verdicts:
        return pb.DISPUTE_OUTCOME_NO_CLAIM
    if pb.VERDICT_INVALID in verdicts:
        return pb.DISPUTE_OUTCOME_INVALID
    if verdicts & _WRONG:
        return pb.DISPUTE_OUTCOME_WRONG
    return pb.DISPUTE_OUTCOME_CONFIRMED


def malformed(case_id: str, field: str, value: str, message: str) -> pb.CheckDisputesResponse:
    """A MALFORMED verdict for a case that could not even be read."""
    return pb.CheckDisputesResponse(
        id=case_id,
        outcome=pb.DISPUTE_OUTCOME_MALFORMED,
        error=pb.CaseError(field=field, value=value, message=message),
    )


def _judge_hand(hand: pb.HandDispute, verdict: pb.CheckDisputesResponse) -> list[pb.ClaimVerdict]:
    with rooted_at("rules"):
        rules = convert.rules_from_proto(hand.rules)
    cards = convert.cards_from_proto(hand.cards, "cards", HAND_CARDS)
    best = best_linking(cards, rules)
    verdict.hand.CopyFrom(convert.linking_to_proto(best))
    found = []
    if hand.claimed_groups:
        groups = convert.claimed_groups_from_proto(hand.claimed_groups, "claimed_groups")
        found.append(judge_linking("claimed_groups", cards, groups, best, rules))
    if hand.HasField("claimed_points"):
        found.append(judge_value("claimed_points", hand.claimed_points, best.points))
    return [convert.claim_to_proto(claim) for claim in found]


__all__ = ["judge_case", "judge_case_bytes", "malformed", "outcome", "outcome_of"]
