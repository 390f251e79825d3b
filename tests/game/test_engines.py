"""The second exact engine (memoised search) against the CP-SAT engine, and audit mode.

* Property tests (hypothesis, derandomized): the search engine returns exactly the CP-SAT
  engine's ``Linking`` for random hands biased towards the hard cases (duplicates, aces, long
  runs of one suit, many of one rank, jokers), under every ``joker_limit`` × ``wrap_runs`` ×
  ``joker_points`` (20, 0), with two and three decks.
* Bulk checks (seeded): many more hands through the search engine alone, checked for what must
  hold whatever the engine: every card accounted for, valid groups in key order, the points,
  the same points when the suits are relabelled, and the bounds that removing a card sets.
* A brute-force oracle (every way to link a small hand, each group judged by ``judge_group``,
  the canonical answer picked by ``Linking.rank``) on small hands.
* Audit mode: the same answers, and ``EngineDisagreementError`` naming the hand when the two
  engines differ (the one place a deliberately broken engine is used).
* ``pytest -m slow``: a million seeded hands through the search engine, sampled against CP-SAT
  and against the brute-force oracle.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.game.cards import CARD_BY_INDEX, JOKER, NATURALS, SUITS, Card, format_cards, parse_cards, sort_cards
from referee.game.errors import EngineDisagreementError, InvalidOptionError
from referee.game.groups import Group, judge_group
from referee.game.linking import Linking, best_linking, engine_for, linking_from_parts
from referee.game.linking.audit import AuditEngine
from referee.game.linking.cpsat import CpSatEngine
from referee.game.linking.search import SearchEngine, components_no_wrap, joker_free_components
from referee.game.rules import Engine, JokerLimit, RuleSet

CPSAT = CpSatEngine()
SEARCH = SearchEngine()

COMBOS = [(limit, wrap, joker_points) for limit in JokerLimit for wrap in (False, True) for joker_points in (20, 0)]
COMBO_IDS = [f"{limit.value}-{'wrap' if wrap else 'nowrap'}-jp{jp}" for limit, wrap, jp in COMBOS]

# --- hands biased towards the hard cases --------------------------------------------------------

_DECKS = {decks: [card for card in NATURALS for _ in range(decks)] + [JOKER] * (2 * decks) for decks in (2, 3)}

STYLES = ("deck", "suit", "ranks", "aces", "dupes", "suit+ranks")


def make_hand(pick: Callable[[int, int], int], decks: int, max_jokers: int = 4) -> tuple[Card, ...]:
    """A hand of 1 to 11 cards drawn with ``pick(lo, hi)`` (an integer in [lo, hi]).

    The naturals come from a pool chosen by a style: the whole deck; a stretch of one suit (long
    runs, wrapping past the king); a few ranks in every suit; the ranks around the ace; a handful
    of cards with all their copies; or a stretch plus its ranks in the other suits. Every natural
    of the pool is there ``decks`` times, so the copies never exceed the deck.
    """
    style = STYLES[pick(0, len(STYLES) - 1)]
    kinds: set[Card] = set()
    if style == "deck":
        kinds.update(NATURALS)
    if style in ("suit", "suit+ranks"):
        suit = SUITS[pick(0, 3)]
        start, width = pick(1, 13), pick(3, 13)
        stretch = [(start + d - 1) % 13 + 1 for d in range(width)]
        kinds.update(Card(rank, suit) for rank in stretch)
        if style == "suit+ranks":
            for rank in stretch[: pick(1, 3)]:
                kinds.update(Card(rank, s) for s in SUITS)
    if style == "ranks":
        for _ in range(pick(1, 3)):
            rank = pick(1, 13)
            kinds.update(Card(rank, s) for s in SUITS)
    if style == "aces":
        for suit in {SUITS[pick(0, 3)], SUITS[pick(0, 3)]}:
            kinds.update(Card(rank, suit) for rank in (12, 13, 1, 2, 3))
        kinds.update(Card(1, s) for s in SUITS)
    if style == "dupes":
        for _ in range(pick(2, 5)):
            kinds.add(NATURALS[pick(0, 51)])
    pool = sorted((card for card in kinds for _ in range(decks)), key=lambda c: c.index)
    size = pick(1, 11)
    jokers = min(pick(0, max_jokers), size, 2 * decks)
    hand = [JOKER] * jokers
    while len(hand) < size and pool:
        hand.append(pool.pop(pick(0, len(pool) - 1)))
    return sort_cards(hand)


@st.composite
def hands(draw: st.DrawFn, decks: int) -> tuple[Card, ...]:
    return make_hand(lambda lo, hi: draw(st.integers(lo, hi)), decks)


def random_rules(rng: random.Random, decks: int | None = None) -> RuleSet:
    limit, wrap, joker_points = rng.choice(COMBOS)
    return RuleSet(decks=decks or rng.choice((2, 3)), joker_points=joker_points, wrap_runs=wrap, joker_limit=limit)


# --- what any best linking must satisfy --------------------------------------------------------


def check_shape(hand: tuple[Card, ...], linking: Linking, rules: RuleSet) -> None:
    """Every card accounted for once, valid groups in key order, the points of the unlinked cards."""
    used = Counter(card.index for group in linking.groups for card in group.cards)
    used.update(card.index for card in linking.unlinked)
    assert used == Counter(card.index for card in hand), format_cards(hand)
    for group in linking.groups:
        judged = judge_group(group.cards, rules)
        assert isinstance(judged, Group), (format_cards(hand), str(group), judged)
        assert judged.key == group.key
    keys = [group.key for group in linking.groups]
    assert keys == sorted(keys)
    assert linking.points == sum(card.points(rules.joker_points) for card in linking.unlinked)
    assert list(linking.unlinked) == sorted(linking.unlinked, key=lambda c: c.index)


def relabel_suits(hand: tuple[Card, ...], order: tuple[int, ...]) -> tuple[Card, ...]:
    return sort_cards(card if card.is_joker else Card(card.rank, SUITS[order[card.suit.order]]) for card in hand)


# --- a brute-force oracle: every linking, each group judged by judge_group ---------------------


def brute_force(hand: tuple[Card, ...], rules: RuleSet) -> tuple[int, int, tuple[tuple[int, ...], ...]]:
    """The least ``Linking.rank`` over every way to link ``hand``: for small hands only."""
    points = {i: CARD_BY_INDEX[i].points(rules.joker_points) for i in range(53)}

    @cache
    def is_group(cards: tuple[int, ...]) -> bool:
        return isinstance(judge_group((CARD_BY_INDEX[i] for i in cards), rules), Group)

    @cache
    def every_linking(left: tuple[int, ...]) -> frozenset[tuple[int, tuple[tuple[int, ...], ...]]]:
        """(unlinked points, sorted group keys) of every linking of the sorted multiset ``left``."""
        if not left:
            return frozenset({(0, ())})
        low, rest = left[0], left[1:]
        out = {(p + points[low], keys) for p, keys in every_linking(rest)}
        others = set()
        for size in range(2, len(rest) + 1):
            others.update(itertools.combinations(rest, size))
        for other in others:
            group = (low,) + other
            if not is_group(group):
                continue
            remaining = list(rest)
            for i in other:
                remaining.remove(i)
            for p, keys in every_linking(tuple(remaining)):
                out.add((p, tuple(sorted(keys + (group,)))))
        return frozenset(out)

    return min((p, len(keys), keys) for p, keys in every_linking(tuple(card.index for card in hand)))


# --- the search engine against CP-SAT ----------------------------------------------------------


@pytest.mark.parametrize(("limit", "wrap", "joker_points"), COMBOS, ids=COMBO_IDS)
@settings(
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=250,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_search_matches_cpsat(limit: JokerLimit, wrap: bool, joker_points: int, data: st.DataObject) -> None:
    decks = data.draw(st.sampled_from((2, 3)), label="decks")
    hand = data.draw(hands(decks), label="hand")
    rules = RuleSet(decks=decks, joker_points=joker_points, wrap_runs=wrap, joker_limit=limit)
    expected = CPSAT.best_linking(hand, rules)
    got = SEARCH.best_linking(hand, rules)
    assert got == expected, (format_cards(hand), rules.linking_key(), got, expected)


def test_search_matches_cpsat_on_deals() -> None:
    """Ten-card deals from a shuffled deck (the hands the referee scores most), every option set."""
    rng = random.Random(20240501)
    for n in range(600):
        limit, wrap, joker_points = COMBOS[n % len(COMBOS)]
        decks = 2 + n % 2
        rules = RuleSet(decks=decks, joker_points=joker_points, wrap_runs=wrap, joker_limit=limit)
        hand = sort_cards(rng.sample(_DECKS[decks], 10))
        assert SEARCH.best_linking(hand, rules) == CPSAT.best_linking(hand, rules), format_cards(hand)


# --- the search engine alone, on many more hands ------------------------------------------------


def test_search_bulk_invariants() -> None:
    """18,000 seeded hands through the search engine, checked for what every best linking obeys."""
    rng = random.Random(8675309)
    pick = rng.randint
    for n in range(18_000):
        rules = random_rules(rng)
        hand = make_hand(pick, rules.decks, max_jokers=2 * rules.decks if n % 5 == 0 else 4)
        linking = SEARCH.best_linking(hand, rules)
        check_shape(hand, linking, rules)
        # Order-free: any order of the same cards, through the public entry point.
        shuffled = list(hand)
        rng.shuffle(shuffled)
        assert best_linking(shuffled, rules.with_options(engine="search")) == linking
        if n % 3 == 0:
            # Suits are interchangeable: relabelling them keeps the points.
            order = tuple(rng.sample(range(4), 4))
            assert SEARCH.best_linking(relabel_suits(hand, order), rules).points == linking.points
        if n % 3 == 1 and len(hand) > 1:
            # Leaving a card out: the rest cannot do better than the hand minus that card's points.
            i = rng.randrange(len(hand))
            card = hand[i]
            smaller = SEARCH.best_linking(hand[:i] + hand[i + 1 :], rules)
            assert smaller.points >= linking.points - card.points(rules.joker_points), format_cards(hand)
            if card in linking.unlinked:
                assert smaller.points == linking.points - card.points(rules.joker_points), format_cards(hand)


def test_joker_free_components_on_bits_are_the_union_find_ones() -> None:
    """Without wrapping the search engine splits a joker-free hand on bits; 5,000 seeded hands of
    every style (ace-high runs, duplicates, three decks) split as the general union-find does."""
    rng = random.Random(20261201)
    for _ in range(5_000):
        hand = make_hand(rng.randint, rng.choice((1, 2, 3)), max_jokers=0)
        naturals = tuple(card.index for card in hand)
        assert components_no_wrap(naturals) == joker_free_components(naturals, False), format_cards(hand)


def test_a_linking_from_parts_takes_the_cards_in_any_order() -> None:
    """The groups' cards come out of the hand whatever its order; a card the hand lacks is an
    engine's bug, never a linking."""
    rules = RuleSet()
    hand = parse_cards("5C 5D 5S AH 2H 3H 9C KS KD 5C".split())
    parts = [tuple(card.index for card in parse_cards(p.split())) for p in ("AH 2H 3H", "5C 5D 5S")]
    in_order = linking_from_parts(sort_cards(hand), parts, rules)
    assert format_cards(in_order.unlinked) == "5C 9C KD KS"
    assert in_order.points == 34
    out_of_order = linking_from_parts(hand, parts, rules)
    assert [g.key for g in out_of_order.groups] == [g.key for g in in_order.groups]
    assert sort_cards(out_of_order.unlinked) == in_order.unlinked and out_of_order.points == 34
    for held in (sort_cards(hand), hand):
        with pytest.raises(AssertionError, match="does not hold"):
            linking_from_parts(held, [*parts, tuple(card.index for card in parse_cards("QH KH AH".split()))], rules)


