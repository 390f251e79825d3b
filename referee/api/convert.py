"""The mapping between protobuf messages and domain values, both ways.

Cards are parsed here, at the edge. An error names its field relative to the message being
mapped (``players[1].cards[4]`` of a Deal); the handlers (``referee.api.handlers``) root it
at the request's field with ``rooted_at``, as they do the domain's errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TypeVar

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.game.cards import Card, card_codes, parse_cards, sort_cards
from referee.game.claims import ClaimVerdict, DealClaims, PlayerClaim, Verdict
from referee.game.closing import Close
from referee.game.deal import Deal, PlayerHand
from referee.game.errors import InvalidDealError, InvalidOptionError, rooted_at
from referee.game.groups import Group, GroupKind
from referee.game.limits import (
    CLAIMED_GROUP_CARDS,
    CLAIMED_GROUPS,
    CLAIMED_PLAYERS,
    ELIMINATED,
    MULTIPLIERS,
    NAME,
    PILE_CARDS,
    PLAYER_CARDS,
    PLAYERS,
    Limit,
)
from referee.game.linking import Linking
from referee.game.rules import (
    CloseKind,
    DiscardTaken,
    Engine,
    JokerDiscard,
    JokerLimit,
    RuleSet,
    ScoringMode,
    ScoringRules,
    check_multiplier,
)
from referee.game.scoring import DealResult, PlayerResult

# Enum tables, built from the names so a renamed member fails at import rather than at a call.
_JOKER_LIMITS = {pb.JokerLimit.Value(f"JOKER_LIMIT_{m.name}"): m for m in JokerLimit}
_JOKER_DISCARDS = {pb.JokerDiscard.Value(f"JOKER_DISCARD_{m.name}"): m for m in JokerDiscard}
_DISCARD_TAKEN = {pb.DiscardTaken.Value(f"DISCARD_TAKEN_{m.name}"): m for m in DiscardTaken}
_ENGINES = {pb.Engine.Value(f"ENGINE_{m.name}"): m for m in Engine}
_CLOSE_KINDS = {pb.CloseKind.Value(f"CLOSE_KIND_{m.name}"): m for m in CloseKind}
_CLOSE_KIND_NUMBERS = {kind: number for number, kind in _CLOSE_KINDS.items()}
_SCORING_MODES = {pb.ScoringMode.Value(f"SCORING_MODE_{m.name}"): m for m in ScoringMode}
_GROUP_KINDS = {m: pb.GroupKind.Value(f"GROUP_KIND_{m.name}") for m in GroupKind}
_VERDICTS = {
    name: pb.Verdict.Value(f"VERDICT_{name}") for name in ("CONFIRMED", "WRONG", "INVALID", "VALID_NOT_BEST", "BEST")
}
_V = TypeVar("_V")

MAX_SCORE = 10**9


# Proto -> domain ------------------------------------------------------------------------------


def cards_from_proto(codes: Sequence[str], field: str, limit: Limit) -> tuple[Card, ...]:
    """Parse repeated card codes, at most ``limit.most`` of them; an error names ``field[i]`` and the code."""
    limit.check_count(codes, field)
    return parse_cards(codes, field)


# The options a RuleOptions message sets, as plain values: (decks, joker_points, wrap_runs,
# joker_limit, joker_discard, engine, multiplier rows, scoring, discard_taken); None is unset.
_OptionsKey = tuple[
    int | None,
    int | None,
    bool | None,
    int,
    int,
    int,
    tuple[tuple[int, int], ...],
    tuple[int, int | None, int | None, int | None, int | None] | None,
    int,
]


def rules_from_proto(options: pb.RuleOptions) -> RuleSet:
    """The rule set a RuleOptions message asks for: unset fields and UNSPECIFIED enums take the defaults."""
    MULTIPLIERS.check_count(options.multipliers, "multipliers")
    # Clients send the same few rule sets again and again, and building one checks every option:
    # remember them by the options they set (a rejected one raises and is not remembered). Never
    # by the message's bytes: those hold any unknown fields a client adds, so a key could be
    # a megabyte long.
    return _rules_of(options_key(options))


def options_key(options: pb.RuleOptions) -> _OptionsKey:
    """Every option a RuleOptions message sets, as a small tuple of plain values (a cache key)."""
    scoring = options.scoring if options.HasField("scoring") else None
    return (
        options.decks if options.HasField("decks") else None,
        options.joker_points if options.HasField("joker_points") else None,
        options.wrap_runs if options.HasField("wrap_runs") else None,
        options.joker_limit,
        options.joker_discard,
        options.engine,
        tuple([(row.kind, row.multiplier) for row in options.multipliers]),
        None
        if scoring is None
        else (
            scoring.mode,
            scoring.start_score if scoring.HasField("start_score") else None,
            scoring.target if scoring.HasField("target") else None,
            scoring.close_bonus if scoring.HasField("close_bonus") else None,
            scoring.limit if scoring.HasField("limit") else None,
        ),
        options.discard_taken,
    )


@lru_cache(maxsize=256)
def _rules_of(key: _OptionsKey) -> RuleSet:
    decks, joker_points, wrap_runs, joker_limit, joker_discard, engine, multipliers, scoring, discard_taken = key
    changes: dict[str, object] = {}
    if decks is not None:
        changes["decks"] = decks
    if joker_points is not None:
        changes["joker_points"] = joker_points
    if wrap_runs is not None:
        changes["wrap_runs"] = wrap_runs
    if joker_limit != pb.JOKER_LIMIT_UNSPECIFIED:
        changes["joker_limit"] = _enum(_JOKER_LIMITS, joker_limit, "joker_limit", "joker limit")
    if joker_discard != pb.JOKER_DISCARD_UNSPECIFIED:
        changes["joker_discard"] = _enum(_JOKER_DISCARDS, joker_discard, "joker_discard", "joker discard")
    if discard_taken != pb.DISCARD_TAKEN_UNSPECIFIED:
        changes["discard_taken"] = _enum(_DISCARD_TAKEN, discard_taken, "discard_taken", "discard_taken option")
    if engine != pb.ENGINE_UNSPECIFIED:
        changes["engine"] = _enum(_ENGINES, engine, "engine", "engine")
    if multipliers:
        changes["multipliers"] = _multipliers_from_rows(multipliers)
    if scoring is not None:
        changes["scoring"] = _scoring_from_values(*scoring)
    return RuleSet(**changes)  # type: ignore[arg-type]


def _multipliers_from_rows(rows: Sequence[tuple[int, int]]) -> dict[CloseKind, int]:
    table: dict[CloseKind, int] = {}
    for i, (number, multiplier) in enumerate(rows):
        at = f"multipliers[{i}]"
        if number == pb.CLOSE_KIND_UNSPECIFIED:
            raise InvalidOptionError(f"{at}.kind", "CLOSE_KIND_UNSPECIFIED", "a multiplier row needs a close kind")
        kind = _enum(_CLOSE_KINDS, number, f"{at}.kind", "close kind")
        if kind in table:
            raise InvalidOptionError(f"{at}.kind", pb.CloseKind.Name(number), "this close kind is listed twice")
        with rooted_at(f"{at}.multiplier"):
            check_multiplier(multiplier)
        table[kind] = multiplier
    return table


def _scoring_from_values(
    mode: int, start_score: int | None, target: int | None, close_bonus: int | None, limit: int | None
) -> ScoringRules:
    return ScoringRules(
        mode=None
        if mode == pb.SCORING_MODE_UNSPECIFIED
        else _enum(_SCORING_MODES, mode, "scoring.mode", "scoring mode"),
        start_score=start_score,
        target=target,
        close_bonus=close_bonus,
        limit=limit,
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
        raise InvalidOptionError(field, number, "unknown close kind")
    return kind


def deal_from_proto(deal: pb.Deal) -> Deal:
    """The end-of-deal state of a Deal message; an unnamed player is ``player<i+1>``."""
    PLAYERS.check_count(deal.players, "players")
    ELIMINATED.check_count(deal.eliminated, "eliminated")
    for i, name in enumerate(deal.eliminated):
        NAME.check_length(name, f"eliminated[{i}]")
    for i, player in enumerate(deal.players):
        NAME.check_length(player.name, f"players[{i}].name")
        # The rule options bound every score parameter the same way, so a new score always fits
        # the int32 of the reply.
        if player.HasField("score") and abs(player.score) > MAX_SCORE:
            raise InvalidDealError(f"players[{i}].score", player.score, "a score must be at most 10^9 in size")
    players = tuple(
        PlayerHand(
            name=player.name or f"player{i + 1}",
            cards=cards_from_proto(player.cards, f"players[{i}].cards", PLAYER_CARDS),
            score=player.score if player.HasField("score") else None,
        )
        for i, player in enumerate(deal.players)
    )
    # Message presence tells an absent pile (unknown) from an empty one (known to hold nothing).
    discard_pile = (
        cards_from_proto(deal.discard_pile.cards, "discard_pile.cards", PILE_CARDS)
        if deal.HasField("discard_pile")
        else None
    )
    stock = cards_from_proto(deal.stock.cards, "stock.cards", PILE_CARDS) if deal.HasField("stock") else None
    return Deal(
        players=players,
        closer=deal.closer,
        discard=Card.parse(deal.discard, "discard"),
        discard_pile=discard_pile,
        stock=stock,
        eliminated=tuple(deal.eliminated),
    )


def deal_claims_from_proto(claims: pb.DealClaims) -> DealClaims:
    """The claims of a DealClaims message; a player claim with no groups claims no linking, and an
    explicit CLOSE_KIND_UNSPECIFIED claims that the close is not valid."""
    CLAIMED_PLAYERS.check_count(claims.players, "players")
    players = []
    for c, claim in enumerate(claims.players):
        at = f"players[{c}]"
        groups = None
        if claim.groups:
            groups = claimed_groups_from_proto(claim.groups, f"{at}.groups")
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
    kind = close_kind_from_proto(claims.close_kind, "close_kind") if claims.HasField("close_kind") else None
    no_close = claims.HasField("close_kind") and kind is None
    return DealClaims(players=tuple(players), close_kind=kind, multiplier=multiplier, no_close=no_close)


def claimed_groups_from_proto(groups: Sequence[pb.ClaimedGroup], field: str) -> tuple[tuple[Card, ...], ...]:
    """The cards of each claimed group; an error names ``field[g].cards[i]``."""
    CLAIMED_GROUPS.check_count(groups, field)
    return tuple(
        cards_from_proto(group.cards, f"{field}[{g}].cards", CLAIMED_GROUP_CARDS) for g, group in enumerate(groups)
    )


# Domain -> proto ------------------------------------------------------------------------------


def deal_to_proto(deal: Deal) -> pb.Deal:
    """A Deal message of an end-of-deal state (``deal_from_proto`` reads it back)."""
    message = pb.Deal(
        players=[
            pb.Player(name=player.name, cards=card_codes(player.cards), score=player.score) for player in deal.players
        ],
        closer=deal.closer,
        discard=deal.discard.code(),
        eliminated=deal.eliminated,
    )
    if deal.discard_pile is not None:
        message.discard_pile.cards.extend(card.code() for card in deal.discard_pile)
        message.discard_pile.SetInParent()
    if deal.stock is not None:
        message.stock.cards.extend(card.code() for card in deal.stock)
        message.stock.SetInParent()
    return message


def group_to_proto(group: Group) -> pb.Group:
    """A group as its message: kind, cards in group order, what each card stands for."""
    return pb.Group(
        kind=_GROUP_KINDS[group.kind],
        cards=card_codes(group.cards),
        stands_for=list(group.stands_for),
    )


def linking_to_proto(linking: Linking, into: pb.Linking | None = None) -> pb.Linking:
    """A linking as its message: groups, unlinked cards (canonical codes), points; written into
    ``into`` when given (an empty field of a larger message, then set: no copy of it made there).

    Its groups are made in place (``add``), not made apart and copied in: a third of the time of
    a SolveHand's reply."""
    message = pb.Linking() if into is None else into
    message.SetInParent()
    add = message.groups.add
    for group in linking.groups:
        add(kind=_GROUP_KINDS[group.kind], cards=card_codes(group.cards), stands_for=group.stands_for)
    message.unlinked.extend(card_codes(linking.unlinked))
    message.points = linking.points
    return message


