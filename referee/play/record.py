"""A deal record (RULES §9): the seats, the dealer, the deck order, every turn; and its notation.

A record says what was played, not whether it was legal: ``referee.play.replay`` judges that. What
this module refuses is a record no deal could have left, whatever was played (a deck that is not
the deck, a seat that does not exist, a record over the size limits): ``check_record`` raises
naming the field relative to the record (``turns[3].seat``).

The notation (``parse_notation`` and ``format_notation``, specified in ``docs/records.md``) is to a
deal what PGN is to a chess game: tag pairs for the rules, the seats, the dealer and the deck
order, then the numbered turns, one a line::

    [DiscardTaken "FORBIDDEN"]
    [Seat "ana" "120"]
    [Seat "beto" "80"]
    [Dealer "beto"]
    [Shuffle "remigio-shuffle-v1"]
    [ServerSeed "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"]
    [Nonce "1"]

    1. @ana S=4D 7H
    2. D 7H 9C
    3. S KS#
"""

from __future__ import annotations

import enum
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter

from referee.game.cards import Card, check_copies, deck, deck_counts, deck_size, format_cards, parse_cards
from referee.game.deal import MIN_PLAYERS, most_players
from referee.game.errors import InvalidCardError, InvalidNotationError, InvalidRecordError, RefereeError, rooted_at
from referee.game.kinds import Kind
from referee.game.limits import ELIMINATED, NAME, PILE_CARDS, PLAYERS, RESTOCK_CARDS, TURNS
from referee.game.rules import (
    DEFAULT_MULTIPLIERS,
    RULE_OPTIONS,
    CloseKind,
    RuleSet,
    ScoringMode,
    ScoringRules,
)
from referee.game.scoring import check_reachable
from referee.play.shuffle import ALGORITHM, Shuffle, ShuffleProof, dealt_deck


class DrawSource(Kind):
    """Where a turn's card is drawn from (RULES §9.2)."""

    STOCK = "STOCK"  # the top of the stock
    DISCARD = "DISCARD"  # the face-up top of the discard pile


@dataclass(frozen=True, slots=True)
class Seat:
    """A player at the table: a name unique at the table, and the match score before the deal (None: the start)."""

    name: str
    score: int | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: the draw, the card thrown face up (or laid face down when ``close``), and what
    the record may state besides: the seat playing, the card drawn, the new stock of a reshuffle."""

    draw: DrawSource
    discard: Card
    close: bool = False
    seat: int | None = None
    drawn: Card | None = None
    # The new stock (top first) of the reshuffle a draw from the empty stock needs: an explicit
    # deck's record gives it; a seeded one need not (it is derived, and checked when given).
    restock: tuple[Card, ...] | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A deal as played: seats in order, the dealer, the deck order (an explicit deck, top first,
    or a seeded shuffle), the turns, the players already out of the match, and the rules."""

    seats: tuple[Seat, ...]
    dealer: int = 0
    deck: tuple[Card, ...] | None = None
    shuffle: Shuffle | None = None
    turns: tuple[Turn, ...] = ()
    eliminated: tuple[str, ...] = ()
    rules: RuleSet = field(default_factory=RuleSet)

    @property
    def shuffle_proof(self) -> ShuffleProof:
        """What the record proves about its deck order: an explicit deck proves nothing of when it
        was chosen; a seeded shuffle is committed when it gives the hash published before the deal."""
        return ShuffleProof.EXPLICIT_DECK if self.shuffle is None else self.shuffle.proof

    def deck_order(self) -> tuple[Card, ...]:
        """The deck the deal was dealt from, top first: the explicit deck, or the seeded shuffle's."""
        if self.deck is not None:
            return self.deck
        assert self.shuffle is not None, "a checked record has a deck or a shuffle"
        return dealt_deck(self.shuffle, self.rules.decks)


