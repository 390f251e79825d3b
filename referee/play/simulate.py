"""Deals played by simple bots from a seed, as records: examples, test cases and benchmark loads.

The same seed, player count and rules give the same record on every machine and version of
Python (``random.Random``). The bots are plain: each keeps the cards that have partners (cards of
its rank, neighbours in its suit), takes the face-up card when it would close with it or it has
two partners, throws the card with the fewest partners (the most points on a tie; now and then
a card at random), and closes as soon as its 11 cards hold a valid close, that is when their best
close is valid (laying down the first discard found that leaves 10 linked cards, or else the best
close's). Long deals run the stock out, so records reshuffle. A stacked deck deals the first
player a hand that closes on the very first turn. Some turns state their seat and the card drawn,
as a record may.

Players with planted behaviours (``Player``, ``Style``; ``docs/commands.md``, ``docs/review.md``) sit
at a table when ``seating`` names each seat's player: honest players of two strengths (``plain``,
the bots above, and ``careful``, which never throws at random), a ``peeker`` (knows the stock's
top card and draws it when it helps; in a deal, with a stated probability, also knows the next
seat's hand and keeps from feeding it), a colluding pair (a ``feeder`` throws its partner, seated
next, cards the partner can use; a ``taker`` never closes while its partner is ahead in the
match), and a ``soft`` player (passes some closes). Without ``seating`` the bots are as they
always were: the same seed gives the same record, byte for byte. ``population`` seats a roster of
such players at random over many deals, the load of ``bench.fairplay``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress

from referee.game.cards import (
    CARD_BY_INDEX,
    CARD_KINDS,
    JOKER,
    JOKER_INDEX,
    RANKS_PER_SUIT,
    SUITS,
    Card,
    deck,
    points_by_index,
)
from referee.game.closing import best_close, check_close, discard_allowed
from referee.game.deal import HAND, most_players
from referee.game.groups import judge_group
from referee.game.kinds import Kind
from referee.game.limits import NAME
from referee.game.linking import best_linking, links_fully
from referee.game.rules import DiscardTaken, RuleSet, ScoringMode
from referee.play.record import DrawSource, Record, Seat, Turn
from referee.play.shuffle import Shuffle, commitment, dealt_deck, reshuffled

# One name for each of the most players four decks deal to.
NAMES = (
    "ana", "beto", "carla", "dani", "eva", "fede", "gala", "hugo", "ines", "juan", "kike",
    "lola", "mario", "nuria", "oscar", "paula", "quique", "rosa", "sara", "teo", "ursula",
)  # fmt: skip
_CLIENT_SEEDS = ("", "table 7", "lucky", "mesa-3:ronda 2", "ñandú")
_CLOSE_SHAPES = ("REMIGIO", "RUN", "COLOR", "LINKED")


class Style(Kind):
    """How a simulated player plays (``docs/review.md``, "Planted players")."""

    PLAIN = "plain"  # the honest bot: keeps cards with partners, throws at random now and then
    CAREFUL = "careful"  # an honest, stronger bot: never throws at random
    PEEKER = "peeker"  # knows the stock's top card (and sometimes the next seat's hand)
    FEEDER = "feeder"  # of a colluding pair: throws its partner cards the partner can use
    TAKER = "taker"  # of a colluding pair: never closes while its partner is ahead in the match
    SOFT = "soft"  # passes some of its closes


# The default strength of each style: for a peeker the chance, per deal, that it also knows the
# next seat's hand (at 1 it also never draws a top it knows useless); for a feeder the chance it
# feeds when it can (at 1 it also gives up cards its own groups need); for a taker the chance it
# passes a close while its partner is ahead; for a soft player the chance it passes a close.
DEFAULT_STRENGTH = {
    Style.PLAIN: 0.0,
    Style.CAREFUL: 0.0,
    Style.PEEKER: 0.5,
    Style.FEEDER: 0.8,
    Style.TAKER: 1.0,
    Style.SOFT: 0.3,
}
_PAIRED = (Style.FEEDER, Style.TAKER)


@dataclass(frozen=True, slots=True)
class Player:
    """A simulated player: a seat's name, how it plays, its partner (a colluding pair's other
    player) and the strength of its planted behaviour (None: the style's default)."""

    name: str
    style: Style = Style.PLAIN
    partner: str | None = None
    strength: float | None = None

    def __post_init__(self) -> None:
        NAME.check_length(self.name, "player")
        if not self.name:
            raise ValueError("a player has a name")
        if (self.partner is not None) != (self.style in _PAIRED):
            raise ValueError(f"player {self.name}: a partner is named for a feeder or a taker, and only for them")
        if self.strength is not None and not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"player {self.name}: a strength is 0 to 1 ({self.strength})")

    @property
    def power(self) -> float:
        """The strength of the planted behaviour."""
        return DEFAULT_STRENGTH[self.style] if self.strength is None else self.strength

    @classmethod
    def parse(cls, text: str) -> Player:
        """A player as the command line spells it: ``NAME=STYLE[:PARTNER][@STRENGTH]``."""
        name, sep, rest = text.partition("=")
        if not sep:
            raise ValueError(f"a player is NAME=STYLE[:PARTNER][@STRENGTH] ({text!r})")
        rest, at, power = rest.partition("@")
        style_name, _, partner = rest.partition(":")
        try:
            style = Style(style_name.lower())
        except ValueError:
            styles = ", ".join(s.value for s in Style)
            raise ValueError(f"player {name}: the style is one of {styles} ({style_name!r})") from None
        strength = None
        if at:
            try:
                strength = float(power)
            except ValueError:
                raise ValueError(f"player {name}: the strength is a number from 0 to 1 ({power!r})") from None
        return cls(name, style, partner or None, strength)

    def spell(self) -> str:
        """The command line's spelling (``parse`` reads it back)."""
        partner = f":{self.partner}" if self.partner else ""
        strength = "" if self.strength is None else f"@{self.strength:g}"
        return f"{self.name}={self.style.value}{partner}{strength}"


