"""A second exact engine for best linking: a memoised branch-and-bound search over card counts.

It shares nothing with the CP-SAT model (nor with ``candidates``) but the rule book and
``linking_from_parts``, so the two engines can check each other.

**Groups.** A group is a *natural part* (a sub-multiset of the hand's naturals) plus some jokers.
The parts come straight from the hand's counts: per rank, every sub-multiset of that rank's
naturals; per suit, every set of at least two distinct ranks whose gaps on the A…A scale (round
the clock with ``wrap_runs``) the jokers can fill. Each part carries the range of jokers it may
take: at least enough for 3 cards and to fill its gaps, at most what ``joker_limit`` allows and a
run of 13. A group's key is its sorted card indices (jokers, index 52, last). The groups are
listed by their lowest card, each list in key order. With exactly one joker and no wrapping (most
end-of-deal hands that hold a joker) the runs are not searched but looked up in a table built at
import, by their lowest card and the ranks of its suit held above it up to the second one missing.

**State.** What is left of the hand is a vector of counts packed into one integer: five bits per
kind of card held, the top one a guard, the jokers in the top field. "Does this part fit" is
one subtraction and a mask; "take it out" is one subtraction.

**Fewest points, then fewest groups.** The search minimises one cost: the unlinked points times
a scale larger than the most groups the hand can hold, plus one per group, so the least cost has
the fewest points and, among those, the fewest groups (RULES §3). A natural in no group at all is
unlinked in every linking: it is left out of the starting state and its points counted once. For
the lowest natural left there are two kinds of move: leave one copy unlinked, or take out a group
whose lowest card it is. Every linking is reached this way, so the least cost of a multiset is the
best of those moves; once the naturals are gone the jokers left form one jokers-only group
(``UNLIMITED``, three or more, worth linking only when a joker has points) or stay unlinked. The
search is a depth-first branch and bound with a fail-soft memo: ``_cost(state, beta)`` returns
the exact optimum when it is at most ``beta``, otherwise a lower bound above ``beta``; both are
remembered per state. Every move costs at least 1, which bounds a state with a natural left.

**Canonical answer.** ``Linking.rank`` wants, among the fewest points and groups, the groups' keys
in ascending order lexicographically smallest. The smallest key of a best linking is
the smallest key of any group that some best linking uses, and a group holding the lowest card
left has a smaller key than any group that does not. So the moves of a state are tried in that
order: the groups whose lowest card is the lowest card left, in key order, then leaving it
unlinked; a move replaces the best so far only when strictly better, so the move kept for each
state solved exactly is the first move of its canonical best linking. The answer follows the kept
moves from the whole hand. Leftover jokers (``UNLIMITED``, three or more, jokers worth points)
make one group. Groups worth 0 points (jokers only, ``joker_points`` 0) are never added: they
would only add a group.

**Across hands.** Without jokers, a natural in no group (fewer than three of its rank, no three
consecutive ranks of its suit through it) is unlinked at once, and the others split into
components no group spans (joined by "same rank, three or more of it" and "three consecutive
ranks of a suit"); each component's answer is cached, keyed on its cards and ``wrap_runs``, and
the answers add up, their groups merged in key order. Without wrapping the split is read off the
hand's cards as bits (a suit's ranks with the ace again above the king, a run three consecutive
bits), which costs less than a lookup, so those hands are not cached whole; most hands of a deal
end there, with no group at all. With jokers the hand is solved whole. The whole hand's answer is
cached on its cards and ``rules.linking_key()``.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache
from operator import mul

from referee.game.cards import (
    ACE,
    JOKER_INDEX,
    KING,
    RANKS_PER_SUIT,
    SUITS,
    Card,
    clock_rank,
    index_of,
    points_by_index,
    rank_of,
    suit_of,
)
from referee.game.groups import MAX_RUN, MIN_GROUP
from referee.game.linking.base import Linking, linking_from_keys
from referee.game.rules import Engine, JokerLimit, RuleSet

_BITS = 5  # per kind of card: four bits of count (up to 15) and a guard bit
_GUARD = 1 << (_BITS - 1)
_INF = 1 << 40

Key = tuple[int, ...]
Answer = tuple[int, tuple[Key, ...]]  # (unlinked points, group keys in ascending order)
RulesKey = tuple[int, int, bool, JokerLimit]

# Points of each natural index when unlinked: ace 1, 2-10 face value, J Q K 10.
_POINTS = points_by_index(0)[:JOKER_INDEX]
_JOKER_TAILS = tuple((JOKER_INDEX,) * j for j in range(64))
# The rank and suit of each natural index, looked up in the loops over a hand's cards: measured, a
# lookup costs about 40 ns a card, a call of rank_of about 140 (the search takes some 50 µs a hand).
_RANK = tuple(rank_of(i) for i in range(JOKER_INDEX))
_SUIT = tuple(suit_of(i) for i in range(JOKER_INDEX))
# The two cards above each natural of its suit (a run i, i+1, i+2): the ace also above the king;
# round the clock only with wrap_runs (by wrap: None where no such run goes).
_RUN_UP = {
    wrap: tuple(
        (index_of(clock_rank(_RANK[i] + 1), _SUIT[i]), index_of(clock_rank(_RANK[i] + 2), _SUIT[i]))
        if wrap or _RANK[i] != KING
        else None
        for i in range(JOKER_INDEX)
    )
    for wrap in (False, True)
}
# Where each suit's cards end, in index order.
_SUIT_ENDS = tuple(index_of(KING, suit) + 1 for suit in range(len(SUITS)))
# A suit's ranks as bits, 0 the ace; with the bit above the king (the ace again).
_SUIT_BITS = (1 << RANKS_PER_SUIT) - 1
_SUIT_BITS_HIGH_ACE = (1 << (RANKS_PER_SUIT + 1)) - 1


class SearchEngine:
    """Best linking by an exact memoised search, independent of the CP-SAT model."""

    name = Engine.SEARCH

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards`` (sorted canonically) under ``rules``."""
        # Sorted canonically: the card indices ascend already.
        indices = tuple([card.index for card in cards])
        if indices and indices[-1] != JOKER_INDEX and not rules.wrap_runs:
            # No joker, no wrapping (most hands of a deal): split on bits, which costs less than
            # looking the whole hand up; each component's answer is cached.
            components, points = components_no_wrap(indices)
            points, keys = _joker_free_answer(components, points, False)
        else:
            points, keys = _solve_hand(indices, rules.linking_key())
        # An answer's keys are sorted, in canonical order, and its points those of the cards left.
        return linking_from_keys(cards, keys, points, rules)


