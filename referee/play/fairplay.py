"""Fair-play statistics over many deals: per player and per ordered pair of players, signals
against the population of the batch, and flags (``docs/review.md``, "Fair play over many deals").

Three steps, each pure, so a cluster can run them as a map, a group-by and a reduce:

1. ``observations(record, review)``: flat rows for one deal, one per player (``taker`` empty) and
   one per ordered pair of players that shared the table (``player`` threw to ``taker``, or
   ``player`` was ahead when ``taker`` held a close). Every field but the key is an integer count
   or an integer sum in fixed point (``SCALE``), so sums are exact.
2. ``aggregate(rows)``: the rows of one key summed field by field (``merge``): any order, any split.
3. ``judge(aggregates)``: each player's and pair's signals, tested against the batch itself
   (median and median absolute deviation over players, so a few cheaters cannot hide
   themselves), and the flags past ``Z_FLAG`` with at least the measure's least opportunities.

A flag is evidence for a person to look at, never a verdict: it starts a human review and proves
nothing by itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from statistics import median

from referee.play.record import Record
from referee.play.review import DealReview, DecisionKind, Mark
from referee.play.simulate import ahead

SCALE = 1_000_000  # fixed point of the sums of fractions: exact integer sums in any order

# The signals (``docs/review.md`` states each).
HIDDEN_KNOWLEDGE = "HIDDEN_KNOWLEDGE"
COLLUSION = "COLLUSION"
SOFT_PLAY = "SOFT_PLAY"
ACCURACY = "ACCURACY"

# A flag is raised at this z-score or above (one-sided: only the direction a cheater moves), and
# only with at least the measure's least opportunities.
Z_FLAG = 4.0
LEAST = {
    "stock_outs": 30,  # stock draws of a hand not ready to close
    "omniscient_agreement": 60,  # decisions where the omniscient best differs
    "passed_closes": 20,  # chances to close
    "feeding": 30,  # throws to the taker
    "passed_while_ahead": 10,  # the taker's chances to close while the player was ahead
    "accuracy": 30,  # deals with an accuracy
}
# Rates the batch's median is not believed below: people and bots miss a close now and then.
RATE_FLOOR = {"passed_closes": 0.05, "passed_while_ahead": 0.05}
# The least spread (a variance) between players' true feeding rates the pair test assumes: the
# batch's own estimate can come out near 0 by chance.
LEAST_SPREAD = 0.01**2
# Pseudo-chances pulling the control of passes (the taker's chances while the player was not
# ahead, few) towards the batch's rate.
PASS_PRIOR = 5
# Players differ in strength: the spread of mean accuracies between honest players is taken as at
# least this many points (a standard deviation), however alike the batch's players are.
ACCURACY_SPREAD = 4.0
MAD_SCALE = 1.4826  # the median absolute deviation of a normal sample times this is its sd
FEW = 5  # with fewer players measured the batch has no spread to read: the pooled rate, no spread


@dataclass(frozen=True, slots=True)
class Observation:
    """One deal's counts for a player (``taker`` empty) or an ordered pair (``player``, ``taker``).

    Player rows: ``deals``, ``decisions``, the accuracy sums, the stock draws, the omniscient
    agreement, the chances to close and those passed, the throws the next seat could take and
    those it was ``FED``, and the same received from the seat before. Pair rows: the throws
    ``player`` made to ``taker`` and those ``FED``; the chances ``taker`` had to close while
    ``player`` alone was ahead of it in the match, and those it passed; and the same while
    ``player`` sat at the table not ahead of it (the control).
    """

    player: str
    taker: str = ""
    deals: int = 0
    decisions: int = 0
    accuracy_deals: int = 0
    accuracy_sum: int = 0  # SCALE
    accuracy_squares: int = 0  # SCALE
    stock_draws: int = 0
    stock_outs: int = 0
    stock_expected: int = 0  # SCALE: Σ improving / unseen
    stock_variance: int = 0  # SCALE: Σ p (1 - p)
    omniscient_differs: int = 0
    omniscient_agrees: int = 0
    close_chances: int = 0
    closes_passed: int = 0
    throws: int = 0
    fed: int = 0
    received: int = 0
    received_fed: int = 0
    ahead_chances: int = 0
    ahead_passed: int = 0
    behind_chances: int = 0
    behind_passed: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """What rows are grouped by."""
        return (self.player, self.taker)


_COUNTS = tuple(f.name for f in fields(Observation) if f.name not in ("player", "taker"))


def _fixed(x: float) -> int:
    return round(x * SCALE)


def observations(record: Record, review: DealReview) -> tuple[Observation, ...]:
    """The rows of one reviewed deal: a row per seat's player, and a row per ordered pair with
    anything to count. A player named at two seats of one deal is counted once per seat."""
    names = [seat.name for seat in record.seats]
    seats = len(names)
    rows: dict[tuple[str, str], dict[str, int]] = {}

    def add(player: str, taker: str, **counts: int) -> None:
        row = rows.setdefault((player, taker), {})
        for name, value in counts.items():
            row[name] = row.get(name, 0) + value

    for summary in review.seats:
        name = summary.name
        add(name, "", deals=1, decisions=summary.decisions)
        if summary.accuracy is not None:
            add(
                name,
                "",
                accuracy_deals=1,
                accuracy_sum=_fixed(summary.accuracy),
                accuracy_squares=_fixed(summary.accuracy**2),
            )
        add(name, "", omniscient_differs=summary.omniscient_differs, omniscient_agrees=summary.omniscient_agrees)
    turns = review.turns
    for at, turn in enumerate(turns):
        name = names[turn.seat]
        before = turn.before
        for decision in turn.decisions:
            if decision.kind is DecisionKind.DRAW:
                # HIDDEN_KNOWLEDGE: a stock draw brings the hand nearer with the chance
                # improving / unseen; a player who knows the stock's top beats that chance.
                if decision.choice == "STOCK" and before.distance > 0 and before.unseen and before.improving:
                    p = before.improving / before.unseen
                    add(
                        name,
                        "",
                        stock_draws=1,
                        stock_outs=int(turn.drawn in before.outs),
                        stock_expected=_fixed(p),
                        stock_variance=_fixed(p * (1 - p)),
                    )
            elif decision.kind is DecisionKind.CLOSE:
                passed = int(Mark.PASSED_CLOSE in decision.marks)
                add(name, "", close_chances=1, closes_passed=passed)
                # COLLUSION, passing: a chance while one player alone is ahead is that player's
                # (several ahead could not tell whose it is); one while a player is not ahead is
                # that player's control.
                others = [o for o in range(seats) if o != turn.seat and names[o] != name]
                leading = [o for o in others if ahead(record.seats, record.rules, turn.seat, o)]
                for other in others:
                    if leading == [other]:
                        add(names[other], name, ahead_chances=1, ahead_passed=passed)
                    elif other not in leading:
                        add(names[other], name, behind_chances=1, behind_passed=passed)
            elif decision.kind is DecisionKind.THROW and at + 1 < len(turns):
                # A throw the next seat could take (the deal went on).
                taker = names[turns[at + 1].seat]
                fed = int(Mark.FED in decision.marks)
                add(name, "", throws=1, fed=fed)
                add(taker, "", received=1, received_fed=fed)
                if taker != name:
                    add(name, taker, throws=1, fed=fed)
    return tuple(Observation(player, taker, **counts) for (player, taker), counts in sorted(rows.items()))


def merge(a: Observation, b: Observation) -> Observation:
    """Two rows of one key summed, field by field."""
    if a.key != b.key:
        raise ValueError(f"rows of {a.key} and {b.key} are not merged")
    return Observation(a.player, a.taker, *(getattr(a, name) + getattr(b, name) for name in _COUNTS))


def aggregate(rows: Iterable[Observation]) -> dict[tuple[str, str], Observation]:
    """Rows summed by key (player, taker)."""
    out: dict[tuple[str, str], Observation] = {}
    for row in rows:
        known = out.get(row.key)
        out[row.key] = row if known is None else merge(known, row)
    return out


# --- judging ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signal:
    """One measure of a signal for a player or a pair: how often it could show (opportunities),
    what was observed, what an honest player would show (expected), and the z-score."""

    signal: str
    measure: str
    opportunities: int
    observed: float
    expected: float
    z: float

    def as_dict(self) -> dict[str, object]:
        return {
            "signal": self.signal,
            "measure": self.measure,
            "opportunities": self.opportunities,
            "observed": _number(self.observed),
            "expected": _number(self.expected),
            "z": _number(self.z),
        }


@dataclass(frozen=True, slots=True)
class Flag:
    """A signal past ``Z_FLAG`` with enough opportunities: where a person should look."""

    signal: str
    measure: str
    players: tuple[str, ...]
    z: float
    opportunities: int

    def as_dict(self) -> dict[str, object]:
        return {
            "signal": self.signal,
            "measure": self.measure,
            "players": list(self.players),
            "z": _number(self.z),
            "opportunities": self.opportunities,
        }


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """A player's figures over the batch."""

    player: str
    deals: int
    decisions: int
    accuracy: float | None  # the mean of its deals' accuracies
    signals: tuple[Signal, ...]
    flags: tuple[Flag, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "player": self.player,
            "deals": self.deals,
            "decisions": self.decisions,
            "accuracy": None if self.accuracy is None else _number(self.accuracy),
            "signals": [s.as_dict() for s in self.signals],
            "flags": [f.as_dict() for f in self.flags],
        }


