"""Claims in, verdicts out (RULES §7): a client's claimed linking, kind, points or scores, judged."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from referee.game.cards import Card, format_cards
from referee.game.closing import Close
from referee.game.errors import InvalidDealError
from referee.game.groups import NotAGroup, judge_group
from referee.game.kinds import Kind
from referee.game.linking import Linking, check_time_left
from referee.game.rules import CloseKind, RuleSet
from referee.game.scoring import DealResult


class Verdict(Kind):
    """The answer to one claim."""

    CONFIRMED = "CONFIRMED"
    WRONG = "WRONG"
    INVALID = "INVALID"
    VALID_NOT_BEST = "VALID_NOT_BEST"
    BEST = "BEST"


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """The referee's answer to one claim, with the claimed and the right value as text, and for a
    claim about a player, which player (index and name)."""

    field: str
    verdict: Verdict
    claimed: str
    expected: str
    reason: str = ""
    player: int | None = None
    player_name: str = ""


@dataclass(frozen=True, slots=True)
class PlayerClaim:
    """What a client claims of one player's outcome; None means no claim."""

    player: int
    groups: tuple[tuple[Card, ...], ...] | None = None
    points: int | None = None
    score_change: int | None = None
    new_score: int | None = None


@dataclass(frozen=True, slots=True)
class DealClaims:
    """What a client claims of a whole deal."""

    players: tuple[PlayerClaim, ...] = ()
    close_kind: CloseKind | None = None
    multiplier: int | None = None
    no_close: bool = False  # the claim that the close is not valid (it has no kind)


def judge_value(
    field: str, claimed: object, actual: object, *, reason: str = "", player: int | None = None, player_name: str = ""
) -> ClaimVerdict:
    """CONFIRMED when the claimed value is the actual one, WRONG with the right value otherwise;
    ``player`` and ``player_name`` name the player a claim is about."""
    verdict = Verdict.CONFIRMED if claimed == actual else Verdict.WRONG
    return ClaimVerdict(field, verdict, _text(claimed), _text(actual), reason, player, player_name)


def judge_linking(
    field: str, hand: Sequence[Card], claimed: Sequence[Sequence[Card]], best: Linking, rules: RuleSet
) -> ClaimVerdict:
    """INVALID (which group, why), VALID_NOT_BEST (claimed vs best points) or BEST."""
    left = Counter(hand)
    for g, group in enumerate(claimed):
        shown = format_cards(group)
        judged = judge_group(group, rules)
        if isinstance(judged, NotAGroup):
            return ClaimVerdict(
                field, Verdict.INVALID, shown, str(best.points), f"group {g} ({shown}): {judged.reason}"
            )
        left.subtract(group)
        short = sorted((card for card, n in left.items() if n < 0), key=lambda c: c.index)
        if short:
            return ClaimVerdict(
                field,
                Verdict.INVALID,
                shown,
                str(best.points),
                f"group {g} ({shown}) uses {short[0].code()} more often than the hand holds it",
            )
    points = sum(card.points(rules.joker_points) * n for card, n in left.items())
    if points == best.points:
        return ClaimVerdict(field, Verdict.BEST, str(points), str(best.points))
    return ClaimVerdict(
        field,
        Verdict.VALID_NOT_BEST,
        str(points),
        str(best.points),
        f"the claimed linking leaves {points} points; the best leaves {best.points}",
    )


def judge_close_claims(
    close: Close,
    kind: CloseKind | None,
    multiplier: int | None,
    kind_field: str = "claimed_kind",
    multiplier_field: str = "claimed_multiplier",
    *,
    no_close: bool = False,
) -> list[ClaimVerdict]:
    """Verdicts on a claimed close kind and multiplier (None: not claimed); ``no_close`` claims
    that the close is not valid, a claim on the kind that comes first, where the kind's comes.
    Of a close that is not valid, each verdict's reason says why it is not (its kind is empty)."""
    found = "" if close.valid else f"the close is not valid: {close.reason}"
    verdicts = []
    if no_close:
        verdicts.append(judge_value(kind_field, None, close.kind, reason=found))
    elif kind is not None:
        verdicts.append(judge_value(kind_field, kind, close.kind, reason=found))
    if multiplier is not None:
        verdicts.append(judge_value(multiplier_field, multiplier, close.multiplier, reason=found))
    return verdicts


def judge_deal_claims(
    claims: DealClaims, result: DealResult, hands: Sequence[Sequence[Card]], rules: RuleSet
) -> list[ClaimVerdict]:
    """Verdicts on every claim of a deal, in the order the claims came."""
    verdicts = judge_close_claims(
        result.close,
        claims.close_kind,
        claims.multiplier,
        "claims.close_kind",
        "claims.multiplier",
        no_close=claims.no_close,
    )
    for c, claim in enumerate(claims.players):
        check_time_left()
        at = f"claims.players[{c}]"
        if not 0 <= claim.player < len(result.players):
            raise InvalidDealError(f"{at}.player", claim.player, f"no such player (0 to {len(result.players) - 1})")
        # The field path counts claims, not players: each verdict names the player it is about,
        # made with it (a deal's claims are many: not made twice, nor with dataclasses.replace).
        seat, player = claim.player, result.players[claim.player]
        name = player.name
        if claim.groups is not None:
            v = judge_linking(f"{at}.groups", hands[seat], claim.groups, player.linking, rules)
            verdicts.append(ClaimVerdict(v.field, v.verdict, v.claimed, v.expected, v.reason, seat, name))
        if claim.points is not None:
            verdicts.append(judge_value(f"{at}.points", claim.points, player.points, player=seat, player_name=name))
        if claim.score_change is not None:
            verdicts.append(
                judge_value(
                    f"{at}.score_change", claim.score_change, player.score_change, player=seat, player_name=name
                )
            )
        if claim.new_score is not None:
            verdicts.append(
                judge_value(f"{at}.new_score", claim.new_score, player.score, player=seat, player_name=name)
            )
    return verdicts


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)
