"""Closes (RULES §4): every kind, precedence, the face-down joker, failures, options, bad input."""

from __future__ import annotations

import pytest

from referee.game.cards import JOKER, Card, parse_cards
from referee.game.closing import best_close, check_close, close_kinds
from referee.game.errors import InvalidCardError
from referee.game.rules import CloseKind, JokerLimit, RuleSet

RULES = RuleSet()


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def card(code: str) -> Card:
    return Card.parse(code)


# 10 shown cards of each kind, with a discard that does not help them.
KIND_CASES = [
    (CloseKind.REMIGIO, 10, "QH QH QS QS QD QD QC QC JK JK", "3C"),
    (CloseKind.STRAIGHT_FLUSH_CLEAN, 6, "2S 3S 4S 5S 6S 7S 8S 9S 10S JS", "4D"),
    (CloseKind.STRAIGHT_FLUSH, 5, "2D 3D JK 5D 6D 7D 8D 9D 10D JD", "KC"),
    (CloseKind.COLOR_CLEAN, 4, "AC 2C 3C 4C 6C 8C 9C 10C QC KC", "5H"),
    (CloseKind.COLOR, 3, "AD 2D 3D 4D 5D 7D 9D JD KD JK", "6S"),
    (CloseKind.LINKED_CLEAN, 2, "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H", "KC"),
    (CloseKind.LINKED, 1, "2C 3C JK 6D 6H 6S 8S 8D 8C 8H", "KC"),
]


@pytest.mark.parametrize(("kind", "multiplier", "shown", "discard"), KIND_CASES, ids=[k[0].value for k in KIND_CASES])
def test_each_close_kind_by_check_close(kind: CloseKind, multiplier: int, shown: str, discard: str) -> None:
    close = check_close(cards(shown), card(discard), RULES)
    assert close.valid
    assert close.kind is kind
    assert close.multiplier == multiplier
    assert close.discard == card(discard)
    assert sorted(close.shown, key=lambda c: c.index) == sorted(cards(shown), key=lambda c: c.index)
    assert close.reason == ""


@pytest.mark.parametrize(("kind", "multiplier", "shown", "discard"), KIND_CASES, ids=[k[0].value for k in KIND_CASES])
def test_each_close_kind_by_best_close(kind: CloseKind, multiplier: int, shown: str, discard: str) -> None:
    close = best_close(cards(shown) + (card(discard),), RULES)
    assert close.valid
    assert close.kind is kind
    assert close.multiplier == multiplier
    assert close.discard == card(discard)


def test_color_clean_hand_is_not_linked() -> None:
    close = check_close(cards("AC 2C 3C 4C 6C 8C 9C 10C QC KC"), card("5H"), RULES)
    assert not close.linking.fully_linked
    assert [c.code() for c in close.linking.unlinked] == ["6C"]


def test_color_with_joker_is_not_linked() -> None:
    close = check_close(cards("AD 2D 3D 4D 5D 7D 9D JD KD JK"), card("6S"), RULES)
    assert not close.linking.fully_linked
    assert close.kind is CloseKind.COLOR


# --- precedence -----------------------------------------------------------------------------


def test_clean_straight_flush_is_also_color_and_linked_highest_wins() -> None:
    shown = cards("2S 3S 4S 5S 6S 7S 8S 9S 10S JS")
    close = check_close(shown, card("4D"), RULES)
    kinds = set(close_kinds(close.shown, close.linking, RULES))
    assert {CloseKind.STRAIGHT_FLUSH_CLEAN, CloseKind.COLOR_CLEAN, CloseKind.LINKED_CLEAN} <= kinds
    assert close.kind is CloseKind.STRAIGHT_FLUSH_CLEAN
    assert close.multiplier == 6


def test_straight_flush_with_jokers_is_also_color_and_linked_highest_wins() -> None:
    close = check_close(cards("2D 3D JK 5D 6D 7D 8D 9D 10D JD"), card("KC"), RULES)
    kinds = set(close_kinds(close.shown, close.linking, RULES))
    assert {CloseKind.STRAIGHT_FLUSH, CloseKind.COLOR, CloseKind.LINKED} <= kinds
    assert close.kind is CloseKind.STRAIGHT_FLUSH
    assert close.multiplier == 5


def test_clean_color_that_is_linked_is_color_clean_times_4() -> None:
    # A-2-3♥, 5-6-7♥, 9-10-J-Q♥: all linked, all hearts, no joker, not one run.
    close = check_close(cards("AH 2H 3H 5H 6H 7H 9H 10H JH QH"), card("KS"), RULES)
    assert close.linking.fully_linked
    kinds = set(close_kinds(close.shown, close.linking, RULES))
    assert {CloseKind.COLOR_CLEAN, CloseKind.LINKED_CLEAN} <= kinds
    assert CloseKind.STRAIGHT_FLUSH_CLEAN not in kinds
    assert close.kind is CloseKind.COLOR_CLEAN
    assert close.multiplier == 4