def test_search_matches_brute_force() -> None:
    """Small hands against every possible linking, each group judged by judge_group."""
    rng = random.Random(31337)
    checked = 0
    while checked < 1_500:
        rules = random_rules(rng)
        hand = make_hand(rng.randint, rules.decks)
        if len(hand) > 7:
            continue
        checked += 1
        expected = brute_force(hand, rules)
        got = SEARCH.best_linking(hand, rules)
        assert got.rank == expected, (format_cards(hand), rules.linking_key(), got.rank, expected)


# --- worked examples (RULES §8) ------------------------------------------------------------------

EXAMPLES = [
    ("AH 2H 3H 5C 5D 5S KS KD 9C 4D", 33, ["AH 2H 3H", "5C 5D 5S"]),
    ("AH 2H 3H 5C 5D 5S KS KD 9C JK", 9, ["5C 5D 5S", "KD KS JK", "AH 2H 3H"]),
    ("QS KS AS 2S 3S 4S 7H 7D 7C 9D", 9, ["QS KS AS", "2S 3S 4S", "7C 7D 7H"]),
    ("2C 2C 9D 9D 4S 7H KH KH QC JK", 43, ["KH KH JK"]),
    ("JK JK 5H 9C KD QS 2D 6S 8H 3C", 40, ["5H JK JK 8H"]),
]