@dataclass(frozen=True, slots=True)
class PairResult:
    """An ordered pair's figures: ``feeder`` threw to ``taker``, or was ahead when ``taker`` could close."""

    feeder: str
    taker: str
    signals: tuple[Signal, ...]
    flags: tuple[Flag, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "pair": [self.feeder, self.taker],
            "signals": [s.as_dict() for s in self.signals],
            "flags": [f.as_dict() for f in self.flags],
        }


@dataclass(frozen=True, slots=True)
class Results:
    """Every player's and every pair's figures, sorted by name."""

    players: tuple[PlayerResult, ...]
    pairs: tuple[PairResult, ...]

    @property
    def flags(self) -> tuple[Flag, ...]:
        return tuple(f for r in self.players for f in r.flags) + tuple(f for r in self.pairs for f in r.flags)


def _number(x: float) -> float:
    """A float as the output writes it: four decimals, the same bytes on every machine and order."""
    return float(f"{x:.4f}")


@dataclass(frozen=True, slots=True)
class Population:
    """What the batch says an honest player shows on one rate: its median rate and the spread of
    true rates between players (a variance, beyond the chance of the draws)."""

    rate: float
    spread: float

    @classmethod
    def of(cls, pairs: Sequence[tuple[float, int]], least: int, floor: float = 0.0) -> Population:
        """From (observed, opportunities) per player: the median rate of those with at least
        ``least`` opportunities, and its spread, 1.4826 × their median absolute deviation less
        what chance alone gives (its square, the variance); pooled with no spread when fewer
        than ``FEW`` players are measured."""
        measured = [(x, n) for x, n in pairs if n >= least]
        if len(measured) < FEW:
            total = sum(n for _, n in pairs)
            return cls(max(floor, sum(x for x, _ in pairs) / total if total else 0.0), 0.0)
        rates = [x / n for x, n in measured]
        middle = median(rates)
        rate = max(floor, middle)
        deviation = MAD_SCALE * median(abs(r - middle) for r in rates)
        chance = median(rate * (1 - rate) / n for _, n in measured)
        return cls(rate, max(0.0, deviation**2 - chance))