def check_record(record: Record) -> None:
    """Raise naming the field (relative to the record) and the value when no deal could leave this record."""
    rules = record.rules
    seats = record.seats
    PLAYERS.check_count(seats, "seats")
    most = most_players(rules.decks)
    if not MIN_PLAYERS <= len(seats) <= most:
        raise InvalidRecordError(
            "seats", len(seats), f"a deal with {rules.decks} decks has {MIN_PLAYERS} to {most} seats"
        )
    ELIMINATED.check_count(record.eliminated, "eliminated")
    for i, name in enumerate(record.eliminated):
        _check_name(name, f"eliminated[{i}]")
    out = set(record.eliminated)
    scoring = rules.scoring.resolved(len(seats))
    names: dict[str, int] = {}
    for i, seat in enumerate(seats):
        if not isinstance(seat, Seat):
            raise InvalidRecordError(f"seats[{i}]", seat, "a seat has a name and an optional score")
        _check_name(seat.name, f"seats[{i}].name")
        if seat.name in names:
            raise InvalidRecordError(f"seats[{i}].name", seat.name, f"the same name as seats[{names[seat.name]}]")
        names[seat.name] = i
        if seat.name in out:
            raise InvalidRecordError(f"seats[{i}].name", seat.name, "this player is already out of the match")
        if seat.score is not None:
            if isinstance(seat.score, bool) or not isinstance(seat.score, int):
                raise InvalidRecordError(f"seats[{i}].score", seat.score, "a score is an integer")
            check_reachable(seat.score, scoring, f"seats[{i}].score")
    dealer = record.dealer
    if isinstance(dealer, bool) or not isinstance(dealer, int) or not 0 <= dealer < len(seats):
        raise InvalidRecordError("dealer", dealer, f"the dealer is a seat index 0 to {len(seats) - 1}")
    _check_order(record)
    _check_turns(record.turns, len(seats))


def _check_name(name: object, field: str) -> None:
    if not isinstance(name, str):
        raise InvalidRecordError(field, name, "a name is a string")
    NAME.check_length(name, field)


def _check_order(record: Record) -> None:
    """Exactly one deck order: an explicit deck that is the whole deck, or a shuffle."""
    if record.deck is not None and record.shuffle is not None:
        raise InvalidRecordError("shuffle", record.shuffle.algorithm, "a record gives a deck or a shuffle, not both")
    if record.shuffle is not None:
        if not isinstance(record.shuffle, Shuffle):
            raise InvalidRecordError("shuffle", record.shuffle, "not a shuffle")
        return
    cards = record.deck
    if cards is None:
        raise InvalidRecordError("deck", None, "a record gives the deck (top first) or a shuffle")
    decks = record.rules.decks
    PILE_CARDS.check_count(cards, "deck")
    try:
        # The common case, the whole deck, in one sort in C; the reason is found only for an error.
        if sorted(map(_INDEX, cards)) == _deck_indices(decks):
            return
    except (AttributeError, TypeError):
        pass  # not all cards: found below
    _check_cards(cards, "deck")
    check_copies(cards, decks, lambda i: f"deck[{i}]")
    # With no card beyond its copies, the right count means every card is there.
    if len(cards) != deck_size(decks):
        missing = deck_counts(decks) - Counter(cards)
        first = min(missing, key=lambda card: card.index).code()
        raise InvalidRecordError(
            "deck",
            len(cards),
            f"the deck of {decks} decks holds {deck_size(decks)} cards, each once; "
            f"missing: {sum(missing.values())} (the first {first})",
        )


_INDEX = attrgetter("index")


@lru_cache(maxsize=8)
def _deck_indices(decks: int) -> list[int]:
    """The card indices of the whole deck, sorted."""
    return sorted(card.index for card in deck(decks))


def _check_cards(cards: Sequence[object], field: str) -> None:
    """Raise naming ``field[i]`` for the first item that is not a card."""
    for i, card in enumerate(cards):
        if not isinstance(card, Card):
            raise InvalidCardError(f"{field}[{i}]", card, "not a card")


def _check_turns(turns: Sequence[Turn], seats: int) -> None:
    TURNS.check_count(turns, "turns")
    stock, discard = DrawSource.STOCK, DrawSource.DISCARD
    restocked = 0
    for i, turn in enumerate(turns):
        # The common case in one test per field; the reason is found only for an error.
        seat = turn.seat
        if seat is not None and (type(seat) is not int or not 0 <= seat < seats):
            raise InvalidRecordError(f"turns[{i}].seat", seat, f"a seat index 0 to {seats - 1}")
        if turn.draw is not stock and turn.draw is not discard:
            raise InvalidRecordError(f"turns[{i}].draw", turn.draw, "a turn draws from the STOCK or the DISCARD pile")
        if not isinstance(turn.discard, Card):
            raise InvalidCardError(f"turns[{i}].discard", turn.discard, "not a card")
        if turn.drawn is not None and not isinstance(turn.drawn, Card):
            raise InvalidCardError(f"turns[{i}].drawn", turn.drawn, "not a card")
        if turn.close is not True and turn.close is not False:
            raise InvalidRecordError(f"turns[{i}].close", turn.close, "close is true or false")
        if turn.restock is not None:
            PILE_CARDS.check_count(turn.restock, f"turns[{i}].restock")
            _check_cards(turn.restock, f"turns[{i}].restock")
            restocked += len(turn.restock)
            if restocked > RESTOCK_CARDS.most:
                raise InvalidRecordError(
                    f"turns[{i}].restock",
                    restocked,
                    f"the restocks of a record hold at most {RESTOCK_CARDS.most} cards together",
                )


