"""An independent, brute-force oracle for the best linking of a hand (RULES §1-§3).

It imports nothing from ``referee``: it has its own cards, its own parser of card codes, its own
points, and its own group predicate written straight from RULES §2. It is deliberately slow and
simple, so that the referee's engines can be checked against it.

Cards are ``(rank, suit)`` tuples (rank 1 = ace … 13 = king, suit one of ``"CDHS"``) or the string
``"JK"``. A card's index is ``suit_order * 13 + rank - 1`` with the suits in the order C, D, H, S,
and 52 for a joker; a group's key is the sorted tuple of its cards' indices.

The best linking is found by enumerating every way to link the hand: the lowest remaining card is
either left unlinked or put in a group with some sub-multiset of the other remaining cards, and so
on, memoised on the remaining multiset. For every remaining multiset the oracle keeps the fewest
unlinked points and *every* linking reaching them (a best linking of the whole hand is a best
linking of whatever its first groups leave, because unlinked points add up), and the canonical
answer is picked at the very end: among all best linkings, those with the fewest groups, and among
those the one whose sorted tuple of group keys is lexicographically smallest (Python's tuple order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

SUITS = "CDHS"
JOKER = "JK"
JOKER_INDEX = 52
LIMITS = ("UNLIMITED", "NO_MORE_THAN_NATURALS", "ONE_PER_GROUP")

Card = tuple[int, str] | str
Key = tuple[int, ...]

_RANK_OF_CODE = {"A": 1, "J": 11, "Q": 12, "K": 13, "T": 10, **{str(r): r for r in range(2, 11)}}
_CODE_OF_RANK = {1: "A", 11: "J", 12: "Q", 13: "K", **{r: str(r) for r in range(2, 11)}}


# --- cards -------------------------------------------------------------------------------------


def parse(code: str) -> Card:
    """One card from its code: ``AH``, ``10s``, ``TD``, ``JK`` (case-insensitive)."""
    text = code.strip().upper()
    if text == JOKER:
        return JOKER
    rank, suit = _RANK_OF_CODE.get(text[:-1]), text[-1:]
    if rank is None or suit not in SUITS or not suit:
        raise ValueError(f"not a card code: {code!r}")
    return (rank, suit)


def parse_hand(codes: str | Iterable[str]) -> list[Card]:
    """Cards from codes, given as one space-separated string or as an iterable of codes."""
    if isinstance(codes, str):
        codes = codes.split()
    return [parse(code) for code in codes]


def code(card: Card) -> str:
    """The canonical code of a card: ``AH``, ``10S``, ``JK``."""
    if card == JOKER:
        return JOKER
    rank, suit = card
    return _CODE_OF_RANK[rank] + suit


def index(card: Card) -> int:
    """Clubs A..K = 0..12, diamonds 13..25, hearts 26..38, spades 39..51, joker 52."""
    if card == JOKER:
        return JOKER_INDEX
    rank, suit = card
    return SUITS.index(suit) * 13 + rank - 1


def card_of(idx: int) -> Card:
    """The card with this index."""
    if idx == JOKER_INDEX:
        return JOKER
    return (idx % 13 + 1, SUITS[idx // 13])


def points(card: Card, joker_points: int = 20) -> int:
    """Points of a card left unlinked: ace 1, 2-10 face value, J Q K 10, a joker ``joker_points``."""
    if card == JOKER:
        return joker_points
    rank = card[0]
    return 10 if rank >= 10 else rank


def key(cards: Iterable[Card]) -> Key:
    """A group's key: the sorted tuple of its cards' indices."""
    return tuple(sorted(index(c) for c in cards))


# --- groups (RULES §2) -------------------------------------------------------------------------


def _run_windows(size: int, wrap_runs: bool) -> list[frozenset[int]]:
    """The rank sets of every run of ``size`` cards on the scale A 2 … K A.

    Without wrapping a run is a window of consecutive positions 1..14 (position 14 is the ace
    again, above the king) that does not hold the ace twice. With wrapping it is any window of
    ``size`` consecutive ranks read round the circle A 2 … K A 2 …, at most 13 of them.
    """
    windows = []
    if size > 13:
        return windows
    if wrap_runs:
        for start in range(1, 14):
            windows.append(frozenset((start - 1 + k) % 13 + 1 for k in range(size)))
    else:
        for start in range(1, 15 - size + 1):
            positions = range(start, start + size)
            if 1 in positions and 14 in positions:
                continue  # the ace low and high in one run
            windows.append(frozenset(1 if p == 14 else p for p in positions))
    return windows


def joker_limit_allows(joker_limit: str, naturals: int, jokers: int) -> bool:
    """Whether a group of ``naturals`` natural cards may hold ``jokers`` jokers."""
    if joker_limit == "UNLIMITED":
        return True
    if joker_limit == "NO_MORE_THAN_NATURALS":
        return jokers <= naturals
    if joker_limit == "ONE_PER_GROUP":
        return jokers <= 1
    raise ValueError(f"unknown joker limit {joker_limit!r}")


def is_group(cards: Sequence[Card], joker_limit: str = "UNLIMITED", wrap_runs: bool = False) -> bool:
    """Whether these cards make one group under the rules (RULES §2)."""
    cards = list(cards)
    if len(cards) < 3:
        return False
    naturals = [c for c in cards if c != JOKER]
    jokers = len(cards) - len(naturals)
    if not joker_limit_allows(joker_limit, len(naturals), jokers):
        return False
    if not naturals:
        return True  # jokers only: the limit above decides
    # Same rank: any suits, duplicates allowed, jokers stand for that rank.
    if len({rank for rank, _ in naturals}) == 1:
        return True
    # Run: one suit, no rank twice, every natural on one window, jokers filling the rest.
    if len({suit for _, suit in naturals}) != 1:
        return False
    ranks = [rank for rank, _ in naturals]
    if len(set(ranks)) != len(ranks):
        return False
    return any(set(ranks) <= window for window in _run_windows(len(cards), wrap_runs))


@cache
def _is_group_key(group: Key, joker_limit: str, wrap_runs: bool) -> bool:
    return is_group([card_of(i) for i in group], joker_limit, wrap_runs)


# --- the best linking (RULES §3) ---------------------------------------------------------------


@dataclass(frozen=True)
class OracleLinking:
    """A linking: groups (keys, in ascending order), the unlinked card indices, their points."""

    groups: tuple[Key, ...]
    unlinked: Key
    points: int

    def group_codes(self) -> list[list[str]]:
        """The groups as lists of codes, cards in index order."""
        return [[code(card_of(i)) for i in g] for g in self.groups]

    def unlinked_codes(self) -> list[str]:
        """The unlinked cards' codes, in index order."""
        return [code(card_of(i)) for i in self.unlinked]


