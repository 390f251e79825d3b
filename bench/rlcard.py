"""Benchmark of the search engine against RLCard's gin rummy melding on hands both games score alike.

Run from the repository root, with the ``bench`` extra installed (``make bench-extra``; ``make
bench`` runs it then)::

    python -m bench.rlcard                  # 1,500 hands, 5 rounds (a few seconds on 2 cores)
    python -m bench.rlcard --quick          # 200 hands, 3 rounds

RLCard (``rlcard.games.gin_rummy.utils.melding.get_best_meld_clusters``) finds a gin rummy hand's
melds with the least deadwood; the referee's library call (``referee.game.linking.best_linking``, the
search engine) a Remigio hand's groups with the fewest unlinked points, then the fewest groups.
The two count a card's points alike (ace 1, 2-10 face value, J Q K 10) and agree on what links,
except that Remigio's runs may put the ace above the king. So the hands here are
*gin-compatible*: 10 cards from one 52-card deck (no joker, no card twice) in which no suit holds
its queen, king and ace together. With no Q-K-A, a Remigio group of these cards is exactly a gin
rummy meld (3 or 4 of a rank; 3 or more of a suit in sequence, the ace low), so the least
deadwood and the fewest unlinked points are one number, and RLCard's best clusters hold the
referee's groups. The benchmark checks both on every hand: a difference is printed and makes the
exit status 1.

Each round times three calls on every hand, back to back, the order rotating from hand to hand:
the library call with its linking cache and the search engine's caches cleared first (every hand
solved cold, as in ``bench.solver``), the engine object alone (``SearchEngine.best_linking``, its
caches cleared), and RLCard's call. A hand's time is the median of its rounds; the report gives,
for all hands and for those with and without a meld, the median over the hands of each call and
the ratios to RLCard's.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/rlcard.py``: the repository root importable, and ``import rlcard``
    # the package, not this file.
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.machine import load_average  # noqa: E402
from bench.solver import engine_caches  # noqa: E402
from referee.game.cards import ACE, KING, NATURALS, QUEEN, Card, format_cards, sort_cards  # noqa: E402
from referee.game.linking import best_linking, engine_for, forget_linkings  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402

SEED = 20261201
DEFAULT_COUNT = 1500
DEFAULT_ROUNDS = 5
QUICK_COUNT = 200
QUICK_ROUNDS = 3
WARMUP_HANDS = 50
HAND = 10

Hand = tuple[Card, ...]


def ace_high_possible(hand: Sequence[Card]) -> bool:
    """Whether some suit holds its queen, king and ace: the only Remigio group of one deck's naturals
    (no wrapping) that is no gin rummy meld."""
    held = {(card.rank, card.suit) for card in hand}
    return any({(QUEEN, s), (KING, s), (ACE, s)} <= held for s in {card.suit for card in hand})


def gin_hands(seed: int, count: int) -> list[Hand]:
    """``count`` distinct gin-compatible hands: 10 of one deck's 52 cards, no suit's Q-K-A."""
    rng = random.Random(seed)
    hands: list[Hand] = []
    seen: set[Hand] = set()
    while len(hands) < count:
        hand = sort_cards(rng.sample(NATURALS, HAND))
        if hand not in seen and not ace_high_possible(hand):
            seen.add(hand)
            hands.append(hand)
    return hands


class RLCard:
    """RLCard's gin rummy melding, imported on first use (it is only in the ``bench`` extra)."""

    def __init__(self) -> None:
        try:
            from rlcard.games.gin_rummy.utils import melding, utils
        except ImportError as exc:
            raise SystemExit(f"bench.rlcard needs RLCard ({exc}): install the bench extra (make bench-extra)") from None
        self.best_meld_clusters = melding.get_best_meld_clusters
        self.deadwood_count = utils.get_deadwood_count
        self._card = utils.get_card
        # RLCard's card ids: rank (0 the ace) + 13 × suit, suits in the order S H D C.
        self._suit_ids = {suit: "SHDC".index(suit.name[0]) for suit in {card.suit for card in NATURALS}}

    def hand(self, hand: Hand) -> list[object]:
        """The same cards as RLCard's ``Card`` objects."""
        return [self._card(card.rank - 1 + 13 * self._suit_ids[card.suit]) for card in hand]  # type: ignore[operator]


def _meld_sets(cluster: Sequence[Sequence[object]]) -> frozenset[frozenset[str]]:
    return frozenset(frozenset(str(card) for card in meld) for meld in cluster)


def _rl_code(card: Card) -> str:
    """A card as RLCard prints it (``TS`` for the ten of spades)."""
    code = card.code()
    return ("T" if code.startswith("10") else code[:-1]) + code[-1]


Timings = dict[str, list[int]]  # per call: each hand's median ns over the rounds

# The calls timed, in the report's order.
LIBRARY = "library"  # referee.game.linking.best_linking, as the referee's own code calls it
ENGINE = "engine"  # the search engine object, as bench.solver calls it
RLCARD = "RLCard"