# The notation ---------------------------------------------------------------------------------

# One tag a line: a name and one or more values, each a JSON string (PGN's quoting, with JSON's
# escapes, so any name or client seed can be written).
_TAG = re.compile(r'\[([A-Za-z]+)((?:\s+"(?:[^"\\]|\\.)*")+)\s*\]\s*(?:;.*)?')
_TAG_VALUE = re.compile(r'"(?:[^"\\]|\\.)*"')
_TOKEN = re.compile(r'\s+|;.*|(@"(?:[^"\\]|\\.)*"|[()#]|[^\s()#;"]+)')
_NUMBER = re.compile(r"(\d{1,9})\.")
_DRAW = re.compile(r"([SsDd])(?:=(.*))?")
_BARE_NAME = re.compile(r'[^\s()#;"@\\]+')
_INTEGER = re.compile(r"-?\d{1,20}")  # a nonce takes up to 20 digits
_DRAW_CODES = {"S": DrawSource.STOCK, "D": DrawSource.DISCARD}
_DRAW_LETTERS = {DrawSource.STOCK: "S", DrawSource.DISCARD: "D"}

# Rule tags: the tag, the RuleSet attribute (scoring.* for the scoring rules) and how its value
# reads. Each declared option's own (referee.game.rules.RULE_OPTIONS), the scoring rules' before the
# engine's.
_SCORING_TAGS: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("Mode", "scoring.mode", ScoringMode),
    ("StartScore", "scoring.start_score", int),
    ("Target", "scoring.target", int),
    ("CloseBonus", "scoring.close_bonus", int),
    ("Limit", "scoring.limit", int),
)
_RULE_TAGS: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    *((option.tag, option.name, option.read) for option in RULE_OPTIONS if option.name != "engine"),
    *_SCORING_TAGS,
    *((option.tag, option.name, option.read) for option in RULE_OPTIONS if option.name == "engine"),
)
_RULE_TAG = {tag: (attribute, read) for tag, attribute, read in _RULE_TAGS}
_SHUFFLE_TAGS = {"ServerSeed": "server_seed", "ServerSeedHash": "server_seed_hash", "ClientSeed": "client_seed"}
_ONCE = {*_RULE_TAG, "Dealer", "Deck", "Shuffle", *_SHUFFLE_TAGS, "Nonce"}
_TAGS = {*_ONCE, "Seat", "Eliminated", "Multiplier"}


def _quote(text: str) -> str:
    """``text`` as a JSON string, with the characters some readers take for a line break escaped."""
    return json.dumps(text, ensure_ascii=False).translate(_LINE_BREAKS)


# JSON escapes the control characters but leaves these, which str.splitlines and editors break on.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _tag(name: str, *values: object) -> str:
    return f"[{name} {' '.join(_quote(str(value)) for value in values)}]"


