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
"""

from __future__ import annotations

import random
from collections.abc import Sequence
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


def simulate(
    seed: int,
    players: int = 4,
    rules: RuleSet | None = None,
    *,
    seeded: bool = True,
    stacked: bool = False,
    closing: bool = True,
    max_turns: int = 300,
) -> Record:
    """The record of a deal of ``players`` bots from ``seed``: a seeded shuffle, or an explicit
    deck (``seeded`` False; ``stacked`` deals the first player a hand that closes at once). The
    deal ends at the first valid close, or unfinished after ``max_turns`` turns (never closed
    when ``closing`` is False)."""
    rules = rules or RuleSet()
    if not 2 <= players <= most_players(rules.decks):
        raise ValueError(f"{players} players: a deal of {rules.decks} decks seats 2 to {most_players(rules.decks)}")
    rng = random.Random(seed)
    seats = _seats(rng, players, rules)
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
    turns = _Bots(rng, rules, players, dealer, order, shuffle, closing).play(max_turns)
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
        if close is not None:
            hand[close.index] -= 1
            return Turn(draw, close, close=True, seat=said_seat, drawn=said_drawn, restock=restock)
        thrown = self.throw(hand, card if take else None)
        hand[thrown.index] -= 1
        self.pile.append(thrown)
        return Turn(draw, thrown, seat=said_seat, drawn=said_drawn, restock=restock)

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

    def throw(self, hand: list[int], taken: Card | None) -> Card:
        """The card to throw: fewest partners, most points; never a joker while another card is held."""
        forbidden = taken is not None and self.rules.discard_taken is DiscardTaken.FORBIDDEN
        choices = [
            i for i in range(JOKER_INDEX) if hand[i] and not (forbidden and taken is not None and i == taken.index)
        ] or [JOKER_INDEX]
        rng, points = self.rng, self.points
        if rng.random() < 0.1:
            return CARD_BY_INDEX[rng.choice(choices)]
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


__all__ = ["NAMES", "simulate"]
