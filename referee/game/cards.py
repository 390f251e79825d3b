"""Cards of the Remigio deck: ranks, suits, jokers, and the notation of the rule book (§1)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter

from referee.game.errors import InvalidCardError
from referee.game.kinds import Kind
from referee.game.limits import CARD_CODE


class Suit(Kind):
    """The four suits, in the referee's canonical order."""

    CLUBS = "C"
    DIAMONDS = "D"
    HEARTS = "H"
    SPADES = "S"

    @property
    def symbol(self) -> str:
        """The suit's symbol, for readable output."""
        return _SYMBOLS[self]

    @property
    def order(self) -> int:
        """Position in the canonical order C, D, H, S."""
        return _SUIT_ORDER[self]


_SYMBOLS = {Suit.CLUBS: "♣", Suit.DIAMONDS: "♦", Suit.HEARTS: "♥", Suit.SPADES: "♠"}
_SUIT_ORDER = {suit: i for i, suit in enumerate(Suit)}
SUITS: tuple[Suit, ...] = tuple(Suit)

ACE, JACK, QUEEN, KING = 1, 11, 12, 13
RANKS: tuple[int, ...] = tuple(range(ACE, KING + 1))

# The index vocabulary. Engines count cards by index, a small int, rather than by Card: clubs A..K
# are 0-12, then diamonds, hearts, spades, and the joker last. A suit is named here by its
# position in that order (0-3), as the index holds it.
RANKS_PER_SUIT = KING
JOKER_INDEX = len(SUITS) * RANKS_PER_SUIT  # 52, after every natural card
CARD_KINDS = JOKER_INDEX + 1


def index_of(rank: int, suit: int) -> int:
    """The index of the natural card of ``rank`` (1-13) in the suit at position ``suit`` (0-3)."""
    return suit * RANKS_PER_SUIT + rank - 1


def rank_of(index: int) -> int:
    """The rank (1-13) of a natural card's index."""
    return index % RANKS_PER_SUIT + 1


def suit_of(index: int) -> int:
    """The position (0-3) of the suit of a natural card's index."""
    return index // RANKS_PER_SUIT


def clock_rank(position: int) -> int:
    """The rank at ``position`` round the clock of ranks: 14 is the ace again, 0 the king."""
    return (position - 1) % RANKS_PER_SUIT + 1


_RANK_CODES = {1: "A", 11: "J", 12: "Q", 13: "K"}
_RANK_BY_CODE = {**{str(r): r for r in range(2, 11)}, "T": 10, "A": 1, "J": 11, "Q": 12, "K": 13}
_SUIT_BY_CODE = {
    **{s.value: s for s in Suit},
    **{sym: s for s, sym in _SYMBOLS.items()},
    # The outlined heart and diamond are the symbols most keyboards type.
    "♡": Suit.HEARTS,
    "♢": Suit.DIAMONDS,
    "♤": Suit.SPADES,
    "♧": Suit.CLUBS,
}
JOKER_CODE = "JK"
_PARSED: dict[str, Card] = {}


def rank_code(rank: int) -> str:
    """The notation of a rank: A, 2-10, J, Q, K."""
    return _RANK_CODES.get(rank, str(rank))


@dataclass(frozen=True, slots=True, eq=False)
class Card:
    """A natural card (rank and suit) or a joker (neither)."""

    rank: int | None
    suit: Suit | None
    # Canonical position (``index_of``; the joker JOKER_INDEX). Computed once: cards are hashed and
    # compared millions of times in bulk checks.
    index: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.rank is None or self.suit is None:
            object.__setattr__(self, "index", JOKER_INDEX)
        else:
            object.__setattr__(self, "index", index_of(self.rank, self.suit.order))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Card) and other.index == self.index

    def __hash__(self) -> int:
        return self.index

    @classmethod
    def parse(cls, code: str, field: str = "card") -> Card:
        """Parse a card code such as ``AH``, ``10s``, ``T♠`` or ``JK``; raise naming ``field``."""
        if not isinstance(code, str):
            raise InvalidCardError(field, code, "a card must be a string")
        if len(code) > CARD_CODE.most:
            # Before the cache: no spelling is that long, and a long key would stay in memory.
            raise InvalidCardError(field, code, f"not a card code (at most {CARD_CODE.most} characters)")
        known = _PARSED.get(code)
        if known is not None:
            return known
        text = code.strip().replace("\ufe0f", "").upper()
        if text == JOKER_CODE:
            return JOKER
        if len(text) < 2:
            raise InvalidCardError(field, code, "not a card code")
        rank = _RANK_BY_CODE.get(text[:-1])
        suit = _SUIT_BY_CODE.get(text[-1])
        if rank is None or suit is None:
            raise InvalidCardError(field, code, "not a card code (rank A 2-10 J Q K, suit C D H S, or JK)")
        card = cls(rank, suit)
        if len(_PARSED) < 4096:  # the spellings of 53 cards; a bounded number of short keys
            _PARSED[code] = card
        return card

    @property
    def is_joker(self) -> bool:
        """True for a joker."""
        return self.rank is None

    def points(self, joker_points: int) -> int:
        """Points of this card when left unlinked: ace 1, 2-10 face value, J Q K 10."""
        if self.rank is None:
            return joker_points
        return min(self.rank, 10)

    def code(self) -> str:
        """The canonical notation: ``AH``, ``10S``, ``JK``."""
        return _CODES[self.index]

    def pretty(self) -> str:
        """The card with its suit symbol, for people: ``A♥``, ``10♠``, ``JK``."""
        if self.rank is None or self.suit is None:
            return JOKER_CODE
        return rank_code(self.rank) + self.suit.symbol

    def __lt__(self, other: Card) -> bool:
        return self.index < other.index

    def __str__(self) -> str:
        return self.code()

    def __repr__(self) -> str:
        return f"Card.parse({self.code()!r})"


