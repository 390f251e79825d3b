"""Protobuf in, domain values, protobuf out: the one bridge between the contract and the referee.

Cards are parsed here, at the edge, with field paths that follow the request message
(``deal.players[1].cards[4]``), so every error names what the client sent. The three handlers
(``solve_hand``, ``check_close``, ``score_deal``) are pure functions of the request message; the
gRPC servicer and the command line both call them, so both answer the same, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TypeVar

from referee import closing, scoring
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.cards import Card, parse_cards
from referee.claims import ClaimVerdict, DealClaims, PlayerClaim, judge_close_claims, judge_deal_claims, judge_value
from referee.closing import Close
from referee.deal import Deal, PlayerHand
from referee.errors import InvalidCardError, InvalidDealError, InvalidOptionError, RefereeError
from referee.groups import Group, GroupKind
from referee.linking import Linking, best_linking, engine_for
from referee.rules import CloseKind, JokerLimit, RuleSet, ScoringMode, ScoringRules

# Enum tables, built from the names so a renamed member fails at import rather than at a call.
_JOKER_LIMITS = {pb.JokerLimit.Value(f"JOKER_LIMIT_{m.name}"): m for m in JokerLimit}
_ENGINES: dict[int, str] = {pb.ENGINE_CPSAT: "cpsat", pb.ENGINE_SEARCH: "search", pb.ENGINE_AUDIT: "audit"}
_CLOSE_KINDS = {pb.CloseKind.Value(f"CLOSE_KIND_{m.name}"): m for m in CloseKind}
_CLOSE_KIND_NUMBERS = {kind: number for number, kind in _CLOSE_KINDS.items()}
_SCORING_MODES = {pb.ScoringMode.Value(f"SCORING_MODE_{m.name}"): m for m in ScoringMode}
_GROUP_KINDS = {m: pb.GroupKind.Value(f"GROUP_KIND_{m.name}") for m in GroupKind}
_VERDICTS = {
    name: pb.Verdict.Value(f"VERDICT_{name}") for name in ("CONFIRMED", "WRONG", "INVALID", "VALID_NOT_BEST", "BEST")
}
_V = TypeVar("_V")

CLOSE_SHOWN = 10
MAX_SCORE = 10**9


# Proto -> domain ------------------------------------------------------------------------------


def cards_from_proto(codes: Iterable[str], field: str) -> tuple[Card, ...]:
    """Parse repeated card codes; an error names ``field[i]`` and the code."""
    return parse_cards(list(codes), field)


def rules_from_proto(options: pb.RuleOptions, field: str = "rules") -> RuleSet:
    """The rule set a RuleOptions message asks for: unset fields and UNSPECIFIED enums take the defaults."""
    # Clients send the same few rule sets again and again, and building one checks every option:
    # remember them by their bytes (a rejected one raises and is not remembered).
    return _rules_from_bytes(options.SerializeToString(deterministic=True), field)


@lru_cache(maxsize=256)
def _rules_from_bytes(data: bytes, field: str) -> RuleSet:
    options = pb.RuleOptions.FromString(data)
    changes: dict[str, object] = {}
    if options.HasField("decks"):
        changes["decks"] = options.decks
    if options.HasField("joker_points"):
        changes["joker_points"] = options.joker_points
    if options.HasField("wrap_runs"):
        changes["wrap_runs"] = options.wrap_runs
    if options.joker_limit != pb.JOKER_LIMIT_UNSPECIFIED:
        changes["joker_limit"] = _enum(_JOKER_LIMITS, options.joker_limit, f"{field}.joker_limit", "joker limit")
    if options.engine != pb.ENGINE_UNSPECIFIED:
        changes["engine"] = _enum(_ENGINES, options.engine, f"{field}.engine", "engine")
    if options.multipliers:
        changes["multipliers"] = _multipliers_from_proto(options.multipliers, f"{field}.multipliers")
    if options.HasField("scoring"):
        changes["scoring"] = _scoring_from_proto(options.scoring, f"{field}.scoring")
    rules = _build_rules(changes, field)
    try:
        engine_for(rules)
    except KeyError:
        raise InvalidOptionError(
            f"{field}.engine", pb.Engine.Name(options.engine), "this engine is not available in this build"
        ) from None
    return rules


def _build_rules(changes: dict[str, object], field: str) -> RuleSet:
    try:
        return RuleSet(**changes)  # type: ignore[arg-type]
    except InvalidOptionError as error:
        # The rule set names its options as "rules.<name>"; follow the request's own path.
        path = error.field if field == "rules" else field + error.field.removeprefix("rules")
        raise InvalidOptionError(path, error.value, error.message) from None


def _multipliers_from_proto(rows: Sequence[pb.Multiplier], field: str) -> dict[CloseKind, int]:
    table: dict[CloseKind, int] = {}
    for i, row in enumerate(rows):
        at = f"{field}[{i}]"
        if row.kind == pb.CLOSE_KIND_UNSPECIFIED:
            raise InvalidOptionError(f"{at}.kind", "CLOSE_KIND_UNSPECIFIED", "a multiplier row needs a close kind")
        kind = _enum(_CLOSE_KINDS, row.kind, f"{at}.kind", "close kind")
        if kind in table:
            raise InvalidOptionError(f"{at}.kind", pb.CloseKind.Name(row.kind), "this close kind is listed twice")
        try:
            RuleSet(multipliers={kind: row.multiplier})
        except InvalidOptionError as error:
            raise InvalidOptionError(f"{at}.multiplier", row.multiplier, error.message) from None
        table[kind] = row.multiplier
    return table


def _scoring_from_proto(options: pb.ScoringOptions, field: str) -> ScoringRules:
    mode = None
    if options.mode != pb.SCORING_MODE_UNSPECIFIED:
        mode = _enum(_SCORING_MODES, options.mode, f"{field}.mode", "scoring mode")
    return ScoringRules(
        mode=mode,
        start_score=options.start_score if options.HasField("start_score") else None,
        target=options.target if options.HasField("target") else None,
        close_bonus=options.close_bonus if options.HasField("close_bonus") else None,
        limit=options.limit if options.HasField("limit") else None,
    )


def _enum(table: Mapping[int, _V], number: int, field: str, what: str) -> _V:
    """The domain value of an enum number; an unknown number (proto3 enums are open) is an error."""
    try:
        return table[number]
    except KeyError:
        raise InvalidOptionError(field, number, f"unknown {what}") from None


def close_kind_from_proto(number: int, field: str) -> CloseKind | None:
    """The close kind of an enum number; CLOSE_KIND_UNSPECIFIED is None (no valid close)."""
    if number == pb.CLOSE_KIND_UNSPECIFIED:
        return None
    kind = _CLOSE_KINDS.get(number)
    if kind is None:
        raise RefereeError(field, number, "unknown close kind")
    return kind


def deal_from_proto(deal: pb.Deal) -> Deal:
    """The end-of-deal state of a Deal message; an unnamed player is ``player<i+1>``."""
    for i, player in enumerate(deal.players):
        # The rule options bound every score parameter the same way, so a new score always fits
        # the int32 of the reply.
        if player.HasField("score") and abs(player.score) > MAX_SCORE:
            raise InvalidDealError(f"deal.players[{i}].score", player.score, "a score must be at most 10^9 in size")
    players = tuple(
        PlayerHand(
            name=player.name or f"player{i + 1}",
            cards=cards_from_proto(player.cards, f"deal.players[{i}].cards"),
            score=player.score if player.HasField("score") else None,
        )
        for i, player in enumerate(deal.players)
    )
    # Message presence tells an absent pile (unknown) from an empty one (known to hold nothing).
    discard_pile = (
        cards_from_proto(deal.discard_pile.cards, "deal.discard_pile.cards") if deal.HasField("discard_pile") else None
    )
    stock = cards_from_proto(deal.stock.cards, "deal.stock.cards") if deal.HasField("stock") else None
    return Deal(
        players=players,
        closer=deal.closer,
        discard=Card.parse(deal.discard, "deal.discard"),
        discard_pile=discard_pile,
        stock=stock,
        eliminated=tuple(deal.eliminated),
    )


def deal_claims_from_proto(claims: pb.DealClaims) -> DealClaims:
    """The claims of a DealClaims message; a player claim with no groups claims no linking."""
    players = []
    for c, claim in enumerate(claims.players):
        at = f"claims.players[{c}]"
        groups = None
        if claim.groups:
            groups = tuple(
                cards_from_proto(group.cards, f"{at}.groups[{g}].cards") for g, group in enumerate(claim.groups)
            )
        players.append(
            PlayerClaim(
                player=claim.player,
                groups=groups,
                points=claim.points if claim.HasField("points") else None,
                score_change=claim.score_change if claim.HasField("score_change") else None,
                new_score=claim.new_score if claim.HasField("new_score") else None,
            )
        )
    multiplier = claims.multiplier if claims.HasField("multiplier") else None
    kind = close_kind_from_proto(claims.close_kind, "claims.close_kind") if claims.HasField("close_kind") else None
    return DealClaims(players=tuple(players), close_kind=kind, multiplier=multiplier)


# Domain -> proto ------------------------------------------------------------------------------


def group_to_proto(group: Group) -> pb.Group:
    """A group as its message: kind, cards in group order, what each card stands for."""
    return pb.Group(
        kind=_GROUP_KINDS[group.kind],
        cards=[card.code() for card in group.cards],
        stands_for=list(group.stands_for),
    )


def linking_to_proto(linking: Linking) -> pb.Linking:
    """A linking as its message: groups, unlinked cards (canonical codes), points."""
    return pb.Linking(
        groups=[group_to_proto(group) for group in linking.groups],
        unlinked=[card.code() for card in linking.unlinked],
        points=linking.points,
    )


def close_kind_to_proto(kind: CloseKind | None) -> pb.CloseKind:
    """The enum number of a close kind; None is CLOSE_KIND_UNSPECIFIED."""
    return pb.CLOSE_KIND_UNSPECIFIED if kind is None else _CLOSE_KIND_NUMBERS[kind]


def close_to_proto(close: Close) -> pb.Close:
    """A close verdict as its message."""
    return pb.Close(
        valid=close.valid,
        kind=close_kind_to_proto(close.kind),
        multiplier=close.multiplier,
        discard=close.discard.code() if close.discard is not None else "",
        groups=[group_to_proto(group) for group in close.linking.groups],
        reason=close.reason,
    )


def claim_to_proto(claim: ClaimVerdict) -> pb.ClaimVerdict:
    """A claim verdict as its message."""
    return pb.ClaimVerdict(
        field=claim.field,
        verdict=_VERDICTS[claim.verdict.name],
        claimed=claim.claimed,
        expected=claim.expected,
        reason=claim.reason,
    )


# The handlers -------------------------------------------------------------------------------


def solve_hand(request: pb.SolveHandRequest) -> pb.SolveHandResponse:
    """SolveHand: the best linking of 1 to 11 cards."""
    rules = rules_from_proto(request.rules)
    cards = cards_from_proto(request.cards, "cards")
    linking = best_linking(cards, rules, field="cards")
    return pb.SolveHandResponse(linking=linking_to_proto(linking))


def check_close(request: pb.CheckCloseRequest) -> pb.CheckCloseResponse:
    """CheckClose: the best close of 11 cards, or the close of 10 shown cards and a discard."""
    rules = rules_from_proto(request.rules)
    cards = cards_from_proto(request.cards, "cards")
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
    claims: list[ClaimVerdict] = []
    kind = None
    if request.HasField("claimed_kind"):
        kind = close_kind_from_proto(request.claimed_kind, "claimed_kind")
        if kind is None:
            # Claiming CLOSE_KIND_UNSPECIFIED is claiming that no valid close exists.
            claims.append(judge_value("claimed_kind", None, close.kind))
    multiplier = request.claimed_multiplier if request.HasField("claimed_multiplier") else None
    claims += judge_close_claims(close, kind, multiplier)
    return pb.CheckCloseResponse(close=close_to_proto(close), claims=[claim_to_proto(c) for c in claims])


def score_deal(request: pb.ScoreDealRequest) -> pb.ScoreDealResponse:
    """ScoreDeal: check and score an end-of-deal state, update the match, judge the claims."""
    rules = rules_from_proto(request.rules)
    deal = deal_from_proto(request.deal)
    claims = deal_claims_from_proto(request.claims)
    result = scoring.score_deal(deal, rules)
    verdicts: list[ClaimVerdict] = []
    if request.claims.HasField("close_kind") and claims.close_kind is None:
        # An explicit CLOSE_KIND_UNSPECIFIED claims that the close is not valid; it comes first,
        # where the close kind claim always comes.
        verdicts.append(judge_value("claims.close_kind", None, result.close.kind))
    verdicts += judge_deal_claims(claims, result, [player.cards for player in deal.players], rules)
    return pb.ScoreDealResponse(
        close=close_to_proto(result.close),
        players=[
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
        ],
        match_over=result.match_over,
        winner=result.winner or "",
        claims=[claim_to_proto(c) for c in verdicts],
    )


__all__ = [
    "cards_from_proto",
    "check_close",
    "claim_to_proto",
    "close_kind_from_proto",
    "close_kind_to_proto",
    "close_to_proto",
    "deal_claims_from_proto",
    "deal_from_proto",
    "group_to_proto",
    "linking_to_proto",
    "rules_from_proto",
    "score_deal",
    "solve_hand",
]
