"""Review of a deal, decision by decision: what each draw, throw and close cost, by the measure of a
hand's progress (``referee.play.measure``; the pure core of a fair-play review; ``docs/review.md``
states it all).

**The review.** ``review_deal`` replays a record (RULES §9) and judges every turn from the seat's
information set (its hand; the discard pile; the cards others took from the pile and still hold;
the rest is unseen) and omnisciently (the real stock; its top card known). Decisions, losses,
marks and accuracy are defined in ``docs/review.md``. Nothing here proves anything about a player:
a flag starts a human review.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from referee.game.cards import CARD_BY_INDEX, CARD_KINDS, Card, deck_counts
from referee.game.closing import best_close
from referee.game.kinds import Kind
from referee.game.linking import check_time_left
from referee.game.rules import DiscardTaken, RuleSet
from referee.play.measure import (
    SHOWN,
    UNREACHABLE,
    Counts,
    Progress,
    add_card,
    cards_of,
    counts_of,
    distance_of,
    forget_measures,
    hand_value,
    measure,
    measure_throws,
    search_rules,
)
from referee.play.record import DrawSource, Record
from referee.play.replay import replay
from referee.play.shuffle import reshuffled

__all__ = [
    # The review's own names.
    "BLUNDER_LOSS",
    "CLOSE",
    "CLOSE_VALUE",
    "DISCARD",
    "INACCURACY_LOSS",
    "MISTAKE_LOSS",
    "PLAY_ON",
    "STOCK",
    "Choice",
    "DealReview",
    "Decision",
    "DecisionKind",
    "Mark",
    "SeatReview",
    "TurnReview",
    "Verdict",
    "accuracy",
    "marks_for",
    "move_accuracy",
    "review_deal",
    "win_drop",
    # The measure's, importable from here as they were before it had its own module.
    "UNREACHABLE",
    "Progress",
    "counts_of",
    "distance_of",
    "forget_measures",
    "hand_value",
    "measure",
    "measure_throws",
]

# --- reviewing a deal -----------------------------------------------------------------------------


class DecisionKind(Kind):
    """The decisions of a turn (RULES §9.2)."""

    DRAW = "DRAW"  # the stock or the face-up card
    CLOSE = "CLOSE"  # close or play on, judged only when the 11 cards held a valid close
    THROW = "THROW"  # which card to throw face up


class Mark(Kind):
    """What a decision is flagged with (``docs/review.md``)."""

    INACCURACY = "INACCURACY"  # loss of at least INACCURACY_LOSS
    MISTAKE = "MISTAKE"  # at least MISTAKE_LOSS
    BLUNDER = "BLUNDER"  # at least BLUNDER_LOSS
    PASSED_CLOSE = "PASSED_CLOSE"  # the 11 cards held a valid close and the seat threw instead
    FED = "FED"  # the card thrown was taken by the next seat and brought it nearer, or into its close


# Losses, in steps of distance, from which a decision is marked (the highest mark that applies).
INACCURACY_LOSS = 0.10
MISTAKE_LOSS = 0.25
BLUNDER_LOSS = 0.60
# The value of closing: one step beyond a hand that could close (distance 0), whatever it holds.
CLOSE_VALUE = 1.0
STOCK, DISCARD, CLOSE, PLAY_ON = "STOCK", "DISCARD", "CLOSE", "PLAY_ON"


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of a decision: its name (``STOCK``, ``DISCARD``, ``CLOSE``, ``PLAY_ON`` or the code
    of the card thrown), its value, and for a throw the progress of the 10 cards it leaves."""

    choice: str
    value: float
    progress: Progress | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision judged from one viewpoint: every option, the best ones, and the loss of the one chosen."""

    options: tuple[Choice, ...]
    best: tuple[str, ...]
    loss: float

    @property
    def forced(self) -> bool:
        """True when every option is worth the same: there was nothing to choose."""
        return len(self.best) == len(self.options)


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision of a turn: what was chosen, judged from the seat's information set and omnisciently."""

    kind: DecisionKind
    choice: str
    judged: Verdict  # from what the seat knew
    omniscient: Verdict  # with the real stock known (its top, and its cards as the unseen)
    marks: tuple[Mark, ...]

    @property
    def loss(self) -> float:
        """The loss from the seat's information set, in steps of distance."""
        return self.judged.loss

    @property
    def omniscient_differs(self) -> bool:
        """Whether knowing the stock changes which options are best."""
        return set(self.judged.best) != set(self.omniscient.best)

    @property
    def agrees_with_omniscient(self) -> bool | None:
        """Where the omniscient best differs from the information-set best: whether the choice is
        among the omniscient best (None where they do not differ)."""
        return self.choice in self.omniscient.best if self.omniscient_differs else None