def ahead(seats: Sequence[Seat], rules: RuleSet, seat: int, other: int) -> bool:
    """Whether ``other`` is ahead of ``seat`` in the match: both scores given, and ``other``'s the
    better one (higher in HEAD_TO_HEAD and POOL, which are won by reaching a target; lower in
    ELIMINATION, which is lost past a limit; RULES §5)."""
    mine, theirs = seats[seat].score, seats[other].score
    if mine is None or theirs is None:
        return False
    if rules.scoring.resolved(len(seats)).mode is ScoringMode.ELIMINATION:
        return theirs < mine
    return theirs > mine


def simulate(
    seed: int,
    players: int = 4,
    rules: RuleSet | None = None,
    *,
    seeded: bool = True,
    stacked: bool = False,
    closing: bool = True,
    max_turns: int = 300,
    seating: Sequence[Player] | None = None,
) -> Record:
    """The record of a deal of ``players`` bots from ``seed``: a seeded shuffle, or an explicit
    deck (``seeded`` False; ``stacked`` deals the first player a hand that closes at once). The
    deal ends at the first valid close, or unfinished after ``max_turns`` turns (never closed
    when ``closing`` is False). ``seating`` names the player of each seat and how it plays
    (``Player``); without it every seat is a plain bot named from ``NAMES``."""
    rules = rules or RuleSet()
    if not 2 <= players <= most_players(rules.decks):
        raise ValueError(f"{players} players: a deal of {rules.decks} decks seats 2 to {most_players(rules.decks)}")
    if seating is not None:
        _check_seating(seating, players)
    rng = random.Random(seed)
    seats = _seats(rng, players, rules)
    if seating is not None:
        seats = tuple(Seat(player.name, seat.score) for player, seat in zip(seating, seats))
    dealer = rng.randrange(players)
    shuffle = None
    if stacked:
        order = _stacked_deck(rng, players, dealer, rules)
    elif seeded:
        shuffle = Shuffle(
            server_seed=rng.randbytes(32).hex(),
            client_seed=rng.choice(_CLIENT_SEEDS),
            nonce=rng.choice((0, 1, rng.randrange(2**64))),
        )
        if rng.random() < 0.5:
            shuffle = Shuffle(shuffle.server_seed, shuffle.client_seed, shuffle.nonce, commitment(shuffle.server_seed))
        order = list(dealt_deck(shuffle, rules.decks))
    else:
        order = list(deck(rules.decks))
        rng.shuffle(order)
    bots = _Bots(rng, rules, players, dealer, order, shuffle, closing)
    if seating is not None:
        bots.plant(seating, seats)
    turns = bots.play(max_turns)
    out = tuple(f"out{i}" for i in range(rng.choice((0, 0, 1, 2))))
    return Record(
        seats=seats,
        dealer=dealer,
        deck=None if shuffle else tuple(order),
        shuffle=shuffle,
        turns=tuple(turns),
        eliminated=out,
        rules=rules,
    )