JOKER = Card(None, None)
NATURALS: tuple[Card, ...] = tuple(Card(rank, suit) for suit in SUITS for rank in RANKS)
CARD_BY_INDEX: tuple[Card, ...] = NATURALS + (JOKER,)
_CODES: tuple[str, ...] = tuple(rank_code(c.rank) + c.suit.value for c in NATURALS if c.rank and c.suit) + (JOKER_CODE,)
_PARSED.update(zip(_CODES, CARD_BY_INDEX))  # the canonical spellings, the joker's included


_INDEX = attrgetter("index")


def card_codes(cards: Iterable[Card]) -> list[str]:
    """The canonical codes of cards, in order (``code`` of each, without a call per card)."""
    return list(map(_CODES.__getitem__, map(_INDEX, cards)))


def known_card(code: str) -> Card | None:
    """The card of a spelling parsed before (every canonical one is), or None: one lookup, for the
    hot paths that read many codes and call ``Card.parse`` (which names the field) only for the rest."""
    return _PARSED.get(code)


def parse_cards(codes: Iterable[str], field: str = "cards") -> tuple[Card, ...]:
    """Parse card codes in order; an error names ``field[i]`` and the bad code."""
    codes = tuple(codes)
    try:
        # Spellings seen before need one lookup each (a deal holds a hundred cards); anything
        # else, errors included, goes through Card.parse.
        return tuple(map(_PARSED.__getitem__, codes))
    except (KeyError, TypeError):
        return tuple(Card.parse(code, f"{field}[{i}]") for i, code in enumerate(codes))


def sort_cards(cards: Iterable[Card]) -> tuple[Card, ...]:
    """The cards in canonical order, which makes every answer independent of input order."""
    return tuple(sorted(cards, key=_INDEX))


def format_cards(cards: Iterable[Card]) -> str:
    """Card codes separated by spaces."""
    return " ".join(card.code() for card in cards)


def deck(decks: int = 2) -> tuple[Card, ...]:
    """The whole deck: every natural card ``decks`` times and ``2 × decks`` jokers."""
    return tuple(card for card in NATURALS for _ in range(decks)) + (JOKER,) * (2 * decks)


def copies_allowed(card: Card, decks: int) -> int:
    """How many copies of ``card`` the deck holds."""
    return 2 * decks if card.is_joker else decks


def check_copies(cards: Sequence[Card], decks: int, field_of: Callable[[int], str]) -> None:
    """Raise naming ``field_of(i)`` for the first card beyond the copies the deck holds."""
    # The common case, every card within its copies, counted by index: a hot path of bulk checks.
    held = [0] * CARD_KINDS
    for card in cards:
        held[card.index] += 1
    if held[JOKER_INDEX] <= 2 * decks and max(held[:JOKER_INDEX]) <= decks:
        return
    seen: Counter[Card] = Counter()
    for i, card in enumerate(cards):
        seen[card] += 1
        if seen[card] > copies_allowed(card, decks):
            what = "jokers" if card.is_joker else f"copies of {card.code()}"
            raise InvalidCardError(
                field_of(i),
                card.code(),
                f"more {what} than the deck holds ({copies_allowed(card, decks)} with {decks} decks)",
            )


@lru_cache(maxsize=8)
def points_by_index(joker_points: int) -> tuple[int, ...]:
    """Every card's points when left unlinked, by card index (``Card.points`` as a table)."""
    return tuple(card.points(joker_points) for card in CARD_BY_INDEX)


@lru_cache(maxsize=8)
def deck_counts(decks: int) -> Counter[Card]:
    """How many of each card the whole deck holds."""
    return Counter(deck(decks))


def deck_size(decks: int) -> int:
    """How many cards the whole deck holds."""
    return 54 * decks
