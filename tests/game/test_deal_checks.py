"""Checking an end-of-deal state (RULES §6): players, hand sizes, copies, the whole deck."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.game.cards import Card, deck, parse_cards, sort_cards
from referee.game.deal import Deal, PlayerHand, check_deal
from referee.game.errors import InvalidDealError, RefereeError
from referee.game.rules import RuleSet

RULES = RuleSet()
CLOSER = "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H"
HAND_33 = "AH 2H 3H 5C 5D 5S KS KD 9C 4D"
HAND_40 = "JK JK 5H 9C KD QS 2D 6S 8H 3C"
HAND_57 = "AS 3S 5S 7D 9D JH KC 2H 4H 6C"
DISCARD = "KC"


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def make_deal(hands: list[str | tuple[Card, ...]], closer: int = 0, discard: str = DISCARD, **extra: object) -> Deal:
    players = tuple(PlayerHand(f"P{i}", cards(h) if isinstance(h, str) else h) for i, h in enumerate(hands))
    return Deal(players=players, closer=closer, discard=Card.parse(discard), **extra)  # type: ignore[arg-type]


def error_of(deal: Deal, rules: RuleSet = RULES, kind: type[RefereeError] = RefereeError) -> RefereeError:
    with pytest.raises(kind) as caught:
        check_deal(deal, rules)
    return caught.value


def rest_of_deck(deal: Deal, decks: int = 2) -> list[Card]:
    """The cards of the deck not in the hands nor the discard, in canonical order."""
    used = Counter(c for p in deal.players for c in p.cards) + Counter([deal.discard])
    rest = Counter(deck(decks)) - used
    return list(sort_cards(c for c, n in rest.items() for _ in range(n)))


def test_a_valid_deal_passes() -> None:
    assert check_deal(make_deal([CLOSER, HAND_33, HAND_40]), RULES) is None


# --- player counts --------------------------------------------------------------------------


def test_one_player_rejected() -> None:
    error = error_of(make_deal([CLOSER]), kind=InvalidDealError)
    assert error.field == "players"


def dealt(players: int, decks: int) -> Deal:
    """``players`` hands of 10 dealt in deck order from ``decks`` decks, the next card discarded;
    past the deck the hands repeat the deck, so only the player count can be at fault."""
    full = deck(decks) * 5
    hands = [full[10 * i : 10 * i + 10] for i in range(players)]
    return make_deal(hands, discard=full[10 * players].code())  # type: ignore[arg-type]


@pytest.mark.parametrize(("decks", "most"), [(1, 5), (2, 10), (3, 16), (4, 21)])
def test_players_per_deal_follow_the_deck(decks: int, most: int) -> None:
    # RULES §6: 2 up to as many as the deck deals 10 cards each plus the face-up card.
    assert check_deal(dealt(most, decks), RuleSet(decks=decks)) is None
    error = error_of(dealt(most + 1, decks), RuleSet(decks=decks), kind=InvalidDealError)
    assert error.field == "players"
    assert error.value == most + 1
    assert f"2 to {most} players" in error.message


def test_eleven_players_rejected_with_two_decks_accepted_with_three() -> None:
    error = error_of(dealt(11, 2), RULES, kind=InvalidDealError)
    assert (error.field, error.value) == ("players", 11)
    assert check_deal(dealt(11, 3), RuleSet(decks=3)) is None


def test_ten_players_accepted() -> None:
    full = deck(2)
    hands = [full[10 * i : 10 * i + 10] for i in range(10)]
    deal = make_deal(hands, discard=full[100].code())  # type: ignore[arg-type]
    assert check_deal(deal, RULES) is None


def test_two_players_accepted() -> None:
    assert check_deal(make_deal([CLOSER, HAND_33]), RULES) is None


# --- hand sizes and the closer --------------------------------------------------------------


@pytest.mark.parametrize("size", [9, 11])
def test_non_closer_with_wrong_count(size: int) -> None:
    hand = (cards(HAND_33) + cards("7S"))[:size]
    error = error_of(make_deal([CLOSER, hand, HAND_40]), kind=InvalidDealError)
    assert error.field == "players[1].cards"


@pytest.mark.parametrize("size", [9, 11])
def test_closer_with_wrong_count(size: int) -> None:
    # The closer shows 10; the discard goes in deal.discard, not in the hand.
    hand = (cards(CLOSER) + cards("7S"))[:size]
    error = error_of(make_deal([HAND_33, hand], closer=1), kind=InvalidDealError)
    assert error.field == "players[1].cards"


@pytest.mark.parametrize("closer", [3, 4, -1])
def test_closer_index_out_of_range(closer: int) -> None:
    error = error_of(make_deal([CLOSER, HAND_33, HAND_40], closer=closer), kind=InvalidDealError)
    assert error.field == "closer"


def test_any_player_may_close() -> None:
    assert check_deal(make_deal([HAND_33, HAND_40, CLOSER], closer=2), RULES) is None


def test_duplicate_player_names_rejected() -> None:
    players = (
        PlayerHand("Ana", cards(CLOSER)),
        PlayerHand("Beto", cards(HAND_33)),
        PlayerHand("Beto", cards(HAND_40)),
    )
    deal = Deal(players=players, closer=0, discard=Card.parse(DISCARD))
    error = error_of(deal, kind=InvalidDealError)
    assert error.field == "players[2].name"
    assert "Beto" in str(error)


# --- copies ---------------------------------------------------------------------------------

# 5D twice in the first hand; HAND_33 holds the third at index 4.
TWO_5D = "5D 5D 6C 7C 8C 9H 10H JH QH 4S"


def test_third_copy_of_a_natural_names_its_field() -> None:
    error = error_of(make_deal([TWO_5D, HAND_33, HAND_40]))
    assert error.field == "players[1].cards[4]"
    assert "5D" in str(error)


def test_third_copy_in_the_discard_names_the_discard() -> None:
    with_kc = "KC 2S 3S 4S 7C 7D 7H 7S 9H 10H"
    error = error_of(make_deal([CLOSER, HAND_57, with_kc]))
    assert error.field == "discard"
    assert "KC" in str(error)


def test_fifth_joker_with_two_decks() -> None:
    two_jokers = "2C 3C 4C 6D 6H 6S 8S 8D JK JK"
    one_joker = "9H 10H JK 2S 3S 4S 7C 7D 7H 7S"
    error = error_of(make_deal([two_jokers, HAND_40, one_joker]))
    assert error.field == "players[2].cards[2]"
    assert "JK" in str(error)


def test_four_jokers_with_two_decks_accepted() -> None:
    two_jokers = "2C 3C 4C 6D 6H 6S 8S 8D JK JK"
    assert check_deal(make_deal([two_jokers, HAND_40]), RULES) is None


def test_three_decks_allow_three_copies_and_six_jokers() -> None:
    three = RuleSet(decks=3)
    assert check_deal(make_deal([TWO_5D, HAND_33, HAND_40]), three) is None
    two_jokers = "2C 3C 4C 6D 6H 6S 8S 8D JK JK"
    one_joker = "9H 10H JK 2S 3S 4S 7C 7D 7H 7S"
    assert check_deal(make_deal([two_jokers, HAND_40, one_joker]), three) is None


def test_three_decks_reject_a_fourth_copy() -> None:
    error = error_of(make_deal([TWO_5D, HAND_33, "5D 2S 3S 4S 7C 7D 7H 7S 9C 10C"]), RuleSet(decks=3))
    assert error.field == "players[2].cards[0]"


# --- the whole deck -------------------------------------------------------------------------


def test_pile_and_stock_completing_the_deck_accepted() -> None:
    base = make_deal([CLOSER, HAND_33, HAND_40])
    rest = rest_of_deck(base)
    assert len(rest) == 108 - 31
    deal = make_deal([CLOSER, HAND_33, HAND_40], discard_pile=tuple(rest[:20]), stock=tuple(rest[20:]))
    assert check_deal(deal, RULES) is None


def test_empty_pile_and_full_stock_accepted() -> None:
    rest = rest_of_deck(make_deal([CLOSER, HAND_33]))
    deal = make_deal([CLOSER, HAND_33], discard_pile=(), stock=tuple(rest))
    assert check_deal(deal, RULES) is None


def test_short_deck_rejected() -> None:
    rest = rest_of_deck(make_deal([CLOSER, HAND_33, HAND_40]))
    missing = rest.pop()  # the last card of the stock
    deal = make_deal([CLOSER, HAND_33, HAND_40], discard_pile=tuple(rest[:20]), stock=tuple(rest[20:]))
    error = error_of(deal, kind=InvalidDealError)
    assert error.field == "stock"
    assert error.value == missing.code()


def test_short_deck_missing_from_the_pile_rejected() -> None:
    rest = rest_of_deck(make_deal([CLOSER, HAND_33, HAND_40]))
    missing = rest.pop(0)  # the first card of the pile
    deal = make_deal([CLOSER, HAND_33, HAND_40], discard_pile=tuple(rest[:20]), stock=tuple(rest[20:]))
    error = error_of(deal, kind=InvalidDealError)
    assert error.value == missing.code()


def test_extra_card_in_the_stock_rejected() -> None:
    rest = rest_of_deck(make_deal([CLOSER, HAND_33, HAND_40]))
    stock = tuple(rest[20:]) + (Card.parse("QC"),)  # both QC are already in the piles
    assert Counter(rest)[Card.parse("QC")] == 2
    deal = make_deal([CLOSER, HAND_33, HAND_40], discard_pile=tuple(rest[:20]), stock=stock)
    error = error_of(deal)
    assert error.field == f"stock.cards[{len(stock) - 1}]"
    assert "QC" in str(error)


def test_extra_joker_in_the_pile_rejected() -> None:
    rest = rest_of_deck(make_deal([CLOSER, HAND_33]))
    pile = (Card.parse("JK"),) + tuple(rest[:20])
    stock = tuple(rest[20:])
    deal = make_deal([CLOSER, HAND_33], discard_pile=pile, stock=stock)
    error = error_of(deal)
    # The four jokers close the rest (canonical order): the stock's last card is the fifth.
    assert stock[-4:] == (Card.parse("JK"),) * 4
    assert error.field == f"stock.cards[{len(stock) - 1}]"


def test_three_deck_game_must_complete_162() -> None:
    hands = [CLOSER, HAND_33, HAND_40]
    rest3 = rest_of_deck(make_deal(hands), decks=3)
    assert len(rest3) == 162 - 31
    three = RuleSet(decks=3)
    ok = make_deal(hands, discard_pile=tuple(rest3[:30]), stock=tuple(rest3[30:]))
    assert check_deal(ok, three) is None
    # The two-deck rest is 54 cards short of a three-deck game.
    rest2 = rest_of_deck(make_deal(hands), decks=2)
    short = make_deal(hands, discard_pile=tuple(rest2[:30]), stock=tuple(rest2[30:]))
    assert error_of(short, three, kind=InvalidDealError).field == "stock"


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(decks=st.integers(1, 4), players=st.integers(1, 24))
def test_the_player_count_is_accepted_exactly_when_the_deck_deals_it(decks: int, players: int) -> None:
    # RULES §6 from the deck itself: 52 naturals and 2 jokers per deck, 10 cards a player and the
    # face-up card.
    cards_in_deck = decks * (52 + 2)
    fits = 2 <= players and 10 * players + 1 <= cards_in_deck
    rules = RuleSet(decks=decks)
    if fits:
        assert check_deal(dealt(players, decks), rules) is None
    else:
        assert error_of(dealt(players, decks), rules, kind=InvalidDealError).field == "players"
