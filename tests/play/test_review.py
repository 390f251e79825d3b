"""The review's measure against a brute-force oracle, worked examples, and deals reviewed turn by turn.

The oracle knows nothing of the review's search. On a small deck (nine kinds of natural card, two
copies each, and jokers) it lists every multiset of 10 cards the deck holds and asks the project's
own close validator (``referee.game.closing.check_close``) which are valid closes. Then, straight from
the definitions: the distance of a hand is the fewest swaps, ``10 - max overlap`` over the valid
closes within the hand and the unseen cards; a card is improving when drawing it and throwing the
best card leaves a hand whose distance (against the unseen cards less the one drawn) is smaller;
the points come from the brute-force linking oracle of ``tests/oracle.py``. Swaps are also
enumerated one by one on a few hands, to tie ``10 - max overlap`` to "fewest swaps".

Every test here also carries ``property`` so that the module is collected with a tier even
before ``tests/conftest.py`` names it (the module's place in TIERS is the wiring step's).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from collections import Counter
from dataclasses import replace
from functools import cache, lru_cache
from itertools import combinations
from pathlib import Path

import numpy as np
import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.game.cards import JOKER_INDEX, Card, deck, parse_cards
from referee.game.closing import best_close, check_close
from referee.game.rules import DiscardTaken, Engine, JokerDiscard, JokerLimit, RuleSet
from referee.play.record import DrawSource, Record
from referee.play.replay import replay
from referee.play.review import (
    CLOSE,
    PLAY_ON,
    UNREACHABLE,
    DealReview,
    DecisionKind,
    Mark,
    Progress,
    Verdict,
    accuracy,
    counts_of,
    distance_of,
    forget_measures,
    hand_value,
    marks_for,
    measure,
    measure_throws,
    move_accuracy,
    review_deal,
    win_drop,
)
from referee.play.simulate import simulate

pytestmark = pytest.mark.property

LIMITS = tuple(JokerLimit)
# A small deck that has runs with the ace low (A 2 3 4), high (Q K A) and round the corner (K A 2,
# with wrap_runs), same-rank groups with the same card twice, and colors (12 hearts and jokers).
SMALL = tuple(Card.parse(code) for code in "AH 2H 3H 4H QH KH AS 2S KS".split())
OUTSIDE = Card.parse("9D")  # a discard for the validator: no card of the small deck


def rules_of(limit: JokerLimit, wrap: bool) -> RuleSet:
    return RuleSet(joker_limit=limit, wrap_runs=wrap, engine=Engine.SEARCH)


# --- the oracle ---------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def valid_targets(limit: JokerLimit, wrap: bool) -> np.ndarray:
    """Every valid close of 10 cards the small deck (with up to 3 jokers) holds, one row of
    counts per close (columns: the small deck's kinds, then the joker)."""
    rules = rules_of(limit, wrap)
    caps = [2] * len(SMALL) + [3]
    rows = []
    for counts in _multisets(caps, 10):
        shown = [card for card, n in zip((*SMALL, Card(None, None)), counts) for _ in range(n)]
        if check_close(shown, OUTSIDE, rules).valid:
            rows.append(counts)
    return np.array(rows, dtype=np.int16).reshape(-1, len(caps))


def _multisets(caps: list[int], total: int) -> list[tuple[int, ...]]:
    if not caps:
        return [()] if total == 0 else []
    return [(n, *rest) for n in range(min(caps[0], total) + 1) for rest in _multisets(caps[1:], total - n)]


def small_counts(cards: list[Card]) -> np.ndarray:
    kinds = [card.index for card in SMALL] + [JOKER_INDEX]
    full = counts_of(cards)
    return np.array([full[i] for i in kinds], dtype=np.int16)


def oracle_distance(targets: np.ndarray, hand: np.ndarray, unseen: np.ndarray) -> int:
    """10 - the highest overlap of a valid close within hand + unseen with the hand."""
    within = targets[(targets <= hand + unseen).all(axis=1)]
    if not len(within):
        return UNREACHABLE
    return 10 - int(np.minimum(within, hand).sum(axis=1).max())


def oracle_improving(targets: np.ndarray, hand: np.ndarray, unseen: np.ndarray) -> int:
    """The unseen cards (copies counted) after whose draw some throw leaves a smaller distance."""
    now = oracle_distance(targets, hand, unseen)
    if now in (0, UNREACHABLE):
        return 0
    count = 0
    for c in np.flatnonzero(unseen):
        drawn = hand.copy()
        drawn[c] += 1
        left = unseen.copy()
        left[c] -= 1
        after = min(
            oracle_distance(targets, drawn - np.eye(len(hand), dtype=np.int16)[t], left) for t in np.flatnonzero(drawn)
        )
        if after < now:
            count += int(unseen[c])
    return count


def oracle_points(cards: list[Card], limit: JokerLimit, wrap: bool) -> int:
    return oracle.best_linking(oracle.parse_hand([c.code() for c in cards]), limit.value, wrap).points


# --- the measure against the oracle -----------------------------------------------------------------


@st.composite
def deals(draw: st.DrawFn) -> tuple[list[Card], list[Card], int]:
    """A hand of 10 from the small deck (with 0 to 3 jokers) and the unseen cards: part of the rest."""
    jokers = draw(st.integers(0, 3), label="jokers")
    pool = [card for card in SMALL for _ in range(2)] + [Card(None, None)] * jokers
    order = draw(st.permutations(pool), label="order")
    hand = list(order[:10])
    keep = draw(st.lists(st.booleans(), min_size=len(order) - 10, max_size=len(order) - 10), label="unseen")
    unseen = [card for card, kept in zip(order[10:], keep) if kept]
    return hand, unseen, jokers


@pytest.mark.parametrize("wrap", [False, True], ids=["no-wrap", "wrap"])
@pytest.mark.parametrize("limit", LIMITS, ids=[limit.value for limit in LIMITS])
@settings(derandomize=True, deadline=None, database=None, max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(case=deals())
def test_the_measure_matches_the_oracle(
    limit: JokerLimit, wrap: bool, case: tuple[list[Card], list[Card], int]
) -> None:
    hand, unseen, jokers = case
    rules = rules_of(limit, wrap)
    targets = valid_targets(limit, wrap)
    h, u = small_counts(hand), small_counts(unseen)
    got = measure(hand, unseen, rules)
    shown = " ".join(c.code() for c in hand) + " | " + " ".join(c.code() for c in unseen)
    assert got.distance == oracle_distance(targets, h, u), shown
    assert got.improving == oracle_improving(targets, h, u), shown
    assert got.points == oracle_points(hand, limit, wrap), shown
    if unseen:  # 11 cards: the hand after a draw (the drawn card no longer unseen)
        drawn = unseen[0]
        eleven = distance_of(counts_of([*hand, drawn]), counts_of(unseen[1:]), rules)
        assert eleven == oracle_distance(targets, h + small_counts([drawn]), u - small_counts([drawn])), shown


# Hands where a core's way could stand in for a group of the same size in a completion already
# found (``_Filler.collect``'s witnesses) but does not fit with that completion's other groups: in
# the first two its places ask for a card or a rank another group's places ask for (``_apart``
# fails), in the third the jokers there are fall short of the groups' needs together. Without
# either half of the shortcut's fit check, the measure counts one improving card too many (each
# half was removed in turn and these cases failed: the first two without ``_apart``, the third
# without the jokers' sum).
STAND_INS = [
    ("4H QH 3H AH 4H 2S KS KS 2S AH", "QH AS KH AS 2H"),
    ("2H AS 4H 2H 4H KH 3H 2S 2S QH", "KS KS QH AH"),
    ("3H KS QH 2H 2S 4H JK 4H AS 2S", "2H KH KH AS KS"),
]


@pytest.mark.parametrize(("hand", "unseen"), STAND_INS, ids=["shared-card", "shared-rank", "jokers-short"])
def test_a_stand_in_counts_only_when_it_fits_with_the_other_groups(hand: str, unseen: str) -> None:
    """The stand-in shortcut's fit check, against the oracle: each of these hands has a way of a
    core that some found completion's group of the same size could be swapped for, and that
    cannot be filled together with the other groups (their places ask for the same cards or
    ranks, or the jokers fall short); its cards are not improving."""
    limit, wrap = JokerLimit.UNLIMITED, False
    held, pool = parse_cards(hand.split()), parse_cards(unseen.split())
    targets = valid_targets(limit, wrap)
    h, u = small_counts(list(held)), small_counts(list(pool))
    got = measure(held, pool, rules_of(limit, wrap))
    assert (got.distance, got.improving) == (oracle_distance(targets, h, u), oracle_improving(targets, h, u))


def test_ten_minus_the_best_overlap_is_the_fewest_swaps() -> None:
    """Swaps enumerated one by one: the fewest that make a valid close is the measure's distance."""
    rules = rules_of(JokerLimit.UNLIMITED, False)
    rng = random.Random(7)
    checked = 0
    while checked < 12:
        pool = [card for card in SMALL for _ in range(2)] + [Card(None, None)] * 2
        rng.shuffle(pool)
        hand, unseen = pool[:10], [card for card in pool[10:] if rng.random() < 0.6]
        distance = measure(hand, unseen, rules).distance
        if distance > 2:
            continue
        fewest = next(k for k in range(3) if _closes_after_swaps(hand, unseen, k, rules))
        assert fewest == distance, (hand, unseen)
        checked += 1


def _closes_after_swaps(hand: list[Card], unseen: list[Card], k: int, rules: RuleSet) -> bool:
    """Whether throwing some k cards of ``hand`` and drawing some k of ``unseen`` gives a valid close."""
    for thrown in set(combinations(sorted(hand), k)):
        kept = list(hand)
        for card in thrown:
            kept.remove(card)
        for drawn in set(combinations(sorted(unseen), k)):
            if check_close([*kept, *drawn], OUTSIDE, rules).valid:
                return True
    return False


@st.composite
def throws(draw: st.DrawFn) -> tuple[list[Card], list[Card]]:
    """11 cards after a draw from the small deck (with 0 to 3 jokers), and the unseen cards: part of the rest."""
    jokers = draw(st.integers(0, 3), label="jokers")
    pool = [card for card in SMALL for _ in range(2)] + [Card(None, None)] * jokers
    order = draw(st.permutations(pool), label="order")
    keep = draw(st.lists(st.booleans(), min_size=len(order) - 11, max_size=len(order) - 11), label="unseen")
    return list(order[:11]), [card for card, kept in zip(order[11:], keep) if kept]


@pytest.mark.parametrize("wrap", [False, True], ids=["no-wrap", "wrap"])
@pytest.mark.parametrize("limit", LIMITS, ids=[limit.value for limit in LIMITS])
@settings(derandomize=True, deadline=None, database=None, max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(case=throws())
def test_each_throw_is_measured_as_the_hand_it_leaves(
    limit: JokerLimit, wrap: bool, case: tuple[list[Card], list[Card]]
) -> None:
    """The throws of 11 cards, judged together in one walk (the core sets each serves, its outs
    gathered from the sets of its best value), against the oracle and the measure of each 10
    cards left on their own."""
    held, unseen = case
    rules = rules_of(limit, wrap)
    targets = valid_targets(limit, wrap)
    u = small_counts(unseen)
    shown = " ".join(c.code() for c in held) + " | " + " ".join(c.code() for c in unseen)
    for card, got in measure_throws(counts_of(held), counts_of(unseen), rules).items():
        left = list(held)
        left.remove(card)
        assert got == measure(left, unseen, rules), (card.code(), shown)
        h = small_counts(left)
        assert (got.distance, got.improving) == (oracle_distance(targets, h, u), oracle_improving(targets, h, u)), (
            card.code(),
            shown,
        )


@pytest.mark.parametrize("limit", LIMITS, ids=[limit.value for limit in LIMITS])
def test_throws_on_the_full_deck_count_the_draws_that_bring_each_nearer(limit: JokerLimit) -> None:
    """On 11 cards of the full deck against many unseen cards, with and without unseen jokers (the
    jokers there are fill every place, or they do not and the unseen natural cards must): each
    throw's improving cards are those whose draw leaves 11 cards at a smaller distance, and each
    throw is measured as the 10 cards it leaves."""
    rules = RuleSet(engine=Engine.SEARCH, joker_limit=limit)
    rng = random.Random(11)
    cards = list(deck(2))
    for case in range(2):
        rng.shuffle(cards)
        held = counts_of(cards[:11])
        rest = [card for card in cards[11 + rng.randrange(30) :] if case % 2 or card.index != JOKER_INDEX]
        unseen = counts_of(rest)
        for card, got in measure_throws(held, unseen, rules).items():
            left = list(held)
            left[card.index] -= 1
            assert got == measure(tuple(left), unseen, rules), (case, card.code())
            if got.distance in (0, UNREACHABLE):
                continue
            improving = 0
            for c, n in enumerate(unseen):
                if n:
                    drawn, after = list(left), list(unseen)
                    drawn[c] += 1
                    after[c] -= 1
                    if distance_of(tuple(drawn), tuple(after), rules) < got.distance:
                        improving += n
            assert improving == got.improving, (case, card.code(), got)


# --- worked examples (docs/review.md) ------------------------------------------------------------------

FULL = counts_of(deck(2))


def judged(codes: str, seen: str = "", rules: RuleSet | None = None) -> Progress:
    """The progress of a hand against every card of the deck but the hand and ``seen``."""
    hand = counts_of(parse_cards(codes.split()))
    known = counts_of(parse_cards(seen.split()))
    unseen = tuple(f - h - k for f, h, k in zip(FULL, hand, known))
    return measure(hand, unseen, rules or RuleSet(engine=Engine.SEARCH))


@pytest.mark.unit
def test_a_hand_that_closes_is_at_distance_0() -> None:
    got = judged("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H")
    assert (got.distance, got.improving, got.points) == (0, 0, 0)
    # A color that does not link is a close too: its points are what its linking leaves.
    got = judged("AH 2H 3H 5H 7H 8H 9H JH QH KH")
    assert got.distance == 0 and got.points == 5


@pytest.mark.unit
def test_a_hand_one_away_and_its_improving_cards_counted_by_hand() -> None:
    # 7-7-7, 2-3-4♥, 9-10-J♠ and a loose 5♣: one swap from a close.
    got = judged("7C 7D 7S 2H 3H 4H 9S 10S JS 5C")
    assert got.distance == 1 and got.points == 5
    # A fourth 7 (7♣ 7♦ 7♠ once more each, 7♥ twice: 5), A♥ or 5♥ (2 each: 4), 8♠ or Q♠ (2 each:
    # 4), a joker (4): 17 of the 98 cards unseen.
    assert got.improving == 5 + 4 + 4 + 4 == 17
    assert " ".join(card.code() for card in got.outs) == "7C 7D AH 5H 7H 7S 8S QS JK"
    assert got.unseen == 98


@pytest.mark.unit
def test_the_ace_sits_low_and_high_in_two_runs_of_one_suit() -> None:
    # Q-K-A♠ and 2-3-4♠ with 7-7-7: the second A♠ makes A-2-3-4♠ next to Q-K-A♠.
    got = judged("QS KS AS 2S 3S 4S 7H 7D 7C 9D")
    assert got.distance == 1 and got.points == 9
    assert got.improving == 5 + 1 + 2 + 2 + 4  # a 7; the other A♠; 5♠; J♠; a joker


@pytest.mark.unit
def test_a_hand_with_a_joker_and_cards_seen() -> None:
    # The joker stands in for a third 7; K♦ is loose.
    got = judged("JK 7C 7D 2H 3H 4H 9S 10S JS KD")
    assert (got.distance, got.improving, got.points) == (1, 17, 10)
    # Three jokers, both 7♥ and both 8♠ seen (the pile, or taken by others): 10 of 91 cards left.
    got = judged("JK 7C 7D 2H 3H 4H 9S 10S JS KD", seen="JK JK JK 7H 7H 8S 8S")
    assert (got.distance, got.improving, got.unseen) == (1, 10, 91)
    assert " ".join(card.code() for card in got.outs) == "7C 7D AH 5H 7S QS"


@pytest.mark.unit
def test_the_joker_limit_counts() -> None:
    # 7♣ with both jokers is a group only without a limit; under a limit one joker must go to a run
    # and the 7♣ needs a natural partner.
    codes = "7C JK JK 2H 3H 4H 9S 10S JS QS"
    assert judged(codes).distance == 0
    for limit in (JokerLimit.NO_MORE_THAN_NATURALS, JokerLimit.ONE_PER_GROUP):
        got = judged(codes, rules=RuleSet(joker_limit=limit, engine=Engine.SEARCH))
        assert got.distance == 1, limit
        assert {"7D", "7H", "7S", "JK"} <= {card.code() for card in got.outs}


@pytest.mark.unit
def test_the_value_orders_hands_as_distance_improving_points() -> None:
    rng = random.Random(11)
    cards = list(deck(2))
    progresses = []
    for _ in range(40):
        rng.shuffle(cards)
        hand, unseen = cards[:10], cards[10 + rng.randrange(30) :]
        progresses.append(measure(hand, unseen[:60], RuleSet(engine=Engine.SEARCH)))
    by_key = sorted(progresses, key=lambda p: p.key)
    by_value = sorted(progresses, key=lambda p: p.value)
    assert [p.key for p in by_key] == [p.key for p in by_value]
    assert hand_value(2, 0, 0, 60, RuleSet()) < hand_value(1, 0, 200, 60, RuleSet())
    assert (
        hand_value(1, 59, 200, 60, RuleSet())
        < hand_value(1, 60, 0, 60, RuleSet())
        < hand_value(0, 0, 200, 60, RuleSet())
    )


def test_improving_cards_on_the_full_deck_agree_with_the_distance_after_each_draw() -> None:
    """On hands of simulated deals (the unseen cards are many, the fast paths run): a card is counted
    improving exactly when drawing it leaves 11 cards at a smaller distance (some throw does better)."""
    rules = RuleSet(engine=Engine.SEARCH)
    rng = random.Random(3)
    cards = list(deck(2))
    for _ in range(8):
        rng.shuffle(cards)
        hand, unseen = counts_of(cards[:10]), counts_of(cards[10 + rng.randrange(20) :])
        got = measure(hand, unseen, rules)
        if got.distance == 0:
            continue
        improving = 0
        for c, n in enumerate(unseen):
            if n:
                drawn = list(hand)
                drawn[c] += 1
                left = list(unseen)
                left[c] -= 1
                if distance_of(tuple(drawn), tuple(left), rules) < got.distance:
                    improving += n
        assert improving == got.improving, (cards[:10], got)


# --- reviewing deals ------------------------------------------------------------------------------------

FAST = RuleSet(engine=Engine.SEARCH)


@cache
def reviewed(seed: int, closing: bool = True, seeded: bool = True, max_turns: int = 300) -> tuple[Record, DealReview]:
    record = simulate(seed, 4, FAST, closing=closing, seeded=seeded, max_turns=max_turns)
    return record, review_deal(record)


@pytest.mark.unit
def test_every_legal_turn_is_reviewed_in_order() -> None:
    for seed in range(3):
        record, review = reviewed(seed)
        assert review.legal
        assert [turn.number for turn in review.turns] == list(range(1, len(record.turns) + 1))
        first = (record.dealer + 1) % len(record.seats)
        for turn in review.turns:
            assert turn.seat == (first + turn.number - 1) % len(record.seats)
            kinds = [decision.kind for decision in turn.decisions]
            assert kinds[0] is DecisionKind.DRAW
            assert (DecisionKind.THROW in kinds) != turn.closed
        # The first seat has seen its 10 cards and the face-up card: 97 of the 108 unseen.
        assert review.turns[0].before.unseen == 97


@pytest.mark.unit
def test_losses_best_options_and_marks_agree() -> None:
    for seed in range(3):
        _, review = reviewed(seed)
        for turn in review.turns:
            for decision in turn.decisions:
                for verdict in (decision.judged, decision.omniscient):
                    assert verdict.loss >= 0
                    assert (verdict.loss == 0) == (decision.choice in verdict.best) or verdict.loss < 1e-12
                threshold = set(decision.marks) & {Mark.INACCURACY, Mark.MISTAKE, Mark.BLUNDER}
                assert threshold == set(marks_for(decision.loss))
                if decision.agrees_with_omniscient is None:
                    assert set(decision.judged.best) == set(decision.omniscient.best)


@pytest.mark.unit
def test_a_close_on_the_first_turn() -> None:
    record = simulate(5, 4, FAST, stacked=True, seeded=False)
    review = review_deal(record)
    (turn,) = review.turns
    assert turn.closed
    (draw, close) = turn.decisions
    assert close.kind is DecisionKind.CLOSE and close.choice == CLOSE and close.loss == 0
    assert close.judged.best == (CLOSE,)


def _held_after_draw(record: Record, number: int) -> list[Card]:
    """The 11 cards the seat of turn ``number`` holds after its draw (by replaying the record)."""
    before = replay(replace(record, turns=record.turns[: number - 1]))
    turn = record.turns[number - 1]
    hand = list(before.hands[before.to_play].cards)
    if turn.draw is DrawSource.DISCARD:
        return [*hand, before.discard_pile[-1]]
    drawn = before.stock[0] if before.stock else None
    after = replay(replace(record, turns=record.turns[:number]))
    mine = list(after.hands[before.to_play].cards)
    if not turn.close:
        mine.append(turn.discard)
    assert drawn is None or Counter(mine) == Counter([*hand, drawn])
    return mine


@pytest.mark.unit
def test_a_close_passed_is_marked() -> None:
    """Bots that never close: a turn is PASSED_CLOSE exactly when its 11 cards held a valid close."""
    passed = 0
    for seed in (1, 2):
        record, review = reviewed(seed, closing=False, max_turns=60)
        for turn in review.turns:
            held = _held_after_draw(record, turn.number)
            could = best_close(held, FAST).valid
            marked = any(Mark.PASSED_CLOSE in d.marks for d in turn.decisions)
            assert marked == could, (seed, turn.number)
            passed += marked
            if could:
                close = next(d for d in turn.decisions if d.kind is DecisionKind.CLOSE)
                # Closing is worth 1, a throw that keeps a close at most 1 / (unseen + 1).
                assert close.choice == PLAY_ON and close.loss > 0.95
    assert passed  # these seeds pass some closes


@pytest.mark.unit
def test_fed_marks_a_card_the_next_seat_took() -> None:
    fed = 0
    for seed in range(4):
        record, review = reviewed(seed)
        for mine, theirs in zip(review.turns, review.turns[1:]):
            throw = [d for d in mine.decisions if d.kind is DecisionKind.THROW]
            if throw and Mark.FED in throw[0].marks:
                fed += 1
                assert record.turns[theirs.number - 1].draw is DrawSource.DISCARD
                # Taking it brought that seat nearer, by its own information set, or into its close.
                assert theirs.closed or theirs.decisions[0].judged.options[0].value > -theirs.before.distance
    assert fed


@pytest.mark.unit
def test_a_long_deal_reshuffles_and_is_reviewed_to_the_end() -> None:
    # Ten seats leave a stock of 7 cards: it runs out within 30 turns.
    for seeded in (True, False):
        record = simulate(4, 10, FAST, closing=False, seeded=seeded, max_turns=30)
        assert replay(record).reshuffles >= 1
        review = review_deal(record)
        assert len(review.turns) == 30 and len(review.seats) == 10


@pytest.mark.unit
def test_the_review_is_a_value() -> None:
    record, review = reviewed(0)
    forget_measures()
    assert review_deal(record) == review


@pytest.mark.unit
def test_seat_summaries_count_the_decisions() -> None:
    _, review = reviewed(1)
    for summary in review.seats:
        mine = [d for t in review.turns if t.seat == summary.seat for d in t.decisions]
        judged_ = [d for d in mine if not d.judged.forced]
        assert summary.decisions == len(judged_)
        assert summary.blunders == sum(Mark.BLUNDER in d.marks for d in mine)
        assert summary.accuracy == accuracy([d.loss for d in judged_])


@pytest.mark.unit
def test_the_accuracy_transform() -> None:
    assert move_accuracy(0.0) == 100.0
    assert win_drop(1.0) == pytest.approx(63.212, abs=1e-3)
    # Lichess: 103.1668 e^(-0.04354 x) - 3.1669, plus 1, at x = 63.2 % lost.
    assert move_accuracy(1.0) == pytest.approx(
        103.1668100711649 * math.exp(-0.04354415386753951 * 63.2120559) - 2.166924740191411
    )
    losses = [0.0, 0.05, 0.1, 0.25, 0.6, 1.0, 3.0]
    each = [move_accuracy(loss) for loss in losses]
    assert each == sorted(each, reverse=True) and each[-1] >= 0
    assert accuracy([]) is None and accuracy([0.0, 0.0]) == 100.0
    assert marks_for(0.09) == () and marks_for(0.1) == (Mark.INACCURACY,)
    assert marks_for(0.25) == (Mark.MISTAKE,) and marks_for(0.6) == (Mark.BLUNDER,)


@pytest.mark.unit
@pytest.mark.parametrize(
    "options",
    [
        {"joker_limit": JokerLimit.ONE_PER_GROUP},
        {"joker_limit": JokerLimit.NO_MORE_THAN_NATURALS, "wrap_runs": True},
        {"discard_taken": DiscardTaken.FORBIDDEN, "joker_discard": JokerDiscard.FORBIDDEN},
        {"decks": 3},
    ],
    ids=["one-per-group", "no-more-than-naturals-wrap", "forbidden", "three-decks"],
)
def test_deals_under_other_rule_options(options: dict[str, object]) -> None:
    rules = RuleSet(engine=Engine.SEARCH, **options)  # type: ignore[arg-type]
    record = simulate(1, 4, rules)
    review = review_deal(record)
    assert review.legal and len(review.turns) == len(record.turns)
    forbidden = rules.discard_taken is DiscardTaken.FORBIDDEN
    for turn, played in zip(review.turns, record.turns):
        for decision in turn.decisions:
            if decision.kind is DecisionKind.THROW and forbidden and played.draw is DrawSource.DISCARD:
                # The card taken from the pile may not be thrown back: it is no option.
                assert turn.drawn.code() not in {option.choice for option in decision.judged.options}


@pytest.mark.unit
def test_an_illegal_record_is_reviewed_up_to_its_first_violation() -> None:
    record, _ = reviewed(3)
    bad = replace(
        record, turns=(*record.turns[:5], replace(record.turns[5], discard=Card(None, None)), *record.turns[6:])
    )
    review = review_deal(bad)
    assert not review.legal
    assert [turn.number for turn in review.turns] == [1, 2, 3, 4, 5]


@pytest.mark.unit
def test_the_worked_draw_and_throw_of_docs_review_md() -> None:
    hand = counts_of(parse_cards("7C 7D 7S 2H 3H 4H 9S 10S JS 5C".split()))
    unseen = tuple(f - h - k for f, h, k in zip(FULL, hand, counts_of(parse_cards(["KC"]))))
    before = measure(hand, unseen, FAST)
    assert (before.distance, before.improving, before.unseen) == (1, 17, 97)
    assert -(1 - 17 / 97) == pytest.approx(-0.825, abs=5e-4)
    assert distance_of(_plus(hand, "KC"), unseen, FAST) == 1  # taking KC: -1, a loss of 0.175
    throws = measure_throws(_plus(hand, "KD"), _plus(unseen, "KD", -1), FAST)
    values = {card.code(): progress.value for card, progress in throws.items()}
    assert values["KD"] == pytest.approx(-0.8147, abs=5e-5)
    assert values["5C"] == pytest.approx(-0.8149, abs=5e-5)
    assert values["7D"] == pytest.approx(-1.7541, abs=5e-5)
    assert marks_for(values["KD"] - values["7D"]) == (Mark.BLUNDER,)


def _plus(counts: tuple[int, ...], code: str, n: int = 1) -> tuple[int, ...]:
    out = list(counts)
    out[Card.parse(code).index] += n
    return tuple(out)


# --- the review of a fixed corpus of deals, against its golden digests -------------------------------

# The tests' folder (this module sits in it, or in one of its subfolders) holds the golden files.
GOLDEN = next(up for up in Path(__file__).resolve().parents if up.name == "tests") / "golden" / "review-digests.json"
# The corpus: simulated four-seat deals of fixed seeds, most under the default rules, some under each
# option the measure depends on (a joker limit, wrap_runs, a forbidden pile card, three decks) and
# one of ten seats whose stock runs out (reshuffles).
CORPUS_OPTIONS: dict[str, dict[str, object]] = {
    "default": {},
    "one-per-group": {"joker_limit": JokerLimit.ONE_PER_GROUP},
    "no-more-than-naturals-wrap": {"joker_limit": JokerLimit.NO_MORE_THAN_NATURALS, "wrap_runs": True},
    "forbidden": {"discard_taken": DiscardTaken.FORBIDDEN},
    "three-decks": {"decks": 3},
}


def corpus() -> list[tuple[str, int, int, str]]:
    """(name, seed, seats, options) of every deal of the corpus: 30 deals."""
    deals_ = [(f"default-{seed}", seed, 4, "default") for seed in range(20)]
    deals_ += [(f"{name}-{seed}", seed, 4, name) for name in list(CORPUS_OPTIONS)[1:] for seed in (20, 21)]
    deals_ += [("ten-seats-reshuffle-4", 4, 10, "default"), ("ten-seats-reshuffle-5", 5, 10, "default")]
    return deals_


def corpus_record(seed: int, seats: int, options: str) -> Record:
    rules = RuleSet(engine=Engine.SEARCH, **CORPUS_OPTIONS[options])  # type: ignore[arg-type]
    if seats > 4:  # bots that never close, so the stock runs out
        return simulate(seed, seats, rules, closing=False, max_turns=40)
    return simulate(seed, seats, rules)


def _verdict_form(verdict: Verdict) -> object:
    return {
        "options": [[c.choice, repr(c.value), _progress_form(c.progress)] for c in verdict.options],
        "best": list(verdict.best),
        "loss": repr(verdict.loss),
    }


def _progress_form(progress: Progress | None) -> object:
    if progress is None:
        return None
    return [
        progress.distance,
        progress.improving,
        progress.points,
        progress.unseen,
        " ".join(card.code() for card in progress.outs),
        repr(progress.value),
    ]


def review_form(review: DealReview) -> object:
    """Every field of a review as JSON values (floats by their exact repr)."""
    return {
        "legal": review.legal,
        "turns": [
            {
                "number": t.number,
                "seat": t.seat,
                "before": _progress_form(t.before),
                "drawn": t.drawn.code(),
                "thrown": t.thrown.code(),
                "closed": t.closed,
                "decisions": [
                    {
                        "kind": d.kind.value,
                        "choice": d.choice,
                        "judged": _verdict_form(d.judged),
                        "omniscient": _verdict_form(d.omniscient),
                        "marks": [m.value for m in d.marks],
                    }
                    for d in t.decisions
                ],
            }
            for t in review.turns
        ],
        "seats": [
            [
                s.seat,
                s.name,
                s.decisions,
                repr(s.accuracy),
                repr(s.average_loss),
                s.inaccuracies,
                s.mistakes,
                s.blunders,
                s.passed_closes,
                s.fed,
                s.omniscient_differs,
                s.omniscient_agrees,
            ]
            for s in review.seats
        ],
    }


def review_digest(review: DealReview) -> str:
    """The SHA-256 of the review's every field, as canonical JSON."""
    text = json.dumps(review_form(review), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def corpus_digests() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, seed, seats, options in corpus():
        review = review_deal(corpus_record(seed, seats, options))
        out[name] = {"turns": len(review.turns), "digest": review_digest(review)}
    return out


@cache
def golden_digests() -> dict[str, dict[str, object]]:
    assert GOLDEN.exists(), (
        f"no golden file {GOLDEN.name}: write it with `PYTHONPATH=tests .venv/bin/python tests/play/test_review.py`"
    )
    loaded: dict[str, dict[str, object]] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return loaded


def test_the_golden_file_holds_the_corpus() -> None:
    assert sorted(golden_digests()) == sorted(name for name, *_ in corpus())


@pytest.mark.parametrize(("name", "seed", "seats", "options"), corpus(), ids=[name for name, *_ in corpus()])
def test_the_review_of_the_corpus_is_unchanged(name: str, seed: int, seats: int, options: str) -> None:
    """The review of each deal of the corpus, every option, value, best choice and mark, is the
    one the golden file holds (written by ``PYTHONPATH=tests .venv/bin/python tests/play/test_review.py`` from the review as first
    published): a faster review must give the same review, to the last bit of every value."""
    review = review_deal(corpus_record(seed, seats, options))
    got = {"turns": len(review.turns), "digest": review_digest(review)}
    assert got == golden_digests()[name], (
        f"the review of {name} differs from {GOLDEN.name}; if the change is meant, write the file "
        "again with `PYTHONPATH=tests .venv/bin/python tests/play/test_review.py`"
    )


if __name__ == "__main__":
    # Write the golden digests again (only after a change to the review that is meant).
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(corpus_digests(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(corpus())} review digests to {GOLDEN}", file=sys.stderr)
