"""Review of a deal, decision by decision: how far each hand is from a valid close, and what each
draw, throw and close cost (the pure core of a fair-play review; ``docs/review.md`` states it all).

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

**The review.** ``review_deal`` replays a record (RULES §9) and judges every turn from the seat's
information set (its hand; the discard pile; the cards others took from the pile and still hold;
the rest is unseen) and omnisciently (the real stock; its top card known). Decisions, losses,
marks and accuracy are defined in ``docs/review.md``. Nothing here proves anything about a player:
a flag starts a human review.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import product
from typing import cast

from referee.game.cards import CARD_BY_INDEX, CARD_KINDS, JOKER_INDEX, RANKS_PER_SUIT, Card, deck_counts
from referee.game.closing import best_close
from referee.game.linking import best_linking, check_time_left
from referee.game.rules import DiscardTaken, Engine, JokerLimit, RuleSet
from referee.play.record import DrawSource, Record
from referee.play.replay import replay
from referee.play.shuffle import reshuffled

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


def _add(a: Counts, card: int, n: int = 1) -> Counts:
    out = list(a)
    out[card] += n
    return tuple(out)


def _cards(counts: Sequence[int]) -> tuple[Card, ...]:
    return tuple(CARD_BY_INDEX[i] for i, n in enumerate(counts) for _ in range(n))


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


def _cores_from(x: int, counts: dict[int, int], wrap: bool) -> tuple[tuple[Core, int], ...]:
    """Every core whose lowest card is ``x`` (already taken out of ``counts``), with the least size
    of a group holding it; the other cards come from ``counts``."""
    rank, suit = _RANK[x], _SUIT[x]
    same = tuple((i, counts.get(i, 0)) for i in range(rank - 1, JOKER_INDEX, RANKS_PER_SUIT) if counts.get(i, 0))
    above = tuple(i for i in range(x + 1, (suit + 1) * RANKS_PER_SUIT) if counts.get(i, 0))
    return _cores_of(x, same, above, wrap)


@lru_cache(maxsize=1 << 16)
def _cores_of(
    x: int, same: tuple[tuple[int, int], ...], above: tuple[int, ...], wrap: bool
) -> tuple[tuple[Core, int], ...]:
    """``_cores_from`` given the cards of ``x``'s rank held (with copies) and those of its suit above it."""
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


def _coverable(counts: dict[int, int], codes: Sequence[int], pos: int, cores: int) -> int:
    """The most of the cards left (``codes[pos:]``) that ``cores`` more cores can keep (a bound):
    a core lies within one rank, or within one suit holding each rank once, so a suit's first core
    keeps at most its distinct cards, its second those held twice, and so on."""
    by_rank = [0] * (RANKS_PER_SUIT + 1)
    layers: list[int] = []
    by_suit = [[0] * 9 for _ in range(_SUITS)]
    for c in codes[pos:]:
        n = counts[c]
        if n:
            by_rank[_RANK[c]] += n
            for layer in range(n):
                by_suit[_SUIT[c]][layer] += 1
    for suit in by_suit:
        layers += [n for n in suit if n]
    return sum(sorted(by_rank + layers, reverse=True)[:cores])


