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
ascending order lexicographically smallest (a prefix first). Built greedily: the smallest key of
a best linking is the smallest key of any group that some best linking uses, and a group holding
the lowest card left has a smaller key than any group that does not. So try the groups whose
lowest card is the lowest card left, in key order, and keep the first whose remainder still
reaches the optimum (asked as ``_points(rest, optimum) <= optimum``); if none does, every best
linking leaves that card unlinked. Repeat on what is left. Leftover jokers (``UNLIMITED``, three
or more, jokers worth points) make groups of three, the last one larger: the smallest keys.
Groups worth 0 points (jokers only, ``joker_points`` 0) are never added: the shorter tuple wins.

**Across hands.** Without jokers, a natural in no group (fewer than three of its rank, no three
consecutive ranks of its suit through it) is unlinked at once, and the others split into
components no group spans (joined by "same rank, three or more of it" and "three consecutive
ranks of a suit"); each component's answer is cached, keyed on its cards and ``wrap_runs``, and
the answers add up, their groups merged in key order. With jokers the hand is solved whole. The
whole hand's answer is cached on its cards and ``rules.linking_key()``.
"""

from __future__ import annotations

from functools import lru_cache

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
    components, points = _joker_free_components(naturals, wrap)
    if not components:
        return points, ()
    keys: list[Key] = []
    for component in components:
        part_points, part_keys = _solve_joker_free(component, wrap)
        points += part_points
        keys.extend(part_keys)
    keys.sort()
    return points, tuple(keys)


@lru_cache(maxsize=1 << 16)
def _solve_joker_free(component: tuple[int, ...], wrap: bool) -> Answer:
    # 3 to 5 naturals that are one group: nothing is left and no split into two groups exists,
    # so that group is the only best linking (the usual component of a finished hand).
    if MIN_GROUP <= len(component) < 2 * MIN_GROUP and _whole_group(component, wrap):
        return 0, (component,)
    return _Solver(component, 0, (2, 0, wrap, JokerLimit.UNLIMITED)).answer()


def _whole_group(naturals: tuple[int, ...], wrap: bool) -> bool:
    """Whether these natural cards (sorted indices) are one group: one rank, or one suit's run."""
    if len({i % 13 for i in naturals}) == 1:
        return True
    if len({i // 13 for i in naturals}) != 1:
        return False
    ranks = [i % 13 + 1 for i in naturals]
    size = len(ranks)
    if len(set(ranks)) != size:
        return False
    if ranks[-1] - ranks[0] == size - 1:
        return True
    if ranks[0] == 1 and 14 - ranks[1] == size - 1:  # the ace above the king
        return True
    return wrap and any(all((r - first) % 13 < size for r in ranks) for first in ranks)


def _joker_free_components(naturals: tuple[int, ...], wrap: bool) -> tuple[list[tuple[int, ...]], int]:
    """Without jokers: the naturals that may be linked, split into sets no group spans, and the
    points of the others (in no group at all: fewer than 3 of their rank, no run of 3 through them)."""
    count: dict[int, int] = {}
    for i in naturals:
        count[i] = count.get(i, 0) + 1
    rank_total = [0] * 13
    for i, n in count.items():
        rank_total[i % 13] += n
    parent: dict[int, int] = {}

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
    for i in count:
        rank = i % 13
        if rank_total[rank] >= MIN_GROUP:
            parent.setdefault(i, i)
            if rank in first_of_rank:
                join(first_of_rank[rank], i)
            else:
                first_of_rank[rank] = i
        # A run i, i+1, i+2 (in rank): the ace also above the king; round the clock with wrap.
        if rank <= 10 or wrap or rank == 11:
            base = i - rank
            second, third = base + (rank + 1) % 13, base + (rank + 2) % 13
            if second in count and third in count:
                for j in (i, second, third):
                    parent.setdefault(j, j)
                join(i, second)
                join(i, third)
    points = 0
    groups: dict[int, list[int]] = {}
    for i in naturals:
        if i in parent:
            groups.setdefault(root(i), []).append(i)
        else:
            points += _POINTS[i]
    return [tuple(members) for _, members in sorted(groups.items())], points


# A natural part with what the search needs: (packed counts, fewest jokers, most jokers, key, points).
Part = tuple[int, int, int, Key, int]


def count_of(naturals: tuple[int, ...]) -> dict[int, int]:
    """Copies held of each natural index, in ascending order."""
    count: dict[int, int] = {}
    for i in naturals:
        count[i] = count.get(i, 0) + 1
    return count


def _by_points(part: Part) -> int:
    return -part[4]


class _Solver:
    """The exact search for one hand (or one joker-free component)."""

    def __init__(self, naturals: tuple[int, ...], jokers: int, rules_key: RulesKey) -> None:
        _, joker_points, wrap, limit = rules_key
        self.joker_points = joker_points
        self.limit = limit
        kinds = sorted(set(naturals))
        unit_of = {k: 1 << (_BITS * f) for f, k in enumerate(kinds)}
        field_of = {k: f for f, k in enumerate(kinds)}
        self.unit = [unit_of[k] for k in kinds]
        self.points = [_POINTS[k] for k in kinds]
        self.jshift = _BITS * len(kinds)
        self.junit = 1 << self.jshift
        self.natmask = self.junit - 1
        self.guard = sum(_GUARD << (_BITS * f) for f in range(len(kinds) + 1))
        self.start = sum(unit_of[i] for i in naturals) + jokers * self.junit
        # What the jokers left over cost once the naturals are done.
        self.leftover = [self._leftover_cost(k) for k in range(jokers + 1)]
        # Parts by their lowest kind: (packed naturals, fewest jokers, most jokers, key, points).
        parts: list[list[Part]] = [[] for _ in kinds]
        for part in _parts(count_of(naturals), jokers, wrap, limit, unit_of):
            parts[field_of[part[3][0]]].append(part)
        for options in parts:
            # Try the parts that link the most points first: good bounds come early.
            options.sort(key=_by_points)
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


def _parts(count: dict[int, int], jokers: int, wrap: bool, limit: JokerLimit, unit_of: dict[int, int]) -> list[Part]:
    """Every natural part of a group within the naturals ``count`` holds, with the jokers it may take."""
    if limit is JokerLimit.ONE_PER_GROUP:
        cap = [min(1, jokers)] * 64
    elif limit is JokerLimit.NO_MORE_THAN_NATURALS:
        cap = [min(n, jokers) for n in range(64)]
    else:
        cap = [jokers] * 64
    out: list[Part] = []
    # Same rank: any sub-multiset of one rank's naturals (duplicates allowed, no upper size).
    by_rank: dict[int, list[int]] = {}
    for i in count:
        by_rank.setdefault(i % 13, []).append(i)
    for rank, members in by_rank.items():
        if sum(count[i] for i in members) + jokers < MIN_GROUP:
            continue
        value = _POINTS[rank]
        # (key, packed) of every sub-multiset, one kind of card at a time.
        subsets: list[tuple[Key, int]] = [((), 0)]
        for i in members:
            unit = unit_of[i]
            copies = [((i,) * m, m * unit) for m in range(count[i] + 1)]
            subsets = [(key + more, packed + extra) for key, packed in subsets for more, extra in copies]
        for key, packed in subsets[1:]:
            n = len(key)
            lo = MIN_GROUP - n if n < MIN_GROUP else 0
            if lo <= cap[n]:
                out.append((packed, lo, cap[n], key, n * value))
    # Runs: at least two distinct ranks of one suit, the gaps filled by jokers.
    by_suit: dict[int, list[int]] = {}
    for i in count:
        by_suit.setdefault(i // 13, []).append(i % 13 + 1)
    for suit, ranks in by_suit.items():
        if len(ranks) < 2 or len(ranks) + jokers < MIN_GROUP:
            continue
        base = suit * 13 - 1
        for rankset, span in _run_sets(tuple(ranks), jokers, wrap):
            n = len(rankset)
            lo = max(0, span - n, MIN_GROUP - n)
            hi = min(cap[n], MAX_RUN - n)
            if lo <= hi:
                key = tuple(base + r for r in rankset)
                out.append((sum(unit_of[i] for i in key), lo, hi, key, sum(_POINTS[i] for i in key)))
    return out


@lru_cache(maxsize=1 << 12)
def _run_sets(ranks: tuple[int, ...], jokers: int, wrap: bool) -> tuple[tuple[tuple[int, ...], int], ...]:
    """Every set of two or more of ``ranks`` (distinct ranks of one suit, ascending) that fits in
    a run whose gaps at most ``jokers`` fill: (the set, ascending; the shortest run holding it)."""
    shortest: dict[tuple[int, ...], int] = {}
    held = set(ranks)
    for first in ranks:
        if wrap:
            # Round the clock: the next 12 ranks after ``first``.
            ladder = [(first + p - 1) % 13 + 1 for p in range(MAX_RUN)]
        else:
            # Up the A..A scale from ``first``, the ace last (above the king) unless it is ``first``.
            ladder = list(range(first, 14)) + ([1] if first != 1 else [])
        steps = [p for p in range(1, len(ladder)) if ladder[p] in held]
        # Depth first: (offset of the last rank taken, jokers spent on gaps, ranks taken).
        stack = [(0, 0, (first,))]
        while stack:
            last, spent, taken = stack.pop()
            for p in steps:
                if p <= last:
                    continue
                gaps = spent + p - last - 1
                if gaps > jokers:
                    break
                now = taken + (ladder[p],)
                key = tuple(sorted(now))
                if shortest.get(key, MAX_RUN + 1) > p + 1:
                    shortest[key] = p + 1
                stack.append((p, gaps, now))
    return tuple(shortest.items())
