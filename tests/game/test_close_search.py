"""The best close of 11 cards skips work; it must still find what trying every discard finds."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.game.cards import JOKER, NATURALS, Card, sort_cards
from referee.game.closing import best_close, check_close, loose_cards, may_be_linked
from referee.game.linking import best_linking
from referee.game.rules import CloseKind, JokerLimit, RuleSet

RULE_SETS = [
    RuleSet(engine="search"),
    RuleSet(engine="search", wrap_runs=True),
    RuleSet(engine="search", joker_limit=JokerLimit.NO_MORE_THAN_NATURALS),
    RuleSet(engine="search", joker_limit=JokerLimit.ONE_PER_GROUP),
    RuleSet(engine="search", multipliers={CloseKind.LINKED: 7, CloseKind.COLOR: 2}),
]


@st.composite
def closing_hands(draw: st.DrawFn) -> tuple[Card, ...]:
    """11 cards, biased towards hands that nearly close: one suit, one rank, runs, jokers."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    jokers = draw(st.integers(0, 4))
    style = draw(st.sampled_from(["suit", "rank", "mixed", "random"]))
    pool = [c for c in NATURALS for _ in range(2)]
    if style == "suit":
        suit = rng.choice(range(4))
        pool = [c for c in pool if c.index // 13 == suit] + rng.sample(pool, 4)
    elif style == "rank":
        rank = rng.randint(1, 13)
        pool = [c for c in pool if c.rank == rank] + rng.sample(pool, 6)
    elif style == "mixed":
        suit, rank = rng.choice(range(4)), rng.randint(1, 13)
        pool = [c for c in pool if c.index // 13 == suit or c.rank == rank]
    cards: list[Card] = [JOKER] * jokers
    rng.shuffle(pool)
    counts: dict[Card, int] = {}
    for card in pool:
        if len(cards) == 11:
            break
        if counts.get(card, 0) < 2:
            counts[card] = counts.get(card, 0) + 1
            cards.append(card)
    return tuple(cards)


def every_discard(cards: tuple[Card, ...], rules: RuleSet) -> tuple[int, Card | None, CloseKind | None]:
    """The best close by judging all 11 discards in full, ties to the first in card order."""
    hand = sort_cards(cards)
    best: tuple[int, Card | None, CloseKind | None] = (0, None, None)
    for position, discard in enumerate(hand):
        verdict = check_close(hand[:position] + hand[position + 1 :], discard, rules)
        if verdict.valid and verdict.multiplier > best[0]:
            best = (verdict.multiplier, discard, verdict.kind)
    return best


@pytest.mark.parametrize(
    "rules", RULE_SETS, ids=lambda r: f"{r.joker_limit.value}-wrap{r.wrap_runs}-{dict(r.multipliers)[CloseKind.LINKED]}"
)
@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cards=closing_hands())
def test_best_close_equals_trying_every_discard(cards: tuple[Card, ...], rules: RuleSet) -> None:
    close = best_close(cards, rules)
    multiplier, discard, kind = every_discard(cards, rules)
    assert close.valid == (discard is not None)
    if close.valid:
        assert (close.multiplier, close.discard, close.kind) == (multiplier, discard, kind)
    else:
        assert close.multiplier == 0 and close.kind is None and close.reason


@pytest.mark.parametrize("rules", RULE_SETS[:4], ids=lambda r: f"{r.joker_limit.value}-wrap{r.wrap_runs}")
@settings(max_examples=300, deadline=None, derandomize=True)
@given(cards=closing_hands())
def test_the_quick_test_never_refuses_a_linked_hand(cards: tuple[Card, ...], rules: RuleSet) -> None:
    shown = cards[:10]
    if best_linking(shown, rules).fully_linked:
        assert may_be_linked(shown, rules)


def test_the_quick_test_refuses_a_lone_card() -> None:
    shown = [Card.parse(c) for c in "AH 2H 3H 5C 5D 5S 9S 9D 9C KD".split()]
    assert not may_be_linked(shown, RuleSet())
    assert not best_linking(shown, RuleSet()).fully_linked


def test_no_close_hints_the_highest_loose_card() -> None:
    cards = [Card.parse(c) for c in "AH 2H 3H 5C 5D 5S KS 8D 9C 2S 7C".split()]
    assert loose_cards(cards, RuleSet()) == [Card.parse(c) for c in ("7C", "9C", "8D", "2S", "KS")]
    close = best_close(cards, RuleSet())
    assert not close.valid and close.multiplier == 0
    assert close.discard == Card.parse("KS")
    assert close.linking.points == 7 + 9 + 8 + 2
    assert "KS" in close.reason


def test_no_close_with_nothing_loose_hints_the_highest_card() -> None:
    cards = [Card.parse(c) for c in "AH 2H 3H 5C 5D 5S JK 9C 9D 4D 4C".split()]
    assert loose_cards(cards, RuleSet()) == []
    close = best_close(cards, RuleSet())
    assert not close.valid
    assert close.discard == Card.parse("JK")
