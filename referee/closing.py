"""Closes (RULES §4): is a close valid, which kind, which multiplier, and the best discard of 11."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from referee.cards import Card, check_copies, sort_cards
from referee.errors import InvalidCardError
from referee.groups import Group, is_run, is_same_rank, judge_group
from referee.linking import Linking, best_linking
from referee.rules import CloseKind, RuleSet

SHOWN = 10
_ONE_GROUP = (CloseKind.REMIGIO, CloseKind.STRAIGHT_FLUSH_CLEAN, CloseKind.STRAIGHT_FLUSH)


@dataclass(frozen=True, slots=True)
class Close:
    """The verdict on a close: valid or not, its kind and multiplier, the discard, and why not."""

    valid: bool
    kind: CloseKind | None
    multiplier: int
    discard: Card | None
    shown: tuple[Card, ...]
    linking: Linking
    reason: str = ""


def close_kinds(shown: Sequence[Card], linking: Linking, rules: RuleSet) -> list[CloseKind]:
    """Every close kind the 10 shown cards satisfy, given their best linking."""
    naturals = [card for card in shown if not card.is_joker]
    clean = len(naturals) == len(shown)
    kinds: list[CloseKind] = []
    if is_same_rank(shown, rules):
        kinds.append(CloseKind.REMIGIO)
    if is_run(shown, rules):
        kinds.append(CloseKind.STRAIGHT_FLUSH_CLEAN if clean else CloseKind.STRAIGHT_FLUSH)
    if naturals and len({card.suit for card in naturals}) == 1:
        kinds.append(CloseKind.COLOR_CLEAN if clean else CloseKind.COLOR)
    if linking.fully_linked:
        kinds.append(CloseKind.LINKED_CLEAN if clean else CloseKind.LINKED)
    return kinds


def check_close(shown: Sequence[Card], discard: Card, rules: RuleSet, field: str = "cards") -> Close:
    """The verdict on a close of 10 shown cards with ``discard`` laid face down."""
    if len(shown) != SHOWN:
        raise InvalidCardError(field, len(shown), f"a close shows exactly {SHOWN} cards besides the discard")
    check_copies([(f"{field}[{i}]", c) for i, c in enumerate(shown)] + [("discard", discard)], rules.decks)
    return _judge(sort_cards(shown), discard, rules)


def _judge(shown: tuple[Card, ...], discard: Card, rules: RuleSet) -> Close:
    linking = best_linking(shown, rules)
    kinds = close_kinds(shown, linking, rules)
    if not kinds:
        loose = " ".join(card.code() for card in linking.unlinked)
        reason = f"the shown cards are neither linked nor of one suit: {loose} left unlinked ({linking.points} points)"
        return Close(False, None, 0, discard, shown, linking, reason)
    # The highest multiplier wins; on a tie (an overridden table) the kind listed first.
    kind = max(kinds, key=lambda k: (rules.multiplier(k), -list(CloseKind).index(k)))
    if kind in _ONE_GROUP:
        # A Remigio or a straight flush is shown as the one group it is, not split up.
        whole = judge_group(shown, rules)
        assert isinstance(whole, Group)
        linking = Linking((whole,), (), 0)
    return Close(True, kind, rules.multiplier(kind), discard, shown, linking)


def best_close(cards: Sequence[Card], rules: RuleSet, field: str = "cards") -> Close:
    """The best close of 11 cards: every discard tried, the highest multiplier kept.

    Ties go to the discard first in canonical card order. When no discard closes, the verdict
    is invalid and shows the discard that leaves the fewest points unlinked.
    """
    if len(cards) != SHOWN + 1:
        raise InvalidCardError(field, len(cards), f"a close takes {SHOWN + 1} cards, or {SHOWN} and a discard")
    check_copies([(f"{field}[{i}]", c) for i, c in enumerate(cards)], rules.decks)
    hand = sort_cards(cards)
    best: Close | None = None
    nearest: Close | None = None
    for position, discard in enumerate(hand):
        if position and hand[position - 1] == discard:
            continue
        verdict = _judge(hand[:position] + hand[position + 1 :], discard, rules)
        if verdict.valid and (best is None or verdict.multiplier > best.multiplier):
            best = verdict
        if nearest is None or verdict.linking.points < nearest.linking.points:
            nearest = verdict
    if best is not None:
        return best
    assert nearest is not None
    reason = f"no discard closes; the nearest, discarding {nearest.discard}, leaves {nearest.linking.points} points unlinked"
    return Close(False, None, 0, nearest.discard, nearest.shown, nearest.linking, reason)
