"""A second exact engine for best linking: a memoised branch-and-bound search over card counts.

It shares nothing with the CP-SAT model (nor with ``candidates``) but the rule book and
``linking_from_parts``, so the two engines can check each other.

**Groups.** A group is a *natural part* (a sub-multiset of the hand's naturals) plus some jokers.
The parts come straight from the hand's counts: per rank, every sub-multiset of that rank's
naturals; per suit, every set of at least two distinct ranks whose gaps on the A…A scale (round
the clock with ``wrap_runs``) the jokers can fill. Each part carries the range of jokers it may
take: at least enough for 3 cards and to fill its gaps, at most what ``joker_limit`` allows and a
run of 13. A group's key is its sorted card indices (jokers, index 52, last).

**State.** What is left of the hand is a vector of counts packed into one integer: five bits per
kind of card held, the top one a guard, the jokers in the top field. "Does this part fit" is
one subtraction and a mask; "take it out" is one subtraction.

**Fewest points.** For the lowest natural left there are two kinds of move: leave one copy
unlinked, or take out a group whose lowest card it is. Every linking is reached this way, so the
fewest unlinked points of a multiset is the best of those moves; once the naturals are gone the
jokers left form jokers-only groups (``UNLIMITED``, three or more, worth linking only when a
joker has points) or stay unlinked. The search is a depth-first branch and bound with a
fail-soft memo: ``_points(state, beta)`` returns the exact optimum when it is at most ``beta``,
otherwise a lower bound above ``beta``; both are remembered per state.

**Canonical answer.** ``Linking.rank`` wants, among the fewest points, the groups' keys in
ascending order lexicographically smallest (a prefix first). The smallest key in any best
linking starts with the lowest card if any best linking links that card, so the answer is built
greedily: try the groups whose lowest card is the lowest card left, in key order, and keep the
first whose remainder still reaches the optimum; if none does, that card is unlinked in every
best linking. Groups of 0 points (jokers only, with ``joker_points`` 0) are never added: the
shorter tuple wins.

**Across hands.** Without jokers, naturals that can share no group are solved apart (components
joined by "same rank with three or more of it" and "three consecutive ranks of a suit"); each
component's answer is cached, keyed on its cards and ``wrap_runs``, and the answers add up
(their groups merged in key order). With jokers the hand is solved whole, cached on its cards and
``rules.linking_key()``.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product

from referee.cards import Card
from referee.linking.base import Linking, linking_from_parts
from referee.rules import JokerLimit, RuleSet

JOKER = 52
MIN_GROUP = 3
MAX_RUN = 13
_BITS = 5  # per kind of card: four bits of count (up to 15) and a guard bit
_GUARD = 1 << (_BITS - 1)
_INF = 1 << 40

Key = tuple[int, ...]
Answer = tuple[int, tuple[Key, ...]]  # (unlinked points, group keys in ascending order)
RulesKey = tuple[int, int, bool, JokerLimit]

# Points of each natural index when unlinked: ace 1, 2-10 face value, J Q K 10.
_POINTS = tuple(min(i % 13 + 1, 10) for i in range(52))
_JOKER_TAILS = tuple((JOKER,) * j for j in range(64))


class SearchEngine:
    """Best linking by an exact memoised search, independent of the CP-SAT model."""

    name = "search"

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards`` (sorted canonically) under ``rules``."""
        _, keys = solve(tuple(card.index for card in cards), rules.linking_key())
        return linking_from_parts(cards, keys, rules)


def solve(indices: tuple[int, ...], rules_key: RulesKey) -> Answer:
    """Fewest unlinked points and canonical group keys of a hand given as sorted card indices."""
    return _solve_hand(tuple(sorted(indices)), rules_key)


@lru_cache(maxsize=1 << 14)
def _solve_hand(indices: tuple[int, ...], rules_key: RulesKey) -> Answer:
    jokers = indices.count(JOKER)
    naturals = indices[: len(indices) - jokers]
    if jokers:
        return _Solver(naturals, jokers, rules_key).answer()
    wrap = rules_key[2]
    points = 0
    keys: list[Key] = []
    for component in _joker_free_components(naturals, wrap):
        if len(component) < MIN_GROUP:
            points += sum(_POINTS[i] for i in component)
            continue
        part_points, part_keys = _solve_joker_free(component, wrap)
        points += part_points
        keys.extend(part_keys)
    keys.sort()
    return points, tuple(keys)


@lru_cache(maxsize=1 << 16)
def _solve_joker_free(component: tuple[int, ...], wrap: bool) -> Answer:
    return _Solver(component, 0, (2, 0, wrap, JokerLimit.UNLIMITED)).answer()


