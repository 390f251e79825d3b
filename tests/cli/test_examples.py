"""Every worked example of RULES §8 (joker = 20), each its own test."""

from __future__ import annotations

from collections import Counter

import pytest

from referee.game.cards import Card, parse_cards
from referee.game.closing import best_close
from referee.game.deal import Deal, PlayerHand
from referee.game.linking import Linking, best_linking
from referee.game.rules import CloseKind, JokerDiscard, JokerLimit, RuleSet, ScoringMode, ScoringRules
from referee.game.scoring import score_deal

RULES = RuleSet()


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def group_sets(linking: Linking) -> Counter[frozenset[tuple[str, int]]]:
    """The groups as a multiset of card-code multisets (order-free, duplicates kept)."""
    return Counter(frozenset(Counter(c.code() for c in g.cards).items()) for g in linking.groups)


def expect_groups(*groups: str) -> Counter[frozenset[tuple[str, int]]]:
    return Counter(frozenset(Counter(g.split()).items()) for g in groups)


def check_linking(hand: str, groups: list[str], unlinked: str, points: int) -> None:
    for order in (hand.split(), hand.split()[::-1]):
        linking = best_linking(parse_cards(order), RULES)
        assert linking.points == points
        assert group_sets(linking) == expect_groups(*groups)
        assert Counter(c.code() for c in linking.unlinked) == Counter(unlinked.split())


def test_example_1_run_and_set_leave_33() -> None:
    check_linking("AH 2H 3H 5C 5D 5S KS KD 9C 4D", ["AH 2H 3H", "5C 5D 5S"], "KS KD 9C 4D", 33)


def test_example_2_joker_links_the_kings() -> None:
    check_linking("AH 2H 3H 5C 5D 5S KS KD 9C JK", ["AH 2H 3H", "5C 5D 5S", "KS KD JK"], "9C", 9)


def test_example_3_ace_high_beats_a_longer_low_run() -> None:
    check_linking("QS KS AS 2S 3S 4S 7H 7D 7C 9D", ["QS KS AS", "2S 3S 4S", "7H 7D 7C"], "9D", 9)


def test_example_4_only_the_kings_link() -> None:
    check_linking("2C 2C 9D 9D 4S 7H KH KH QC JK", ["KH KH JK"], "2C 2C 9D 9D 4S 7H QC", 43)


def test_example_5_two_jokers_in_a_run_beat_the_king() -> None:
    check_linking("JK JK 5H 9C KD QS 2D 6S 8H 3C", ["5H JK JK 8H"], "9C KD QS 2D 6S 3C", 40)
    linking = best_linking(cards("JK JK 5H 9C KD QS 2D 6S 8H 3C"), RULES)
    (group,) = linking.groups
    assert list(group.stands_for) == ["5H", "6H", "7H", "8H"]


def test_example_6_straight_flush_with_a_joker() -> None:
    close = best_close(cards("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C"), RULES)
    assert close.valid
    assert close.discard == Card.parse("2C")
    assert close.kind is CloseKind.STRAIGHT_FLUSH
    assert close.multiplier == 5


def test_example_7_remigio() -> None:
    close = best_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD"), RULES)
    assert close.valid
    assert close.discard == Card.parse("KD")
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10


def test_example_8_clean_color_not_linked() -> None:
    close = best_close(cards("AH 2H 3H 5H 7H 8H 9H JH QH KH 4C"), RULES)
    assert close.valid
    assert close.discard == Card.parse("4C")
    assert close.kind is CloseKind.COLOR_CLEAN
    assert close.multiplier == 4
    # 5H is not linked.
    assert [c.code() for c in close.linking.unlinked] == ["5H"]


def test_example_9_clean_straight_flush() -> None:
    close = best_close(cards("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC"), RULES)
    assert close.valid
    assert close.discard == Card.parse("KC")
    assert close.kind is CloseKind.STRAIGHT_FLUSH_CLEAN
    assert close.multiplier == 6


def test_example_10_head_to_head_linked_clean_against_33() -> None:
    # A clean linked close that is neither a color nor a run: 2-3-4♣, 6-6-6, 8-8-8-8.
    closer = PlayerHand("Ana", cards("2C 3C 4C 6D 6H 6S 8S 8D 8C 8H"))
    other = PlayerHand("Beto", cards("AH 2H 3H 5C 5D 5S KS KD 9C 4D"))
    deal = Deal(players=(closer, other), closer=0, discard=Card.parse("KC"))
    result = score_deal(deal, RuleSet(scoring=ScoringRules(mode=ScoringMode.HEAD_TO_HEAD)))
    assert result.close.kind is CloseKind.LINKED_CLEAN
    assert result.close.multiplier == 2
    ana, beto = result.players
    assert beto.points == 33
    assert ana.score_change == 66
    assert ana.score == 66
    assert beto.score_change == 0
    assert beto.score == 0
    assert not result.match_over


def test_example_11_eleven_hearts_are_one_run() -> None:
    # Fewest groups before the lexicographic rule: one run A-J♥, not A-2-3, 4-5-6, 7-…-J.
    check_linking("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH", ["AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH"], "", 0)
    for engine in ("cpsat", "search", "audit"):
        (group,) = best_linking(cards("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH"), RuleSet(engine=engine)).groups
        assert len(group.cards) == 11


@pytest.mark.parametrize(
    ("joker_discard", "discard", "kind", "multiplier"),
    [
        (JokerDiscard.CLEAN, "JK", CloseKind.STRAIGHT_FLUSH_CLEAN, 6),
        (JokerDiscard.NOT_CLEAN, "AH", CloseKind.STRAIGHT_FLUSH, 5),
        (JokerDiscard.FORBIDDEN, "AH", CloseKind.STRAIGHT_FLUSH, 5),
    ],
)
def test_example_12_a_joker_as_the_discard(
    joker_discard: JokerDiscard, discard: str, kind: CloseKind, multiplier: int
) -> None:
    # NOT_CLEAN and FORBIDDEN: every discard gives at best STRAIGHT_FLUSH ×5, the first in card
    # order is taken: AH, 2…10♥ with the joker as J♥.
    close = best_close(cards("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JK"), RuleSet(joker_discard=joker_discard))
    assert close.valid
    assert close.discard == Card.parse(discard)
    assert close.kind is kind
    assert close.multiplier == multiplier
    if discard == "AH":
        (group,) = close.linking.groups
        assert list(group.stands_for) == ["2H", "3H", "4H", "5H", "6H", "7H", "8H", "9H", "10H", "JH"]


def test_example_13_remigio_under_one_per_group() -> None:
    close = best_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD"), RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP))
    assert close.valid
    assert close.discard == Card.parse("KD")
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10
    # Two groups of sevens, one joker each.
    assert sorted(sum(c.is_joker for c in g.cards) for g in close.linking.groups) == [1, 1]
