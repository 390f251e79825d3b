"""The default engine: best linking as an integer program solved by OR-Tools CP-SAT.

One integer variable per candidate group (how many times the linking uses it, candidates in
canonical order, see ``candidates``), one capacity constraint per card kind. The first solve
maximises the linked points. Then the canonical linking among the optimal ones (``Linking.rank``:
its groups in ascending candidate order, lexicographically first) is fixed group by group: each
further solve minimises the number of the next group, given the ones already fixed. A linking
holds at most ``len(hand) // 3`` groups, so that is at most four small solves. Every solve must
be proven OPTIMAL; anything else is an error, never a guess.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from referee.cards import CARD_BY_INDEX, Card
from referee.errors import SolverError
from referee.linking.base import Linking, linking_from_parts
from referee.linking.candidates import candidate_groups
from referee.rules import RuleSet

# Deterministic time units, not seconds: the same hand stops at the same point on any machine.
DETERMINISTIC_CAP = 20.0
# A wall-clock cap the server may lower.
WALL_CAP_SECONDS = 10.0


class CpSatEngine:
    """Best linking by CP-SAT, one worker, capped in deterministic time."""

    name = "cpsat"

    def __init__(self, wall_cap_seconds: float = WALL_CAP_SECONDS) -> None:
        self.wall_cap_seconds = wall_cap_seconds

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards`` (sorted canonically) under ``rules``."""
        counts = Counter(card.index for card in cards)
        candidates = candidate_groups(counts, rules)
        if not candidates:
            return linking_from_parts(cards, (), rules)
        model = cp_model.CpModel()
        uses = []
        for n, group in enumerate(candidates):
            most = min(counts[i] // k for i, k in Counter(group).items())
            uses.append(model.new_int_var(0, most, f"group{n}"))
        for index, held in sorted(counts.items()):
            terms = [k * uses[n] for n, group in enumerate(candidates) if (k := group.count(index))]
            model.add(sum(terms) <= held)
        points = [CARD_BY_INDEX[i].points(rules.joker_points) for i in range(53)]
        linked = sum(sum(points[i] for i in group) * use for group, use in zip(candidates, uses))
        model.maximize(linked)
        best = round(self._solve(model, cards).objective_value)
        model.add(linked == best)

        chosen: list[int] = []
        while sum(sum(points[i] for i in candidates[n]) for n in chosen) < best:
            # The next group is the lowest-numbered one still used beyond the groups fixed so far.
            last = chosen[-1] if chosen else 0
            beyond = []
            for n in range(last, len(candidates)):
                extra = model.new_bool_var(f"beyond{n}")
                model.add(uses[n] >= chosen.count(n) + 1).only_enforce_if(extra)
                model.add(uses[n] <= chosen.count(n)).only_enforce_if(extra.Not())
                beyond.append(len(candidates) - (len(candidates) - n) * extra)
            following = model.new_int_var(last, len(candidates), f"next{len(chosen)}")
            model.add_min_equality(following, beyond)
            model.minimize(following)
            solver = self._solve(model, cards)
            step = solver.value(following)
            chosen.append(step)
            model.add(following == step)
        return linking_from_parts(cards, [candidates[n] for n in chosen], rules)

    def _solve(self, model: cp_model.CpModel, cards: tuple[Card, ...]) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = DETERMINISTIC_CAP
        solver.parameters.max_time_in_seconds = self.wall_cap_seconds
        status = solver.solve(model)
        if status != cp_model.OPTIMAL:
            hand = " ".join(card.code() for card in cards)
            raise SolverError(f"CP-SAT found no proven optimum ({solver.status_name(status)}) for {hand}")
        return solver
