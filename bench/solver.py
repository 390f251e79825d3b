"""Benchmark of the linking engines: best linking of 10 cards and best close of 11.

Run from the repository root::

    python -m bench.solver                  # default run (about two minutes on 2 cores)
    python -m bench.solver --quick          # a short run
    python -m bench.solver --engines cpsat --count 500

For each hand family (``bench.hands``) and each engine it prints the median and p99 time per
hand of

- best linking of 10 cards, calling the engine object directly (the ``lru_cache`` in
  ``referee.game.linking.best_linking`` would otherwise hide the cost);
- best close of 11 cards through ``referee.game.closing.best_close`` (which goes through the cached
  ``best_linking``; the cache is cleared before every hand, never inside one),

each hand timed cold: the ``functools`` caches an engine's own modules keep (the search engine
memoises whole hands and components, the CP-SAT engine the candidate groups of a rank's or a
suit's holding) are cleared before every hand too, unless
``--keep-engine-caches`` asks for the steady state of a long-running server. The hands of a family
are distinct, so a repeated hand never times a cache hit either.

the ratio cpsat/search of the medians, and the targets next to the figures. The
hands come from fixed seeds, so two runs time the same hands. When two or more engines run, their
answers are compared hand by hand; a disagreement is printed and makes the exit status 1 (a
missed timing target does not).
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
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/solver.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.hands import FAMILIES, Hand  # noqa: E402
from bench.machine import load_average  # noqa: E402
from referee.game.cards import format_cards, sort_cards  # noqa: E402
from referee.game.closing import best_close, forget_verdicts  # noqa: E402
from referee.game.linking import engine_for, forget_linkings  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402

SEED = 20240601
DEFAULT_COUNT = 300
QUICK_COUNT = 40
WARMUP_HANDS = 10

# The targets.
LINK_MEDIAN_END_OF_DEAL_MS = 1.0  # cpsat, best linking, end-of-deal hands, median
LINK_P99_ADVERSARIAL_MS = 5.0  # cpsat, best linking, adversarial hands, p99
CLOSE_MEDIAN_MS = 5.0  # best close of 11, median
SEARCH_SPEEDUP = 10.0  # cpsat median / search median, best linking, end-of-deal hands
SEARCH_P99_ADVERSARIAL_MS = 1.0  # search, best linking, adversarial hands, p99


@dataclass
class Figures:
    """Times (ns) per hand of one engine on one family, and the answers to compare engines."""

    link_ns: list[int] = field(default_factory=list)
    close_ns: list[int] = field(default_factory=list)
    link_answers: list[object] = field(default_factory=list)
    close_answers: list[object] = field(default_factory=list)


def percentile(values: Sequence[int], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def ms(ns: float) -> float:
    return ns / 1e6


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.3f}"
    if value < 1000:
        return f"{value:.1f}"
    return f"{value:.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"


def available_engines() -> list[str]:
    return [engine.value for engine in Engine]


def default_engines() -> list[str]:
    return ["cpsat", "search"] if "search" in available_engines() else ["cpsat"]


def engine_caches(engine_name: str) -> list[tuple[str, Callable[[], None]]]:
    """The ``functools`` caches at the top level of the engine's own modules: (name, cache_clear).

    Its own modules: the engine's module and the ``referee.game.linking`` modules it takes functions
    from (the CP-SAT engine's candidate groups), but not ``base``, which every engine shares.
    """
    names = [type(engine_for(RuleSet(engine=engine_name))).__module__]
    for name in names:  # grows as it goes: the modules those modules take functions from, too
        for value in vars(sys.modules[name]).values():
            owner = getattr(value, "__module__", None) if callable(value) else None
            if (
                owner
                and owner.startswith("referee.game.linking.")
                and owner not in (*names, "referee.game.linking.base")
            ):
                names.append(owner)
    found = []
    for name in names:
        for attr, value in sorted(vars(sys.modules[name]).items()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                found.append((f"{name.rsplit('.', 1)[-1]}.{attr}", clear))
    return found


KEEP_ENGINE_CACHES = False
REPEAT = 1  # time each hand this many times (caches cleared each time) and keep the fastest


def _clear_engine_caches(engine_name: str) -> Callable[[], None]:
    clears = [] if KEEP_ENGINE_CACHES else [clear for _, clear in engine_caches(engine_name)]

    def clear_all() -> None:
        for clear in clears:
            clear()

    return clear_all


def time_links(engine_name: str, hands: Sequence[Hand], figures: Figures) -> None:
    """Best linking of every hand, the engine object called directly."""
    engine = engine_for(RuleSet(engine=engine_name))
    rules = RuleSet(engine=engine_name)
    clock = time.perf_counter_ns
    clear_engine = _clear_engine_caches(engine_name)
    for hand in hands:
        cards = sort_cards(hand)
        best = None
        for _ in range(REPEAT):
            clear_engine()
            start = clock()
            linking = engine.best_linking(cards, rules)
            took = clock() - start
            best = took if best is None else min(best, took)
        figures.link_ns.append(best)
        figures.link_answers.append((linking.points, tuple(g.key for g in linking.groups)))


def time_closes(engine_name: str, hands: Sequence[Hand], figures: Figures) -> None:
    """Best close of every 11-card hand, the linking cache cleared before each."""
    rules = RuleSet(engine=engine_name)
    clock = time.perf_counter_ns
    clear = forget_linkings
    clear_engine = _clear_engine_caches(engine_name)
    for hand in hands:
        best = None
        for _ in range(REPEAT):
            clear()
            clear_engine()
            forget_verdicts()  # a repeated close would be a lookup of its verdict
            start = clock()
            close = best_close(hand, rules)
            took = clock() - start
            best = took if best is None else min(best, took)
        figures.close_ns.append(best)
        figures.close_answers.append((close.valid, close.kind, close.multiplier, close.discard, close.linking.points))
    clear()


def warm_up(engines: Sequence[str], families: dict[str, tuple[list[Hand], list[Hand]]]) -> None:
    """Import, JIT-free but cache-warm: a few untimed linkings and closes per engine and family."""
    for name in engines:
        for tens, elevens in families.values():
            time_links(name, tens[:WARMUP_HANDS], Figures())
            time_closes(name, elevens[: max(1, WARMUP_HANDS // 2)], Figures())


def run(engines: Sequence[str], count: int, progress: Callable[[str], None]) -> dict[str, dict[str, Figures]]:
    hands: dict[str, tuple[list[Hand], list[Hand]]] = {}
    for n, (family, make) in enumerate(FAMILIES.items()):
        hands[family] = (make(SEED + 2 * n, count, 10), make(SEED + 2 * n + 1, count, 11))
    warm_up_hands = {
        family: (make(SEED - 1 - 2 * n, WARMUP_HANDS, 10), make(SEED - 2 - 2 * n, WARMUP_HANDS, 11))
        for n, (family, make) in enumerate(FAMILIES.items())
    }
    progress(f"warm-up (load average {load_average()})")
    warm_up(engines, warm_up_hands)

    results: dict[str, dict[str, Figures]] = {family: {} for family in hands}
    for family, (tens, elevens) in hands.items():
        for name in engines:
            figures = Figures()
            progress(f"{family} / {name}: best linking of {len(tens)} hands")
            gc.collect()
            time_links(name, tens, figures)
            progress(f"{family} / {name}: best close of {len(elevens)} hands")
            gc.collect()
            time_closes(name, elevens, figures)
            results[family][name] = figures
    return results


def disagreements(results: dict[str, dict[str, Figures]], count: int) -> list[str]:
    """Hands where engines disagree, for the report."""
    lines = []
    for family, by_engine in results.items():
        names = list(by_engine)
        if len(names) < 2:
            continue
        first = by_engine[names[0]]
        for other in names[1:]:
            theirs = by_engine[other]
            for what, mine, them in (
                ("linking", first.link_answers, theirs.link_answers),
                ("close", first.close_answers, theirs.close_answers),
            ):
                bad = [i for i, (a, b) in enumerate(zip(mine, them)) if a != b]
                if bad:
                    size = 10 if what == "linking" else 11
                    sample = FAMILIES[family](SEED + 2 * list(FAMILIES).index(family) + (size == 11), count, size)
                    lines.append(
                        f"  {family}: {names[0]} and {other} disagree on {len(bad)} {what}(s), "
                        f"first: {format_cards(sample[bad[0]])}"
                    )
    return lines


def report(results: dict[str, dict[str, Figures]], engines: Sequence[str], count: int, elapsed: float) -> str:
    out: list[str] = []
    out.append("Remigio referee: linking engine benchmark")
    out.append(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"cpu count {os.cpu_count()}, {platform.machine()} {platform.system()}"
    )
    out.append(f"load average (1/5/15 min) at the end: {load_average()}")
    out.append(
        f"engines: {', '.join(engines)} (available: {', '.join(available_engines())}); "
        f"{count} hands per family and task; seed {SEED}; times per hand in ms"
        + (f", fastest of {REPEAT} runs" if REPEAT > 1 else "")
    )
    for name in engines:
        caches = ", ".join(cache for cache, _ in engine_caches(name))
        if caches:
            how = "kept across hands" if KEEP_ENGINE_CACHES else "cleared before every hand"
            out.append(f"{name} engine caches ({caches}): {how}")
    out.append("")
    header = (
        f"{'family':<14}{'engine':<8}{'link med':>10}{'link p99':>10}{'link max':>10}"
        f"{'close med':>11}{'close p99':>11}{'close max':>11}"
    )
    out.append(header)
    out.append("-" * len(header))
    for family, by_engine in results.items():
        for name in engines:
            f = by_engine[name]
            out.append(
                f"{family:<14}{name:<8}"
                f"{fmt_ms(ms(statistics.median(f.link_ns))):>10}"
                f"{fmt_ms(ms(percentile(f.link_ns, 99))):>10}"
                f"{fmt_ms(ms(max(f.link_ns))):>10}"
                f"{fmt_ms(ms(statistics.median(f.close_ns))):>11}"
                f"{fmt_ms(ms(percentile(f.close_ns, 99))):>11}"
                f"{fmt_ms(ms(max(f.close_ns))):>11}"
            )
    out.append("")

    def median(family: str, name: str, what: str) -> float | None:
        f = results[family].get(name)
        if f is None:
            return None
        return ms(statistics.median(f.link_ns if what == "link" else f.close_ns))

    def p99(family: str, name: str, what: str) -> float | None:
        f = results[family].get(name)
        if f is None:
            return None
        return ms(percentile(f.link_ns if what == "link" else f.close_ns, 99))

    def ratio(family: str, what: str) -> float | None:
        a, b = median(family, "cpsat", what), median(family, "search", what)
        return None if a is None or b is None or b == 0 else a / b

    header = f"{'cpsat/search (medians)':<24}{'link':>10}{'close':>10}"
    out.append(header)
    out.append("-" * len(header))
    for family in results:
        out.append(f"{family:<24}{fmt_ratio(ratio(family, 'link')):>10}{fmt_ratio(ratio(family, 'close')):>10}")
    out.append("")

    rows: list[tuple[str, str, str, str]] = []

    def goal_text(goal: float, below: bool, unit: str) -> str:
        return f"{'<' if below else '>='} {goal:g}{'' if unit == 'x' else ' '}{unit}"

    def check(target: str, value: float | None, goal: float, below: bool, unit: str = "ms") -> None:
        if value is None:
            rows.append((target, "-", goal_text(goal, below, unit), "n/a"))
            return
        ok = value < goal if below else value >= goal
        shown = fmt_ms(value) + " ms" if unit == "ms" else fmt_ratio(value)
        rows.append((target, shown, goal_text(goal, below, unit), "PASS" if ok else "FAIL"))

    check("cpsat link median, end_of_deal", median("end_of_deal", "cpsat", "link"), LINK_MEDIAN_END_OF_DEAL_MS, True)
    check("cpsat link p99, adversarial", p99("adversarial", "cpsat", "link"), LINK_P99_ADVERSARIAL_MS, True)
    for name in ("cpsat", "search"):
        for family in results:
            check(f"{name} close-11 median, {family}", median(family, name, "close"), CLOSE_MEDIAN_MS, True)
    check("cpsat/search link median, end_of_deal", ratio("end_of_deal", "link"), SEARCH_SPEEDUP, False, "x")
    check("search link p99, adversarial", p99("adversarial", "search", "link"), SEARCH_P99_ADVERSARIAL_MS, True)

    header = f"{'target':<42}{'figure':>12}{'goal':>12}    verdict"
    out.append(header)
    out.append("-" * len(header))
    for target, shown, goal, verdict in rows:
        out.append(f"{target:<42}{shown:>12}{goal:>12}    {verdict:<6}".rstrip())
    if "search" not in engines:
        out.append(
            "(search targets n/a: the search engine was not run"
            + ("" if "search" in available_engines() else ", it is not registered in referee.game.linking.dispatch")
            + ")"
        )
    out.append("")

    lines = disagreements(results, count)
    if len(engines) > 1:
        out.append("engine agreement: " + ("all answers identical" if not lines else "DISAGREEMENTS"))
        out.extend(lines)
    out.append(f"total run time {elapsed:.1f} s")
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.solver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"a short run ({QUICK_COUNT} hands per family)")
    parser.add_argument("--count", type=int, help=f"hands per family and task (default {DEFAULT_COUNT})")
    parser.add_argument(
        "--engines",
        help="comma-separated engines (default: cpsat,search when search is registered, else cpsat)",
    )
    parser.add_argument(
        "--keep-engine-caches",
        action="store_true",
        help="keep the engines' own caches across hands (a long-running server's steady state)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time each hand this many times and keep the fastest (less noise on a busy machine)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.engines:
        args.engine_list = [e.strip() for e in args.engines.split(",") if e.strip()]
        unknown = [e for e in args.engine_list if e not in available_engines()]
        if unknown:
            parser.error(f"unknown engine(s) {', '.join(unknown)}; registered: {', '.join(available_engines())}")
    else:
        args.engine_list = default_engines()
    if args.count is None:
        args.count = QUICK_COUNT if args.quick else DEFAULT_COUNT
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.count < 1:
        parser.error("--count must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global KEEP_ENGINE_CACHES, REPEAT
    args = parse_args(argv)
    KEEP_ENGINE_CACHES = args.keep_engine_caches
    REPEAT = args.repeat
    started = time.perf_counter()

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    results = run(args.engine_list, args.count, progress)
    print(report(results, args.engine_list, args.count, time.perf_counter() - started))
    # Timing misses are reported, not failures; engines disagreeing is a bug.
    return 1 if disagreements(results, args.count) else 0


if __name__ == "__main__":
    sys.exit(main())
