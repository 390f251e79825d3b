"""The referee's best linking against an independent brute-force oracle (RULES §1-§3, §8).

``oracle`` (next to this file) knows nothing of ``referee``: its own cards, parser, points and
group predicate. Every engine in ``ENGINES`` must give exactly the oracle's points and the oracle's
canonical groups, on hypothesis-drawn hands biased towards the hard cases (duplicates, jokers,
aces, long one-suit stretches, repeated ranks), on the rule book's worked examples and on a list
of edge cases. Hypothesis is derandomised, so every run (and CI) draws the same hands.
"""

from __future__ import annotations

import random
from collections import Counter

import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import referee.game.linking.dispatch as dispatch
from referee.game.cards import Card
from referee.game.groups import Group, GroupKind, judge_group
from referee.game.linking import best_linking
from referee.game.rules import JokerLimit, RuleSet

# Append a name here when its engine is registered in referee.game.linking.dispatch.
ENGINES = ["cpsat", "search"]

LIMITS = list(JokerLimit)
WRAPS = [False, True]
JOKER_POINTS = [20, 0, 50]

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- helpers -----------------------------------------------------------------------------------


def rules_for(engine: str, limit: JokerLimit, wrap: bool, joker_points: int, decks: int = 2) -> RuleSet:
    return RuleSet(decks=decks, joker_points=joker_points, wrap_runs=wrap, joker_limit=limit, engine=engine)


def to_referee(codes: list[str]) -> list[Card]:
    return [Card.parse(c) for c in codes]


def oracle_best(codes: list[str], rules: RuleSet) -> oracle.OracleLinking:
    return oracle.best_linking(oracle.parse_hand(codes), rules.joker_limit.value, rules.wrap_runs, rules.joker_points)


def keys(linking) -> tuple[tuple[int, ...], ...]:
    return tuple(g.key for g in linking.groups)


def codes_of(linking) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...], int]:
    """Everything a client sees of a linking, as codes: groups in group order, unlinked, points."""
    groups = tuple(tuple(c.code() for c in g.cards) + tuple(g.stands_for) for g in linking.groups)
    return groups, tuple(c.code() for c in linking.unlinked), linking.points


def fresh_best(cards: list[Card], rules: RuleSet):
    """The referee's best linking, computed again rather than read from its cache."""
    cache = getattr(dispatch, "_cached", None)
    if hasattr(cache, "cache_clear"):
        cache.cache_clear()
    return best_linking(cards, rules)


def describe(codes: list[str], rules: RuleSet) -> str:
    return (
        f"hand {' '.join(codes)} | joker_limit={rules.joker_limit.value} wrap_runs={rules.wrap_runs} "
        f"joker_points={rules.joker_points} decks={rules.decks} engine={rules.engine}"
    )


def assert_matches_oracle(codes: list[str], rules: RuleSet, expected: oracle.OracleLinking | None = None) -> None:
    """The referee's best linking is the oracle's (``expected``, when already found for these rules)."""
    expected = expected or oracle_best(codes, rules)
    got = best_linking(to_referee(codes), rules)
    where = describe(codes, rules)
    assert got.points == expected.points, f"{where}: points {got.points}, oracle {expected.points}"
    assert keys(got) == expected.groups, (
        f"{where}: groups {[str(g) for g in got.groups]}, oracle {expected.group_codes()}"
    )
    assert tuple(sorted(c.index for c in got.unlinked)) == expected.unlinked, where


# --- the hands ---------------------------------------------------------------------------------


def _window(start: int, length: int) -> list[int]:
    """Ranks start, start+1, … round the circle A..K (so K A 2 stretches appear too)."""
    return [(start - 1 + k) % 13 + 1 for k in range(length)]


