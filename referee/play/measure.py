"""The measure of a hand's progress: how far it is from a valid close, the unseen cards that bring
it nearer, the points it holds (``docs/review.md`` §1 states it; ``referee.play.review`` judges a
deal's decisions by it).

**The measure** (mahjong's shanten and ukeire, for Remigio). A hand ``X`` (10 cards, or 11 after a
draw) is judged against the cards it could still get, the *unseen* multiset ``U``; ``A = X + U``
is what is *available*. A *target* is 10 cards that make a valid close (RULES §4: linked under the
joker limit, or a color), taken from ``A``. The *overlap* of a target ``T`` with ``X`` is
``Σ_c min(T[c], X[c])``: the cards of ``X`` it keeps.

- ``distance(X) = 10 - max overlap``: the fewest cards of ``X`` to swap, one thrown for one drawn
  from ``U``, before 10 of them close. 0: some 10 cards of ``X`` close now.
- ``improving(X)`` (10 cards, distance above 0): how many unseen cards (copies counted) would, drawn,
  let the hand throw one card and be one step nearer. Drawing ``c`` and throwing the best card
  gives ``distance(X + c) = distance(X) - 1`` exactly when some target of the highest overlap
  draws ``c`` (holds more of ``c`` than ``X``), and ``distance(X)`` otherwise; so the improving
  kinds are the cards some best target draws, found in the same search as the distance.
- ``points(X)``: the points the best linking of ``X`` leaves (RULES §3, §5).

Hands are ordered by distance (lower first), then improving (more first), then points (fewer
first). The value ``V = -distance + (improving + q) / (unseen + 1)``, ``q = 1 - points / (cap + 1)``,
orders hands exactly so, and reads as minus the expected distance after one more draw from the
stock (the chance a draw improves is ``improving / unseen``), so losses are in distance steps.

**The search.** The kept cards of a linked target lie in at most three groups (10 cards, groups of
3 or more). The natural cards of ``X`` are walked in card order: each is left out (thrown) or
starts a *core*, the cards of ``X`` one group keeps (one rank, or one suit within a window of 10
ranks). A set of cores is then completed every way into groups whose sizes add up to 10: each
core's group (its size; a run's window), and up to three groups in all, some drawn whole from
``U``. A completion is feasible when ``U`` holds the cards its empty places need; a joker of ``X``
counts as kept wherever a joker may stand (the joker limit). Sets of cores are tried by how many
natural cards they leave out, fewest first, and the walk stops once no set can beat the best
found, so a hand near a close is solved in a few steps. Colors are counted suit by suit.

With no joker limit two facts spare most of the search, exactly (``_Filler.rich``, ``_apart``):
when the jokers there are could fill every empty place, a set's overlap and outs are tables of its
cores; and when no card or rank is asked for by two groups of a completion, the jokers it needs
are each group's own, so a completion found gives the outs of all its groups, and stands for
another way of the same size in a group's place (``_Filler.collect``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, product
from operator import itemgetter
from typing import cast

from referee.game.cards import CARD_BY_INDEX, CARD_KINDS, JOKER_INDEX, RANKS_PER_SUIT, Card
from referee.game.linking.search import best_points
from referee.game.rules import Engine, JokerLimit, RuleSet

SHOWN = 10  # the cards a close shows: every target holds this many
MOST_GROUPS = 3  # 10 cards in groups of at least 3
_JK = JOKER_INDEX
_SUITS = 4
_RANK = tuple(i % RANKS_PER_SUIT + 1 for i in range(JOKER_INDEX))
_SUIT = tuple(i // RANKS_PER_SUIT for i in range(JOKER_INDEX))

# Core kinds: the cards of a hand one group of a target keeps.
_RANK_CORE, _RUN_CORE, _SINGLE = 0, 1, 2
Core = tuple[int, tuple[int, ...]]  # (kind, card indices ascending)
# A way to complete a core (or to draw a group whole): (size, the cards its run places need, the
# rank its same-rank places take (0: none), how many such places).
Completion = tuple[int, tuple[int, ...], int, int]
Counts = tuple[int, ...]  # a multiset as a count per card index (53 entries)


def _code(position: int, suit: int) -> int:
    """The card at ``position`` of the A…A scale (1-14, 14 the high ace; or round the clock) of ``suit``."""
    return suit * RANKS_PER_SUIT + (position - 1) % RANKS_PER_SUIT


def counts_of(cards: Iterable[Card]) -> Counts:
    """A multiset of cards as a count per card index."""
    held = [0] * CARD_KINDS
    for card in cards:
        held[card.index] += 1
    return tuple(held)


def add_card(a: Counts, card: int, n: int = 1) -> Counts:
    """``a`` with ``n`` more copies of the card of index ``card`` (fewer when ``n`` is negative)."""
    out = list(a)
    out[card] += n
    return tuple(out)


def cards_of(counts: Sequence[int]) -> tuple[Card, ...]:
    """The cards of a multiset given as a count per card index, in index order."""
    once = tuple(compress(CARD_BY_INDEX, counts))
    if len(once) == sum(counts):  # no card twice: one pass in C
        return once
    out: list[Card] = []
    for card in once:
        out += (card,) * counts[card.index]
    return tuple(out)


def _naturals(counts: Counts) -> tuple[int, ...]:
    """The natural cards of a multiset, ascending, each as often as it is held."""
    once = tuple(compress(_NATURAL_INDICES, counts))
    if len(once) == sum(counts) - counts[JOKER_INDEX]:  # no card twice: one pass in C
        return once
    return tuple(i for i in _NATURAL_INDICES for _ in range(counts[i]))


_NATURAL_INDICES = range(JOKER_INDEX)


# --- cores and their completions ------------------------------------------------------------------


def _arc(ranks: Sequence[int], wrap: bool) -> int:
    """The fewest places of a run that hold these distinct ranks (11 or more: none fits a target)."""
    if wrap:
        ordered = sorted(ranks)
        gaps = [b - a for a, b in zip(ordered, ordered[1:])] + [ordered[0] + RANKS_PER_SUIT - ordered[-1]]
        return RANKS_PER_SUIT - max(gaps) + 1
    low = max(ranks) - min(ranks) + 1
    if 1 in ranks:  # the ace high instead
        high = [14 if r == 1 else r for r in ranks]
        return min(low, max(high) - min(high) + 1)
    return low


@lru_cache(maxsize=1 << 16)
def _cores_of(
    x: int, same: tuple[tuple[int, int], ...], above: tuple[int, ...], wrap: bool
) -> tuple[tuple[Core, int], ...]:
    """Every core whose lowest card is ``x``, with the least size of a group holding it, given the
    other cards of ``x``'s rank held (with copies) and those of its suit above it."""
    found: list[tuple[Core, int]] = []
    for take in product(*(range(k + 1) for _, k in same)):
        members = tuple(i for (i, _), n in zip(same, take) for _ in range(n))
        if members:
            found.append(((_RANK_CORE, (x, *members)), max(MIN_GROUP_SIZE, 1 + len(members))))
        else:
            found.append(((_SINGLE, (x,)), MIN_GROUP_SIZE))
    chosen: list[int] = []

    def grow(start: int) -> None:
        for n in range(start, len(above)):
            chosen.append(above[n])
            span = _arc([_RANK[i] for i in (x, *chosen)], wrap)
            if span <= SHOWN:
                found.append(((_RUN_CORE, (x, *chosen)), max(MIN_GROUP_SIZE, span, 1 + len(chosen))))
                grow(n + 1)
            chosen.pop()

    grow(0)
    return tuple(found)


MIN_GROUP_SIZE = 3


# A multiset of cards packed in one integer: a field of _FIELD bits per card index, the count in its
# low bits and a guard bit on top, so that "these cores fit in the hand together" is one subtraction
# (a field whose cards are over-used borrows its guard bit).
_FIELD = 7
_GUARD = sum(1 << (_FIELD * i + _FIELD - 1) for i in range(CARD_KINDS))


def _packed(cards: Iterable[int]) -> int:
    return sum(1 << (_FIELD * c) for c in cards)


# A core of a hand: (cards kept, the least size of its group, the cards packed, its place in the
# order of the walk (largest first, then by lowest card), the core).
_HandCore = tuple[int, int, int, int, Core]


@lru_cache(maxsize=1 << 16)
def _hand_cores_of(
    x: int, same: tuple[tuple[int, int], ...], above: tuple[int, ...], wrap: bool
) -> tuple[_HandCore, ...]:
    """``_cores_of`` those that fit in 10 cards, as entries of ``_hand_cores`` (a table of the
    cards alone: hands share most of their cores)."""
    found: list[_HandCore] = []
    for n, (core, size) in enumerate(_cores_of(x, same, above, wrap)):
        if size <= SHOWN:
            kept = len(core[1])
            found.append((kept, size, _packed(core[1]), (SHOWN + 1 - kept) << 20 | x << 12 | n, core))
    return tuple(found)


