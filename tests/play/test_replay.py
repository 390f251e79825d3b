"""Replaying deal records (RULES §9): the deal and the turns by hand, every violation with its
message, thousands of simulated legal records, and every violation injected into them."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from played import Played, before, corpus, drawn_by

from referee.game.cards import Card, deck, format_cards
from referee.game.closing import best_close, check_close
from referee.game.deal import HAND
from referee.game.rules import CloseKind, DiscardTaken, Engine, JokerDiscard, JokerLimit, RuleSet
from referee.game.scoring import score_deal, score_replayed
from referee.play.record import DrawSource, Record, Seat, Turn
from referee.play.replay import Replay, ViolationCode, replay
from referee.play.shuffle import Shuffle, commitment, dealt_deck, reshuffled
from referee.play.simulate import simulate

S, D = DrawSource.STOCK, DrawSource.DISCARD
FAST = RuleSet(engine=Engine.SEARCH)


def card(code: str) -> Card:
    return Card.parse(code)


def seats(*names: str) -> tuple[Seat, ...]:
    return tuple(Seat(name) for name in names)


def codes(cards: tuple[Card, ...]) -> str:
    return format_cards(cards)


def conserved(result: Replay, record: Record) -> bool:
    """Every card of the deck is in a hand, the pile, the stock or face down, once."""
    held = [c for hand in result.hands for c in hand.cards] + list(result.discard_pile) + list(result.stock)
    if result.discard is not None:
        held.append(result.discard)
    return Counter(held) == Counter(deck(record.rules.decks))


# The deal and the turns, by hand ------------------------------------------------------------------

# The canonical two-deck order: AC AC 2C 2C ... KS KS JK JK JK JK.
ORDER = deck(2)


def test_cards_are_dealt_one_at_a_time_from_the_seat_after_the_dealer() -> None:
    record = Record(seats=seats("ana", "beto", "carla"), dealer=1, deck=ORDER)
    result = replay(record)
    assert result.legal and not result.complete and result.turns_played == 0
    # carla (seat 2) is after the dealer: she gets cards 0, 3, 6 ..., ana 1, 4, 7 ..., beto 2, 5, 8 ...
    for seat, first in ((2, 0), (0, 1), (1, 2)):
        assert sorted(c.index for c in result.hands[seat].cards) == sorted(c.index for c in ORDER[first:30:3])
    assert result.discard_pile == (ORDER[30],)
    assert result.stock == ORDER[31:]
    assert result.to_play == 2
    assert conserved(result, record)


def test_a_turn_draws_from_the_stock_or_the_pile_and_play_passes_on() -> None:
    # carla plays first: she holds AC 2C 4C 5C 7C 8C 10C JC KC AD; 3D is face up and 3D tops the stock.
    record = Record(seats=seats("ana", "beto", "carla"), dealer=1, deck=ORDER)
    result = replay(replace(record, turns=(Turn(S, card("4H"), seat=2, drawn=ORDER[31]),)))
    assert result.violation is not None and result.violation.code is ViolationCode.CARD_NOT_IN_HAND
    turns = (Turn(S, ORDER[31], seat=2, drawn=ORDER[31]), Turn(D, card("AC"), seat=0, drawn=ORDER[31]))
    result = replay(replace(record, turns=turns))
    assert result.legal and result.turns_played == 2
    assert result.to_play == 1
    assert result.discard_pile == (ORDER[30], card("AC"))  # ana took carla's 3D and threw an ace
    assert card("3D") in result.hands[0].cards
    assert result.stock == ORDER[32:]
    assert conserved(result, replace(record, turns=turns))


def small_table(turns: tuple[Turn, ...] = (), **changes: object) -> Record:
    """One deck, five players: 50 cards dealt, one face up, a stock of 3."""
    record = Record(seats=seats("a", "b", "c", "d", "e"), dealer=4, deck=deck(1), rules=RuleSet(decks=1), turns=turns)
    return replace(record, **changes)  # type: ignore[arg-type]


def draw_and_throw(count: int) -> tuple[Turn, ...]:
    """``count`` turns from the canonical one-deck order, each throwing the card it drew."""
    order = deck(1)
    return tuple(Turn(S, order[51 + i]) for i in range(count))


def test_the_empty_stock_is_restocked_from_the_pile_less_its_top() -> None:
    order = deck(1)
    pile = (order[50], order[51], order[52])  # the face-up card and two thrown; the third thrown stays on top
    turns = draw_and_throw(3)
    assert replay(small_table(turns)).stock == ()
    new = (pile[2], pile[0], pile[1])
    result = replay(small_table((*turns, Turn(S, new[0], restock=new))))
    assert result.legal and result.reshuffles == 1
    assert result.stock == new[1:]
    assert result.discard_pile == (order[53], new[0])

    missing = replay(small_table((*turns, Turn(S, new[0]))))
    assert missing.violation is not None
    assert missing.violation.code is ViolationCode.RESTOCK_MISSING and missing.violation.turn == 4
    assert missing.stock == () and missing.turns_played == 3
    assert "gives no restock" in missing.violation.message

    wrong = replay(small_table((*turns, Turn(S, card("AC"), restock=(card("AC"), pile[0], pile[1])))))
    assert wrong.violation is not None and wrong.violation.code is ViolationCode.RESTOCK_MISMATCH
    assert "not in the pile AC" in wrong.violation.message

    early = replay(small_table((Turn(S, order[51], restock=(order[50],)),)))
    assert early.violation is not None and early.violation.code is ViolationCode.RESTOCK_MISMATCH
    assert "the stock still holds 3 cards" in early.violation.message


def test_a_seeded_reshuffle_is_derived_and_a_given_one_must_match_it() -> None:
    shuffle = Shuffle("5a" * 32, "t", 9)
    order = dealt_deck(shuffle, 1)
    turns = tuple(Turn(S, order[51 + i]) for i in range(3))
    record = small_table(turns, deck=None, shuffle=shuffle)
    derived = reshuffled(shuffle, 1, order[50:53])
    result = replay(replace(record, turns=(*turns, Turn(S, derived[0]))))
    assert result.legal and result.stock == derived[1:]
    given = replay(replace(record, turns=(*turns, Turn(S, derived[0], restock=derived))))
    assert given.legal and given.stock == derived[1:]
    other = tuple(reversed(derived))
    assert other != derived
    wrong = replay(replace(record, turns=(*turns, Turn(S, other[0], restock=other))))
    assert wrong.violation is not None and wrong.violation.code is ViolationCode.RESTOCK_MISMATCH
    assert "remigio-shuffle-v1 derives" in wrong.violation.message


def test_a_seed_that_does_not_match_its_commitment_deals_nothing() -> None:
    shuffle = Shuffle("01" * 32, server_seed_hash=commitment("02" * 32))
    result = replay(Record(seats=seats("ana", "beto"), dealer=0, shuffle=shuffle, turns=draw_and_throw(1)))
    assert result.violation is not None
    assert (result.violation.turn, result.violation.seat, result.violation.code) == (0, 0, ViolationCode.SEED_MISMATCH)
    assert result.turns_played == 0 and result.hands[0].cards == () and result.stock == ()
    assert commitment("01" * 32) in result.violation.message
    matched = replace(shuffle, server_seed_hash=commitment("01" * 32))
    assert replay(Record(seats=seats("ana", "beto"), shuffle=matched)).legal


def first_turn_close(rules: RuleSet = FAST) -> Record:
    """A record whose first player closes on the first turn (a stacked deck)."""
    for seed in range(100):
        record = simulate(seed, 3, rules, stacked=True)
        if len(record.turns) == 1 and record.turns[0].close:
            return record
    raise AssertionError("no first-turn close")


def test_a_close_on_the_first_turn_ends_the_deal() -> None:
    record = first_turn_close()
    result = replay(record)
    assert result.legal and result.complete and result.turns_played == 1
    assert result.deal is not None and result.close is not None and result.close.valid
    assert result.to_play is None
    assert result.closer == (record.dealer + 1) % 3
    assert len(result.hands[result.closer].cards) == HAND
    assert conserved(result, record)
    scored = score_deal(result.deal, record.rules)
    assert scored.close == result.close


def test_a_turn_after_the_close_is_a_violation() -> None:
    record = first_turn_close()
    extra = replace(record, turns=(*record.turns, Turn(S, card("AH"))))
    result = replay(extra)
    assert result.violation is not None
    assert result.violation.code is ViolationCode.TURN_AFTER_CLOSE and result.violation.turn == 2
    assert result.complete and result.deal is None and result.turns_played == 1
    assert "closed the deal on turn 1" in result.violation.message


def test_a_false_close_names_why() -> None:
    record = first_turn_close()
    close = record.turns[0]
    state = before(record, 1)
    drawn = state.discard_pile[-1] if close.draw is D else state.stock[0]
    hand = [*state.hands[(record.dealer + 1) % 3].cards, drawn]
    for discard in hand:
        shown = list(hand)
        shown.remove(discard)
        if not check_close(shown, discard, record.rules).valid:
            break
    else:
        pytest.skip("every discard closes")
    result = replay(replace(record, turns=(replace(close, discard=discard),)))
    assert result.violation is not None and result.violation.code is ViolationCode.FALSE_CLOSE
    assert f"closes laying {discard} face down, but the 10 shown cards" in result.violation.message
    assert not result.complete and result.turns_played == 0


def test_discard_taken_forbidden_and_allowed() -> None:
    order = deck(1)
    face_up = order[50]  # QS; the stock holds KS JK JK
    turns = (Turn(D, face_up, seat=0),)
    allowed = small_table(turns, dealer=4)
    assert replay(allowed).legal
    forbidden = replace(allowed, rules=RuleSet(decks=1, discard_taken=DiscardTaken.FORBIDDEN))
    result = replay(forbidden)
    assert result.violation is not None and result.violation.code is ViolationCode.DISCARD_TAKEN
    assert result.violation.message.startswith(f"turn 1, a: throws back {face_up}, the card they took")
    # Throwing the other copy of the card taken counts as throwing it back (cards of a code are alike).
    two = RuleSet(decks=2, discard_taken=DiscardTaken.FORBIDDEN)
    order = list(ORDER)
    order[0], order[21] = order[21], order[0]  # seat 0 is dealt a JC; the other JC is turned face up
    record = Record(seats=seats("a", "b"), dealer=1, deck=tuple(order), rules=two)
    state = replay(record)
    assert state.discard_pile == (card("JC"),) and card("JC") in state.hands[0].cards
    again = replay(replace(record, turns=(Turn(D, card("JC")),)))
    assert again.violation is not None and again.violation.code is ViolationCode.DISCARD_TAKEN
    # Laid face down to close, the card taken is allowed either way: 2C ... JC is a run of 10.
    closing = replay(replace(record, turns=(Turn(D, card("JC"), close=True),)))
    assert closing.legal and closing.complete
    assert closing.close is not None and closing.close.kind is CloseKind.STRAIGHT_FLUSH_CLEAN


def test_the_messages_name_the_turn_the_player_and_the_cards() -> None:
    record = Record(seats=seats("ana", "beto", "juan"), dealer=1, deck=ORDER)
    state = replay(record)
    juan = state.hands[2].cards
    stock_top = state.stock[0]
    absent = next(c for c in map(card, ("9C", "QS", "KD", "5H")) if c not in juan and c != stock_top)
    result = replay(replace(record, turns=(Turn(S, absent),)))
    assert result.violation is not None
    holds = codes(tuple(sorted((*juan, stock_top), key=lambda c: c.index)))
    assert result.violation.message == (
        f"turn 1, juan: discards {absent}, which is not in their hand (they hold {holds} after drawing {stock_top})"
    )
    out_of_turn = replay(replace(record, turns=(Turn(S, stock_top, seat=0),)))
    assert out_of_turn.violation is not None
    assert out_of_turn.violation.message == "turn 1, ana: plays out of turn: it is juan's turn (seat 2)"
    assert out_of_turn.violation.seat == 0
    wrong_draw = replay(replace(record, turns=(Turn(D, stock_top, drawn=absent),)))
    assert wrong_draw.violation is not None and wrong_draw.violation.code is ViolationCode.DRAWN_MISMATCH
    assert wrong_draw.violation.message == (
        f"turn 1, juan: says the draw gave {absent}, but the face-up top of the discard pile is "
        f"{state.discard_pile[-1]}"
    )


def test_a_record_without_turns_is_legal_and_unfinished() -> None:
    result = replay(Record(seats=seats("ana", "beto"), shuffle=Shuffle("00" * 32)))
    assert result.legal and not result.complete and result.deal is None and result.close is None
    assert [len(hand.cards) for hand in result.hands] == [10, 10]


# Thousands of simulated records ----------------------------------------------------------------


@pytest.mark.property
def test_simulated_records_replay_legal_and_their_end_states_score() -> None:
    seen: Counter[str] = Counter()
    for played in corpus():
        record = played.record
        result = replay(record)
        assert result.legal, (played.index, result.violation)
        assert result.turns_played == len(record.turns), played.index
        assert conserved(result, record), played.index
        seen[f"players {len(record.seats)}"] += 1
        seen["seeded" if played.seeded else "explicit"] += 1
        seen[f"reshuffled {'seeded' if played.seeded else 'explicit'}"] += result.reshuffles > 0
        seen["discard draws"] += any(turn.draw is D for turn in record.turns)
        for option in (record.rules.joker_discard, record.rules.discard_taken, record.rules.joker_limit):
            seen[repr(option)] += 1
        if not result.complete:
            seen["unfinished"] += 1
            assert result.deal is None
            continue
        assert result.deal is not None and result.closer is not None and result.discard is not None
        closer = result.hands[result.closer].cards
        assert check_close(closer, result.discard, record.rules).valid, played.index
        scored = score_deal(result.deal, record.rules)
        # The batch scores a replayed deal with the replay's own verdict on its close, unchecked.
        assert result.close is not None
        assert score_replayed(result.deal, record.rules, result.close) == scored, played.index
        assert scored.close.valid and scored.close.kind is not None
        assert scored.players[result.closer].closer
        seen[scored.close.kind.value] += 1
        seen["first-turn closes"] += len(record.turns) == 1
    assert all(seen[f"players {n}"] for n in range(2, 11)), seen
    assert all(seen[kind.value] for kind in CloseKind), seen
    wanted = ["reshuffled seeded", "reshuffled explicit", "unfinished", "first-turn closes", "discard draws"]
    assert all(seen[name] >= 10 for name in wanted), seen
    assert all(seen[repr(option)] for option in (*JokerDiscard, *DiscardTaken, *JokerLimit)), seen


def test_the_bots_close_as_soon_as_their_best_close_is_valid() -> None:
    checked = 0
    for played in corpus()[:30]:
        record = played.record
        if not record.turns or not record.turns[-1].close or len(record.turns) > 30:
            continue
        for number, turn in enumerate(record.turns, 1):
            state = before(record, number)
            drawn = drawn_by(record, number) or (turn.restock or reshuffle_of(record, state))[0]
            assert state.to_play is not None
            held = [*state.hands[state.to_play].cards, drawn]
            assert best_close(held, record.rules).valid == turn.close, (played.index, number)
        checked += 1
    assert checked >= 12


def reshuffle_of(record: Record, state: Replay) -> tuple[Card, ...]:
    """The new stock a seeded record's next draw from the empty stock gets."""
    assert record.shuffle is not None
    return reshuffled(record.shuffle, state.reshuffles + 1, state.discard_pile[:-1])