@st.composite
def focus_cards(draw) -> list[int]:
    """A small set of distinct natural cards (indices) that tends to make groups."""
    style = draw(st.sampled_from(["stretch", "two_suits", "ranks", "aces", "random"]))
    suits = "CDHS"
    if style == "stretch":  # one suit, a long stretch of ranks
        suit = draw(st.sampled_from(suits))
        ranks = _window(draw(st.integers(1, 13)), draw(st.integers(3, 13)))
        cards = [(r, suit) for r in ranks]
    elif style == "two_suits":  # two suits, a short stretch: runs and sets compete
        chosen = draw(st.lists(st.sampled_from(suits), min_size=2, max_size=2, unique=True))
        ranks = _window(draw(st.integers(1, 13)), draw(st.integers(2, 6)))
        cards = [(r, s) for r in ranks for s in chosen]
    elif style == "ranks":  # a few ranks in every suit: same-rank groups
        ranks = draw(st.lists(st.integers(1, 13), min_size=1, max_size=3, unique=True))
        cards = [(r, s) for r in ranks for s in suits]
    elif style == "aces":  # Q K A 2 3 in one or two suits: the ace low, high, or wrapping
        chosen = draw(st.lists(st.sampled_from(suits), min_size=1, max_size=2, unique=True))
        cards = [(r, s) for r in (12, 13, 1, 2, 3) for s in chosen]
    else:
        return list(range(52))
    return [oracle.index(c) for c in cards]


@st.composite
def hands(draw, max_size: int = 11) -> tuple[int, list[str]]:
    """(decks, card codes in a random order): 1 to 11 cards dealt from a real deck."""
    decks = draw(st.sampled_from([2, 2, 2, 3]))
    size = draw(st.one_of(st.integers(1, max_size), st.integers(min(8, max_size), max_size)))
    most_jokers = min(size, 2 * decks)
    jokers = draw(st.one_of(st.just(0), st.integers(0, min(2, most_jokers)), st.integers(0, most_jokers)))
    naturals = size - jokers
    focus = draw(focus_cards())
    pool = [i for i in focus for _ in range(decks)]  # every copy the deck holds
    if len(pool) < naturals:
        pool += [i for i in range(52) if i not in focus for _ in range(decks)]
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=naturals, max_size=naturals, unique=True))
    cards = [pool[p] for p in picks] + [oracle.JOKER_INDEX] * jokers
    cards = draw(st.permutations(cards))
    return decks, [oracle.code(oracle.card_of(i)) for i in cards]


rule_options = st.tuples(st.sampled_from(LIMITS), st.sampled_from(WRAPS), st.sampled_from(JOKER_POINTS))


# --- the referee against the oracle ------------------------------------------------------------


# Every engine on each hand: the oracle's answer (and the hand's drawing) serves them all, so each
# engine meets as many hands as when every engine had hands of its own, at half the brute force.
@pytest.mark.parametrize("joker_points", JOKER_POINTS)
@pytest.mark.parametrize("wrap", WRAPS, ids=["nowrap", "wrap"])
@pytest.mark.parametrize("limit", LIMITS, ids=[lim.value for lim in LIMITS])
@SETTINGS
@given(hand=hands())
def test_best_linking_is_the_oracles(limit: JokerLimit, wrap: bool, joker_points: int, hand) -> None:
    decks, codes = hand
    expected = oracle_best(codes, rules_for(ENGINES[0], limit, wrap, joker_points, decks))
    for engine in ENGINES:
        assert_matches_oracle(codes, rules_for(engine, limit, wrap, joker_points, decks), expected)


@pytest.mark.parametrize("engine", ENGINES)
@settings(SETTINGS, max_examples=300)
@given(hand=hands(), options=rule_options, data=st.data())
def test_linking_properties(engine: str, hand, options, data) -> None:
    decks, codes = hand
    limit, wrap, joker_points = options
    rules = rules_for(engine, limit, wrap, joker_points, decks)
    where = describe(codes, rules)
    cards = to_referee(codes)

    first = fresh_best(cards, rules)
    # Determinism: computing it again gives the same linking.
    again = fresh_best(cards, rules)
    assert again == first and codes_of(again) == codes_of(first), where
    # Order independence: any order of the same cards gives the identical linking.
    shuffled = data.draw(st.permutations(cards), label="shuffled")
    other = fresh_best(shuffled, rules)
    assert other == first and codes_of(other) == codes_of(first), where

    # Every group is a group by the oracle's own reading of the rules.
    for group in first.groups:
        group_codes = [c.code() for c in group.cards]
        assert oracle.is_group(oracle.parse_hand(group_codes), limit.value, wrap), f"{where}: {group_codes}"
    # Groups and unlinked cards are exactly the hand.
    used = Counter(c.index for g in first.groups for c in g.cards) + Counter(c.index for c in first.unlinked)
    assert used == Counter(oracle.index(c) for c in oracle.parse_hand(codes)), where
    # The points are the unlinked cards' points.
    assert first.points == sum(oracle.points(oracle.parse(c.code()), joker_points) for c in first.unlinked), where
    # Groups are listed in canonical order (their keys ascending).
    assert list(keys(first)) == sorted(keys(first)), where


