"""Choosing the engine a rule set names, and the checks every hand passes first."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from referee.cards import Card, check_copies, sort_cards
from referee.errors import InvalidCardError
from referee.linking.base import Linking, LinkingEngine
from referee.linking.audit import AuditEngine
from referee.linking.cpsat import CpSatEngine
from referee.linking.search import SearchEngine
from referee.rules import RuleSet

MAX_HAND = 11

# "audit" runs "cpsat" and "search" on every hand and raises EngineDisagreementError when they differ.
_ENGINES: dict[str, LinkingEngine] = {
    "cpsat": CpSatEngine(),
    "search": SearchEngine(),
    "audit": AuditEngine(),
}


def engine_for(rules: RuleSet) -> LinkingEngine:
    """The engine ``rules.engine`` names."""
    return _ENGINES[rules.engine]


def best_linking(cards: Iterable[Card], rules: RuleSet, field: str = "cards") -> Linking:
    """The canonical best linking of a hand of 1 to 11 cards under ``rules``."""
    hand = tuple(cards)
    if not 1 <= len(hand) <= MAX_HAND:
        raise InvalidCardError(field, len(hand), f"a hand holds 1 to {MAX_HAND} cards")
    check_copies(hand, rules.decks, lambda i: f"{field}[{i}]")
    return _cached(sort_cards(hand), rules)


@lru_cache(maxsize=4096)
def _cached(hand: tuple[Card, ...], rules: RuleSet) -> Linking:
    return _ENGINES[rules.engine].best_linking(hand, rules)


def links_fully(cards: Iterable[Card], rules: RuleSet) -> bool:
    """Whether the cards split into groups with none left over (engines may answer this faster)."""
    return _links_fully(sort_cards(cards), rules)


@lru_cache(maxsize=4096)
def _links_fully(hand: tuple[Card, ...], rules: RuleSet) -> bool:
    engine = _ENGINES[rules.engine]
    decide = getattr(engine, "links_fully", None)
    return bool(decide(hand, rules)) if decide else _cached(hand, rules).fully_linked