def best_points(indices: tuple[int, ...], rules: RuleSet) -> int:
    """What the best linking of the hand of these card indices (ascending) leaves unlinked: the
    ``points`` of ``best_linking``, without laying out its groups (a measure of many hands reads
    only the points)."""
    if indices and indices[-1] != JOKER_INDEX and not rules.wrap_runs:
        components, points = components_no_wrap(indices)
        return _joker_free_answer(components, points, False)[0]
    return _solve_hand(indices, rules.linking_key())[0]


@lru_cache(maxsize=1 << 14)
def _solve_hand(indices: tuple[int, ...], rules_key: RulesKey) -> Answer:
    jokers = indices.count(JOKER_INDEX)
    naturals = indices[: len(indices) - jokers]
    if jokers:
        return _Solver(naturals, jokers, rules_key).answer()
    wrap = rules_key[2]
    components, points = joker_free_components(naturals, wrap) if wrap else components_no_wrap(naturals)
    return _joker_free_answer(components, points, wrap)


def _joker_free_answer(components: list[tuple[int, ...]], points: int, wrap: bool) -> Answer:
    """The answer of a joker-free hand from its components and the points of its other cards."""
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
    if len({_RANK[i] for i in naturals}) == 1:
        return True
    if len({_SUIT[i] for i in naturals}) != 1:
        return False
    ranks = [_RANK[i] for i in naturals]
    size = len(ranks)
    if len(set(ranks)) != size:
        return False
    if ranks[-1] - ranks[0] == size - 1:
        return True
    if ranks[0] == 1 and 14 - ranks[1] == size - 1:  # the ace above the king
        return True
    return wrap and any(all((r - first) % RANKS_PER_SUIT < size for r in ranks) for first in ranks)