def test_simulation_is_deterministic() -> None:
    rules = RuleSet(engine=Engine.SEARCH, decks=3)
    assert simulate(7, 12, rules) == simulate(7, 12, rules)
    assert simulate(7, 12, rules) != simulate(8, 12, rules)
    assert simulate(7, 4, rules, seeded=False) == simulate(7, 4, rules, seeded=False)


def test_a_simulated_deal_stops_at_max_turns_or_goes_on_without_closing() -> None:
    record = simulate(3, 4, FAST, closing=False, max_turns=80)
    assert len(record.turns) == 80 and not any(turn.close for turn in record.turns)
    result = replay(record)
    assert result.legal and not result.complete
    with pytest.raises(ValueError):
        simulate(3, 11, FAST)


# Every violation injected at a random turn -----------------------------------------------------

Injection = Callable[[Played, random.Random], tuple[Record, int] | None]


def _state_turn(played: Played, rng: random.Random, usable: Callable[[Record, int], bool]) -> int | None:
    record = played.record
    turns = [t for t in range(1, len(record.turns) + 1) if usable(record, t)]
    return rng.choice(turns) if turns else None


def _plain_draw(record: Record, turn: int) -> bool:
    """The turn's draw needs no reshuffle."""
    return drawn_by(record, turn) is not None


