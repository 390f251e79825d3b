"""The batch's fast lane for deal records: a case line in, its verdict line out.

A record case is mostly turns, and its verdict mostly cards, linkings and claims. The message way
(``jsonmsg.parse`` into a ``CheckDisputesRequest``, ``handlers.replay_deal``, ``jsonmsg.to_json``)
builds a protobuf message of every turn, group and claim only to read it again, which cost as
much as the replay and its scoring together. This lane reads the turns from the JSON straight into
the domain's ``Turn`` and writes the verdict's text straight from the domain's answer.

It takes only what it fully recognises: the JSON of a ``record`` case whose keys can be counted
(``jsonmsg.keys_countable``) and whose turns have the plain shape, judged without an error.
Anything else (another kind of case, a spelling it does not know, a malformed record) is left to
the message way, which stays the one definition of the contract: ``remigio-referee batch`` tries
this lane first and falls back to it, and the tests hold the two to the same bytes on every
record of their corpora.

The verdict is written as ``jsonmsg.to_json`` writes the message: in each object, the fields that
are set in field-number order, then the unset fields with no presence (0, "", false, [], the
enum's zero) in declaration order; a field with presence only when set. A field's text is the
same set or unset, so each field below is its key, its text and one of those three states.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring as _quote
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar, cast

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import convert, handlers, jsonmsg, records
from referee.api.disputes import outcome_of
from referee.game.cards import CARD_BY_INDEX, Card, known_card
from referee.game.claims import ClaimVerdict, DealClaims, PlayerClaim, Verdict, judge_deal_claims
from referee.game.closing import Close
from referee.game.deal import PlayerHand
from referee.game.errors import RefereeError
from referee.game.groups import Group, GroupKind
from referee.game.limits import CASE_ID, CLAIMED_PLAYERS, PILE_CARDS
from referee.game.linking import Linking
from referee.game.rules import CloseKind, RuleSet
from referee.game.scoring import DealResult, PlayerResult, score_replayed
from referee.play.record import Record, Turn
from referee.play.replay import Replay, Violation, ViolationCode, replay
from referee.play.shuffle import ShuffleProof

_T = TypeVar("_T")

# The three states of a field (see the module's doc): set is True, unset (a field with no
# presence at its default value: written after the set fields) is False, and absent (a field with
# presence, not set: not written) is None. A no-presence field's state is ``bool(value)``.
_SET = True
_ABSENT = None

_CARDS = tuple(_quote(card.code()) for card in CARD_BY_INDEX)
_INDEX = attrgetter("index")
_GROUP_KINDS = {kind: _quote(pb.GroupKind.Name(convert.group_kind_to_proto(kind))) for kind in GroupKind}
_CLOSE_KINDS = {kind: _quote(pb.CloseKind.Name(convert.close_kind_to_proto(kind))) for kind in (*CloseKind, None)}
_VERDICTS = {verdict: _quote(pb.Verdict.Name(convert.verdict_to_proto(verdict))) for verdict in Verdict}
_VIOLATIONS = {code: _quote(pb.ViolationCode.Name(records.violation_code_to_proto(code))) for code in ViolationCode}
_PROOFS = {proof: _quote(f"SHUFFLE_PROOF_{proof.name}") for proof in ShuffleProof}
_OUTCOMES = {number: _quote(pb.DisputeOutcome.Name(number)) for number in pb.DisputeOutcome.values()}
_BOOLS = ("false", "true")


def _object(fields: Sequence[tuple[str, str, bool | None]]) -> str:
    """A JSON object of ``(key, text, state)`` fields given in field-number order, each key
    quoted with its colon."""
    parts = [key + text for key, text, state in fields if state]
    if len(parts) < len(fields):
        parts += [key + text for key, text, state in fields if state is False]
    return "{" + ",".join(parts) + "}"


def _cards(cards: Sequence[Card]) -> str:
    return "[" + ",".join(map(_CARDS.__getitem__, map(_INDEX, cards))) + "]"


def _each(write: Callable[[_T], str], items: Sequence[_T]) -> str:
    return "[" + ",".join(map(write, items)) + "]"


def _group(group: Group) -> str:
    if group.cards and group.stands_for:  # every group a linking holds: its three fields set
        return (
            '{"kind":'
            + _GROUP_KINDS[group.kind]
            + ',"cards":'
            + _cards(group.cards)
            + ',"stands_for":'
            + _each(_quote, group.stands_for)
            + "}"
        )
    return _object(
        (
            ('"kind":', _GROUP_KINDS[group.kind], _SET),  # every kind of group is a non-zero number
            ('"cards":', _cards(group.cards), bool(group.cards)),
            ('"stands_for":', _each(_quote, group.stands_for), bool(group.stands_for)),
        )
    )


def _linking(linking: Linking) -> str:
    # The two shapes nearly every linking has (a loser's, a closer's), written straight; any other
    # the general way. Both give the same text (tests/api/test_record_lines.py).
    groups, unlinked, points = linking.groups, linking.unlinked, linking.points
    if groups:
        if unlinked and points:
            return (
                '{"groups":'
                + _each(_group, groups)
                + ',"unlinked":'
                + _cards(unlinked)
                + ',"points":'
                + str(points)
                + "}"
            )
        if not unlinked and not points:
            return '{"groups":' + _each(_group, groups) + ',"unlinked":[],"points":0}'
    return _object(
        (
            ('"groups":', _each(_group, linking.groups), bool(linking.groups)),
            ('"unlinked":', _cards(linking.unlinked), bool(linking.unlinked)),
            ('"points":', str(linking.points), bool(linking.points)),
        )
    )


def _close(close: Close) -> str:
    discard = "" if close.discard is None else close.discard.code()
    groups, unlinked = close.linking.groups, close.linking.unlinked
    return _object(
        (
            ('"valid":', _BOOLS[close.valid], bool(close.valid)),
            ('"kind":', _CLOSE_KINDS[close.kind], close.kind is not None),
            ('"multiplier":', str(close.multiplier), bool(close.multiplier)),
            ('"discard":', _quote(discard), bool(discard)),
            ('"groups":', _each(_group, groups), bool(groups)),
            ('"reason":', _quote(close.reason), bool(close.reason)),
            ('"unlinked":', _cards(unlinked), bool(unlinked)),
        )
    )


def _claim(claim: ClaimVerdict) -> str:
    field, claimed, expected, player, name = claim.field, claim.claimed, claim.expected, claim.player, claim.player_name
    if field and claimed and expected and not claim.reason:
        # The two shapes nearly every claim has (on a player, on the deal), written straight.
        text = (
            '{"field":'
            + _quote(field)
            + ',"verdict":'
            + _VERDICTS[claim.verdict]
            + ',"claimed":'
            + _quote(claimed)
            + ',"expected":'
            + _quote(expected)
        )
        if player is not None and name:
            return text + ',"player":' + str(player) + ',"player_name":' + _quote(name) + ',"reason":""}'
        if player is None and not name:
            return text + ',"reason":"","player_name":""}'
    return _object(
        (
            ('"field":', _quote(claim.field), bool(claim.field)),
            ('"verdict":', _VERDICTS[claim.verdict], _SET),  # every verdict is a non-zero number
            ('"claimed":', _quote(claim.claimed), bool(claim.claimed)),
            ('"expected":', _quote(claim.expected), bool(claim.expected)),
            ('"reason":', _quote(claim.reason), bool(claim.reason)),
            ('"player":', str(claim.player), _ABSENT if claim.player is None else _SET),
            ('"player_name":', _quote(claim.player_name), bool(claim.player_name)),
        )
    )


def _player(player: PlayerResult) -> str:
    name, points, change, score = player.name, player.points, player.score_change, player.score
    if name and change and score and not player.eliminated:
        # The two shapes nearly every player has (a loser, the closer), written straight.
        if not player.closer and points:
            return (
                '{"name":'
                + _quote(name)
                + ',"linking":'
                + _linking(player.linking)
                + ',"points":'
                + str(points)
                + ',"score_change":'
                + str(change)
                + ',"score":'
                + str(score)
                + ',"closer":false,"eliminated":false}'
            )
        if player.closer and not points:
            return (
                '{"name":'
                + _quote(name)
                + ',"closer":true,"linking":'
                + _linking(player.linking)
                + ',"score_change":'
                + str(change)
                + ',"score":'
                + str(score)
                + ',"points":0,"eliminated":false}'
            )
    return _object(
        (
            ('"name":', _quote(name), bool(name)),
            ('"closer":', _BOOLS[player.closer], bool(player.closer)),
            ('"linking":', _linking(player.linking), _SET),
            ('"points":', str(points), bool(points)),
            ('"score_change":', str(change), bool(change)),
            ('"score":', str(score), bool(score)),
            ('"eliminated":', _BOOLS[player.eliminated], bool(player.eliminated)),
        )
    )


def _result(result: DealResult, claims: str, claimed: bool) -> str:
    players = [_player(player) for player in result.players]
    winner = result.winner or ""
    return _object(
        (
            ('"close":', _close(result.close), _SET),
            ('"players":', "[" + ",".join(players) + "]", bool(players)),
            ('"match_over":', _BOOLS[result.match_over], bool(result.match_over)),
            ('"winner":', _quote(winner), bool(winner)),
            ('"claims":', claims, bool(claimed)),
        )
    )


def _replay(played: Replay, result: DealResult | None, claims: str, claimed: bool) -> str:
    hands = [_hand(hand) for hand in played.hands]
    violation = played.violation
    discard = "" if played.discard is None else played.discard.code()
    return _object(
        (
            ('"legal":', _BOOLS[played.legal], bool(played.legal)),
            (
                '"violation":',
                "" if violation is None else _violation(violation),
                _ABSENT if violation is None else _SET,
            ),
            ('"turns_played":', str(played.turns_played), bool(played.turns_played)),
            ('"complete":', _BOOLS[played.complete], bool(played.complete)),
            ('"hands":', "[" + ",".join(hands) + "]", bool(hands)),
            ('"discard_pile":', _pile(played.discard_pile), _SET),
            ('"stock":', _pile(played.stock), _SET),
            ('"discard":', _quote(discard), bool(discard)),
            (
                '"result":',
                "" if result is None else _result(result, claims, claimed),
                _ABSENT if result is None else _SET,
            ),
            ('"claims":', claims, bool(claimed)),
            ('"to_play":', str(played.to_play), _ABSENT if played.to_play is None else _SET),
            ('"closer":', str(played.closer), _ABSENT if played.closer is None else _SET),
            ('"reshuffles":', str(played.reshuffles), bool(played.reshuffles)),
            ('"shuffle_proof":', _PROOFS[played.shuffle_proof], _SET),  # never the zero value
        )
    )


def _hand(hand: PlayerHand) -> str:
    if hand.name and hand.cards:  # every hand dealt: its fields set (the score has presence)
        text = '{"name":' + _quote(hand.name) + ',"cards":' + _cards(hand.cards)
        return text + "}" if hand.score is None else text + ',"score":' + str(hand.score) + "}"
    return _object(
        (
            ('"name":', _quote(hand.name), bool(hand.name)),
            ('"cards":', _cards(hand.cards), bool(hand.cards)),
            ('"score":', str(hand.score), _ABSENT if hand.score is None else _SET),
        )
    )


def _violation(violation: Violation) -> str:
    return _object(
        (
            ('"turn":', str(violation.turn), bool(violation.turn)),
            ('"seat":', str(violation.seat), bool(violation.seat)),
            ('"code":', _VIOLATIONS[violation.code], _SET),  # every code is a non-zero number
            ('"message":', _quote(violation.message), bool(violation.message)),
        )
    )


def _pile(cards: Sequence[Card]) -> str:
    return '{"cards":' + _cards(cards) + "}"  # its one field, the same text set or not


# Reading -------------------------------------------------------------------------------------

_CASE_KEYS = frozenset(("id", "record"))
_TURN_KEYS = frozenset(("seat", "draw", "drawn", "discard", "close", "restock"))
_DRAWS = {name: records.draw_source(number) for name, number in pb.DrawSource.items()}


def read_record_case(text: str) -> tuple[pb.CheckDisputesRequest, tuple[Turn, ...]] | None:
    """A record case line as its message less the record's turns, and those turns as the domain's;
    None when this lane does not take the line (it is then the message way's to read)."""
    read = _read(text, None)
    assert not isinstance(read, PlainCase)
    return read


class PlainCase(NamedTuple):
    """A record case read straight into the domain's values (``read_record_line``): its id ("" when
    none is given), rules (the engine completed), record and claims."""

    id: str
    rules: RuleSet
    record: Record
    claims: DealClaims


def read_record_line(text: str, engine: int = 0) -> PlainCase | tuple[pb.CheckDisputesRequest, tuple[Turn, ...]] | None:
    """A record case line read straight into the domain's values when it has the plain shape (every
    field by its own name, of its own JSON type, no claimed groups, an id within its limit), the
    rules' engine ``engine`` (an Engine number) when they name none; else as ``read_record_case``
    reads it (None: the message way's to read)."""
    return _read(text, engine)


def _read(text: str, engine: int | None) -> PlainCase | tuple[pb.CheckDisputesRequest, tuple[Turn, ...]] | None:
    if '"record":{' not in text or not jsonmsg.keys_countable(text):
        return None
    split = _split_turns(text)
    data: Any = None
    if split is not None:
        try:
            data = json.loads(split[0])
        except ValueError:
            data = None
    if data is None:
        split = None
        try:
            data = json.loads(text)
        except ValueError:
            return None
    if type(data) is not dict or not data.keys() <= _CASE_KEYS:
        return None
    request = data.get("record")
    if (
        type(request) is not dict
        or type(request.get("record")) is not dict
        or request.get("notation")
        or "stop_after_turn" in request
    ):
        return None  # a record in the notation is read the message way
    record = request["record"]
    turns = record.get("turns", [])
    if type(turns) is not list:
        return None
    if split is not None and ("turns" not in record or turns):
        return None  # not the record's turns that were cut out: read the line the message way
    try:
        keys = 0
        read: list[Turn] = []
        if split is not None:
            for piece in split[1]:
                known = _known_turn(piece, len(read))
                if known is None:
                    return None
                read.append(known[0])
                keys += known[1]
        else:
            for turn in turns:
                if type(turn) is not dict:
                    return None
                keys += len(turn)
                found = _turn(turn, len(read))
                if found is None:
                    return None
                if found.restock is not None:
                    keys += len(turn["restock"])
                read.append(found)
        if engine is not None:
            plain = _plain(text, data, request, record, tuple(read), keys, engine)
            if plain is not None:
                return plain
        # The case without the record's turns, filled as the message way fills it.
        case = pb.CheckDisputesRequest()
        shorter = {**data, "record": {**request, "record": {k: v for k, v in record.items() if k != "turns"}}}
        keys += jsonmsg.fill(case, shorter) + ("turns" in record)
    except (jsonmsg.Unsupported, RefereeError, UnicodeEncodeError):
        return None  # a string that is not UTF-8 (a lone surrogate escaped) too: the message way's
    # Every key read once: json.loads keeps the last of a key given twice (see jsonmsg.parse).
    if text.count('":') != keys:
        return None
    return case, tuple(read)


# A record's turns are most of its line, and the same turn's text recurs from record to record (a
# seat, a draw, a card or two): each turn object without a restock is read once per worker and
# remembered by its text, and the rest of the line is decoded with the turns cut out. The turns'
# array is cut where ``"turns":[`` is, when the text holds it once, up to the first ``]`` after
# it, at each ``},{``. Every piece must then be a whole JSON object, and the decoded rest must hold
# an empty ``turns`` in the record and nothing the filler does not know. A piece that starts
# where an object starts is a whole JSON object only if it ends where that object ends, so a cut
# at a bracket or a ``},{`` inside a string or a nested value leaves a piece that does not decode:
# the line is then read whole.
_TURNS_KEY = '"turns":['
_KNOWN_TURNS: dict[str, tuple[Turn, int]] = {}
_KNOWN_TURNS_MOST = 1 << 16  # some 20 MB at most; emptied when full


def _split_turns(text: str) -> tuple[str, list[str]] | None:
    """The line with its turns' array emptied, and the texts of the turns; None when the turns
    are not cut out this way (the line is then decoded whole)."""
    at = text.find(_TURNS_KEY)
    if at < 0 or text.find(_TURNS_KEY, at + 1) >= 0:
        return None
    first = at + len(_TURNS_KEY)
    last = text.find("]", first)
    if last < 0:
        return None
    rest = text[:first] + text[last:]
    if last == first:
        return rest, []
    if text[first] != "{" or text[last - 1] != "}":
        return None
    return rest, text[first + 1 : last - 1].split("},{")  # each turn's text less its braces


def decoded(text: str) -> Any:
    """``json.loads(text)``, but for a record case whose turns the lane reads by their text: then
    the record's ``turns`` are an empty list (enough to read the case's id: the batch's first pass
    reads every line's id). Raises ValueError when the text is not JSON, as ``json.loads`` does."""
    split = _split_turns(text)
    if split is not None:
        known = _KNOWN_TURNS.get  # most turns are known: a lookup each, no call on the way
        try:
            whole = all(known(piece) or _known_turn(piece, i) for i, piece in enumerate(split[1]))
        except RefereeError:
            whole = False
        if whole:
            # Every turn a JSON object where it was cut: the text is JSON exactly when the rest is.
            with contextlib.suppress(ValueError):
                return json.loads(split[0])
    return json.loads(text)


def _known_turn(piece: str, i: int) -> tuple[Turn, int] | None:
    """The turn a turn object's text less its braces gives, and its count of keys; None when the
    lane does not take it."""
    known = _KNOWN_TURNS.get(piece)
    if known is not None:
        return known
    try:
        turn = json.loads("{" + piece + "}")
    except ValueError:
        return None
    if type(turn) is not dict:
        return None
    found = _turn(turn, i)
    if found is None:
        return None
    if found.restock is not None:
        return found, len(turn) + len(turn["restock"])  # not remembered: a restock is rare and long
    known = (found, len(turn))
    if len(_KNOWN_TURNS) >= _KNOWN_TURNS_MOST:
        _KNOWN_TURNS.clear()
    _KNOWN_TURNS[piece] = known
    return known


def _turn(turn: dict[str, Any], i: int) -> Turn | None:
    """A turn of the plain shape (every value of its own JSON type, canonical card codes); None otherwise."""
    if not turn.keys() <= _TURN_KEYS:
        return None
    draw = turn.get("draw")
    seat = turn.get("seat")
    close = turn.get("close", False)
    discard_code = turn.get("discard", "")
    drawn_code = turn.get("drawn", "")
    if (
        type(draw) is not str
        or type(discard_code) is not str
        or type(close) is not bool
        or type(drawn_code) is not str
        or ("seat" in turn and not (type(seat) is int and -(2**31) <= seat < 2**31))
    ):
        return None
    draw = _DRAWS.get(draw)
    discard = known_card(discard_code)
    if draw is None or discard is None:
        return None
    drawn = None
    if drawn_code:
        drawn = known_card(drawn_code)
        if drawn is None:
            return None
    restock = None
    if "restock" in turn:
        pile = turn["restock"]
        if type(pile) is not dict or not pile.keys() <= {"cards"}:
            return None
        codes = pile.get("cards", [])
        if type(codes) is not list or not all(type(code) is str for code in codes):
            return None
        restock = convert.cards_from_proto(codes, f"turns[{i}].restock.cards", PILE_CARDS)
    return Turn(draw, discard, close, seat, drawn, restock)


# A record case of the plain shape read straight into the domain's values, with no message on the
# way: what ``jsonmsg.fill`` and the messages' readers (``records.record_from_proto``,
# ``convert.deal_claims_from_proto``) give for it, by the same checks (``records.record_of``). It
# takes each field by its proto name only, each value of its own JSON type (an int32 in range, a
# string that is UTF-8, a nonce as its decimal digits), and no claimed groups: anything
# else is read the message way. The rule options, the same few objects from case to case, are
# read by a message once per worker and remembered by their JSON value.
_REQUEST_KEYS = frozenset(("record", "rules", "claims", "notation"))
_RECORD_KEYS = frozenset(("seats", "dealer", "deck", "shuffle", "turns", "eliminated"))
_SEAT_KEYS = frozenset(("name", "score"))
_SHUFFLE_FIELDS = ("algorithm", "server_seed", "server_seed_hash", "client_seed")
_SHUFFLE_KEYS = frozenset((*_SHUFFLE_FIELDS, "nonce"))
_CLAIMS_KEYS = frozenset(("players", "multiplier", "close_kind"))
_CLOSE_KIND_NUMBERS = dict(pb.CloseKind.items())
_CLAIM_KEYS = frozenset(("player", "points", "score_change", "new_score", "groups"))
_PILE_KEYS = frozenset(("cards",))
_INT32 = range(-(2**31), 2**31)
_UINT64 = range(2**64)
_RULES: dict[tuple[Any, int], tuple[RuleSet, int]] = {}
_RULES_MOST = 256


def _plain(
    text: str,
    data: dict[str, Any],
    request: dict[str, Any],
    record: dict[str, Any],
    turns: tuple[Turn, ...],
    keys: int,
    engine: int,
) -> PlainCase | None:
    """The plain case of a decoded line whose turns are read (``turns``, holding ``keys`` keys);
    None when the line is not of the plain shape, or is one the message way would refuse."""
    case_id = data.get("id", "")
    if not _is_text(case_id) or len(case_id) > CASE_ID.most:
        return None
    if not request.keys() <= _REQUEST_KEYS or not record.keys() <= _RECORD_KEYS:
        return None
    if request.get("notation", "") != "":
        return None  # the notation is the message way's (an empty one is no notation)
    keys += len(data) + len(request) + len(record)
    try:
        found = _rules(request.get("rules", _NONE), engine)
        if found is None:
            return None
        rules, rule_keys = found
        keys += rule_keys
        seats = []
        for seat in _plain_list(record.get("seats", [])):
            if type(seat) is not dict or not seat.keys() <= _SEAT_KEYS:
                return None
            keys += len(seat)
            name = seat.get("name", "")
            score = seat.get("score")
            if not _is_text(name) or not (score is None and "score" not in seat or _is_int32(score)):
                return None
            seats.append((name, score))
        dealer = record.get("dealer", 0)
        eliminated = _plain_list(record.get("eliminated", []))
        if not _is_int32(dealer) or not all(map(_is_text, eliminated)):
            return None
        deck = shuffle = None
        if "deck" in record:
            pile = record["deck"]
            if "shuffle" in record or type(pile) is not dict or not pile.keys() <= _PILE_KEYS:
                return None
            keys += len(pile)
            deck = _plain_list(pile.get("cards", []))
            if not all(map(_is_text, deck)):
                return None
        elif "shuffle" in record:
            given = record["shuffle"]
            if type(given) is not dict or not given.keys() <= _SHUFFLE_KEYS:
                return None
            keys += len(given)
            fields = [given.get(name, "") for name in _SHUFFLE_FIELDS]
            nonce = given.get("nonce", 0)
            if type(nonce) is str and nonce.isascii() and nonce.isdigit() and len(nonce) <= 20:
                nonce = int(nonce)
            if not all(map(_is_text, fields)) or type(nonce) is not int or nonce not in _UINT64:
                return None
            shuffle = (fields[0], fields[1], fields[2], fields[3], nonce)
        claims_given = request.get("claims", _NONE)
        if type(claims_given) is not dict or not claims_given.keys() <= _CLAIMS_KEYS:
            return None
        keys += len(claims_given)
        players = []
        for claim in _plain_list(claims_given.get("players", [])):
            if type(claim) is not dict or not claim.keys() <= _CLAIM_KEYS or claim.get("groups", []) != []:
                return None  # a claim's groups, when given, are the message way's to read
            keys += len(claim)
            player = claim.get("player", 0)
            points, change, new_score = claim.get("points"), claim.get("score_change"), claim.get("new_score")
            if not (
                _is_int32(player)
                and (points is None and "points" not in claim or _is_int32(points))
                and (change is None and "score_change" not in claim or _is_int32(change))
                and (new_score is None and "new_score" not in claim or _is_int32(new_score))
            ):
                return None
            players.append(PlayerClaim(player=player, points=points, score_change=change, new_score=new_score))
        multiplier = claims_given.get("multiplier")
        if not (multiplier is None and "multiplier" not in claims_given or _is_int32(multiplier)):
            return None
        kind = None
        if "close_kind" in claims_given:  # by its name or its number, as the filler reads an enum
            number = claims_given["close_kind"]
            if type(number) is str:
                number = _CLOSE_KIND_NUMBERS.get(number)
            if not _is_int32(number):
                return None
            kind = convert.close_kind_from_proto(number, "close_kind")
        # Every key read once: json.loads keeps the last of a key given twice (see jsonmsg.parse).
        if text.count('":') != keys:
            return None
        CLAIMED_PLAYERS.check_count(players, "players")
        no_close = "close_kind" in claims_given and kind is None  # the claim that the close is not valid
        claims = DealClaims(players=tuple(players), close_kind=kind, multiplier=multiplier, no_close=no_close)
        read = records.record_of(seats, dealer, deck, shuffle, turns, eliminated, rules)
    except (RefereeError, _NotPlain):
        return None  # the message way reads it, and names any error
    return PlainCase(case_id, rules, read, claims)


_NONE: dict[str, Any] = {}  # a message not given reads as an empty one


def _plain_list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _NotPlain
    return value


class _NotPlain(Exception):
    """A value of another shape than the plain case's (the line is read the message way)."""


def _is_text(value: Any) -> bool:
    # A string that is UTF-8 sets a string field as it is; one that is not (a lone surrogate
    # escaped in the JSON) is the message way's to judge.
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_int32(value: Any) -> bool:
    return type(value) is int and value in _INT32


def _rules(given: Any, engine: int) -> tuple[RuleSet, int] | None:
    """The rule set of a rule options' JSON object, its engine ``engine`` when it names none, and
    the count of its keys; None when the message way would not take it."""
    if type(given) is not dict:
        return None
    key = (_frozen(given), engine)
    found = _RULES.get(key)
    if found is None:
        options = pb.RuleOptions()
        try:
            keys = jsonmsg.fill(options, given)
        except jsonmsg.Unsupported:
            return None
        if engine and not options.engine:
            # The enum's number, which is what the field holds at run time (the stub names the enum).
            cast(Any, options).engine = engine
        found = (convert.rules_from_proto(options), keys)
        if len(_RULES) >= _RULES_MOST:
            _RULES.clear()
        _RULES[key] = found
    return found


def _frozen(value: Any) -> Any:
    """A JSON value as a key: equal exactly for the same JSON value (1, 1.0 and true apart)."""
    kind = type(value)
    if kind is dict:
        return (dict, tuple([(name, _frozen(item)) for name, item in value.items()]))
    if kind is list:
        return (list, tuple(map(_frozen, value)))
    return (kind, value)


# Judging -------------------------------------------------------------------------------------


def judge_record(case: pb.CheckDisputesRequest, turns: tuple[Turn, ...]) -> str | None:
    """The verdict line on a record case read by ``read_record_case`` (its id and engine already
    completed), as ``judge_case`` and ``jsonmsg.to_json`` give it; None when judging it meets an
    error (the message way names it)."""
    request = case.record
    try:
        rules = convert.rules_from_proto(request.rules)
        record = records.record_from_proto(request.record, rules, turns=turns)
        claims = convert.deal_claims_from_proto(request.claims)
    except RefereeError:
        return None
    return _judged(case.id, rules, record, claims)


def judge_plain(case: PlainCase, number: int) -> str | None:
    """The verdict line on a plain record case read by ``read_record_line``, line ``number`` of its
    input (its id ``line:N`` when it gives none), as ``judge_record`` gives it."""
    return _judged(case.id or f"line:{number}", case.rules, case.record, case.claims)


def _judged(case_id: str, rules: RuleSet, record: Record, claims: DealClaims) -> str | None:
    try:
        records.check_claimed_players(claims, len(record.seats))
        played = replay(record, handlers.committed_shuffles_required())
        result = None
        verdicts: list[ClaimVerdict] = []
        if played.deal is not None:
            assert played.close is not None  # a closed deal's verdict
            result = score_replayed(played.deal, rules, played.close)
            verdicts = judge_deal_claims(claims, result, [player.cards for player in played.deal.players], rules)
    except RefereeError:
        return None
    # The verdict, its record and the record's result hold the same claims.
    text = _each(_claim, verdicts)
    if played.legal:
        outcome = outcome_of({convert.verdict_to_proto(claim.verdict) for claim in verdicts})
    else:
        outcome = pb.DISPUTE_OUTCOME_ILLEGAL
    return _object(
        (
            ('"id":', _quote(case_id), bool(case_id)),
            ('"outcome":', _OUTCOMES[outcome], _SET),
            ('"claims":', text, bool(verdicts)),
            ('"record":', _replay(played, result, text, bool(verdicts)), _SET),
        )
    )


__all__ = ["PlainCase", "decoded", "judge_plain", "judge_record", "read_record_case", "read_record_line"]