def _rule_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def format_notation(record: Record) -> str:
    """The record in the notation of ``docs/records.md``: rule tags that differ from the defaults,
    the seats, the dealer, the players out, the deck order, then one turn a line."""
    check_record(record)
    lines = []
    rules, default = record.rules, RuleSet()
    for tag, attribute, _ in _RULE_TAGS:
        if tag == "Mode":
            lines += [_tag("Multiplier", kind.value, rules.multiplier(kind)) for kind in _changed_multipliers(rules)]
        value, usual = _attribute(rules, attribute), _attribute(default, attribute)
        if value != usual:
            lines.append(_tag(tag, _rule_value(value)))
    for seat in record.seats:
        lines.append(_tag("Seat", seat.name) if seat.score is None else _tag("Seat", seat.name, seat.score))
    lines.append(_tag("Dealer", record.seats[record.dealer].name))
    lines += [_tag("Eliminated", name) for name in record.eliminated]
    if record.shuffle is not None:
        shuffle = record.shuffle
        lines.append(_tag("Shuffle", shuffle.algorithm))
        lines.append(_tag("ServerSeed", shuffle.server_seed))
        if shuffle.server_seed_hash is not None:
            lines.append(_tag("ServerSeedHash", shuffle.server_seed_hash))
        if shuffle.client_seed:
            lines.append(_tag("ClientSeed", shuffle.client_seed))
        lines.append(_tag("Nonce", shuffle.nonce))
    else:
        assert record.deck is not None
        lines.append(_tag("Deck", format_cards(record.deck)))
    lines.append("")
    names = [seat.name for seat in record.seats]
    lines += [f"{number}. {format_turn(turn, names)}" for number, turn in enumerate(record.turns, 1)]
    return "\n".join(lines) + "\n"


def format_turn(turn: Turn, names: Sequence[str]) -> str:
    """One turn in the notation, without its number: ``@ana (5C 4D) S=5C 7H#``."""
    parts = []
    if turn.seat is not None:
        name = names[turn.seat]
        parts.append("@" + (name if _BARE_NAME.fullmatch(name) else _quote(name)))
    if turn.restock is not None:
        parts.append(f"({format_cards(turn.restock)})")
    draw = _DRAW_LETTERS[turn.draw]
    parts.append(draw if turn.drawn is None else f"{draw}={turn.drawn.code()}")
    parts.append(turn.discard.code() + ("#" if turn.close else ""))
    return " ".join(parts)


def _changed_multipliers(rules: RuleSet) -> list[CloseKind]:
    return [kind for kind in CloseKind if rules.multiplier(kind) != DEFAULT_MULTIPLIERS[kind]]


def _attribute(rules: RuleSet, attribute: str) -> object:
    if attribute.startswith("scoring."):
        return getattr(rules.scoring, attribute.removeprefix("scoring."))
    return getattr(rules, attribute)


class _Reader:
    """The state of one parse: what each tag said, and the line each field of the record came from."""

    def __init__(self) -> None:
        self.rules: dict[str, object] = {}
        self.scoring: dict[str, object] = {}
        self.multipliers: dict[CloseKind, int] = {}
        self.seats: list[Seat] = []
        self.names: dict[str, int] = {}
        self.dealer: tuple[int, str] | None = None
        self.eliminated: list[str] = []
        self.deck: tuple[Card, ...] | None = None
        self.shuffle: dict[str, object] = {}
        self.turns: list[Turn] = []
        self.seen: set[str] = set()
        # Field path of the record (or of a rule, under "rules.") -> the line that gave it.
        self.lines: dict[str, int] = {}
        self.last_line = 1

    def line_of(self, path: str) -> int:
        """The line that gave the field at ``path``, or the closest enclosing field's."""
        best, found = "", self.last_line
        for prefix, line in self.lines.items():
            if len(prefix) > len(best) and (path == prefix or path.startswith((prefix + ".", prefix + "["))):
                best, found = prefix, line
        return found


def parse_notation(text: str) -> Record:
    """Read a record in the notation of ``docs/records.md``; an error names the line and the value."""
    if not isinstance(text, str):
        raise InvalidNotationError("line 1", text, "a record in the notation is text")
    reader = _Reader()
    tokens: list[tuple[int, str]] = []
    # Lines end at a newline only: a quoted name may hold any other character.
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if line.startswith("["):
            if tokens:
                raise InvalidNotationError(f"line {number}", line, "a tag after the first turn")
            try:
                _read_tag(reader, line, number)
            except InvalidNotationError:
                raise
            except RefereeError as error:
                raise _at_line(error, number) from None
            reader.last_line = number
        else:
            tokens += _tokens(line, number)
    _read_turns(reader, tokens)
    record = _build(reader)
    try:
        check_record(record)
    except RefereeError as error:
        raise _at_line(error, reader.line_of(error.field)) from None
    return record


def _at_line(error: RefereeError, line: int) -> RefereeError:
    """``error`` with the line as its field and its own field path leading the message."""
    message = f"{error.field}: {error.message}" if error.field else error.message
    return InvalidNotationError(f"line {line}", error.value, message)


