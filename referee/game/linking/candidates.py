"""Every group a hand can form, as multisets of card indices (the CP-SAT model's columns)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from itertools import product

from referee.game.cards import ACE, JOKER_INDEX, RANKS, RANKS_PER_SUIT, SUITS, clock_rank, index_of, rank_of
from referee.game.groups import HIGH_ACE, MAX_RUN, MIN_GROUP
from referee.game.rules import JokerLimit, RuleSet

Candidate = tuple[int, ...]  # sorted card indices, duplicates repeated


def candidate_groups(counts: Mapping[int, int], rules: RuleSet) -> list[Candidate]:
    """All distinct groups within ``counts`` (index -> copies held), in canonical order.

    Built from the groups of each rank and the runs of each suit, each looked up by what the
    hand holds of that rank or suit: hands differ, but a rank's or a suit's holding recurs, so a
    long-running process mostly finds them made.
    """
    jokers = counts.get(JOKER_INDEX, 0)
    limit = rules.joker_limit
    longest = min(MAX_RUN, sum(counts.values()))
    found: set[Candidate] = set()
    by_rank: dict[int, list[tuple[int, int]]] = {}
    for index in sorted(counts):
        if index != JOKER_INDEX and counts[index]:
            by_rank.setdefault(rank_of(index), []).append((index, counts[index]))
    for held in by_rank.values():
        if sum(k for _, k in held) + jokers >= MIN_GROUP:  # else too few of this rank for any group
            found.update(_same_rank_groups(tuple(held), jokers, limit))
    for suit in range(len(SUITS)):
        ace = index_of(ACE, suit)
        ranks = tuple(rank for rank, index in zip(RANKS, range(ace, ace + RANKS_PER_SUIT)) if counts.get(index, 0))
        if ranks:
            found.update(_runs_of_suit(suit, ranks, jokers, longest, limit, rules.wrap_runs))
    if limit is JokerLimit.UNLIMITED:
        for j in range(MIN_GROUP, jokers + 1):
            found.add((JOKER_INDEX,) * j)
    return sorted(found)


@lru_cache(maxsize=1 << 12)
def _same_rank_groups(held: tuple[tuple[int, int], ...], jokers: int, limit: JokerLimit) -> tuple[Candidate, ...]:
    """Every same-rank group from ``held`` ((card index, copies) of one rank) and up to ``jokers`` jokers."""
    found = []
    indices = [index for index, _ in held]
    for take in product(*(range(k + 1) for _, k in held)):
        naturals = sum(take)
        if naturals == 0:
            continue
        base = tuple(i for i, n in zip(indices, take) for _ in range(n))
        for j in range(max(0, MIN_GROUP - naturals), jokers + 1):
            if limit.allows(naturals, j):
                found.append(base + (JOKER_INDEX,) * j)
    return tuple(found)


@lru_cache(maxsize=1 << 12)
def _runs_of_suit(
    suit: int, ranks: tuple[int, ...], jokers: int, longest: int, limit: JokerLimit, wrap_runs: bool
) -> tuple[Candidate, ...]:
    """Every run of the suit at position ``suit``: a set of the ``ranks`` held (one copy each)
    plus jokers, at most ``longest`` cards.

    A set of ranks spanning ``span`` places of the scale takes at least ``span - k`` jokers (its
    gaps, whether the hand holds those cards or not) and at most as many as keep the run within
    13 cards and the hand; every count between is a run (the extra jokers extend it at one end).
    Sets are grown in scale order from their lowest place and abandoned once their gaps outgrow
    the jokers, so a suit of scattered ranks costs little.
    """
    found: set[Candidate] = set()
    allows = limit.allows
    if wrap_runs:
        # Round the clock: a set's shortest arc starts at one of its ranks; read the scale from each.
        scales = []
        for rank in ranks:
            onward = [clock_rank(rank + place) for place in range(RANKS_PER_SUIT)]
            scales.append([(place, index_of(r, suit)) for place, r in enumerate(onward) if r in ranks])
        firsts_only = True
    else:
        # The ace low (A 2 3 ...) or high (... Q K A): two readings of the scale.
        scales = [[(rank, index_of(rank, suit)) for rank in ranks]]
        if ranks[0] == ACE:
            scales.append([(rank, index_of(rank, suit)) for rank in ranks[1:]] + [(HIGH_ACE, index_of(ACE, suit))])
        firsts_only = False

    def grow(scale: list[tuple[int, int]], after: int, first: int, naturals: tuple[int, ...]) -> None:
        k = len(naturals)
        span = scale[after - 1][0] - first + 1
        fewest = max(span - k, MIN_GROUP - k, 0)
        for used in range(fewest, min(jokers, longest - k) + 1):
            if allows(k, used):
                found.add(tuple(sorted(naturals)) + (JOKER_INDEX,) * used)
        for n in range(after, len(scale)):
            place, index = scale[n]
            if place - first + 1 - (k + 1) > jokers or k + 1 > longest:
                break  # later places only leave wider gaps
            grow(scale, n + 1, first, naturals + (index,))

    for scale in scales:
        for n in range(1) if firsts_only else range(len(scale)):
            grow(scale, n + 1, scale[n][0], (scale[n][1],))
    return tuple(found)