def _check_seating(seating: Sequence[Player], players: int) -> None:
    """A seating names one player a seat, each once."""
    if len(seating) != players:
        raise ValueError(f"a seating of {len(seating)} players for {players} seats")
    names = [player.name for player in seating]
    if len(set(names)) != len(names):
        raise ValueError(f"a player sits once at a table ({', '.join(names)})")


def _seats(rng: random.Random, players: int, rules: RuleSet) -> tuple[Seat, ...]:
    """Named seats, each with a score the scoring mode can reach before a deal (or none)."""
    scoring = rules.scoring.resolved(players)
    assert scoring.start_score is not None and scoring.target is not None and scoring.limit is not None
    if scoring.mode is ScoringMode.POOL:
        low, high = 0, scoring.target - 1
    elif scoring.mode is ScoringMode.HEAD_TO_HEAD:
        low, high = scoring.start_score, scoring.target - 1
    else:
        low, high = scoring.start_score, scoring.limit
    scored = high >= low and rng.random() < 0.5
    return tuple(Seat(NAMES[i], rng.randint(low, high) if scored else None) for i in range(players))


class _Bots:
    """The table as the bots play it: their hands as counts of card indices, the piles as lists."""

    def __init__(
        self,
        rng: random.Random,
        rules: RuleSet,
        players: int,
        dealer: int,
        order: Sequence[Card],
        shuffle: Shuffle | None,
        closing: bool,
    ) -> None:
        self.rng, self.rules, self.shuffle, self.closing = rng, rules, shuffle, closing
        self.points = points_by_index(rules.joker_points)
        self.first = (dealer + 1) % players
        self.hands = [[0] * CARD_KINDS for _ in range(players)]
        # Dealt one at a time round the table from the seat after the dealer (RULES §9.1).
        for position in range(HAND * players):
            self.hands[(self.first + position) % players][order[position].index] += 1
        self.pile = [order[HAND * players]]
        self.stock = list(reversed(order[HAND * players + 1 :]))  # the top last
        self.reshuffles = 0
        self.fresh = set(range(players))  # the seats yet to play
        # Planted players (``plant``); without them every seat plays as the plain bot.
        self.styles: tuple[Player, ...] | None = None
        self.partner_seat: list[int | None] = [None] * players
        self.partner_ahead = [False] * players
        self.sees_next = [False] * players

    def plant(self, seating: Sequence[Player], seats: Sequence[Seat]) -> None:
        """Seat planted players: each seat's style, its partner's seat (a colluding pair's other
        player, when at this table), whether that partner is ahead in the match, and whether a
        peeker also knows the next seat's hand this deal."""
        self.styles = tuple(seating)
        by_name = {player.name: seat for seat, player in enumerate(seating)}
        for seat, player in enumerate(seating):
            if player.partner is not None:
                partner = by_name.get(player.partner)
                self.partner_seat[seat] = partner
                self.partner_ahead[seat] = partner is not None and ahead(seats, self.rules, seat, partner)
            if player.style is Style.PEEKER:
                self.sees_next[seat] = self.rng.random() < player.power

    def play(self, max_turns: int) -> list[Turn]:
        """Turns until a bot closes or ``max_turns`` are played."""
        turns: list[Turn] = []
        seat = self.first
        while len(turns) < max_turns:
            turn = self.turn(seat)
            turns.append(turn)
            if turn.close:
                break
            seat = (seat + 1) % len(self.hands)
        return turns

    def turn(self, seat: int) -> Turn:
        """One bot's turn: draw, then close or throw."""
        rng, hand = self.rng, self.hands[seat]
        top = self.pile[-1]
        partners = self.partners(hand, top.index)
        # A hand of 10 that could close has closed already, except the hand dealt: the face-up
        # card can only help a close by joining a group (a natural partner near it, or two
        # jokers) or by making 10 of a suit.
        worth_a_look = partners or hand[JOKER_INDEX] >= 2 or seat in self.fresh
        if not top.is_joker and not worth_a_look:
            suit = top.index // RANKS_PER_SUIT
            worth_a_look = (
                sum(hand[suit * RANKS_PER_SUIT : (suit + 1) * RANKS_PER_SUIT]) + hand[JOKER_INDEX] >= HAND - 1
            )
        looked = worth_a_look and partners < 2
        with_top = self.closes(hand, top) if looked else None
        take = partners >= 2 or with_top is not None
        player = self.styles[seat] if self.styles is not None else None
        if player is not None and player.style is Style.PEEKER and self.stock and with_top is None:
            # The peeker draws the stock's top when it knows it helps (it closes the hand, or has
            # two partners and the face-up card no more), and takes the face-up card instead of a
            # top it knows is of no use when the face-up card has a partner (at full strength,
            # always: it never draws a card it knows useless).
            peeked = self.stock[-1]
            near = self.partners(hand, peeked.index)
            if self.closes(hand, peeked) is not None or (near >= 2 and near >= partners):
                take = False
            elif near < 2 and partners >= (0 if player.power >= 1 else 1):
                take = True
        self.fresh.discard(seat)
        restock = None
        if take:
            card = self.pile.pop()
        else:
            if not self.stock:
                restock = self.restock()
            card = self.stock.pop()
        hand[card.index] += 1
        said_seat = seat if rng.random() < 0.5 else None
        said_drawn = card if rng.random() < 0.5 else None
        draw = DrawSource.DISCARD if take else DrawSource.STOCK
        close = with_top if take and looked else self.closes(hand, None)
        if close is not None and player is not None and self.passes(seat, player):
            close = None
        if close is not None:
            hand[close.index] -= 1
            return Turn(draw, close, close=True, seat=said_seat, drawn=said_drawn, restock=restock)
        thrown = (
            self.throw(hand, card if take else None)
            if player is None
            else self.planted_throw(seat, player, card if take else None)
        )
        hand[thrown.index] -= 1
        self.pile.append(thrown)
        return Turn(draw, thrown, seat=said_seat, drawn=said_drawn, restock=restock)

    def passes(self, seat: int, player: Player) -> bool:
        """Whether a planted player passes the close it holds: a soft player now and then, a
        colluding taker while its partner is at the table and ahead in the match."""
        if player.style is Style.SOFT:
            return self.rng.random() < player.power
        if player.style is Style.TAKER and self.partner_ahead[seat]:
            return self.rng.random() < player.power
        return False

    def planted_throw(self, seat: int, player: Player, taken: Card | None) -> Card:
        """The throw of a seat whose player is planted: as the plain bot, but the careful player never
        throws at random, a feeder throws its partner next in turn a card it can use, and a peeker
        who knows the next seat's hand keeps from throwing it a card it could use."""
        hand = self.hands[seat]
        following = (seat + 1) % len(self.hands)
        if player.style is Style.CAREFUL:
            return self.throw(hand, taken, careful=True)
        if player.style is Style.FEEDER and self.partner_seat[seat] == following and self.rng.random() < player.power:
            fed = self.feed(hand, self.hands[following], taken, spare=1 if player.power < 1 else HAND)
            if fed is not None:
                return fed
        if player.style is Style.PEEKER and self.sees_next[seat]:
            return self.throw(hand, taken, wary_of=self.hands[following])
        return self.throw(hand, taken)

    def feed(self, hand: list[int], theirs: list[int], taken: Card | None, spare: int = 1) -> Card | None:
        """A card the partner's hand ``theirs`` has two partners for, that this hand can spare (at most
        ``spare`` partners here; at full strength any): the one the partner wants most; None when
        there is none."""
        forbidden = taken is not None and self.rules.discard_taken is DiscardTaken.FORBIDDEN
        wanted = [
            (-self.partners(theirs, i), self.partners(hand, i), -self.points[i], i)
            for i in range(JOKER_INDEX)
            if hand[i]
            and not (forbidden and taken is not None and i == taken.index)
            and self.partners(theirs, i) >= 2
            and self.partners(hand, i) <= spare
        ]
        return CARD_BY_INDEX[min(wanted)[3]] if wanted else None

    def restock(self) -> tuple[Card, ...] | None:
        """Reshuffle the discard pile less its top into the stock; the restock the record gives."""
        under, self.pile = self.pile[:-1], self.pile[-1:]
        self.reshuffles += 1
        if self.shuffle is not None:
            new = reshuffled(self.shuffle, self.reshuffles, under)
            given = new if self.rng.random() < 0.2 else None  # a seeded record may repeat it
        else:
            self.rng.shuffle(under)
            new = given = tuple(under)
        self.stock = list(reversed(new))
        return given

    def partners(self, hand: Sequence[int], index: int) -> int:
        """How many held cards could share a group with the card ``index``: the other cards of its
        rank, and the ranks up to two away in its suit (the ace next to both the 2 and the K)."""
        if index == JOKER_INDEX:
            return 99
        offset = index % RANKS_PER_SUIT
        same = hand[offset] + hand[offset + 13] + hand[offset + 26] + hand[offset + 39] - (hand[index] > 0)
        return same + sum(hand[near] > 0 for near in _NEIGHBOURS[index])

    def closes(self, hand: list[int], extra: Card | None) -> Card | None:
        """The discard of a valid close of the hand (with ``extra`` drawn), or None."""
        if not self.closing:
            return None
        held = hand + [0]  # CARD_KINDS: no card, for the rows of _linked_discards
        if extra is not None:
            held[extra.index] += 1
        color = _may_be_color(held)
        forced = _linked_discards(held, self.rules.wrap_runs)
        if not color and forced is None:
            return None
        cards = [CARD_BY_INDEX[i] for i, n in enumerate(held) if n for _ in range(n)]
        if not color:
            # Trying every discard (best_close) is costly: a linked close is looked for among the
            # few discards that can give one, and the first found is the bot's.
            candidates: list[int] | None = forced  # None: best_close decides
            if not forced:
                # 10 of the 11 cards link in full only if some linking leaves one card c out, and
                # then the best linking leaves at most c's points: only such cards may be the
                # discard. A linking that leaves one card out shows the close at once.
                linking = best_linking(cards, self.rules)
                if len(linking.unlinked) == 1 and discard_allowed(linking.unlinked[0], self.rules):
                    return linking.unlinked[0]
                candidates = [i for i, n in enumerate(held) if n and self.points[i] >= linking.points]
                if not linking.unlinked:
                    candidates = None  # 11 cards linked in full: which one to lay down?
            if candidates is not None:
                for i in candidates:
                    card = CARD_BY_INDEX[i]
                    if discard_allowed(card, self.rules) and links_fully(_without(cards, i), self.rules):
                        return card
                return None
        verdict = best_close(cards, self.rules)
        return verdict.discard if verdict.valid else None

    def throw(
        self, hand: list[int], taken: Card | None, careful: bool = False, wary_of: list[int] | None = None
    ) -> Card:
        """The card to throw: fewest partners, most points; never a joker while another card is held.
        One throw in ten is at random, unless ``careful``; ``wary_of``, a hand the card would go
        to, counts a card it has two partners for as two partners more here."""
        forbidden = taken is not None and self.rules.discard_taken is DiscardTaken.FORBIDDEN
        choices = [
            i for i in range(JOKER_INDEX) if hand[i] and not (forbidden and taken is not None and i == taken.index)
        ] or [JOKER_INDEX]
        rng, points = self.rng, self.points
        if rng.random() < 0.1 and not careful:
            return CARD_BY_INDEX[rng.choice(choices)]
        if wary_of is not None:
            return CARD_BY_INDEX[
                min(
                    (self.partners(hand, i) + 2 * (self.partners(wary_of, i) >= 2), -points[i], rng.random(), i)
                    for i in choices
                )[3]
            ]
        return CARD_BY_INDEX[min([(self.partners(hand, i), -points[i], rng.random(), i) for i in choices])[3]]


