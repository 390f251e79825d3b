"""The size limits of a request (referee.limits) and the short quotes of errors: pure checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from referee import cards
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.cards import Card, parse_cards
from referee.errors import QUOTED_CHARS, InvalidCardError, LimitError, RefereeError
from referee.limits import CARD_CODE, LIMITS, NAME, PLAYERS

REQUESTS = (pb.SolveHandRequest, pb.CheckCloseRequest, pb.ScoreDealRequest, pb.CheckDisputesRequest)


def _request_fields() -> Iterator[tuple[str, FieldDescriptor]]:
    """Every field of every message a request may hold, as ("Message.field", field)."""
    seen: set[str] = set()
    todo: list[Descriptor] = [request.DESCRIPTOR for request in REQUESTS]
    while todo:
        message = todo.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        for field in message.fields:
            yield f"{message.name}.{field.name}", field
            if field.message_type is not None:
                todo.append(field.message_type)


def test_every_repeated_field_and_string_of_a_request_has_a_limit() -> None:
    limited = {name for limit in LIMITS for name in limit.fields}
    wanted = set()
    for name, field in _request_fields():
        if field.is_repeated:
            wanted.add(name)
        if field.type == FieldDescriptor.TYPE_STRING:
            wanted.add(name + "[]" if field.is_repeated else name)
    assert wanted - limited == set()
    assert limited - wanted == set(), "the table names a field the contract does not have"


def test_a_count_over_its_limit_names_the_field_and_the_count() -> None:
    PLAYERS.check_count([None] * PLAYERS.most, "deal.players")
    with pytest.raises(LimitError) as caught:
        PLAYERS.check_count([None] * 40_000, "deal.players")
    assert caught.value.field == "deal.players"
    assert caught.value.value == "40000 players"
    assert f"at most {PLAYERS.most} players" in caught.value.message


def test_a_string_over_its_limit_is_quoted_by_a_short_prefix() -> None:
    NAME.check_length("x" * NAME.most, "deal.players[0].name")
    with pytest.raises(LimitError) as caught:
        NAME.check_length("Ann" * 200_000, "deal.players[0].name")
    error = caught.value
    assert error.field == "deal.players[0].name"
    assert error.value == ("Ann" * QUOTED_CHARS)[:QUOTED_CHARS] + "…"
    assert "600000 given" in error.message
    assert len(str(error)) < 200


@pytest.mark.parametrize(
    "value",
    ["x" * 10**6, "♠" * 10**5, b"\x00" * 10**6, list(range(10**5))],
    ids=["ascii", "symbols", "bytes", "list"],
)
def test_an_error_quotes_a_short_prefix_of_any_value(value: object) -> None:
    error = RefereeError("deal.players[0].name", value, "what is wrong")
    assert len(str(error)) < 40 + 5 * QUOTED_CHARS
    assert len(repr(error.value)) <= 5 * QUOTED_CHARS  # a control byte prints as \xNN


def test_a_short_value_is_quoted_whole() -> None:
    error = RefereeError("cards[3]", "XX", "not a card code")
    assert error.value == "XX"
    assert str(error) == "cards[3]: not a card code ('XX')"


def test_a_card_code_longer_than_any_spelling_is_refused_before_the_cache() -> None:
    before = len(cards._PARSED)
    code = " " * 10**6 + "AH"  # a valid spelling, once the spaces are stripped
    with pytest.raises(InvalidCardError) as caught:
        parse_cards(["2H", code], field="cards")
    assert caught.value.field == "cards[1]"
    assert f"at most {CARD_CODE.most} characters" in caught.value.message
    assert len(str(caught.value)) < 150
    assert len(cards._PARSED) == before


@pytest.mark.parametrize("code", ["10♠\ufe0f", " 10S ", "  ah  ", "10♠\ufe0f    "])
def test_every_spelling_within_the_limit_still_parses(code: str) -> None:
    assert len(code) <= CARD_CODE.most
    assert Card.parse(code).code() in {"10S", "AH"}


def test_the_spellings_cache_stays_small_whatever_comes() -> None:
    for n in range(10_000):
        spaces = n % 4
        with pytest.raises(InvalidCardError):
            Card.parse(" " * spaces + f"Z{n}")
        Card.parse(" " * spaces + "AH" + " " * (n % 3))
    assert len(cards._PARSED) <= 4096
    assert max(map(len, cards._PARSED)) <= CARD_CODE.most
