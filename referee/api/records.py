"""The mapping between deal records (RULES §9) and their protobuf messages, both ways.

``record_from_proto`` reads a DealRecord message into a ``referee.play.record.Record``; an error names
its field relative to the DealRecord in the contract's terms (``turns[3].discard``,
``deck.cards[17]``), and the handler roots it at ``record``. The domain checks a record with its
own field names, in which a deck and a restock are lists of cards (``deck[17]``,
``turns[3].restock[2]``); ``proto_paths`` renames them to the message's fields (``deck.cards[17]``,
``turns[3].restock.cards[2]``).

``replay_to_proto`` gives the answer of a replay; ``record_to_proto`` and ``rules_to_proto`` write
a record and its rules back as a request, for the command line (``simulate --json``, ``replay``
reading the notation).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api.convert import MAX_SCORE, cards_from_proto, close_from_proto, close_kind_to_proto
from referee.game.cards import Card, card_codes, known_card, parse_cards
from referee.game.claims import DealClaims
from referee.game.deal import PlayerHand
from referee.game.errors import InvalidDealError, InvalidRecordError, RefereeError, rooted_at
from referee.game.limits import ELIMINATED, NAME, PILE_CARDS, PLAYERS, SHUFFLE_TEXT, TURNS
from referee.game.rules import (
    DEFAULT_MULTIPLIERS,
    CloseKind,
    DiscardTaken,
    Engine,
    JokerDiscard,
    JokerLimit,
    RuleSet,
    ScoringMode,
)
from referee.play.record import DrawSource, Record, Seat, Turn
from referee.play.replay import Replay, Violation, ViolationCode
from referee.play.shuffle import Shuffle, ShuffleProof

# Enum tables, built from the names so a renamed member fails at import rather than at a call.
_DRAWS = {pb.DrawSource.Value(f"DRAW_SOURCE_{m.name}"): m for m in DrawSource}
_DRAW_NUMBERS = {source: number for number, source in _DRAWS.items()}
_VIOLATION_CODES = {m: pb.ViolationCode.Value(f"VIOLATION_CODE_{m.name}") for m in ViolationCode}
_DISCARD_TAKEN_NUMBERS = {m: pb.DiscardTaken.Value(f"DISCARD_TAKEN_{m.name}") for m in DiscardTaken}
_SHUFFLE_PROOFS = {m: pb.ShuffleProof.Value(f"SHUFFLE_PROOF_{m.name}") for m in ShuffleProof}


# Proto -> domain ------------------------------------------------------------------------------


def record_from_proto(record: pb.DealRecord, rules: RuleSet, turns: tuple[Turn, ...] | None = None) -> Record:
    """The record a DealRecord message gives, under ``rules``; an unnamed seat is ``player<i+1>``.
    ``turns``, when given, are the record's turns already read (the message then holds none).

    Only the message's own shape is checked here (limits, card codes, enum numbers, the shuffle's
    fields); what no deal could leave is ``check_record``'s to find, run by the replay.
    """
    order = record.WhichOneof("order")
    shuffle = record.shuffle
    return record_of(
        [(seat.name, seat.score if seat.HasField("score") else None) for seat in record.seats],
        record.dealer,
        record.deck.cards if order == "deck" else None,
        (shuffle.algorithm, shuffle.server_seed, shuffle.server_seed_hash, shuffle.client_seed, shuffle.nonce)
        if order == "shuffle"
        else None,
        turns,
        record.eliminated,
        rules,
        record.turns,
    )


ShuffleFields = tuple[str, str, str, str, int]  # algorithm, server_seed, server_seed_hash, client_seed, nonce


def record_of(
    seats: Sequence[tuple[str, int | None]],
    dealer: int,
    deck: Sequence[str] | None,
    shuffle: ShuffleFields | None,
    turns: tuple[Turn, ...] | None,
    eliminated: Sequence[str],
    rules: RuleSet,
    message_turns: Sequence[pb.Turn] = (),
) -> Record:
    """The record of a DealRecord's values (``record_from_proto``'s, or the batch's record lane's,
    read from the JSON without a message): each seat's name and score (None: not given), the
    dealer, the deck's card codes or the shuffle's fields (None: not given), the turns read, the
    names out of the match. ``turns`` None: the record's turns are ``message_turns``, read last."""
    PLAYERS.check_count(seats, "seats")
    TURNS.check_count(message_turns if turns is None else turns, "turns")
    ELIMINATED.check_count(eliminated, "eliminated")
    for i, name in enumerate(eliminated):
        NAME.check_length(name, f"eliminated[{i}]")
    read = []
    for i, (name, score) in enumerate(seats):
        NAME.check_length(name, f"seats[{i}].name")
        # As a deal's players: the rule options bound every score parameter the same way.
        if score is not None and abs(score) > MAX_SCORE:
            raise InvalidRecordError(f"seats[{i}].score", score, "a score must be at most 10^9 in size")
        read.append(Seat(name or f"player{i + 1}", score))
    if deck is not None:
        order, seeded = cards_from_proto(deck, "deck.cards", PILE_CARDS), None
    elif shuffle is not None:
        with rooted_at("shuffle"):
            order, seeded = None, shuffle_of(*shuffle)
    else:
        raise InvalidRecordError("deck", None, "a record gives the deck (top first) or a shuffle")
    return Record(
        seats=tuple(read),
        dealer=dealer,
        deck=order,
        shuffle=seeded,
        turns=tuple(_turn_from_proto(turn, i) for i, turn in enumerate(message_turns)) if turns is None else turns,
        eliminated=tuple(eliminated),
        rules=rules,
    )