def _joker_free_components(naturals: tuple[int, ...], wrap: bool) -> list[tuple[int, ...]]:
    """Without jokers: the naturals split into sets no group spans (a lone card is its own set)."""
    count: dict[int, int] = {}
    for i in naturals:
        count[i] = count.get(i, 0) + 1
    rank_total = [0] * 13
    for i, n in count.items():
        rank_total[i % 13] += n
    parent = {i: i for i in count}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_of_rank: dict[int, int] = {}
    for i in sorted(count):
        rank = i % 13
        if rank_total[rank] >= MIN_GROUP:
            if rank in first_of_rank:
                join(first_of_rank[rank], i)
            else:
                first_of_rank[rank] = i
        # A run through i, i+1, i+2 (ranks), the ace also after the king, or round the clock.
        base = i - rank
        steps = [base + (rank + d) % 13 for d in (1, 2)]
        if rank + 2 <= 12 or wrap or rank + 2 == 13:
            if all(s in count for s in steps):
                join(i, steps[0])
                join(i, steps[1])
    groups: dict[int, list[int]] = {}
    for i in naturals:
        groups.setdefault(root(i), []).append(i)
    return [tuple(members) for _, members in sorted(groups.items())]


class _Solver:
    """The exact search for one hand (or one joker-free component)."""

    def __init__(self, naturals: tuple[int, ...], jokers: int, rules_key: RulesKey) -> None:
        _, joker_points, wrap, limit = rules_key
        self.jokers = jokers
        self.joker_points = joker_points
        self.limit = limit
        kinds = sorted(set(naturals))
        self.kinds = kinds
        field = {k: n for n, k in enumerate(kinds)}
        self.unit = [1 << (_BITS * f) for f in range(len(kinds))]
        self.points = [_POINTS[k] for k in kinds]
        self.jshift = _BITS * len(kinds)
        self.junit = 1 << self.jshift
        self.natmask = self.junit - 1
        self.guard = sum(_GUARD << (_BITS * f) for f in range(len(kinds) + 1))
        self.start = sum(self.unit[field[i]] for i in naturals) + jokers * self.junit
        # What the jokers left over cost once the naturals are done.
        self.leftover = [self._leftover_cost(k) for k in range(jokers + 1)]
        # Parts by their lowest kind: (packed naturals, fewest jokers, most jokers, key, points).
        parts: list[list[tuple[int, int, int, Key, int]]] = [[] for _ in kinds]
        for key, lo, hi in _parts(naturals, jokers, wrap, limit):
            packed = 0
            for i in key:
                packed += self.unit[field[i]]
            parts[field[key[0]]].append((packed, lo, hi, key, sum(_POINTS[i] for i in key)))
        for options in parts:
            # Try the parts that link the most points first: good bounds come early.
            options.sort(key=lambda p: -p[4])
        self.parts = parts
        self.exact: dict[int, int] = {}
        self.lower: dict[int, int] = {}

    def _leftover_cost(self, k: int) -> int:
        if k == 0 or self.joker_points == 0:
            return 0
        if k >= MIN_GROUP and self.limit is JokerLimit.UNLIMITED:
            return 0  # jokers-only groups
        return k * self.joker_points

    def answer(self) -> Answer:
        """The fewest unlinked points and the canonical groups (sorted keys)."""
        state = self.start
        best = self._points(state, _INF)
        target = best
        keys: list[Key] = []
        natmask, jshift, junit, guard = self.natmask, self.jshift, self.junit, self.guard
        while True:
            nat = state & natmask
            k = state >> jshift
            if not nat:
                if k >= MIN_GROUP and self.joker_points and self.limit is JokerLimit.UNLIMITED:
                    keys.extend(_jokers_only(k))
                break
            f = ((nat & -nat).bit_length() - 1) // _BITS
            options: list[tuple[Key, int]] = []
            for packed, lo, hi, key, _ in self.parts[f]:
                if lo > k or ((state | guard) - packed) & guard != guard:
                    continue
                for j in range(lo, min(hi, k) + 1):
                    options.append((key + _JOKER_TAILS[j], packed + j * junit))
            options.sort()
            for key, packed in options:
                if self._points(state - packed, target) <= target:
                    keys.append(key)
                    state -= packed
                    break
            else:
                state -= self.unit[f]
                target -= self.points[f]
        return best, tuple(keys)

    def _points(self, state: int, beta: int) -> int:
        """The fewest unlinked points of ``state`` if at most ``beta``; else a lower bound above ``beta``."""
        nat = state & self.natmask
        if not nat:
            return self.leftover[state >> self.jshift]
        found = self.exact.get(state)
        if found is not None:
            return found
        floor = self.lower.get(state, 0)
        if floor > beta:
            return floor
        f = ((nat & -nat).bit_length() - 1) // _BITS
        k = state >> self.jshift
        guard, junit = self.guard, self.junit
        best = _INF
        bound = beta
        failed = _INF  # the least lower bound among moves that could not reach ``bound``
        for packed, lo, hi, _, _ in self.parts[f]:
            if lo > k or ((state | guard) - packed) & guard != guard:
                continue
            rest = state - packed
            top = hi if hi < k else k
            # More jokers in the group first when jokers have points, fewer first otherwise.
            js = range(top, lo - 1, -1) if self.joker_points else range(lo, top + 1)
            for j in js:
                value = self._points(rest - j * junit, bound)
                if value <= bound:
                    best = value
                    bound = value - 1
                    if bound < 0:
                        break
                elif value < failed:
                    failed = value
            if bound < 0:
                break
        if bound >= 0:
            cost = self.points[f]
            if cost <= bound:
                value = cost + self._points(state - self.unit[f], bound - cost)
                if value <= bound:
                    best = value
                elif value < failed:
                    failed = value
            elif cost < failed:
                failed = cost
        if best <= beta:
            self.exact[state] = best
            return best
        if failed > floor:
            self.lower[state] = failed
        return failed


