"""Benchmark of replaying deal records: the replay's own checks, and whole records scored.

Run from the repository root::

    python -m bench.replay                 # default run (a few seconds on 2 cores)
    python -m bench.replay --quick         # a short run

The records come from ``referee.play.simulate`` with fixed seeds, so two runs time the same records.

- **The checks**: records of 4 players and exactly 80 turns (the bots never close), with an
  explicit deck and with a seeded shuffle (``remigio-shuffle-v1``: the deal's 108-card shuffle is
  part of the work). ``referee.play.replay.replay`` on such a record does everything but the close
  check and the scoring: the record's checks, the deal, every turn's checks. Target: median under
  0.3 ms.
- **Whole records**: complete records of 4 players (the bots close; seeded shuffles), replayed and
  the end state scored with ``referee.game.scoring.score_deal``, with the search engine; the cache of
  best linkings is cleared before each record (the search engine keeps its own caches of parts of
  hands, as in a running server).
- **Simulation**: how fast the bots make records (the source of the tests' records).

Each record is timed ``--repeat`` times, one timing per pass over all the records, with the
garbage collector off while timing; the median and the p99 are over all timings. A missed target
is reported, not a failure; a record that does not replay legal makes the exit status 1.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/replay.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import load_average  # noqa: E402
from referee.game.linking import forget_linkings  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402
from referee.game.scoring import score_deal  # noqa: E402
from referee.play.record import Record  # noqa: E402
from referee.play.replay import replay  # noqa: E402
from referee.play.simulate import simulate  # noqa: E402

SEED = 20261201
PLAYERS = 4
TURNS = 80
CHECKS_MEDIAN_MS = 0.3  # the target: the replay's own checks of an 80-turn 4-player record


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def timings(
    records: Sequence[Record], work: Callable[[Record], object], repeat: int, before: Callable[[], None]
) -> list[float]:
    """Seconds per call of ``work`` on each record, ``repeat`` passes over the records."""
    out: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for record in records:
                before()
                start = time.perf_counter()
                work(record)
                out.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return out


def nothing() -> None:
    """Nothing to do before a call."""


def clear_linking_caches() -> None:
    """Forget every hand solved, so that each record's hands are solved again."""
    forget_linkings()


def row(name: str, values: Sequence[float], target: float | None = None) -> str:
    median = statistics.median(values) * 1e3
    verdict = "" if target is None else ("  target met" if median < target else f"  TARGET MISSED ({target} ms)")
    return f"{name:<44} {median:9.3f} {percentile(values, 99) * 1e3:9.3f} {min(values) * 1e3:9.3f}{verdict}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description="Benchmark the replay of deal records.")
    parser.add_argument("--count", type=int, default=200, help="records of each kind (default 200)")
    parser.add_argument("--repeat", type=int, default=20, help="timings of each record (default 20)")
    parser.add_argument("--quick", action="store_true", help="50 records, 5 timings each")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    count, repeat = (50, 5) if args.quick else (args.count, args.repeat)
    rules = RuleSet(engine=Engine.SEARCH)
    started = time.perf_counter()

    made = time.process_time()
    explicit = [simulate(SEED + i, PLAYERS, rules, seeded=False, closing=False, max_turns=TURNS) for i in range(count)]
    seeded = [simulate(SEED + i, PLAYERS, rules, seeded=True, closing=False, max_turns=TURNS) for i in range(count)]
    complete = [simulate(SEED + i, PLAYERS, rules, seeded=True) for i in range(count)]
    made = time.process_time() - made

    problems = []
    reshuffled = 0
    for record in explicit + seeded + complete:
        result = replay(record)
        reshuffled += result.reshuffles > 0
        if not result.legal:
            problems.append(f"record not legal: {result.violation}")
    assert all(len(record.turns) == TURNS for record in explicit + seeded)
    closed = [record for record in complete if record.turns[-1].close]

    def scored(record: Record) -> object:
        result = replay(record)
        assert result.deal is not None
        return score_deal(result.deal, record.rules)

    print(f"replay benchmark: {count} records of each kind, {repeat} timings each, seed {SEED}")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"cpu count {os.cpu_count()}, {platform.machine()} {platform.system()}"
    )
    print(f"records that reshuffle at least once: {reshuffled}; simulated deals closed: {len(closed)} of {count}")
    print(f"simulation: {3 * count / made:,.0f} records/s ({made / (3 * count) * 1e3:.2f} ms CPU per record)")
    print()
    print(f"{'ms per record':<44} {'median':>9} {'p99':>9} {'min':>9}")
    print(
        row(
            f"checks, {TURNS} turns, {PLAYERS} players, explicit deck",
            timings(explicit, replay, repeat, nothing),
            CHECKS_MEDIAN_MS,
        )
    )
    print(
        row(
            f"checks, {TURNS} turns, {PLAYERS} players, seeded shuffle",
            timings(seeded, replay, repeat, nothing),
            CHECKS_MEDIAN_MS,
        )
    )
    whole = timings(closed, scored, max(1, repeat // 4), clear_linking_caches)
    turns = statistics.mean(len(record.turns) for record in closed)
    print(row(f"complete, replayed and scored ({turns:.0f} turns avg)", whole))
    print()
    print(f"load average (1/5/15 min) at the end: {load_average()}; total {time.perf_counter() - started:.0f} s")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