def close_kind_to_proto(kind: CloseKind | None) -> pb.CloseKind:
    """The enum number of a close kind; None is CLOSE_KIND_UNSPECIFIED."""
    return pb.CLOSE_KIND_UNSPECIFIED if kind is None else _CLOSE_KIND_NUMBERS[kind]


def group_kind_to_proto(kind: GroupKind) -> pb.GroupKind:
    """The enum number of a group kind."""
    return _GROUP_KINDS[kind]


def verdict_to_proto(verdict: Verdict) -> pb.Verdict:
    """The enum number of a claim's verdict."""
    return _VERDICTS[verdict.name]


def close_to_proto(close: Close) -> pb.Close:
    """A close verdict as its message."""
    return pb.Close(
        valid=close.valid,
        kind=close_kind_to_proto(close.kind),
        multiplier=close.multiplier,
        discard=close.discard.code() if close.discard is not None else "",
        groups=[group_to_proto(group) for group in close.linking.groups],
        reason=close.reason,
        unlinked=card_codes(close.linking.unlinked),
    )


# Answers read back (the report and --svg draw a batch's or a reply's JSON) -------------------
# The referee's own replies, so a card that does not parse is an error of the file, not a claim.

_GROUP_KIND_OF = {number: kind for kind, number in _GROUP_KINDS.items()}


