"""Closes (RULES §4): is a close valid, which kind, which multiplier, and the best discard of 11."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from referee.game.cards import (
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
from referee.game.errors import InvalidCardError
from referee.game.groups import Group, is_run, is_same_rank, judge_group
from referee.game.linking import Linking, best_linking, links_fully
from referee.game.rules import CloseKind, JokerDiscard, RuleSet

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


def with_jokers(shown: Sequence[Card], discard: Card | None, rules: RuleSet) -> bool:
    """Whether a close counts as one with jokers: a joker shown, or under ``joker_discard``
    NOT_CLEAN a joker laid face down."""
    if discard is not None and discard.is_joker and rules.joker_discard is JokerDiscard.NOT_CLEAN:
        return True
    return any(card.is_joker for card in shown)


def discard_allowed(discard: Card, rules: RuleSet) -> bool:
    """False for a joker discard under ``joker_discard`` FORBIDDEN."""
    return not (discard.is_joker and rules.joker_discard is JokerDiscard.FORBIDDEN)


def is_remigio(shown: Sequence[Card], rules: RuleSet) -> bool:
    """All the shown cards of one rank (jokers standing in) and linked under the joker limit: one
    group, or several of that rank (under ONE_PER_GROUP, eight sevens and two jokers are two)."""
    rank = None
    for card in shown:
        if card.is_joker:
            continue
        if rank is None:
            rank = card.rank
        elif card.rank != rank:
            return False
    # Only cards of one rank and jokers: every full linking is of same-rank groups.
    return is_same_rank(shown, rules) or links_fully(shown, rules)


def shape_kinds(shown: Sequence[Card], rules: RuleSet, discard: Card | None = None) -> list[CloseKind]:
    """The close kinds the 10 shown cards satisfy by their shape (a Remigio may need a linking),
    with ``discard`` laid face down."""
    naturals = [card for card in shown if not card.is_joker]
    clean = not with_jokers(shown, discard, rules)
    kinds: list[CloseKind] = []
    if is_remigio(shown, rules):
        kinds.append(CloseKind.REMIGIO)
    if is_run(shown, rules):
        kinds.append(CloseKind.STRAIGHT_FLUSH_CLEAN if clean else CloseKind.STRAIGHT_FLUSH)
    if naturals and len({card.suit for card in naturals}) == 1:
        kinds.append(CloseKind.COLOR_CLEAN if clean else CloseKind.COLOR)
    return kinds


def linked_kind(shown: Sequence[Card], rules: RuleSet, discard: Card | None = None) -> CloseKind:
    """The kind the shown cards earn if they are linked: clean when the close has no joker."""
    return CloseKind.LINKED if with_jokers(shown, discard, rules) else CloseKind.LINKED_CLEAN


def close_kinds(
    shown: Sequence[Card], linking: Linking, rules: RuleSet, discard: Card | None = None
) -> list[CloseKind]:
    """Every close kind the 10 shown cards satisfy, given their best linking."""
    kinds = shape_kinds(shown, rules, discard)
    if linking.fully_linked:
        kinds.append(linked_kind(shown, rules, discard))
    return kinds


def check_close(shown: Sequence[Card], discard: Card, rules: RuleSet, field: str = "cards") -> Close:
    """The verdict on a close of 10 shown cards with ``discard`` laid face down."""
    if len(shown) != SHOWN:
        raise InvalidCardError(field, len(shown), f"a close shows exactly {SHOWN} cards besides the discard")
    check_copies([*shown, discard], rules.decks, lambda i: f"{field}[{i}]" if i < len(shown) else "discard")
    return _judge(sort_cards(shown), discard, rules)


def check_dealt_close(shown: tuple[Card, ...], discard: Card, rules: RuleSet) -> Close:
    """``check_close`` of a close a replayed deal makes: its 10 shown cards already in canonical
    order and, with the discard, within the deck's copies (a deal dealt from the deck leaves no
    other), so neither is checked or sorted again."""
    return _judge(shown, discard, rules)


# A replayed deal's close is judged by the replay and again when its end state is scored (the
# same code path as ScoreDeal): a verdict is a value of its cards and rules, so the second is a
# lookup. Bounded like the linking cache; a call that runs out of time caches nothing.
@functools.lru_cache(maxsize=4096)
def _judge(shown: tuple[Card, ...], discard: Card, rules: RuleSet) -> Close:
    if not discard_allowed(discard, rules):
        linking = best_linking(shown, rules)
        reason = "a joker may not be the discard (joker_discard FORBIDDEN)"
        return Close(False, None, 0, discard, shown, linking, reason)
    kinds = shape_kinds(shown, rules, discard)
    linked = linked_kind(shown, rules, discard)
    top = max(kinds, key=lambda k: rules.multiplier(k), default=None)
    whole = judge_group(shown, rules) if top in _ONE_GROUP else None
    if top is not None and isinstance(whole, Group) and rules.multiplier(top) >= rules.multiplier(linked):
        # A Remigio or a straight flush that is one group is shown as that group: no solve (the
        # best linking is that group too: no point left, and fewest groups).
        linking = Linking((whole,), (), 0)
    else:
        linking = best_linking(shown, rules)
        if not linking.fully_linked and not linking.points and links_fully(shown, rules):
            # Jokers worth 0 points may stay out of the best linking (fewer groups, or a shorter
            # one), yet the cards are linked: show the linking that leaves nothing, the best one
            # were each joker worth a point (the groups do not depend on the points).
            linking = best_linking(shown, rules.with_options(joker_points=1))
    if linking.fully_linked:
        kinds.append(linked)
    if not kinds:
        loose = format_cards(linking.unlinked)
        reason = f"the shown cards are neither linked nor of one suit: {loose} left unlinked ({linking.points} points)"
        return Close(False, None, 0, discard, shown, linking, reason)
    # The highest multiplier wins; on a tie (an overridden table) the kind listed first.
    kind = max(kinds, key=lambda k: (rules.multiplier(k), -list(CloseKind).index(k)))
    return Close(True, kind, rules.multiplier(kind), discard, shown, linking)


def forget_verdicts() -> None:
    """Empty the cache of close verdicts (a benchmark times each close cold)."""
    _judge.cache_clear()


def best_close(cards: Sequence[Card], rules: RuleSet, field: str = "cards") -> Close:
    """The best close of 11 cards: every discard tried, the highest multiplier kept.

    Ties go to the discard first in canonical card order; under ``joker_discard`` FORBIDDEN a
    joker is never the discard. When no discard closes, the verdict is invalid and, as a hint,
    discards the highest-point card that can be in no group (or, when every card could be, the
    highest-point card it may discard), the first in card order on a tie.
    """
    if len(cards) != SHOWN + 1:
        raise InvalidCardError(field, len(cards), f"a close takes {SHOWN + 1} cards, or {SHOWN} and a discard")
    check_copies(cards, rules.decks, lambda i: f"{field}[{i}]")
    hand = sort_cards(cards)
    best_multiplier, best_position = 0, -1
    for position, discard in enumerate(hand):
        if position and hand[position - 1] == discard or not discard_allowed(discard, rules):
            continue
        shown = hand[:position] + hand[position + 1 :]
        top = max((rules.multiplier(kind) for kind in shape_kinds(shown, rules, discard)), default=0)
        # Linking is the costly part: only when it could lift this discard above the best so far
        # (an earlier discard keeps a tie), and only when no card is sure to stay unlinked.
        linked = rules.multiplier(linked_kind(shown, rules, discard))
        if linked > max(top, best_multiplier) and may_be_linked(shown, rules):
            if links_fully(shown, rules):
                top = linked
        if top > best_multiplier:
            best_multiplier, best_position = top, position
    if best_position >= 0:
        return _judge(hand[:best_position] + hand[best_position + 1 :], hand[best_position], rules)
    allowed = [card for card in hand if discard_allowed(card, rules)]  # never empty: 8 jokers at most
    discard = max(loose_cards(hand, rules) or allowed, key=lambda card: (card.points(rules.joker_points), -card.index))
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
