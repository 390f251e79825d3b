"""The default engine: best linking as an integer program solved by OR-Tools CP-SAT.

One integer variable per candidate group (how many times the linking uses it, candidates in
canonical order, see ``candidates``), one capacity constraint per card kind, written into the
model's proto through a few named operations (``_ModelWriter``). For most hands one solve of one weighted objective gives the canonical
answer (``Linking.rank``: the fewest points, then the fewest groups, then the groups in ascending
candidate order, lexicographically first): a linked point outweighs every count of groups and
order, a group fewer outweighs every order, and each group's order weight outweighs every set of
later groups a linking could still hold (``_order_weights``).

With many candidates (jokers and duplicates) those weights would outgrow the integers a double
holds exactly. Then one solve finds the canonical linking's lowest group: exactly one boolean
*designates* a group the linking uses, and the objective maximises the linked points first,
minimises the groups second and the designated number third, so the optimum designates the
lowest group any best linking holds (nothing has to say "this is the lowest used", which keeps the solve easy to
prove). The rest of the canonical linking is the canonical linking of the cards left, among the
candidates from that group on that still fit: the same problem, smaller, usually small enough
for one weighted solve. A linking holds at most ``len(hand) // 3`` groups, so that is at most
four solves.

Hands with many candidates are nearly always linked in full, so they are first solved with every
card that scores used exactly (``_canonical``, then ``_group_by_group``): a tighter model, found and proven faster, where
only the groups holding the lowest card can come first. When every held card scores and one or
two groups can hold them all, that linking is found without a solve (``_one_or_two_groups``):
proving the fewest groups was what such hands cost the solver most. Every solve must be proven OPTIMAL (or,
for that attempt, INFEASIBLE); anything else is an error, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

# OR-Tools' own module of compiled CP-SAT types: the model proto, the parameters and the solve.
# Its Python builder (``cp_model``) is not needed here (see ``_ModelWriter``) and imports pandas
# and numpy, half a second at every start of a process that links with CP-SAT.
from ortools.sat.python import cp_model_helper as cmh

from referee.game.cards import JOKER_INDEX, Card, format_cards, points_by_index
from referee.game.errors import SolverError, SolverTimeout
from referee.game.linking.base import Linking, linking_from_parts
from referee.game.linking.budget import seconds_left
from referee.game.linking.candidates import Candidate, candidate_groups
from referee.game.rules import Engine, RuleSet

# Deterministic time units, not seconds: the same hand stops at the same point on any machine.
DETERMINISTIC_CAP = 20.0
# One weighted objective is used while every value it can reach is below 2^53. CP-SAT checks the
# gap between the objective and its bound in floating point: beyond 2^53 two values one order
# unit apart can compare equal, and a solve can stop "optimal" at the wrong tie (seen at 3^36).
_EXACT_IN_DOUBLE = 1 << 53
# CP-SAT also refuses a model whose objective could overflow 64 bits over the variables' domains.
_INT64_SAFE = 1 << 62
# From this many candidate groups on, a hand is first tried for a full linking (see _canonical).
TRY_FULL_FROM = 25

# A wall-clock cap per solve; a caller's time budget (``budget.time_budget``) may lower it.
WALL_CAP_SECONDS = 10.0


class CpSatEngine:
    """Best linking by CP-SAT, one worker, capped in deterministic time."""

    name = Engine.CPSAT

    def __init__(self, wall_cap_seconds: float = WALL_CAP_SECONDS) -> None:
        self.wall_cap_seconds = wall_cap_seconds

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards`` (sorted canonically) under ``rules``."""
        counts = Counter(card.index for card in cards)
        points = points_by_index(rules.joker_points)
        # A group worth no points (jokers only, when jokers score 0) never belongs to the canonical
        # answer: leaving it out gives as few points and a shorter list of groups.
        columns = [
            column for group in candidate_groups(counts, rules) if (column := _column(group, rules.joker_points)).worth
        ]
        return linking_from_parts(cards, self._canonical(cards, counts, columns, points), rules)

    def _canonical(
        self, cards: tuple[Card, ...], counts: Counter[int], columns: list[_Column], points: Sequence[int]
    ) -> list[Candidate]:
        """The groups of the canonical best linking of ``counts`` among ``columns`` (in canonical
        order, all within ``counts``), ``points`` by card index. ``cards`` names the hand in errors."""
        if len(columns) >= TRY_FULL_FROM and _may_link_fully(counts, columns, points):
            # Hands with that many candidates (jokers, duplicates) are often linked in full, and
            # with every scoring card used exactly the solver finds and proves the answer about
            # twice as fast; when there is no such linking that costs one more solve, so hands
            # unlikely to have one are not tried.
            groups = _one_or_two_groups(counts, columns, points)
            if groups is None:
                groups = self._group_by_group(cards, counts, columns, points, full=True)
            if groups is not None:
                return groups
        groups = self._group_by_group(cards, counts, columns, points, full=False)
        if groups is None:
            raise AssertionError("the columns fit the hand, so some linking exists")
        return groups

    def _group_by_group(
        self, cards: tuple[Card, ...], counts: Counter[int], columns: list[_Column], points: Sequence[int], full: bool
    ) -> list[Candidate] | None:
        """As ``_canonical``; with ``full``, among the linkings that leave no card with points
        unlinked, and None if there is none.

        One weighted solve gives the whole answer when its weights fit; until they do, each round
        finds the canonical linking's lowest group and goes on with the cards left, among the
        groups from that one on. Every best linking holding the lowest group is that group plus a
        best linking of the rest, and its other groups come after it in canonical order.
        """
        groups: list[Candidate] = []
        while True:
            if not columns:
                return None if full and any(points[i] for i in +counts) else groups
            exact = [i for i in counts if points[i]] if full else []
            most = [column.most(counts) for column in columns]
            size = sum(counts.values())
            order, most_order = _order_weights(columns, most, size)
            # A group fewer outweighs every order weight, and unless every scoring card is linked
            # anyway, a linked point outweighs every count of groups and order (RULES §3).
            group = most_order + 1
            top = 0 if full else (size // 3 + 1) * group
            coefficients = [w - group + top * column.worth for w, column in zip(order, columns)]
            highest = top * sum(points[i] * k for i, k in counts.items()) + most_order
            if highest < _EXACT_IN_DOUBLE and sum(abs(c) * k for c, k in zip(coefficients, most)) < _INT64_SAFE:
                model = _linking_model(counts, columns, most, exact)
                # Maximise by minimising the negated sum (only the solution is read, never the
                # objective value).
                model.minimize(range(len(columns)), [-c for c in coefficients])
                # The fewest groups are hard to prove by propagation alone when every card must be
                # linked (hands with many jokers): the LP relaxation bounds them (adversarial hands
                # about twice as fast; it slows the other solves, so only these and the designating
                # solves of such hands get it).
                solution = self._optimum(model, cards, infeasible_ok=full, relax=full)
                if solution is None:
                    return None
                return groups + [column.group for n, column in enumerate(columns) for _ in range(solution[n])]
            # Too many candidates for one objective: the lowest group, then round again.
            first = self._lowest_group(cards, counts, columns, most, exact)
            if first is None:
                return None
            groups.append(columns[first].group)
            counts = counts.copy()
            counts.subtract(columns[first].group)
            columns = [column for column in columns[first:] if column.fits(counts)]

    def _lowest_group(
        self,
        cards: tuple[Card, ...],
        counts: Counter[int],
        columns: list[_Column],
        most: list[int],
        exact: Collection[int],
    ) -> int | None:
        """The lowest column any best linking holds, when every card in ``exact`` must be linked
        (None: no linking does that); the best linking has the most linked points, then the fewest
        groups.

        Exactly one flag designates a group the linking uses, and the optimum designates the
        lowest such group: nothing has to say "this is the lowest used", which keeps it easy to prove.
        """
        size = len(columns)
        choices: Sequence[int] = range(size)
        lowest = min(i for i, held in counts.items() if held)
        if lowest in exact:
            # Every scoring card is linked, the lowest held too, and the group holding it starts
            # with it: no other group's key is smaller. Only those groups can be the first.
            choices = [n for n in choices if columns[n].group[0] == lowest]
        model = _linking_model(counts, columns, most, exact)
        # The flags: flag f set means column choices[f] is used at least once.
        flags = model.new_int_vars([1] * len(choices))
        model.add_exactly_one(flags)
        for flag, n in zip(flags, choices):
            model.add_linear([n], [1], 1, most[n], only_if=flag)
        # Minimise the designated number; before it the groups (one group outweighs every
        # designation); unless every scoring card is linked anyway, first maximise the linked
        # points (one point outweighs every count of groups and designation).
        top = 0 if exact else (sum(counts.values()) // 3 + 1) * size
        model.minimize(range(size), [size - top * column.worth for column in columns])
        model.minimize(flags, choices)
        solution = self._optimum(model, cards, infeasible_ok=bool(exact), relax=bool(exact))
        if solution is None:
            return None
        return next(n for flag, n in zip(flags, choices) if solution[flag])

    def links_fully(self, cards: tuple[Card, ...], rules: RuleSet) -> bool:
        """Whether the cards split into groups with none left over: one feasibility solve."""
        counts = Counter(card.index for card in cards)
        columns = [_column(group, rules.joker_points) for group in candidate_groups(counts, rules)]
        if not columns:
            return False
        model = _linking_model(counts, columns, [column.most(counts) for column in columns], exact=counts)
        return self._optimum(model, cards, infeasible_ok=True) is not None

    def _optimum(
        self, model: _ModelWriter, cards: tuple[Card, ...], infeasible_ok: bool, relax: bool = False
    ) -> list[int] | None:
        """Every variable's value, by index, in a proven optimum of ``model`` (with no objective:
        any solution); None when there is none and ``infeasible_ok``. Anything else is an error.
        ``relax``: with the LP relaxation."""
        parameters = self._parameters(cards)
        if relax:
            parameters.linearization_level = 1
        # What ``cp_model.CpSolver.solve`` does, without a solution callback.
        solver = cmh.SolveWrapper()
        solver.set_parameters(parameters)
        response = solver.solve(model.proto)
        status = response.status
        if status == _INFEASIBLE and infeasible_ok:
            return None
        if status in (_UNKNOWN, _FEASIBLE):
            # A time limit (the wall cap, the deterministic cap or the call's budget) stopped it first.
            raise SolverTimeout(f"CP-SAT proved no optimum within its time for {format_cards(cards)}")
        if status != _OPTIMAL:
            raise SolverError(f"CP-SAT found no proven optimum ({status.name}) for {format_cards(cards)}")
        return list(response.solution)

    def _parameters(self, cards: tuple[Card, ...]) -> cmh.SatParameters:
        cap = self.wall_cap_seconds
        left = seconds_left()
        if left is not None:
            cap = min(cap, left)
            if cap <= 0:
                raise SolverTimeout(f"the time budget ran out before solving {format_cards(cards)}")
        parameters = cmh.SatParameters()
        parameters.num_workers = 1
        parameters.max_deterministic_time = DETERMINISTIC_CAP
        parameters.max_time_in_seconds = cap
        # These models are small and tight: presolve, probing, symmetry detection and the LP
        # relaxation cost more than they save (measured on bench.hands: presolve off about 1.7x
        # faster on end-of-deal hands, the other three off about 12% more; the LP also slows the
        # designating solves of _lowest_group). Answers stay proven.
        parameters.cp_model_presolve = False
        parameters.cp_model_probing_level = 0
        parameters.symmetry_level = 0
        parameters.linearization_level = 0
        # Clause inprocessing pays on long searches, not on these (adversarial hands: solve time
        # about a third less, end-of-deal about a tenth).
        parameters.use_sat_inprocessing = False
        # SIGINT belongs to the server, which drains on it; CP-SAT must not take it over mid-solve.
        parameters.catch_sigint_signal = False
        return parameters


_OPTIMAL = cmh.CpSolverStatus.OPTIMAL
_FEASIBLE = cmh.CpSolverStatus.FEASIBLE
_INFEASIBLE = cmh.CpSolverStatus.INFEASIBLE
_UNKNOWN = cmh.CpSolverStatus.UNKNOWN


class _ModelWriter:
    """A CP-SAT model built with a few named operations written straight into its proto.

    The operations are those of the OR-Tools samples (new_int_var, add_linear_constraint,
    add_exactly_one, minimize), on variables named by their index: for models this small, the
    Python expression layer cost more than solving them (measured on bench.hands).
    """

    __slots__ = ("proto",)

    def __init__(self) -> None:
        self.proto = cmh.CpModelProto()

    def new_int_vars(self, uppers: Sequence[int]) -> range:
        """One integer variable from 0 to each of ``uppers``; their indices."""
        first = len(self.proto.variables)
        for upper in uppers:
            self.proto.variables.add().domain.extend((0, upper))
        return range(first, first + len(uppers))

    def add_linear(
        self, variables: Sequence[int], coeffs: Sequence[int], lower: int, upper: int, only_if: int | None = None
    ) -> None:
        """``lower <= sum(coeffs[k] * variables[k]) <= upper``, enforced only when the boolean
        variable ``only_if`` is true if it is given."""
        constraint = self.proto.constraints.add()
        if only_if is not None:
            constraint.enforcement_literal.append(only_if)
        constraint.linear.vars.extend(variables)
        constraint.linear.coeffs.extend(coeffs)
        constraint.linear.domain.extend((lower, upper))

    def add_exactly_one(self, literals: Sequence[int]) -> None:
        """Exactly one of the boolean variables ``literals`` is true."""
        self.proto.constraints.add().exactly_one.literals.extend(literals)

    def minimize(self, variables: Sequence[int], coeffs: Sequence[int]) -> None:
        """Add ``sum(coeffs[k] * variables[k])`` to the objective, which is minimised."""
        self.proto.objective.vars.extend(variables)
        self.proto.objective.coeffs.extend(coeffs)


@dataclass(frozen=True, slots=True)
class _Column:
    """A candidate group as the model sees it: its cards, its points, and its copies of each card."""

    group: Candidate
    worth: int
    copies: tuple[tuple[int, int], ...]  # (card index, copies in the group)

    def most(self, counts: Counter[int]) -> int:
        """How many times ``counts`` could form this group on its own."""
        return min(counts[index] // k for index, k in self.copies)

    def fits(self, counts: Counter[int]) -> bool:
        """Whether ``counts`` holds every card of this group."""
        return all(counts[index] >= k for index, k in self.copies)


@lru_cache(maxsize=1 << 14)
def _column(group: Candidate, joker_points: int) -> _Column:
    """The column of a candidate group (groups recur from hand to hand; a process keeps them)."""
    points = points_by_index(joker_points)
    return _Column(group, sum(points[i] for i in group), _copies(group))


def _copies(group: Candidate) -> tuple[tuple[int, int], ...]:
    """(card index, copies) of a group's sorted card indices; a Counter costs more for so few."""
    copies: dict[int, int] = {}
    for index in group:
        copies[index] = copies.get(index, 0) + 1
    return tuple(copies.items())


def _may_link_fully(counts: Counter[int], columns: list[_Column], points: Sequence[int]) -> bool:
    """Whether a linking that uses every card that scores is worth trying for first.

    Never when a scoring card is in no candidate group. Otherwise by the lone cards (see
    ``_lone_cards``): on end-of-deal hands a full linking was found for about half the hands with
    at most 2 J - 1 lone cards for J jokers and for about one in eight beyond, while hands with
    four jokers and duplicates stay within it. A wrong guess costs one solve, never the answer.
    """
    lone = _lone_cards(counts, columns, points)
    return lone is not None and lone <= max(0, 2 * counts.get(JOKER_INDEX, 0) - 1)


def _one_or_two_groups(counts: Counter[int], columns: list[_Column], points: Sequence[int]) -> list[Candidate] | None:
    """The canonical full linking when every held card scores and some linking holds them all in
    one or two groups, found without a solve; None otherwise.

    Every full linking then links the same points, so the fewest groups decide: the hand itself
    when it is a column, else the lexicographically first pair whose cards are the hand's. The
    first column (canonical order) whose remainder is a column is the lower one of that pair.
    This is what proving the fewest groups cost the solver most on (hands with four jokers).
    """
    if any(not points[index] for index in +counts):
        return None
    hand = tuple(sorted(counts.elements()))
    size = len(hand)
    longest = max((len(column.group) for column in columns), default=0)
    if 2 * longest < size:
        return None
    # Columns by card count and index sum: a pair's two must add up to the hand's in both.
    by_shape: dict[tuple[int, int], list[Candidate]] = {}
    for column in columns:
        if column.group == hand:
            return [hand]
        by_shape.setdefault((len(column.group), sum(column.group)), []).append(column.group)
    total = sum(hand)
    for column in columns:
        group = column.group
        for other in by_shape.get((size - len(group), total - sum(group)), ()):
            if tuple(sorted(group + other)) == hand:
                return [group, other] if group <= other else [other, group]
    return None


def _lone_cards(counts: Counter[int], columns: list[_Column], points: Sequence[int]) -> int | None:
    """How many scoring cards are in no group without a joker (lone cards); None when one is in
    no group at all, so that no linking can use every card that scores.

    A linking that does uses at most four lone cards per joker: a group's naturals never hold
    three lone cards of a rank or three running ones (they would make a group of their own), so
    a group with j jokers holds at most two per stretch between its jokers, 2 (j + 1) <= 4 j.
    """
    in_some: set[int] = set()
    in_joker_free: set[int] = set()
    for column in columns:
        indices = [index for index, _ in column.copies]
        in_some.update(indices)
        if column.group[-1] != JOKER_INDEX:  # sorted indices: a joker, if any, is last
            in_joker_free.update(indices)
    lone = 0
    for index, held in counts.items():
        if held and points[index] and index != JOKER_INDEX:
            if index not in in_some:
                return None
            if index not in in_joker_free:
                lone += held
    return lone


def _linking_model(
    counts: Counter[int], columns: list[_Column], most: list[int], exact: Collection[int]
) -> _ModelWriter:
    """Variable n: the uses of column n (at most ``most[n]``); no card used more often than held,
    the cards in ``exact`` exactly as often."""
    model = _ModelWriter()
    model.new_int_vars(most)
    terms: dict[int, tuple[list[int], list[int]]] = {index: ([], []) for index in sorted(counts)}
    for n, column in enumerate(columns):
        for index, k in column.copies:
            variables, copies = terms[index]
            variables.append(n)
            copies.append(k)
    for index, (variables, copies) in terms.items():
        held = counts[index]
        model.add_linear(variables, copies, held if index in exact else 0, held)
    return model


def _order_weights(columns: list[_Column], most: list[int], size: int) -> tuple[list[int], int]:
    """A weight per column such that, among equally good linkings of ``size`` cards, the higher
    total is the list of groups (in ascending column order) that comes first lexicographically;
    and the largest total a linking can reach. (Equally good linkings never differ by groups added
    at the end of one of them: every group has points.)

    Two linkings that first differ where one holds column a and the other a later column are
    ordered right when column a outweighs every set of later columns a linking can hold. The
    bound used for that is a knapsack on card count alone (the later columns, each as often as it
    fits, at most ``size`` cards in all): much smaller than ``(size // 3 + 1) ** n``, so many more
    hands fit one objective.
    """
    bound = [0] * (size + 1)  # bound[c]: the most the columns after n can weigh in c cards
    weights = [0] * len(columns)
    for n in range(len(columns) - 1, -1, -1):
        weight = weights[n] = bound[size] + 1
        length = len(columns[n].group)
        for _ in range(most[n]):
            for c in range(size, length - 1, -1):
                if bound[c - length] + weight > bound[c]:
                    bound[c] = bound[c - length] + weight
    return weights, bound[size]
