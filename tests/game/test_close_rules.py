"""Closes against the independent oracle (RULES §4): the joker discard rule, special closes under
the joker limit, both close paths (11 cards, and 10 shown cards with a named discard).

``oracle.close_kind`` and ``oracle.best_close`` know nothing of ``referee``: they read the kinds
off the 10 cards with the oracle's own group predicate and brute-force linking. Hypothesis is
derandomised, so every run draws the same hands.
"""

from __future__ import annotations

import random

import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.game.cards import Card, sort_cards
from referee.game.closing import best_close, check_close
from referee.game.rules import CloseKind, JokerDiscard, JokerLimit, RuleSet

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

LIMITS = list(JokerLimit)
DISCARDS = list(JokerDiscard)


@st.composite
def closing_hands(draw: st.DrawFn) -> list[str]:
    """11 card codes from two decks, biased towards closes: one suit, one rank, jokers."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    jokers = draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4]))
    style = draw(st.sampled_from(["suit", "rank", "mixed"]))
    suit, rank = rng.choice("CDHS"), rng.randint(1, 13)
    pool = [(r, s) for r in range(1, 14) for s in "CDHS" for _ in range(2)]
    if style == "suit":
        focus = [c for c in pool if c[1] == suit]
    elif style == "rank":
        focus = [c for c in pool if c[0] == rank]
    else:
        focus = [c for c in pool if c[1] == suit or c[0] == rank]
    rng.shuffle(focus)
    rest = [c for c in pool if c not in focus]
    rng.shuffle(rest)
    # Mostly the focus, sometimes a stray card or two.
    strays = draw(st.integers(0, 2))
    naturals = (focus[: 11 - jokers - strays] + rest)[: 11 - jokers]
    return [oracle.code(c) for c in naturals] + ["JK"] * jokers


def rules_for(limit: JokerLimit, joker_discard: JokerDiscard, joker_points: int = 20) -> RuleSet:
    return RuleSet(joker_limit=limit, joker_discard=joker_discard, joker_points=joker_points, engine="search")


@pytest.mark.parametrize("joker_discard", DISCARDS, ids=[d.value for d in DISCARDS])
@pytest.mark.parametrize("limit", LIMITS, ids=[lim.value for lim in LIMITS])
@SETTINGS
@given(codes=closing_hands())
def test_best_close_of_11_is_the_oracles(limit: JokerLimit, joker_discard: JokerDiscard, codes: list[str]) -> None:
    close = best_close([Card.parse(c) for c in codes], rules_for(limit, joker_discard))
    kind, discard = oracle.best_close(oracle.parse_hand(codes), limit.value, False, joker_discard.value)
    where = f"{' '.join(codes)} | {limit.value} {joker_discard.value}"
    assert (close.kind.value if close.kind else None) == kind, where
    assert close.valid == (kind is not None), where
    if kind is not None:
        assert close.discard is not None and close.discard.code() == oracle.code(discard), where
    if joker_discard is JokerDiscard.FORBIDDEN:
        assert close.discard is not None and not close.discard.is_joker, where


@pytest.mark.parametrize("joker_discard", DISCARDS, ids=[d.value for d in DISCARDS])
@pytest.mark.parametrize("limit", LIMITS, ids=[lim.value for lim in LIMITS])
@pytest.mark.parametrize("joker_points", [20, 0])
@SETTINGS
@given(codes=closing_hands(), position=st.integers(0, 10))
def test_close_of_10_and_a_discard_is_the_oracles(
    limit: JokerLimit, joker_discard: JokerDiscard, joker_points: int, codes: list[str], position: int
) -> None:
    discard = codes[position]
    shown = codes[:position] + codes[position + 1 :]
    rules = rules_for(limit, joker_discard, joker_points)
    close = check_close([Card.parse(c) for c in shown], Card.parse(discard), rules)
    kind = oracle.close_kind(oracle.parse_hand(shown), oracle.parse(discard), limit.value, False, joker_discard.value)
    where = f"{' '.join(shown)} discard {discard} | {limit.value} {joker_discard.value}"
    assert (close.kind.value if close.kind else None) == kind, where
    assert close.valid == (kind is not None), where
    if close.valid:
        assert close.multiplier == dict(oracle.CLOSE_KINDS)[kind]
    if kind is not None and kind.startswith(("LINKED", "REMIGIO", "STRAIGHT")):
        assert close.linking.fully_linked, where


# --- the joker discard, every value on both paths (RULES §4, §8) -------------------------------

RUN_AND_JOKER = "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JK"


@pytest.mark.parametrize(
    ("joker_discard", "kind", "discard"),
    [
        (JokerDiscard.CLEAN, CloseKind.STRAIGHT_FLUSH_CLEAN, "JK"),
        (JokerDiscard.NOT_CLEAN, CloseKind.STRAIGHT_FLUSH, "AH"),
        (JokerDiscard.FORBIDDEN, CloseKind.STRAIGHT_FLUSH, "AH"),
    ],
)
def test_a_joker_as_the_discard_from_11_cards(joker_discard: JokerDiscard, kind: CloseKind, discard: str) -> None:
    close = best_close(sort_cards(Card.parse(c) for c in RUN_AND_JOKER.split()), RuleSet(joker_discard=joker_discard))
    assert close.valid
    assert close.kind is kind
    assert close.discard == Card.parse(discard)


@pytest.mark.parametrize(
    ("joker_discard", "shown", "kind"),
    [
        (JokerDiscard.CLEAN, "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H", CloseKind.STRAIGHT_FLUSH_CLEAN),
        (JokerDiscard.NOT_CLEAN, "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H", CloseKind.STRAIGHT_FLUSH),
        (JokerDiscard.CLEAN, "AC 2C 3C 4C 6C 8C 9C 10C QC KC", CloseKind.COLOR_CLEAN),
        (JokerDiscard.NOT_CLEAN, "AC 2C 3C 4C 6C 8C 9C 10C QC KC", CloseKind.COLOR),
        (JokerDiscard.CLEAN, "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H", CloseKind.LINKED_CLEAN),
        (JokerDiscard.NOT_CLEAN, "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H", CloseKind.LINKED),
        # A joker shown already makes the close one with jokers: the discard changes nothing.
        (JokerDiscard.NOT_CLEAN, "2C 3C JK 6D 6H 6S 8S 8D 8C 8H", CloseKind.LINKED),
    ],
)
def test_a_joker_as_the_named_discard(joker_discard: JokerDiscard, shown: str, kind: CloseKind) -> None:
    rules = RuleSet(joker_discard=joker_discard)
    close = check_close([Card.parse(c) for c in shown.split()], Card.parse("JK"), rules)
    assert close.valid
    assert close.kind is kind
    assert close.multiplier == rules.multiplier(kind)


def test_a_forbidden_joker_discard_is_no_close_and_says_why() -> None:
    rules = RuleSet(joker_discard=JokerDiscard.FORBIDDEN)
    close = check_close([Card.parse(c) for c in RUN_AND_JOKER.split()[:10]], Card.parse("JK"), rules)
    assert not close.valid
    assert close.kind is None
    assert close.multiplier == 0
    assert "joker_discard FORBIDDEN" in close.reason
    # The same close with a natural discard is judged as usual.
    assert check_close([Card.parse(c) for c in RUN_AND_JOKER.split()[:10]], Card.parse("KC"), rules).valid


def test_with_no_close_a_forbidden_joker_is_never_the_hinted_discard() -> None:
    # Nothing closes, and with the joker every card could be in some group: by points the joker
    # (20) is the hint, unless it may not be discarded.
    codes = "2C 2D 5H 6H 9S 9D QC QH 4S 4D JK"
    allowed = best_close([Card.parse(c) for c in codes.split()], RuleSet())
    assert not allowed.valid and allowed.discard == Card.parse("JK")
    close = best_close([Card.parse(c) for c in codes.split()], RuleSet(joker_discard=JokerDiscard.FORBIDDEN))
    assert not close.valid
    assert close.discard is not None and not close.discard.is_joker


def test_jokers_worth_nothing_still_link_a_close() -> None:
    # The best linking may leave a joker worth 0 out (one group fewer is not possible here, but
    # a shorter group comes first); the ten are linked all the same, and the close shows it.
    shown = [Card.parse(c) for c in "5C 5D 5S 6H 7H 8H 9H 10H JH JK".split()]
    close = check_close(shown, Card.parse("2C"), RuleSet(joker_points=0))
    assert close.valid and close.kind is CloseKind.LINKED
    assert close.linking.fully_linked
    close = best_close([*shown, Card.parse("2C")], RuleSet(joker_points=0))
    assert close.kind is CloseKind.LINKED and close.linking.fully_linked


# --- special closes follow the joker limit by shape (RULES §4) ---------------------------------


@pytest.mark.parametrize("limit", LIMITS, ids=[lim.value for lim in LIMITS])
def test_eight_sevens_and_two_jokers_are_a_remigio_under_every_limit(limit: JokerLimit) -> None:
    close = best_close([Card.parse(c) for c in "7H 7H 7S 7S 7D 7D 7C 7C JK JK KD".split()], RuleSet(joker_limit=limit))
    assert close.kind is CloseKind.REMIGIO
    assert close.discard == Card.parse("KD")
    assert close.linking.fully_linked
    for group in close.linking.groups:
        jokers = sum(card.is_joker for card in group.cards)
        assert limit.allows(len(group.cards) - jokers, jokers)
    # Under ONE_PER_GROUP two groups of sevens, one joker each; else one group of ten.
    assert len(close.linking.groups) == (2 if limit is JokerLimit.ONE_PER_GROUP else 1)


@pytest.mark.parametrize(
    ("limit", "kind"),
    [
        (JokerLimit.UNLIMITED, CloseKind.STRAIGHT_FLUSH),
        (JokerLimit.NO_MORE_THAN_NATURALS, CloseKind.STRAIGHT_FLUSH),
        (JokerLimit.ONE_PER_GROUP, CloseKind.COLOR),
    ],
)
def test_a_run_of_ten_with_two_jokers_follows_the_limit(limit: JokerLimit, kind: CloseKind) -> None:
    shown = [Card.parse(c) for c in "3H 4H JK 6H 7H JK 9H 10H JH QH".split()]
    close = check_close(shown, Card.parse("2C"), RuleSet(joker_limit=limit))
    assert close.kind is kind


def test_a_remigio_needs_the_limit_to_allow_a_linking() -> None:
    # Six sevens and four jokers: under ONE_PER_GROUP at most three groups of one joker each.
    shown = [Card.parse(c) for c in "7H 7H 7S 7S 7D 7D JK JK JK JK".split()]
    assert check_close(shown, Card.parse("2C"), RuleSet()).kind is CloseKind.REMIGIO
    assert check_close(shown, Card.parse("2C"), RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)).kind is (
        CloseKind.REMIGIO
    )
    assert not check_close(shown, Card.parse("2C"), RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP)).valid
