"""The fast JSON mapping gives exactly what protobuf's json_format gives, errors included."""

from __future__ import annotations

import json
import random

import pytest
from cases import deal_cases, mixed_cases
from google.protobuf import json_format
from played import rules_for

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg
from referee.api.disputes import judge_case
from referee.api.records import request_of
from referee.game.deal import most_players
from referee.game.rules import Engine, RuleSet
from referee.play.simulate import simulate

# Deal records, seeded (a 64-bit nonce, written as a string) and explicit, with a violation or not.
RECORDS = [
    json_format.MessageToJson(
        pb.CheckDisputesRequest(
            id=f"r{seed}", record=request_of(simulate(seed, 3, RuleSet(engine=Engine.SEARCH), seeded=seed % 2 == 0))
        ),
        indent=None,
    )
    for seed in range(6)
]
LINES = [case.text for case in mixed_cases(seed=3)] + [case.text for case in deal_cases(60, seed=4)] + RECORDS
ODD = [
    '{"id": "x", "hand": {"cards": ["AH"], "claimedPoints": 3}}',  # JSON names
    '{"id": "x", "hand": {"cards": ["AH"], "claimed_points": "3"}}',  # a number as a string
    '{"id": "x", "hand": {"cards": ["AH"], "claimed_points": 3.0}}',
    '{"id": "x", "hand": {"cards": ["AH"], "rules": {"joker_limit": 2}}}',  # an enum by number
    '{"id": "x", "hand": {"cards": ["AH"], "rules": {"joker_limit": "NOPE"}}}',
    '{"id": "x", "hand": {"cards": ["AH"]}, "close": {"cards": []}}',  # two members of a oneof
    '{"id": "x", "hand": null}',
    '{"id": "x", "hand": {"cards": "AH"}}',
    '{"id": "x", "id": "y"}',
    # Compact text (no JSON whitespace) is read without a hook on every object: a key given twice,
    # at the top or nested, and the pair '":' within a string must still be told apart.
    '{"id":"x","id":"y"}',
    '{"id":"x","hand":{"cards":["AH"],"cards":["2H"]}}',
    '{"id":"x","record":{"record":{"turns":[{"discard":"AH"},{"discard":"2H","discard":"3H"}]}}}',
    r'{"id":"a\":b","hand":{"cards":["AH"]}}',
    r'{"id":"a\":b","hand":{"cards":["AH"],"cards":["2H"]}}',
    '{"id":"x","hand":{"cards":["AH"],"claimedPoints":3,"claimed_points":4}}',
    '{"id":"x","hand":{"cards":["AH"]}}\n',
    '{"id": "x", "surprise": 1}',
    '{"id": "x", "hand": {"claimed_points": 3000000000}}',
    '{"id": 7}',
    '{"id": "x", "record": {"record": {"shuffle": {"nonce": "18446744073709551615"}}}}',
    '{"id": "x", "record": {"record": {"shuffle": {"nonce": 12}}}}',
    '{"id": "x", "record": {"record": {"shuffle": {"nonce": "1e3"}}}}',
    '{"id": "x", "record": {"record": {"shuffle": {"nonce": -1}}}}',
    '{"id": "x", "record": {"record": {"shuffle": {"nonce": "18446744073709551616"}}}}',
    "[1, 2]",
    "not json",
]


def _parsed(parse, text: str):  # type: ignore[no-untyped-def]
    message = pb.CheckDisputesRequest()
    try:
        parse(text, message)
    except json_format.ParseError as error:
        return ("error", str(error))
    return ("ok", message.SerializeToString(deterministic=True))


@pytest.mark.parametrize("text", LINES + ODD)
def test_parse_matches_json_format(text: str) -> None:
    assert _parsed(jsonmsg.parse, text) == _parsed(json_format.Parse, text)


def test_output_matches_json_format_key_for_key() -> None:
    checked = 0
    for text in LINES:
        case = pb.CheckDisputesRequest()
        try:
            json_format.Parse(text, case)
        except json_format.ParseError:
            continue
        for message in (case, judge_case(case)):
            reference = json_format.MessageToDict(
                message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
            )
            # Same keys in the same order, same values: the same JSON text.
            assert json.dumps(jsonmsg.to_dict(message)) == json.dumps(reference)
            assert jsonmsg.to_json(message) == json.dumps(reference, ensure_ascii=False, separators=(",", ":"))
            checked += 1
    assert checked > 100


def _many_records() -> list[pb.CheckDisputesRequest]:
    """Record cases under drawn rule options (every option the contract has, 2 to 8 players,
    seeded shuffles and explicit decks, unfinished deals, claims of every kind), one illegal in four."""
    rng = random.Random(8)
    found = []
    for seed in range(160):
        rules = rules_for(rng)
        players = rng.randint(2, min(8, most_players(rules.decks)))
        record = simulate(seed, players, rules, seeded=seed % 2 == 0, stacked=seed % 9 == 0, closing=seed % 7 != 0)
        claims = pb.DealClaims(multiplier=rng.randint(0, 4))
        if seed % 3 == 0:
            claims.close_kind = rng.randint(0, 7)
        for player in range(players):
            claim = claims.players.add(player=player, points=rng.randint(0, 40), score_change=rng.randint(-99, 99))
            if seed % 4 == 0:
                claim.new_score = rng.randint(0, 200)
                claim.groups.add(cards=["AH", "2H", "3H"])
        request = request_of(record, claims)
        if seed % 4 == 1 and request.record.turns:
            request.record.turns[0].seat = (request.record.turns[0].seat + 1) % players
        found.append(pb.CheckDisputesRequest(id=f"record-{seed}", record=request))
    return found


def test_many_records_read_and_print_as_json_format_does() -> None:
    verdicts = set()
    for case in _many_records():
        for names in (True, False):  # proto field names, and the JSON (camelCase) names
            text = json_format.MessageToJson(case, indent=None, preserving_proto_field_name=names)
            assert _parsed(jsonmsg.parse, text) == _parsed(json_format.Parse, text)
        verdict = judge_case(case)
        verdicts.add(verdict.outcome)
        for message in (case, verdict):
            reference = json_format.MessageToDict(
                message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
            )
            assert json.dumps(jsonmsg.to_dict(message)) == json.dumps(reference)
            assert jsonmsg.to_json(message) == json.dumps(reference, ensure_ascii=False, separators=(",", ":"))
    assert {pb.DISPUTE_OUTCOME_WRONG, pb.DISPUTE_OUTCOME_ILLEGAL} <= verdicts


def test_unknown_enum_numbers_print_as_numbers_like_json_format() -> None:
    message = pb.Close(kind=99)
    assert jsonmsg.to_dict(message)["kind"] == 99 == json_format.MessageToDict(message)["kind"]
    assert '"kind":99,' in jsonmsg.to_json(message)


def test_text_is_escaped_as_json_dumps_escapes_it() -> None:
    # Quotes, backslashes, control characters and text beyond ASCII, in a name and a case id.
    name = 'a"b\\c\nd\te\x00f\x1f é ñ 漢 \u2028 \U0001f0a1'
    verdict = pb.CheckDisputesResponse(
        id=name, record=pb.ReplayDealResponse(hands=[pb.Player(name=name, cards=["AH"])])
    )
    reference = json_format.MessageToDict(
        verdict, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )
    assert jsonmsg.to_json(verdict) == json.dumps(reference, ensure_ascii=False, separators=(",", ":"))