def _neighbours(index: int) -> tuple[int, ...]:
    """The cards of the suit of natural card ``index`` up to two ranks away on the A 2 ... K A scale."""
    offset = index % RANKS_PER_SUIT
    ace = index - offset
    # Offsets 0 ... 13 on the scale, the high ace at 13.
    positions = (0, 13) if offset == 0 else (offset,)
    near = {p % 13 for q in positions for p in (q - 2, q - 1, q + 1, q + 2) if 0 <= p <= 13 and p % 13 != offset}
    return tuple(ace + p for p in sorted(near))


_NEIGHBOURS = tuple(_neighbours(index) for index in range(JOKER_INDEX))


def _without(cards: Sequence[Card], index: int) -> list[Card]:
    """``cards`` less one card of ``index``."""
    rest = list(cards)
    rest.remove(CARD_BY_INDEX[index])
    return rest


def _may_be_color(held: Sequence[int]) -> bool:
    """Whether 10 of 11 cards may be of one suit, the jokers standing in."""
    jokers = held[JOKER_INDEX]
    return any(sum(held[s * RANKS_PER_SUIT : (s + 1) * RANKS_PER_SUIT]) + jokers >= HAND for s in range(len(SUITS)))


# For each suit, the index of the card at each place of its row (``_linked_discards``); JOKER_INDEX
# stands for "no card" beyond the scale, where a held joker must not count.
_PLACES = {
    wrap: tuple(
        tuple(
            suit * RANKS_PER_SUIT + (p - 1) % RANKS_PER_SUIT if wrap or 1 <= p <= 14 else CARD_KINDS
            for p in range(-1, 17)
        )
        for suit in range(len(SUITS))
    )
    for wrap in (False, True)
}


