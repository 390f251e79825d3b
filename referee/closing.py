"""Closes (RULES §4): is a close valid, which kind, which multiplier, and the best discard of 11."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from referee.cards import (
    ACE,
    CARD_BY_INDEX,
    JOKER,
    RANKS,
    RANKS_PER_SUIT,
    SUITS,
    Card,
    check_copies,
    format_cards,
    index_of,
    rank_of,
    sort_cards,
    suit_of,
)
from referee.errors import InvalidCardError
from referee.groups import Group, is_run, is_same_rank, judge_group
from referee.linking import Linking, best_linking, links_fully
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


def shape_kinds(shown: Sequence[Card], rules: RuleSet) -> list[CloseKind]:
    """The close kinds the 10 shown cards satisfy by their shape alone (no linking needed)."""
    naturals = [card for card in shown if not card.is_joker]
    clean = len(naturals) == len(shown)
    kinds: list[CloseKind] = []
    if is_same_rank(shown, rules):
        kinds.append(CloseKind.REMIGIO)
    if is_run(shown, rules):
        kinds.append(CloseKind.STRAIGHT_FLUSH_CLEAN if clean else CloseKind.STRAIGHT_FLUSH)
    if naturals and len({card.suit for card in naturals}) == 1:
        kinds.append(CloseKind.COLOR_CLEAN if clean else CloseKind.COLOR)
    return kinds


def linked_kind(shown: Sequence[Card]) -> CloseKind:
    """The kind the shown cards earn if they are linked: clean when no joker is shown."""
    return CloseKind.LINKED if any(card.is_joker for card in shown) else CloseKind.LINKED_CLEAN


def close_kinds(shown: Sequence[Card], linking: Linking, rules: RuleSet) -> list[CloseKind]:
    """Every close kind the 10 shown cards satisfy, given their best linking."""
    kinds = shape_kinds(shown, rules)
    if linking.fully_linked:
        kinds.append(linked_kind(shown))
    return kinds


def check_close(shown: Sequence[Card], discard: Card, rules: RuleSet, field: str = "cards") -> Close:
    """The verdict on a close of 10 shown cards with ``discard`` laid face down."""
    if len(shown) != SHOWN:
        raise InvalidCardError(field, len(shown), f"a close shows exactly {SHOWN} cards besides the discard")
    check_copies([*shown, discard], rules.decks, lambda i: f"{field}[{i}]" if i < len(shown) else "discard")
    return _judge(sort_cards(shown), discard, rules)


def _judge(shown: tuple[Card, ...], discard: Card, rules: RuleSet) -> Close:
    kinds = shape_kinds(shown, rules)
    linked = linked_kind(shown)
    top = max(kinds, key=lambda k: rules.multiplier(k), default=None)
    if top in _ONE_GROUP and rules.multiplier(top) >= rules.multiplier(linked):
        # A Remigio or a straight flush is linked and shown as the one group it is: no solve.
        whole = judge_group(shown, rules)
        assert isinstance(whole, Group)
        linking = Linking((whole,), (), 0)
    else:
        linking = best_linking(shown, rules)
    if linking.fully_linked:
        kinds.append(linked)
    if not kinds:
        loose = format_cards(linking.unlinked)
        reason = f"the shown cards are neither linked nor of one suit: {loose} left unlinked ({linking.points} points)"
        return Close(False, None, 0, discard, shown, linking, reason)
    # The highest multiplier wins; on a tie (an overridden table) the kind listed first.
    kind = max(kinds, key=lambda k: (rules.multiplier(k), -list(CloseKind).index(k)))
    if kind in _ONE_GROUP and len(linking.groups) != 1:
        whole = judge_group(shown, rules)
        assert isinstance(whole, Group)
        linking = Linking((whole,), (), 0)
    return Close(True, kind, rules.multiplier(kind), discard, shown, linking)


def best_close(cards: Sequence[Card], rules: RuleSet, field: str = "cards") -> Close:
    """The best close of 11 cards: every discard tried, the highest multiplier kept.

    Ties go to the discard first in canonical card order. When no discard closes, the verdict
    is invalid and, as a hint, discards the highest-point card that can be in no group (or, when
    every card could be, the highest-point card), the first in card order on a tie.
    """
    if len(cards) != SHOWN + 1:
        raise InvalidCardError(field, len(cards), f"a close takes {SHOWN + 1} cards, or {SHOWN} and a discard")
    check_copies(cards, rules.decks, lambda i: f"{field}[{i}]")
    hand = sort_cards(cards)
    best_multiplier, best_position = 0, -1
    for position, discard in enumerate(hand):
        if position and hand[position - 1] == discard:
            continue
        shown = hand[:position] + hand[position + 1 :]
        top = max((rules.multiplier(kind) for kind in shape_kinds(shown, rules)), default=0)
        # Linking is the costly part: only when it could lift this discard above the best so far
        # (an earlier discard keeps a tie), and only when no card is sure to stay unlinked.
        linked = rules.multiplier(linked_kind(shown))
        if linked > max(top, best_multiplier) and may_be_linked(shown, rules):
            if links_fully(shown, rules):
                top = linked
        if top > best_multiplier:
            best_multiplier, best_position = top, position
    if best_position >= 0:
        return _judge(hand[:best_position] + hand[best_position + 1 :], hand[best_position], rules)
    discard = max(loose_cards(hand, rules) or hand, key=lambda card: (card.points(rules.joker_points), -card.index))
    position = hand.index(discard)
    verdict = _judge(hand[:position] + hand[position + 1 :], discard, rules)
    reason = f"no discard closes; discarding {discard}, {verdict.linking.points} points stay unlinked"
    return Close(False, None, 0, discard, verdict.shown, verdict.linking, reason)


def may_be_linked(shown: Sequence[Card], rules: RuleSet) -> bool:
    """False when some natural card of ``shown`` can be in no group at all (a quick necessary test)."""
    return not loose_cards(shown, rules, first_only=True)


def loose_cards(cards: Sequence[Card], rules: RuleSet, first_only: bool = False) -> list[Card]:
    """The natural cards that can be in no group of ``cards``, whatever the linking."""
    counts = Counter(card.index for card in cards)
    jokers = counts.get(JOKER.index, 0)
    limit = rules.joker_limit
    loose = []
    for index in sorted(counts):
        if index == JOKER.index:
            continue
        rank, suit = rank_of(index), suit_of(index)
        same_rank = sum(counts.get(index_of(rank, s), 0) for s in range(len(SUITS)))
        if any(3 - k <= jokers and limit.allows(k, max(0, 3 - k)) for k in range(1, min(same_rank, 3) + 1)):
            continue
        if _in_some_run(rank, suit, counts, jokers, rules):
            continue
        loose.append(CARD_BY_INDEX[index])
        if first_only:
            break
    return loose


def _in_some_run(rank: int, suit: int, counts: Counter[int], jokers: int, rules: RuleSet) -> bool:
    """True when some run through this card fits the suit's cards held and the jokers."""
    ace = index_of(ACE, suit)
    held = {r for r, index in zip(RANKS, range(ace, ace + RANKS_PER_SUIT)) if counts.get(index, 0)}
    for position in [1, 14] if rank == 1 else [rank]:
        for length in range(3, 14):
            for start in range(position - length + 1, position + 1):
                end = start + length - 1
                if not rules.wrap_runs and (start < 1 or end > 14):
                    continue
                # clock_rank inlined: measured, its call here doubled the time of loose_cards.
                ranks = {(p - 1) % RANKS_PER_SUIT + 1 for p in range(start, end + 1)}
                if len(ranks) < length:
                    continue
                missing = len(ranks - held)
                if missing <= jokers and rules.joker_limit.allows(length - missing, missing):
                    return True
    return False