def test_remigio_is_also_linked_remigio_wins() -> None:
    close = check_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK"), card("KD"), RULES)
    kinds = set(close_kinds(close.shown, close.linking, RULES))
    assert {CloseKind.REMIGIO, CloseKind.LINKED} <= kinds
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10


def test_best_close_takes_the_highest_discard() -> None:
    # Discarding 5C leaves 10 hearts (COLOR_CLEAN ×4); discarding KH leaves 5-5-5, A-2-3♥,
    # 7-8-9-10♥ (LINKED_CLEAN ×2). The higher multiplier wins.
    close = best_close(cards("5H 5H 5C AH 2H 3H 7H 8H 9H 10H KH"), RULES)
    assert close.kind is CloseKind.COLOR_CLEAN
    assert close.multiplier == 4
    assert close.discard == card("5C")


# --- the face-down joker --------------------------------------------------------------------

CLEAN_LINKED = "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H"


def test_joker_discarded_keeps_the_close_clean_check_close() -> None:
    close = check_close(cards(CLEAN_LINKED), JOKER, RULES)
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.multiplier == 2
    assert close.discard == JOKER


def test_joker_discarded_keeps_the_close_clean_best_close() -> None:
    close = best_close(cards(CLEAN_LINKED + " JK"), RULES)
    assert close.valid
    assert close.discard == JOKER
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.multiplier == 2


def test_joker_discarded_keeps_a_straight_flush_clean() -> None:
    close = best_close(cards("2S 3S 4S 5S 6S 7S 8S 9S 10S JS JK"), RULES)
    assert close.discard == JOKER
    assert close.kind is CloseKind.STRAIGHT_FLUSH_CLEAN
    assert close.multiplier == 6


def test_a_shown_joker_makes_it_not_clean() -> None:
    close = check_close(cards("2C 3C 4C 6D 6H 6S 8S 8D 8C JK"), card("8H"), RULES)
    assert close.kind is CloseKind.LINKED
    assert close.multiplier == 1


# --- no close -------------------------------------------------------------------------------


def test_eleven_cards_where_no_discard_closes() -> None:
    hand = cards("AC 3D 5H 7S 9C JD KH 2S 4C 6D 8H")
    close = best_close(hand, RULES)
    assert close.valid is False
    assert close.kind is None
    assert close.multiplier == 0
    assert close.reason
    # Nothing links, so the nearest discard is a 10-point card: 65 - 10 = 55 left.
    assert close.discard in (card("JD"), card("KH"))
    assert close.linking.points == 55


def test_nearly_closed_hand_reports_invalid() -> None:
    # Linked except 2 stray cards: removing either still leaves one unlinked.
    close = best_close(cards("2C 3C 4C 6D 6H 6S 8S 8D 8C KH 5D"), RULES)
    assert not close.valid
    assert close.multiplier == 0
    assert close.kind is None
    assert close.discard == card("KH")
    assert [c.code() for c in close.linking.unlinked] == ["5D"]
    assert close.reason


def test_check_close_with_an_invalid_close() -> None:
    close = check_close(cards("AH 2H 3H 5H 7H 8H 9H JH QH 4C"), card("KH"), RULES)
    assert close.valid is False
    assert close.kind is None
    assert close.multiplier == 0
    assert close.discard == card("KH")
    assert close.reason
    # Without KH, J-Q♥ no longer link: 5H 4C JH QH are left, 5 + 4 + 10 + 10.
    assert {c.code() for c in close.linking.unlinked} == {"5H", "4C", "JH", "QH"}
    assert close.linking.points == 29


def test_check_close_judges_only_the_named_discard() -> None:
    # Example 8's cards with 4C shown and 5H discarded: 4C breaks the color and links with
    # nothing, so this close fails although discarding 4C would close.
    close = check_close(cards("AH 2H 3H 7H 8H 9H JH QH KH 4C"), card("5H"), RULES)
    assert not close.valid
    assert close.multiplier == 0


# --- options --------------------------------------------------------------------------------


def test_overridden_multiplier_changes_the_value() -> None:
    rules = RuleSet(multipliers={CloseKind.LINKED_CLEAN: 7})
    close = check_close(cards(CLEAN_LINKED), card("KC"), rules)
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.multiplier == 7


def test_overridden_multiplier_changes_the_winning_kind() -> None:
    rules = RuleSet(multipliers={CloseKind.LINKED_CLEAN: 5})
    close = check_close(cards("AH 2H 3H 5H 6H 7H 9H 10H JH QH"), card("KS"), rules)
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.multiplier == 5