@dataclass(frozen=True, slots=True)
class TurnReview:
    """One turn reviewed: who played, the hand's progress before the draw, and each decision."""

    number: int  # 1-based, as in the record
    seat: int
    before: Progress  # the 10 cards before the draw, against the seat's unseen cards
    drawn: Card
    thrown: Card  # thrown face up, or laid face down to close
    closed: bool
    decisions: tuple[Decision, ...]


@dataclass(frozen=True, slots=True)
class SeatReview:
    """One seat's decisions over the deal, summed up."""

    seat: int
    name: str
    decisions: int  # judged decisions that were a choice (not forced)
    accuracy: float | None  # docs/review.md; None with no decision to judge
    average_loss: float
    inaccuracies: int
    mistakes: int
    blunders: int
    passed_closes: int
    fed: int
    omniscient_differs: int  # decisions where knowing the stock changes the best options
    omniscient_agrees: int  # ... and the seat's choice is among the omniscient best


@dataclass(frozen=True, slots=True)
class DealReview:
    """A record reviewed: every legal turn, and each seat's summary."""

    turns: tuple[TurnReview, ...]
    seats: tuple[SeatReview, ...]
    legal: bool  # False: only the turns before the first violation are reviewed


def win_drop(loss: float) -> float:
    """The loss as a drop of winning chances in percent (0-100), the scale Lichess's accuracy reads:
    ``100 × (1 - e^-loss)``."""
    return 100.0 * (1.0 - math.exp(-max(0.0, loss)))


def move_accuracy(loss: float) -> float:
    """The accuracy of one decision, Lichess's transform of a drop of winning chances (with its +1)."""
    raw = 103.1668100711649 * math.exp(-0.04354415386753951 * win_drop(loss)) - 3.166924740191411
    return min(100.0, max(0.0, raw + 1.0))


def accuracy(losses: Sequence[float]) -> float | None:
    """A seat's accuracy over its decisions: the mean of the arithmetic and the harmonic mean of the
    decisions' accuracies (each at least 1 in the harmonic mean), as Lichess's game accuracy without
    its volatility weights; None with no decision."""
    if not losses:
        return None
    each = [move_accuracy(loss) for loss in losses]
    mean = sum(each) / len(each)
    harmonic = len(each) / sum(1.0 / max(1.0, a) for a in each)
    return (mean + harmonic) / 2


def marks_for(loss: float) -> tuple[Mark, ...]:
    """The mark a loss earns, if any: the highest threshold it reaches."""
    if loss >= BLUNDER_LOSS:
        return (Mark.BLUNDER,)
    if loss >= MISTAKE_LOSS:
        return (Mark.MISTAKE,)
    if loss >= INACCURACY_LOSS:
        return (Mark.INACCURACY,)
    return ()


def _verdict(
    options: Sequence[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]], chosen: str
) -> Verdict:
    """The verdict over ``options`` (name, exact rank, value, progress): the best are those of the
    highest rank; the loss is the value of the best less the value chosen."""
    top = max(rank for _, rank, _, _ in options)
    best = tuple(name for name, rank, _, _ in options if rank == top)
    best_value = max(value for _, rank, value, _ in options if rank == top)
    mine = next(value for name, _, value, _ in options if name == chosen)
    loss = 0.0 if chosen in best else max(0.0, best_value - mine)
    return Verdict(tuple(Choice(name, value, progress) for name, _, value, progress in options), best, loss)