@settings(SETTINGS, max_examples=300)
@given(hand=hands(max_size=7), options=rule_options)
def test_judge_group_agrees_with_the_oracle(hand, options) -> None:
    """The referee's group predicate and the oracle's agree on small multisets (3 to 7 cards)."""
    decks, codes = hand
    limit, wrap, _ = options
    if len(codes) < 3:
        codes = codes + ["JK"] * (3 - len(codes))
    rules = rules_for("cpsat", limit, wrap, 20, decks=3)
    judged = judge_group(to_referee(codes), rules)
    expected = oracle.is_group(oracle.parse_hand(codes), limit.value, wrap)
    assert isinstance(judged, Group) == expected, f"{describe(codes, rules)}: referee says {judged}"
    if isinstance(judged, Group) and judged.kind is GroupKind.RUN:
        # A joker in a run stands for a card on the scale, and the stand-ins make a natural run.
        assert all(s != "JK" for s in judged.stands_for)
        stand_ins = oracle.parse_hand(list(judged.stands_for))
        assert oracle.is_group(stand_ins, "UNLIMITED", wrap), f"{codes}: stands for {judged.stands_for}"


# --- the rule book's examples (RULES §8) -------------------------------------------------------

RULE_BOOK = [
    ("AH 2H 3H 5C 5D 5S KS KD 9C 4D", ["AH 2H 3H", "5C 5D 5S"], 33),
    ("AH 2H 3H 5C 5D 5S KS KD 9C JK", ["AH 2H 3H", "5C 5D 5S", "KS KD JK"], 9),
    ("QS KS AS 2S 3S 4S 7H 7D 7C 9D", ["QS KS AS", "2S 3S 4S", "7H 7D 7C"], 9),
    ("2C 2C 9D 9D 4S 7H KH KH QC JK", ["KH KH JK"], 43),
    ("JK JK 5H 9C KD QS 2D 6S 8H 3C", ["5H JK JK 8H"], 40),
]


def group_keys(groups: list[str]) -> tuple[tuple[int, ...], ...]:
    return tuple(sorted(oracle.key(oracle.parse_hand(g)) for g in groups))


@pytest.mark.parametrize("hand, groups, points", RULE_BOOK)
def test_oracle_on_the_rule_book_examples(hand: str, groups: list[str], points: int) -> None:
    got = oracle.best_linking(oracle.parse_hand(hand))
    assert (got.points, got.groups) == (points, group_keys(groups))


def test_oracle_on_the_rule_book_alternatives() -> None:
    # "not A-2-3-4♠: 29" and "not KD JK JK: 43": the alternatives are linkings, just worse.
    a234 = oracle.parse_hand("AS 2S 3S 4S")
    assert oracle.is_group(a234)
    rest = oracle.parse_hand("QS KS 7H 7D 7C 9D")
    assert oracle.best_linking(rest).points == 29
    assert oracle.is_group(oracle.parse_hand("KD JK JK"))
    assert oracle.best_linking(oracle.parse_hand("5H 9C QS 2D 6S 8H 3C")).points == 43


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("hand, groups, points", RULE_BOOK)
def test_referee_on_the_rule_book_examples(engine: str, hand: str, groups: list[str], points: int) -> None:
    got = best_linking(to_referee(hand.split()), RuleSet(engine=engine))
    assert (got.points, keys(got)) == (points, group_keys(groups))