def shuffle_from_proto(shuffle: pb.Shuffle) -> Shuffle:
    """The seeded shuffle of a Shuffle message; an empty ``server_seed_hash`` is none committed."""
    return shuffle_of(
        shuffle.algorithm, shuffle.server_seed, shuffle.server_seed_hash, shuffle.client_seed, shuffle.nonce
    )


def shuffle_of(algorithm: str, server_seed: str, server_seed_hash: str, client_seed: str, nonce: int) -> Shuffle:
    """The seeded shuffle of a Shuffle message's fields; an empty ``server_seed_hash`` is none committed."""
    for name, text in (
        ("algorithm", algorithm),
        ("server_seed", server_seed),
        ("server_seed_hash", server_seed_hash),
        ("client_seed", client_seed),
    ):
        SHUFFLE_TEXT.check_length(text, name)
    return Shuffle(
        server_seed=server_seed,
        client_seed=client_seed,
        nonce=nonce,
        server_seed_hash=server_seed_hash or None,
        algorithm=algorithm,
    )


def draw_source(number: int) -> DrawSource | None:
    """The draw source of a DrawSource number; None for UNSPECIFIED or a number the contract lacks."""
    return _DRAWS.get(number)


def _turn_from_proto(turn: pb.Turn, i: int) -> Turn:
    draw = _DRAWS.get(turn.draw)
    if draw is None:
        name = pb.DrawSource.Name(turn.draw) if turn.draw in pb.DrawSource.values() else turn.draw
        raise InvalidRecordError(f"turns[{i}].draw", name, "a turn draws from the STOCK or the DISCARD pile")
    restock = None
    # Message presence tells a restock of no cards from none given.
    if turn.HasField("restock"):
        restock = cards_from_proto(turn.restock.cards, f"turns[{i}].restock.cards", PILE_CARDS)
    # A record holds hundreds of card codes: a known spelling is one lookup, and only another
    # goes through Card.parse, which names the field in its error.
    code = turn.discard
    discard = known_card(code) or Card.parse(code, f"turns[{i}].discard")
    code = turn.drawn
    drawn = (known_card(code) or Card.parse(code, f"turns[{i}].drawn")) if code else None
    return Turn(draw, discard, turn.close, turn.seat if turn.HasField("seat") else None, drawn, restock)


def check_claimed_players(claims: DealClaims, seats: int) -> None:
    """Raise naming ``claims.players[c].player`` for a claim about a seat the record does not have
    (a complete record's claims are judged with the scoring; this finds them in any record)."""
    for c, claim in enumerate(claims.players):
        if not 0 <= claim.player < seats:
            raise InvalidDealError(
                f"claims.players[{c}].player", claim.player, f"no such player (0 to {max(seats, 1) - 1})"
            )


# The domain names a deck and a restock as lists of cards; the message holds them in a Pile. A
# restock named alone is the total of all restocks (RESTOCK_CARDS, on Turn.restock): it stays.
_DOMAIN_PILE = re.compile(r"^(deck(?=\[|$)|turns\[\d+\]\.restock(?=\[))")