def _minus(a: Counts, b: Sequence[int]) -> Counts:
    return tuple(x - y for x, y in zip(a, b))


def _plus(a: Counts, b: Sequence[int]) -> Counts:
    return tuple(x + y for x, y in zip(a, b))


class _Judge:
    """Values of the options of one seat's turn, from one viewpoint (a multiset of unseen cards)."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules

    def after_draw(self, hand: Counts, card: int, unseen: Counts, keep: int | None) -> int:
        """The distance after drawing ``card`` and throwing the best card (never ``keep``, a card
        taken from the pile under ``discard_taken`` FORBIDDEN)."""
        held = add_card(hand, card)
        if keep is None:
            return distance_of(held, unseen, self.rules)
        return min(
            distance_of(add_card(held, t, -1), unseen, self.rules) for t in range(CARD_KINDS) if held[t] and t != keep
        )

    @staticmethod
    def throws(
        measured: dict[Card, Progress], keep: int | None
    ) -> list[tuple[str, tuple[int, int, int], float, Progress]]:
        """Each card kind that may be thrown (``measure_throws`` of the 11 cards held, but
        ``keep``), with the progress it leaves."""
        out = []
        for card, progress in measured.items():
            if card.index != keep:
                out.append((card.code(), progress.key, progress.value, progress))
        return out


@dataclass(slots=True)
class _Turn:
    """A turn being reviewed (filled in two passes: FED needs the next turn)."""

    number: int
    seat: int
    before: Progress
    drawn: Card
    thrown: Card
    closed: bool
    decisions: list[tuple[DecisionKind, str, Verdict, Verdict, list[Mark]]]
    # For the next seat's FED: its distance before the draw and after taking the face-up card.
    took_pile: bool
    distance_before: int
    distance_with_pile: int
    shown: Counts | None


def review_deal(record: Record) -> DealReview:
    """Review every legal turn of ``record``: each draw, close and throw judged from the seat's
    information set and omnisciently, each seat summed up (``docs/review.md``)."""
    result = replay(record)
    rules = search_rules(record.rules)
    judge = _Judge(rules)
    seats = len(record.seats)
    order = record.deck_order()
    first = (record.dealer + 1) % seats
    hands = [[0] * CARD_KINDS for _ in range(seats)]
    for offset in range(seats):
        for dealt in order[offset : SHOWN * seats : seats]:
            hands[(first + offset) % seats][dealt.index] += 1
    pile = [order[SHOWN * seats].index]
    stock = [card.index for card in reversed(order[SHOWN * seats + 1 :])]  # the top last
    known = [[0] * CARD_KINDS for _ in range(seats)]  # cards each seat took from the pile and still holds
    deck_all = tuple(deck_counts(rules.decks).get(card, 0) for card in CARD_BY_INDEX)
    forbidden = rules.discard_taken is DiscardTaken.FORBIDDEN
    reshuffles = 0
    turns: list[_Turn] = []
    seat = first
    for number, turn in enumerate(record.turns[: result.turns_played], 1):
        check_time_left()  # a call's budget bounds a long deal's review, turn by turn
        hand = tuple(hands[seat])
        top = pile[-1]
        pile_counts = [0] * CARD_KINDS
        for c in pile:
            pile_counts[c] += 1
        others = [0] * CARD_KINDS
        for o in range(seats):
            if o != seat:
                others = [a + b for a, b in zip(others, known[o])]
        unseen = _minus(_minus(deck_all, hand), _plus(tuple(pile_counts), others))
        # The stock as it will be drawn from: a draw from the empty stock reshuffles the pile less its top.
        under: list[int] = []
        real_stock = stock
        if not stock:
            under = pile[:-1]
            new: Sequence[Card] = ()
            if record.shuffle is not None:
                new = reshuffled(record.shuffle, reshuffles + 1, [CARD_BY_INDEX[c] for c in under])
            elif turn.restock is not None:
                new = turn.restock
            # An explicit deck's record gives the new order only when the seat draws from it.
            real_stock = [card.index for card in reversed(new)]
        # The draw made, and the throws it allows, from both viewpoints.
        if stock or not under:
            pool, draws = unseen, unseen
        else:  # the stock is the pile less its top, whose cards the seat saw
            pool = _plus(unseen, _counts_of_indices(under))
            draws = _counts_of_indices(under)
        keep = top if forbidden else None
        chosen = STOCK if turn.draw is DrawSource.STOCK else DISCARD
        stock_now = _counts_of_indices(real_stock)
        if turn.draw is DrawSource.STOCK:
            card = real_stock[-1]
            after_unseen = add_card(pool, card, -1)
            stock_after = add_card(stock_now, card, -1)
        else:
            card = top
            after_unseen = unseen
            stock_after = stock_now
        held = add_card(hand, card)
        taken = card if (forbidden and turn.draw is DrawSource.DISCARD) else None
        measured = measure_throws(held, after_unseen, rules)
        info_throws = judge.throws(measured, taken)
        omni_throws = judge.throws(measure_throws(held, stock_after, rules), taken)
        # The hand before the draw, from the information set: after taking the face-up card, the
        # throw of that card leaves it, against the same unseen cards.
        before = measured[CARD_BY_INDEX[card]] if turn.draw is DrawSource.DISCARD else measure(hand, unseen, rules)
        progress = before if stock or not under else measure(hand, pool, rules)
        nearest = min(p.distance for *_, p in info_throws)
        nearest_omni = min(p.distance for *_, p in omni_throws)
        # The draw, from the information set: the face-up card is known, the stock is any unseen card.
        with_pile = nearest if chosen == DISCARD else judge.after_draw(hand, top, unseen, keep)
        options: list[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]] = [
            (DISCARD, Fraction(-with_pile), float(-with_pile), None)
        ]
        total = sum(draws)
        if total:
            hits = sum(draws[c.index] for c in progress.outs)
            stock_value = -(progress.distance - Fraction(hits, total))
            options.append((STOCK, stock_value, float(stock_value), None))
        draw_verdict = _verdict(options, chosen)
        # The draw, omnisciently: the stock's cards are the unseen, its top is known.
        omni: list[tuple[str, Fraction | tuple[int, int, int], float, Progress | None]] = []
        d_pile = nearest_omni if chosen == DISCARD else judge.after_draw(hand, top, stock_now, keep)
        omni.append((DISCARD, Fraction(-d_pile), float(-d_pile), None))
        if real_stock:
            s = real_stock[-1]
            d_stock = nearest_omni if chosen == STOCK else judge.after_draw(hand, s, add_card(stock_now, s, -1), None)
            omni.append((STOCK, Fraction(-d_stock), float(-d_stock), None))
        draw_omniscient = _verdict(omni, chosen) if chosen in {name for name, *_ in omni} else draw_verdict
        decisions: list[tuple[DecisionKind, str, Verdict, Verdict, list[Mark]]] = [
            (DecisionKind.DRAW, chosen, draw_verdict, draw_omniscient, list(marks_for(draw_verdict.loss)))
        ]
        # Apply the draw.
        if turn.draw is DrawSource.STOCK:
            if not stock:
                reshuffles += 1
                del pile[:-1]
                stock[:] = real_stock
            stock.pop()
        else:
            pile.pop()
            known[seat][card] += 1  # every seat saw it taken
        thrown = turn.discard.index
        closable = turn.close
        if not closable and nearest == 0:
            closable = best_close(cards_of(held), rules).valid
        if closable:
            chosen_close = CLOSE if turn.close else PLAY_ON
            best_throw = max(info_throws, key=lambda o: o[1])
            best_omni = max(omni_throws, key=lambda o: o[1])
            close_verdict = _verdict(
                [(CLOSE, (1, 0, 0), CLOSE_VALUE, None), (PLAY_ON, (0, 0, 0), best_throw[2], None)], chosen_close
            )
            close_omni = _verdict(
                [(CLOSE, (1, 0, 0), CLOSE_VALUE, None), (PLAY_ON, (0, 0, 0), best_omni[2], None)], chosen_close
            )
            marks = list(marks_for(close_verdict.loss))
            if not turn.close:
                marks.append(Mark.PASSED_CLOSE)
            decisions.append((DecisionKind.CLOSE, chosen_close, close_verdict, close_omni, marks))
        if not turn.close:
            name = CARD_BY_INDEX[thrown].code()
            throw_verdict = _verdict(info_throws, name)
            throw_omni = _verdict(omni_throws, name)
            decisions.append((DecisionKind.THROW, name, throw_verdict, throw_omni, list(marks_for(throw_verdict.loss))))
        # Apply the throw.
        hands[seat][card] += 1
        hands[seat][thrown] -= 1
        if known[seat][thrown]:
            known[seat][thrown] -= 1
        shown = None
        if turn.close:
            shown = add_card(held, thrown, -1)
        else:
            pile.append(thrown)
        turns.append(
            _Turn(
                number=number,
                seat=seat,
                before=before,
                drawn=CARD_BY_INDEX[card],
                thrown=turn.discard,
                closed=turn.close,
                decisions=decisions,
                took_pile=turn.draw is DrawSource.DISCARD,
                distance_before=before.distance,
                distance_with_pile=with_pile,
                shown=shown,
            )
        )
        if turn.close:
            break
        seat = (seat + 1) % seats
    _mark_fed(turns)
    return _assemble(record, turns, result.legal)


def _counts_of_indices(indices: Iterable[int]) -> Counts:
    held = [0] * CARD_KINDS
    for i in indices:
        held[i] += 1
    return tuple(held)


def _mark_fed(turns: list[_Turn]) -> None:
    """Mark FED the throws the next seat took from the pile and that brought it nearer (by its own
    information set) or into its close."""
    for mine, theirs in zip(turns, turns[1:]):
        if not theirs.took_pile or mine.closed:
            continue
        card = mine.thrown.index
        nearer = theirs.distance_with_pile < theirs.distance_before
        in_close = theirs.shown is not None and theirs.shown[card] > 0
        if nearer or in_close:
            for kind, _, _, _, marks in mine.decisions:
                if kind is DecisionKind.THROW:
                    marks.append(Mark.FED)


def _assemble(record: Record, turns: list[_Turn], legal: bool) -> DealReview:
    reviewed = tuple(
        TurnReview(
            number=t.number,
            seat=t.seat,
            before=t.before,
            drawn=t.drawn,
            thrown=t.thrown,
            closed=t.closed,
            decisions=tuple(
                Decision(kind, choice, judged, omniscient, tuple(marks))
                for kind, choice, judged, omniscient, marks in t.decisions
            ),
        )
        for t in turns
    )
    summaries = []
    for seat, info in enumerate(record.seats):
        decisions = [d for t in reviewed if t.seat == seat for d in t.decisions]
        judged = [d for d in decisions if not d.judged.forced]
        losses = [d.loss for d in judged]
        marks = [m for d in decisions for m in d.marks]
        differs = [d for d in judged if d.omniscient_differs]
        summaries.append(
            SeatReview(
                seat=seat,
                name=info.name,
                decisions=len(judged),
                accuracy=accuracy(losses),
                average_loss=sum(losses) / len(losses) if losses else 0.0,
                inaccuracies=marks.count(Mark.INACCURACY),
                mistakes=marks.count(Mark.MISTAKE),
                blunders=marks.count(Mark.BLUNDER),
                passed_closes=marks.count(Mark.PASSED_CLOSE),
                fed=marks.count(Mark.FED),
                omniscient_differs=len(differs),
                omniscient_agrees=sum(1 for d in differs if d.agrees_with_omniscient),
            )
        )
    return DealReview(reviewed, tuple(summaries), legal)