@lru_cache(maxsize=1 << 12)
def _hand_cores(
    naturals: tuple[int, ...], wrap: bool
) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[Core, ...], tuple[int, ...], _Fitting]:
    """Every core of the hand ``naturals`` (each once, by its lowest card), largest first, as
    columns: the cards each keeps, the least size of its group, its cards packed, the core; with
    the hand packed with its guard bits set before them; after them, by a number of cards ``n``
    (0 to all of them), where the cores of at most ``n`` cards start in that order; and by a
    number of cards kept and a size, the cores of that many cards whose group may be that small
    (``_core_sets`` reads those instead of passing over the cores too large to join a set)."""
    counts = [0] * JOKER_INDEX
    for i in naturals:
        counts[i] += 1
    found: list[_HandCore] = []
    for x in sorted(set(naturals)):
        counts[x] -= 1  # its other cards are of higher indices: a lower card would be the lowest
        same = tuple([(i, counts[i]) for i in range(x, JOKER_INDEX, RANKS_PER_SUIT) if counts[i]])
        above = tuple([i for i in range(x + 1, (_SUIT[x] + 1) * RANKS_PER_SUIT) if counts[i]])
        found += _hand_cores_of(x, same, above, wrap)
        counts[x] += 1
    found.sort(key=itemgetter(3))
    many = len(naturals)
    by_kept = [0] * (many + 2)
    for entry in found:
        by_kept[entry[0]] += 1
    starts = [0] * (many + 1)  # by n: the cores of more than n cards, the first of them
    for n in range(many - 1, -1, -1):
        starts[n] = starts[n + 1] + by_kept[n + 1]
    sizes = tuple([e[1] for e in found])
    fitting: list[tuple[tuple[int, ...], ...]] = [_NO_FITTING]
    for kept in range(1, many + 1):
        if not by_kept[kept]:
            fitting.append(_NO_FITTING)
            continue
        # The block of cores of ``kept`` cards, by size; the cores up to each size in walk order.
        block = sorted(range(starts[kept], starts[kept - 1]), key=sizes.__getitem__)
        ordered = [sizes[i] for i in block]
        fitting.append(
            (
                *_NO_FITTING[:MIN_GROUP_SIZE],
                *(tuple(sorted(block[: bisect_right(ordered, most)])) for most in _SECOND_ROOM[MIN_GROUP_SIZE:]),
            )
        )
    return (
        _packed(naturals) | _GUARD,
        tuple([e[0] for e in found]),
        sizes,
        tuple([e[2] for e in found]),
        tuple([e[4] for e in found]),
        tuple(starts),
        tuple(fitting),
    )


# By a number of cards kept, then a size: the indices of a hand's cores (ascending) that keep that
# many cards in a group of at most that size. A second or third core's group has at most 7 places
# (the first's takes 3 or more).
_Fitting = tuple[tuple[tuple[int, ...], ...], ...]
_SECOND_ROOM = range(SHOWN - MIN_GROUP_SIZE + 1)
_NO_FITTING: tuple[tuple[int, ...], ...] = tuple(() for _ in _SECOND_ROOM)


