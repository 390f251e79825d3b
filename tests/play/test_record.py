"""Deal records: a malformed record is refused naming its field, and the notation reads what it
writes (simulated records of every rule option, the documented example, lenient input, errors
that name the line)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from played import corpus

from referee.game.cards import Card, deck, parse_cards
from referee.game.errors import (
    InvalidCardError,
    InvalidDealError,
    InvalidNotationError,
    InvalidRecordError,
    LimitError,
    RefereeError,
)
from referee.game.limits import RESTOCK_CARDS, TURNS
from referee.game.rules import (
    RULE_OPTIONS,
    CloseKind,
    DiscardTaken,
    Engine,
    RuleOption,
    RuleSet,
    ScoringMode,
    ScoringRules,
)
from referee.game.scoring import score_deal
from referee.play.record import DrawSource, Record, Seat, Turn, check_record, format_notation, parse_notation
from referee.play.replay import ViolationCode, replay
from referee.play.shuffle import Shuffle

S, D = DrawSource.STOCK, DrawSource.DISCARD
RECORDS_DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"


def card(code: str) -> Card:
    return Card.parse(code)


def good(**changes: object) -> Record:
    """A well-formed record of three seats and an explicit deck, with ``changes``."""
    record = Record(
        seats=(Seat("ana", 120), Seat("beto"), Seat("carla")),
        dealer=1,
        deck=deck(2),
        turns=(Turn(S, card("AH")), Turn(D, card("2C"), seat=0)),
    )
    return replace(record, **changes)  # type: ignore[arg-type]


# Malformed records ---------------------------------------------------------------------------


def test_a_good_record_passes() -> None:
    check_record(good())
    check_record(good(deck=None, shuffle=Shuffle("00" * 32)))


@pytest.mark.parametrize(
    ("changes", "error", "field", "value"),
    [
        ({"seats": (Seat("ana"),)}, InvalidRecordError, "seats", 1),
        ({"seats": tuple(Seat(f"p{i}") for i in range(11))}, InvalidRecordError, "seats", 11),
        ({"seats": tuple(Seat(f"p{i}") for i in range(40))}, LimitError, "seats", 40),
        ({"seats": (Seat("ana"), Seat("ana"))}, InvalidRecordError, "seats[1].name", "ana"),
        ({"seats": (Seat("ana"), Seat("x" * 65))}, LimitError, "seats[1].name", "x" * 32 + "…"),
        ({"seats": (Seat("ana"), Seat(7))}, InvalidRecordError, "seats[1].name", 7),  # type: ignore[arg-type]
        ({"eliminated": ("beto",)}, InvalidRecordError, "seats[1].name", "beto"),
        ({"eliminated": (None,)}, InvalidRecordError, "eliminated[0]", ""),
        ({"seats": (Seat("ana", -5), Seat("beto"), Seat("carla"))}, InvalidDealError, "seats[0].score", -5),
        ({"seats": (Seat("ana", 500), Seat("beto"), Seat("carla"))}, InvalidDealError, "seats[0].score", 500),
        ({"seats": (Seat("ana", True), Seat("beto"))}, InvalidRecordError, "seats[0].score", True),
        ({"dealer": 3}, InvalidRecordError, "dealer", 3),
        ({"dealer": -1}, InvalidRecordError, "dealer", -1),
        ({"deck": None}, InvalidRecordError, "deck", ""),
        ({"shuffle": Shuffle("00" * 32)}, InvalidRecordError, "shuffle", "remigio-shuffle-v1"),
        ({"deck": deck(2)[:-1]}, InvalidRecordError, "deck", 107),
        ({"deck": (*deck(2)[:-1], card("AH"))}, InvalidCardError, "deck[107]", "AH"),
        ({"deck": deck(1)}, InvalidRecordError, "deck", 54),
        ({"deck": (*deck(2)[:-1], "JK")}, InvalidCardError, "deck[107]", "JK"),
        ({"turns": (Turn(S, card("AH"), seat=3),)}, InvalidRecordError, "turns[0].seat", 3),
        ({"turns": (Turn(S, card("AH")), Turn(S, card("AH"), seat=True))}, InvalidRecordError, "turns[1].seat", True),  # type: ignore[arg-type]
        ({"turns": (Turn("S", card("AH")),)}, InvalidRecordError, "turns[0].draw", "S"),  # type: ignore[arg-type]
        ({"turns": (Turn(S, "AH"),)}, InvalidCardError, "turns[0].discard", "AH"),  # type: ignore[arg-type]
        ({"turns": (Turn(S, card("AH"), drawn="AH"),)}, InvalidCardError, "turns[0].drawn", "AH"),  # type: ignore[arg-type]
        ({"turns": (Turn(S, card("AH"), close=1),)}, InvalidRecordError, "turns[0].close", 1),  # type: ignore[arg-type]
        ({"turns": (Turn(S, card("AH"), restock=(card("AH"), "x")),)}, InvalidCardError, "turns[0].restock[1]", "x"),  # type: ignore[arg-type]
        ({"turns": (Turn(S, card("AH"), restock=deck(4) + deck(1)),)}, LimitError, "turns[0].restock", 270),
        ({"turns": (Turn(S, card("AH")),) * (TURNS.most + 1)}, LimitError, "turns", TURNS.most + 1),
    ],
)
def test_a_malformed_record_names_the_field(
    changes: dict[str, object], error: type[RefereeError], field: str, value: object
) -> None:
    record = good(**changes)
    with pytest.raises(error) as caught:
        check_record(record)
    assert (caught.value.field, caught.value.value) == (field, value)
    with pytest.raises(error):
        replay(record)  # nothing is judged


def test_the_restocks_of_a_record_are_limited_together() -> None:
    big = Turn(S, card("AH"), restock=deck(4))
    turns = (big,) * (RESTOCK_CARDS.most // len(deck(4))) + (big,)
    with pytest.raises(InvalidRecordError) as caught:
        check_record(good(turns=turns))
    assert caught.value.field == f"turns[{len(turns) - 1}].restock"


def test_the_deck_follows_the_rules_decks() -> None:
    three = RuleSet(decks=3)
    check_record(good(deck=deck(3), rules=three, seats=tuple(Seat(f"p{i}") for i in range(16))))
    with pytest.raises(InvalidRecordError) as caught:
        check_record(good(rules=three))
    assert caught.value.field == "deck"
    assert "162 cards" in caught.value.message


def test_a_missing_card_is_named() -> None:
    cards = list(deck(2))
    cards[cards.index(card("QS"))] = card("JK")  # a fifth joker instead of a queen of spades
    with pytest.raises(InvalidCardError) as caught:
        check_record(good(deck=tuple(cards)))
    assert caught.value.field == "deck[107]" and "jokers" in caught.value.message
    with pytest.raises(InvalidRecordError) as missing:
        check_record(good(deck=tuple(c for c in deck(2) if c != card("QS"))))
    assert "missing: 2 (the first QS)" in missing.value.message


# The notation ----------------------------------------------------------------------------------


def documented_example() -> str:
    text = RECORDS_DOC.read_text(encoding="utf-8")
    section = text[text.index("## The notation") :]
    found = re.search(r"```text\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


def test_the_documented_example_reads_replays_and_scores_as_the_page_says() -> None:
    text = documented_example()
    record = parse_notation(text)
    assert format_notation(record) == text
    assert [seat.name for seat in record.seats] == ["ana", "beto", "carla"]
    assert record.dealer == 2 and record.shuffle is not None and record.shuffle.client_seed == "lucky"
    record = replace(record, rules=record.rules.with_options(engine=Engine.SEARCH))  # the same answers, faster
    result = replay(record)
    assert result.legal and result.complete and result.closer == 1 and result.discard == card("4D")
    assert result.deal is not None
    scored = score_deal(result.deal, record.rules)
    assert scored.close.kind is CloseKind.LINKED
    assert [(p.points, p.score_change, p.score) for p in scored.players] == [(10, -10, 452), (0, 59, 380), (9, -9, 95)]
    # The violation the page quotes.
    wrong = parse_notation(text.replace("4. @ana D=KC 8S", "4. @ana D=KC 9C"))
    violation = replay(wrong).violation
    assert violation is not None and violation.code is ViolationCode.CARD_NOT_IN_HAND
    assert " ".join(violation.message.split()) in " ".join(RECORDS_DOC.read_text(encoding="utf-8").split())


@pytest.mark.property
def test_simulated_records_round_trip() -> None:
    for played in corpus()[:400]:
        text = format_notation(played.record)
        again = parse_notation(text)
        assert again == played.record, played.index
        assert format_notation(again) == text


def test_every_rule_option_round_trips() -> None:
    rules = RuleSet(
        decks=3,
        joker_points=25,
        wrap_runs=True,
        discard_taken=DiscardTaken.FORBIDDEN,
        multipliers={CloseKind.REMIGIO: 12, CloseKind.COLOR: 2},
        scoring=ScoringRules(mode=ScoringMode.ELIMINATION, start_score=10, target=0, close_bonus=5, limit=90),
        engine="search",  # type: ignore[arg-type]
    )
    record = good(rules=rules, deck=deck(3), eliminated=("dani", "eva"), seats=(Seat("ana", 20), Seat("beto", 90)))
    text = format_notation(record)
    assert '[Multiplier "REMIGIO" "12"]' in text and '[Engine "search"]' in text and '[WrapRuns "true"]' in text
    assert parse_notation(text) == record


@pytest.mark.parametrize("option", RULE_OPTIONS, ids=lambda option: option.name)
def test_every_value_of_every_declared_option_round_trips_through_the_notation(option: RuleOption) -> None:
    """Each option of referee.game.rules.RULE_OPTIONS, at each value it takes that is not its default
    (every member of an enum; a number and a switch away from the default), is written as its tag
    and read back."""
    if option.choices:
        values = [option.read(choice) for choice in option.choices]
    elif option.kind is bool:
        values = [not option.default]
    else:
        values = [3 if option.name == "decks" else 25]
    for value in values:
        rules = RuleSet().with_options(**{option.name: value})
        record = good(rules=rules, deck=deck(rules.decks))
        text = format_notation(record)
        if value != option.default:
            assert f"[{option.tag} {json.dumps(option.spell(value))}]" in text
        assert parse_notation(text) == record, (option.name, value)


def test_names_and_seeds_of_any_characters_round_trip() -> None:
    names = ("juan carlos", 'o"brien', "ñandú", "a;b", "(x)", "", "@me", "back\\slash", "a\u2028b", "c\x85d\re")
    record = Record(
        seats=tuple(Seat(name) for name in names),
        dealer=4,
        shuffle=Shuffle("ab" * 32, 'say "hi"\nthen:\u2029 1', 2**64 - 1),
        turns=tuple(Turn(S, card("AH"), seat=i) for i in range(len(names))),
    )
    text = format_notation(record)
    assert parse_notation(text) == record
    assert '@"juan carlos"' in text and "@ñandú" in text
    assert text.splitlines() == text[:-1].split("\n")  # every line break is a newline


def test_reading_is_lenient_where_nothing_is_lost() -> None:
    text = documented_example()
    lenient = text.replace("1. S 10D\n2. D=10D 6C\n", "; the first two turns on one line\n1. s 10d   2. d=T♦ 6c\n")
    lenient = lenient.replace("3. S KC", "\n\n3. S kc ; a comment")
    assert parse_notation(lenient) == parse_notation(text)
    restocked = '[Seat "a"]\n[Seat "b"]\n[Dealer "a"]\n[Deck "{}"]\n\n1. @b ( 2H 3H ) S=2H 2H#\n'.format(
        " ".join(c.code() for c in deck(2))
    )
    turn = parse_notation(restocked).turns[0]
    assert turn == Turn(S, card("2H"), close=True, seat=1, drawn=card("2H"), restock=parse_cards(["2H", "3H"]))
    assert "1. @b (2H 3H) S=2H 2H#" in format_notation(parse_notation(restocked))


HEADER = (
    '[Seat "ana"]\n[Seat "beto"]\n[Dealer "ana"]\n[Shuffle "remigio-shuffle-v1"]\n[ServerSeed "' + "0" * 64 + '"]\n'
)


@pytest.mark.parametrize(
    ("text", "line", "value", "says"),
    [
        (HEADER + "\n1. S 9X\n", 7, "9X", "not a card code"),
        (HEADER + "\n1. S AH\n3. S AH\n", 8, "3.", "2. expected"),
        (HEADER + "\n1. @juan S AH\n", 7, "@juan", "no seat of this name"),
        (HEADER + "\n1. X AH\n", 7, "X", "draws S"),
        (HEADER + "\n1. S\n", 7, "S", "ends with the card"),
        (HEADER + "\n1. (AH 2H S AH\n", 7, "(", "not closed"),
        (HEADER + "\nAH\n", 7, "AH", "turn 1 expected"),
        (HEADER + '\n1. S AH\n[Nonce "1"]\n', 8, '[Nonce "1"]', "after the first turn"),
        (HEADER + '[Color "red"]\n', 6, "Color", "unknown tag"),
        (HEADER + '[Dealer "beto"]\n', 6, "Dealer", "given twice"),
        (HEADER + '[Nonce "-1"]\n', 6, -1, "nonce"),
        (HEADER + '[Nonce "x"]\n', 6, "x", "not a nonce"),
        (HEADER + '[Decks "9"]\n', 6, 9, "decks must be 1 to 4"),
        (HEADER + '[JokerLimit "TWO"]\n', 6, "TWO", "not a value of JokerLimit"),
        (HEADER + '[Multiplier "REMIGIO" "0"]\n', 6, 0, "multiplier"),
        (HEADER + '[Seat "eva" "x"]\n', 6, "x", "not an integer"),
        (HEADER + "[Seat ana]\n", 6, "[Seat ana]", "values quoted"),
        (HEADER.replace("0" * 64, "0" * 63), 5, "0" * 32 + "…", "64 hex digits"),
        (HEADER.replace("remigio-shuffle-v1", "v2"), 4, "v2", "unknown shuffle algorithm"),
        (HEADER.replace('[Dealer "ana"]', '[Dealer "eva"]'), 3, "eva", "no seat of this name"),
        ('[Seat "ana"]\n[Dealer "ana"]\n[Deck "AH"]\n', 1, 1, "seats"),
        ('[Seat "a"]\n[Seat "b"]\n[Dealer "a"]\n[Deck "AH 2H"]\n', 4, 2, "deck: the deck of 2 decks holds 108"),
        (HEADER + '\n1. @"ana S AH\n', 7, '"ana S AH', "quote"),
    ],
)
def test_a_notation_error_names_the_line_and_the_value(text: str, line: int, value: object, says: str) -> None:
    with pytest.raises(InvalidNotationError) as caught:
        parse_notation(text)
    assert caught.value.field == f"line {line}", caught.value
    assert caught.value.value == value, caught.value
    assert says in caught.value.message, caught.value


def test_a_notation_error_is_short_whatever_the_input() -> None:
    with pytest.raises(InvalidNotationError) as caught:
        parse_notation(HEADER + "\n1. S " + "Z" * 100_000 + "\n")
    assert len(str(caught.value)) < 200


def test_format_refuses_a_malformed_record() -> None:
    with pytest.raises(InvalidRecordError):
        format_notation(good(dealer=9))


THROWAWAY = """
import dataclasses, sys
import referee.game.rules as rules