Z_CAP = 99.0  # the z-score written when the batch shows no chance at all of what was observed


def _z(observed: float, expected: float, variance: float) -> float:
    """``(observed - expected) / sqrt(variance)``, within ``Z_CAP`` either way."""
    if variance <= 0:
        return 0.0 if observed <= expected else Z_CAP
    return max(-Z_CAP, min(Z_CAP, (observed - expected) / math.sqrt(variance)))


def _rate_signal(signal: str, measure: str, x: int, n: int, population: Population) -> Signal:
    """A rate against the batch: binomial chance plus the spread between honest players."""
    p = population.rate
    variance = n * p * (1 - p) + (n * n) * population.spread
    return Signal(signal, measure, n, float(x), n * p, _z(x, n * p, variance))


def _flags(signals: Iterable[Signal], players: tuple[str, ...]) -> tuple[Flag, ...]:
    return tuple(
        Flag(s.signal, s.measure, players, s.z, s.opportunities)
        for s in signals
        if s.z >= Z_FLAG and s.opportunities >= LEAST[s.measure]
    )


def judge(aggregates: Mapping[tuple[str, str], Observation] | Iterable[Observation]) -> Results:
    """Every player's and pair's signals against the batch, and the flags (``docs/review.md``)."""
    rows = aggregate(aggregates.values() if isinstance(aggregates, Mapping) else aggregates)
    players = {key[0]: row for key, row in rows.items() if not key[1]}
    pairs = {key: row for key, row in rows.items() if key[1]}
    ordered = sorted(players.values(), key=lambda r: r.player)

    # HIDDEN_KNOWLEDGE, stock outs: the ratio of outs drawn to outs expected; honest near 1.
    outs_ratio = _ratio_population([r for r in ordered if r.stock_draws >= LEAST["stock_outs"]])
    agreement = Population.of(
        [(r.omniscient_agrees, r.omniscient_differs) for r in ordered], LEAST["omniscient_agreement"]
    )
    passing = Population.of(
        [(r.closes_passed, r.close_chances) for r in ordered], LEAST["passed_closes"], RATE_FLOOR["passed_closes"]
    )
    fed_by = Population.of([(r.received_fed, r.received) for r in ordered], LEAST["feeding"])
    feeds = Population.of([(r.fed, r.throws) for r in ordered], LEAST["feeding"])
    accuracy = _accuracy_population(ordered)

    results = []
    for r in ordered:
        signals = []
        if r.stock_draws:
            expected = r.stock_expected / SCALE
            # The ratio's median scales the honest expectation; its spread between players adds to chance.
            mean = outs_ratio.rate * expected
            variance = outs_ratio.rate * r.stock_variance / SCALE + (expected**2) * outs_ratio.spread
            signals.append(
                Signal(
                    HIDDEN_KNOWLEDGE,
                    "stock_outs",
                    r.stock_draws,
                    float(r.stock_outs),
                    mean,
                    _z(r.stock_outs, mean, variance),
                )
            )
        if r.omniscient_differs:
            signals.append(
                _rate_signal(
                    HIDDEN_KNOWLEDGE, "omniscient_agreement", r.omniscient_agrees, r.omniscient_differs, agreement
                )
            )
        if r.close_chances:
            signals.append(_rate_signal(SOFT_PLAY, "passed_closes", r.closes_passed, r.close_chances, passing))
        mean_accuracy = r.accuracy_sum / SCALE / r.accuracy_deals if r.accuracy_deals else None
        if mean_accuracy is not None:
            signals.append(_accuracy_signal(r, mean_accuracy, accuracy))
        results.append(
            PlayerResult(r.player, r.deals, r.decisions, mean_accuracy, tuple(signals), _flags(signals, (r.player,)))
        )

    pair_results = []
    for (feeder, taker), row in sorted(pairs.items()):
        signals = []
        giver, receiver = players.get(feeder), players.get(taker)
        if row.throws and giver is not None and receiver is not None:
            # What this seating makes expected: how often the taker is fed by the others it
            # follows, times how often the feeder feeds the others who follow it, over the batch's
            # rate; each rate estimated from the throws without the pair and pulled towards the
            # batch's as far as the batch's players differ (empirical Bayes).
            took, took_variance = _estimate(receiver.received_fed - row.fed, receiver.received - row.throws, fed_by)
            gave, gave_variance = _estimate(giver.fed - row.fed, giver.throws - row.throws, feeds)
            base = fed_by.rate
            p = min(1.0, took * gave / base) if base and took and gave else took
            n = row.throws
            # Chance, and how uncertain the expected rate is (the two estimates').
            relative = (took_variance / took**2 if took else 0.0) + (gave_variance / gave**2 if gave else 0.0)
            variance = n * p * (1 - p) + n * n * p * p * relative
            signals.append(Signal(COLLUSION, "feeding", n, float(row.fed), n * p, _z(row.fed, n * p, variance)))
        if row.ahead_chances:
            # Passing while the player alone was ahead, against the taker's passing while the
            # same player sat at the table not ahead of it.
            p = _shrunk(row.behind_passed, row.behind_chances, passing.rate, PASS_PRIOR)
            p = max(p, RATE_FLOOR["passed_while_ahead"])
            n = row.ahead_chances
            variance = n * p * (1 - p) + n * n * p * (1 - p) / (row.behind_chances + PASS_PRIOR)
            signals.append(
                Signal(
                    COLLUSION,
                    "passed_while_ahead",
                    n,
                    float(row.ahead_passed),
                    n * p,
                    _z(row.ahead_passed, n * p, variance),
                )
            )
        if signals:
            pair_results.append(PairResult(feeder, taker, tuple(signals), _flags(signals, (feeder, taker))))
    return Results(tuple(results), tuple(pair_results))