@pytest.mark.parametrize("engine", ["search", "audit"])
@pytest.mark.parametrize(("codes", "points", "groups"), EXAMPLES)
def test_worked_examples(engine: str, codes: str, points: int, groups: list[str]) -> None:
    linking = best_linking(parse_cards(codes.split()), RuleSet(engine=engine))
    assert linking.points == points
    assert sorted(str(g) for g in linking.groups) == sorted(groups)
    assert linking == best_linking(parse_cards(codes.split()), RuleSet())


def test_dispatch_registers_every_engine() -> None:
    for engine in Engine:
        assert engine_for(RuleSet(engine=engine)).name is engine


def test_an_engine_is_named_by_its_value_and_nothing_else() -> None:
    assert RuleSet(engine="search").engine is Engine.SEARCH  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError) as caught:
        RuleSet(engine="fast")  # type: ignore[arg-type]
    assert caught.value.field == "engine"
    assert "cpsat, search, audit" in caught.value.message


def test_an_engine_is_imported_only_when_used() -> None:
    # A search-only command must not pay for loading OR-Tools; asking for CP-SAT loads it.
    script = (
        "import sys\n"
        "from referee.game.cards import parse_cards\n"
        "from referee.game.linking import best_linking\n"
        "from referee.game.rules import RuleSet\n"
        "best_linking(parse_cards('7C 7D 7H JK'.split()), RuleSet(engine='search'))\n"
        "print('ortools' in sys.modules)\n"
        "best_linking(parse_cards('7C 7D 7H JK'.split()), RuleSet())\n"
        "print('ortools' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]


def test_extreme_hands() -> None:
    """All jokers, one card, the longest runs, a whole rank: the same as CP-SAT under every option."""
    codes = [
        "JK",
        "JK JK",
        "JK JK JK",
        "JK JK JK JK",
        "JK JK JK JK JK JK",
        "7H",
        "AH AH",
        "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH",
        "3H 4H 5H 6H 7H 8H 9H 10H JH QH KH",
        "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS",
        "AS 2S 3S 4S 5S 6S 7S 8S 9S 10S JK",
        "JH QH KH AH 2H 3H 4H 5H 6H JK JK",
        "7C 7C 7D 7D 7H 7H 7S 7S JK JK JK",
        "KC KD KH KS AC AD AH AS 2C 2D JK",
        "QH KH AH AH 2H 3H JK JK JK JK 5H",
        "AD AD 2D 2D 3D 3D 4D 4D JK JK JK",
        "AD AD AD 2D 2D 2D 3D 3D 3D JK JK",
    ]
    for code in codes:
        hand = sort_cards(parse_cards(code.split()))
        for limit, wrap, joker_points in COMBOS:
            rules = RuleSet(decks=3, joker_points=joker_points, wrap_runs=wrap, joker_limit=limit)
            assert SEARCH.best_linking(hand, rules) == CPSAT.best_linking(hand, rules), (code, rules.linking_key())


# --- audit mode ----------------------------------------------------------------------------------


class _Fixed:
    """A deliberately broken engine: returns the linking built from fixed groups, whatever the hand."""

    name = "broken"

    def __init__(self, parts: list[str]) -> None:
        self.parts = [tuple(card.index for card in parse_cards(p.split())) for p in parts]

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        return linking_from_parts(cards, self.parts, rules)


def test_audit_returns_the_agreed_answer() -> None:
    audit = AuditEngine()
    rng = random.Random(5)
    for _ in range(150):
        rules = random_rules(rng)
        hand = make_hand(rng.randint, rules.decks)
        assert audit.best_linking(hand, rules) == CPSAT.best_linking(hand, rules)


def test_audit_raises_when_the_points_differ() -> None:
    hand = sort_cards(parse_cards("AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()))
    audit = AuditEngine(CpSatEngine(), _Fixed(["AH 2H 3H"]))
    with pytest.raises(EngineDisagreementError) as caught:
        audit.best_linking(hand, RuleSet())
    message = str(caught.value)
    assert format_cards(hand) in message  # the hand, in canonical order
    assert "points differ" in message
    assert "cpsat 33" in message and "broken 48" in message
    assert "cpsat" in message and "broken" in message


def test_audit_raises_when_only_the_groups_differ() -> None:
    # With jokers worth 0 points, 5C 5D 5H and 5C 5D 5H JK leave the same 0 points;
    # the canonical answer is the shorter group.
    hand = sort_cards(parse_cards("5C 5D 5H JK".split()))
    rules = RuleSet(joker_points=0)
    audit = AuditEngine(SearchEngine(), _Fixed(["5C 5D 5H JK"]))
    with pytest.raises(EngineDisagreementError) as caught:
        audit.best_linking(hand, rules)
    message = str(caught.value)
    assert format_cards(hand) in message
    assert "groups differ" in message
    assert "search" in message and "broken" in message


def test_audit_mode_through_the_rules() -> None:
    hand = parse_cards("QS KS AS 2S 3S 4S 7H 7D 7C 9D".split())
    assert best_linking(hand, RuleSet(engine="audit")) == best_linking(hand, RuleSet(engine="cpsat"))


# --- on demand: a million hands ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_search_a_million_hands() -> None:
    """1,000,000 seeded hands through the search engine; CP-SAT on every 500th, brute force on small ones."""
    rng = random.Random(1_000_000)
    pick = rng.randint
    against_cpsat = against_brute = 0
    for n in range(1_000_000):
        rules = random_rules(rng)
        if n % 4 == 0:
            hand = sort_cards(rng.sample(_DECKS[rules.decks], rng.randint(1, 11)))
        else:
            hand = make_hand(pick, rules.decks, max_jokers=2 * rules.decks if n % 7 == 0 else 4)
        linking = SEARCH.best_linking(hand, rules)
        check_shape(hand, linking, rules)
        if n % 500 == 0:
            against_cpsat += 1
            assert linking == CPSAT.best_linking(hand, rules), (format_cards(hand), rules.linking_key())
        if n % 200 == 1 and len(hand) <= 7:
            against_brute += 1
            assert linking.rank == brute_force(hand, rules), (format_cards(hand), rules.linking_key())
    assert against_cpsat == 2_000 and against_brute > 1_000