# The recipe of CONTRIBUTING.md, "Adding a rule option", short of the proto field: the rule's
# field in RuleSet and its declaration. Then the edges must know it with no other change.
@dataclasses.dataclass(frozen=True, slots=True)
class WithBonus(rules.RuleSet):
    house_bonus: int = 0

rules.RuleSet = WithBonus
rules.RULE_OPTIONS = (*rules.RULE_OPTIONS, rules.RuleOption("house_bonus", int, "a throwaway option", "HouseBonus"))

from referee.cli import build_parser
from referee.play.record import format_notation, parse_notation
from referee.game.cards import deck
from referee.play.record import Record, Seat

help_text = build_parser("solve")._subparsers._group_actions[0].choices["solve"].format_help()
assert "--house-bonus" in help_text and "a throwaway option (default 0)" in help_text, help_text
record = Record(seats=(Seat("ana"), Seat("beto")), deck=deck(2), rules=WithBonus(house_bonus=7))
text = format_notation(record)
assert '[HouseBonus "7"]' in text, text
again = parse_notation(text)
assert again.rules.house_bonus == 7 and again == record, again.rules
assert "| `house_bonus` | `--house-bonus` | `[HouseBonus ...]` | a whole number | `0` |" in rules.rule_options_table()
print("derived")
"""


def test_a_new_option_declared_once_reaches_the_flags_the_notation_and_the_rule_book() -> None:
    """CONTRIBUTING.md's recipe, followed with a throwaway option in a process of its own."""
    ran = subprocess.run([sys.executable, "-c", THROWAWAY], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "derived", ran.stderr[-2000:]


@pytest.mark.parametrize("option", RULE_OPTIONS, ids=lambda option: option.name)
def test_every_value_of_every_declared_option_round_trips_through_the_contract(option: RuleOption) -> None:
    """The protobuf edges, written out by hand (referee.api.convert and referee.api.records),
    know every declared option at every value."""
    from referee.api.convert import rules_from_proto
    from referee.api.records import rules_to_proto

    if option.choices:
        values = [option.read(choice) for choice in option.choices]
    elif option.kind is bool:
        values = [True, False]
    else:
        values = [1, 3] if option.name == "decks" else [0, 25]
    for value in values:
        rules = RuleSet().with_options(**{option.name: value})
        assert rules_from_proto(rules_to_proto(rules)) == rules, (option.name, value)