def _linked_discards(held: Sequence[int], wrap: bool) -> list[int] | None:
    """For 11 held cards: None when 10 of them surely do not link (joker limits aside); else the
    one card that must be the discard, or no card when any may be.

    Every card shown must be in a group. A natural card in no group of the held cards without a
    joker (3 of its rank, or 3 running ranks of its suit) is in a group with a joker, with two if
    no card of its rank or within two ranks of its suit is held. Two such cards share a group only
    if they are of one rank, or of one suit and close enough for the jokers to fill the gap; cards
    no two of which may share a group need a group each, so their jokers add up. One card may be
    the discard.
    """
    jokers = held[JOKER_INDEX]
    # By rank (1-13; 0 unused), how many are held.
    by_rank = [0, *map(sum, zip(held[0:13], held[13:26], held[26:39], held[39:52]))]
    # Per suit, whether each place of the scale is held: place p + 1 for p = -1 ... 16, where 1 to
    # 13 are the ranks and 14 the high ace; the places beyond wrap round only with wrap_runs.
    rows = [list(map(bool, map(held.__getitem__, places))) for places in _PLACES[wrap]]
    loose: list[int] = []
    needy: list[tuple[int, int, int, int]] = []  # (jokers its group needs at least, index, rank, suit)
    for index in compress(range(JOKER_INDEX), held):
        count = held[index]
        rank, suit = index % RANKS_PER_SUIT + 1, index // RANKS_PER_SUIT
        same = by_rank[rank]
        row = rows[suit]
        if same >= 3 or _in_window(row, rank, 0):
            continue
        if same + jokers < 3 and not _in_window(row, rank, jokers):
            loose += [index] * count
            if len(loose) > 1:
                return None
        alone = same == 1 and not (row[rank - 1] or row[rank] or row[rank + 2] or row[rank + 3])
        if rank == 1:
            alone = alone and not (row[13] or row[14])
        needy += [(2 if alone else 1, index, rank, suit)] * count
    apart: list[tuple[int, int, int, int]] = []  # needy cards no two of which may share a group
    for card in sorted(needy, key=lambda card: (-card[0], card[1])):
        if not any(_may_share(card[2], card[3], other[2], other[3], jokers, wrap) for other in apart):
            apart.append(card)
    needs = [card[0] for card in apart]
    if needs and sum(needs) - max(needs) > jokers:
        return None
    return loose


