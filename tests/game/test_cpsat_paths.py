"""The CP-SAT engine's ways to the canonical linking (one weighted solve or group by group, a full
linking tried first or not) agree, and agree with the oracle."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import oracle
import pytest

from referee.game.cards import JOKER, NATURALS, format_cards, parse_cards, sort_cards, suit_of
from referee.game.errors import SolverTimeout
from referee.game.linking import cpsat, time_budget
from referee.game.linking.cpsat import CpSatEngine
from referee.game.rules import JokerLimit, RuleSet


def hands(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    pool = [card for card in NATURALS for _ in range(2)]
    found = []
    for _ in range(count):
        size = rng.randint(3, 11)
        jokers = rng.randint(0, min(4, size))
        suit = rng.randrange(4)
        # Half the hands lean on one suit and one rank, where ties between linkings abound.
        near = (
            [c for c in pool if suit_of(c.index) == suit or c.rank == rng.randint(1, 13)]
            if rng.random() < 0.5
            else pool
        )
        cards = rng.sample(near, size - jokers) + [JOKER] * jokers
        found.append(sort_cards(cards))
    return found


@pytest.mark.parametrize(
    "rules",
    [
        RuleSet(),
        RuleSet(joker_points=0),
        RuleSet(wrap_runs=True),
        RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS),
    ],
    ids=["default", "jokers-0", "wrap", "no-more-than-naturals"],
)
@pytest.mark.parametrize("one_objective", [True, False], ids=["one-objective", "by-group"])
@pytest.mark.parametrize("full_first", ["never", "when-likely", "always"])
def test_every_way_to_the_canonical_linking_gives_the_oracles_linking(
    rules: RuleSet, one_objective: bool, full_first: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not one_objective:
        monkeypatch.setattr(cpsat, "_EXACT_IN_DOUBLE", 0)  # every hand goes group by group
    # A full linking tried first never, when the engine thinks it likely, or always (so the
    # attempts that fail are taken too).
    monkeypatch.setattr(cpsat, "TRY_FULL_FROM", 10**9 if full_first == "never" else 0)
    if full_first == "always":
        monkeypatch.setattr(cpsat, "_may_link_fully", lambda *_: True)
    engine = CpSatEngine()
    for hand in hands(seed=7, count=120):
        linking = engine.best_linking(hand, rules)
        expected = oracle.best_linking(
            oracle.parse_hand([card.code() for card in hand]),
            rules.joker_limit.value,
            rules.wrap_runs,
            rules.joker_points,
        )
        assert (linking.points, tuple(group.key for group in linking.groups)) == (expected.points, expected.groups), (
            hand
        )


def test_a_time_budget_already_spent_is_a_solver_timeout() -> None:
    hand = sort_cards(NATURALS[:3])
    with time_budget(0.0), pytest.raises(SolverTimeout, match="time budget"):
        CpSatEngine().best_linking(hand, RuleSet())


def test_a_solve_stopped_by_its_time_cap_is_a_solver_timeout() -> None:
    # Seven sevens, a two, a king and four jokers: no linking of them all in one or two groups
    # (those are found without a solve), so several solves of many candidates, none proven in a
    # microsecond.
    hand = sort_cards(parse_cards("7C 7C 7D 7D 7H 7H 7S KD 2C JK JK JK JK".split()))
    with pytest.raises(SolverTimeout, match="within its time"):
        CpSatEngine(wall_cap_seconds=1e-6).best_linking(hand, RuleSet(joker_points=7))


def test_a_tie_break_beyond_double_precision_is_not_lost() -> None:
    # Two best linkings of the cards left after the first group differed by one tie-break unit on
    # an objective near 3^36; a floating-point gap check once took the wrong one as optimal. With
    # fewest groups first the eight aces are one group, and the jokers (worth 0) stay out of it.
    rules = RuleSet(joker_points=0, wrap_runs=True, joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)
    hand = sort_cards(parse_cards("AC AC AD AD AH AH AS AS JK JK".split()))
    linking = CpSatEngine().best_linking(hand, rules)
    assert [format_cards(group.cards) for group in linking.groups] == ["AC AC AD AD AH AH AS AS"]
    assert format_cards(linking.unlinked) == "JK JK"


@pytest.mark.parametrize(
    "rules",
    [RuleSet(), RuleSet(wrap_runs=True), RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)],
    ids=["default", "wrap", "no-more-than-naturals"],
)
def test_the_lone_card_count_holds_for_every_fully_linked_hand(rules: RuleSet) -> None:
    # What the engine reads off the candidates before trying a full linking is sound: a hand
    # the oracle links in full has every scoring card in some group, and at most four lone cards
    # per joker. Hands of ten cards from one or two suits, with jokers, where lone cards abound.
    from collections import Counter

    from referee.game.cards import points_by_index
    from referee.game.linking.candidates import candidate_groups

    rng = random.Random(11)
    points = points_by_index(rules.joker_points)
    checked = full = 0
    for _ in range(400):
        jokers = rng.randint(0, 4)
        suits = rng.sample(range(4), rng.randint(1, 2))
        pool = [card for card in NATURALS for _ in range(2) if suit_of(card.index) in suits]
        hand = sort_cards(rng.sample(pool, 10 - jokers) + [JOKER] * jokers)
        counts = Counter(card.index for card in hand)
        columns = [cpsat._column(group, rules.joker_points) for group in candidate_groups(counts, rules)]
        lone = cpsat._lone_cards(counts, [c for c in columns if c.worth], points)
        expected = oracle.best_linking(
            oracle.parse_hand([card.code() for card in hand]),
            rules.joker_limit.value,
            rules.wrap_runs,
            rules.joker_points,
        )
        checked += 1
        if expected.points == 0:  # every card that scores is linked
            full += 1
            assert lone is not None and lone <= 4 * jokers, format_cards(hand)
    assert full >= 40, (full, checked)  # the property was exercised on enough linked hands


def test_the_engine_loads_neither_the_python_builder_nor_pandas() -> None:
    # The engine solves through OR-Tools' compiled types alone; the builder (cp_model) imports
    # pandas and numpy, half a second at every process start, for helpers the engine never uses.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from referee.game.cards import parse_cards\n"
            "from referee.game.linking import best_linking\n"
            "from referee.game.rules import RuleSet\n"
            "best_linking(parse_cards('4C 5C 6C 8D 8H 8S JD'.split()), RuleSet())\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'ortools.sat.python.cp_model') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_model_writer_builds_what_the_samples_build() -> None:
    # The writer's named operations give the proto OR-Tools' own builder gives for the same model.
    from ortools.sat.python import cp_model

    writer = cpsat._ModelWriter()
    x, y = writer.new_int_vars([3, 1])
    writer.add_linear([x, y], [2, 1], 1, 4)
    writer.add_linear([x], [1], 1, 3, only_if=y)
    writer.add_exactly_one([y])
    writer.minimize([x, y], [-1, 5])

    model = cp_model.CpModel()
    a, b = model.new_int_var(0, 3, ""), model.new_bool_var("")
    model.add_linear_constraint(2 * a + b, 1, 4)
    model.add_linear_constraint(a, 1, 3).only_enforce_if(b)
    model.add_exactly_one([b])
    model.minimize(-a + 5 * b)
    # The builder also states the objective's scaling factor, 1, which is what an unset one means.
    expected = str(model.proto).replace("  scaling_factor: 1\n", "")
    assert str(writer.proto) == expected
    # The engine's solve of the written model answers as OR-Tools' own solver does.
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    cards = tuple(parse_cards(["AH"]))
    assert CpSatEngine()._optimum(writer, cards, infeasible_ok=False) == list(solver.response_proto.solution)
    assert list(solver.response_proto.solution) == [1, 1]  # y is forced, so x is 1 (2x + y <= 4)


def test_or_tools_is_the_version_the_engine_was_written_against() -> None:
    """``cp_model_helper`` is OR-Tools' own compiled module, not its documented builder: a new
    version may move what the engine calls. The pin in pyproject.toml holds it to one minor
    version; this fails loudly the day another is installed, so the engine is checked against it
    (the two tests above) before the pin is widened."""
    import tomllib
    from importlib.metadata import version

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    pinned = [r for r in pyproject["project"]["dependencies"] if r.startswith("ortools")]
    assert pinned == ["ortools>=9.15,<9.16"], pinned
    installed = version("ortools")
    assert installed.split(".")[:2] == ["9", "15"], (
        f"OR-Tools {installed} is installed, the engine was written against 9.15: check "
        "referee/game/linking/cpsat.py's use of cp_model_helper against it before moving the pin"
    )
    for name in ("SolveWrapper", "SatParameters", "CpSolverStatus", "CpModelProto"):
        assert hasattr(cpsat.cmh, name), f"cp_model_helper has no {name} in OR-Tools {installed}"
