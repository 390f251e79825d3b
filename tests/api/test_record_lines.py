"""The batch's fast lane for deal records gives the message way's verdict, byte for byte.

``referee.api.record_lines`` reads a record case's turns from JSON into the domain and writes the
verdict's text from the domain's answer; the message way (``jsonmsg`` into a protobuf message,
``judge_case``, ``jsonmsg.to_json``) is the contract's definition. Both are run on every record of
the shared corpus (every rule option, 2 to 10 players and more, seeded and explicit decks,
reshuffles, first-turn closes, deals that never close), with claims, on records cut short, on
records broken at a random turn, and on lines the lane must leave to the message way.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from played import Played, corpus

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import handlers, jsonmsg, records
from referee.api.disputes import judge_case
from referee.api.record_lines import PlainCase, decoded, judge_record, read_record_case, read_record_line
from referee.cli.batch import Line, judge_line, parse_case, verdict_json
from referee.game.cards import JOKER, NATURALS
from referee.play.record import Record


def _claims(played: Played, rng: random.Random) -> pb.DealClaims | None:
    """Claims on the result, right and wrong, for most records: every field the verdicts write."""
    if rng.random() < 0.2:
        return None
    claims = pb.DealClaims()
    if rng.random() < 0.6:
        claims.close_kind = rng.choice(pb.CloseKind.values())
    if rng.random() < 0.6:
        claims.multiplier = rng.choice((1, 2, 10))
    for player in rng.sample(range(len(played.record.seats)), min(2, len(played.record.seats))):
        claims.players.add(player=player, points=rng.choice((0, 9, 20)), score_change=rng.choice((0, -9, 40)))
    return claims


def _right_claims(played: Played) -> pb.DealClaims | None:
    """The claims a record's result confirms (None for a record that does not close)."""
    scored = handlers.replay_deal(records.request_of(played.record)).result
    if not scored.players:
        return None
    claims = pb.DealClaims(multiplier=scored.close.multiplier)
    for i, player in enumerate(scored.players[:3]):
        claims.players.add(player=i, points=player.points, score_change=player.score_change)
    return claims


def _line(record: Record, claims: pb.DealClaims | None, case_id: str) -> str:
    request = records.request_of(record, claims)
    return jsonmsg.to_json(pb.CheckDisputesRequest(id=case_id, record=request))


def _message_way(line: Line, engine: str | None = None) -> str:
    case = parse_case(line, engine)
    return case if isinstance(case, str) else verdict_json(judge_case(case))


def _lane(line: Line) -> str | None:
    read = read_record_case(line.text)
    if read is None:
        return None
    case, turns = read
    if not case.id:
        case.id = f"line:{line.number}"
    return judge_record(case, turns)


def _broken(record: Record, rng: random.Random) -> Record:
    """The record with one turn changed at random: a card thrown that may not be in the hand, a
    seat out of turn, a close claimed, a card said drawn; whatever the replay makes of it."""
    if not record.turns:
        return record
    at = rng.randrange(len(record.turns))
    turn = record.turns[at]
    change = rng.randrange(4)
    if change == 0:
        turn = replace(turn, discard=rng.choice((*NATURALS, JOKER)))
    elif change == 1:
        turn = replace(turn, seat=rng.randrange(len(record.seats)))
    elif change == 2:
        turn = replace(turn, close=not turn.close)
    else:
        turn = replace(turn, drawn=rng.choice(NATURALS))
    return replace(record, turns=(*record.turns[:at], turn, *record.turns[at + 1 :]))


def test_every_record_of_the_corpus_gets_the_message_ways_verdict() -> None:
    rng = random.Random(7)
    outcomes = set()
    for played in corpus():
        claims = _claims(played, rng)
        if claims is not None and rng.random() < 0.3:
            claims = _right_claims(played)
        line = Line(played.index + 1, _line(played.record, claims, f"r{played.index}"))
        lane = _lane(line)
        assert lane is not None, played.index  # the lane takes every plain record
        assert lane == _message_way(line), played.index
        # Read straight into the domain's values, with no message: the same bytes.
        assert isinstance(read_record_line(line.text), PlainCase), played.index
        assert judge_line(line) == lane, played.index
        outcomes.add(json.loads(lane)["outcome"])
    assert outcomes >= {"DISPUTE_OUTCOME_CONFIRMED", "DISPUTE_OUTCOME_WRONG", "DISPUTE_OUTCOME_NO_CLAIM"}