def _may_share(rank: int, suit: int, other_rank: int, other_suit: int, jokers: int, wrap: bool) -> bool:
    """Whether two natural cards may be in one group with ``jokers`` jokers at most."""
    if rank == other_rank:
        return True
    if suit != other_suit:
        return False
    gap = abs(rank - other_rank)
    if rank == 1 or other_rank == 1:
        gap = min(gap, 14 - max(rank, other_rank))  # the ace above the king
    if wrap:
        gap = min(gap, RANKS_PER_SUIT - abs(rank - other_rank))
    return gap - 1 <= jokers


def _in_window(row: Sequence[int], rank: int, jokers: int) -> bool:
    """Whether three running places of a suit's row (``_linked_discards``) through ``rank`` (the ace
    low or high) are held but for at most ``jokers`` of them."""
    for position in (1, 14) if rank == 1 else (rank,):
        for start in range(position - 2, position + 1):
            if 3 - row[start + 1] - row[start + 2] - row[start + 3] <= jokers:
                return True
    return False


def _stacked_deck(rng: random.Random, players: int, dealer: int, rules: RuleSet) -> list[Card]:
    """An explicit deck whose deal gives the first player 10 cards that close with the face-up card."""
    full = list(deck(rules.decks))
    for _ in range(200):
        shown = _close_cards(rng, rng.choice(_CLOSE_SHAPES), rules)
        if shown is None:
            continue
        left = full[:]
        for card in shown:
            left.remove(card)
        rng.shuffle(left)
        extra = left.pop()
        if not check_close(shown, extra, rules).valid:
            continue
        # The deal: position p goes to seat (first + p) mod players, so the first player holds the
        # positions 0, players, 2 × players ...; the face-up card comes next.
        order: list[Card | None] = [None] * len(full)
        for i, card in enumerate(shown):
            order[i * players] = card
        order[HAND * players] = extra  # face up: the first player takes it and closes
        rest = iter(left)
        return [card if card is not None else next(rest) for card in order]
    raise AssertionError("no stacked close found")  # 200 tries always find one