@contextmanager
def proto_paths() -> Iterator[None]:
    """Re-raise a ``RefereeError`` of the domain's record checks with its field named as in the
    DealRecord message: ``deck[3]`` as ``deck.cards[3]``, ``turns[5].restock[2]`` as
    ``turns[5].restock.cards[2]``."""
    try:
        yield
    except RefereeError as error:
        field = _DOMAIN_PILE.sub(r"\1.cards", error.field, count=1)
        if field == error.field:
            raise
        raise type(error)(field, error.value, error.message) from None


# Domain -> proto ------------------------------------------------------------------------------


def replay_to_proto(result: Replay, into: pb.ReplayDealResponse | None = None) -> pb.ReplayDealResponse:
    """The answer of a replay, without its scored result (the handler adds it, as ScoreDeal gives
    it); written into ``into`` when given, which must be empty."""
    # Set field by field rather than made and copied in: a copy walks the whole answer again.
    response = pb.ReplayDealResponse() if into is None else into
    response.SetInParent()  # present in a verdict even were every field its default
    response.legal = result.legal
    response.turns_played = result.turns_played
    response.complete = result.complete
    response.hands.extend(
        [pb.Player(name=hand.name, cards=card_codes(hand.cards), score=hand.score) for hand in result.hands]
    )
    response.discard_pile.cards.extend(card_codes(result.discard_pile))
    response.discard_pile.SetInParent()
    response.stock.cards.extend(card_codes(result.stock))
    response.stock.SetInParent()
    response.discard = result.discard.code() if result.discard is not None else ""
    response.reshuffles = result.reshuffles
    response.shuffle_proof = shuffle_proof_to_proto(result.shuffle_proof)
    if result.violation is not None:
        response.violation.CopyFrom(violation_to_proto(result.violation))
    if result.to_play is not None:
        response.to_play = result.to_play
    if result.closer is not None:
        response.closer = result.closer
    return response


_VIOLATION_CODE_OF = {number: code for code, number in _VIOLATION_CODES.items()}
_SHUFFLE_PROOF_OF = {number: proof for proof, number in _SHUFFLE_PROOFS.items()}


def replay_from_proto(response: pb.ReplayDealResponse) -> Replay:
    """A ReplayDealResponse read back as the domain's replay, as far as a drawing needs it: the
    violation, the hands, the piles, the seats to play and that closed, the close (the dispute
    report and ``--svg`` draw a reply's JSON)."""
    violation = None
    if response.HasField("violation"):
        found = response.violation
        code = _VIOLATION_CODE_OF.get(found.code)
        if code is None:
            raise InvalidRecordError("violation.code", found.code, "not a violation code")
        violation = Violation(turn=found.turn, seat=found.seat, code=code, message=found.message)
    return Replay(
        violation=violation,
        turns_played=response.turns_played,
        complete=response.complete,
        hands=tuple(PlayerHand(hand.name, parse_cards(list(hand.cards))) for hand in response.hands),
        discard_pile=parse_cards(list(response.discard_pile.cards)),
        stock=parse_cards(list(response.stock.cards)),
        to_play=response.to_play if response.HasField("to_play") else None,
        closer=response.closer if response.HasField("closer") else None,
        discard=Card.parse(response.discard, "discard") if response.discard else None,
        close=close_from_proto(response.result.close) if response.HasField("result") else None,
        reshuffles=response.reshuffles,
        shuffle_proof=shuffle_proof_from_proto(response.shuffle_proof),
    )


def violation_to_proto(violation: Violation) -> pb.Violation:
    """A replay's first violation (ReplayDeal's and ReviewDeal's answers share it)."""
    return pb.Violation(
        turn=violation.turn, seat=violation.seat, code=_VIOLATION_CODES[violation.code], message=violation.message
    )


def shuffle_proof_from_proto(number: int) -> ShuffleProof:
    """The proof of a reply's enum number (an unknown number proves least: an explicit deck)."""
    return _SHUFFLE_PROOF_OF.get(number, ShuffleProof.EXPLICIT_DECK)


def shuffle_proof_to_proto(proof: ShuffleProof) -> pb.ShuffleProof:
    """What a record proves about its deck order, as the contract's enum."""
    return _SHUFFLE_PROOFS[proof]