def _ratio_population(rows: Sequence[Observation]) -> Population:
    """The batch's median ratio of stock outs drawn to outs expected, and the spread of true ratios
    between players (a variance), less what chance alone gives; 1 with no spread when fewer than
    ``FEW`` players are measured (the measure's own expectation)."""
    if len(rows) < FEW:
        return Population(1.0, 0.0)
    ratios = [r.stock_outs * SCALE / r.stock_expected for r in rows]
    middle = median(ratios)
    deviation = MAD_SCALE * median(abs(x - middle) for x in ratios)
    chance = median(middle * r.stock_variance * SCALE / r.stock_expected**2 for r in rows)
    return Population(middle, max(0.0, deviation**2 - chance))


def _estimate(x: int, n: int, population: Population) -> tuple[float, float]:
    """A player's own rate from ``x`` in ``n``, and its variance, by empirical Bayes: the batch's
    rate with the spread between players (at least ``LEAST_SPREAD``) as the prior, the binomial
    chance of the player's own opportunities as the likelihood."""
    rate = population.rate
    spread = max(population.spread, LEAST_SPREAD)
    chance = rate * (1 - rate)
    if not chance:
        return rate, 0.0
    weight = chance / spread  # the prior's worth in opportunities
    n = max(0, n)
    return (x + weight * rate) / (n + weight), 1.0 / (1.0 / spread + n / chance)