# --- edge cases --------------------------------------------------------------------------------

# (hand, joker_limit or None for all three, wrap_runs or None for both, joker_points, groups, points),
# each worked out by hand from the rule book.
U, N, O = "UNLIMITED", "NO_MORE_THAN_NATURALS", "ONE_PER_GROUP"  # noqa: E741 (the three limits by initial)
EXPECTED = [
    # Four jokers alone: one jokers-only group when allowed; with 0 points, no group at all (fewest
    # groups).
    ("JK JK JK JK", U, None, 20, ["JK JK JK JK"], 0),
    ("JK JK JK JK", N, None, 20, [], 80),
    ("JK JK JK JK", O, None, 20, [], 80),
    ("JK JK JK JK", U, None, 0, [], 0),
    ("JK JK JK", U, None, 50, ["JK JK JK"], 0),
    ("JK JK JK", N, None, 50, [], 150),
    ("JK JK JK", O, None, 50, [], 150),
    ("JK JK", U, None, 20, [], 40),
    # Four jokers and seven cards too far apart to link (even wrapping, two naturals would need
    # five jokers): the jokers go two by two with the tens.
    ("JK JK JK JK 2C 9C 3D 10D KS 6S 5H", U, None, 20, ["10D JK JK", "KS JK JK"], 25),
    ("JK JK JK JK 2C 9C 3D 10D KS 6S 5H", N, None, 20, [], 125),
    ("JK JK JK JK 2C 9C 3D 10D KS 6S 5H", O, None, 20, [], 125),
    # Q-K-A-2 with two jokers for K and A: only when wrapping; then it beats QC JK JK + KS JK JK.
    ("JK JK JK JK 2C 9D KS 5H 7S 3D QC", U, False, 20, ["QC JK JK", "KS JK JK"], 26),
    ("JK JK JK JK 2C 9D KS 5H 7S 3D QC", U, True, 20, ["2C QC JK JK", "KS JK JK"], 24),
    ("JK JK JK JK 2C 9D KS 5H 7S 3D QC", N, True, 20, ["2C QC JK JK"], 74),
    # One natural and jokers is a same-rank group.
    ("KD JK JK", U, None, 20, ["KD JK JK"], 0),
    ("KD JK JK", N, None, 20, [], 50),
    ("KD KS JK", O, None, 20, ["KD KS JK"], 0),
    ("KD JK JK", O, None, 20, [], 50),
    # The ace low or high, never both, and wrapping only with wrap_runs.
    ("QH KH AH", None, None, 20, ["QH KH AH"], 0),
    ("AH 2H 3H", None, None, 20, ["AH 2H 3H"], 0),
    ("KH AH 2H", None, False, 20, [], 13),
    ("KH AH 2H", None, True, 20, ["KH AH 2H"], 0),
    ("QH KH AH 2H", None, False, 20, ["QH KH AH"], 2),
    ("QH KH AH 2H", None, True, 20, ["QH KH AH 2H"], 0),
    ("KH AH JK", None, None, 20, ["KH AH JK"], 0),  # the joker is QH (or 2H with wrapping)
    ("AH JK JK", U, None, 20, ["AH JK JK"], 0),
    ("KH AH 2H JK", None, False, 20, ["KH AH JK"], 2),
    ("KH AH 2H JK", None, True, 20, ["KH AH 2H JK"], 0),
    # Two identical cards in one same-rank group; not in a run.
    ("7H 7H 7S", None, None, 20, ["7H 7H 7S"], 0),
    ("7H 7H 8H", None, None, 20, [], 22),
    ("7H 7H 8H 9H", None, None, 20, ["7H 8H 9H"], 7),
    # Fewest groups before the lexicographic rule (RULES §3): eleven cards of one suit are one run,
    # six sevens one group, jokers join the group rather than make one of their own.
    ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH", None, None, 20, ["AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH"], 0),
    ("3S 4S 5S 6S 7S 8S 9S 10S JS QS KS", None, None, 20, ["3S 4S 5S 6S 7S 8S 9S 10S JS QS KS"], 0),
    ("AH 2H 3H 4H 5H 6H", None, None, 20, ["AH 2H 3H 4H 5H 6H"], 0),
    ("7H 7H 7S 7S 7D 7C", None, None, 20, ["7H 7H 7S 7S 7D 7C"], 0),
    ("5C 5D 5S JK JK JK", U, None, 20, ["5C 5D 5S JK JK JK"], 0),
    ("5C 5D 5S JK JK JK", N, None, 20, ["5C 5D 5S JK JK JK"], 0),
    ("5C 5D 5S JK JK JK", O, None, 20, ["5C 5D 5S JK"], 40),
    # Jokers worth nothing: one group either way, and the shorter key comes first.
    ("5C 5D 5S JK JK JK", U, None, 0, ["5C 5D 5S"], 0),
]