def test_records_cut_short_and_broken_get_the_message_ways_verdict() -> None:
    rng = random.Random(11)
    seen = set()
    for played in corpus()[::4]:
        record = played.record
        cut = replace(record, turns=record.turns[: rng.randrange(len(record.turns) + 1)])
        for changed in (cut, _broken(record, rng)):
            line = Line(1, _line(changed, _claims(played, rng), ""))  # no id: line:1
            verdict = judge_line(line)
            assert verdict == _message_way(line), played.index
            seen.add(json.loads(verdict)["outcome"])
    assert {"DISPUTE_OUTCOME_ILLEGAL", "DISPUTE_OUTCOME_NO_CLAIM"} <= seen


def test_the_engine_named_on_the_command_line_reaches_the_lanes_cases() -> None:
    played = corpus()[5]
    line = Line(1, _line(replace(played.record, rules=replace(played.record.rules)), None, "e"))
    for engine in ("search", "cpsat"):
        assert judge_line(line, engine) == _message_way(line, engine)


def _spellings(text: str) -> list[str]:
    """Lines of the same case spelt in ways the lane leaves to the message way, or that it must
    read exactly as the message way does."""
    data = json.loads(text)
    turns = data["record"]["record"]["turns"]
    first = turns[0]
    variants = []

    def variant(change: Callable[[dict[str, Any], dict[str, Any]], object]) -> None:
        copy = json.loads(text)
        change(copy, copy["record"]["record"]["turns"][0])
        variants.append(json.dumps(copy, ensure_ascii=False, separators=(",", ":")))

    variant(lambda case, turn: turn.update(draw=pb.DrawSource.Value(first["draw"])))  # the enum as a number
    variant(lambda case, turn: turn.update(draw="DRAW_SOURCE_UNSPECIFIED"))
    variant(lambda case, turn: turn.update(draw="STOCK"))
    variant(lambda case, turn: turn.update(discard=first["discard"].lower()))  # a spelling Card.parse may know
    variant(lambda case, turn: turn.update(discard="ZZ"))
    variant(lambda case, turn: turn.update(discard=None))
    variant(lambda case, turn: turn.update(seat=True))
    variant(lambda case, turn: turn.update(seat=2**31))
    variant(lambda case, turn: turn.update(seat="1"))
    variant(lambda case, turn: turn.update(close=1))
    variant(lambda case, turn: turn.update(drawn="QQ"))
    variant(lambda case, turn: turn.update(drawn=7))
    variant(lambda case, turn: turn.update(restock={}))
    variant(lambda case, turn: turn.update(restock={"cards": ["AS", "2S"]}))
    variant(lambda case, turn: turn.update(restock={"cards": "AS"}))
    variant(lambda case, turn: turn.update(restock={"cards": [], "other": 1}))
    variant(lambda case, turn: turn.update(restock=None))
    variant(lambda case, turn: turn.update(unknown=1))
    variant(lambda case, turn: turn.pop("discard"))
    variant(lambda case, turn: turn.pop("draw"))
    variant(lambda case, turn: case["record"]["record"].update(turns={}))
    variant(lambda case, turn: case["record"]["record"].update(turns=[1]))
    variant(lambda case, turn: case["record"]["record"].pop("turns"))
    variant(lambda case, turn: case["record"]["record"].update(turns=turns * 200))  # over the limit of turns
    variant(lambda case, turn: case.update(id="x" * 500))
    variant(lambda case, turn: case.update(extra=1))
    variant(lambda case, turn: case["record"].update(rules={"decks": "2"}))
    variant(lambda case, turn: case["record"]["record"].update(dealer=99))
    # Spellings of the same JSON: spaces, a key before its colon, a key given twice.
    variants.append(text.replace('","', '", "'))
    variants.append(text.replace('"discard":', '"discard" :', 1))
    variants.append(text.replace('"draw":', '"close":false,"draw":', 1))  # close given twice
    variants.append(text.replace('{"id":', '{"id":"first","id":', 1))
    variants.append(text.replace('"turns":[', '"turns":[{"draw":"DRAW_SOURCE_STOCK","discard":"\\":"},', 1))
    variants.append(" " + text + "  ")
    variants.append(text[: len(text) // 2])
    # Where the lane cuts the turns out of the text (``"turns":[``, the first ``]``, each ``},{``)
    # inside strings and nested values: a cut in the wrong place must never be read.
    variant(lambda case, turn: turn.update(discard="]"))
    variant(lambda case, turn: turn.update(discard="},{"))
    variant(lambda case, turn: turn.update(drawn='"turns":['))
    variant(lambda case, turn: turn.update(restock={"cards": []}))
    variant(lambda case, turn: turn.update(seat={"a": 1}))
    variant(lambda case, turn: case["record"]["record"]["seats"][0].update(name='x"turns":[{"seat":0}]'))
    variant(lambda case, turn: case["record"]["rules"].update(turns=[]))
    variant(lambda case, turn: case["record"]["record"].update(turns=[turn, turn]))  # a turn's text twice
    variants.append(text.replace('"turns":[', '"turns" :[', 1))
    variants.append(text.replace('"turns":[', '"turns":[ ', 1))
    variants.append(text.replace("},{", "} ,{", 1))
    variants.append(text.replace('"turns":[', '"turns":[],"x":[', 1))
    variants.append(text.replace('"turns":[', '"turns":[{}', 1))
    variants.append(text.replace('"turns":[', '"turns":[{"seat":0,', 1))
    return variants


def test_lines_the_lane_cannot_take_get_the_message_ways_verdict() -> None:
    played = next(p for p in corpus() if len(p.record.turns) > 4 and p.record.shuffle is not None)
    text = _line(played.record, None, "spelt")
    checked = 0
    for number, variant in enumerate(_spellings(text), start=1):
        line = Line(number, variant)
        assert judge_line(line) == _message_way(line), variant[:300]
        checked += 1
    assert checked > 30


def _rest_spellings(text: str) -> list[str]:
    """Lines of the same case with the fields besides the turns spelt in ways the lane reading
    straight into the domain's values leaves to the message way, or must read exactly as it does."""
    variants = []

    def variant(change: Callable[[dict[str, Any], dict[str, Any]], object]) -> None:
        copy = json.loads(text)
        change(copy["record"], copy["record"]["record"])
        variants.append(json.dumps(copy, ensure_ascii=False, separators=(",", ":")))

    variant(lambda request, record: record["seats"][0].update(score=None))
    variant(lambda request, record: record["seats"][0].update(score="5"))
    variant(lambda request, record: record["seats"][0].update(score=2**31))
    variant(lambda request, record: record["seats"][0].update(score=10**9 + 1))
    variant(lambda request, record: record["seats"][0].update(score=1.0))
    variant(lambda request, record: record["seats"][0].pop("score", None))
    variant(lambda request, record: record["seats"][1].update(name=""))
    variant(lambda request, record: record["seats"][1].update(name="José"))
    variant(lambda request, record: record["seats"][1].update(name="x" * 200))
    variant(lambda request, record: record["seats"][1].update(name=record["seats"][0]["name"]))
    variant(lambda request, record: record["seats"][1].update(Name="x"))
    variant(lambda request, record: record["seats"].append("x"))
    variant(lambda request, record: record.update(seats={}))
    variant(lambda request, record: record.update(seats=record["seats"][:1]))
    variant(lambda request, record: record.update(dealer="1"))
    variant(lambda request, record: record.update(dealer=-1))
    variant(lambda request, record: record.update(dealer=None))
    variant(lambda request, record: record.update(eliminated=["zoe"]))
    variant(lambda request, record: record.update(eliminated=[record["seats"][0]["name"]]))
    variant(lambda request, record: record.update(eliminated=[1]))
    variant(lambda request, record: record.update(eliminated="zoe"))
    variant(lambda request, record: record.update(deck={"cards": ["AS", "2S"]}))
    variant(lambda request, record: record.update(deck={}))
    variant(lambda request, record: record.update(shuffle={}))
    variant(lambda request, record: record.update(shuffle=None))
    variant(lambda request, record: record.update(shuffle={"serverSeed": "00"}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "nonce": 7}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "nonce": "007"}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "nonce": "-1"}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "nonce": str(2**64)}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "zz", "client_seed": "ñandú"}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "algorithm": "other"}))
    variant(lambda request, record: record.update(shuffle={"server_seed": "00", "server_seed_hash": "ab"}))
    variant(lambda request, record: request.update(notation=""))
    variant(lambda request, record: request.update(notation=None))
    variant(lambda request, record: request.update(stop_after_turn=3))
    variant(lambda request, record: request.update(rules={}))
    variant(lambda request, record: request.pop("rules", None))
    variant(lambda request, record: request.update(rules={"decks": 2, "joker_points": 0}))
    variant(lambda request, record: request.update(rules={"jokerPoints": 0}))
    variant(lambda request, record: request.update(rules={"decks": 2.0}))
    variant(lambda request, record: request.update(rules={"decks": True}))
    variant(lambda request, record: request.update(rules={"decks": 9}))
    variant(lambda request, record: request.update(rules={"engine": "ENGINE_CPSAT"}))
    variant(lambda request, record: request.update(rules={"scoring": {"mode": "SCORING_MODE_POOL"}}))
    variant(
        lambda request, record: request.update(rules={"multipliers": [{"kind": "CLOSE_KIND_COLOR", "multiplier": 5}]})
    )
    variant(lambda request, record: request.update(rules=[]))
    variant(lambda request, record: request.pop("claims", None))
    variant(lambda request, record: request.update(claims={}))
    variant(lambda request, record: request.update(claims=None))
    variant(lambda request, record: request.update(claims={"multiplier": 0}))
    variant(lambda request, record: request.update(claims={"multiplier": None}))
    variant(lambda request, record: request.update(claims={"multiplier": "2"}))
    variant(lambda request, record: request.update(claims={"close_kind": "CLOSE_KIND_COLOR"}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 9, "points": 1}]}))
    variant(lambda request, record: request.update(claims={"players": [{"points": 0, "new_score": 3}]}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 1, "points": None}]}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 1, "groups": []}]}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 1, "groups": [{"cards": ["AS"]}]}]}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 1, "scoreChange": 3}]}))
    variant(lambda request, record: request.update(claims={"players": [{"player": 1}] * 40}))
    variant(lambda request, record: request.update(claims={"players": {}}))
    # A lone surrogate escaped in the JSON: a string no message holds (no UTF-8 file holds it raw).
    variants.append(text.replace('"name":"', '"name":"\\ud800', 1))
    return variants