def _with_turn(record: Record, turn: int, new: Turn) -> Record:
    turns = list(record.turns)
    turns[turn - 1] = new
    return replace(record, turns=tuple(turns))


def inject_not_your_turn(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    turn = rng.randint(1, len(record.turns)) if record.turns else None
    if turn is None:
        return None
    seats = len(record.seats)
    to_play = (record.dealer + turn) % seats
    wrong = (to_play + rng.randint(1, seats - 1)) % seats
    return _with_turn(record, turn, replace(record.turns[turn - 1], seat=wrong)), turn


def inject_drawn_mismatch(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    turn = _state_turn(played, rng, _plain_draw)
    if turn is None:
        return None
    record = played.record
    drawn = drawn_by(record, turn)
    assert drawn is not None
    other = Card.parse(rng.choice([c for c in ("AH", "7S", "KD", "JK") if c != drawn.code()]))
    return _with_turn(record, turn, replace(record.turns[turn - 1], drawn=other)), turn


def inject_card_not_in_hand(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    turn = _state_turn(played, rng, _plain_draw)
    if turn is None:
        return None
    record = played.record
    state = before(record, turn)
    drawn = drawn_by(record, turn)
    held = {c.index for c in state.hands[state.to_play or 0].cards} | {drawn.index if drawn else -1}
    absent = rng.choice([c for c in deck(1) if c.index not in held])
    return _with_turn(record, turn, replace(record.turns[turn - 1], discard=absent)), turn


def inject_discard_taken(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    if record.rules.discard_taken is not DiscardTaken.FORBIDDEN or not record.turns:
        return None
    turn = rng.randint(1, len(record.turns))
    top = before(record, turn).discard_pile[-1]
    old = record.turns[turn - 1]
    return _with_turn(record, turn, Turn(D, top, seat=old.seat, drawn=rng.choice((None, top)))), turn


def inject_restock_missing(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    if played.seeded:
        return None
    turn = _state_turn(played, rng, lambda r, t: r.turns[t - 1].restock is not None)
    if turn is None:
        return None
    return _with_turn(record, turn, replace(record.turns[turn - 1], restock=None)), turn


def inject_restock_mismatch(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    if not record.turns:
        return None
    turn = rng.randint(1, len(record.turns))
    old = record.turns[turn - 1]
    state = before(record, turn)
    if old.draw is S and not state.stock:
        # A reshuffle: a restock with one card swapped for another, or in the wrong order.
        new = old.restock or reshuffled(record.shuffle, state.reshuffles + 1, state.discard_pile[:-1])  # type: ignore[arg-type]
        if played.seeded and len(set(new)) > 1:
            wrong = tuple(reversed(new)) if tuple(reversed(new)) != new else new[1:] + new[:1]
        else:
            present = {c.index for c in new}
            stranger = next(c for c in deck(1) if c.index not in present)
            wrong = (stranger, *new[1:])
        if wrong == new:
            return None
        return _with_turn(record, turn, replace(old, restock=wrong, drawn=None)), turn
    extra = tuple(rng.sample(list(deck(1)), rng.randint(0, 3)))
    return _with_turn(record, turn, replace(old, restock=extra)), turn


def inject_false_close(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    turn = _state_turn(played, rng, _plain_draw)
    if turn is None:
        return None
    record = played.record
    state = before(record, turn)
    drawn = drawn_by(record, turn)
    assert drawn is not None and state.to_play is not None
    hand = [*state.hands[state.to_play].cards, drawn]
    rng.shuffle(hand)
    for discard in hand:
        shown = list(hand)
        shown.remove(discard)
        if not check_close(shown, discard, record.rules).valid:
            return _with_turn(record, turn, replace(record.turns[turn - 1], discard=discard, close=True)), turn
    return None


def inject_turn_after_close(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    if not record.turns or not record.turns[-1].close:
        return None
    extra = rng.choice(record.turns)
    return replace(record, turns=(*record.turns, extra)), len(record.turns) + 1


def inject_seed_mismatch(played: Played, rng: random.Random) -> tuple[Record, int] | None:
    record = played.record
    if record.shuffle is None:
        return None
    wrong = commitment(rng.randbytes(32).hex())
    return replace(record, shuffle=replace(record.shuffle, server_seed_hash=wrong)), 0


INJECTIONS: dict[ViolationCode, Injection] = {
    ViolationCode.NOT_YOUR_TURN: inject_not_your_turn,
    ViolationCode.DRAWN_MISMATCH: inject_drawn_mismatch,
    ViolationCode.CARD_NOT_IN_HAND: inject_card_not_in_hand,
    ViolationCode.DISCARD_TAKEN: inject_discard_taken,
    ViolationCode.RESTOCK_MISSING: inject_restock_missing,
    ViolationCode.RESTOCK_MISMATCH: inject_restock_mismatch,
    ViolationCode.FALSE_CLOSE: inject_false_close,
    ViolationCode.TURN_AFTER_CLOSE: inject_turn_after_close,
    ViolationCode.SEED_MISMATCH: inject_seed_mismatch,
}
INJECTED_PER_CODE = 60


# UNCOMMITTED_SHUFFLE is a violation only under committed_only: its own tests, below.
BY_OPTION = {ViolationCode.UNCOMMITTED_SHUFFLE}


def test_every_code_has_an_injection() -> None:
    assert set(INJECTIONS) == set(ViolationCode) - BY_OPTION


@pytest.mark.parametrize("code", list(INJECTIONS), ids=lambda code: code.value)
def test_an_injected_violation_is_reported_at_its_turn_and_nothing_later_is_judged(code: ViolationCode) -> None:
    rng = random.Random(code.value)
    records = list(corpus())
    rng.shuffle(records)
    injected = 0
    for played in records:
        made = INJECTIONS[code](played, rng)
        if made is None:
            continue
        record, turn = made
        result = replay(record)
        assert result.violation is not None, (played.index, turn)
        assert (result.violation.turn, result.violation.code) == (turn, code), (played.index, result.violation)
        assert result.violation.message.startswith(f"turn {turn}, " if turn else "the deal"), result.violation
        assert result.deal is None and not result.legal
        # The state is the one just before the violation: the turns before it, played alone.
        if code is ViolationCode.SEED_MISMATCH:
            assert result.turns_played == 0 and result.stock == ()
        else:
            prefix = before(record, turn)
            assert result.turns_played == turn - 1
            assert (result.hands, result.discard_pile, result.stock) == (
                prefix.hands,
                prefix.discard_pile,
                prefix.stock,
            )
        injected += 1
        if injected == INJECTED_PER_CODE:
            break
    assert injected == INJECTED_PER_CODE, f"only {injected} records took a {code.value}"


def test_only_the_first_of_two_violations_is_reported() -> None:
    rng = random.Random(2)
    checked = 0
    for played in corpus():
        record = played.record
        if len(record.turns) < 6:
            continue
        first = inject_not_your_turn(replace(played, record=replace(record, turns=record.turns[:3])), rng)
        assert first is not None
        early, turn = first
        later = replace(record, turns=(*early.turns, *record.turns[3:]))
        later = _with_turn(later, 5, replace(later.turns[4], discard=card("JK"), close=True))
        result = replay(later)
        assert result.violation is not None and result.violation.turn == turn <= 3
        checked += 1
        if checked == 50:
            break
    assert checked == 50


# Any well-formed record gets an answer ---------------------------------------------------------

CARDS = st.sampled_from(list(deck(1)))
TURNS = st.builds(
    Turn,
    draw=st.sampled_from([S, D]),
    discard=CARDS,
    close=st.booleans(),
    seat=st.none() | st.integers(min_value=0, max_value=2),
    drawn=st.none() | CARDS,
    restock=st.none() | st.lists(CARDS, max_size=6).map(tuple),
)


@pytest.mark.property
@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(TURNS, max_size=12), st.booleans(), st.integers(min_value=0, max_value=2))
def test_any_well_formed_record_gets_an_answer(turns: list[Turn], seeded: bool, dealer: int) -> None:
    record = Record(
        seats=seats("ana", "beto", "carla"),
        dealer=dealer,
        deck=None if seeded else ORDER,
        shuffle=Shuffle("3c" * 32) if seeded else None,
        turns=tuple(turns),
        rules=RuleSet(engine=Engine.SEARCH, discard_taken=DiscardTaken.FORBIDDEN),
    )
    result = replay(record)
    assert result.turns_played <= len(turns)
    assert conserved(result, record)
    if result.violation is not None:
        assert result.violation.turn == result.turns_played + 1
        assert result.violation.message.startswith(f"turn {result.violation.turn}, ")
    else:
        assert result.turns_played == len(turns)
