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

import time
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from ortools.sat.python import cp_model

from referee.cards import CARD_BY_INDEX, Card
from referee.errors import SolverError
from referee.linking.base import Linking, linking_from_parts
from referee.linking.candidates import candidate_groups
from referee.rules import RuleSet

# Deterministic time units, not seconds: the same hand stops at the same point on any machine.
DETERMINISTIC_CAP = 20.0
# A wall-clock cap per solve; a caller's time budget (``time_budget``) may lower it.
WALL_CAP_SECONDS = 10.0

# The monotonic time by which the current call must be answered (None: no budget). A context
# variable, so each server thread (and each asyncio task) carries its own.
_DEADLINE: ContextVar[float | None] = ContextVar("referee_solve_deadline", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Within this block every CP-SAT solve ends by ``seconds`` from now, or raises SolverError."""
    token = _DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


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
        hand = " ".join(card.code() for card in cards)
        cap = self.wall_cap_seconds
        deadline = _DEADLINE.get()
        if deadline is not None:
            cap = min(cap, deadline - time.monotonic())
            if cap <= 0:
                raise SolverError(f"the time budget ran out before solving (UNKNOWN) for {hand}")
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = DETERMINISTIC_CAP
        solver.parameters.max_time_in_seconds = cap
        # These models are small and tight: presolve costs more than it saves (measured about
        # 1.7x faster without it on end-of-deal hands).
        solver.parameters.cp_model_presolve = False
        status = solver.solve(model)
        if status != cp_model.OPTIMAL:
            raise SolverError(f"CP-SAT found no proven optimum ({solver.status_name(status)}) for {hand}")
        return solver