def test_the_rest_of_a_record_case_spelt_otherwise_gets_the_message_ways_verdict() -> None:
    seeded = next(p for p in corpus() if len(p.record.turns) > 4 and p.record.shuffle is not None)
    dealt = next(p for p in corpus() if len(p.record.turns) > 4 and p.record.deck is not None)
    plain = 0
    for played in (seeded, dealt):
        text = _line(played.record, None, "rest")
        for number, variant in enumerate(_rest_spellings(text), start=1):
            line = Line(number, variant)
            for engine in (None, "search"):
                assert judge_line(line, engine) == _message_way(line, engine), variant[:300]
            plain += isinstance(read_record_line(variant), PlainCase)
    assert plain > 30  # most of them read straight into the domain's values


def test_a_line_with_its_turns_cut_out_decodes_as_json_reads_it() -> None:
    # The batch's first pass reads every line's id through ``decoded``: the same value as
    # json.loads but for the record's turns, and not JSON exactly when json.loads says so.
    played = next(p for p in corpus() if len(p.record.turns) > 4 and p.record.shuffle is not None)
    texts = [_line(p.record, None, f"d{p.index}") for p in corpus()[:40]]
    texts += _spellings(_line(played.record, None, "spelt"))
    texts += [text[:cut] for text in texts[:10] for cut in range(50, len(text), 97)]
    read = 0
    for text in texts:
        try:
            expected = json.loads(text)
        except ValueError:
            with pytest.raises(ValueError):
                decoded(text)
            continue
        got = decoded(text)
        if got != expected:  # only the record's turns may be left out
            assert got["record"]["record"]["turns"] == [], text[:300]
            got["record"]["record"]["turns"] = expected["record"]["record"]["turns"]
            read += 1
        assert got == expected, text[:300]
    assert read > 40