# ``components_no_wrap`` reads a hand as bits, a suit to 15 of them: its ranks A…K, the ace again
# above the king, so that a run of three held ranks is three consecutive bits, and one bit never
# set between suits, so that no block of consecutive bits runs on into the next suit. Each
# natural's bits (the ace's two), its lowest bit alone, and the bits of each rank across the suits
# (0 the ace).
_SPAN = RANKS_PER_SUIT + 2
_HELD_BITS = tuple(
    (1 << (_SUIT[i] * _SPAN + _RANK[i] - 1)) | ((1 << (_SUIT[i] * _SPAN + RANKS_PER_SUIT)) if _RANK[i] == ACE else 0)
    for i in range(JOKER_INDEX)
)
_OWN_BIT = tuple(1 << (_SUIT[i] * _SPAN + _RANK[i] - 1) for i in range(JOKER_INDEX))
_RANK_BITS = tuple(sum(1 << (suit * _SPAN + r) for suit in range(len(SUITS))) for r in range(RANKS_PER_SUIT))
# Where a run of three may start in a suit's bits: the ace up to the queen (Q K A).
_RUN_STARTS = sum(((1 << (RANKS_PER_SUIT - 1)) - 1) << (suit * _SPAN) for suit in range(len(SUITS)))
_HIGH_ACES = sum(1 << (suit * _SPAN + RANKS_PER_SUIT) for suit in range(len(SUITS)))
# Cards held per rank, a byte each (a hand holds at most a few dozen): adding ``_RANK_ADD`` to each
# byte sets its top bit exactly where the rank has ``MIN_GROUP`` cards or more.
_RANK_BYTE = tuple(1 << (8 * (_RANK[i] - 1)) for i in range(JOKER_INDEX))
_RANK_ADD = sum((128 - MIN_GROUP) << (8 * r) for r in range(RANKS_PER_SUIT))
_RANK_TOPS = sum(128 << (8 * r) for r in range(RANKS_PER_SUIT))