def _close_cards(rng: random.Random, shape: str, rules: RuleSet) -> list[Card] | None:
    """10 cards of a close of ``shape`` the deck can hold, or None when this try failed."""
    decks = rules.decks
    if shape == "REMIGIO":
        rank = rng.randint(1, 13)
        naturals = min(HAND, 4 * decks)
        if HAND - naturals > 2 * decks:
            return None
        cards = [Card(rank, suit) for suit in SUITS for _ in range(decks)][:naturals]
        return cards + [JOKER] * (HAND - naturals)
    if shape == "RUN":
        suit = rng.choice(SUITS)
        low = rng.randint(1, 5)
        cards = [Card(1 if r == 14 else r, suit) for r in range(low, low + HAND)]
    elif shape == "COLOR":
        suit = rng.choice(SUITS)
        pool = [Card(r, suit) for r in range(1, 14) for _ in range(decks)]
        cards = rng.sample(pool, HAND)
    else:
        cards = []
        for size in rng.choice(((3, 3, 4), (4, 6), (5, 5), (3, 7))):
            group = _group(rng, size)
            if group is None or not judge_group(group, rules):
                return None
            cards += group
    if rng.random() < 0.4:
        cards[rng.randrange(HAND)] = JOKER
    counts = [0] * CARD_KINDS
    for card in cards:
        counts[card.index] += 1
    if counts[JOKER_INDEX] > 2 * decks or max(counts[:JOKER_INDEX]) > decks:
        return None
    return cards


