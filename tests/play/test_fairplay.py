"""Fair-play statistics (``referee.play.fairplay``), the planted players of the simulator, and the
``fairplay`` command: the z-scores against hand-computed values, sums and output independent of
order and workers, thresholds and least opportunities, a small seeded population whose strongly
planted peeker and colluding pair are flagged and whose honest players are not, the peeker's
draws, bad input lines, and the command run as a real process."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

import pytest
from commands import cli, cli_process

from referee.api import jsonmsg
from referee.api.records import request_of
from referee.cli.fairplay import format_json
from referee.game.cards import JOKER_INDEX, RANKS_PER_SUIT
from referee.game.deal import HAND
from referee.game.rules import Engine, RuleSet, ScoringMode, ScoringRules
from referee.play.fairplay import (
    COLLUSION,
    HIDDEN_KNOWLEDGE,
    LEAST,
    SCALE,
    SOFT_PLAY,
    Z_FLAG,
    Observation,
    Population,
    aggregate,
    judge,
    merge,
    observations,
)
from referee.play.record import DrawSource, Record
from referee.play.review import review_deal
from referee.play.simulate import NAMES, Player, Style, ahead, population, simulate

FAST = RuleSet(engine=Engine.SEARCH)


# The tests of the arithmetic -------------------------------------------------------------------


def _player(name: str, **counts: int) -> Observation:
    return Observation(name, **counts)


def _honest_draws(name: str) -> Observation:
    """A player whose stock draws bring exactly the outs their chances say (ratio 1)."""
    return _player(name, stock_draws=100, stock_outs=25, stock_expected=25 * SCALE, stock_variance=18 * SCALE)


def test_stock_outs_z_is_the_hand_computed_value() -> None:
    # Five players at ratio 1 exactly: median 1, no spread; the sixth drew 52 outs where 30 were expected.
    rows = [_honest_draws(name) for name in NAMES[1:6]]
    rows.append(
        _player(
            "ana", stock_draws=120, stock_outs=52, stock_expected=30 * SCALE, stock_variance=22 * SCALE + SCALE // 2
        )
    )
    result = {r.player: r for r in judge(rows).players}["ana"]
    (signal,) = [s for s in result.signals if s.measure == "stock_outs"]
    assert signal.expected == pytest.approx(30.0)
    assert signal.z == pytest.approx(22 / math.sqrt(22.5))
    assert [(f.signal, f.players, f.opportunities) for f in result.flags] == [(HIDDEN_KNOWLEDGE, ("ana",), 120)]


def test_the_worked_example_of_passed_closes() -> None:
    # docs/review.md: five players pass 1 close in 50 (median 0.02, under the floor 0.05).
    rows = [_player(name, close_chances=50, closes_passed=1) for name in NAMES[1:6]]
    rows.append(_player("ana", close_chances=40, closes_passed=9))
    rows.append(_player("zoe", close_chances=15, closes_passed=5))
    results = {r.player: r for r in judge(rows).players}
    soft = results["ana"].signals[0]
    assert (soft.expected, round(soft.z, 2)) == (pytest.approx(2.0), 5.08)
    assert [f.signal for f in results["ana"].flags] == [SOFT_PLAY]
    few = results["zoe"].signals[0]
    assert round(few.z, 2) == 5.03 and few.opportunities < LEAST["passed_closes"]
    assert results["zoe"].flags == ()  # past the threshold, but too few chances


def test_the_population_is_the_median_and_the_spread_beyond_chance() -> None:
    rates = [0.1, 0.2, 0.3, 0.4, 0.5]
    found = Population.of([(round(100 * r), 100) for r in rates], least=50)
    assert found.rate == pytest.approx(0.3)
    # 1.4826 × MAD (0.1), squared, less the chance variance 0.3 × 0.7 / 100.
    assert found.spread == pytest.approx((1.4826 * 0.1) ** 2 - 0.0021)
    # A cheater far out moves the median half a step and the spread by what the MAD moves: median
    # 0.35, deviations 0.25 0.15 0.05 0.05 0.15 0.6, MAD 0.15 (a standard deviation would be 0.29).
    tainted = Population.of([(round(100 * r), 100) for r in [*rates, 0.95]], least=50)
    assert tainted.rate == pytest.approx(0.35)
    assert tainted.spread == pytest.approx((1.4826 * 0.15) ** 2 - 0.35 * 0.65 / 100)
    # Too few players measured: the pooled rate, no spread.
    assert Population.of([(3, 10), (1, 10)], least=5) == Population(0.2, 0.0)


def test_a_flag_needs_the_threshold_and_the_least_opportunities() -> None:
    honest = [_player(name, close_chances=100, closes_passed=5) for name in NAMES[1:8]]
    for chances, passed, flagged in ((20, 6, True), (19, 6, False), (60, 6, False)):
        (result,) = [
            r
            for r in judge([*honest, _player("ana", close_chances=chances, closes_passed=passed)]).players
            if r.player == "ana"
        ]
        signal = result.signals[0]
        assert (signal.z >= Z_FLAG and chances >= LEAST["passed_closes"]) == flagged, (chances, signal)
        assert bool(result.flags) == flagged


def test_merging_is_a_plain_sum_in_any_order() -> None:
    rng = random.Random(5)
    rows = [
        Observation(
            rng.choice("abc"),
            rng.choice(["", "d"]),
            deals=rng.randrange(3),
            fed=rng.randrange(5),
            stock_expected=rng.randrange(10**7),
        )
        for _ in range(200)
    ]
    totals = aggregate(rows)
    for _ in range(5):
        rng.shuffle(rows)
        assert aggregate(rows) == totals
    assert sum(r.fed for r in rows) == sum(r.fed for r in totals.values())
    with pytest.raises(ValueError, match="not merged"):
        merge(Observation("a"), Observation("b"))


# A small seeded population -----------------------------------------------------------------------

# A strongly planted peeker (it never draws a top it knows useless) and a colluding pair that
# always feeds, with five honest players; each record is reviewed by two processes.
ROSTER = (
    Player("ana", Style.PEEKER, strength=1.0),
    Player("beto", Style.FEEDER, "carla", 1.0),
    Player("carla", Style.TAKER, "beto"),
    *(Player(name, Style.CAREFUL if i % 2 else Style.PLAIN) for i, name in enumerate(NAMES[3:8])),
)
DEALS = 64
_RECORDS: list[Record] = []


def _rows(index: int) -> tuple[Observation, ...]:
    record = _RECORDS[index]
    return observations(record, review_deal(record))


@pytest.fixture(scope="module")
def seeded() -> tuple[list[Record], list[tuple[Observation, ...]]]:
    _RECORDS[:] = population(11, ROSTER, DEALS, FAST)
    with get_context("fork").Pool(2) as pool:
        rows = pool.map(_rows, range(DEALS), chunksize=2)
    return list(_RECORDS), rows


def test_the_planted_cheaters_are_flagged_and_the_honest_players_are_not(seeded) -> None:
    _, rows = seeded
    results = judge([row for deal in rows for row in deal])
    flags = {(f.signal, f.players) for f in results.flags}
    assert (HIDDEN_KNOWLEDGE, ("ana",)) in flags
    assert any(signal == COLLUSION and players == ("beto", "carla") for signal, players in flags), flags
    honest = {p.name for p in ROSTER if p.style in (Style.PLAIN, Style.CAREFUL)}
    assert not [f for f in results.flags if set(f.players) & honest]


def test_the_results_do_not_depend_on_the_order_of_the_deals(seeded) -> None:
    _, rows = seeded
    flat = [row for deal in rows for row in deal]
    first = format_json(judge(flat))
    shuffled = list(flat)
    random.Random(3).shuffle(shuffled)
    halves = aggregate([*aggregate(shuffled[::2]).values(), *aggregate(shuffled[1::2]).values()])
    assert format_json(judge(shuffled)) == first == format_json(judge(halves))


def _partners(hand: list[int], index: int) -> int:
    """The simulator's partners of a card, counted by brute force: the other cards of its rank
    held, and the distinct cards of its suit held up to two ranks away (the ace both ends)."""
    if index == JOKER_INDEX:
        return 99
    rank, suit = index % RANKS_PER_SUIT, index // RANKS_PER_SUIT
    same = sum(hand[s * RANKS_PER_SUIT + rank] for s in range(4)) - (hand[index] > 0)
    near = 0
    for other in range(RANKS_PER_SUIT):
        if other == rank:
            continue
        gap = min(abs(other - rank), 13 - abs(other - rank)) if 0 in (other, rank) else abs(other - rank)
        near += gap <= 2 and hand[suit * RANKS_PER_SUIT + other] > 0
    return same + near


def test_the_peeker_draws_the_stock_top_only_when_it_helps(seeded) -> None:
    records, _ = seeded
    drew = Counter[str]()
    for record in records:
        if "ana" not in [seat.name for seat in record.seats]:
            continue
        order = record.deck_order()
        seats = len(record.seats)
        first = (record.dealer + 1) % seats
        hands = [[0] * (JOKER_INDEX + 1) for _ in range(seats)]
        for position in range(HAND * seats):
            hands[(first + position) % seats][order[position].index] += 1
        pile = [order[HAND * seats].index]
        stock = [card.index for card in reversed(order[HAND * seats + 1 :])]
        seat = first
        for turn in record.turns:
            if not stock:
                break  # after a reshuffle the peeker no longer knows the top: checked no further
            hand = hands[seat]
            if turn.draw is DrawSource.STOCK:
                card = stock.pop()
                if record.seats[seat].name == "ana":
                    # The top helped: two partners or more, or it closed the hand at once.
                    assert _partners(hand, card) >= 2 or turn.close, (record.seats, turn)
                    drew["stock"] += 1
            else:
                card = pile.pop()
                drew["pile" if record.seats[seat].name == "ana" else "other"] += 1
            hand[card] += 1
            hand[turn.discard.index] -= 1
            if turn.close:
                break
            pile.append(turn.discard.index)
            seat = (seat + 1) % seats
    assert drew["stock"] >= 10 and drew["pile"] >= 10  # not a cartoon: it draws from both


def test_plain_players_seated_by_name_play_as_the_bots_always_did() -> None:
    for seed in range(6):
        plain = simulate(seed, 4, FAST)
        seated = simulate(seed, 4, FAST, seating=[Player(seat.name) for seat in plain.seats])
        assert seated == plain
        renamed = simulate(seed, 4, FAST, seating=[Player(f"x{i}") for i in range(4)])
        assert renamed.turns == plain.turns and [s.name for s in renamed.seats] == ["x0", "x1", "x2", "x3"]


def test_players_are_spelled_and_checked() -> None:
    player = Player.parse("bo=feeder:cy@0.5")
    assert player == Player("bo", Style.FEEDER, "cy", 0.5) and Player.parse(player.spell()) == player
    for text, says in (
        ("bo", "NAME=STYLE"),
        ("bo=cheat", "the style is one of"),
        ("bo=feeder", "a partner is named"),
        ("bo=soft@2", "a strength is 0 to 1"),
        ("bo=soft@x", "a number from 0 to 1"),
    ):
        with pytest.raises(ValueError, match=says):
            Player.parse(text)


def test_ahead_reads_the_scoring_mode() -> None:
    record = simulate(2, 4, FAST)
    seats = [replace(seat, score=score) for seat, score in zip(record.seats, (100, 300, None, 50))]
    assert ahead(seats, FAST, 0, 1) and not ahead(seats, FAST, 1, 0)  # POOL: the higher is ahead
    assert not ahead(seats, FAST, 0, 2) and not ahead(seats, FAST, 2, 0)  # no score, no one ahead
    elimination = replace(FAST, scoring=ScoringRules(ScoringMode.ELIMINATION))
    assert ahead(seats, elimination, 0, 3) and not ahead(seats, elimination, 0, 1)


# The command -----------------------------------------------------------------------------------


def _lines(records: list[Record]) -> list[str]:
    return [jsonmsg.to_json(request_of(record)) for record in records]


def test_bad_lines_are_named_and_left_out(seeded, tmp_path: Path) -> None:
    records, _ = seeded
    good = _lines(records[:1])[0]
    case = json.dumps({"id": "c1", "record": json.loads(good)})
    bad_card = good.replace('"discard":"', '"discard":"ZZ', 1)
    path = tmp_path / "records.jsonl"
    path.write_text(
        "\n".join(["not json", case, '{"record":{"turns":[{"draw":"X"}]}}', bad_card, "[1]", ""]), encoding="utf-8"
    )
    done = cli("fairplay", "--json", str(path))
    assert done.returncode == 3, done.stderr
    errors = done.stderr.splitlines()
    assert [e.split(": ")[1] for e in errors] == [f"{path}:{n}" for n in (1, 3, 4, 5)], errors
    assert "not JSON" in errors[0] and "turns[0].draw" in errors[1] and "discard" in errors[2]
    players = [json.loads(line) for line in done.stdout.splitlines() if "player" in json.loads(line)]
    assert sorted(p["player"] for p in players) == sorted(seat.name for seat in records[0].seats)
    assert all(p["deals"] == 1 for p in players)


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = cli("fairplay", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert cli("fairplay", "--jobs", "0", str(tmp_path)).returncode == 2


def test_the_command_as_a_process_gives_the_same_bytes_whatever_the_order_and_the_jobs(seeded, tmp_path: Path) -> None:
    records, _ = seeded
    lines = _lines(records[:4])
    forward, backward = tmp_path / "forward.jsonl", tmp_path / "backward.jsonl"
    forward.write_text("\n".join(lines) + "\n", encoding="utf-8")
    backward.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    one = cli_process("fairplay", "--json", "--jobs", "1", str(forward))
    two = cli_process("fairplay", "--json", "--jobs", "2", str(backward))
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout
    out = [json.loads(line) for line in one.stdout.splitlines()]
    players = [o for o in out if "player" in o]
    assert [p["player"] for p in players] == sorted({seat.name for r in records[:4] for seat in r.seats})
    assert set(players[0]) == {"player", "deals", "decisions", "accuracy", "signals", "flags"}
    assert sum(p["deals"] for p in players) == 16
    text = cli_process("fairplay", "-", stdin=forward.read_text(encoding="utf-8"))
    assert text.returncode == 0 and "flags:" in text.stdout and "HIDDEN_KNOWLEDGE" in text.stdout


def test_a_worker_killed_mid_run_is_replaced_and_the_results_are_the_same(seeded, tmp_path: Path) -> None:
    # A review worker killed (the out-of-memory killer's SIGKILL) hung the run; now it is
    # replaced, the records it held reviewed again, and the results are a clean run's bytes.
    import os
    import signal
    import subprocess
    import sys
    import time

    from commands import ROOT
    from servers import descendants

    records, _ = seeded
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(_lines(records[:16])) + "\n", encoding="utf-8")
    run = subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "fairplay", "--json", "--jobs", "2", str(path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and run.poll() is None and len(descendants(run.pid)) < 2:
        time.sleep(0.02)
    time.sleep(0.3)  # the workers are reviewing their first records
    os.kill(descendants(run.pid)[0], signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    assert "a worker process ended abruptly" in stderr, stderr
    clean = cli_process("fairplay", "--json", "--jobs", "2", str(path))
    assert clean.returncode == 0, clean.stderr
    assert stdout == clean.stdout