def group_from_proto(group: pb.Group) -> Group:
    """A Group message of a reply as the domain's group."""
    return Group(
        _enum(_GROUP_KIND_OF, group.kind, "kind", "group kind"), parse_cards(list(group.cards)), tuple(group.stands_for)
    )


def linking_from_proto(linking: pb.Linking) -> Linking:
    """A Linking message of a reply as the domain's linking."""
    return Linking(
        tuple(group_from_proto(group) for group in linking.groups),
        parse_cards(list(linking.unlinked)),
        linking.points,
    )


def close_from_proto(close: pb.Close) -> Close:
    """A Close message of a reply as the domain's close verdict.

    The message does not carry the points of the shown cards' linking: the linking read here has
    none (the drawing of a close shows no points)."""
    groups = tuple(group_from_proto(group) for group in close.groups)
    unlinked = parse_cards(list(close.unlinked))
    return Close(
        valid=close.valid,
        kind=close_kind_from_proto(close.kind, "kind"),
        multiplier=close.multiplier,
        discard=Card.parse(close.discard, "discard") if close.discard else None,
        shown=sort_cards([card for group in groups for card in group.cards] + list(unlinked)),
        linking=Linking(groups, unlinked, 0),
        reason=close.reason,
    )


def deal_result_from_proto(result: pb.ScoreDealResponse) -> DealResult:
    """A ScoreDealResponse as the domain's scored deal (its scoring rules, which the message does
    not carry, left unresolved)."""
    return DealResult(
        close=close_from_proto(result.close),
        players=tuple(
            PlayerResult(
                name=player.name,
                closer=player.closer,
                linking=linking_from_proto(player.linking),
                points=player.points,
                score_change=player.score_change,
                score=player.score,
                eliminated=player.eliminated,
            )
            for player in result.players
        ),
        scoring=ScoringRules(),
        match_over=result.match_over,
        winner=result.winner or None,
    )


def claim_to_proto(claim: ClaimVerdict) -> pb.ClaimVerdict:
    """A claim verdict as its message."""
    return pb.ClaimVerdict(
        field=claim.field,
        verdict=_VERDICTS[claim.verdict.name],
        claimed=claim.claimed,
        expected=claim.expected,
        reason=claim.reason,
        player=claim.player,
        player_name=claim.player_name,
    )


__all__ = [
    "cards_from_proto",
    "close_from_proto",
    "deal_result_from_proto",
    "group_from_proto",
    "linking_from_proto",
    "claimed_groups_from_proto",
    "claim_to_proto",
    "close_kind_from_proto",
    "close_kind_to_proto",
    "close_to_proto",
    "deal_claims_from_proto",
    "deal_from_proto",
    "deal_to_proto",
    "group_kind_to_proto",
    "group_to_proto",
    "linking_to_proto",
    "rules_from_proto",
    "verdict_to_proto",
]
