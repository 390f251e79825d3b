"""The CP-SAT engine's ways to the canonical linking (one weighted solve or group by group, a full
linking tried first or not) agree."""

from __future__ import annotations

import random

import pytest

from referee.cards import JOKER, NATURALS, format_cards, parse_cards, sort_cards
from referee.linking import cpsat, time_budget
from referee.linking.cpsat import CpSatEngine
from referee.rules import JokerLimit, RuleSet

try:
    from tests import oracle
except ImportError:  # run from inside tests/
    import oracle  # type: ignore[no-redef]


def hands(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    pool = [card for card in NATURALS for _ in range(2)]
    found = []
    for _ in range(count):
        size = rng.randint(3, 11)
        jokers = rng.randint(0, min(4, size))
        suit = rng.randrange(4)
        # Half the hands lean on one suit and one rank, where ties between linkings abound.
        near = [c for c in pool if c.index // 13 == suit or c.rank == rng.randint(1, 13)] if rng.random() < 0.5 else pool
        cards = rng.sample(near, size - jokers) + [JOKER] * jokers
        found.append(sort_cards(cards))
    return found


@pytest.mark.parametrize(
    "rules",
    [RuleSet(), RuleSet(joker_points=0), RuleSet(wrap_runs=True), RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)],
    ids=["default", "jokers-0", "wrap", "no-more-than-naturals"],
)
@pytest.mark.parametrize(
    ("one_objective", "try_full_from"),
    [(True, 0), (True, 10**9), (False, 0), (False, 10**9)],
    ids=["one-objective,full-first", "one-objective,as-it-comes", "by-group,full-first", "by-group,as-it-comes"],
)
def test_every_way_to_the_canonical_linking_gives_the_oracles_linking(
    rules: RuleSet, one_objective: bool, try_full_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not one_objective:
        monkeypatch.setattr(cpsat, "_EXACT_IN_DOUBLE", 0)  # every hand goes group by group
    monkeypatch.setattr(cpsat, "TRY_FULL_FROM", try_full_from)  # a full linking tried first, or never
    engine = CpSatEngine()
    for hand in hands(seed=7, count=120):
        linking = engine.best_linking(hand, rules)
        expected = oracle.best_linking(
            oracle.parse_hand([card.code() for card in hand]), rules.joker_limit.value, rules.wrap_runs, rules.joker_points
        )
        assert (linking.points, tuple(group.key for group in linking.groups)) == (expected.points, expected.groups), hand


def test_a_time_budget_already_spent_is_a_solver_error() -> None:
    from referee.errors import SolverError

    hand = sort_cards(NATURALS[:3])
    with time_budget(0.0), pytest.raises(SolverError, match="time budget"):
        CpSatEngine().best_linking(hand, RuleSet())


def test_a_tie_break_beyond_double_precision_is_not_lost() -> None:
    # Two best linkings of the cards left after the first group differ by one tie-break unit on
    # an objective near 3^36; a floating-point gap check once took the wrong one as optimal.
    rules = RuleSet(joker_points=0, wrap_runs=True, joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)
    hand = sort_cards(parse_cards("AC AC AD AD AH AH AS AS JK JK".split()))
    linking = CpSatEngine().best_linking(hand, rules)
    assert [format_cards(group.cards) for group in linking.groups] == ["AC AC AD", "AD AH AH", "AS AS JK"]
    assert format_cards(linking.unlinked) == "JK"