def test_overridden_multiplier_lowers_straight_flush_below_color() -> None:
    rules = RuleSet(multipliers={CloseKind.STRAIGHT_FLUSH_CLEAN: 3})
    close = check_close(cards("2S 3S 4S 5S 6S 7S 8S 9S 10S JS"), card("4D"), rules)
    assert close.kind is CloseKind.COLOR_CLEAN
    assert close.multiplier == 4


def test_overridden_multiplier_changes_the_best_discard() -> None:
    rules = RuleSet(multipliers={CloseKind.LINKED_CLEAN: 5})
    close = best_close(cards("5H 5H 5C AH 2H 3H 7H 8H 9H 10H KH"), rules)
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.multiplier == 5
    assert close.discard == card("KH")


def test_one_per_group_keeps_a_two_joker_remigio_in_two_groups() -> None:
    # RULES §4: special closes follow the joker limit by shape; two same-rank groups of one joker
    # each are still a Remigio.
    rules = RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP)
    close = best_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD"), rules)
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10
    assert close.discard == card("KD")
    assert [sum(c.is_joker for c in group.cards) for group in close.linking.groups] == [1, 1]
    shown = check_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK"), card("KD"), rules)
    assert shown.kind is CloseKind.REMIGIO


def test_no_more_than_naturals_still_allows_the_remigio() -> None:
    rules = RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)
    close = check_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK"), card("KD"), rules)
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10


def test_wrap_runs_allows_a_wrapping_straight_flush() -> None:
    shown = cards("9S 10S JS QS KS AS 2S 3S 4S 5S")
    assert check_close(shown, card("KD"), RULES).kind is not CloseKind.STRAIGHT_FLUSH_CLEAN
    assert check_close(shown, card("KD"), RULES).kind is CloseKind.COLOR_CLEAN
    wrap = check_close(shown, card("KD"), RuleSet(wrap_runs=True))
    assert wrap.kind is CloseKind.STRAIGHT_FLUSH_CLEAN
    assert wrap.multiplier == 6


# --- malformed input ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [9, 10, 12])
def test_best_close_wrong_counts_raise(n: int) -> None:
    hand = cards("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH")[:n]
    with pytest.raises(InvalidCardError):
        best_close(hand, RULES)


@pytest.mark.parametrize("n", [9, 11])
def test_check_close_wrong_counts_raise(n: int) -> None:
    hand = cards("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH")[:n]
    with pytest.raises(InvalidCardError):
        check_close(hand, card("KC"), RULES)


def test_best_close_too_many_copies_names_the_field() -> None:
    hand = cards("AH 2C AH 3C 4C 6D 6H AH 8S 8D 8C")
    with pytest.raises(InvalidCardError) as caught:
        best_close(hand, RULES)
    assert caught.value.field == "cards[7]"
    assert "AH" in str(caught.value)


def test_best_close_too_many_jokers_names_the_field() -> None:
    hand = cards("JK 2C JK 3C JK 6D JK 8S JK 8D 8C")
    with pytest.raises(InvalidCardError) as caught:
        best_close(hand, RULES)
    assert caught.value.field == "cards[8]"


def test_check_close_copies_counted_with_the_discard() -> None:
    shown = cards("AH 2C 3C 4C 6D 6H AH 8S 8D 8C")
    with pytest.raises(InvalidCardError) as caught:
        check_close(shown, card("AH"), RULES)
    assert caught.value.field == "discard"
    assert "AH" in str(caught.value)


def test_check_close_copies_in_the_shown_cards() -> None:
    shown = cards("5D 2C 5D 4C 6D 6H 5D 8S 8D 8C")
    with pytest.raises(InvalidCardError) as caught:
        check_close(shown, card("KS"), RULES, field="hand")
    assert caught.value.field == "hand[6]"


def test_three_copies_allowed_with_three_decks() -> None:
    rules = RuleSet(decks=3)
    close = best_close(cards("AH AH AH 2C 3C 4C 6D 6H 6S 6C KD"), rules)
    assert close.valid
    assert close.discard == card("KD")
    assert close.kind is CloseKind.LINKED_CLEAN


@pytest.mark.parametrize("order", ["2C 3C 4C 5C 6D 6H 6S 8S 8D 8C 8H", "8H 8C 8D 8S 6S 6H 6D 5C 4C 3C 2C"])
def test_best_close_ties_go_to_the_first_discard_in_canonical_order(order: str) -> None:
    # Discarding 2C, 5C or any 8 leaves a clean linked hand (×2); 2C comes first (clubs, ace up).
    close = best_close(cards(order), RULES)
    assert close.kind is CloseKind.LINKED_CLEAN
    assert close.discard == card("2C")


def test_clean_remigio_with_three_decks() -> None:
    close = best_close(cards("9C 9C 9C 9D 9D 9D 9H 9H 9H 9S 2D"), RuleSet(decks=3))
    assert close.kind is CloseKind.REMIGIO
    assert close.multiplier == 10
    assert close.discard == card("2D")