def _expand(limit: str | None, wrap: bool | None) -> list[tuple[str, bool]]:
    limits = [limit] if limit else list(oracle.LIMITS)
    wraps = [wrap] if wrap is not None else [False, True]
    return [(lim, w) for lim in limits for w in wraps]


EXPECTED_CASES = [
    (hand, lim, w, jp, groups, pts)
    for hand, limit, wrap, jp, groups, pts in EXPECTED
    for lim, w in _expand(limit, wrap)
]


@pytest.mark.parametrize("hand, limit, wrap, joker_points, groups, points", EXPECTED_CASES)
def test_oracle_on_edge_cases(
    hand: str, limit: str, wrap: bool, joker_points: int, groups: list[str], points: int
) -> None:
    got = oracle.best_linking(oracle.parse_hand(hand), limit, wrap, joker_points)
    assert (got.points, got.groups) == (points, group_keys(groups))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("hand, limit, wrap, joker_points, groups, points", EXPECTED_CASES)
def test_referee_on_edge_cases(
    engine: str, hand: str, limit: str, wrap: bool, joker_points: int, groups: list[str], points: int
) -> None:
    rules = rules_for(engine, JokerLimit(limit), wrap, joker_points)
    got = best_linking(to_referee(hand.split()), rules)
    assert (got.points, keys(got)) == (points, group_keys(groups)), describe(hand.split(), rules)


# Hands where many linkings tie or jokers have many places: the referee must match the oracle
# under every rule combination.
EDGE_HANDS = [
    "JK JK JK JK",
    "JK JK JK JK 5H 6H 7H 8H 9H 10H JH",
    "JK JK JK JK AH AH 2H 2H 3H 3H 4H",
    "JK JK JK JK 7H 7H 7S 7S 7D 7D 7C",
    "JK JK JK JK 2C 3C 9D 9S KS QS 5H",
    "JK JK JK JK KH AH 2H QS KS AS 2S",
    "QH KH AH 2H 3H QS KS AS 2S 3S JK",
    "AC AC AD AD 2C 2C 3C 3C KC KC QC",
    "5H 5H 6H 6H 7H 7H 8H 8H 9H 9H JK",
    "AS 2S 3S 4S 5S 6S 7S 8S 9S 10S JS",
    "2S 3S 4S 5S 6S 7S 8S 9S 10S JS JK",
    "KD KD KD QD QD QD AD AD AD JK JK",
    "JK JK JK JK JK JK 9C 9C 9C 10C 10C",
]


@pytest.mark.parametrize("hand", EDGE_HANDS)
def test_referee_on_edge_hands(hand: str) -> None:
    codes = hand.split()
    decks = 3 if codes.count("JK") > 4 or any(n > 2 for c, n in Counter(codes).items() if c != "JK") else 2
    for limit in LIMITS:
        for wrap in WRAPS:
            for joker_points in JOKER_POINTS:
                expected = oracle_best(codes, rules_for(ENGINES[0], limit, wrap, joker_points, decks))
                for engine in ENGINES:  # the oracle's answer found once for every engine
                    assert_matches_oracle(codes, rules_for(engine, limit, wrap, joker_points, decks), expected)