def _jokers_only(left: int) -> list[Key]:
    """Jokers-only groups of ``left`` >= 3 jokers, lexicographically first: threes, the last one larger."""
    sizes = [MIN_GROUP] * (left // MIN_GROUP)
    sizes[-1] += left % MIN_GROUP
    return [_JOKER_TAILS[size] for size in sizes]


def _cap(limit: JokerLimit, naturals: int, jokers: int) -> int:
    """The most jokers a group of ``naturals`` may take (before the run length), at most ``jokers``."""
    if limit is JokerLimit.ONE_PER_GROUP:
        return min(1, jokers)
    if limit is JokerLimit.NO_MORE_THAN_NATURALS:
        return min(naturals, jokers)
    return jokers


def _parts(naturals: tuple[int, ...], jokers: int, wrap: bool, limit: JokerLimit) -> list[tuple[Key, int, int]]:
    """Every natural part of a group within ``naturals``: (sorted indices, fewest jokers, most jokers)."""
    count: dict[int, int] = {}
    for i in naturals:
        count[i] = count.get(i, 0) + 1
    found: dict[Key, tuple[int, int]] = {}
    # Same rank: any sub-multiset of one rank's naturals (duplicates allowed, no upper size).
    by_rank: dict[int, list[int]] = {}
    for i in count:
        by_rank.setdefault(i % 13, []).append(i)
    for members in by_rank.values():
        if sum(count[i] for i in members) + jokers < MIN_GROUP:
            continue
        for take in product(*(range(count[i] + 1) for i in members)):
            n = sum(take)
            if n == 0:
                continue
            lo = max(0, MIN_GROUP - n)
            hi = _cap(limit, n, jokers)
            if lo <= hi:
                found[tuple(i for i, t in zip(members, take) for _ in range(t))] = (lo, hi)
    # Runs: at least two distinct ranks of one suit, the gaps filled by jokers.
    by_suit: dict[int, list[int]] = {}
    for i in count:
        by_suit.setdefault(i // 13, []).append(i % 13 + 1)
    for suit, ranks in by_suit.items():
        if len(ranks) < 2 or len(ranks) + jokers < MIN_GROUP:
            continue
        base = suit * 13 - 1
        for rankset, span in _run_sets(sorted(ranks), jokers, wrap).items():
            n = len(rankset)
            lo = max(0, span - n, MIN_GROUP - n)
            hi = min(_cap(limit, n, jokers), MAX_RUN - n)
            if lo <= hi:
                found[tuple(base + r for r in rankset)] = (lo, hi)
    return [(key, lo, hi) for key, (lo, hi) in found.items()]


def _run_sets(ranks: list[int], jokers: int, wrap: bool) -> dict[tuple[int, ...], int]:
    """Every set of two or more of ``ranks`` (distinct, one suit) that fits in a run whose gaps
    at most ``jokers`` fill, mapped to the shortest run holding it."""
    out: dict[tuple[int, ...], int] = {}
    held = set(ranks)
    if wrap:
        # Round the clock: from each rank, the next 12 ranks in order.
        for first in ranks:
            ladder = [(first + p - 1) % 13 + 1 for p in range(MAX_RUN)]
            _grow(out, ladder, held, [first], 0, jokers)
    else:
        # The A..A scale, the ace at 1 (below the 2) or at 14 (above the king).
        for first in ranks:
            ladder = [r if r <= 13 else 1 for r in range(first, 15)]
            _grow(out, ladder, held, [first], 0, jokers)
    return out


def _grow(
    out: dict[tuple[int, ...], int], ladder: list[int], held: set[int], chosen: list[int], last: int, budget: int
) -> None:
    """Extend a run along ``ladder`` (ranks at offsets 0, 1, …) past offset ``last``, gaps paid from ``budget``."""
    for p in range(last + 1, min(len(ladder) - 1, last + 1 + budget) + 1):
        rank = ladder[p]
        if rank not in held or rank in chosen:
            continue
        now = chosen + [rank]
        key = tuple(sorted(now))
        if out.get(key, MAX_RUN + 1) > p + 1:
            out[key] = p + 1
        _grow(out, ladder, held, now, p, budget - (p - last - 1))
