"""The size limits of a request (referee.game.limits) and the short quotes of errors: pure checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from protobytes import unknown_field

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import convert, handlers
from referee.api.disputes import judge_case
from referee.api.wire import check_counts
from referee.game import cards
from referee.game.cards import Card, parse_cards
from referee.game.errors import QUOTED_CHARS, InvalidCardError, LimitError, RefereeError, SolverTimeout
from referee.game.limits import CARD_CODE, CLAIMED_PLAYERS, LIMITS, NAME, PLAYERS
from referee.game.linking import check_time_left, time_budget

REQUESTS = (
    pb.SolveHandRequest,
    pb.CheckCloseRequest,
    pb.ScoreDealRequest,
    pb.ReplayDealRequest,
    pb.ReviewDealRequest,
    pb.DrawAnswerRequest,
    pb.CheckDisputesRequest,
)


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
    # A limit may also bound what a message field holds in all (the cards of every Turn.restock).
    fields = set()
    for name, field in _request_fields():
        fields.add(name)
        if field.is_repeated:
            wanted.add(name)
        if field.type == FieldDescriptor.TYPE_STRING:
            wanted.add(name + "[]" if field.is_repeated else name)
    assert wanted - limited == set()
    assert limited - wanted - fields == set(), "the table names a field the contract does not have"


def test_a_count_over_its_limit_names_the_field_and_the_count() -> None:
    PLAYERS.check_count([None] * PLAYERS.most, "deal.players")
    with pytest.raises(LimitError) as caught:
        PLAYERS.check_count([None] * 40_000, "deal.players")
    assert caught.value.field == "deal.players"
    assert caught.value.value == 40_000
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


# Each limit through the handlers: refused naming the request's field path -----------------------


def _deal() -> pb.ScoreDealRequest:
    return pb.ScoreDealRequest(
        deal=pb.Deal(
            players=[
                pb.Player(name="ana", cards="2S 3S 4S 6D 6C 6H 9C 10C JC QC".split()),
                pb.Player(name="bob", cards="AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()),
            ],
            closer=0,
            discard="KH",
        )
    )


def _with(change: Callable[[pb.ScoreDealRequest], object]) -> pb.ScoreDealRequest:
    request = _deal()
    change(request)
    return request


def _claim_groups(request: pb.ScoreDealRequest, groups: int, cards: int) -> None:
    claim = request.claims.players.add(player=1)
    for _ in range(groups):
        claim.groups.add(cards=["AH"] * cards)


OVER = {
    "hand cards": (pb.SolveHandRequest(cards=["AH"] * 40_000), "cards", 40_000),
    "close cards": (pb.CheckCloseRequest(cards=["AH"] * 12), "cards", 12),
    "close discard": (pb.CheckCloseRequest(cards=["AH"] * 10, discard="K" * 100), "discard", "K" * 32 + "…"),
    "multiplier rows": (
        pb.SolveHandRequest(cards=["AH"], rules=pb.RuleOptions(multipliers=[pb.Multiplier(kind=1)] * 8)),
        "rules.multipliers",
        8,
    ),
    "players": (_with(lambda r: r.deal.players.extend([r.deal.players[1]] * 20)), "deal.players", 22),
    "player cards": (_with(lambda r: r.deal.players[1].cards.extend(["AH"] * 40_000)), "deal.players[1].cards", 40_010),
    "player name": (
        _with(lambda r: setattr(r.deal.players[1], "name", "b" * 600_000)),
        "deal.players[1].name",
        "b" * 32 + "…",
    ),
    "eliminated": (_with(lambda r: r.deal.eliminated.extend(["x"] * 22)), "deal.eliminated", 22),
    "eliminated name": (_with(lambda r: r.deal.eliminated.append("x" * 65)), "deal.eliminated[0]", "x" * 32 + "…"),
    "stock": (_with(lambda r: r.deal.stock.cards.extend(["AH"] * 217)), "deal.stock.cards", 217),
    "discard pile": (_with(lambda r: r.deal.discard_pile.cards.extend(["AH"] * 217)), "deal.discard_pile.cards", 217),
    "claims": (_with(lambda r: [r.claims.players.add(player=1) for _ in range(40_000)]), "claims.players", 40_000),
    "claimed groups": (_with(lambda r: _claim_groups(r, 12, 3)), "claims.players[0].groups", 12),
    "claimed group cards": (_with(lambda r: _claim_groups(r, 1, 12)), "claims.players[0].groups[0].cards", 12),
}


def _record(change: Callable[[pb.DealRecord], object]) -> pb.ReplayDealRequest:
    request = pb.ReplayDealRequest(
        record=pb.DealRecord(
            seats=[pb.Seat(name="ana"), pb.Seat(name="bob")],
            shuffle=pb.Shuffle(algorithm="remigio-shuffle-v1", server_seed="ab" * 32),
            turns=[pb.Turn(draw=pb.DRAW_SOURCE_STOCK, discard="AH")],
        )
    )
    change(request.record)
    return request


OVER.update(
    {
        "record seats": (_record(lambda r: r.seats.extend([pb.Seat()] * 20)), "record.seats", 22),
        "record turns": (_record(lambda r: r.turns.extend([r.turns[0]] * 1000)), "record.turns", 1001),
        "record eliminated": (_record(lambda r: r.eliminated.extend(["x"] * 22)), "record.eliminated", 22),
        "seat name": (_record(lambda r: setattr(r.seats[0], "name", "a" * 65)), "record.seats[0].name", "a" * 32 + "…"),
        "turn discard": (
            _record(lambda r: setattr(r.turns[0], "discard", "A" * 9)),
            "record.turns[0].discard",
            "A" * 9,
        ),
        "turn drawn": (_record(lambda r: setattr(r.turns[0], "drawn", " " * 9)), "record.turns[0].drawn", " " * 9),
        "restock": (
            _record(lambda r: r.turns[0].restock.cards.extend(["AH"] * 217)),
            "record.turns[0].restock.cards",
            217,
        ),
        "deck": (_record(lambda r: r.deck.cards.extend(["AH"] * 217)), "record.deck.cards", 217),
        "client seed": (
            _record(lambda r: setattr(r.shuffle, "client_seed", "c" * 65)),
            "record.shuffle.client_seed",
            "c" * 32 + "…",
        ),
        "server seed": (
            _record(lambda r: setattr(r.shuffle, "server_seed", "f" * 100)),
            "record.shuffle.server_seed",
            "f" * 32 + "…",
        ),
    }
)
HANDLERS = {
    pb.SolveHandRequest: handlers.solve_hand,
    pb.CheckCloseRequest: handlers.check_close,
    pb.ScoreDealRequest: handlers.score_deal,
    pb.ReplayDealRequest: handlers.replay_deal,
    pb.ReviewDealRequest: handlers.review_deal,
}


@pytest.mark.parametrize("case", OVER.values(), ids=OVER.keys())
def test_a_field_over_its_limit_is_refused_naming_its_path(case: tuple[Message, str, object]) -> None:
    request, field, value = case
    with pytest.raises(RefereeError) as caught:
        HANDLERS[type(request)](request)
    assert (caught.value.field, caught.value.value) == (field, value)


DISPUTES_OVER = {
    "hand cards": (pb.CheckDisputesRequest(id="a", hand=pb.HandDispute(cards=["AH"] * 12)), "hand.cards", 12),
    "claimed groups": (
        pb.CheckDisputesRequest(
            id="a", hand=pb.HandDispute(cards=["AH"], claimed_groups=[pb.ClaimedGroup(cards=["AH"])] * 12)
        ),
        "hand.claimed_groups",
        12,
    ),
    "claimed group cards": (
        pb.CheckDisputesRequest(
            id="a", hand=pb.HandDispute(cards=["AH"], claimed_groups=[pb.ClaimedGroup(cards=["AH"] * 12)])
        ),
        "hand.claimed_groups[0].cards",
        12,
    ),
    "deal players": (
        pb.CheckDisputesRequest(id="a", deal=_with(lambda r: r.deal.players.extend([r.deal.players[1]] * 20))),
        "deal.deal.players",
        22,
    ),
}


COUNTED_ON_THE_WIRE = {
    "seats": (_record(lambda r: r.seats.extend([pb.Seat()] * 20)), "record.seats", 22),
    "turns": (_record(lambda r: r.turns.extend([pb.Turn()] * 40_000)), "record.turns", "2001 or more"),
    "eliminated": (_record(lambda r: r.eliminated.extend(["x"] * 22)), "record.eliminated", 22),
    "restock": (
        _record(lambda r: r.turns[0].restock.cards.extend(["AH"] * 217)),
        "record.turns[0].restock.cards",
        217,
    ),
}


@pytest.mark.parametrize("case", COUNTED_ON_THE_WIRE.values(), ids=COUNTED_ON_THE_WIRE.keys())
def test_a_record_over_a_count_limit_is_refused_from_its_bytes(case: tuple[Message, str, object]) -> None:
    request, field, value = case
    with pytest.raises(LimitError) as caught:
        check_counts(request.SerializeToString(), pb.ReplayDealRequest.DESCRIPTOR)
    assert (caught.value.field, caught.value.value) == (field, value)


@pytest.mark.parametrize("case", DISPUTES_OVER.values(), ids=DISPUTES_OVER.keys())
def test_a_dispute_case_over_a_limit_is_malformed_naming_its_path(case: tuple[Message, str, object]) -> None:
    request, field, value = case
    verdict = judge_case(request)
    assert verdict.outcome == pb.DISPUTE_OUTCOME_MALFORMED
    assert (verdict.id, verdict.error.field, verdict.error.value) == ("a", field, str(value))


def test_a_case_id_over_its_limit_is_malformed_and_echoed_cut() -> None:
    verdict = judge_case(pb.CheckDisputesRequest(id="i" * 600_000, hand=pb.HandDispute(cards=["AH"])))
    assert verdict.outcome == pb.DISPUTE_OUTCOME_MALFORMED
    assert verdict.id == "i" * 32 + "…"
    assert verdict.error.field == "id"
    assert verdict.ByteSize() < 300


def test_the_rules_cache_keys_on_the_options_not_on_unknown_bytes() -> None:
    options = pb.RuleOptions(decks=3, joker_points=25)
    rules = convert.rules_from_proto(options)
    cached = convert._rules_of.cache_info().currsize
    for n in range(300):
        padded = pb.RuleOptions.FromString(options.SerializeToString() + unknown_field(10_000 + n))
        assert padded.ByteSize() > 10_000
        assert convert.rules_from_proto(padded) is rules
    assert convert._rules_of.cache_info().currsize == cached


def test_work_between_solves_counts_against_the_budget() -> None:
    # Every linking is cached after the first call: a spent budget still stops the call, at the
    # first hand looked up, not after every claim has been judged.
    request = _with(lambda r: [r.claims.players.add(player=1, points=33) for _ in range(CLAIMED_PLAYERS.most)])
    assert len(handlers.score_deal(request).claims) == CLAIMED_PLAYERS.most
    with time_budget(-1), pytest.raises(SolverTimeout):
        handlers.score_deal(request)
    with time_budget(-1), pytest.raises(SolverTimeout):
        check_time_left()
    check_time_left()  # outside any budget


def test_operations_md_quotes_the_table_of_limits() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    for limit in LIMITS:
        fields = ", ".join(f"`{name}`" for name in limit.fields)
        assert f"| {fields} | {limit.most} {limit.unit} | {limit.why} |" in text, limit


def _set_to_other_than_default(message: Message, field: FieldDescriptor) -> None:
    if field.message_type is not None:
        target = getattr(message, field.name)
        inner = target.add() if field.is_repeated else target
        for sub in field.message_type.fields:
            _set_to_other_than_default(inner, sub)
        return
    value = {FieldDescriptor.TYPE_BOOL: True, FieldDescriptor.TYPE_ENUM: 1}.get(field.type, 3)
    if field.is_repeated:
        getattr(message, field.name).append(value)
    else:
        setattr(message, field.name, value)


@pytest.mark.parametrize("path", [f.name for f in pb.RuleOptions.DESCRIPTOR.fields] + ["scoring.*"])
def test_every_rule_option_is_part_of_the_rules_cache_key(path: str) -> None:
    # A field left out of the key would make two different rule sets one cache entry.
    default = convert.options_key(pb.RuleOptions())
    fields = pb.RuleOptions.DESCRIPTOR.fields_by_name
    if path == "scoring.*":
        for sub in pb.ScoringOptions.DESCRIPTOR.fields:
            options = pb.RuleOptions(scoring=pb.ScoringOptions())
            scoring_only = convert.options_key(options)
            _set_to_other_than_default(options.scoring, sub)
            assert convert.options_key(options) not in {default, scoring_only}, sub.name
        return
    options = pb.RuleOptions()
    _set_to_other_than_default(options, fields[path])
    assert convert.options_key(options) != default