def violation_code_to_proto(code: ViolationCode) -> pb.ViolationCode:
    """The enum number of a violation code."""
    return _VIOLATION_CODES[code]


def violation_code_name(number: int) -> str:
    """A violation code's name without its prefix (``FALSE_CLOSE``)."""
    return pb.ViolationCode.Name(number).removeprefix("VIOLATION_CODE_")


def record_to_proto(record: Record) -> pb.DealRecord:
    """A DealRecord message of a record (``record_from_proto`` reads it back)."""
    message = pb.DealRecord(
        seats=[pb.Seat(name=seat.name, score=seat.score) for seat in record.seats],
        dealer=record.dealer,
        turns=[_turn_to_proto(turn) for turn in record.turns],
        eliminated=record.eliminated,
    )
    if record.shuffle is not None:
        shuffle = record.shuffle
        message.shuffle.CopyFrom(
            pb.Shuffle(
                algorithm=shuffle.algorithm,
                server_seed=shuffle.server_seed,
                server_seed_hash=shuffle.server_seed_hash or "",
                client_seed=shuffle.client_seed,
                nonce=shuffle.nonce,
            )
        )
    else:
        assert record.deck is not None
        message.deck.CopyFrom(pb.Pile(cards=card_codes(record.deck)))
    return message


def _turn_to_proto(turn: Turn) -> pb.Turn:
    message = pb.Turn(
        seat=turn.seat,
        draw=_DRAW_NUMBERS[turn.draw],
        drawn=turn.drawn.code() if turn.drawn is not None else "",
        discard=turn.discard.code(),
        close=turn.close,
    )
    if turn.restock is not None:
        message.restock.CopyFrom(pb.Pile(cards=card_codes(turn.restock)))
    return message


def rules_to_proto(rules: RuleSet) -> pb.RuleOptions:
    """The RuleOptions message that asks for ``rules``: the options that differ from the defaults."""
    default = RuleSet()
    options = pb.RuleOptions()
    if rules.decks != default.decks:
        options.decks = rules.decks
    if rules.joker_points != default.joker_points:
        options.joker_points = rules.joker_points
    if rules.wrap_runs != default.wrap_runs:
        options.wrap_runs = rules.wrap_runs
    if rules.joker_limit is not JokerLimit.UNLIMITED:
        options.joker_limit = pb.JokerLimit.Value(f"JOKER_LIMIT_{rules.joker_limit.name}")
    if rules.joker_discard is not JokerDiscard.CLEAN:
        options.joker_discard = pb.JokerDiscard.Value(f"JOKER_DISCARD_{rules.joker_discard.name}")
    if rules.discard_taken is not DiscardTaken.ALLOWED:
        options.discard_taken = _DISCARD_TAKEN_NUMBERS[rules.discard_taken]
    if rules.engine is not Engine.CPSAT:
        options.engine = pb.Engine.Value(f"ENGINE_{rules.engine.name}")
    for kind in CloseKind:
        if rules.multiplier(kind) != DEFAULT_MULTIPLIERS[kind]:
            options.multipliers.add(kind=close_kind_to_proto(kind), multiplier=rules.multiplier(kind))
    scoring = rules.scoring
    if scoring != type(scoring)():
        options.scoring.SetInParent()
        if scoring.mode is not None:
            options.scoring.mode = pb.ScoringMode.Value(f"SCORING_MODE_{ScoringMode(scoring.mode).name}")
        for name in ("start_score", "target", "close_bonus", "limit"):
            value = getattr(scoring, name)
            if value is not None:
                setattr(options.scoring, name, value)
    return options


def request_of(record: Record, claims: pb.DealClaims | None = None) -> pb.ReplayDealRequest:
    """The ReplayDealRequest of a record under its own rules."""
    request = pb.ReplayDealRequest(record=record_to_proto(record), rules=rules_to_proto(record.rules))
    if claims is not None:
        request.claims.CopyFrom(claims)
    return request


__all__ = [
    "check_claimed_players",
    "draw_source",
    "proto_paths",
    "record_from_proto",
    "record_to_proto",
    "replay_from_proto",
    "replay_to_proto",
    "request_of",
    "rules_to_proto",
    "shuffle_from_proto",
    "shuffle_proof_from_proto",
    "shuffle_proof_to_proto",
    "violation_code_name",
    "violation_code_to_proto",
    "violation_to_proto",
]
