"""The linking value and the small interface every engine implements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from referee.game.cards import CARD_BY_INDEX, Card, points_by_index
from referee.game.groups import Group, judge_group
from referee.game.rules import Engine, RuleSet


@dataclass(frozen=True, slots=True)
class Linking:
    """Groups (canonical order) plus the unlinked cards and their points."""

    groups: tuple[Group, ...]
    unlinked: tuple[Card, ...]
    points: int

    @property
    def rank(self) -> tuple[int, int, tuple[tuple[int, ...], ...]]:
        """The tie-break order (RULES §3): fewest points, then fewest groups, then the groups' card
        indices, lexicographically."""
        return (self.points, len(self.groups), tuple(g.key for g in self.groups))

    @property
    def fully_linked(self) -> bool:
        """True when no card is left over."""
        return not self.unlinked


class LinkingEngine(Protocol):
    """An exact engine: the canonical best linking of a hand of canonically sorted cards."""

    name: Engine

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards`` (sorted canonically) under ``rules``."""
        ...


@lru_cache(maxsize=65536)
def _laid_out(part: tuple[int, ...], rules: RuleSet) -> Group:
    """The group these card indices make, laid out; the same few groups recur across hands."""
    judged = judge_group((CARD_BY_INDEX[i] for i in part), rules)
    if not isinstance(judged, Group):
        raise AssertionError(f"engine produced a non-group {part}: {judged.reason}")
    return judged


def linking_from_parts(cards: Sequence[Card], parts: Iterable[Sequence[int]], rules: RuleSet) -> Linking:
    """Build the linking whose groups are ``parts`` (card indices); the rest of ``cards`` (sorted
    canonically, as every engine receives them) is unlinked."""
    points = points_by_index(rules.joker_points)
    # Groups in canonical order are the parts sorted by their sorted indices (a group's key).
    keys = sorted([tuple(sorted(part)) for part in parts])
    if not keys:  # most hands of a deal: nothing links
        unlinked = tuple(cards)
        return Linking((), unlinked, sum([points[card.index] for card in unlinked]))
    unlinked = _unlinked(cards, sorted([i for key in keys for i in key]))
    groups = tuple([_laid_out(key, rules) for key in keys])
    return Linking(groups, unlinked, sum([points[card.index] for card in unlinked]))


def linking_from_keys(cards: Sequence[Card], keys: Sequence[tuple[int, ...]], points: int, rules: RuleSet) -> Linking:
    """``linking_from_parts`` for an engine that gives its groups' keys sorted and in canonical
    order, and the points it leaves: the search engine's answer, laid out without sorting it again
    or adding up the points."""
    if not keys:
        return Linking((), tuple(cards), points)
    taken = keys[0] if len(keys) == 1 else sorted([i for key in keys for i in key])
    return Linking(tuple([_laid_out(key, rules) for key in keys]), _unlinked(cards, taken), points)


def _unlinked(cards: Sequence[Card], taken: Sequence[int]) -> tuple[Card, ...]:
    """``cards`` less the indices ``taken`` (ascending): the cards the groups take, in index order,
    walked alongside the cards in theirs."""
    left: list[Card] = []
    k, end = 0, len(taken)
    for card in cards:
        if k < end and card.index == taken[k]:
            k += 1
        else:
            left.append(card)
    if k < end:
        left = _left_over(cards, taken)  # cards out of order, or one the hand does not hold
    return tuple(left)


def _left_over(cards: Sequence[Card], taken: Iterable[int]) -> list[Card]:
    """``cards`` less the indices ``taken`` (one card each), in any order."""
    used: dict[int, int] = {}
    for i in taken:
        used[i] = used.get(i, 0) + 1
    left: list[Card] = []
    for card in cards:
        n = used.get(card.index)
        if n:
            used[card.index] = n - 1
        else:
            left.append(card)
    if any(used.values()):
        raise AssertionError("engine used a card the hand does not hold")
    return left
