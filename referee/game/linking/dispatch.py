"""Choosing the engine a rule set names, and the checks every hand passes first."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from importlib import import_module
from typing import Protocol

from referee.game.cards import CARD_BY_INDEX, Card, check_copies, sort_cards
from referee.game.errors import InvalidCardError
from referee.game.limits import HAND_CARDS
from referee.game.linking.base import Linking, LinkingEngine
from referee.game.linking.budget import check_time_left
from referee.game.rules import Engine, RuleSet

MAX_HAND = HAND_CARDS.most


class _Engines(Mapping[Engine, LinkingEngine]):
    """The engines, each built (and its module imported) when first asked for: a command that only
    uses the search engine does not load OR-Tools."""

    _CLASSES = {
        Engine.CPSAT: ("referee.game.linking.cpsat", "CpSatEngine"),
        Engine.SEARCH: ("referee.game.linking.search", "SearchEngine"),
        Engine.AUDIT: ("referee.game.linking.audit", "AuditEngine"),
    }

    def __init__(self) -> None:
        self._built: dict[Engine, LinkingEngine] = {}

    def __getitem__(self, name: Engine) -> LinkingEngine:
        engine = self._built.get(name)
        if engine is None:
            module, cls = self._CLASSES[name]
            engine = self._built[name] = getattr(import_module(module), cls)()
        return engine

    def __iter__(self) -> Iterator[Engine]:
        return iter(self._CLASSES)

    def __len__(self) -> int:
        return len(self._CLASSES)


_ENGINES = _Engines()


class LinkingObserver(Protocol):
    """Who wants to know how the linking cache and the engines fare (the service's metrics): the
    domain reports to it and names no metrics library."""

    def looked_up(self, hit: bool) -> None:
        """One lookup of the cache of best linkings."""

    def solved(self, engine: str, seconds: float) -> None:
        """One hand solved by ``engine`` (a cache miss) in ``seconds``."""


_observer: LinkingObserver | None = None
# Set by ``_cached`` when it runs, i.e. on a miss: lru_cache does not say which a lookup was.
_lookup = threading.local()


def observe_linkings(observer: LinkingObserver | None) -> None:
    """Report every lookup of the linking cache and every engine solve to ``observer`` (None: stop)."""
    global _observer
    _observer = observer


def linkings_observer() -> LinkingObserver | None:
    """The observer ``observe_linkings`` set, or None."""
    return _observer


def load_engines() -> None:
    """Build every engine now (a server does, before its first call)."""
    for name in _ENGINES:
        _ENGINES[name]


def engine_for(rules: RuleSet) -> LinkingEngine:
    """The engine ``rules.engine`` names."""
    return _ENGINES[rules.engine]


def best_linking(cards: Iterable[Card], rules: RuleSet, field: str = "cards") -> Linking:
    """The canonical best linking of a hand of 1 to 11 cards under ``rules``; ``field`` names the hand in errors."""
    check_time_left()  # every hand a call looks up, cached or not, is work done within its budget
    hand = tuple(cards)
    if not 1 <= len(hand) <= MAX_HAND:
        raise InvalidCardError(field, len(hand), f"a hand holds 1 to {MAX_HAND} cards")
    # The cards' indices, ascending, key the cache: ints hash and sort in C, cards through Python
    # methods, and on a hand with no group that overhead is as long as the search.
    indices = sorted([card.index for card in hand])
    if len(set(indices)) < len(indices):  # every card once is within any deck (decks >= 1)
        check_copies(hand, rules.decks, lambda i: f"{field}[{i}]")
    observer = _observer
    if observer is None:
        return _cached(tuple(indices), rules)
    _lookup.missed = False
    linking = _cached(tuple(indices), rules)
    observer.looked_up(hit=not _lookup.missed)
    return linking


@lru_cache(maxsize=4096)
def _cached(indices: tuple[int, ...], rules: RuleSet) -> Linking:
    """The best linking of the hand of these card indices (ascending)."""
    hand = tuple([CARD_BY_INDEX[i] for i in indices])
    observer = _observer
    if observer is None:
        return _ENGINES[rules.engine].best_linking(hand, rules)
    _lookup.missed = True
    start = time.perf_counter()
    try:
        return _ENGINES[rules.engine].best_linking(hand, rules)
    finally:
        observer.solved(rules.engine, time.perf_counter() - start)


def forget_linkings() -> None:
    """Empty the caches of best linkings and of hands that link fully (a benchmark times each hand
    cold; a test sees a hand solved again)."""
    _cached.cache_clear()
    _links_fully.cache_clear()


def links_fully(cards: Iterable[Card], rules: RuleSet) -> bool:
    """Whether the cards split into groups with none left over (engines may answer this faster)."""
    return _links_fully(sort_cards(cards), rules)


@lru_cache(maxsize=4096)
def _links_fully(hand: tuple[Card, ...], rules: RuleSet) -> bool:
    engine = _ENGINES[rules.engine]
    decide = getattr(engine, "links_fully", None)
    if decide:
        return bool(decide(hand, rules))
    # A best linking may leave jokers worth 0 out though the cards link in full; with every card
    # worth a point it leaves nothing exactly when they do (the groups do not depend on points).
    indices = tuple([card.index for card in hand])
    return _cached(indices, rules if rules.joker_points else rules.with_options(joker_points=1)).fully_linked