def components_no_wrap(naturals: tuple[int, ...]) -> tuple[list[tuple[int, ...]], int]:
    """``joker_free_components`` without wrapping, on bits: the same components and points.

    Most hands of a deal hold no group at all; this says so in a few integer operations. A run's
    cards are a block of consecutive bits of three or more (with the ace high, the ace's second
    bit), each block one component before a same-rank group joins it to others."""
    held = 0
    for i in naturals:
        held |= _HELD_BITS[i]
    starts = held & (held >> 1) & (held >> 2) & _RUN_STARTS
    big = (sum(map(_RANK_BYTE.__getitem__, naturals)) + _RANK_ADD) & _RANK_TOPS
    if not starts and not big:
        return [], sum(map(_POINTS.__getitem__, naturals))
    pieces = []
    runs = starts | (starts << 1) | (starts << 2)
    while runs:
        block = runs & ~(runs + (runs & -runs))  # the lowest block of consecutive bits
        runs ^= block
        high = block & _HIGH_ACES
        pieces.append((block ^ high) | (high >> RANKS_PER_SUIT) if high else block)
    while big:
        top = big & -big
        big ^= top
        pieces.append(held & _RANK_BITS[top.bit_length() // 8 - 1])
    components: list[int] = []
    for piece in pieces:  # pieces that share a card are one component
        apart = []
        for other in components:
            if other & piece:
                piece |= other
            else:
                apart.append(other)
        apart.append(piece)
        components = apart
    linked = 0
    for component in components:
        linked |= component
    points = sum([_POINTS[i] for i in naturals if not _OWN_BIT[i] & linked])
    if len(components) > 1:
        components.sort(key=lambda bits: bits & -bits)
    return [tuple([i for i in naturals if _OWN_BIT[i] & component]) for component in components], points


def joker_free_components(naturals: tuple[int, ...], wrap: bool) -> tuple[list[tuple[int, ...]], int]:
    """Without jokers: the naturals that may be linked, split into sets no group spans, and the
    points of the others (in no group at all: fewer than 3 of their rank, no run of 3 through them)."""
    count: dict[int, int] = {}
    for i in naturals:
        count[i] = count.get(i, 0) + 1
    rank_total = [0] * (KING + 1)
    for i, n in count.items():
        rank_total[_RANK[i]] += n
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
    run_up = _RUN_UP[wrap]
    for i in count:
        rank = _RANK[i]
        if rank_total[rank] >= MIN_GROUP:
            parent.setdefault(i, i)
            if rank in first_of_rank:
                join(first_of_rank[rank], i)
            else:
                first_of_rank[rank] = i
        up = run_up[i]
        if up is not None:
            second, third = up
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


# A move of the search: a group whose lowest card is the lowest natural left, as (its key, the
# packed counts it takes out, jokers included).
Option = tuple[Key, int]

# One kind of card's field in a packed state, and the guard bits of ``n`` fields plus the jokers'.
_UNIT = tuple(1 << (_BITS * f) for f in range(54))
_GUARDS = tuple(sum(_GUARD << (_BITS * f) for f in range(n + 1)) for n in range(54))


# Runs with exactly one joker and no wrapping (the usual end-of-deal hand), looked up instead of
# searched. From a held rank r, what runs start there depends only on the ranks of its suit held
# from r up to the second rank missing (one joker fills one gap): that *window*, bit p for rank
# r + p (the ace above the king at p = 13 - r). For each card index and window, the table holds
# every run as (key with its joker if any, packed counts relative to r's field leaving the high
# ace out, jokers 0 or 1, whether it holds the high ace). One joker fits under every joker limit
# (cap 1 for any part), so the table serves them all.
OneJokerRun = tuple[Key, int, int, bool]


def _one_joker_run_table() -> tuple[dict[int, tuple[OneJokerRun, ...]], ...]:
    # Per window: every run from its rank 0 as (the positions taken, jokers, packed counts
    # relative to rank 0's field, that of the top position alone).
    relative: dict[int, list[tuple[tuple[int, ...], int, int, int]]] = {}
    for window in range(1, 1 << MAX_RUN, 2):
        top = window.bit_length() - 1
        if top + 1 - bin(window).count("1") > 1:
            continue  # not a window: it reaches past the second missing rank
        held = [p for p in range(1, top + 1) if window >> p & 1]
        unit_at = {p: _UNIT[k] for k, p in enumerate([0, *held])}  # rank p's field, counted from 0's
        runs = []
        for last in held:
            inner = [p for p in held if p < last]
            gaps = last + 1 - (len(inner) + 2)
            if gaps > 1:
                break
            sets = [[0, *inner, last]]
            if gaps == 0:  # the joker may stand for a held rank instead
                sets += [[0, *inner[:k], *inner[k + 1 :], last] for k in range(len(inner))]
            for taken in sets:
                n = len(taken)
                packed = sum(unit_at[p] for p in taken)
                for j in range(max(last + 1 - n, MIN_GROUP - n), min(1, MAX_RUN - n) + 1):
                    runs.append((tuple(taken), j, packed, unit_at[last]))
        relative[window] = runs
    table = []
    for start in range(JOKER_INDEX):
        rank, ace = rank_of(start) - 1, index_of(ACE, suit_of(start))  # rank: 0 the ace
        # The high ace is above the king, never above the low ace.
        reach = RANKS_PER_SUIT - rank if rank else RANKS_PER_SUIT - 1
        by_window: dict[int, tuple[OneJokerRun, ...]] = {}
        for window, runs in relative.items():
            if window.bit_length() - 1 > reach:
                continue
            laid = []
            for positions, j, packed, top_unit in runs:
                if rank + positions[-1] == RANKS_PER_SUIT:  # the high ace: first in the key, its own field
                    key = (ace, *[start + p for p in positions[:-1]])
                    laid.append((key + _JOKER_TAILS[j], packed - top_unit, j, True))
                else:
                    laid.append((tuple([start + p for p in positions]) + _JOKER_TAILS[j], packed, j, False))
            by_window[window] = tuple(laid)
        table.append(by_window)
    return tuple(table)


_ONE_JOKER_RUNS = _one_joker_run_table()


class _Solver:
    """The exact search for one hand (or one joker-free component)."""

    def __init__(self, naturals: tuple[int, ...], jokers: int, rules_key: RulesKey) -> None:
        _, joker_points, wrap, limit = rules_key
        self.joker_points = joker_points
        self.limit = limit
        # The kinds of natural held (ascending: field f is the f-th kind) and their copies.
        kinds = sorted(set(naturals))
        copies = [1] * len(kinds) if len(kinds) == len(naturals) else [naturals.count(i) for i in kinds]
        self.unit = _UNIT[: len(kinds)]
        # The search minimises one number, points then groups (RULES §3): a point weighs more than
        # every group a linking of these cards can hold, and a group weighs 1.
        self.scale = (len(naturals) + jokers) // MIN_GROUP + 1
        self.points = [_POINTS[k] * self.scale for k in kinds]
        self.jshift = _BITS * len(kinds)
        self.natmask = (1 << self.jshift) - 1
        self.guard = _GUARDS[len(kinds)]
        self.options = _options(kinds, copies, jokers, wrap, limit)
        # A natural in no group is unlinked in every linking: it starts out of the state, its
        # points counted once, so the search never meets it. There is none in a joker-free
        # component, nor when two jokers or more may join any natural (``UNLIMITED``).
        self.dead = 0
        if jokers == 1 or (jokers > 1 and limit is not JokerLimit.UNLIMITED):
            used = 0
            for listed in self.options:
                for option in listed:
                    used |= option[1]
            for f, n in enumerate(copies):
                if not used >> (_BITS * f) & (_GUARD - 1):
                    self.dead += self.points[f] * n
                    copies[f] = 0
        self.start = sum(map(mul, copies, self.unit)) + (jokers << self.jshift)
        # What the jokers left over cost once the naturals are done: one jokers-only group (three
        # or more, ``UNLIMITED``) when they have points, else nothing.
        self.leftover = [k * joker_points * self.scale for k in range(jokers + 1)]
        if limit is JokerLimit.UNLIMITED:
            self.leftover[MIN_GROUP:] = [1 if joker_points else 0] * (jokers + 1 - MIN_GROUP)
        # Per state: its exact optimum (>= 0), or ~bound for a lower bound (< 0): one lookup.
        self.memo: dict[int, int] = {}
        # The first move in canonical order of a best linking of each state solved exactly; None:
        # leave the lowest natural unlinked.
        self.move: dict[int, Option | None] = {}

    def answer(self) -> Answer:
        """The fewest unlinked points and the canonical groups (sorted keys)."""
        state = self.start
        best = (self.dead + self._cost(state, _INF)) // self.scale
        keys: list[Key] = []
        while state & self.natmask:
            option = self.move[state]
            if option is None:
                state -= self.unit[_lowest_field(state)]
            else:
                keys.append(option[0])
                state -= option[1]
        left = state >> self.jshift
        if left >= MIN_GROUP and self.joker_points and self.limit is JokerLimit.UNLIMITED:
            keys.append(_JOKER_TAILS[left])
        return best, tuple(keys)

    def _cost(self, state: int, beta: int) -> int:
        """The least cost (points scaled, plus groups) of ``state`` if at most ``beta``; else a lower
        bound above ``beta``.

        The moves are tried in canonical order (groups by key, then leaving the card unlinked) and
        only a strictly better one replaces the best so far, so the move kept is the canonical one.
        """
        nat = state & self.natmask
        if not nat:
            return self.leftover[state >> self.jshift]
        if beta < 1:
            return 1  # a natural is left: any move costs a group or its points
        floor = self.memo.get(state)
        if floor is None:
            floor = 0
        elif floor >= 0:
            return floor
        else:
            floor = ~floor
            if floor > beta:
                return floor
        f = ((nat & -nat).bit_length() - 1) // _BITS
        guard = self.guard
        natmask = self.natmask
        best = _INF
        move: Option | None = None
        bound = beta
        failed = _INF  # the least lower bound among moves that could not reach ``bound``
        # A move that leaves no natural, or no room under the bound, is valued here as ``_cost``
        # would value it, without the call.
        for option in self.options[f]:
            packed = option[1]
            if ((state | guard) - packed) & guard != guard:
                continue
            rest = state - packed
            if not rest & natmask:
                value = 1 + self.leftover[rest >> self.jshift]
            elif bound < 2:
                value = 2
            else:
                value = 1 + self._cost(rest, bound - 1)
            if value <= bound:
                best, move, bound = value, option, value - 1
                if bound < 1:
                    break
            elif value < failed:
                failed = value
        if bound >= 0:
            cost = self.points[f]
            if cost <= bound:
                rest = state - self.unit[f]
                if not rest & natmask:
                    value = cost + self.leftover[rest >> self.jshift]
                elif bound - cost < 1:
                    value = cost + 1
                else:
                    value = cost + self._cost(rest, bound - cost)
                if value <= bound:
                    best, move = value, None
                elif value < failed:
                    failed = value
            elif cost < failed:
                failed = cost
        if best <= beta:
            self.memo[state] = best
            self.move[state] = move
            return best
        if failed > floor:
            self.memo[state] = ~failed
        return failed


def _options(kinds: list[int], copies: list[int], jokers: int, wrap: bool, limit: JokerLimit) -> list[list[Option]]:
    """Every group within the hand (``copies`` of each of ``kinds``, ascending, and ``jokers``),
    listed by the field of its lowest card, each list in key order."""
    # The most jokers a part of n naturals may take: n is at most all the naturals, or a run of 13.
    sizes = max(sum(copies), MAX_RUN) + 1
    if limit is JokerLimit.ONE_PER_GROUP:
        cap = [min(1, jokers)] * sizes
    elif limit is JokerLimit.NO_MORE_THAN_NATURALS:
        cap = [min(n, jokers) for n in range(sizes)]
    else:
        cap = [jokers] * sizes
    options: list[list[Option]] = [[] for _ in kinds]
    junit = _UNIT[len(kinds)]
    # Same rank: the fields of each rank held, when its naturals and the jokers can make 3.
    by_rank: dict[int, list[int]] = {}
    held: dict[int, int] = {}  # naturals of each rank
    for f, i in enumerate(kinds):
        rank = _RANK[i]
        fields = by_rank.get(rank)
        if fields is None:
            by_rank[rank] = [f]
            held[rank] = copies[f]
        else:
            fields.append(f)
            held[rank] += copies[f]
    for rank, fields in by_rank.items():
        n = held[rank]
        if n + jokers < MIN_GROUP:
            continue
        if n > 2:
            _same_rank_options(fields, kinds, copies, cap, options, junit)
            continue
        # One or two naturals of the rank (most ranks a hand with jokers holds): what
        # ``_same_rank_options`` lists, written out: each natural with two jokers or more, the two
        # with one joker or more.
        f = fields[0]
        i, unit = kinds[f], _UNIT[f]
        singles = [(f, i, unit)]
        if n == 2:
            if len(fields) == 2:
                g = fields[1]
                other, other_unit = kinds[g], _UNIT[g]
                singles.append((g, other, other_unit))
            else:
                other, other_unit = i, unit
            pair, packed, listed = (i, other), unit + other_unit, options[f]
            for j in range(1, cap[2] + 1):
                listed.append((pair + _JOKER_TAILS[j], packed + j * junit))
        if cap[1] >= 2:
            for g, i, unit in singles:
                listed = options[g]
                for j in range(2, cap[1] + 1):
                    listed.append(((i,) + _JOKER_TAILS[j], unit + j * junit))
    # Runs: a suit's kinds are consecutive fields.
    first = 0
    for past_suit in _SUIT_ENDS:
        end = bisect_left(kinds, past_suit, first)
        if end - first >= 2 and end - first + jokers >= MIN_GROUP:
            if jokers == 1 and not wrap:
                _one_joker_run_options(kinds[first:end], first, options, junit)
            elif not jokers and not wrap:
                _plain_run_options(kinds[first:end], first, options)
            else:
                _run_options(kinds[first:end], first, jokers, wrap, cap, options, junit)
        first = end
    for listed in options:
        if len(listed) > 1:
            listed.sort()
    return options


def _lowest_field(packed: int) -> int:
    return ((packed & -packed).bit_length() - 1) // _BITS


def _same_rank_options(
    fields: list[int], kinds: list[int], copies: list[int], cap: list[int], options: list[list[Option]], junit: int
) -> None:
    """Same rank: any sub-multiset of one rank's naturals (held in ``fields``), no upper size."""
    # (packed, size, key, the list of its lowest card's field) of every sub-multiset so far, one
    # kind at a time; each new one's groups are listed as it is made.
    subsets: list[tuple[int, int, Key, list[Option] | None]] = [(0, 0, (), None)]
    last = fields[-1]
    for f in fields:
        i, unit, own, extend = kinds[f], _UNIT[f], options[f], f != last
        for s in range(len(subsets)):
            packed, n, key, listed = subsets[s]
            if listed is None:
                listed = own
            for _ in range(copies[f]):
                packed, n, key = packed + unit, n + 1, key + (i,)
                if extend:
                    subsets.append((packed, n, key, listed))
                lo = MIN_GROUP - n if n < MIN_GROUP else 0
                hi = cap[n]
                while lo <= hi:
                    listed.append((key + _JOKER_TAILS[lo], packed + lo * junit))
                    lo += 1


def _suit_scale(cards: list[int], first_field: int, wrap: bool) -> tuple[list[int], list[int], list[int]]:
    """A suit's distinct naturals held (``cards``, ascending, in the fields from ``first_field`` on)
    as its runs are listed from: the cards, their fields' units and their ranks up the scale
    (rank - 1: the ace 0, the king 12), then past the king the ace again above it (13, its field
    the suit's first) or, round the clock (``wrap``), every rank again (+13)."""
    units = list(_UNIT[first_field : first_field + len(cards)])
    base = index_of(ACE, _SUIT[cards[0]])
    scale = [i - base for i in cards]
    if wrap:
        return cards + cards, units + units, scale + [r + RANKS_PER_SUIT for r in scale]
    if scale[0] == 0:
        return cards + cards[:1], units + units[:1], scale + [RANKS_PER_SUIT]
    return cards, units, scale


def _run_options(
    cards: list[int], first_field: int, jokers: int, wrap: bool, cap: list[int], options: list[list[Option]], junit: int
) -> None:
    """Runs of one suit (``cards``: its distinct naturals held, ascending, in the fields from
    ``first_field`` on): every set of two or more of them that fits in a run whose gaps at most
    ``jokers`` fill. A set that fits two ways (the ace low and high, or round the clock) may be
    listed twice, which changes no answer."""
    held = len(cards)
    cards, units, scale = _suit_scale(cards, first_field, wrap)
    for a in range(held):
        first = scale[a]
        end = min(len(scale), a + held)  # a run holds a rank once
        if a + 1 == end or scale[a + 1] - first - 1 > jokers:
            continue  # the jokers cannot reach the next rank: no run starts here
        # Depth first: (last step taken, its rank, jokers left for gaps, packed, cards taken).
        stack: list[tuple[int, int, int, int, Key]] = [(a, first, jokers, units[a], (cards[a],))]
        while stack:
            at, last, left, packed, taken = stack.pop()
            for b in range(at + 1, end):
                rank = scale[b]
                spare = left - (rank - last - 1)
                if spare < 0 or rank - first >= MAX_RUN:
                    break
                now: Key = taken + (cards[b],)
                more = packed + units[b]
                if b + 1 < end:
                    stack.append((b, rank, spare, more, now))
                n = len(now)
                lo = rank - first + 1 - n  # the gaps
                if lo < MIN_GROUP - n:
                    lo = MIN_GROUP - n
                hi = cap[n] if cap[n] < MAX_RUN - n else MAX_RUN - n
                if lo <= hi:
                    if b < held:
                        listed = options[first_field + a]
                    else:  # past the king: not in index order
                        now = tuple(sorted(now))
                        listed = options[_lowest_field(more)]
                    for j in range(lo, hi + 1):
                        listed.append((now + _JOKER_TAILS[j], more + j * junit))


def _plain_run_options(cards: list[int], first_field: int, options: list[list[Option]]) -> None:
    """``_run_options`` without jokers or wrapping (the joker-free components of a hand): from each
    held rank, the stretches of three or more consecutive ranks held on from it, the ace also above
    the king; the same groups in the same lists."""
    held = len(cards)
    cards, units, scale = _suit_scale(cards, first_field, False)
    for a in range(held):
        first = scale[a]
        end = min(len(scale), a + held)  # a run holds a rank once
        if a + 2 >= end or scale[a + 1] != first + 1:
            continue
        key: Key = (cards[a], cards[a + 1])
        packed = units[a] + units[a + 1]
        listed = options[first_field + a]
        for b in range(a + 2, end):
            rank = scale[b]
            if rank != scale[b - 1] + 1 or rank - first >= MAX_RUN:
                break
            key += (cards[b],)
            packed += units[b]
            if b < held:
                listed.append((key, packed))
            else:  # past the king: not in index order
                options[first_field].append((tuple(sorted(key)), packed))


def _one_joker_run_options(cards: list[int], first_field: int, options: list[list[Option]], junit: int) -> None:
    """``_run_options`` with one joker and no wrapping, from ``_ONE_JOKER_RUNS``."""
    shift = _BITS * first_field
    for at, key, rel, joker in _suit_one_joker_runs(tuple(cards)):
        options[first_field + at].append((key, (rel << shift) + joker * junit))


@lru_cache(maxsize=1 << 12)
def _suit_one_joker_runs(cards: tuple[int, ...]) -> tuple[tuple[int, Key, int, int], ...]:
    """The runs of one joker and some of ``cards`` (a suit's distinct naturals held, ascending,
    two or more), from ``_ONE_JOKER_RUNS``: as (the place in ``cards`` of its lowest card, its key,
    its packed counts counted from the field of ``cards[0]`` without the joker, its jokers), in key
    order by place, so that a hand's lists of groups are mostly in order before they are sorted. A
    suit's holding recurs across hands, which differ."""
    base = index_of(ACE, suit_of(cards[0]))
    mask = 0
    for i in cards:
        mask |= 1 << (i - base)
    if mask & 1:
        mask |= 1 << RANKS_PER_SUIT  # the ace above the king too
    found = []
    for a, i in enumerate(cards):
        window = mask >> (i - base) & _SUIT_BITS
        # The bit above the king always: past the last rank a run from here may reach.
        zeros = ~window & _SUIT_BITS_HIGH_ACE
        zeros &= zeros - 1
        window &= (zeros & -zeros) - 1  # the ranks below the second one missing
        if window == 1:
            continue
        shift = _BITS * a
        for key, rel, j, high in _ONE_JOKER_RUNS[i][window]:
            if high:  # listed by the ace, its lowest card
                found.append((0, key, (rel << shift) + _UNIT[0], j))
            else:
                found.append((a, key, rel << shift, j))
    found.sort()
    return tuple(found)
