"""Benchmark of the search engine's best linking on hands it has not seen, two builds in one process.

Run from the repository root::

    python -m bench.linking                          # this build alone
    python -m bench.linking --baseline ../other-checkout

A batch worker or a server meets a stream of hands it has not seen, with its tables and its
caches of parts of hands warm from the hands before. So each build first solves ``--warm-up``
hands (default 4,000) of ``bench.hands.end_of_deal`` (one seed), then the same ``--count`` other
hands (default 8,000, another seed) in chunks of 500, the builds taking turns going first on each
chunk; no hand is solved twice by one build. The figure is the CPU time per hand (the process's,
which a busy machine disturbs less than the wall clock), the total over the chunks, and the
median of the chunks' ratios.

With ``--baseline DIR`` the other build's ``referee/game/linking/search.py`` is loaded under another
name beside this one's: the two engine modules differ, everything they import (cards, rules,
``linking_from_parts``) is this build's. The answers of the two are compared hand by hand: a
difference is printed and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.hands import Hand, end_of_deal  # noqa: E402
from bench.machine import load_average  # noqa: E402
from referee.game.linking import search  # noqa: E402
from referee.game.linking.base import Linking  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402

WARM_UP_SEED = 20261204
SEED = 20261205
CHUNK = 500
RULES = RuleSet(engine=Engine.SEARCH)


def engine_module(checkout: Path) -> ModuleType:
    """The search engine module of another checkout, loaded under its own name."""
    path = checkout / "referee" / "game" / "linking" / "search.py"
    spec = importlib.util.spec_from_file_location("baseline_search", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no search engine at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solve(module: ModuleType, hands: Sequence[Hand]) -> tuple[float, list[Linking]]:
    """CPU seconds for the best linking of each hand, and the linkings."""
    engine = module.SearchEngine()
    start = time.process_time()
    answers = [engine.best_linking(hand, RULES) for hand in hands]
    return time.process_time() - start, answers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.linking", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=8_000, help="hands timed (default 8,000)")
    parser.add_argument("--warm-up", type=int, default=4_000, help="hands solved first (default 4,000)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose search engine is timed beside")
    args = parser.parse_args(argv)
    builds: dict[str, ModuleType] = {"this": search}
    if args.baseline:
        builds["baseline"] = engine_module(args.baseline.resolve())
    print(f"load average at the start: {load_average()}")
    warm = end_of_deal(WARM_UP_SEED, args.warm_up)
    hands = end_of_deal(SEED, args.count)
    for module in builds.values():
        solve(module, warm)
    times: dict[str, list[float]] = {name: [] for name in builds}
    answers: dict[str, list[Linking]] = {name: [] for name in builds}
    gc.disable()
    try:
        for n, first in enumerate(range(0, len(hands), CHUNK)):
            chunk = hands[first : first + CHUNK]
            order = list(builds) if n % 2 == 0 else list(builds)[::-1]
            for name in order:
                seconds, linkings = solve(builds[name], chunk)
                times[name].append(seconds)
                answers[name].extend(linkings)
    finally:
        gc.enable()
    print(f"{args.count:,} end-of-deal hands not seen before ({args.warm_up:,} others first), search engine")
    for name in builds:
        print(f"{name:<9} {sum(times[name]) / len(hands) * 1e6:7.1f} us of CPU per hand")
    status = 0
    if args.baseline:
        ratios = [a / b for a, b in zip(times["this"], times["baseline"])]
        total = sum(times["this"]) / sum(times["baseline"])
        print(f"this / baseline: {total:.3f} the CPU (median of the chunks' ratios {statistics.median(ratios):.3f})")
        differ = [i for i, (a, b) in enumerate(zip(answers["this"], answers["baseline"])) if a != b]
        print("answers: " + ("all identical" if not differ else f"{len(differ)} DIFFER, the first hand {differ[0]}"))
        status = 1 if differ else 0
    print(f"load average at the end: {load_average()}")
    return status


if __name__ == "__main__":
    sys.exit(main())
