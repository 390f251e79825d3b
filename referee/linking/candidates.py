"""Every group a hand can form, as multisets of card indices (the CP-SAT model's columns)."""

from __future__ import annotations

from itertools import combinations, product
from typing import Mapping

from referee.cards import RANKS, SUITS
from referee.groups import MAX_RUN, MIN_GROUP
from referee.rules import JokerLimit, RuleSet

JOKER_INDEX = 52
Candidate = tuple[int, ...]  # sorted card indices, duplicates repeated


def candidate_groups(counts: Mapping[int, int], rules: RuleSet) -> list[Candidate]:
    """All distinct groups within ``counts`` (index -> copies held), in canonical order."""
    jokers = counts.get(JOKER_INDEX, 0)
    found: set[Candidate] = set()
    limit = rules.joker_limit
    size = sum(counts.values())
    for rank in RANKS:
        indices = [suit * 13 + rank - 1 for suit in range(len(SUITS))]
        held = [counts.get(i, 0) for i in indices]
        if not any(held):
            continue
        for take in product(*(range(h + 1) for h in held)):
            naturals = sum(take)
            if naturals == 0:
                continue
            base = tuple(i for i, n in zip(indices, take) for _ in range(n))
            for j in range(jokers + 1):
                if naturals + j >= MIN_GROUP and limit.allows(naturals, j):
                    found.add(base + (JOKER_INDEX,) * j)
    for suit in range(len(SUITS)):
        _runs_of_suit(suit * 13, counts, jokers, size, rules, found)
    if limit is JokerLimit.UNLIMITED:
        for j in range(MIN_GROUP, jokers + 1):
            found.add((JOKER_INDEX,) * j)
    return sorted(found)


def _runs_of_suit(
    base: int, counts: Mapping[int, int], jokers: int, size: int, rules: RuleSet, found: set[Candidate]
) -> None:
    """Add every run of one suit: windows on the scale, jokers in the gaps or replacing naturals."""
    held = [counts.get(base + rank - 1, 0) > 0 for rank in RANKS]
    if not any(held):
        return
    longest = min(MAX_RUN, size)
    starts = range(1, 14) if rules.wrap_runs else range(1, 15)
    for start in starts:
        window: list[int] = []  # indices held in the window so far
        missing = 0
        for length in range(1, longest + 1):
            position = start + length - 1
            if not rules.wrap_runs and position > 14:
                break
            rank = (position - 1) % 13 + 1
            if held[rank - 1]:
                window.append(base + rank - 1)
            else:
                missing += 1
            if missing > jokers:
                break
            if length < MIN_GROUP or not window:
                continue
            # Jokers may also stand in for cards the hand holds (e.g. to free them for a set).
            for extra in range(0, min(jokers - missing, len(window) - 1) + 1):
                used_jokers = missing + extra
                naturals = len(window) - extra
                if not rules.joker_limit.allows(naturals, used_jokers):
                    continue
                for dropped in combinations(window, extra):
                    kept = [i for i in window if i not in dropped]
                    found.add(tuple(sorted(kept)) + (JOKER_INDEX,) * used_jokers)