def _group(rng: random.Random, size: int) -> list[Card] | None:
    """A same-rank group or a run of ``size`` cards."""
    if size <= 4 and rng.random() < 0.5:
        rank = rng.randint(1, 13)
        return [Card(rank, rng.choice(SUITS)) for _ in range(size)]
    suit = rng.choice(SUITS)
    low = rng.randint(1, 15 - size)
    return [Card(1 if r == 14 else r, suit) for r in range(low, low + size)]


def population(
    seed: int, roster: Sequence[Player], deals: int, rules: RuleSet | None = None, together: float = 0.5
) -> Iterator[Record]:
    """``deals`` four-seat deals of players drawn at random from ``roster`` (at least four), each
    deal from its own seed; the same seed gives the same deals. A colluding pair at the table
    sits feeder then taker (they choose their seats); with the chance ``together`` a pair's
    players, when one of them is drawn, join the same table, as colluders seek each other out."""
    rules = rules or RuleSet()
    if len(roster) < 4:
        raise ValueError(f"a population of {len(roster)} players: four-seat deals need at least 4")
    _check_seating(roster, len(roster))
    by_name = {player.name: player for player in roster}
    for player in roster:
        partner = by_name.get(player.partner or "")
        if player.partner is not None and (partner is None or partner.partner != player.name):
            raise ValueError(f"player {player.name}: its partner {player.partner} is not in the roster naming it back")
    rng = random.Random(seed)
    for _ in range(deals):
        table = rng.sample(list(roster), 4)
        for player in list(table):
            partner = by_name.get(player.partner or "")
            if partner is not None and partner not in table and rng.random() < together:
                seat = next((i for i, p in enumerate(table) if p is not player and p.partner is None), None)
                if seat is not None:
                    table[seat] = partner
        # A pair at the table sits feeder then taker, the rest of the order as drawn.
        feeders = [player for player in table if player.style is Style.FEEDER]
        for player in feeders:
            partner = by_name.get(player.partner or "")
            if partner is not None and partner in table:
                table.remove(partner)
                table.insert(table.index(player) + 1, partner)
        yield simulate(rng.randrange(2**63), 4, rules, seating=table)


def roster(players: int = 24, strength: float | None = None) -> tuple[Player, ...]:
    """A population of ``players`` (at least 8): a peeker, a colluding pair, a soft player (each of
    ``strength``, None for the default), and honest players, plain and careful in turn, named from
    ``NAMES`` and then ``p22``, ``p23`` ..."""
    if players < 8:
        raise ValueError(f"a roster of {players} players: the planted four and at least four honest")
    names = [*NAMES, *(f"p{i}" for i in range(len(NAMES) + 1, players + 1))][:players]
    planted = [
        Player(names[0], Style.PEEKER, strength=strength),
        Player(names[1], Style.FEEDER, names[2], strength),
        Player(names[2], Style.TAKER, names[1], strength),
        Player(names[3], Style.SOFT, strength=strength),
    ]
    honest = [Player(name, Style.CAREFUL if i % 2 else Style.PLAIN) for i, name in enumerate(names[4:])]
    return (*planted, *honest)


__all__ = ["DEFAULT_STRENGTH", "NAMES", "Player", "Style", "ahead", "population", "roster", "simulate"]