def _core_sets(
    naturals: tuple[int, ...], left_out: int, wrap: bool
) -> tuple[tuple[tuple[Core, ...], ...], tuple[int, ...]]:
    """Every set of at most three cores that keeps all of ``naturals`` (ascending) but exactly
    ``left_out`` of them and fits in 10 cards, each set once, its cores largest first; and beside
    each set the cards it leaves out, packed (as ``_packed``).

    The hand's cores are listed once; a set is chosen largest core first (so the first keeps at
    least a third of the cards kept, the second half of the rest, the third exactly what is left),
    and its cores fit in the hand together when their packed sum borrows no guard bit (what is
    left of the hand is then the cards left out, with the guard bits). The cores of each number of
    cards are a block of that order, and within a block the cores of a group small enough for the
    room left are listed apart (``_hand_cores``): the second and third cores are read from those
    lists, in the order of the walk, never passing over a core too large."""
    keep = len(naturals) - left_out
    if keep <= 0:
        return (((),), (_packed(naturals),)) if keep == 0 else ((), ())
    room, kept_of, size_of, packed_of, core_of, starts, fitting = _hand_cores(naturals, wrap)
    guard = _GUARD
    found: list[tuple[Core, ...]] = []
    rests: list[int] = []
    add, rest_add = found.append, rests.append
    for i in range(starts[keep], len(core_of)):
        li = kept_of[i]
        if li * MOST_GROUPS < keep:
            break
        ci = core_of[i]
        room_i = room - packed_of[i]  # the hand less the first core
        if li == keep:
            add((ci,))
            rest_add(room_i ^ guard)
            continue
        rest = keep - li
        si = size_of[i]
        # The second core keeps at most as many cards as the first (and comes after it in the
        # walk) and at least half of the rest; its group fits in the room the first leaves.
        for lj in range(min(rest, li), (rest + 1) // 2 - 1, -1):
            seconds = fitting[lj][SHOWN - si]
            if lj == li:
                seconds = seconds[bisect_left(seconds, i) :]
            last = rest - lj
            for j in seconds:
                room_j = room_i - packed_of[j]
                if room_j & guard != guard:
                    continue
                if not last:
                    add((ci, core_of[j]))
                    rest_add(room_j ^ guard)
                    continue
                cj = core_of[j]
                thirds = fitting[last][SHOWN - si - size_of[j]]
                if last == lj:
                    thirds = thirds[bisect_left(thirds, j) :]
                for k in thirds:
                    room_k = room_j - packed_of[k]
                    if room_k & guard == guard:
                        add((ci, cj, core_of[k]))
                        rest_add(room_k ^ guard)
    return tuple(found), tuple(rests)


_FIELD_MASK = (1 << _FIELD) - 1


class _Level:
    """The core sets of a hand that leave out ``left_out`` natural cards (``_core_sets``), by the
    cards they leave out (read when first asked for) and, filled in as they are first asked for,
    what each is worth when the jokers there are could fill every place (``_Filler.rich``):
    whether its sizes can make 10 cards (``_sizes_fit``) and the cards it may then draw
    (``_rich_cards``). They depend on the cards alone, so both views of a turn's throws (the
    seat's and the omniscient) share them, read by a set's place in the list."""

    __slots__ = ("_groups", "cards", "fits", "group_cards", "group_fits", "rests", "sets", "wrap")

    def __init__(self, naturals: tuple[int, ...], left_out: int, wrap: bool) -> None:
        self.sets, self.rests = _core_sets(naturals, left_out, wrap)
        self.wrap = wrap
        self._groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None = None
        self.fits: list[int] = [-1] * len(self.sets)  # -1: not asked yet
        self.cards: list[frozenset[int] | None] = [None] * len(self.sets)
        # By group (``groups``), as first asked for: whether some set of it fits (``fit``), and
        # what its sets that fit may draw (``rich_cards``, all of them).
        self.group_fits: list[int] = []
        self.group_cards: list[frozenset[int] | None] = []

    @property
    def groups(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """The sets by the cards they leave out: the kinds of those cards (ascending), and the
        places of the sets that leave them out (many sets leave out the same cards: a throw's
        walk asks once whether it is served by them)."""
        if self._groups is None:
            places: dict[int, list[int]] = {}
            for index, rest in enumerate(self.rests):
                mine = places.get(rest)
                if mine is None:
                    places[rest] = [index]
                else:
                    mine.append(index)
            kinds_of = _KINDS_LEFT
            groups = []
            for rest, indices in places.items():
                kinds = kinds_of.get(rest)
                if kinds is None:
                    kinds = _kinds_left(rest)
                groups.append((kinds, tuple(indices)))
            self._groups = tuple(groups)
            self.group_fits = [-1] * len(groups)
            self.group_cards = [None] * len(groups)
        return self._groups

    def group_fit(self, group: int) -> int:
        """Whether some set of ``group`` fits (``fit``), as 0 or 1."""
        known = self.group_fits[group]
        if known < 0:
            fits, fit = self.fits, self.fit
            known = self.group_fits[group] = int(
                any(fits[i] if fits[i] >= 0 else fit(i) for i in self.groups[group][1])
            )
        return known

    def group_rich_cards(self, group: int) -> frozenset[int]:
        """What the sets of ``group`` that fit may draw (``rich_cards``), together."""
        known = self.group_cards[group]
        if known is None:
            cards: set[int] = set()
            for i in self.groups[group][1]:
                if self.fit(i):
                    cards |= self.rich_cards(i)
            known = self.group_cards[group] = frozenset(cards)
        return known

    def fit(self, index: int) -> int:
        """``_sizes_fit`` of the set at ``index``, as 0 or 1."""
        known = self.fits[index]
        if known < 0:
            known = self.fits[index] = int(_sizes_fit(self.sets[index], self.wrap))
        return known

    def rich_cards(self, index: int) -> frozenset[int]:
        """``_rich_cards`` of the set at ``index`` at every size of its cores' ways."""
        known = self.cards[index]
        if known is None:
            cores = self.sets[index]
            known = self.cards[index] = _rich_cards(cores, _all_sizes(cores, self.wrap), self.wrap)
        return known


_KINDS = range(CARD_KINDS)

# The kinds of the cards a packed multiset holds (ascending): the same few cards left out recur
# in every hand's levels, so each is decoded once.
_KINDS_LEFT: dict[int, tuple[int, ...]] = {}


def _kinds_left(rest: int) -> tuple[int, ...]:
    kinds, bits = [], rest
    while bits:  # a field's lowest set bit gives its card
        card = ((bits & -bits).bit_length() - 1) // _FIELD
        kinds.append(card)
        bits &= ~(_FIELD_MASK << (_FIELD * card))
    if len(_KINDS_LEFT) >= 1 << 16:  # bounded, as the caches are
        _KINDS_LEFT.clear()
    known = _KINDS_LEFT[rest] = tuple(kinds)
    return known


@lru_cache(maxsize=1 << 16)
def _level(naturals: tuple[int, ...], left_out: int, wrap: bool) -> _Level:
    return _Level(naturals, left_out, wrap)


def _run_windows(ranks: Sequence[int], suit: int, wrap: bool, kept: int) -> Iterator[Completion]:
    """Every run of 3 to 10 places of ``suit`` holding ``ranks`` (distinct; ``kept`` of them from
    the hand), with the cards its other places need."""
    if wrap:
        held = set(ranks)
        for n in range(MIN_GROUP_SIZE, SHOWN + 1):
            for first in range(1, RANKS_PER_SUIT + 1):
                window = [(first - 1 + k) % RANKS_PER_SUIT + 1 for k in range(n)]
                if held.issubset(window):
                    yield n, tuple(sorted(_code(r, suit) for r in window if r not in held)), 0, 0
        return
    readings = [list(ranks)]
    if 1 in ranks and ranks:
        readings.append([14 if r == 1 else r for r in ranks])
    for places in readings:
        low, high = min(places), max(places)
        for n in range(max(MIN_GROUP_SIZE, high - low + 1, kept), SHOWN + 1):
            for first in range(max(1, high - n + 1), min(low, 15 - n) + 1):
                need = tuple(sorted(_code(p, suit) for p in range(first, first + n) if p not in places))
                yield n, need, 0, 0


@lru_cache(maxsize=1 << 14)
def _completions(core: Core, wrap: bool) -> tuple[tuple[Completion, ...], ...]:
    """The ways to complete ``core`` into a group, by group size (index: size)."""
    kind, cards = core
    kept = len(cards)
    found: set[Completion] = set()
    if kind != _RUN_CORE:
        rank = _RANK[cards[0]]
        for n in range(max(MIN_GROUP_SIZE, kept), SHOWN + 1):
            found.add((n, (), rank, n - kept))
    if kind != _RANK_CORE:
        found.update(_run_windows([_RANK[i] for i in cards], _SUIT[cards[0]], wrap, kept))
    by_size: list[list[Completion]] = [[] for _ in range(SHOWN + 1)]
    for option in sorted(found):
        by_size[option[0]].append(option)
    return tuple(tuple(options) for options in by_size)


@lru_cache(maxsize=64)
def _drawn_groups(n: int, wrap: bool) -> tuple[Completion, ...]:
    """Every group of ``n`` cards drawn whole: one rank (any suits, jokers standing in), or a run."""
    found: set[Completion] = {(n, (), rank, n) for rank in range(1, RANKS_PER_SUIT + 1)}
    for suit in range(_SUITS):
        firsts = range(1, RANKS_PER_SUIT + 1) if wrap else range(1, 16 - n)
        for first in firsts:
            found.add((n, tuple(sorted(_code(p, suit) for p in range(first, first + n))), 0, 0))
    return tuple(sorted(found))


def _splits(total: int, parts: int) -> list[tuple[int, ...]]:
    """Sizes of ``parts`` groups drawn whole (each 3 or more, ascending) that add up to ``total``."""
    if parts == 0:
        return [()] if total == 0 else []
    out = []
    for first in range(MIN_GROUP_SIZE, total + 1):
        for rest in _splits(total - first, parts - 1):
            if not rest or first <= rest[0]:
                out.append((first, *rest))
    return out


def joker_cap(limit: JokerLimit, size: int) -> int:
    """The most jokers a group of ``size`` cards may hold under ``limit``."""
    if limit is JokerLimit.ONE_PER_GROUP:
        return 1
    if limit is JokerLimit.NO_MORE_THAN_NATURALS:
        return size // 2
    return size


# --- a completion's empty places, filled from the unseen cards ------------------------------------


@dataclass(frozen=True, slots=True)
class _Shape:
    """The rule options a hand's distance depends on."""

    wrap: bool
    limit: JokerLimit


def _assignable(items: list[tuple[int, list[tuple[int, int]]]], caps: list[int]) -> bool:
    """Whether each item's jokers (its demand) fit in the groups it may take them from, each group
    within its cap (``items``: demand and (group, places) pairs)."""
    if not items:
        return True
    demand, where = items[0]
    rest = items[1:]

    def spread(k: int, left: int) -> bool:
        if left == 0:
            return _assignable(rest, caps)
        if k == len(where):
            return False
        group, places = where[k]
        for n in range(min(places, caps[group], left), -1, -1):
            caps[group] -= n
            ok = spread(k + 1, left - n)
            caps[group] += n
            if ok:
                return True
        return False

    return spread(0, demand)


class _Filler:
    """Completions of cores into targets, judged against one multiset of unseen cards, for a hand
    holding ``jokers`` jokers."""

    def __init__(self, unseen: Counts, shape: _Shape, jokers: int) -> None:
        self.unseen = unseen
        self.limit = shape.limit
        self.wrap = shape.wrap
        self.jokers = jokers
        self.supply = jokers + unseen[_JK]
        # By rank (index: rank 1-13): the unseen natural cards of that rank.
        self.free = [0, *map(sum, zip(*(unseen[s * RANKS_PER_SUIT : (s + 1) * RANKS_PER_SUIT] for s in range(_SUITS))))]
        self.support = frozenset([c for c, n in enumerate(unseen) if n])
        # The natural cards none of which is unseen, one bit each: a run place of one of them needs a joker.
        self.absent = sum([1 << c for c in range(JOKER_INDEX) if not unseen[c]])
        self.caps = _caps(shape.limit)  # by group size
        self.shorts: dict[Completion, int] = {}
        # ``rich`` from this many natural cards kept (never, under a joker limit).
        self.rich_from = SHOWN - self.supply if shape.limit is JokerLimit.UNLIMITED else SHOWN + 1
        self.deficits: dict[Completion, int] = {}
        self.draws: dict[Completion, frozenset[int]] = {}
        self.by_size: dict[Core, dict[int, list[tuple[Completion, int]]]] = {}
        self.drawn_slotted: dict[tuple[int, int], list[tuple[int, Completion, int, frozenset[int]]]] = {}
        self.drawn: dict[int, list[tuple[Completion, int]]] = {}
        self.ways: dict[Core, list[tuple[Completion, int]]] = {}
        self.sizes: dict[Core, int] = {}  # the sizes of each core's ways, as bits (bit n: size n)
        # The fewest jokers its ways need, by size, as a table and as its sorted pairs.
        self.least: dict[Core, dict[int, int]] = {}
        self.least_pairs: dict[Core, tuple[tuple[int, int], ...]] = {}
        self.wholes: list[dict[int, int]] | None = None
        self.listed: dict[tuple[Core, ...], list[list[tuple[Completion, int]]] | None] = {}
        self.slotted: dict[tuple[Core, ...], list[tuple[int, Completion, int, frozenset[int]]]] = {}
        # The fewest jokers the ways of some cores need together, by total size (shared by the
        # core sets that hold those cores).
        self.combined: dict[tuple[Core, ...], dict[int, int]] = {}
        self.values: dict[tuple[tuple[Core, ...], int], int] = {}
        self.outs: dict[tuple[tuple[Core, ...], int], frozenset[int]] = {}

    def short(self, option: Completion) -> int:
        """The jokers ``option`` needs on its own (its places no unseen natural card can take), or
        -1 when it cannot be filled even with every joker."""
        known = self.shorts.get(option)
        if known is not None:
            return known
        n, need, rank, many = option
        unseen = self.unseen
        s = 0
        for c in need:
            if not unseen[c]:
                s += 1
        if many > self.free[rank]:
            s += many - self.free[rank]
        if s > min(len(need) + many, joker_cap(self.limit, n)) or s > self.supply:
            s = -1
        self.shorts[option] = s
        return s

    def deficit(self, option: Completion) -> int:
        """The jokers ``option`` needs on its own: its places no unseen natural card can take."""
        known = self.deficits.get(option)
        if known is None:
            _, need, rank, many = option
            known = sum([1 for c in need if not self.unseen[c]]) + max(0, many - self.free[rank])
            self.deficits[option] = known
        return known

    def fillable(self, table: Iterable[tuple[Completion, int, int]]) -> list[tuple[Completion, int]]:
        """The options of ``table`` (each with its run places' cards as bits and its places) that
        can be filled on their own, each with its jokers needed: ``short``, without remembering
        each option."""
        return _fill_alone(table, self.absent, self.free, self.caps, self.supply)

    def drawn_of(self, n: int) -> list[tuple[Completion, int]]:
        """The groups of ``n`` cards that may be drawn whole, fewest jokers first."""
        found = self.drawn.get(n)
        if found is None:
            found = sorted(self.fillable(_drawn_table(n, self.wrap)), key=lambda pair: pair[1])
            self.drawn[n] = found
        return found

    def whole(self) -> list[dict[int, int]]:
        """The fewest jokers up to 0, 1, 2 and 3 groups drawn whole need, by total size (built
        when a core set leaves a group to draw whole)."""
        if self.wholes is None:
            drawn_least = {n: pairs[0][1] for n in range(MIN_GROUP_SIZE, SHOWN + 1) if (pairs := self.drawn_of(n))}
            self.wholes = [_combine_drawn(drawn_least, groups) for groups in range(MOST_GROUPS + 1)]
        return self.wholes

    def room(self, groups: Sequence[Completion]) -> int:
        """The places of ``groups`` a joker may take, within the joker limit."""
        caps = self.caps
        return sum(min(len(need) + many, caps[n]) for n, need, rank, many in groups)

    def exact(self, groups: Sequence[Completion], forced: tuple[int, int] | None = None) -> bool:
        """Whether the unseen cards and the hand's jokers fill ``groups`` keeping as many of the
        hand's jokers as the joker limit lets them hold; with ``forced`` (group, card), one place
        of that group takes an unseen copy of that card.

        Places no natural card can take need jokers (matching run places to their cards first is
        optimal: a same-rank place takes whatever a run place could); the jokers needed must fit
        within each group's cap, and the places jokers take (the hand's first) between the hand's
        jokers kept and all the jokers there are.
        """
        unseen = self.unseen
        limit = self.limit
        if limit is JokerLimit.UNLIMITED:
            return self._fills(groups, forced)
        caps = [min(len(need) + many, self.caps[n]) for n, need, rank, many in groups]
        kept = min(self.jokers, sum(caps))
        spec: dict[int, int] = {}
        pool: dict[int, int] = {}
        taken = -1
        for gi, (_, need, rank, many) in enumerate(groups):
            if forced is not None and forced[0] == gi:
                taken = forced[1]
                caps[gi] = min(caps[gi], len(need) + many - 1)
                if taken in need:
                    need = tuple(c for c in need if c != taken)
                else:
                    many -= 1
            for c in need:
                spec[c] = spec.get(c, 0) + 1
            if many:
                pool[rank] = pool.get(rank, 0) + many
        if forced is not None:
            if not unseen[taken] or sum(caps) < kept:
                return False

        def copies(c: int) -> int:
            return unseen[c] - (c == taken)

        needed = 0
        deficits: dict[int, int] = {}
        for c, wanted in spec.items():
            if wanted > copies(c):
                deficits[c] = wanted - copies(c)
                needed += wanted - copies(c)
        pool_deficits: dict[int, int] = {}
        for rank, wanted in pool.items():
            free = 0
            for c in range(rank - 1, JOKER_INDEX, RANKS_PER_SUIT):
                left = copies(c) - spec.get(c, 0)
                if left > 0:
                    free += left
            if wanted > free:
                pool_deficits[rank] = wanted - free
                needed += wanted - free
        if needed > self.supply:
            return False
        if not needed:
            return True
        items: list[tuple[int, list[tuple[int, int]]]] = []
        for c, d in deficits.items():
            items.append(
                (d, [(gi, 1) for gi, g in enumerate(groups) if c in g[1] and not (forced and forced == (gi, c))])
            )
        for rank, d in pool_deficits.items():
            where = []
            for gi, (_, need, r, many) in enumerate(groups):
                places = many - (forced is not None and forced[0] == gi and taken not in need) if r == rank else 0
                # A joker on a run place of this rank frees its natural card for the same-rank places.
                places += sum(1 for c in need if _RANK[c] == rank and c != taken and copies(c) >= spec.get(c, 0))
                if places:
                    where.append((gi, places))
            items.append((d, where))
        return _assignable(items, caps)

    def fits(self, groups: Sequence[Completion]) -> bool:
        """``exact``, for a completion ``find`` built (its groups' own jokers needed add up to at
        most the jokers there are): with no joker limit and no card or rank asked for by two of
        its groups (``_apart``), those are all the jokers it needs, so it fits."""
        return (self.limit is JokerLimit.UNLIMITED and _apart(groups, None) >= 0) or self.exact(groups)

    def _fills(self, groups: Sequence[Completion], forced: tuple[int, int] | None) -> bool:
        """``exact`` with no joker limit, where a group's cap is all its places: whether the jokers
        there are cover the places no unseen natural card can take and, with a place forced, the
        places left can still hold the hand's jokers."""
        places = _apart(groups, forced)
        if places >= 0:
            # No card and no rank is asked for by the places of two groups (``_apart``): the
            # jokers needed are each group's own (``deficit``); a forced card takes a place of its
            # group that asked for it, out of copies no other group may take, so it leaves the
            # count of jokers needed as it was.
            if forced is not None and (not self.unseen[forced[1]] or places - 1 < min(self.jokers, places)):
                return False
            return sum([self.deficit(option) for option in groups]) <= self.supply
        unseen = self.unseen
        spec: dict[int, int] = {}
        pool: dict[int, int] = {}
        taken = -1
        if forced is not None:
            at, taken = forced
            if not unseen[taken]:
                return False
            places = 0
            for gi, (_, need, rank, many) in enumerate(groups):
                places += len(need) + many
                if gi == at:
                    if taken in need:
                        need = tuple(c for c in need if c != taken)
                    else:
                        many -= 1
                for c in need:
                    spec[c] = spec.get(c, 0) + 1
                if many:
                    pool[rank] = pool.get(rank, 0) + many
            if places - 1 < min(self.jokers, places):
                return False
        else:
            for _, need, rank, many in groups:
                for c in need:
                    spec[c] = spec.get(c, 0) + 1
                if many:
                    pool[rank] = pool.get(rank, 0) + many
        needed = 0
        for c, wanted in spec.items():
            have = unseen[c] - (c == taken)
            if wanted > have:
                needed += wanted - have
        for rank, wanted in pool.items():
            free = 0
            for c in range(rank - 1, JOKER_INDEX, RANKS_PER_SUIT):
                left = unseen[c] - (c == taken) - spec.get(c, 0)
                if left > 0:
                    free += left
            if wanted > free:
                needed += wanted - free
        return needed <= self.supply

    # The search for a completion ------------------------------------------------------------

    def find(
        self,
        lists: Sequence[Sequence[tuple[Completion, int]]],
        fixed: Sequence[Completion],
        drawn_groups: int,
        accept: Callable[[list[Completion]], bool],
    ) -> list[Completion] | None:
        """A completion that ``accept`` takes: one option of each of ``lists`` (the cores' ways,
        each with its jokers needed), the ``fixed`` groups, and up to ``drawn_groups`` groups drawn
        whole, 10 cards in all; None when there is none. ``accept`` is offered only completions
        whose groups' jokers needed on their own add up to at most the jokers there are."""
        chosen = list(fixed)
        short, left = 0, SHOWN
        for option in fixed:
            short += self.short(option)
            left -= option[0]
        depth = len(lists)
        least = [0] * (depth + 1)
        for k in range(depth - 1, -1, -1):
            least[k] = least[k + 1] + (lists[k][0][0][0] if lists[k] else SHOWN + 1)
        supply = self.supply
        if short > supply or least[0] > left:
            return None
        # With no group drawn whole, the last core's group is exactly the cards left.
        last = depth - 1 if drawn_groups == 0 else -1
        drawn_of = self.drawn_of

        def cores(k: int, left: int, short: int) -> bool:
            if k == depth:
                return drawn(left, short, drawn_groups, MIN_GROUP_SIZE)
            after = least[k + 1]
            for option, s in lists[k]:
                n = option[0]
                if n + after > left:
                    break
                if short + s > supply or (k == last and n != left):
                    continue
                chosen.append(option)
                if cores(k + 1, left - n, short + s):
                    return True
                chosen.pop()
            return False

        def drawn(left: int, short: int, free: int, smallest: int) -> bool:
            if left == 0:
                return accept(chosen)
            if free == 0 or left < MIN_GROUP_SIZE:
                return False
            sizes = (left,) if free == 1 else [n for n in range(smallest, left + 1) if n == left or left - n >= n]
            for n in sizes:
                for option, s in drawn_of(n):
                    if short + s > supply:
                        break
                    chosen.append(option)
                    if drawn(left - n, short + s, free - 1, n):
                        return True
                    chosen.pop()
            return False

        return chosen if cores(0, left, short) else None

    def rich(self, kept: int) -> bool:
        """Whether the jokers there are could fill every place of a completion keeping ``kept``
        natural cards (no joker limit): then whatever is unseen, every way a completion may hold
        can be filled, and a core set's value and outs are tables of its cores (``_sizes_fit``,
        ``_rich_cards``).

        Why: a way of ``n`` cards of a core is in some completion only if ``n`` and the least sizes
        of the other cores (their cards kept) add up to at most 10, so its empty places are at
        most ``10 - kept``; the places it needs jokers for are among its empty places, and with no
        joker limit a group's cap is all its places; so it is fillable on its own (``fillable``)
        when ``supply >= 10 - kept``. Filtering the ways by what is unseen then drops only ways
        no completion holds."""
        return kept >= self.rich_from

    def value(self, cores: tuple[Core, ...], kept: int, floor: int) -> int:
        """The highest overlap of a completion of ``cores`` (``kept`` natural cards), or -1 when it
        is below ``floor``."""
        if self.rich(kept):
            # Jokers could fill every place: any completion whose sizes add up to 10 will do.
            top = kept + min(self.jokers, SHOWN - kept)
            if top < floor:
                return -1
            return top if _sizes_fit(cores, self.wrap) else -1
        lists = self.lists(cores)
        if lists is None:
            return -1
        free = MOST_GROUPS - len(cores)
        top = kept + min(self.jokers, SHOWN - kept)
        if self.limit is JokerLimit.UNLIMITED:
            # Every place may hold a joker: every completion keeps ``top`` (its room, 10 - kept,
            # holds the hand's jokers up to it).
            if top < floor:
                return -1
            if free == 0:  # three cores
                return top if self.fit_three(lists[0], lists[1], self.sized(cores[2])) is not None else -1
            return top if self.find(lists, (), free, self.fits) is not None else -1
        for target in range(top, max(floor, 0) - 1, -1):
            extra = target - kept

            def accept(groups: list[Completion], extra: int = extra) -> bool:
                return min(self.jokers, self.room(groups)) >= extra and self.exact(groups)

            if self.find(lists, (), free, accept) is not None:
                return target
        return -1

    def fit_three(
        self,
        first: Sequence[tuple[Completion, int]],
        second: Sequence[tuple[Completion, int]],
        third: dict[int, list[tuple[Completion, int]]],
    ) -> list[Completion] | None:
        """One way of each of three cores (the third's by size), 10 cards in all, that fits
        (``fits``), or None: ``find`` where any completion will do (no joker limit), with the
        third core's ways taken by the size left instead of tried in turn."""
        supply = self.supply
        least_second, least_third = second[0][0][0], min(third)
        for one, short_one in first:
            n = one[0]
            if n + least_second + least_third > SHOWN:
                break
            if short_one > supply:
                continue
            for two, short_two in second:
                left = SHOWN - n - two[0]
                if left < least_third:
                    break
                short = short_one + short_two
                if short > supply:
                    continue
                for three, short_three in third.get(left, ()):
                    if short + short_three <= supply and self.fits(groups := [one, two, three]):
                        return groups
        return None

    def lists(self, cores: tuple[Core, ...]) -> list[list[tuple[Completion, int]]] | None:
        """Each core's ways to be completed that can be filled on their own, smallest first
        (remembered by core set: the value, then the outs of one set, ask for them again)."""
        if cores in self.listed:
            return self.listed[cores]
        found = self.listed[cores] = self._lists(cores)
        return found

    def _lists(self, cores: tuple[Core, ...]) -> list[list[tuple[Completion, int]]] | None:
        out = []
        for core in cores:
            mine = self.ways.get(core)
            if mine is None:
                mask, rank = _core_asks(core, self.wrap)
                mine, self.sizes[core], self.least[core], self.least_pairs[core] = _fillable_ways(
                    core, self.wrap, self.limit, self.supply, self.absent & mask, self.free[rank]
                )
                self.ways[core] = mine
            if not mine:
                return None
            out.append(mine)
        return out

    def potential(self, cores: tuple[Core, ...], kept: int) -> frozenset[int]:
        """Every unseen card some completion of ``cores`` (``kept`` natural cards) could draw (a
        bound, feasibility aside: what the ways each core can fill on its own draw, at sizes that
        make 10 cards)."""
        if self.rich(kept):
            return self.collect_rich(cores)
        if self.lists(cores) is None:
            return frozenset()
        key = (cores, -1)
        known = self.outs.get(key)
        if known is None:
            sizes = tuple(self.sizes[core] for core in cores)
            known = self.outs[key] = _rich_cards(cores, sizes, self.wrap) & self.support
        return known

    def collect_rich(self, cores: tuple[Core, ...]) -> frozenset[int]:
        """``collect`` when the jokers there are could fill every place (``rich``): then every
        completion whose sizes add up to 10 can be filled, with any one place taking any card it
        may hold and jokers in the others, so the outs are what those completions' places hold
        (``_rich_cards``: a table of the cores and the sizes of their ways, whatever is unseen)."""
        key = (cores, -2)
        known = self.outs.get(key)
        if known is None:
            known = self.outs[key] = _rich_cards(cores, _all_sizes(cores, self.wrap), self.wrap) & self.support
        return known

    def slots(
        self, cores: tuple[Core, ...], lists: Sequence[Sequence[tuple[Completion, int]]]
    ) -> list[tuple[int, Completion, int, frozenset[int]]]:
        """The options a completion of ``cores`` may hold (the core it completes, or -1 for a group
        drawn whole; the option; its jokers needed; the unseen cards it may draw): those within a lower bound on the jokers the
        best completion through each needs, its own plus the fewest the other groups need on their
        own at sizes that make 10 cards in all."""
        free = MOST_GROUPS - len(cores)
        least = [self.least[core] for core in cores]
        whole = self.whole() if free else _NONE_DRAWN
        supply = self.supply
        slots: list[tuple[int, Completion, int, frozenset[int]]] = []
        for k in range(len(lists)):
            rest = cores[:k] + cores[k + 1 :]
            others = self.combined.get(rest)
            if others is None:
                others = self.combined[rest] = _min_plus_of(tuple(self.least_pairs[core] for core in rest))
            # The ways of each size, where the fewest jokers they need leave room for the others'.
            for n, pairs in self.sized(cores[k]).items():
                if free:
                    most = supply - _best_total(others, whole[free], SHOWN - n)
                else:  # no group drawn whole: the others make the 10 cards alone
                    most = supply - others.get(SHOWN - n, _NEVER)
                if least[k][n] <= most:
                    slots += [(k, option, short, self.draws_of(option)) for option, short in pairs if short <= most]
        if free:
            all_cores = self.combined.get(cores)
            if all_cores is None:
                all_cores = self.combined[cores] = _min_plus_of(tuple(self.least_pairs[core] for core in cores))
            for n in range(MIN_GROUP_SIZE, SHOWN + 1):
                slots += self.drawn_slots(n, supply - _best_total(all_cores, whole[free - 1], SHOWN - n))
        return slots

    def drawn_slots(self, n: int, most: int) -> list[tuple[int, Completion, int, frozenset[int]]]:
        """The groups of ``n`` cards drawn whole that need at most ``most`` jokers, as slots (the
        first of ``drawn_of``, fewest jokers first; remembered, as every core set asks)."""
        key = (n, most)
        known = self.drawn_slotted.get(key)
        if known is None:
            known = [(-1, o, short, self.draws_of(o)) for o, short in self.drawn_of(n) if short <= most]
            self.drawn_slotted[key] = known
        return known

    def sized(self, core: Core) -> dict[int, list[tuple[Completion, int]]]:
        """The ways of ``core`` that can be filled on their own (``lists``), by size, smallest first."""
        known = self.by_size.get(core)
        if known is None:
            known = self.by_size[core] = {}
            for pair in self.ways[core]:
                known.setdefault(pair[0][0], []).append(pair)
        return known

    def draws_of(self, option: Completion) -> frozenset[int]:
        """The unseen cards a filling of ``option`` may draw (remembered: the groups drawn whole
        are slots of every core set)."""
        known = self.draws.get(option)
        if known is None:
            known = self.draws[option] = _drawable(option) & self.support
        return known

    def collect(self, cores: tuple[Core, ...], kept: int, target: int, outs: set[int]) -> None:
        """Add to ``outs`` the cards some completion of ``cores`` of overlap ``target`` draws."""
        jokers = self.jokers
        if SHOWN - kept <= jokers:
            return  # the hand's jokers fill every place: nothing is drawn
        if self.rich(kept):
            outs |= self.collect_rich(cores)
            return
        lists = self.lists(cores)
        if lists is None:
            return
        support = self.support
        extra = target - kept
        unlimited = self.limit is JokerLimit.UNLIMITED
        base: Callable[[list[Completion]], bool]
        if unlimited:
            # With no joker limit the room of a completion is all its places, 10 - kept (more
            # than the hand's jokers, see above): it holds the jokers kept, and one more.
            if min(jokers, SHOWN - kept) < extra:
                return
            base = self.fits
        else:

            def base(groups: list[Completion]) -> bool:
                return min(jokers, self.room(groups)) >= extra and self.exact(groups)

        free = MOST_GROUPS - len(cores)
        slots = self.slotted.get(cores)
        if slots is None:
            slots = self.slotted[cores] = self.slots(cores, lists)
        everything = len(support)  # the outs are unseen cards: all of them once this many
        # Completions found whose groups ask for no card or rank in common, by the core a group
        # completes (-1: drawn whole) and its size, with the group's place in the completion.
        witnesses: dict[tuple[int, int], tuple[list[Completion], int]] = {}
        for k, option, short, draws in slots:
            if len(outs) >= everything:
                return
            if draws <= outs:
                continue
            seen = witnesses.get((k, option[0]))
            if seen is not None:
                # This option in the place of a group of the same size: still 10 cards, and if it
                # asks for nothing the others do and the jokers fit, it fits, and all it may
                # draw are outs (below).
                swapped = list(seen[0])
                swapped[seen[1]] = option
                if _apart(swapped, None) >= 0 and sum([self.deficit(g) for g in swapped]) <= self.supply:
                    outs |= draws
                    continue
            if k >= 0:
                mine_lists = [mine if j != k else [(option, short)] for j, mine in enumerate(lists)]
                fixed: tuple[Completion, ...] = ()
                drawn_groups, at = free, k
            else:
                mine_lists, fixed, drawn_groups, at = lists, (option,), free - 1, 0
            if unlimited and free == 0:  # three cores: any completion through the option will do
                third = {option[0]: [(option, short)]} if k == 2 else self.sized(cores[2])
                found = self.fit_three(mine_lists[0], mine_lists[1], third)
            else:
                found = self.find(mine_lists, fixed, drawn_groups, base)
            if found is None:
                continue
            found = list(found)
            if unlimited and _apart(found, None) >= 0:
                # Each card a group of this completion may draw is one its places ask for and is
                # unseen, and no other group asks for it or its rank: it takes one of those places
                # and the jokers needed stay the same (``_fills``), the places left (more than the
                # hand's jokers, see above) still hold them. So the cards every group of it may
                # draw are outs, not only this slot's (the other groups are slots too, then
                # skipped when they could draw nothing new).
                for place, group in enumerate(found):
                    outs |= self.draws_of(group)
                    # The cores' groups first, after the fixed group drawn whole if there is one.
                    core = place - len(fixed)
                    witnesses.setdefault((core if 0 <= core < len(cores) else -1, group[0]), (found, place))
                continue
            at = found.index(option) if k < 0 else at
            for c in sorted(draws - outs):
                if c == _JK:
                    if (
                        unlimited
                        or self.room(found) > jokers
                        or self.find(mine_lists, fixed, drawn_groups, lambda g: self.room(g) > jokers and base(g))
                    ):
                        outs.add(c)
                    continue
                if self.exact(found, (at, c)):
                    outs.add(c)
                    continue

                def forcing(groups: list[Completion], c: int = c, o: Completion = option) -> bool:
                    return base(groups) and self.exact(groups, (groups.index(o), c))

                if self.find(mine_lists, fixed, drawn_groups, forcing) is not None:
                    outs.add(c)


@lru_cache(maxsize=1 << 14)
def _core_asks(core: Core, wrap: bool) -> tuple[int, int]:
    """What the ways of ``core`` ask of the unseen cards: their run places' cards (bits by card
    index), and the rank their same-rank places take (0: none)."""
    mask = 0
    for _option, bits, _places in _ways(core, wrap):
        mask |= bits
    return mask, (_RANK[core[1][0]] if core[0] != _RUN_CORE else 0)


@lru_cache(maxsize=1 << 16)
def _fillable_ways(
    core: Core, wrap: bool, limit: JokerLimit, supply: int, absent: int, free: int
) -> tuple[list[tuple[Completion, int]], int, dict[int, int], tuple[tuple[int, int], ...]]:
    """The ways of ``core`` that can be filled on their own (``_Filler.fillable``), the sizes they
    take (as bits), and the fewest jokers they need by size (a table and its sorted pairs): they
    depend on the unseen cards only through the jokers there are, which of the cards the ways ask
    for none is unseen (``absent``, those cards' bits), and how many unseen cards the core's rank
    has (``free``), so turns of a deal and its two views share them (read them only)."""
    # Every same-rank way of the core is of its rank: the unseen count of the others is never read.
    mine = _fill_alone(_ways(core, wrap), absent, [free] * (RANKS_PER_SUIT + 1), _caps(limit), supply)
    least = _least_by_size(mine)
    return mine, sum(1 << n for n in {o[0] for o, _ in mine}), least, tuple(sorted(least.items()))


def _fill_alone(
    table: Iterable[tuple[Completion, int, int]], absent: int, free: Sequence[int], caps: Sequence[int], supply: int
) -> list[tuple[Completion, int]]:
    """The options of ``table`` (each with its run places' cards as bits and its places) that can
    be filled on their own, each with its jokers needed (``_Filler.short``): ``absent``, the
    natural cards none of which is unseen (bits); ``free``, the unseen natural cards by rank;
    ``caps``, the joker cap by group size; ``supply``, the jokers there are."""
    found = []
    for option, bits, places in table:
        n, _, rank, many = option
        s = (bits & absent).bit_count()
        if many > free[rank]:
            s += many - free[rank]
        if s <= places and s <= caps[n] and s <= supply:
            found.append((option, s))
    return found


@lru_cache(maxsize=8)
def _caps(limit: JokerLimit) -> tuple[int, ...]:
    """The most jokers a group may hold under ``limit``, by group size (0 to 10)."""
    return tuple(joker_cap(limit, n) for n in range(SHOWN + 1))


_NEVER = 1 << 20
_UP_TO_SHOWN = (1 << (SHOWN + 1)) - 1  # the bits of sums 0 to 10
_ROOM_LEFT = (1 << (SHOWN - MIN_GROUP_SIZE + 1)) - 1  # sums 0 to 7: room for a group drawn whole
_NONE_DRAWN = [{0: 0}]  # no group drawn whole: none needs a joker


def _asks(option: Completion) -> tuple[int, int, int]:
    """What the places of ``option`` ask for: its run places' cards (bits by card index), the ranks
    of those cards (bits by rank) and the rank its same-rank places take (a bit, 0: none)."""
    _, need, rank, many = option
    return sum(1 << c for c in need), sum(1 << _RANK[c] for c in need), (1 << rank) if many else 0


# ``_asks`` of the options met, each with the places it has (a table of the options alone, read by
# a plain look-up in ``_apart``, its hottest caller).
_ASKED: dict[Completion, tuple[int, int, int, int]] = {}


def _asked(option: Completion) -> tuple[int, int, int, int]:
    if len(_ASKED) >= 1 << 16:  # bounded, as the caches are
        _ASKED.clear()
    known = _ASKED[option] = (*_asks(option), len(option[1]) + option[3])
    return known


def _apart(groups: Sequence[Completion], forced: tuple[int, int] | None) -> int:
    """The places of ``groups`` when no card is asked for by two run places and no rank by a
    same-rank group and any other place (and ``forced``, if given, is a card its group's places
    ask for); -1 otherwise.

    Then the unseen natural cards one group's places may take are no other group's, so the
    jokers the groups need together are the sum of each one's."""
    cards = ranks = pools = places = 0
    asked = _ASKED
    for option in groups:
        need_bits, need_ranks, pool, mine = asked.get(option) or _asked(option)
        if need_bits & cards or pool & (ranks | pools) or need_ranks & pools:
            return -1
        cards |= need_bits
        ranks |= need_ranks
        pools |= pool
        places += mine
    if forced is not None:
        at, card = forced
        need_bits, _, pool, _ = asked.get(groups[at]) or _asked(groups[at])
        if not (need_bits >> card & 1 or (card < JOKER_INDEX and pool >> _RANK[card] & 1)):
            return -1
    return places


def _least_by_size(mine: Sequence[tuple[Completion, int]]) -> dict[int, int]:
    """The fewest jokers a core's ways need on their own, by size."""
    least: dict[int, int] = {}
    for option, short in mine:
        n = option[0]
        if short < least.get(n, _NEVER):
            least[n] = short
    return least


def _min_plus(tables: Sequence[dict[int, int]]) -> dict[int, int]:
    """The fewest jokers one way of each table needs, by total size (at most 10)."""
    out = {0: 0}
    for table in tables:
        out_next: dict[int, int] = {}
        pairs = sorted(table.items())
        for a, x in out.items():
            room = SHOWN - a
            for n, y in pairs:
                if n > room:
                    break
                if x + y < out_next.get(a + n, _NEVER):
                    out_next[a + n] = x + y
        out = out_next
    return out


@lru_cache(maxsize=1 << 14)
def _min_plus_of(tables: tuple[tuple[tuple[int, int], ...], ...]) -> dict[int, int]:
    """``_min_plus`` of tables given as sorted pairs (size, jokers), remembered: the cores of many
    sets need jokers alike (the table returned is shared: read it only)."""
    return _min_plus([dict(pairs) for pairs in tables])


def _combine_drawn(least: dict[int, int], groups: int) -> dict[int, int]:
    """The fewest jokers up to ``groups`` groups drawn whole need, by total size (0: none drawn)."""
    out = {0: 0}
    reach = {0: 0}
    for _ in range(groups):
        reach = _min_plus([reach, least])
        for n, x in reach.items():
            if x < out.get(n, _NEVER):
                out[n] = x
    return out


def _best_total(cores: dict[int, int], drawn: dict[int, int], size: int) -> int:
    """The fewest jokers cores and groups drawn whole need to make ``size`` cards."""
    return min((x + drawn[size - a] for a, x in cores.items() if size - a in drawn), default=_NEVER)


ALL_KINDS = frozenset(range(CARD_KINDS))


@lru_cache(maxsize=1 << 14)
def _rich_cards(cores: tuple[Core, ...], sizes: tuple[int, ...], wrap: bool) -> frozenset[int]:
    """The cards some completion of ``cores`` whose sizes add up to 10 may draw, each core completed
    at one of its ``sizes`` (as bits: bit n, size n) and the groups left drawn whole (feasibility
    aside: ``collect_rich``)."""
    free = MOST_GROUPS - len(cores)

    def sums(skip: int) -> int:
        """The totals of one size of each core but ``skip``, as bits (bit a: a total of a, at most 10)."""
        reach = 1
        for k, mine in enumerate(sizes):
            if k != skip:
                reach = _sumset(reach, mine)
        return reach

    if free:
        # A group drawn whole of 3 to 10 cards closes with the cores, leaving room for the rest.
        if _closing(sums(-1), free - 1) & _DRAWN_SIZES:
            return ALL_KINDS  # a same-rank group drawn whole may hold any card, or a joker
    # Rich enough, every way of every core can be filled (the jokers needed are never more than
    # the places), so what each core's ways of one size may draw is a table of the core alone.
    cards: set[int] = set()
    for k, core in enumerate(cores):
        closing = sizes[k] & _closing(sums(k), free)  # the sizes of its ways that close with the others
        if closing:
            cards |= _core_draws(core, closing, wrap)
    return frozenset(cards)


def _closing(totals: int, groups: int) -> int:
    """The sizes ``n`` of a group (as bits) that with one of ``totals`` (as bits) make 10 cards, or
    leave room for one of ``groups`` groups drawn whole (3 cards or more: a total of at most
    7 - n)."""
    sizes = _TO_TEN[totals]
    if groups > 0 and totals:
        most = SHOWN - MIN_GROUP_SIZE - ((totals & -totals).bit_length() - 1)  # 7 less the least total
        if most >= 0:
            sizes |= (1 << (most + 1)) - 1
    return sizes


# By a set of totals (as bits): the sizes that make 10 with one of them (as bits).
_TO_TEN = tuple(
    sum(1 << (SHOWN - a) for a in range(SHOWN + 1) if totals >> a & 1) for totals in range(1 << (SHOWN + 1))
)
_DRAWN_SIZES = sum(1 << n for n in range(MIN_GROUP_SIZE, SHOWN + 1))  # a group drawn whole: 3 to 10 cards


@lru_cache(maxsize=1 << 16)
def _sumset(a: int, b: int) -> int:
    """The totals of one of the sizes ``a`` and one of ``b`` (as bits), at most 10 (as bits)."""
    out, n = 0, 0
    while b:
        if b & 1:
            out |= a << n
        b >>= 1
        n += 1
    return out & _UP_TO_SHOWN


@lru_cache(maxsize=1 << 14)
def _core_draws(core: Core, sizes: int, wrap: bool) -> frozenset[int]:
    """What the ways to complete ``core`` at ``sizes`` (bit n: size n) may draw (cores recur
    in many sets, at the same sizes)."""
    drawable = _core_drawable(core, wrap)
    return frozenset().union(*(drawable[n] for n in range(SHOWN + 1) if sizes >> n & 1))


@lru_cache(maxsize=1 << 14)
def _core_sizes(core: Core, wrap: bool) -> int:
    """The sizes of the ways to complete ``core``, as bits (bit n: size n)."""
    return sum(1 << n for n, options in enumerate(_completions(core, wrap)) if options)


@lru_cache(maxsize=1 << 16)
def _all_sizes(cores: tuple[Core, ...], wrap: bool) -> tuple[int, ...]:
    """The sizes of the ways to complete each of ``cores``, as bits."""
    return tuple(_core_sizes(core, wrap) for core in cores)


@lru_cache(maxsize=1 << 16)
def _sizes_fit(cores: tuple[Core, ...], wrap: bool) -> bool:
    """Whether one way of each of ``cores`` and groups drawn whole (up to three groups in all)
    can make 10 cards."""
    reach = 1  # bit a: some choice of sizes adds up to a (at most 10)
    for sizes in _all_sizes(cores, wrap):
        reach = _sumset(reach, sizes)
    return bool(reach >> SHOWN & 1) or (len(cores) < MOST_GROUPS and bool(reach & _ROOM_LEFT))


@lru_cache(maxsize=1 << 14)
def _core_drawable(core: Core, wrap: bool) -> tuple[frozenset[int], ...]:
    """What the ways to complete ``core`` may draw, by group size (index: size)."""
    return tuple(frozenset().union(*(_drawable(o) for o in options)) for options in _completions(core, wrap))


@lru_cache(maxsize=1 << 14)
def _ways(core: Core, wrap: bool) -> tuple[tuple[Completion, int, int], ...]:
    """The ways to complete ``core``, smallest first, each with its run places' cards as bits and
    its empty places."""
    return tuple(
        (option, sum(1 << c for c in option[1]), len(option[1]) + option[3])
        for by_size in _completions(core, wrap)
        for option in by_size
    )


@lru_cache(maxsize=64)
def _drawn_table(n: int, wrap: bool) -> tuple[tuple[Completion, int, int], ...]:
    """``_drawn_groups`` with each group's run places' cards as bits and its places."""
    return tuple(
        (option, sum(1 << c for c in option[1]), len(option[1]) + option[3]) for option in _drawn_groups(n, wrap)
    )


@lru_cache(maxsize=1 << 14)
def _drawable(option: Completion) -> frozenset[int]:
    """The cards a filling of ``option`` may draw: its run places' cards, any card of its rank, a joker."""
    _, need, rank, many = option
    cards = set(need)
    if many:
        cards.update(range(rank - 1, JOKER_INDEX, RANKS_PER_SUIT))
    cards.add(_JK)
    return frozenset(cards)


def _color_value(hand: Counts, unseen: Counts, outs_by_value: dict[int, set[int]]) -> int:
    """The highest overlap of a color target (10 cards of one suit, jokers standing in), -1 if none."""
    return _color_of(_by_suit(hand), _Suits.of(unseen), hand[_JK], outs_by_value)


def _by_suit(hand: Counts) -> list[int]:
    return [sum(hand[suit * RANKS_PER_SUIT : (suit + 1) * RANKS_PER_SUIT]) for suit in range(_SUITS)]


@dataclass(frozen=True, slots=True)
class _Suits:
    """The unseen cards by suit: how many (jokers added), and the kinds a color of the suit draws."""

    room: tuple[int, ...]
    draws: tuple[frozenset[int], ...]

    @staticmethod
    def of(unseen: Counts) -> _Suits:
        jokers = unseen[_JK]
        room, draws = [], []
        for suit in range(_SUITS):
            low, high = suit * RANKS_PER_SUIT, (suit + 1) * RANKS_PER_SUIT
            room.append(sum(unseen[low:high]) + jokers)
            draws.append(frozenset([*compress(range(low, high), unseen[low:high]), *((_JK,) if jokers else ())]))
        return _Suits(tuple(room), tuple(draws))


def _color_of(held_by_suit: Sequence[int], suits: _Suits, jokers: int, outs_by_value: dict[int, set[int]]) -> int:
    """``_color_value`` from the hand's natural cards by suit and its jokers."""
    best = -1
    for suit in range(_SUITS):
        held = held_by_suit[suit] + jokers
        if held + suits.room[suit] < SHOWN:
            continue
        value = min(SHOWN, held)
        best = max(best, value)
        if value < SHOWN:
            outs_by_value.setdefault(value, set()).update(suits.draws[suit])
    return best


def overlap(hand: Counts, unseen: Counts, shape: _Shape, want_outs: bool) -> tuple[int, frozenset[int]]:
    """The highest overlap of a valid close taken from ``hand + unseen`` with ``hand``, and (when
    asked) the card kinds some target of that overlap draws from ``unseen``."""
    color_outs: dict[int, set[int]] = {}
    best = _color_value(hand, unseen, color_outs)
    naturals = _naturals(hand)
    jokers = hand[_JK]
    filler = _Filler(unseen, shape, jokers)
    wrap, rich_from, support = shape.wrap, filler.rich_from, filler.support
    # The core sets worth collecting outs from (each with its level and its place in it).
    found: list[tuple[tuple[Core, ...], int, int, _Level, int]] = []
    total = len(naturals)
    for left_out in range(total + 1):
        bound = min(SHOWN, total - left_out + jokers)
        if bound < best or (bound == best and (not want_outs or best == SHOWN)):
            break
        kept = total - left_out
        level = _level(naturals, left_out, wrap)
        sets = level.sets
        if kept >= rich_from:
            # ``_Filler.value`` when rich: ``bound`` if the set's sizes can make 10 cards (the floor,
            # ``best`` or one more, is at most ``bound``: the walk goes on only then).
            fits, fit = level.fits, level.fit
            for index in range(len(sets)):
                if not (fits[index] if fits[index] >= 0 else fit(index)):
                    continue
                if bound > best:
                    best = bound
                    found = []
                if not want_outs:
                    break  # the best this level can give
                found.append((sets[index], kept, bound, level, index))
            continue
        for index, cores in enumerate(sets):
            floor = best if want_outs else best + 1
            value = filler.value(cores, kept, floor)
            if value < 0 or value < best:
                continue
            if value > best:
                best = value
                found = []
            if want_outs:
                found.append((cores, kept, value, level, index))
            elif best == bound:
                break
    outs: set[int] = set()
    if want_outs and 0 <= best < SHOWN:
        outs |= color_outs.get(best, set())
        for cores, kept, value, level, index in found:
            if value != best:
                continue
            if kept >= rich_from:
                # Its value, min(10, kept + jokers), is below 10: the hand's jokers leave places to
                # draw, and what a rich set may draw is what it draws (``_Filler.collect``).
                outs |= level.rich_cards(index) & support
            elif not filler.potential(cores, kept) <= outs:
                filler.collect(cores, kept, value, outs)
    return best, frozenset(outs)


def throw_overlaps(held: Counts, unseen: Counts, shape: _Shape) -> dict[int, tuple[int, frozenset[int]]]:
    """For each kind ``t`` of natural card among the 11 cards ``held``: ``overlap(held - t, unseen,
    shape, True)``, from one walk over the 11 cards (a core set of ``held - t`` is a core set of
    ``held`` that leaves ``t`` out, so each is judged once for every throw it serves)."""
    naturals = _naturals(held)
    jokers = held[_JK]
    kinds = sorted(set(naturals))
    best: dict[int, int] = {}
    colors: dict[int, dict[int, set[int]]] = {}
    by_suit, suits = _by_suit(held), _Suits.of(unseen)
    of_suit: dict[int, tuple[int, dict[int, set[int]]]] = {}  # the throws of one suit leave the same colors
    for t in kinds:
        suit = _SUIT[t]
        known = of_suit.get(suit)
        if known is None:
            by_suit[suit] -= 1
            mine: dict[int, set[int]] = {}
            known = of_suit[suit] = (_color_of(by_suit, suits, jokers, mine), mine)
            by_suit[suit] += 1
        best[t], colors[t] = known
    filler = _Filler(unseen, shape, jokers)
    wrap, rich_from, support = shape.wrap, filler.rich_from, filler.support
    found: list[tuple[tuple[Core, ...], int, int, list[int], _Level, int]] = []
    total = len(naturals)
    for left_out in range(1, total + 1):
        bound = min(SHOWN, total - left_out + jokers)
        open_kinds = {t for t in kinds if bound > best[t] or (bound == best[t] and best[t] < SHOWN)}
        if not open_kinds:
            break
        kept = total - left_out
        level = _level(naturals, left_out, wrap)
        sets = level.sets
        rich = kept >= rich_from
        groups = level.groups  # (its tables by group are made with it)
        group_fits, group_fit = level.group_fits, level.group_fit
        for group, (left, indices) in enumerate(groups):
            serves = [t for t in left if t in open_kinds]
            if not serves:
                continue
            if rich:
                # ``_Filler.value`` when rich: ``bound`` if the set's sizes can make 10 cards (the
                # floor, the least best of the throws it serves, is at most ``bound``: they are
                # open). The sets of a group serve the same throws: one entry stands for those
                # that fit (its place: the group's).
                if group_fits[group] if group_fits[group] >= 0 else group_fit(group):
                    for t in serves:
                        if best[t] < bound:
                            best[t] = bound
                    found.append((sets[indices[0]], kept, bound, serves, level, group))
                continue
            for index in indices:
                cores = sets[index]
                value = filler.value(cores, kept, min([best[t] for t in serves]))
                if value < 0:
                    continue
                for t in serves:
                    if best[t] < value:
                        best[t] = value
                found.append((cores, kept, value, serves, level, index))
    # Each throw's outs, from the core sets of its best value that serve it (when rich, by group),
    # each adding only the
    # cards not yet found (a core set that could draw nothing new is skipped; its bound on what it
    # could draw, found when first asked for, is the same for every throw it serves), until every
    # unseen kind is one. When rich, that bound is what the set draws (``_Filler.collect``): its
    # value, min(10, kept + jokers), is below 10, so the hand's jokers leave places to draw.
    serving: dict[int, list[int]] = {t: [] for t in kinds}  # places in ``found``
    for place, (_, _, value, serves, _, _) in enumerate(found):
        for t in serves:
            if value == best[t] < SHOWN:
                serving[t].append(place)
    bounds: dict[int, frozenset[int]] = {}
    everything = len(support)  # the outs are unseen kinds: all of them once this many
    out: dict[int, tuple[int, frozenset[int]]] = {}
    for t in kinds:
        outs: set[int] = set()
        if 0 <= best[t] < SHOWN:
            outs |= colors[t].get(best[t], set())
            for place in serving[t]:
                if len(outs) >= everything:
                    break
                cores, kept, value, _, level, index = found[place]
                potential = bounds.get(place)
                if potential is None:
                    if kept >= rich_from:
                        potential = level.group_rich_cards(index) & support
                    else:
                        potential = filler.potential(cores, kept)
                    bounds[place] = potential
                if not potential <= outs:
                    if kept >= rich_from:
                        outs |= potential
                    else:
                        filler.collect(cores, kept, value, outs)
        out[t] = (best[t], frozenset(outs))
    return out


# --- the measure of a hand ------------------------------------------------------------------------

UNREACHABLE = SHOWN + 1  # the distance of a hand no close can be made from (a tiny deck only)


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a hand is from a valid close, against the cards it has not seen (``docs/review.md``)."""

    distance: int  # cards to swap before 10 of the hand close (0: they close now)
    improving: int  # unseen cards (copies counted) that, drawn, bring the distance down by one
    points: int  # what the hand's best linking leaves unlinked (RULES §3)
    unseen: int  # how many cards the hand is judged against
    outs: tuple[Card, ...]  # the improving card kinds, in canonical order
    value: float  # -distance + (improving + q) / (unseen + 1), q = 1 - points / (cap + 1)

    @property
    def key(self) -> tuple[int, int, int]:
        """The order of hands: the greater key is the better hand."""
        return (-self.distance, self.improving, -self.points)

    def __str__(self) -> str:
        outs = " ".join(card.code() for card in self.outs) or "none"
        return (
            f"distance {self.distance}, improving {self.improving}/{self.unseen} ({outs}), "
            f"points {self.points}, value {self.value:.4f}"
        )


def points_cap(rules: RuleSet) -> int:
    """The most points 10 cards can leave unlinked: the scale of the points term of the value."""
    return SHOWN * max(10, rules.joker_points)


def hand_value(distance: int, improving: int, points: int, unseen: int, rules: RuleSet) -> float:
    """``-distance + (improving + q) / (unseen + 1)`` with ``q = 1 - points / (cap + 1)``: it orders
    hands as (distance, improving, points) do, and a step of distance weighs 1."""
    q = 1 - points / (points_cap(rules) + 1)
    return -distance + (improving + q) / (unseen + 1)


def _shape(rules: RuleSet) -> _Shape:
    return _Shape(rules.wrap_runs, rules.joker_limit)


def search_rules(rules: RuleSet) -> RuleSet:
    """The same rules linked by the search engine (every engine gives the same answer; it is the fast one)."""
    return rules if rules.engine is Engine.SEARCH else rules.with_options(engine=Engine.SEARCH)


def distance_of(hand: Counts, unseen: Counts, rules: RuleSet) -> int:
    """The distance of a hand of 10 or 11 cards (for 11: whether some 10 of them close, and if not
    how many swaps), against ``unseen``."""
    best, _ = overlap(hand, unseen, _shape(rules), False)
    return UNREACHABLE if best < 0 else SHOWN - best


@lru_cache(maxsize=1 << 15)
def _measure(hand: Counts, unseen: Counts, rules: RuleSet) -> Progress:
    best, outs = overlap(hand, unseen, _shape(rules), True)
    return _progress(hand, unseen, rules, best, outs)


def _progress(
    hand: Counts, unseen: Counts, rules: RuleSet, best: int, outs: frozenset[int], total: int | None = None
) -> Progress:
    """The progress of ``hand`` whose highest overlap is ``best``, drawing ``outs`` (``total``: the
    unseen cards' count, when the caller has it)."""
    if total is None:
        total = sum(unseen)
    points = _points(hand, rules)
    if 0 <= best < SHOWN:
        distance = SHOWN - best
        improving = sum([unseen[c] for c in outs])
        kinds = tuple([CARD_BY_INDEX[c] for c in sorted(outs)])
    else:  # it closes now, or never: nothing improves it
        distance, improving, kinds = (0 if best >= SHOWN else UNREACHABLE), 0, ()
    return Progress(
        distance=distance,
        improving=improving,
        points=points,
        unseen=total,
        outs=kinds,
        value=hand_value(distance, improving, points, total, rules),
    )


@lru_cache(maxsize=1 << 15)
def _points(hand: Counts, rules: RuleSet) -> int:
    """What the best linking of ``hand`` leaves (a hand's throws are measured twice a turn): the
    search engine's points, every engine's answer, without the linking's groups laid out."""
    held = list(compress(_KINDS, hand))
    if len(held) < SHOWN:  # copies of a card: each index as many times as it is held
        held = [i for i in held for _ in range(hand[i])]
    return best_points(tuple(held), rules)


def measure_throws(held: Counts, unseen: Counts, rules: RuleSet) -> dict[Card, Progress]:
    """The progress of the 10 cards left by each kind of card the 11 cards ``held`` may throw."""
    shared = throw_overlaps(held, unseen, _shape(rules))
    total = sum(unseen)
    out: dict[Card, Progress] = {}
    for t in range(CARD_KINDS):
        if held[t]:
            left = add_card(held, t, -1)
            if t == _JK:
                out[CARD_BY_INDEX[t]] = _measure(left, unseen, rules)
            else:
                best, outs = shared[t]
                out[CARD_BY_INDEX[t]] = _progress(left, unseen, rules, best, outs, total)
    return out


def measure(hand: Iterable[Card] | Counts, unseen: Iterable[Card] | Counts, rules: RuleSet) -> Progress:
    """The progress of a hand of 10 cards against the multiset of cards it has not seen."""
    held, pool = _as_counts(hand), _as_counts(unseen)
    if sum(held) != SHOWN:
        raise ValueError(f"a measured hand holds {SHOWN} cards, not {sum(held)}")
    return _measure(held, pool, rules)


def _as_counts(value: Iterable[Card] | Counts) -> Counts:
    """Cards, or already a count per card index."""
    if isinstance(value, tuple) and len(value) == CARD_KINDS and all(type(n) is int for n in value):
        return cast(Counts, value)
    return counts_of(cast(Iterable[Card], value))


def forget_measures() -> None:
    """Empty the caches of measures and of what depends on a hand (a benchmark times each deal cold)."""
    _measure.cache_clear()
    _hand_cores.cache_clear()
    _rich_cards.cache_clear()
    _core_draws.cache_clear()
    _min_plus_of.cache_clear()
    _all_sizes.cache_clear()
    _sizes_fit.cache_clear()
    _level.cache_clear()
    _fillable_ways.cache_clear()
    _points.cache_clear()
