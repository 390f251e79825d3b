"""Playing a deal record turn by turn (RULES §9): the state after the legal turns, and the first violation.

The answer is a value, as a chess importer's: the valid prefix of the record and the first
illegal turn, if any. Nothing after the first violation is judged, and the state given is the one
just before it. A record that ends with a legal close gives the end-of-deal state (``Replay.deal``),
which ``referee.game.scoring.score_deal`` scores.

Within a turn the checks run in the order a table would notice them: a turn after the close, the
seat, the restock a draw from an empty stock needs, the card drawn, the card thrown or laid down,
a taken card thrown back, and last the close itself.

The state is kept as card indices (a count per card kind for each hand, lists for the piles), so a
turn costs a few list operations; cards are sorted and messages written only for the answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat

from referee.game.cards import CARD_BY_INDEX, CARD_KINDS, Card, format_cards, sort_cards
from referee.game.closing import Close, check_dealt_close
from referee.game.deal import HAND, Deal, PlayerHand
from referee.game.kinds import Kind
from referee.game.rules import DiscardTaken
from referee.play.record import DrawSource, Record, Turn, check_record
from referee.play.shuffle import ALGORITHM, ShuffleProof, reshuffled


class ViolationCode(Kind):
    """Why a turn is illegal (RULES §9.6)."""

    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    DRAWN_MISMATCH = "DRAWN_MISMATCH"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    DISCARD_TAKEN = "DISCARD_TAKEN"
    RESTOCK_MISSING = "RESTOCK_MISSING"
    RESTOCK_MISMATCH = "RESTOCK_MISMATCH"
    FALSE_CLOSE = "FALSE_CLOSE"
    TURN_AFTER_CLOSE = "TURN_AFTER_CLOSE"
    SEED_MISMATCH = "SEED_MISMATCH"
    UNCOMMITTED_SHUFFLE = "UNCOMMITTED_SHUFFLE"


@dataclass(frozen=True, slots=True)
class Violation:
    """The first illegal turn: its number (1-based, 0 for the deal itself), the seat at fault, why,
    and a sentence a person can act on."""

    turn: int
    seat: int
    code: ViolationCode
    message: str


@dataclass(frozen=True, slots=True)
class Replay:
    """A record played out: the first violation (None: legal), the legal turns played, whether a
    legal close ended the deal, and the state after the legal turns."""

    violation: Violation | None
    turns_played: int
    complete: bool
    # Each seat's cards after the legal turns, in canonical order (the closer's: the 10 shown).
    hands: tuple[PlayerHand, ...]
    discard_pile: tuple[Card, ...]  # oldest first, the face-up card last
    stock: tuple[Card, ...]  # top first
    # The seat to play next; None once the deal is closed, or when nothing was dealt.
    to_play: int | None = None
    closer: int | None = None
    discard: Card | None = None  # the close's face-down card
    close: Close | None = None  # the verdict on the close, when the deal was closed
    # The end-of-deal state, when the record is complete and legal.
    deal: Deal | None = None
    reshuffles: int = 0
    # What the record proves about its deck order (committed, seeded without a commitment, or
    # stated): a legal deal whose order was never committed is legal, not proven fair.
    shuffle_proof: ShuffleProof = ShuffleProof.EXPLICIT_DECK

    @property
    def legal(self) -> bool:
        """True when no turn broke the rules."""
        return self.violation is None


_STOCK = DrawSource.STOCK
_DISCARD = DrawSource.DISCARD


def replay(record: Record, committed_only: bool = False) -> Replay:
    """Play ``record`` turn by turn under its rules; raise (naming the field) when it is malformed.

    ``committed_only``: a record whose deck order was not committed before the deal (a seeded
    shuffle without ``server_seed_hash``, or an explicit deck) is the violation
    UNCOMMITTED_SHUFFLE, with nothing dealt, for platforms that promise provably fair deals."""
    check_record(record)
    return _Table(record).play(committed_only)


class _Table:
    """The state of a deal being replayed; mutated only by turns found legal."""

    __slots__ = ("record", "names", "hands", "pile", "stock", "to_play", "reshuffles", "closer", "close", "discard")

    def __init__(self, record: Record) -> None:
        self.record = record
        self.names = [seat.name for seat in record.seats]
        seats = len(record.seats)
        self.hands = [[0] * CARD_KINDS for _ in range(seats)]
        self.pile: list[Card] = []
        self.stock: list[Card] = []  # the top is the last item: a draw is a pop()
        self.to_play = (record.dealer + 1) % seats
        self.reshuffles = 0
        self.closer: int | None = None
        self.close: Close | None = None
        self.discard: Card | None = None

    def deal(self) -> None:
        """Deal 10 cards to each seat one at a time from the top, starting after the dealer; turn
        the next card face up; the rest is the stock (RULES §9.1)."""
        order = self.record.deck_order()
        seats = len(self.hands)
        dealt = HAND * seats
        for offset in range(seats):
            hand = self.hands[(self.to_play + offset) % seats]
            for card in order[offset:dealt:seats]:
                hand[card.index] += 1
        self.pile.append(order[dealt])
        self.stock = list(order[dealt + 1 :])
        self.stock.reverse()

    def play(self, committed_only: bool = False) -> Replay:
        """Deal and apply every turn until the first violation."""
        record = self.record
        shuffle = record.shuffle
        if shuffle is not None and not shuffle.matches_commitment():
            return self.answer(0, self.seed_mismatch())
        if committed_only and record.shuffle_proof is not ShuffleProof.COMMITTED:
            return self.answer(0, self.uncommitted())
        self.deal()
        seats = len(self.hands)
        forbidden = record.rules.discard_taken is DiscardTaken.FORBIDDEN
        # The hot loop reads locals; the stock and the pile stay the same list objects, and the
        # seat to play is written back before any check that reads the table.
        hands, pile, stock = self.hands, self.pile, self.stock
        stock_draw = _STOCK
        to_play = self.to_play
        closed = False
        played = 0
        violation: Violation | None = None
        for number, turn in enumerate(record.turns, 1):
            if closed:
                violation = self.after_close(number, turn)
                break
            self.to_play = to_play
            seat = turn.seat
            if seat is not None and seat != to_play:
                violation = self.not_your_turn(number, seat)
                break
            restock = turn.restock
            from_stock = turn.draw is stock_draw
            new_stock: Sequence[Card] | None = None
            if from_stock and stock:
                if restock is not None:
                    violation = self.restock_not_due(number, turn)
                    break
                card = stock[-1]
            elif from_stock:
                found = self.restocked(restock)
                if isinstance(found, Violation):
                    violation = self.located(number, found)
                    break
                new_stock = found
                card = found[0]
            else:
                if restock is not None:
                    violation = self.restock_not_due(number, turn)
                    break
                card = pile[-1]
            drawn = turn.drawn
            if drawn is not None and drawn.index != card.index:
                violation = self.drawn_mismatch(number, turn, card)
                break
            hand = hands[to_play]
            thrown = turn.discard
            index = thrown.index
            if not hand[index] and index != card.index:
                violation = self.not_in_hand(number, turn, card)
                break
            close = turn.close
            if close:
                verdict = self.closed(card, thrown)
                if not verdict.valid:
                    violation = self.false_close(number, thrown, verdict)
                    break
            elif forbidden and index == card.index and not from_stock:
                violation = self.discard_taken(number, thrown)
                break
            # The turn is legal: apply it.
            if new_stock is not None:
                self.reshuffles += 1
                del pile[:-1]
                stock[:] = new_stock
                stock.reverse()
            if from_stock:
                stock.pop()
            else:
                pile.pop()
            hand[card.index] += 1
            hand[index] -= 1
            played = number
            if close:
                self.closer, self.close, self.discard = to_play, verdict, thrown
                closed = True
            else:
                pile.append(thrown)
                to_play = (to_play + 1) % seats
        self.to_play = to_play
        return self.answer(played, violation)

    # The checks that need more than a glance ---------------------------------------------------

    def restocked(self, restock: tuple[Card, ...] | None) -> Sequence[Card] | Violation:
        """The new stock of a draw from the empty stock: derived from the seed, or the record's own
        (which must be the discard pile less its top), or why not (RULES §9.4)."""
        record = self.record
        under = self.pile[:-1]
        k = self.reshuffles + 1
        if record.shuffle is not None:
            derived = reshuffled(record.shuffle, k, under)
            if restock is not None and [c.index for c in restock] != [c.index for c in derived]:
                at = next(
                    (i for i, (a, b) in enumerate(zip(restock, derived)) if a != b), min(len(restock), len(derived))
                )
                said = restock[at].code() if at < len(restock) else "nothing"
                due = derived[at].code() if at < len(derived) else "nothing"
                return Violation(
                    0,
                    self.to_play,
                    ViolationCode.RESTOCK_MISMATCH,
                    f"gives a restock that is not the one {ALGORITHM} derives (reshuffle {k} of the discard pile "
                    f"less its top, {len(derived)} cards): card {at + 1} from the top is {due}, not {said}",
                )
            return derived
        if restock is None:
            return Violation(
                0,
                self.to_play,
                ViolationCode.RESTOCK_MISSING,
                f"draws from the empty stock but gives no restock: with an explicit deck the record gives the "
                f"new stock, the {len(under)} cards of the discard pile less its top ({format_cards(sort_cards(under))})",
            )
        if sorted(c.index for c in restock) != sorted(c.index for c in under):
            given, wanted = Counter(c.index for c in restock), Counter(c.index for c in under)
            extra = sort_cards(CARD_BY_INDEX[i] for i in (given - wanted).elements())
            missing = sort_cards(CARD_BY_INDEX[i] for i in (wanted - given).elements())
            return Violation(
                0,
                self.to_play,
                ViolationCode.RESTOCK_MISMATCH,
                f"gives a restock that is not the discard pile less its top ({format_cards(sort_cards(under))}): "
                f"not in the pile {format_cards(extra) or 'nothing'}; left out {format_cards(missing) or 'nothing'}",
            )
        return restock

    def closed(self, card: Card, thrown: Card) -> Close:
        """The verdict on closing with ``thrown`` face down after drawing ``card`` (RULES §4)."""
        held = self.hands[self.to_play][:]
        held[card.index] += 1
        held[thrown.index] -= 1
        # The hand's counts give the shown cards in canonical order, each within the deck's copies.
        return check_dealt_close(_cards_of(held), thrown, self.record.rules)

    # The answer and the messages -----------------------------------------------------------------

    def answer(self, played: int, violation: Violation | None) -> Replay:
        """The replay as it stands after ``played`` legal turns, with the first violation."""
        record = self.record
        hands = tuple(
            PlayerHand(seat.name, _cards_of(hand), seat.score) for seat, hand in zip(record.seats, self.hands)
        )
        pile = tuple(self.pile)
        stock = tuple(reversed(self.stock))
        deal = None
        if violation is None and self.closer is not None:
            assert self.discard is not None
            deal = Deal(hands, self.closer, self.discard, pile, stock, record.eliminated)
        return Replay(
            violation=violation,
            turns_played=played,
            complete=self.closer is not None,
            hands=hands,
            discard_pile=pile,
            stock=stock,
            to_play=self.to_play if self.closer is None and self.pile else None,
            closer=self.closer,
            discard=self.discard,
            close=self.close,
            deal=deal,
            reshuffles=self.reshuffles,
            shuffle_proof=record.shuffle_proof,
        )

    def violation(self, number: int, seat: int, code: ViolationCode, what: str) -> Violation:
        """A violation on turn ``number`` by ``seat``, its message led by the turn and the name."""
        return Violation(number, seat, code, f"turn {number}, {self.names[seat]}: {what}")

    def located(self, number: int, found: Violation) -> Violation:
        """``found`` (made without its turn) placed on turn ``number``."""
        return self.violation(number, found.seat, found.code, found.message)

    def holding(self, card: Card) -> str:
        """What the player to play holds after drawing ``card``."""
        held = self.hands[self.to_play][:]
        held[card.index] += 1
        return format_cards(_cards_of(held))

    def seed_mismatch(self) -> Violation:
        """The revealed seed does not hash to the commitment: nothing is dealt."""
        shuffle = self.record.shuffle
        assert shuffle is not None and shuffle.server_seed_hash is not None
        dealer = self.record.dealer
        return Violation(
            0,
            dealer,
            ViolationCode.SEED_MISMATCH,
            f"the deal, dealt by {self.names[dealer]}: the revealed server seed hashes to {shuffle.commitment()}, "
            f"not to the committed {shuffle.server_seed_hash}; nothing is dealt",
        )

    def uncommitted(self) -> Violation:
        """The deck order was never committed, and only committed ones are judged: nothing is dealt."""
        dealer = self.record.dealer
        what = (
            "its deck is stated, not dealt from a committed shuffle"
            if self.record.shuffle is None
            else "its shuffle gives no server_seed_hash committed before the deal"
        )
        return Violation(
            0,
            dealer,
            ViolationCode.UNCOMMITTED_SHUFFLE,
            f"the deal, dealt by {self.names[dealer]}: {what}; only deals whose order was committed are judged here",
        )

    def after_close(self, number: int, turn: Turn) -> Violation:
        """A turn after the deal was closed."""
        assert self.closer is not None
        seat = turn.seat if turn.seat is not None else (self.closer + 1) % len(self.hands)
        return self.violation(
            number,
            seat,
            ViolationCode.TURN_AFTER_CLOSE,
            f"comes after {self.names[self.closer]} closed the deal on turn {number - 1}; nothing more is played",
        )

    def not_your_turn(self, number: int, seat: int) -> Violation:
        """The turn names a seat that is not the one to play."""
        return self.violation(
            number,
            seat,
            ViolationCode.NOT_YOUR_TURN,
            f"plays out of turn: it is {self.names[self.to_play]}'s turn (seat {self.to_play})",
        )

    def restock_not_due(self, number: int, turn: Turn) -> Violation:
        """A restock given where no reshuffle happens."""
        if turn.draw is _DISCARD:
            why = "but draws from the discard pile: only a draw from the empty stock reshuffles"
        else:
            why = f"but the stock still holds {len(self.stock)} cards: only a draw from the empty stock reshuffles"
        return self.violation(number, self.to_play, ViolationCode.RESTOCK_MISMATCH, f"gives a restock {why}")

    def drawn_mismatch(self, number: int, turn: Turn, card: Card) -> Violation:
        """The turn names a drawn card that is not what the draw gives."""
        assert turn.drawn is not None
        where = "the top of the stock" if turn.draw is _STOCK else "the face-up top of the discard pile"
        return self.violation(
            number,
            self.to_play,
            ViolationCode.DRAWN_MISMATCH,
            f"says the draw gave {turn.drawn}, but {where} is {card}",
        )

    def not_in_hand(self, number: int, turn: Turn, card: Card) -> Violation:
        """The card thrown or laid down is not in the hand after the draw."""
        act = f"lays {turn.discard} face down to close" if turn.close else f"discards {turn.discard}"
        return self.violation(
            number,
            self.to_play,
            ViolationCode.CARD_NOT_IN_HAND,
            f"{act}, which is not in their hand (they hold {self.holding(card)} after drawing {card})",
        )

    def discard_taken(self, number: int, thrown: Card) -> Violation:
        """A card taken from the discard pile thrown back face up under ``discard_taken`` FORBIDDEN."""
        return self.violation(
            number,
            self.to_play,
            ViolationCode.DISCARD_TAKEN,
            f"throws back {thrown}, the card they took from the discard pile this turn "
            f"(discard_taken FORBIDDEN; laying it face down to close would be allowed)",
        )

    def false_close(self, number: int, thrown: Card, verdict: Close) -> Violation:
        """A close whose 10 shown cards are no valid close."""
        return self.violation(
            number,
            self.to_play,
            ViolationCode.FALSE_CLOSE,
            f"closes laying {thrown} face down, but the 10 shown cards ({format_cards(verdict.shown)}) are no "
            f"valid close: {verdict.reason}",
        )


def _cards_of(counts: Sequence[int]) -> tuple[Card, ...]:
    """The cards a count per card kind stands for, in canonical order."""
    # Most hands hold no card twice: then one pass in C gives them.
    cards = tuple(compress(CARD_BY_INDEX, counts))
    if len(cards) == sum(counts):
        return cards
    # Else (two decks: a pair is common) each card as many times as it is held, still in C.
    return tuple(chain.from_iterable(map(repeat, CARD_BY_INDEX, counts)))


__all__ = ["Replay", "Violation", "ViolationCode", "replay"]
