"""What a group is (RULES §2): same rank, run, or jokers only; where each joker stands."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from referee.game.cards import (
    ACE,
    CARD_BY_INDEX,
    JOKER,
    RANKS,
    RANKS_PER_SUIT,
    Card,
    clock_rank,
    format_cards,
    index_of,
    rank_code,
    sort_cards,
    suit_of,
)
from referee.game.kinds import Kind
from referee.game.rules import RuleSet

MIN_GROUP = 3
# A run uses each rank once, and the ace either low or high, so 13 cards at most.
MAX_RUN = len(RANKS)
HIGH_ACE = 14


class GroupKind(Kind):
    """The kinds of group."""

    SAME_RANK = "SAME_RANK"
    RUN = "RUN"
    JOKERS_ONLY = "JOKERS_ONLY"


@dataclass(frozen=True, slots=True)
class Group:
    """A valid group: its cards in group order and what each card stands for."""

    kind: GroupKind
    cards: tuple[Card, ...]
    # Parallel to cards: a natural's own code; a joker's stand-in ("6H" in a run, "7" in a
    # same-rank group, "" in a jokers-only group).
    stands_for: tuple[str, ...]

    @property
    def key(self) -> tuple[int, ...]:
        """The group as a sorted tuple of card indices: its identity, whatever the order."""
        return tuple(sorted(card.index for card in self.cards))

    def __str__(self) -> str:
        return format_cards(self.cards)


@dataclass(frozen=True, slots=True)
class NotAGroup:
    """Why some cards are not a group."""

    reason: str

    def __bool__(self) -> bool:
        return False


def judge_group(cards: Iterable[Card], rules: RuleSet) -> Group | NotAGroup:
    """The group these cards make under ``rules``, or why they make none."""
    cards = sort_cards(cards)
    if len(cards) < MIN_GROUP:
        return NotAGroup(f"a group needs at least {MIN_GROUP} cards, not {len(cards)}")
    # Sorted by index: the jokers (index 52) come last.
    held = len(cards)
    while held and cards[held - 1].rank is None:
        held -= 1
    naturals = cards[:held]
    jokers = len(cards) - held
    if not rules.joker_limit.allows(len(naturals), jokers):
        return NotAGroup(
            f"{jokers} joker{'s' if jokers != 1 else ''} with {len(naturals)} natural card"
            f"{'s' if len(naturals) != 1 else ''} breaks the joker limit {rules.joker_limit.value}"
        )
    if not naturals:
        return Group(GroupKind.JOKERS_ONLY, cards, ("",) * len(cards))
    same_rank = same_rank_group(naturals, jokers)
    if same_rank is not None:
        return same_rank
    return run_group(naturals, jokers, rules.wrap_runs)


def same_rank_group(naturals: Sequence[Card], jokers: int) -> Group | None:
    """The same-rank group of these naturals and jokers, or None when the ranks differ."""
    rank = naturals[0].rank
    if rank is None:
        return None
    for card in naturals:
        if card.rank != rank:
            return None
    cards = tuple(naturals) + (JOKER,) * jokers
    stands = tuple([card.code() for card in naturals]) + (rank_code(rank),) * jokers
    return Group(GroupKind.SAME_RANK, cards, stands)


def run_group(naturals: Sequence[Card], jokers: int, wrap_runs: bool) -> Group | NotAGroup:
    """The run of these naturals and jokers, or why they make none."""
    # The suit by index (suits are enum members, whose hashing is slow).
    suit = suit_of(naturals[0].index)
    for card in naturals:
        if suit_of(card.index) != suit:
            return NotAGroup("neither one rank nor one suit")
    ranks = [card.rank for card in naturals if card.rank is not None]
    if len(set(ranks)) != len(ranks):
        return NotAGroup("a run cannot hold a rank twice")
    size = len(naturals) + jokers
    if size > MAX_RUN:
        return NotAGroup(f"a run holds at most {MAX_RUN} cards, not {size}")
    start = run_start(ranks, size, wrap_runs)
    if start is None:
        return NotAGroup("the cards are not consecutive, even with the jokers standing in")
    return _lay_run(suit, ranks, start, size)


def run_start(ranks: Sequence[int], size: int, wrap_runs: bool) -> int | None:
    """Where a run of ``size`` holding ``ranks`` starts, on the scale 1 (ace low) to 14 (ace high).

    Jokers fill the gaps, then extend the run upwards, then downwards; the ace is tried low
    first. With ``wrap_runs`` a start past the king wraps round (returned as 1-13 with the run
    read modulo 13). None when no placement exists.
    """
    low, high = min(ranks), max(ranks)
    if high - low + 1 > size and low == ACE:  # the ace high instead (without an ace: the same)
        positions = [HIGH_ACE if r == ACE else r for r in ranks]
        low, high = min(positions), max(positions)
    if high - low + 1 <= size:
        return min(low, HIGH_ACE - size + 1)
    if wrap_runs:
        for first in sorted(set(ranks)):
            if all((r - first) % RANKS_PER_SUIT < size for r in ranks):
                return first
    return None


def _lay_run(suit: int, ranks: Sequence[int], start: int, size: int) -> Group:
    """The run from ``start`` of ``size`` cards of the suit at position ``suit``."""
    by_rank = set(ranks)
    laid = [CARD_BY_INDEX[index_of(clock_rank(start + offset), suit)] for offset in range(size)]
    cards = tuple([card if card.rank in by_rank else JOKER for card in laid])
    return Group(GroupKind.RUN, cards, tuple([card.code() for card in laid]))


def is_run(cards: Iterable[Card], rules: RuleSet) -> bool:
    """True when the cards make one single run (jokers standing in) under ``rules``."""
    cards = tuple(cards)
    naturals = [c for c in cards if not c.is_joker]
    jokers = len(cards) - len(naturals)
    if len(cards) < MIN_GROUP or not naturals or not rules.joker_limit.allows(len(naturals), jokers):
        return False
    return isinstance(run_group(naturals, jokers, rules.wrap_runs), Group)


def is_same_rank(cards: Iterable[Card], rules: RuleSet) -> bool:
    """True when the cards make one single same-rank group (jokers standing in) under ``rules``."""
    cards = tuple(cards)
    naturals = [c for c in cards if not c.is_joker]
    jokers = len(cards) - len(naturals)
    if len(cards) < MIN_GROUP or not rules.joker_limit.allows(len(naturals), jokers):
        return False
    return not naturals or same_rank_group(naturals, jokers) is not None
