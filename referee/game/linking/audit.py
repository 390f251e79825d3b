"""Audit mode: every hand goes through two independent exact engines, which must agree.

The CP-SAT model and the memoised search share nothing but the rule book, so an answer both give
is unlikely to be a shared mistake. Any difference, in points or only in the canonical groups, is
an error naming the hand and both answers; it is never resolved by picking one.
"""

from __future__ import annotations

from referee.game.cards import Card, format_cards
from referee.game.errors import EngineDisagreementError
from referee.game.linking.base import Linking, LinkingEngine
from referee.game.linking.cpsat import CpSatEngine
from referee.game.linking.search import SearchEngine
from referee.game.rules import Engine, RuleSet


class AuditEngine:
    """Runs a primary and a second engine on every hand; returns the answer only when they agree."""

    name = Engine.AUDIT

    def __init__(self, primary: LinkingEngine | None = None, second: LinkingEngine | None = None) -> None:
        self.primary: LinkingEngine = primary if primary is not None else CpSatEngine()
        self.second: LinkingEngine = second if second is not None else SearchEngine()

    def best_linking(self, cards: tuple[Card, ...], rules: RuleSet) -> Linking:
        """The canonical best linking of ``cards``, checked by both engines."""
        first = self.primary.best_linking(cards, rules)
        other = self.second.best_linking(cards, rules)
        if first != other:
            raise EngineDisagreementError(self._describe(cards, rules, first, other))
        return first

    def _describe(self, cards: tuple[Card, ...], rules: RuleSet, first: Linking, other: Linking) -> str:
        a, b = self.primary.name, self.second.name
        if first.points != other.points:
            what = f"points differ ({a} {first.points}, {b} {other.points})"
        elif [g.key for g in first.groups] != [g.key for g in other.groups]:
            what = f"same points ({first.points}) but the groups differ"
        else:
            what = "same points and groups but the groups are laid out differently"
        decks, joker_points, wrap_runs, joker_limit = rules.linking_key()
        return (
            f"engines {a} and {b} disagree on the hand {format_cards(cards)} "
            f"(decks={decks}, joker_points={joker_points}, wrap_runs={wrap_runs}, joker_limit={joker_limit.value}): "
            f"{what}; {a}: {_show(first)}; {b}: {_show(other)}"
        )


def _show(linking: Linking) -> str:
    groups = " | ".join(str(group) for group in linking.groups) or "no groups"
    unlinked = format_cards(linking.unlinked) or "nothing"
    return f"groups [{groups}], unlinked [{unlinked}] = {linking.points}"
