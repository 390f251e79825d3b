"""Cards (RULES §1): notation in and out, malformed codes, the deck, the points of a card."""

from __future__ import annotations

from collections import Counter

import pytest

from referee.game.cards import (
    CARD_BY_INDEX,
    CARD_KINDS,
    JOKER,
    JOKER_INDEX,
    KING,
    NATURALS,
    Card,
    Suit,
    clock_rank,
    deck,
    format_cards,
    index_of,
    parse_cards,
    rank_of,
    suit_of,
)
from referee.game.errors import InvalidCardError


@pytest.mark.parametrize(
    ("code", "rank", "suit"),
    [
        ("AH", 1, Suit.HEARTS),
        ("ah", 1, Suit.HEARTS),
        ("aH", 1, Suit.HEARTS),
        ("2c", 2, Suit.CLUBS),
        ("9D", 9, Suit.DIAMONDS),
        ("10S", 10, Suit.SPADES),
        ("10s", 10, Suit.SPADES),
        ("TS", 10, Suit.SPADES),
        ("ts", 10, Suit.SPADES),
        ("jd", 11, Suit.DIAMONDS),
        ("Qc", 12, Suit.CLUBS),
        ("kh", 13, Suit.HEARTS),
    ],
)
def test_parse_letters_case_insensitive(code: str, rank: int, suit: Suit) -> None:
    card = Card.parse(code)
    assert card.rank == rank
    assert card.suit == suit
    assert not card.is_joker


@pytest.mark.parametrize(
    ("code", "canonical"),
    [
        ("A♥", "AH"),
        ("a♥", "AH"),
        ("10♠", "10S"),
        ("T♠", "10S"),
        ("Q♦", "QD"),
        ("7♣", "7C"),
        ("K♣", "KC"),
        ("5♦", "5D"),
    ],
)
def test_parse_suit_symbols(code: str, canonical: str) -> None:
    assert Card.parse(code).code() == canonical


@pytest.mark.parametrize("code", ["JK", "jk", "Jk", "jK"])
def test_parse_joker(code: str) -> None:
    card = Card.parse(code)
    assert card == JOKER
    assert card.is_joker
    assert card.rank is None and card.suit is None
    assert card.code() == "JK"


@pytest.mark.parametrize(
    ("code", "canonical"),
    [("ah", "AH"), ("ts", "10S"), ("10h", "10H"), ("qd", "QD"), ("jc", "JC"), ("jk", "JK"), ("K♠", "KS")],
)
def test_canonical_output(code: str, canonical: str) -> None:
    card = Card.parse(code)
    assert card.code() == canonical
    assert str(card) == canonical
    # Canonical codes parse back to the same card.
    assert Card.parse(canonical) == card


def test_pretty_uses_the_symbols() -> None:
    assert [c.pretty() for c in parse_cards(["AH", "10S", "QD", "2C", "JK"])] == ["A♥", "10♠", "Q♦", "2♣", "JK"]


def test_format_cards_is_canonical() -> None:
    assert format_cards(parse_cards(["ah", "t♠", "jk", "qd"])) == "AH 10S JK QD"


@pytest.mark.parametrize("card", list(NATURALS) + [JOKER], ids=lambda c: c.code())
def test_repr_evaluates_back(card: Card) -> None:
    assert eval(repr(card), {"Card": Card}) == card  # noqa: S307 - the repr is meant to be evaluated


def test_every_natural_has_a_distinct_code_and_index() -> None:
    codes = [card.code() for card in NATURALS]
    assert len(set(codes)) == 52
    assert sorted(card.index for card in NATURALS) == list(range(52))
    assert JOKER.index == 52


@pytest.mark.parametrize("code", ["1H", "11H", "AX", "", "JKR", "10", "H", "A", "0H", "1", "JKH", "AHH"])
def test_malformed_codes_raise_naming_the_position(code: str) -> None:
    with pytest.raises(InvalidCardError) as caught:
        parse_cards(["AH", "2H", "3H", code, "5H"])
    error = caught.value
    assert error.field == "cards[3]"
    assert error.value == code
    assert repr(code) in str(error)
    assert "cards[3]" in str(error)