def run(count: int, rounds: int, progress: Callable[[str], None]) -> tuple[list[Hand], Timings, list[str]]:
    """Time the calls on every hand ``rounds`` times: per call, each hand's median ns; and the
    hands where the two answers differ."""
    rl = RLCard()
    rules = RuleSet(engine=Engine.SEARCH)
    engine = engine_for(rules)
    clears = [clear for _, clear in engine_caches(Engine.SEARCH)]
    hands = gin_hands(SEED, count)
    theirs = [rl.hand(hand) for hand in hands]
    clock = time.perf_counter_ns

    def library(k: int) -> int:
        forget_linkings()
        for clear in clears:
            clear()
        start = clock()
        best_linking(hands[k], rules)
        return clock() - start

    def engine_call(k: int) -> int:
        for clear in clears:
            clear()
        start = clock()
        engine.best_linking(hands[k], rules)
        return clock() - start

    def rlcard(k: int) -> int:
        start = clock()
        rl.best_meld_clusters(theirs[k])
        return clock() - start

    calls = {LIBRARY: library, ENGINE: engine_call, RLCARD: rlcard}
    progress(f"warm-up (load average {load_average()})")
    for k in range(min(WARMUP_HANDS, count)):
        for call in calls.values():
            call(k)

    progress(f"checking the answers on {count} hands")
    wrong: list[str] = []
    for hand, cards in zip(hands, theirs):
        linking = best_linking(hand, rules)
        clusters = rl.best_meld_clusters(cards)
        deadwood = rl.deadwood_count(cards, clusters[0]) if clusters else sum(card.points(0) for card in hand)
        ours = frozenset(frozenset(_rl_code(card) for card in group.cards) for group in linking.groups)
        if deadwood != linking.points or (clusters and ours not in {_meld_sets(c) for c in clusters}):
            wrong.append(f"{format_cards(hand)}: search {linking.points} unlinked, RLCard {deadwood} deadwood")

    taken: dict[str, list[list[int]]] = {name: [[] for _ in hands] for name in calls}
    order = list(calls.items())
    for n in range(rounds):
        progress(f"round {n + 1} of {rounds} (load average {load_average()})")
        gc.collect()
        for k in range(count):
            shift = (k + n) % len(order)  # each call goes first, second, third in turn
            for name, call in order[shift:] + order[:shift]:
                taken[name][k].append(call(k))
    return hands, {name: [int(statistics.median(t)) for t in times] for name, times in taken.items()}, wrong


def report(hands: Sequence[Hand], timings: Timings, wrong: Sequence[str], rounds: int, elapsed: float) -> str:
    rules = RuleSet(engine=Engine.SEARCH)
    melded = [bool(best_linking(hand, rules).groups) for hand in hands]
    out = [
        "Remigio referee: the search engine against RLCard's gin rummy melding",
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"cpu count {os.cpu_count()}, {platform.machine()} {platform.system()}",
        f"load average (1/5/15 min) at the end: {load_average()}",
        f"{len(hands)} gin-compatible hands (seed {SEED}), {rounds} rounds; a hand's time is the median of its rounds",
        f"{LIBRARY}: referee.game.linking.best_linking, its cache and the engine's cleared before each call; "
        f"{ENGINE}: SearchEngine.best_linking, the engine's caches cleared; "
        f"{RLCARD}: melding.get_best_meld_clusters",
        "",
    ]
    header = (
        f"{'hands':<14}{'count':>6}{LIBRARY + ' µs':>13}{ENGINE + ' µs':>12}{RLCARD + ' µs':>12}"
        f"{LIBRARY + '/' + RLCARD:>17}{ENGINE + '/' + RLCARD:>16}"
    )
    out += [header, "-" * len(header)]
    for name, keep in (("all", None), ("no meld", False), ("a meld", True)):
        picked = [k for k in range(len(hands)) if keep is None or melded[k] == keep]
        if not picked:
            continue
        medians = {call: statistics.median(times[k] for k in picked) / 1e3 for call, times in timings.items()}
        out.append(
            f"{name:<14}{len(picked):>6}{medians[LIBRARY]:>13.2f}{medians[ENGINE]:>12.2f}{medians[RLCARD]:>12.2f}"
            f"{medians[LIBRARY] / medians[RLCARD]:>16.3f}x{medians[ENGINE] / medians[RLCARD]:>15.3f}x"
        )
    out.append("")
    out.append(
        "answers: "
        + ("the same points and groups on every hand" if not wrong else f"{len(wrong)} DIFFERENT, first: {wrong[0]}")
    )
    out.append(f"total run time {elapsed:.1f} s")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rlcard", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"a short run ({QUICK_COUNT} hands, {QUICK_ROUNDS} rounds)"
    )
    parser.add_argument("--count", type=int, help=f"hands (default {DEFAULT_COUNT})")
    parser.add_argument("--rounds", type=int, help=f"times each hand is timed (default {DEFAULT_ROUNDS})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    count = args.count if args.count is not None else QUICK_COUNT if args.quick else DEFAULT_COUNT
    rounds = args.rounds if args.rounds is not None else QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS
    if count < 1:
        parser.error(f"--count must be at least 1, not {count}")
    if rounds < 1:
        parser.error(f"--rounds must be at least 1, not {rounds}")
    started = time.perf_counter()

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    hands, timings, wrong = run(count, rounds, progress)
    print(report(hands, timings, wrong, rounds, time.perf_counter() - started))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