def test_a_turn_the_lane_reads_is_the_turn_the_message_way_reads() -> None:
    for played in corpus()[:200]:
        text = _line(played.record, None, "t")
        read = read_record_case(text)
        assert read is not None, played.index
        case, turns = read
        message = parse_case(Line(1, text))
        assert not isinstance(message, str)
        rules = played.record.rules
        assert turns == records.record_from_proto(message.record.record, rules).turns, played.index
        assert len(case.record.record.turns) == 0  # the turns are not read twice


def test_a_record_case_with_its_notation_goes_the_message_way() -> None:
    from referee.play.record import format_notation

    played = corpus()[0]
    both = json.loads(_line(played.record, None, "both"))
    both["record"]["notation"] = format_notation(played.record)
    line = Line(1, json.dumps(both))
    assert _lane(line) is None  # the lane reads records, not the notation
    verdict = json.loads(_message_way(line))
    assert verdict["outcome"] == "DISPUTE_OUTCOME_MALFORMED" and verdict["error"]["field"] == "record.notation"
    alone = {"id": "alone", "record": {"notation": format_notation(played.record)}}
    line = Line(2, json.dumps(alone))
    assert _lane(line) is None
    assert json.loads(_message_way(line))["outcome"] != "DISPUTE_OUTCOME_MALFORMED"