def _tokens(line: str, number: int) -> Iterator[tuple[int, str]]:
    position = 0
    while position < len(line):
        match = _TOKEN.match(line, position)
        if match is None:
            raise InvalidNotationError(f"line {number}", line[position:], 'a quote outside a quoted name (@"name")')
        if match.group(1) is not None:
            yield number, match.group(1)
        position = match.end()


def _read_tag(reader: _Reader, line: str, number: int) -> None:
    match = _TAG.fullmatch(line)
    where = f"line {number}"
    if match is None:
        raise InvalidNotationError(where, line, 'a tag is [Name "value"], values quoted')
    name = match.group(1)
    try:
        values: list[str] = [json.loads(value) for value in _TAG_VALUE.findall(match.group(2))]
    except ValueError:
        raise InvalidNotationError(where, match.group(2).strip(), "a tag's value is a quoted string") from None
    if name not in _TAGS:
        raise InvalidNotationError(where, name, f"unknown tag (known: {', '.join(sorted(_TAGS))})")
    if name in _ONCE:
        if name in reader.seen:
            raise InvalidNotationError(where, name, "this tag is given twice")
        reader.seen.add(name)
    wanted = {"Seat": (1, 2), "Multiplier": (2,)}.get(name, (1,))
    if len(values) not in wanted:
        raise InvalidNotationError(where, name, f"this tag takes {' or '.join(map(str, wanted))} quoted values")
    value = values[0]
    if name in _RULE_TAG:
        attribute, read = _RULE_TAG[name]
        if read is int:
            parsed: object = _integer(value, where)
        else:
            try:
                parsed = read(value)
            except (KeyError, ValueError):
                raise InvalidNotationError(where, value, f"not a value of {name}") from None
        if attribute.startswith("scoring."):
            reader.scoring[attribute.removeprefix("scoring.")] = parsed
        else:
            reader.rules[attribute] = parsed
        reader.lines[f"rules.{attribute}"] = number
    elif name == "Multiplier":
        try:
            kind = CloseKind(value)
        except ValueError:
            raise InvalidNotationError(where, value, "not a close kind") from None
        if kind in reader.multipliers:
            raise InvalidNotationError(where, value, "this close kind's multiplier is given twice")
        reader.multipliers[kind] = _integer(values[1], where)
        reader.lines[f"rules.multipliers[{kind.value}]"] = number
    elif name == "Seat":
        if value in reader.names:
            raise InvalidNotationError(where, value, "two seats of this name")
        score = _integer(values[1], where) if len(values) == 2 else None
        reader.lines[f"seats[{len(reader.seats)}]"] = number
        reader.lines.setdefault("seats", number)
        reader.names[value] = len(reader.seats)
        reader.seats.append(Seat(value, score))
    elif name == "Dealer":
        reader.dealer = (number, value)
        reader.lines["dealer"] = number
    elif name == "Eliminated":
        reader.lines[f"eliminated[{len(reader.eliminated)}]"] = number
        reader.lines.setdefault("eliminated", number)
        reader.eliminated.append(value)
    elif name == "Deck":
        reader.deck = parse_cards(value.split(), "deck")
        reader.lines["deck"] = number
    elif name == "Shuffle":
        reader.shuffle["algorithm"] = value
        reader.lines["shuffle"] = number
    elif name == "Nonce":
        reader.shuffle["nonce"] = _integer(value, where, "a nonce")
        reader.lines["shuffle.nonce"] = number
    else:
        reader.shuffle[_SHUFFLE_TAGS[name]] = value
        reader.lines[f"shuffle.{_SHUFFLE_TAGS[name]}"] = number


def _integer(text: str, where: str, what: str = "an integer") -> int:
    if not _INTEGER.fullmatch(text):
        raise InvalidNotationError(where, text, f"not {what}")
    return int(text)