@lru_cache(maxsize=1 << 16)
def _core_sets(naturals: tuple[int, ...], left_out: int, wrap: bool) -> tuple[tuple[Core, ...], ...]:
    """Every set of at most three cores that keeps all of ``naturals`` (ascending) but exactly
    ``left_out`` of them and fits in 10 cards; each set once."""
    counts: dict[int, int] = {}
    for i in naturals:
        counts[i] = counts.get(i, 0) + 1
    codes = sorted(counts)
    found: list[tuple[Core, ...]] = []
    cores: list[Core] = []
    remaining = [len(naturals)]

    def walk(pos: int, out: int, need: int) -> None:
        while pos < len(codes) and not counts[codes[pos]]:
            pos += 1
        if pos == len(codes):
            if out == 0:
                found.append(tuple(cores))
            return
        keep = remaining[0] - out
        if keep < 0 or (len(cores) == MOST_GROUPS and keep):
            return
        if keep and (
            need + max(MIN_GROUP_SIZE, keep) > SHOWN or keep > _coverable(counts, codes, pos, MOST_GROUPS - len(cores))
        ):
            return
        x = codes[pos]
        for u in range(min(counts[x], out) + 1):
            counts[x] -= u
            remaining[0] -= u
            start(pos, x, out - u, need)
            counts[x] += u
            remaining[0] += u

    def start(pos: int, x: int, out: int, need: int) -> None:
        if not counts[x]:
            walk(pos + 1, out, need)
            return
        if len(cores) == MOST_GROUPS:
            return
        counts[x] -= 1
        remaining[0] -= 1
        for core, size in _cores_from(x, counts, wrap):
            if need + size > SHOWN:
                continue
            members = core[1][1:]
            for m in members:
                counts[m] -= 1
            remaining[0] -= len(members)
            cores.append(core)
            start(pos, x, out, need + size)
            cores.pop()
            for m in members:
                counts[m] += 1
            remaining[0] += len(members)
        counts[x] += 1
        remaining[0] += 1

    walk(0, left_out, 0)
    return tuple(found)


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
        self.free = [0] + [sum(unseen[r - 1 + RANKS_PER_SUIT * s] for s in range(_SUITS)) for r in range(1, 14)]
        self.support = frozenset(c for c in range(CARD_KINDS) if unseen[c])
        self.shorts: dict[Completion, int] = {}
        self.drawn: dict[int, list[tuple[Completion, int]]] = {}
        self.ways: dict[Core, list[tuple[Completion, int]]] = {}
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

    def drawn_of(self, n: int) -> list[tuple[Completion, int]]:
        """The groups of ``n`` cards that may be drawn whole, fewest jokers first."""
        found = self.drawn.get(n)
        if found is None:
            pairs = [(option, self.short(option)) for option in _drawn_groups(n, self.wrap)]
            found = sorted(((o, s) for o, s in pairs if s >= 0), key=lambda pair: pair[1])
            self.drawn[n] = found
        return found

    def room(self, groups: Sequence[Completion]) -> int:
        """The places of ``groups`` a joker may take, within the joker limit."""
        return sum(min(len(need) + many, joker_cap(self.limit, n)) for n, need, rank, many in groups)

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
        caps = [min(len(need) + many, joker_cap(limit, n)) for n, need, rank, many in groups]
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
        if limit is JokerLimit.UNLIMITED or not needed:
            return True  # a group's cap is all its places: the jokers needed always fit
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
        whole, 10 cards in all; None when there is none."""
        chosen = list(fixed)
        short = sum(self.short(o) for o in fixed)
        left = SHOWN - sum(o[0] for o in fixed)
        least = [0] * (len(lists) + 1)
        for k in range(len(lists) - 1, -1, -1):
            least[k] = least[k + 1] + (lists[k][0][0][0] if lists[k] else SHOWN + 1)
        supply = self.supply

        def cores(k: int, left: int, short: int) -> bool:
            if k == len(lists):
                return drawn(left, short, drawn_groups, MIN_GROUP_SIZE)
            for option, s in lists[k]:
                n = option[0]
                if n + least[k + 1] > left:
                    break
                if short + s > supply:
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
            sizes = [left] if free == 1 else [n for n in range(smallest, left + 1) if n == left or left - n >= n]
            for n in sizes:
                for option, s in self.drawn_of(n):
                    if short + s > supply:
                        break
                    chosen.append(option)
                    if drawn(left - n, short + s, free - 1, n):
                        return True
                    chosen.pop()
            return False

        if short > supply or least[0] > left:
            return None
        return chosen if cores(0, left, short) else None

    def value(self, cores: tuple[Core, ...], kept: int, floor: int) -> int:
        """The highest overlap of a completion of ``cores`` (``kept`` natural cards), or -1 when it
        is below ``floor``."""
        lists = self.lists(cores)
        if lists is None:
            return -1
        free = MOST_GROUPS - len(cores)
        top = kept + min(self.jokers, SHOWN - kept)
        if self.limit is JokerLimit.UNLIMITED and self.supply >= SHOWN - kept:
            # Jokers could fill every place: any completion whose sizes add up to 10 will do.
            if top < floor:
                return -1
            return top if self.sizes_fit(lists, free) else -1
        for target in range(top, max(floor, 0) - 1, -1):
            extra = target - kept

            def accept(groups: list[Completion], extra: int = extra) -> bool:
                return min(self.jokers, self.room(groups)) >= extra and self.exact(groups)

            if self.find(lists, (), free, accept) is not None:
                return target
            if self.limit is JokerLimit.UNLIMITED:
                break  # every completion keeps as many jokers
        return -1

    def lists(self, cores: tuple[Core, ...]) -> list[list[tuple[Completion, int]]] | None:
        """Each core's ways to be completed that can be filled on their own, smallest first."""
        out = []
        for core in cores:
            mine = self.ways.get(core)
            if mine is None:
                short = self.short
                mine = [(o, s) for by_size in _completions(core, self.wrap) for o in by_size if (s := short(o)) >= 0]
                self.ways[core] = mine
            if not mine:
                return None
            out.append(mine)
        return out

    def potential(self, cores: tuple[Core, ...]) -> frozenset[int]:
        """Every unseen card some completion of ``cores`` could draw (a bound: feasibility aside)."""
        if len(cores) < MOST_GROUPS:
            return self.support  # a group drawn whole may hold any card
        key = (cores, -1)
        found = self.outs.get(key)
        if found is None:
            cards: frozenset[int] = frozenset()
            for core in cores:
                for by_size in _core_drawable(core, self.wrap):
                    cards |= by_size
            found = self.outs[key] = cards & self.support
        return found

    def sizes_fit(self, lists: Sequence[Sequence[tuple[Completion, int]]], free: int) -> bool:
        """Whether one way of each core and up to ``free`` groups drawn whole can make 10 cards."""
        reach = {0}
        for mine in lists:
            reach = {a + o[0] for a in reach for o, _ in mine if a + o[0] <= SHOWN}
        return any(a == SHOWN or (free and SHOWN - a >= MIN_GROUP_SIZE) for a in reach)

    def collect_rich(
        self, cores: tuple[Core, ...], lists: Sequence[Sequence[tuple[Completion, int]]]
    ) -> frozenset[int]:
        """``collect`` when the jokers there are could fill every place (no joker limit): then every
        completion whose sizes add up to 10 can be filled, with any one place taking any card it
        may hold and jokers in the others, so the outs are what those completions' places hold."""
        key = (cores, -2)
        known = self.outs.get(key)
        if known is not None:
            return known
        support = self.support
        free = MOST_GROUPS - len(cores)
        sizes = [{o[0] for o, _ in mine} for mine in lists]

        def sums(skip: int) -> set[int]:
            reach = {0}
            for k, mine in enumerate(sizes):
                if k != skip:
                    reach = {a + n for a in reach for n in mine if a + n <= SHOWN}
            return reach

        def closes(total: int, groups: int) -> bool:
            """Whether ``groups`` groups drawn whole can bring ``total`` cards to 10."""
            rest = SHOWN - total
            return rest == 0 or (groups > 0 and rest >= MIN_GROUP_SIZE)

        # Rich enough, every way of every core can be filled (the jokers needed are never more than
        # the places), so what each core's ways of one size may draw is a table of the core alone.
        cards: frozenset[int] = frozenset()
        for k, core in enumerate(cores):
            others = sums(k)
            drawable = _core_drawable(core, self.wrap)
            for n in sizes[k]:
                if any(closes(n + a, free) for a in others):
                    cards |= drawable[n]
        if free:
            total = sums(-1)
            if any(closes(n + a, free - 1) for n in range(MIN_GROUP_SIZE, SHOWN + 1) for a in total if a + n <= SHOWN):
                cards = ALL_KINDS  # a same-rank group drawn whole may hold any card, or a joker
        found = cards & support
        self.outs[key] = found
        return found

    def collected(self, cores: tuple[Core, ...], kept: int, target: int) -> frozenset[int]:
        """The cards some completion of ``cores`` of overlap ``target`` draws (remembered)."""
        key = (cores, target)
        found = self.outs.get(key)
        if found is None:
            outs: set[int] = set()
            self.collect(cores, kept, target, outs)
            found = self.outs[key] = frozenset(outs)
        return found

    def collect(self, cores: tuple[Core, ...], kept: int, target: int, outs: set[int]) -> None:
        """Add to ``outs`` the cards some completion of ``cores`` of overlap ``target`` draws."""
        lists = self.lists(cores)
        if lists is None:
            return
        support = self.support
        extra = target - kept
        jokers = self.jokers
        if SHOWN - kept <= jokers:
            return  # the hand's jokers fill every place: nothing is drawn

        def base(groups: list[Completion]) -> bool:
            return min(jokers, self.room(groups)) >= extra and self.exact(groups)

        free = MOST_GROUPS - len(cores)
        if self.limit is JokerLimit.UNLIMITED and self.supply >= SHOWN - kept:
            outs |= self.collect_rich(cores, lists)
            return
        # A lower bound on the jokers the best completion through each option needs: its own, plus
        # the fewest the other groups need on their own at sizes that make 10 cards in all.
        least = [_least_by_size(mine) for mine in lists]
        drawn_least: dict[int, int] = {}
        if free:
            drawn_least = {n: pairs[0][1] for n in range(MIN_GROUP_SIZE, SHOWN + 1) if (pairs := self.drawn_of(n))}
        whole = [_combine_drawn(drawn_least, groups) for groups in range(free + 1)]
        supply = self.supply
        slots: list[tuple[int, Completion]] = []
        for k, mine in enumerate(lists):
            others = _min_plus([least[j] for j in range(len(lists)) if j != k])
            bounds = {n: _best_total(others, whole[free], SHOWN - n) for n in least[k]}
            slots += [(k, option) for option, short in mine if short + bounds[option[0]] <= supply]
        if free:
            all_cores = _min_plus(least)
            for n in range(MIN_GROUP_SIZE, SHOWN + 1):
                pairs = self.drawn_of(n)
                bound = _best_total(all_cores, whole[free - 1], SHOWN - n)
                slots += [(-1, o) for o, short in pairs if short + bound <= supply]
        for k, option in slots:
            if outs >= support:
                return
            wanted = (_drawable(option) & support) - outs
            if not wanted:
                continue
            if k >= 0:
                mine_lists = [mine if j != k else [(option, self.short(option))] for j, mine in enumerate(lists)]
                fixed: tuple[Completion, ...] = ()
                drawn_groups, at = free, k
            else:
                mine_lists, fixed, drawn_groups, at = lists, (option,), free - 1, 0
            found = self.find(mine_lists, fixed, drawn_groups, base)
            if found is None:
                continue
            found = list(found)
            at = found.index(option) if k < 0 else at
            for c in sorted(wanted):
                if c == _JK:
                    if self.room(found) > jokers or self.find(
                        mine_lists, fixed, drawn_groups, lambda g: self.room(g) > jokers and base(g)
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


_NEVER = 1 << 20


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
        for a, x in out.items():
            for n, y in table.items():
                if a + n <= SHOWN and x + y < out_next.get(a + n, _NEVER):
                    out_next[a + n] = x + y
        out = out_next
    return out


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
def _core_drawable(core: Core, wrap: bool) -> tuple[frozenset[int], ...]:
    """What the ways to complete ``core`` may draw, by group size (index: size)."""
    return tuple(frozenset().union(*(_drawable(o) for o in options)) for options in _completions(core, wrap))


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
    best = -1
    for suit in range(_SUITS):
        cards = range(suit * RANKS_PER_SUIT, (suit + 1) * RANKS_PER_SUIT)
        held = sum(hand[c] for c in cards) + hand[_JK]
        if held + sum(unseen[c] for c in cards) + unseen[_JK] < SHOWN:
            continue
        value = min(SHOWN, held)
        best = max(best, value)
        if value < SHOWN:
            outs = outs_by_value.setdefault(value, set())
            outs.update(c for c in cards if unseen[c])
            if unseen[_JK]:
                outs.add(_JK)
    return best


def overlap(hand: Counts, unseen: Counts, shape: _Shape, want_outs: bool) -> tuple[int, frozenset[int]]:
    """The highest overlap of a valid close taken from ``hand + unseen`` with ``hand``, and (when
    asked) the card kinds some target of that overlap draws from ``unseen``."""
    color_outs: dict[int, set[int]] = {}
    best = _color_value(hand, unseen, color_outs)
    naturals = tuple(i for i in range(JOKER_INDEX) for _ in range(hand[i]))
    jokers = hand[_JK]
    filler = _Filler(unseen, shape, jokers)
    found: list[tuple[tuple[Core, ...], int, int]] = []  # core sets worth collecting outs from
    for left_out in range(len(naturals) + 1):
        bound = min(SHOWN, len(naturals) - left_out + jokers)
        if bound < best or (bound == best and (not want_outs or best == SHOWN)):
            break
        kept = len(naturals) - left_out
        for cores in _core_sets(naturals, left_out, shape.wrap):
            floor = best if want_outs else best + 1
            value = filler.value(cores, kept, floor)
            if value < 0 or value < best:
                continue
            if value > best:
                best = value
                found = []
            if want_outs:
                found.append((cores, kept, value))
            elif best == bound:
                break
    outs: set[int] = set()
    if want_outs and 0 <= best < SHOWN:
        outs |= color_outs.get(best, set())
        for cores, kept, value in found:
            if value == best and not filler.potential(cores) <= outs:
                filler.collect(cores, kept, value, outs)
    return best, frozenset(outs)


def throw_overlaps(held: Counts, unseen: Counts, shape: _Shape) -> dict[int, tuple[int, frozenset[int]]]:
    """For each kind ``t`` of natural card among the 11 cards ``held``: ``overlap(held - t, unseen,
    shape, True)``, from one walk over the 11 cards (a core set of ``held - t`` is a core set of
    ``held`` that leaves ``t`` out, so each is judged once for every throw it serves)."""
    naturals = tuple(i for i in range(JOKER_INDEX) for _ in range(held[i]))
    jokers = held[_JK]
    kinds = sorted(set(naturals))
    best: dict[int, int] = {}
    colors: dict[int, dict[int, set[int]]] = {}
    for t in kinds:
        colors[t] = {}
        best[t] = _color_value(_add(held, t, -1), unseen, colors[t])
    filler = _Filler(unseen, shape, jokers)
    found: list[tuple[tuple[Core, ...], int, int, list[int]]] = []
    total = len(naturals)
    for left_out in range(1, total + 1):
        bound = min(SHOWN, total - left_out + jokers)
        open_kinds = {t for t in kinds if bound > best[t] or (bound == best[t] and best[t] < SHOWN)}
        if not open_kinds:
            break
        kept = total - left_out
        for cores in _core_sets(naturals, left_out, shape.wrap):
            left = list(naturals)
            for _, cards in cores:
                for c in cards:
                    left.remove(c)
            serves = [t for t in set(left) if t in open_kinds]
            if not serves:
                continue
            value = filler.value(cores, kept, min(best[t] for t in serves))
            if value < 0:
                continue
            for t in serves:
                best[t] = max(best[t], value)
            found.append((cores, kept, value, serves))
    # Each throw's outs, from the core sets that serve it (each collected once, for every throw it
    # serves); a core set that could draw nothing new is skipped.
    out: dict[int, tuple[int, frozenset[int]]] = {}
    for t in kinds:
        outs: set[int] = set()
        if 0 <= best[t] < SHOWN:
            outs |= colors[t].get(best[t], set())
            for cores, kept, value, serves in found:
                if value == best[t] and t in serves and not filler.potential(cores) <= outs:
                    outs |= filler.collected(cores, kept, value)
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


def _search_rules(rules: RuleSet) -> RuleSet:
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


def _progress(hand: Counts, unseen: Counts, rules: RuleSet, best: int, outs: frozenset[int]) -> Progress:
    """The progress of ``hand`` whose highest overlap is ``best``, drawing ``outs``."""
    distance = UNREACHABLE if best < 0 else SHOWN - best
    if distance in (0, UNREACHABLE):
        outs = frozenset()
    improving = sum(unseen[c] for c in outs)
    total = sum(unseen)
    points = best_linking(_cards(hand), _search_rules(rules)).points
    return Progress(
        distance=distance,
        improving=improving,
        points=points,
        unseen=total,
        outs=tuple(CARD_BY_INDEX[c] for c in sorted(outs)),
        value=hand_value(distance, improving, points, total, rules),
    )


def measure_throws(held: Counts, unseen: Counts, rules: RuleSet) -> dict[Card, Progress]:
    """The progress of the 10 cards left by each kind of card the 11 cards ``held`` may throw."""
    shared = throw_overlaps(held, unseen, _shape(rules))
    out: dict[Card, Progress] = {}
    for t in range(CARD_KINDS):
        if held[t]:
            left = _add(held, t, -1)
            if t == _JK:
                out[CARD_BY_INDEX[t]] = _measure(left, unseen, rules)
            else:
                best, outs = shared[t]
                out[CARD_BY_INDEX[t]] = _progress(left, unseen, rules, best, outs)
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
    """Empty the caches of measures and of core sets (a benchmark times each deal cold)."""
    _measure.cache_clear()
    _core_sets.cache_clear()


# --- reviewing a deal -----------------------------------------------------------------------------


class DecisionKind(enum.Enum):
    """The decisions of a turn (RULES §9.2)."""

    DRAW = "DRAW"  # the stock or the face-up card
    CLOSE = "CLOSE"  # close or play on, judged only when the 11 cards held a valid close
    THROW = "THROW"  # which card to throw face up


class Mark(enum.Enum):
    """What a decision is flagged with (``docs/review.md``)."""

    INACCURACY = "INACCURACY"  # loss of at least INACCURACY_LOSS
    MISTAKE = "MISTAKE"  # at least MISTAKE_LOSS
    BLUNDER = "BLUNDER"  # at least BLUNDER_LOSS
    PASSED_CLOSE = "PASSED_CLOSE"  # the 11 cards held a valid close and the seat threw instead
    FED = "FED"  # the card thrown was taken by the next seat and brought it nearer, or into its close


# Losses, in steps of distance, from which a decision is marked (the highest mark that applies).
INACCURACY_LOSS = 0.10
MISTAKE_LOSS = 0.25
BLUNDER_LOSS = 0.60
# The value of closing: one step beyond a hand that could close (distance 0), whatever it holds.
CLOSE_VALUE = 1.0
STOCK, DISCARD, CLOSE, PLAY_ON = "STOCK", "DISCARD", "CLOSE", "PLAY_ON"


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of a decision: its name (``STOCK``, ``DISCARD``, ``CLOSE``, ``PLAY_ON`` or the code
    of the card thrown), its value, and for a throw the progress of the 10 cards it leaves."""

    choice: str
    value: float
    progress: Progress | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision judged from one viewpoint: every option, the best ones, and the loss of the one chosen."""

    options: tuple[Choice, ...]
    best: tuple[str, ...]
    loss: float

    @property
    def forced(self) -> bool:
        """True when every option is worth the same: there was nothing to choose."""
        return len(self.best) == len(self.options)


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision of a turn: what was chosen, judged from the seat's information set and omnisciently."""

    kind: DecisionKind
    choice: str
    judged: Verdict  # from what the seat knew
    omniscient: Verdict  # with the real stock known (its top, and its cards as the unseen)
    marks: tuple[Mark, ...]

    @property
    def loss(self) -> float:
        """The loss from the seat's information set, in steps of distance."""
        return self.judged.loss

    @property
    def omniscient_differs(self) -> bool:
        """Whether knowing the stock changes which options are best."""
        return set(self.judged.best) != set(self.omniscient.best)

    @property
    def agrees_with_omniscient(self) -> bool | None:
        """Where the omniscient best differs from the information-set best: whether the choice is
        among the omniscient best (None where they do not differ)."""
        return self.choice in self.omniscient.best if self.omniscient_differs else None


@dataclass(frozen=True, slots=True)
class TurnReview:
    """One turn reviewed: who played, the hand's progress before the draw, and each decision."""

    number: int  # 1-based, as in the record
    seat: int
    before: Progress  # the 10 cards before the draw, against the seat's unseen cards
    drawn: Card
    thrown: Card  # thrown face up, or laid face down to close
    closed: bool
    decisions: tuple[Decision, ...]


@dataclass(frozen=True, slots=True)
class SeatReview:
    """One seat's decisions over the deal, summed up."""

    seat: int
    name: str
    decisions: int  # judged decisions that were a choice (not forced)
    accuracy: float | None  # docs/review.md; None with no decision to judge
    average_loss: float
    inaccuracies: int
    mistakes: int
    blunders: int
    passed_closes: int
    fed: int
    omniscient_differs: int  # decisions where knowing the stock changes the best options
    omniscient_agrees: int  # ... and the seat's choice is among the omniscient best


@dataclass(frozen=True, slots=True)
class DealReview:
    """A record reviewed: every legal turn, and each seat's summary."""

    turns: tuple[TurnReview, ...]
    seats: tuple[SeatReview, ...]
    legal: bool  # False: only the turns before the first violation are reviewed


def win_drop(loss: float) -> float:
    """The loss as a drop of winning chances in percent (0-100), the scale Lichess's accuracy reads:
    ``100 × (1 - e^-loss)``."""
    return 100.0 * (1.0 - math.exp(-max(0.0, loss)))


def move_accuracy(loss: float) -> float:
    """The accuracy of one decision, Lichess's transform of a drop of winning chances (with its +1)."""
    raw = 103.1668100711649 * math.exp(-0.04354415386753951 * win_drop(loss)) - 3.166924740191411
    return min(100.0, max(0.0, raw + 1.0))


def accuracy(losses: Sequence[float]) -> float | None:
    """A seat's accuracy over its decisions: the mean of the arithmetic and the harmonic mean of the
    decisions' accuracies (each at least 1 in the harmonic mean), as Lichess's game accuracy without
    its volatility weights; None with no decision."""
    if not losses:
        return None
    each = [move_accuracy(loss) for loss in losses]
    mean = sum(each) / len(each)
    harmonic = len(each) / sum(1.0 / max(1.0, a) for a in each)
    return (mean + harmonic) / 2


def marks_for(loss: float) -> tuple[Mark, ...]:
    """The mark a loss earns, if any: the highest threshold it reaches."""
    if loss >= BLUNDER_LOSS:
        return (Mark.BLUNDER,)
    if loss >= MISTAKE_LOSS:
        return (Mark.MISTAKE,)
    if loss >= INACCURACY_LOSS:
        return (Mark.INACCURACY,)
    return ()


def _verdict(
    options: Sequence[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]], chosen: str
) -> Verdict:
    """The verdict over ``options`` (name, exact rank, value, progress): the best are those of the
    highest rank; the loss is the value of the best less the value chosen."""
    top = max(rank for _, rank, _, _ in options)
    best = tuple(name for name, rank, _, _ in options if rank == top)
    best_value = max(value for _, rank, value, _ in options if rank == top)
    mine = next(value for name, _, value, _ in options if name == chosen)
    loss = 0.0 if chosen in best else max(0.0, best_value - mine)
    return Verdict(tuple(Choice(name, value, progress) for name, _, value, progress in options), best, loss)


