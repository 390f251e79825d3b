"""Benchmark of reviewing deal records turn by turn (``referee.play.review.review_deal``).

Run from the repository root::

    python -m bench.review                 # default run (about a minute on a quiet core)
    python -m bench.review --quick         # a short run

The records come from ``referee.play.simulate`` with fixed seeds (four seats, the bots close; seeded
shuffles), so two runs time the same deals. A review replays the record, then for every turn
measures the seat's hand before the draw, the 11 cards after it (every throw), the face-up card's
alternative, and the same omnisciently; the caches of measures and of core sets are emptied
before each deal (``forget_measures``), so each deal is timed cold; the tables that depend on no
hand (the ways to complete a core, the groups drawn whole) stay built, as in a running process.

Each record is timed ``--repeat`` times, with the garbage collector off while timing; the median,
the p90 and the minimum are over all timings, in CPU time of this process (the machine is shared).
The target is a median under 50 ms per deal; a missed target is reported, not a failure.
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
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/review.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import load_average  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402
from referee.play.record import Record  # noqa: E402
from referee.play.review import forget_measures, review_deal  # noqa: E402
from referee.play.simulate import simulate  # noqa: E402

SEED = 20261201
PLAYERS = 4
DEAL_MEDIAN_MS = 50.0  # the target: one four-seat deal reviewed


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def timings(records: Sequence[Record], repeat: int) -> list[float]:
    """CPU seconds per review of each record, ``repeat`` passes over the records, each cold."""
    out: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for record in records:
                forget_measures()
                start = time.process_time()
                review_deal(record)
                out.append(time.process_time() - start)
    finally:
        gc.enable()
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.review", description="Benchmark the review of deals.")
    parser.add_argument("--count", type=int, default=40, help="records (default 40)")
    parser.add_argument("--repeat", type=int, default=3, help="timings of each record (default 3)")
    parser.add_argument("--quick", action="store_true", help="10 records, 1 timing each")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    count, repeat = (10, 1) if args.quick else (args.count, args.repeat)
    rules = RuleSet(engine=Engine.SEARCH)
    started = time.perf_counter()
    records = [simulate(SEED + i, PLAYERS, rules) for i in range(count)]
    review_deal(records[0])  # build the tables that depend on no hand
    values = timings(records, repeat)
    turns = [len(record.turns) for record in records]
    per_turn = [value / len(record.turns) for value, record in zip(values, records * repeat)]
    median = statistics.median(values) * 1e3
    verdict = "target met" if median < DEAL_MEDIAN_MS else f"TARGET MISSED ({DEAL_MEDIAN_MS:.0f} ms)"
    print(f"review benchmark: {count} four-seat deals, {repeat} timings each, seed {SEED}")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"cpu count {os.cpu_count()}, {platform.machine()} {platform.system()}"
    )
    print(f"turns per deal: median {statistics.median(turns):.0f}, min {min(turns)}, max {max(turns)}")
    print()
    print(f"{'CPU ms':<28} {'median':>9} {'p90':>9} {'min':>9}")
    print(f"{'per deal':<28} {median:9.1f} {percentile(values, 90) * 1e3:9.1f} {min(values) * 1e3:9.1f}  {verdict}")
    print(
        f"{'per turn':<28} {statistics.median(per_turn) * 1e3:9.2f} "
        f"{percentile(per_turn, 90) * 1e3:9.2f} {min(per_turn) * 1e3:9.2f}"
    )
    print()
    print(f"load average (1/5/15 min) at the end: {load_average()}; total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
