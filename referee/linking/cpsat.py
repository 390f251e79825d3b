"""The default engine: best linking as an integer program solved by OR-Tools CP-SAT.

One integer variable per candidate group (how many times the linking uses it, candidates in
canonical order, see ``candidates``), one capacity constraint per card kind. When the hand has
few candidate groups (most hands), one solve of one weighted objective gives the canonical
answer directly. Otherwise the first solve
maximises the linked points. Then the canonical linking among the optimal ones (``Linking.rank``: its groups in
ascending candidate order, lexicographically first) is fixed group by group: each further solve
minimises the number of the next group, given the ones already fixed. A linking holds at most
``len(hand) // 3`` groups, so that is at most four small solves. (Folding the first group into
the first solve's objective saved a solve but made that solve slower to prove.) Every solve must
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
from referee.linking.candidates import Candidate, candidate_groups
from referee.rules import RuleSet

# Deterministic time units, not seconds: the same hand stops at the same point on any machine.
DETERMINISTIC_CAP = 20.0
# One weighted objective is used while its largest possible value stays well inside 64 bits.
_ONE_SOLVE_LIMIT = 1 << 60

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
        points = [CARD_BY_INDEX[i].points(rules.joker_points) for i in range(53)]
        # A group worth no points (jokers only, when jokers score 0) never belongs to the canonical
        # answer: leaving it out gives as few points and a shorter list of groups.
        candidates = [group for group in candidate_groups(counts, rules) if sum(points[i] for i in group)]
        if not candidates:
            return linking_from_parts(cards, (), rules)
        model, uses = _model(counts, candidates, cover_all=False)
        weights = [sum(points[i] for i in group) for group in candidates]
        linked = sum(w * use for w, use in zip(weights, uses))
        slots = len(cards) // 3
        base = slots + 1
        top = base ** len(candidates)
        coefficients = [top * w + base ** (len(candidates) - 1 - n) for n, w in enumerate(weights)]
        if sum(c * most for c, most in zip(coefficients, _most_uses(counts, candidates))) < _ONE_SOLVE_LIMIT:
            # Small enough for one objective: a linked point outweighs every tie-break term, and
            # group n weighs base^(N-1-n), more than all later groups of a linking together, so the
            # optimum is the lexicographically first list of groups among the best linkings.
            model.maximize(sum(c * use for c, use in zip(coefficients, uses)))
            solver = self._solve(model, cards)
            parts = [candidates[n] for n, use in enumerate(uses) for _ in range(solver.value(use))]
            return linking_from_parts(cards, parts, rules)

        model.maximize(linked)
        best = self._solve(model, cards).value(linked)
        model.add(linked == best)
        chosen: list[int] = []
        while sum(weights[n] for n in chosen) < best:
            # The next group is the lowest-numbered one still used beyond the groups fixed so far.
            following = _next_group(model, uses, chosen)
            model.minimize(following)
            step = self._solve(model, cards).value(following)
            chosen.append(step)
            model.add(following == step)
        return linking_from_parts(cards, [candidates[n] for n in chosen], rules)

    def links_fully(self, cards: tuple[Card, ...], rules: RuleSet) -> bool:
        """Whether the cards split into groups with none left over: one feasibility solve."""
        counts = Counter(card.index for card in cards)
        candidates = candidate_groups(counts, rules)
        if not candidates:
            return False
        model, _ = _model(counts, candidates, cover_all=True)
        solver = self._solver(cards)
        status = solver.solve(model)
        if status == cp_model.INFEASIBLE:
            return False
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise SolverError(f"CP-SAT could not decide ({solver.status_name(status)}) for {_codes(cards)}")
        return True

    def _solve(self, model: cp_model.CpModel, cards: tuple[Card, ...]) -> cp_model.CpSolver:
        solver = self._solver(cards)
        status = solver.solve(model)
        if status != cp_model.OPTIMAL:
            raise SolverError(f"CP-SAT found no proven optimum ({solver.status_name(status)}) for {_codes(cards)}")
        return solver

    def _solver(self, cards: tuple[Card, ...]) -> cp_model.CpSolver:
        cap = self.wall_cap_seconds
        deadline = _DEADLINE.get()
        if deadline is not None:
            cap = min(cap, deadline - time.monotonic())
            if cap <= 0:
                raise SolverError(f"the time budget ran out before solving (UNKNOWN) for {_codes(cards)}")
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = DETERMINISTIC_CAP
        solver.parameters.max_time_in_seconds = cap
        # These models are small and tight: presolve, probing, symmetry detection and the LP
        # relaxation cost more than they save (measured on bench.hands: presolve off about 1.7x
        # faster on end-of-deal hands, the other three off about 12% more). Answers stay proven.
        solver.parameters.cp_model_presolve = False
        solver.parameters.cp_model_probing_level = 0
        solver.parameters.symmetry_level = 0
        solver.parameters.linearization_level = 0
        return solver


class _Model(cp_model.CpModel):
    """A CpModel without the camel-case aliases, which cost about a millisecond per model."""

    def _add_pre_pep8_methods(self) -> None:
        pass


def _model(
    counts: Counter[int], candidates: list[Candidate], cover_all: bool
) -> tuple[cp_model.CpModel, list[cp_model.IntVar]]:
    """Uses of each candidate group, no card used more often than held (exactly as often: cover_all)."""
    model = _Model()
    uses = [model.new_int_var(0, most, f"group{n}") for n, most in enumerate(_most_uses(counts, candidates))]
    for index, held in sorted(counts.items()):
        used = sum(k * uses[n] for n, group in enumerate(candidates) if (k := group.count(index)))
        model.add(used == held if cover_all else used <= held)
    return model, uses


def _most_uses(counts: Counter[int], candidates: list[Candidate]) -> list[int]:
    """How many times the hand could form each candidate group on its own."""
    return [min(counts[i] // k for i, k in Counter(group).items()) for group in candidates]


def _next_group(model: cp_model.CpModel, uses: list[cp_model.IntVar], chosen: list[int]) -> cp_model.IntVar:
    """A variable equal to the lowest candidate number used beyond ``chosen`` (len(uses) if none)."""
    none = len(uses)
    last = chosen[-1] if chosen else 0
    beyond = []
    for n in range(last, none):
        extra = model.new_bool_var(f"beyond{len(chosen)}_{n}")
        model.add(uses[n] >= chosen.count(n) + 1).only_enforce_if(extra)
        model.add(uses[n] <= chosen.count(n)).only_enforce_if(extra.Not())
        beyond.append(none - (none - n) * extra)
    following = model.new_int_var(last, none, f"next{len(chosen)}")
    model.add_min_equality(following, beyond)
    return following


def _codes(cards: tuple[Card, ...]) -> str:
    return " ".join(card.code() for card in cards)