def _could_grow(naturals: list[int]) -> bool:
    """Whether a set holding these natural indices could still become a group by adding cards.

    Only the monotone necessary condition of §2: all one rank, or all one suit with no rank
    twice. Anything failing it fails for every superset, so the search may prune it.
    """
    if len({i % 13 for i in naturals}) == 1:
        return True
    return len({i // 13 for i in naturals}) == 1 and len(set(naturals)) == len(naturals)


def _groups_with_lowest(remaining: Key, joker_limit: str, wrap_runs: bool) -> list[Key]:
    """Every distinct group made of ``remaining[0]`` plus a sub-multiset of ``remaining[1:]``."""
    counts = sorted(Counter(remaining[1:]).items())
    first = remaining[0]
    found: list[Key] = []

    def extend(pos: int, chosen: list[int]) -> None:
        if pos == len(counts):
            group = tuple(sorted(chosen))
            if len(group) >= 3 and _is_group_key(group, joker_limit, wrap_runs):
                found.append(group)
            return
        idx, held = counts[pos]
        for take in range(held + 1):
            more = chosen + [idx] * take
            natural = [i for i in more if i != JOKER_INDEX]
            if take and natural and not _could_grow(natural):
                break
            extend(pos + 1, more)

    extend(0, [first])
    return found


def _merge(group: Key, groups: tuple[Key, ...]) -> tuple[Key, ...]:
    return tuple(sorted(groups + (group,)))


def all_best(
    cards: Iterable[Card], joker_limit: str = "UNLIMITED", wrap_runs: bool = False, joker_points: int = 20
) -> tuple[int, frozenset[tuple[Key, ...]]]:
    """The fewest unlinked points and every linking (sorted tuple of group keys) reaching them."""
    hand = tuple(sorted(index(c) for c in cards))
    return _solve(hand, joker_limit, wrap_runs, joker_points)


@lru_cache(maxsize=200_000)
def _solve(
    remaining: Key, joker_limit: str, wrap_runs: bool, joker_points: int
) -> tuple[int, frozenset[tuple[Key, ...]]]:
    if not remaining:
        return 0, frozenset({()})
    lowest = remaining[0]
    # The lowest card left unlinked.
    rest_points, rest_linkings = _solve(remaining[1:], joker_limit, wrap_runs, joker_points)
    best = points(card_of(lowest), joker_points) + rest_points
    linkings: set[tuple[Key, ...]] = set(rest_linkings)
    # The lowest card in a group with some of the others.
    for group in _groups_with_lowest(remaining, joker_limit, wrap_runs):
        left = list(remaining)
        for i in group:
            left.remove(i)
        sub_points, sub_linkings = _solve(tuple(left), joker_limit, wrap_runs, joker_points)
        if sub_points > best:
            continue
        if sub_points < best:
            best, linkings = sub_points, set()
        linkings.update(_merge(group, linking) for linking in sub_linkings)
    return best, frozenset(linkings)


def best_linking(
    cards: Iterable[Card], joker_limit: str = "UNLIMITED", wrap_runs: bool = False, joker_points: int = 20
) -> OracleLinking:
    """The canonical best linking: fewest unlinked points, then fewest groups, then the smallest
    tuple of group keys."""
    cards = list(cards)
    if joker_limit not in LIMITS:
        raise ValueError(f"unknown joker limit {joker_limit!r}")
    best, linkings = all_best(cards, joker_limit, wrap_runs, joker_points)
    groups = min(linkings, key=lambda linking: (len(linking), linking))
    left = Counter(index(c) for c in cards)
    for group in groups:
        left.subtract(group)
    unlinked = tuple(sorted(left.elements()))
    assert sum(points(card_of(i), joker_points) for i in unlinked) == best
    return OracleLinking(groups, unlinked, best)


# --- closes (RULES §4) -------------------------------------------------------------------------

# The kinds best first, with their default multipliers.
CLOSE_KINDS = (
    ("REMIGIO", 10),
    ("STRAIGHT_FLUSH_CLEAN", 6),
    ("STRAIGHT_FLUSH", 5),
    ("COLOR_CLEAN", 4),
    ("COLOR", 3),
    ("LINKED_CLEAN", 2),
    ("LINKED", 1),
)
JOKER_DISCARDS = ("CLEAN", "NOT_CLEAN", "FORBIDDEN")


def links_fully(cards: Iterable[Card], joker_limit: str = "UNLIMITED", wrap_runs: bool = False) -> bool:
    """Whether the cards split into groups with none left over."""
    return _links_fully(tuple(sorted(index(c) for c in cards)), joker_limit, wrap_runs)


@lru_cache(maxsize=200_000)
def _links_fully(remaining: Key, joker_limit: str, wrap_runs: bool) -> bool:
    # The lowest card is in some group of a full linking, and the rest split into groups in turn.
    # Only whether one exists is asked: the first found ends the search (a close tries 11 discards).
    if not remaining:
        return True
    for group in _groups_with_lowest(remaining, joker_limit, wrap_runs):
        left = list(remaining)
        for i in group:
            left.remove(i)
        if _links_fully(tuple(left), joker_limit, wrap_runs):
            return True
    return False


def close_kind(
    shown: Sequence[Card],
    discard: Card,
    joker_limit: str = "UNLIMITED",
    wrap_runs: bool = False,
    joker_discard: str = "CLEAN",
) -> str | None:
    """The kind of the close of these 10 shown cards and this discard, None when it is no close."""
    if joker_discard == "FORBIDDEN" and discard == JOKER:
        return None
    naturals = [c for c in shown if c != JOKER]
    clean = len(naturals) == len(shown) and not (joker_discard == "NOT_CLEAN" and discard == JOKER)
    full = links_fully(shown, joker_limit, wrap_runs)
    kinds = set()
    # A Remigio: one rank, linked under the limit (then every group is of that rank).
    if len({rank for rank, _ in naturals}) <= 1 and full:
        kinds.add("REMIGIO")
    one_suit = len({suit for _, suit in naturals}) == 1
    distinct = len({rank for rank, _ in naturals}) == len(naturals)
    # A straight flush: the ten make one valid group that is a run (one suit, distinct ranks).
    if naturals and one_suit and distinct and is_group(shown, joker_limit, wrap_runs):
        kinds.add("STRAIGHT_FLUSH_CLEAN" if clean else "STRAIGHT_FLUSH")
    if naturals and one_suit:
        kinds.add("COLOR_CLEAN" if clean else "COLOR")
    if full:
        kinds.add("LINKED_CLEAN" if clean else "LINKED")
    # The default multipliers are all different: the first listed is the highest.
    return next((kind for kind, _ in CLOSE_KINDS if kind in kinds), None)


def best_close(
    cards: Sequence[Card], joker_limit: str = "UNLIMITED", wrap_runs: bool = False, joker_discard: str = "CLEAN"
) -> tuple[str | None, Card | None]:
    """The best close of 11 cards: (kind, discard), the discard first in index order on a tie;
    (None, None) when no discard closes."""
    multiplier = dict(CLOSE_KINDS)
    by_index = sorted(cards, key=index)
    best: tuple[int, str | None, Card | None] = (0, None, None)
    for position, discard in enumerate(by_index):
        shown = by_index[:position] + by_index[position + 1 :]
        kind = close_kind(shown, discard, joker_limit, wrap_runs, joker_discard)
        if kind is not None and multiplier[kind] > best[0]:
            best = (multiplier[kind], kind, discard)
    return best[1], best[2]