def _shrunk(x: int, n: int, base: float, prior: int) -> float:
    """A rate of ``x`` in ``n`` pulled towards ``base`` by ``prior`` pseudo-opportunities."""
    return (x + prior * base) / (max(0, n) + prior)


def _accuracy_population(rows: Sequence[Observation]) -> Population:
    """The batch's median of players' mean accuracies and the spread between players (variance),
    less the sampling variance of a mean."""
    measured = [r for r in rows if r.accuracy_deals >= LEAST["accuracy"]]
    if len(measured) < FEW:
        return Population(0.0, 0.0)
    means = [r.accuracy_sum / SCALE / r.accuracy_deals for r in measured]
    middle = median(means)
    deviation = MAD_SCALE * median(abs(m - middle) for m in means)
    chance = median(_accuracy_variance(r) / r.accuracy_deals for r in measured)
    return Population(middle, max(ACCURACY_SPREAD**2, deviation**2 - chance))


def _accuracy_variance(row: Observation) -> float:
    """The variance of a player's accuracy from deal to deal."""
    n = row.accuracy_deals
    mean = row.accuracy_sum / SCALE / n
    return max(0.0, row.accuracy_squares / SCALE / n - mean * mean)


def _accuracy_signal(row: Observation, mean: float, population: Population) -> Signal:
    """A mean accuracy above the batch's: the sampling variance of the mean plus the spread between players."""
    n = row.accuracy_deals
    if not population.rate:
        return Signal(ACCURACY, "accuracy", n, mean, mean, 0.0)
    variance = _accuracy_variance(row) / n + population.spread
    return Signal(ACCURACY, "accuracy", n, mean, population.rate, _z(mean, population.rate, variance))


__all__ = [
    "ACCURACY",
    "COLLUSION",
    "HIDDEN_KNOWLEDGE",
    "LEAST",
    "SCALE",
    "SOFT_PLAY",
    "Z_FLAG",
    "Flag",
    "Observation",
    "PairResult",
    "PlayerResult",
    "Population",
    "Results",
    "Signal",
    "aggregate",
    "judge",
    "merge",
    "observations",
]