def _minus(a: Counts, b: Sequence[int]) -> Counts:
    return tuple(x - y for x, y in zip(a, b))


def _plus(a: Counts, b: Sequence[int]) -> Counts:
    return tuple(x + y for x, y in zip(a, b))


class _Judge:
    """Values of the options of one seat's turn, from one viewpoint (a multiset of unseen cards)."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules

    def after_draw(self, hand: Counts, card: int, unseen: Counts, keep: int | None) -> int:
        """The distance after drawing ``card`` and throwing the best card (never ``keep``, a card
        taken from the pile under ``discard_taken`` FORBIDDEN)."""
        held = _add(hand, card)
        if keep is None:
            return distance_of(held, unseen, self.rules)
        return min(
            distance_of(_add(held, t, -1), unseen, self.rules) for t in range(CARD_KINDS) if held[t] and t != keep
        )

    def throws(
        self, held: Counts, unseen: Counts, keep: int | None
    ) -> list[tuple[str, tuple[int, int, int], float, Progress]]:
        """Each card kind that may be thrown from the 11 cards ``held``, with the progress it leaves."""
        out = []
        for card, progress in measure_throws(held, unseen, self.rules).items():
            if card.index != keep:
                out.append((card.code(), progress.key, progress.value, progress))
        return out


@dataclass(slots=True)
class _Turn:
    """A turn being reviewed (filled in two passes: FED needs the next turn)."""

    number: int
    seat: int
    before: Progress
    drawn: Card
    thrown: Card
    closed: bool
    decisions: list[tuple[DecisionKind, str, Verdict, Verdict, list[Mark]]]
    # For the next seat's FED: its distance before the draw and after taking the face-up card.
    took_pile: bool
    distance_before: int
    distance_with_pile: int
    shown: Counts | None


def review_deal(record: Record) -> DealReview:
    """Review every legal turn of ``record``: each draw, close and throw judged from the seat's
    information set and omnisciently, each seat summed up (``docs/review.md``)."""
    result = replay(record)
    rules = _search_rules(record.rules)
    judge = _Judge(rules)
    seats = len(record.seats)
    order = record.deck_order()
    first = (record.dealer + 1) % seats
    hands = [[0] * CARD_KINDS for _ in range(seats)]
    for offset in range(seats):
        for dealt in order[offset : SHOWN * seats : seats]:
            hands[(first + offset) % seats][dealt.index] += 1
    pile = [order[SHOWN * seats].index]
    stock = [card.index for card in reversed(order[SHOWN * seats + 1 :])]  # the top last
    known = [[0] * CARD_KINDS for _ in range(seats)]  # cards each seat took from the pile and still holds
    deck_all = tuple(deck_counts(rules.decks).get(card, 0) for card in CARD_BY_INDEX)
    forbidden = rules.discard_taken is DiscardTaken.FORBIDDEN
    reshuffles = 0
    turns: list[_Turn] = []
    seat = first
    for number, turn in enumerate(record.turns[: result.turns_played], 1):
        check_time_left()  # a call's budget bounds a long deal's review, turn by turn
        hand = tuple(hands[seat])
        top = pile[-1]
        pile_counts = [0] * CARD_KINDS
        for c in pile:
            pile_counts[c] += 1
        others = [0] * CARD_KINDS
        for o in range(seats):
            if o != seat:
                others = [a + b for a, b in zip(others, known[o])]
        unseen = _minus(_minus(deck_all, hand), _plus(tuple(pile_counts), others))
        # The stock as it will be drawn from: a draw from the empty stock reshuffles the pile less its top.
        under: list[int] = []
        real_stock = stock
        if not stock:
            under = pile[:-1]
            new: Sequence[Card] = ()
            if record.shuffle is not None:
                new = reshuffled(record.shuffle, reshuffles + 1, [CARD_BY_INDEX[c] for c in under])
            elif turn.restock is not None:
                new = turn.restock
            # An explicit deck's record gives the new order only when the seat draws from it.
            real_stock = [card.index for card in reversed(new)]
        # The draw, from the information set.
        before = _measure(hand, unseen, rules)
        if stock or not under:
            pool, draws = unseen, unseen
            progress = before
        else:  # the stock is the pile less its top, whose cards the seat saw
            pool = _plus(unseen, _counts_of_indices(under))
            draws = _counts_of_indices(under)
            progress = _measure(hand, pool, rules)
        keep = top if forbidden else None
        chosen = STOCK if turn.draw is DrawSource.STOCK else DISCARD
        stock_now = _counts_of_indices(real_stock)
        # The draw made, and the throws it allows, from both viewpoints.
        if turn.draw is DrawSource.STOCK:
            card = real_stock[-1]
            after_unseen = _add(pool, card, -1)
            stock_after = _add(stock_now, card, -1)
        else:
            card = top
            after_unseen = unseen
            stock_after = stock_now
        held = _add(hand, card)
        taken = card if (forbidden and turn.draw is DrawSource.DISCARD) else None
        info_throws = judge.throws(held, after_unseen, taken)
        omni_throws = judge.throws(held, stock_after, taken)
        nearest = min(p.distance for *_, p in info_throws)
        nearest_omni = min(p.distance for *_, p in omni_throws)
        # The draw, from the information set: the face-up card is known, the stock is any unseen card.
        with_pile = nearest if chosen == DISCARD else judge.after_draw(hand, top, unseen, keep)
        options: list[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]] = [
            (DISCARD, Fraction(-with_pile), float(-with_pile), None)
        ]
        total = sum(draws)
        if total:
            hits = sum(draws[c.index] for c in progress.outs)
            stock_value = -(progress.distance - Fraction(hits, total))
            options.append((STOCK, stock_value, float(stock_value), None))
        draw_verdict = _verdict(options, chosen)
        # The draw, omnisciently: the stock's cards are the unseen, its top is known.
        omni: list[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]] = []
        d_pile = nearest_omni if chosen == DISCARD else judge.after_draw(hand, top, stock_now, keep)
        omni.append((DISCARD, Fraction(-d_pile), float(-d_pile), None))
        if real_stock:
            s = real_stock[-1]
            d_stock = nearest_omni if chosen == STOCK else judge.after_draw(hand, s, _add(stock_now, s, -1), None)
            omni.append((STOCK, Fraction(-d_stock), float(-d_stock), None))
        draw_omniscient = _verdict(omni, chosen) if chosen in {name for name, *_ in omni} else draw_verdict
        decisions: list[tuple[DecisionKind, str, Verdict, Verdict, list[Mark]]] = [
            (DecisionKind.DRAW, chosen, draw_verdict, draw_omniscient, list(marks_for(draw_verdict.loss)))
        ]
        # Apply the draw.
        if turn.draw is DrawSource.STOCK:
            if not stock:
                reshuffles += 1
                del pile[:-1]
                stock[:] = real_stock
            stock.pop()
        else:
            pile.pop()
            known[seat][card] += 1  # every seat saw it taken
        thrown = turn.discard.index
        closable = turn.close
        if not closable and nearest == 0:
            closable = best_close(_cards(held), rules).valid
        if closable:
            chosen_close = CLOSE if turn.close else PLAY_ON
            best_throw = max(info_throws, key=lambda o: o[1])
            best_omni = max(omni_throws, key=lambda o: o[1])
            close_verdict = _verdict(
                [(CLOSE, (1, 0, 0), CLOSE_VALUE, None), (PLAY_ON, (0, 0, 0), best_throw[2], None)], chosen_close
            )
            close_omni = _verdict(
                [(CLOSE, (1, 0, 0), CLOSE_VALUE, None), (PLAY_ON, (0, 0, 0), best_omni[2], None)], chosen_close
            )
            marks = list(marks_for(close_verdict.loss))
            if not turn.close:
                marks.append(Mark.PASSED_CLOSE)
            decisions.append((DecisionKind.CLOSE, chosen_close, close_verdict, close_omni, marks))
        if not turn.close:
            name = CARD_BY_INDEX[thrown].code()
            throw_verdict = _verdict(info_throws, name)
            throw_omni = _verdict(omni_throws, name)
            decisions.append((DecisionKind.THROW, name, throw_verdict, throw_omni, list(marks_for(throw_verdict.loss))))
        # Apply the throw.
        hands[seat][card] += 1
        hands[seat][thrown] -= 1
        if known[seat][thrown]:
            known[seat][thrown] -= 1
        shown = None
        if turn.close:
            shown = _add(held, thrown, -1)
        else:
            pile.append(thrown)
        turns.append(
            _Turn(
                number=number,
                seat=seat,
                before=before,
                drawn=CARD_BY_INDEX[card],
                thrown=turn.discard,
                closed=turn.close,
                decisions=decisions,
                took_pile=turn.draw is DrawSource.DISCARD,
                distance_before=before.distance,
                distance_with_pile=with_pile,
                shown=shown,
            )
        )
        if turn.close:
            break
        seat = (seat + 1) % seats
    _mark_fed(turns)
    return _assemble(record, turns, result.legal)


def _counts_of_indices(indices: Iterable[int]) -> Counts:
    held = [0] * CARD_KINDS
    for i in indices:
        held[i] += 1
    return tuple(held)


def _mark_fed(turns: list[_Turn]) -> None:
    """Mark FED the throws the next seat took from the pile and that brought it nearer (by its own
    information set) or into its close."""
    for mine, theirs in zip(turns, turns[1:]):
        if not theirs.took_pile or mine.closed:
            continue
        card = mine.thrown.index
        nearer = theirs.distance_with_pile < theirs.distance_before
        in_close = theirs.shown is not None and theirs.shown[card] > 0
        if nearer or in_close:
            for kind, _, _, _, marks in mine.decisions:
                if kind is DecisionKind.THROW:
                    marks.append(Mark.FED)


def _assemble(record: Record, turns: list[_Turn], legal: bool) -> DealReview:
    reviewed = tuple(
        TurnReview(
            number=t.number,
            seat=t.seat,
            before=t.before,
            drawn=t.drawn,
            thrown=t.thrown,
            closed=t.closed,
            decisions=tuple(
                Decision(kind, choice, judged, omniscient, tuple(marks))
                for kind, choice, judged, omniscient, marks in t.decisions
            ),
        )
        for t in turns
    )
    summaries = []
    for seat, info in enumerate(record.seats):
        decisions = [d for t in reviewed if t.seat == seat for d in t.decisions]
        judged = [d for d in decisions if not d.judged.forced]
        losses = [d.loss for d in judged]
        marks = [m for d in decisions for m in d.marks]
        differs = [d for d in judged if d.omniscient_differs]
        summaries.append(
            SeatReview(
                seat=seat,
                name=info.name,
                decisions=len(judged),
                accuracy=accuracy(losses),
                average_loss=sum(losses) / len(losses) if losses else 0.0,
                inaccuracies=marks.count(Mark.INACCURACY),
                mistakes=marks.count(Mark.MISTAKE),
                blunders=marks.count(Mark.BLUNDER),
                passed_closes=marks.count(Mark.PASSED_CLOSE),
                fed=marks.count(Mark.FED),
                omniscient_differs=len(differs),
                omniscient_agrees=sum(1 for d in differs if d.agrees_with_omniscient),
            )
        )
    return DealReview(reviewed, tuple(summaries), legal)