@pytest.mark.parametrize("value", [5, None, 10.0, b"AH", ("A", "H")], ids=repr)
def test_non_string_raises_naming_the_position(value: object) -> None:
    with pytest.raises(InvalidCardError) as caught:
        parse_cards(["AH", "2H", "3H", value, "5H"])  # type: ignore[list-item]
    assert caught.value.field == "cards[3]"
    # No value at all (None) is quoted as empty, never as the word None.
    assert repr("" if value is None else value) in str(caught.value)


def test_parse_cards_uses_the_given_field_name() -> None:
    with pytest.raises(InvalidCardError) as caught:
        parse_cards(["AH", "XX"], field="hand")
    assert caught.value.field == "hand[1]"
    assert "'XX'" in str(caught.value)


def test_card_parse_names_its_field() -> None:
    with pytest.raises(InvalidCardError) as caught:
        Card.parse("ZZ", "discard")
    assert caught.value.field == "discard"
    assert "'ZZ'" in str(caught.value)


def test_parse_cards_keeps_order_and_duplicates() -> None:
    assert [c.code() for c in parse_cards(["5h", "AH", "5H", "jk"])] == ["5H", "AH", "5H", "JK"]


@pytest.mark.parametrize(("decks", "size", "jokers"), [(2, 108, 4), (3, 162, 6)])
def test_deck_composition(decks: int, size: int, jokers: int) -> None:
    cards = deck(decks)
    assert len(cards) == size
    counts = Counter(cards)
    assert counts[JOKER] == jokers
    naturals = {card: n for card, n in counts.items() if not card.is_joker}
    assert len(naturals) == 52
    assert set(naturals) == set(NATURALS)
    assert all(n == decks for n in naturals.values())


def test_default_deck_has_two_decks() -> None:
    assert Counter(deck()) == Counter(deck(2))


@pytest.mark.parametrize(
    ("code", "points"),
    [
        ("AC", 1),
        ("AS", 1),
        ("2D", 2),
        ("5H", 5),
        ("9S", 9),
        ("10C", 10),
        ("JD", 10),
        ("QH", 10),
        ("KS", 10),
    ],
)
def test_points_of_naturals(code: str, points: int) -> None:
    assert Card.parse(code).points(20) == points
    # The joker value does not touch naturals.
    assert Card.parse(code).points(50) == points


@pytest.mark.parametrize("joker_points", [20, 25, 50, 0])
def test_points_of_a_joker_are_joker_points(joker_points: int) -> None:
    assert JOKER.points(joker_points) == joker_points


def test_points_of_every_natural() -> None:
    for card in NATURALS:
        assert card.rank is not None
        expected = 1 if card.rank == 1 else min(card.rank, 10)
        assert card.points(20) == expected, card.code()


# The index vocabulary ---------------------------------------------------------------------------


def test_the_index_vocabulary_names_every_natural_card_and_the_joker() -> None:
    for index, card in enumerate(NATURALS):
        assert card.index == index == index_of(rank_of(index), suit_of(index))
        assert card.rank == rank_of(index)
        assert card.suit is not None and card.suit.order == suit_of(index)
    assert JOKER.index == JOKER_INDEX == len(NATURALS) == 52
    assert CARD_KINDS == len(CARD_BY_INDEX) == 53
    assert Card.parse("KS").index == index_of(KING, Suit.SPADES.order) == JOKER_INDEX - 1


def test_the_clock_of_ranks_goes_round_past_the_king() -> None:
    assert [clock_rank(p) for p in (1, 13, 14, 15, 0, -1)] == [1, 13, 1, 2, 13, 12]


def test_the_games_enumerations_are_kinds_hashed_by_identity() -> None:
    import enum
    import importlib
    import pkgutil

    import referee.game
    import referee.play
    from referee.game.kinds import Kind

    found = []
    for package in (referee.game, referee.play):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            found += [
                value
                for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, enum.Enum) and value.__module__ == module.__name__
            ]
    # Every enumeration of the game is a Kind, but the engine's names (a StrEnum: hashed as text).
    assert {kind.__name__ for kind in found if not issubclass(kind, Kind)} == {"Engine"}
    assert len(found) > 10
    for kind in found:
        for member in kind:
            assert hash(member) == (hash(member.value) if kind.__name__ == "Engine" else object.__hash__(member))
            assert {member: 1}[member] == 1 and member in set(kind)