# --- the oracle's own predicate (RULES §2) -----------------------------------------------------


@pytest.mark.parametrize(
    "cards, limit, wrap, expected",
    [
        ("7H 7S", U, False, False),  # fewer than three cards
        ("7H 7H 7H", U, False, True),  # duplicates in a same-rank group
        ("7H 7S 7D 7C 7H 7S 7D 7C", U, False, True),  # no upper size
        ("5H 6H 7H", U, False, True),
        ("5H 6H 7S", U, False, False),  # two suits
        ("5H 6H 6H 7H", U, False, False),  # a rank twice in a run
        ("5H 7H JK", U, False, True),  # the joker is 6H
        ("5H 8H JK", U, False, False),
        ("5H 8H JK JK", U, False, True),
        ("QH KH AH", U, False, True),
        ("AH 2H 3H", U, False, True),
        ("KH AH 2H", U, False, False),
        ("KH AH 2H", U, True, True),
        ("QH KH JK", U, False, True),  # Q K A or J Q K
        ("AH JK JK", U, False, True),  # A 2 3
        ("KH JK JK", U, False, True),  # J Q K, Q K A, or K with jokers
        ("QH AH JK JK", U, False, True),  # J Q K A
        ("2H AH JK JK JK JK JK JK JK JK JK JK JK", U, False, True),  # A 2 3 … K
        ("2H AH JK JK JK JK JK JK JK JK JK JK JK JK", U, False, False),  # 14 cards: the ace twice
        ("2H KH AH JK JK JK JK JK JK JK JK JK JK", U, False, True),  # A 2 … K again
        ("2H KH AH JK JK JK JK JK JK JK JK JK", U, False, False),  # 12 cards: A 2 … K A does not fit
        ("2H KH AH JK JK JK JK JK JK JK JK JK", U, True, True),
        ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH", U, False, True),  # 13 cards, ace low
        ("2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH AH", U, True, True),
        ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH JK", U, True, False),  # 14 cards: a rank twice
        ("9H 10H JH QH KH AH 2H 3H 4H 5H 6H 7H 8H", U, True, True),
        ("JK JK JK", U, False, True),
        ("JK JK JK", N, False, False),
        ("JK JK JK", O, False, False),
        ("5H JK JK", N, False, False),
        ("5H 6H JK JK", N, False, True),
        ("5H 6H JK JK", O, False, False),
        ("5H 6H JK", O, False, True),
        ("5H 5S JK", O, False, True),
    ],
)
def test_oracle_group_predicate(cards: str, limit: str, wrap: bool, expected: bool) -> None:
    assert oracle.is_group(oracle.parse_hand(cards), limit, wrap) is expected


def test_oracle_cards() -> None:
    assert oracle.parse_hand("ah 10s Td jk QC") == [(1, "H"), (10, "S"), (10, "D"), "JK", (12, "C")]
    assert [oracle.index(oracle.parse(c)) for c in ("AC", "KC", "AD", "AH", "KS", "JK")] == [0, 12, 13, 26, 51, 52]
    assert all(oracle.index(oracle.card_of(i)) == i for i in range(53))
    assert [oracle.points(oracle.parse(c), 25) for c in ("AS", "9S", "10S", "JS", "QS", "KS", "JK")] == [
        1,
        9,
        10,
        10,
        10,
        10,
        25,
    ]
    # The tie-break: a prefix comes first, and the oracle lists every best linking.
    assert ((1, 2, 3),) < ((1, 2, 3), (40, 41, 42)) < ((1, 2, 3, 52),)
    best, linkings = oracle.all_best(oracle.parse_hand("5H 6H 7H JK"), joker_points=0)
    assert best == 0 and linkings == {((30, 31, 32),), ((30, 31, 32, 52),)}
    rng = random.Random(7)
    hand = oracle.parse_hand("JK JK 5H 6H 7H 7S 7D 8H")
    for _ in range(5):
        rng.shuffle(hand)
        assert oracle.best_linking(hand).groups == oracle.best_linking(sorted(hand, key=oracle.index)).groups
