"""Sample end-of-deal states from a seed: valid deals for tests, benchmarks and examples.

The same seed gives the same deals on every machine and version of Python (``random.Random``),
so a benchmark and a test can name the deals they use by their seed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from referee.game.cards import JOKER, SUITS, Card, deck
from referee.game.deal import HAND, Deal, PlayerHand
from referee.game.groups import judge_group
from referee.game.rules import RuleSet

# Group lengths of a closer's 10 shown cards: one run of 10, or two or three groups.
_SHAPES = ((10,), (3, 7), (4, 6), (5, 5), (3, 3, 4), (3, 4, 3), (4, 3, 3), (7, 3), (6, 4))


def sample_deals(seed: int, count: int, players: int = 4) -> list[Deal]:
    """``count`` distinct end-of-deal states of ``players`` players (two decks, default rules),
    the closer with a valid close, every player with a score, both piles known."""
    rng = random.Random(seed)
    rules = RuleSet()
    deals: list[Deal] = []
    seen: set[tuple[tuple[int, ...], ...]] = set()
    while len(deals) < count:
        left = list(deck(rules.decks))
        rng.shuffle(left)
        closer = rng.randrange(players)
        shown = _closer_cards(rng, left, rules)
        discard = left.pop()
        hands = [left[HAND * i : HAND * i + HAND] for i in range(players - 1)]
        rest = left[HAND * (players - 1) :]
        hands.insert(closer, shown)
        key = tuple(tuple(sorted(c.index for c in hand)) for hand in hands)
        if key in seen:
            continue
        seen.add(key)
        pile = rng.randint(1, 20)
        deals.append(
            Deal(
                players=tuple(
                    PlayerHand(f"p{i}", tuple(hand), score=rng.randint(60, 440)) for i, hand in enumerate(hands)
                ),
                closer=closer,
                discard=discard,
                discard_pile=tuple(rest[:pile]),
                stock=tuple(rest[pile:]),
            )
        )
    return deals


def _take(left: list[Card], cards: Sequence[Card]) -> bool:
    """Remove ``cards`` from ``left`` when it holds them all; say whether it did."""
    need = Counter(cards)
    have = Counter(left)
    if any(have[card] < n for card, n in need.items()):
        return False
    for card in cards:
        left.remove(card)
    return True


def _linked_group(rng: random.Random, size: int) -> list[Card]:
    """A same-suit run (any length) or a same-rank group (3 to 5 cards), sometimes with a joker."""
    if size <= 5 and rng.random() < 0.45:
        rank = rng.randint(1, 13)
        group = [Card(rank, rng.choice(SUITS)) for _ in range(size)]
    else:
        suit = rng.choice(SUITS)
        # Ranks 1..14, 14 being the ace above the king.
        low = rng.randint(1, 14 - size + 1)
        group = [Card(1 if r == 14 else r, suit) for r in range(low, low + size)]
    if rng.random() < 0.3:
        group[rng.randrange(size)] = JOKER
    return group


def _closer_cards(rng: random.Random, left: list[Card], rules: RuleSet) -> list[Card]:
    """10 cards from ``left`` that split into linked groups with none left over."""
    while True:
        shape = rng.choice(_SHAPES)
        taken: list[Card] = []
        for size in shape:
            for _ in range(50):
                group = _linked_group(rng, size)
                if judge_group(group, rules) and _take(left, group):
                    taken += group
                    break
            else:
                break
        if len(taken) == HAND:
            rng.shuffle(taken)
            return taken
        left += taken  # give the cards back, shuffle again and try another shape
        rng.shuffle(left)


__all__ = ["sample_deals"]