def _read_turns(reader: _Reader, tokens: list[tuple[int, str]]) -> None:
    position = 0

    def take() -> tuple[int, str] | None:
        nonlocal position
        if position == len(tokens):
            return None
        position += 1
        return tokens[position - 1]

    def peek() -> str | None:
        return tokens[position][1] if position < len(tokens) else None

    while position < len(tokens):
        line, token = tokens[position]
        position += 1
        expected = len(reader.turns) + 1
        where = f"line {line}"
        match = _NUMBER.fullmatch(token)
        if match is None:
            raise InvalidNotationError(where, token, f"turn {expected} expected ({expected}.)")
        if int(match.group(1)) != expected:
            raise InvalidNotationError(where, token, f"turns are numbered in order: {expected}. expected")
        reader.lines[f"turns[{expected - 1}]"] = line
        reader.lines.setdefault("turns", line)
        seat = None
        if (peek() or "").startswith("@"):
            _, token = tokens[position]
            position += 1
            name = token[1:]
            if name.startswith('"'):
                try:
                    name = json.loads(name)
                except ValueError:
                    raise InvalidNotationError(where, token, "a quoted name is a JSON string") from None
            if name not in reader.names:
                raise InvalidNotationError(where, token, "no seat of this name (a [Seat] tag names each seat)")
            seat = reader.names[name]
        restock = None
        if peek() == "(":
            position += 1
            codes: list[str] = []
            while True:
                item = take()
                if item is None:
                    raise InvalidNotationError(where, "(", "a restock's ( is not closed by )")
                if item[1] == ")":
                    break
                line, code = item
                codes.append(code)
                if len(codes) > PILE_CARDS.most:
                    raise InvalidNotationError(f"line {line}", code, f"a restock holds at most {PILE_CARDS.most} cards")
            restock = tuple(_card(code, f"line {line}") for code in codes)
        item = take()
        if item is None:
            raise InvalidNotationError(where, token, "a turn draws S (stock) or D (discard pile)")
        line, token = item
        draw = _DRAW.fullmatch(token)
        if draw is None:
            raise InvalidNotationError(
                f"line {line}", token, "a turn draws S (stock) or D (discard pile), as S or S=4D"
            )
        drawn = None if draw.group(2) is None else _card(draw.group(2), f"line {line}")
        item = take()
        if item is None or item[1] in ("#", "(", ")") or item[1].startswith("@"):
            raise InvalidNotationError(f"line {line}", token, "a turn ends with the card thrown (or laid down, with #)")
        line, code = item
        discard = _card(code, f"line {line}")
        close = peek() == "#"
        if close:
            position += 1
        source = _DRAW_CODES[draw.group(1).upper()]
        reader.turns.append(Turn(source, discard, close=close, seat=seat, drawn=drawn, restock=restock))
        if len(reader.turns) > TURNS.most:
            raise InvalidNotationError(f"line {line}", len(reader.turns), f"a record holds at most {TURNS.most} turns")


def _card(code: str, where: str) -> Card:
    try:
        return Card.parse(code, where)
    except InvalidCardError as error:
        raise InvalidNotationError(where, code, error.message) from None


def _build(reader: _Reader) -> Record:
    """The record the tags and turns give; errors in building a rule set or a shuffle name their line."""
    try:
        with rooted_at("rules"):
            scoring = ScoringRules(**reader.scoring)  # type: ignore[arg-type]
            rules = RuleSet(**reader.rules, multipliers=reader.multipliers, scoring=scoring)  # type: ignore[arg-type]
        shuffle = None
        if reader.shuffle:
            with rooted_at("shuffle"):
                if "algorithm" not in reader.shuffle:
                    raise InvalidRecordError("", None, f'a seeded record names its algorithm: [Shuffle "{ALGORITHM}"]')
                if "server_seed" not in reader.shuffle:
                    raise InvalidRecordError("server_seed", None, "a seeded record gives its revealed [ServerSeed]")
                shuffle = Shuffle(**reader.shuffle)  # type: ignore[arg-type]
    except RefereeError as error:
        raise _at_line(error, reader.line_of(error.field)) from None
    dealer = 0
    if reader.dealer is not None:
        line, name = reader.dealer
        if name not in reader.names:
            raise InvalidNotationError(f"line {line}", name, "no seat of this name (a [Seat] tag names each seat)")
        dealer = reader.names[name]
    elif reader.seats:
        raise InvalidNotationError(f"line {reader.last_line}", None, 'a record names its dealer: [Dealer "name"]')
    return Record(
        seats=tuple(reader.seats),
        dealer=dealer,
        deck=reader.deck,
        shuffle=shuffle,
        turns=tuple(reader.turns),
        eliminated=tuple(reader.eliminated),
        rules=rules,
    )


__all__ = [
    "DrawSource",
    "Record",
    "Seat",
    "Turn",
    "check_record",
    "format_notation",
    "format_turn",
    "parse_notation",
]
