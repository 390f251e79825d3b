"""Hand generators shared by the benchmarks.

Every generator takes a seed (or a ``random.Random``), a count and a hand size, and returns
that many distinct hands, each a tuple of cards in canonical order that the deck can hold (two
decks: every natural card at most twice, at most four jokers). Same seed, same hands.

Families:

- ``random_deals``: the first cards of a shuffled 108-card deck;
- ``end_of_deal``: what a hand looks like when a deal ends: two or three real groups (a same-rank
  group of 3-4 or a same-suit run of 3-5, sometimes with a joker) and a few loose cards;
- ``adversarial``: hard on an exact solver: all four jokers, many duplicates, long same-suit
  stretches, many cards of one rank, so runs and same-rank groups overlap every which way.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

from referee.game.cards import JOKER, SUITS, Card, check_copies, deck, sort_cards

Hand = tuple[Card, ...]
Generator = Callable[[int | random.Random, int, int], list[Hand]]

DECKS = 2


def _rng(seed: int | random.Random) -> random.Random:
    return seed if isinstance(seed, random.Random) else random.Random(seed)


def _distinct(count: int, make: Callable[[], Hand]) -> list[Hand]:
    """``count`` distinct hands from ``make`` (a repeated hand would only time a cache)."""
    hands: list[Hand] = []
    seen: set[Hand] = set()
    tries = 0
    while len(hands) < count:
        tries += 1
        if tries > 100 * count + 1000:
            raise ValueError(f"could not make {count} distinct hands")
        hand = make()
        if hand not in seen:
            seen.add(hand)
            hands.append(hand)
    return hands


def _checked(hand: Sequence[Card], size: int) -> Hand:
    assert len(hand) == size, (len(hand), size)
    check_copies(hand, DECKS, lambda i: f"hand[{i}]")
    return sort_cards(hand)


class _Pool:
    """What is left of the deck: draws respect the copies it holds."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.left: Counter[Card] = Counter(deck(DECKS))

    def has(self, cards: Sequence[Card]) -> bool:
        need = Counter(cards)
        return all(self.left[card] >= n for card, n in need.items())

    def take(self, cards: Sequence[Card]) -> list[Card]:
        self.left.subtract(cards)
        return list(cards)

    def draw(self, n: int) -> list[Card]:
        """``n`` random cards from what is left, each copy as likely as any other."""
        rest = sorted(self.left.elements(), key=lambda c: c.index)
        drawn = self.rng.sample(rest, n)
        return self.take(drawn)


def random_deals(seed: int | random.Random, count: int, size: int = 10) -> list[Hand]:
    """``count`` hands of ``size`` cards, each the top of a freshly shuffled 108-card deck."""
    rng = _rng(seed)
    cards = list(deck(DECKS))

    def make() -> Hand:
        rng.shuffle(cards)
        return _checked(cards[:size], size)

    return _distinct(count, make)


def _real_group(rng: random.Random, pool: _Pool, room: int) -> list[Card] | None:
    """A same-rank group of 3-4 or a same-suit run of 3-5 (sometimes a joker in it), at most
    ``room`` cards, drawn from ``pool``; None when the try does not fit."""
    if rng.random() < 0.5:
        length = rng.randint(3, min(4, room))
        rank = rng.randint(1, 13)
        # Any suits, a suit possibly twice (the deck holds two of each card).
        suits = [rng.choice(SUITS) for _ in range(length)]
        group = [Card(rank, suit) for suit in suits]
    else:
        length = rng.randint(3, min(5, room))
        suit = rng.choice(SUITS)
        # Ace low or, sometimes, ace high (Q K A): ranks 1..14 where 14 is the ace.
        low = rng.randint(1, 14 - length + 1)
        group = [Card(1 if r == 14 else r, suit) for r in range(low, low + length)]
    if rng.random() < 0.3:
        group[rng.randrange(length)] = JOKER
    return group if pool.has(group) else None


def end_of_deal(seed: int | random.Random, count: int, size: int = 10) -> list[Hand]:
    """``count`` hands of ``size`` cards: two or three real groups, then loose random cards."""
    rng = _rng(seed)

    def make() -> Hand:
        pool = _Pool(rng)
        hand: list[Card] = []
        wanted = rng.randint(2, 3)
        made = 0
        while made < wanted:
            room = size - 1 - len(hand)  # always at least one loose card
            if room < 3:
                break
            group = _real_group(rng, pool, room)
            if group is not None:
                hand += pool.take(group)
                made += 1
        hand += pool.draw(size - len(hand))
        return _checked(hand, size)

    return _distinct(count, make)


def _adversarial_naturals(rng: random.Random, n: int) -> list[Card]:
    """``n`` natural cards packed around one suit and one rank, with many duplicates."""
    suit = rng.choice(SUITS)
    pattern = rng.randrange(4)
    if pattern == 0:
        # A long same-suit stretch, every card twice.
        low = rng.randint(1, 13 - (n + 1) // 2 + 1)
        ranks = [low + i // 2 for i in range(n)]
        cards = [Card(r, suit) for r in ranks]
    elif pattern == 1:
        # Many of one rank (both copies of several suits), the rest a doubled stretch through it.
        rank = rng.randint(2, 12)
        many = rng.randint(4, min(6, n - 1))
        others = [s for s in SUITS if s != suit]
        same = [Card(rank, s) for s in others for _ in range(2)][:many]
        stretch = [Card(r, suit) for r in (rank - 1, rank, rank + 1) for _ in range(2)]
        cards = same + stretch[: n - many]
    elif pattern == 2:
        # Two suits running side by side over the same ranks, some cards doubled.
        other = rng.choice([s for s in SUITS if s != suit])
        low = rng.randint(1, 13 - 3)
        base = [Card(r, s) for r in range(low, low + 4) for s in (suit, other)]
        doubled = rng.randint(2, 3)
        distinct = rng.sample(base, n - doubled)
        cards = distinct + rng.sample(distinct, doubled)
    else:
        # A dense window: near ranks in one suit plus the centre rank in every suit.
        rank = rng.randint(3, 11)
        window = [Card(r, suit) for r in range(rank - 2, rank + 3)]
        across = [Card(rank, s) for s in SUITS]
        choices = (window + across) * 2
        rng.shuffle(choices)
        cards = []
        for card in choices:
            if len(cards) == n:
                break
            if cards.count(card) < DECKS:
                cards.append(card)
    # Top up (or repair) with duplicates of what is already there, then anything near.
    counts = Counter(cards)
    cards = [c for c in counts for _ in range(min(counts[c], DECKS))]
    while len(cards) < n:
        card = rng.choice(cards)
        if cards.count(card) < DECKS:
            cards.append(card)
        else:
            near = Card(max(1, min(13, card.rank + rng.choice((-1, 1)))), card.suit)  # type: ignore[operator]
            if cards.count(near) < DECKS:
                cards.append(near)
    return cards[:n]


def adversarial(seed: int | random.Random, count: int, size: int = 10) -> list[Hand]:
    """``count`` hands of ``size`` cards: the four jokers and densely overlapping naturals."""
    rng = _rng(seed)
    jokers = 2 * DECKS
    return _distinct(count, lambda: _checked([JOKER] * jokers + _adversarial_naturals(rng, size - jokers), size))


FAMILIES: dict[str, Generator] = {
    "random_deals": random_deals,
    "end_of_deal": end_of_deal,
    "adversarial": adversarial,
}
