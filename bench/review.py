"""Benchmark of reviewing deal records turn by turn (``referee.play.review.review_deal``).

Run from the repository root::

    python -m bench.review                 # default run (about a minute on a quiet core)
    python -m bench.review --quick         # a short run
    python -m bench.review --baseline DIR  # this build and the checkout in DIR, back to back
    python -m bench.review --python-baseline  # this build, its measure compiled and as Python

The records come from ``referee.play.simulate`` with fixed seeds (four seats, the bots close; seeded
shuffles), so two runs time the same deals. A review replays the record, then for every turn
measures the seat's hand before the draw, the 11 cards after it (every throw), the face-up card's
alternative, and the same omnisciently; the caches of measures and of core sets are emptied
before each deal (``forget_measures``), so each deal is timed cold; the tables that depend on no
hand (the ways to complete a core, the groups drawn whole) stay built, as in a running process:
20 deals of other seeds are reviewed before the clock starts.

Each record is timed ``--repeat`` times, with the garbage collector off while timing; the median,
the p90 and the minimum are over all timings, in CPU time of this process (the machine is shared).
The target is a median under 50 ms per deal; a missed target is reported, not a failure. The
measure is the compiled one where ``make compile`` has built it for these sources
(``referee.game.compiled``); the report says which ran.

With ``--baseline DIR`` (another checkout, e.g. a ``git worktree`` of an older commit) both builds
are timed in child processes, each importing its own ``referee``, by turns: each pass over the
records is timed once for the baseline and once for this build, one after the other, so that load
on a shared machine falls on both alike; the ratio of the medians is printed. The child's code uses
only what every build has (``simulate``, ``review_deal``, ``forget_measures``).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/review.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import load_average  # noqa: E402
from referee.game import compiled  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402
from referee.play.record import Record  # noqa: E402
from referee.play.review import forget_measures, review_deal  # noqa: E402
from referee.play.simulate import simulate  # noqa: E402

SEED = 20261201
PLAYERS = 4
DEAL_MEDIAN_MS = 50.0  # the target: one four-seat deal reviewed
# Deals of other seeds reviewed before the clock starts, so the tables that depend on no hand are
# built as in a process that has reviewed a few deals already (one deal left most of them to the
# first timed pass, which then timed their making).
WARM_UP = 20
WARM_SEEDS = 100_000
ROOT = Path(__file__).resolve().parents[1]
# One pass over the records, in a child process whose ``referee`` is the checkout it runs in
# (argv: count, seed, players, the deals of the warm-up and their first seed); CPU seconds of each
# review, one a line.
CHILD = """
import gc, sys, time
from referee.game.rules import Engine, RuleSet
from referee.play.review import forget_measures, review_deal
from referee.play.simulate import simulate
count, seed, players = (int(a) for a in sys.argv[1:4])
WARM_UP, WARM_SEEDS = (int(a) for a in sys.argv[4:6])
try:  # a build with a compiled measure says whether it is the one imported
    from referee.game import compiled
    import referee.play.measure
    print("# measure", "compiled" if compiled.active().get("referee.play.measure") else "python")
except ImportError:
    print("# measure python")
records = [simulate(seed + i, players, RuleSet(engine=Engine.SEARCH)) for i in range(count)]
for warm in range(WARM_UP):
    review_deal(simulate(seed + WARM_SEEDS + warm, players, RuleSet(engine=Engine.SEARCH)))
gc.collect()
gc.disable()
for record in records:
    forget_measures()
    start = time.process_time()
    review_deal(record)
    print(time.process_time() - start)
"""


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


def child_timings(root: Path, count: int, extra: dict[str, str] | None = None) -> tuple[str, list[float]]:
    """One pass over the first ``count`` records, reviewed by the checkout at ``root`` (with the
    environment ``extra``): whether its measure is compiled, and the timings."""
    env = {**os.environ, "PYTHONPATH": str(root), **(extra or {})}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(count), str(SEED), str(PLAYERS), str(WARM_UP), str(WARM_SEEDS)],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    kind = next((line.split()[-1] for line in out if line.startswith("#")), "python")
    return kind, [float(line) for line in out if line and not line.startswith("#")]


def compare(baseline: Path | None, count: int, repeat: int) -> int:
    """Both builds timed by turns, ``repeat`` passes each; the medians and their ratio. With no
    baseline, this build's measure as Python is the baseline (``REMIGIO_COMPILED=0``)."""
    started = time.perf_counter()
    builds: dict[str, tuple[Path, dict[str, str]]] = {
        "baseline": (baseline.resolve(), {}) if baseline is not None else (ROOT, {"REMIGIO_COMPILED": "0"}),
        "this build": (ROOT, {}),
    }
    values: dict[str, list[float]] = {name: [] for name in builds}
    kinds: dict[str, str] = {}
    for _ in range(repeat):
        for name, (root, extra) in builds.items():
            kinds[name], got = child_timings(root, count, extra)
            values[name] += got
    print(f"review benchmark, two builds: {count} four-seat deals, {repeat} passes each by turns, seed {SEED}")
    print(f"baseline: {baseline or 'this build, REMIGIO_COMPILED=0'}")
    print(f"measure: baseline {kinds['baseline']}, this build {kinds['this build']}")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"cpu count {os.cpu_count()}, {platform.machine()} {platform.system()}"
    )
    print()
    print(f"{'CPU ms per deal':<28} {'median':>9} {'p90':>9} {'min':>9}")
    for name, got in values.items():
        median = statistics.median(got) * 1e3
        verdict = "target met" if median < DEAL_MEDIAN_MS else f"TARGET MISSED ({DEAL_MEDIAN_MS:.0f} ms)"
        print(f"{name:<28} {median:9.1f} {percentile(got, 90) * 1e3:9.1f} {min(got) * 1e3:9.1f}  {verdict}")
    ratio = statistics.median(values["baseline"]) / statistics.median(values["this build"])
    print(f"{'baseline / this build':<28} {ratio:9.2f}x (medians)")
    print()
    print(f"load average (1/5/15 min) at the end: {load_average()}; total {time.perf_counter() - started:.0f} s")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.review", description="Benchmark the review of deals.")
    parser.add_argument("--count", type=int, default=40, help="records (default 40)")
    parser.add_argument("--repeat", type=int, default=3, help="timings of each record (default 3)")
    parser.add_argument("--quick", action="store_true", help="10 records, 1 timing each")
    parser.add_argument("--baseline", type=Path, help="a checkout of another build, timed by turns with this one")
    parser.add_argument(
        "--python-baseline",
        action="store_true",
        help="this build with its measure as Python (REMIGIO_COMPILED=0), timed by turns with this one",
    )
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "referee" / "play" / "review.py").is_file():
        parser.error(f"--baseline: no referee checkout with a review in {args.baseline}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    count, repeat = (10, 1) if args.quick else (args.count, args.repeat)
    if args.baseline is not None or args.python_baseline:
        return compare(args.baseline, count, repeat)
    rules = RuleSet(engine=Engine.SEARCH)
    started = time.perf_counter()
    records = [simulate(SEED + i, PLAYERS, rules) for i in range(count)]
    for warm in range(WARM_UP):  # build the tables that depend on no hand, as a running process has them
        review_deal(simulate(SEED + WARM_SEEDS + warm, PLAYERS, rules))
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
    print(f"measure: {'compiled' if compiled.active().get('referee.play.measure') else 'python'} (make compile)")
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
