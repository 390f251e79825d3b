"""An end-of-deal state and its checks (RULES §6): player counts, card counts, the deck."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from referee.game.cards import Card, check_copies, deck_counts, deck_size
from referee.game.errors import InvalidDealError
from referee.game.rules import RuleSet

MIN_PLAYERS = 2
HAND = 10


def most_players(decks: int) -> int:
    """The most players the deck deals 10 cards each plus the face-up card: ⌊(deck size − 1) / 10⌋
    (10 with two decks, 16 with three)."""
    return (deck_size(decks) - 1) // HAND


@dataclass(frozen=True, slots=True)
class PlayerHand:
    """A player at the end of a deal: name, cards shown, match score before the deal (None: start)."""

    name: str
    cards: tuple[Card, ...]
    score: int | None = None


@dataclass(frozen=True, slots=True)
class Deal:
    """An end-of-deal state: the hands, who closed, the close discard, optionally the piles."""

    players: tuple[PlayerHand, ...]
    closer: int
    discard: Card
    discard_pile: tuple[Card, ...] | None = None
    stock: tuple[Card, ...] | None = None
    eliminated: tuple[str, ...] = ()

    @property
    def closer_hand(self) -> PlayerHand:
        """The closer's hand (10 shown cards)."""
        return self.players[self.closer]


def check_deal(deal: Deal, rules: RuleSet) -> None:
    """Raise naming the field (relative to the deal) and value when the deal breaks RULES §6."""
    players = deal.players
    most = most_players(rules.decks)
    if not MIN_PLAYERS <= len(players) <= most:
        raise InvalidDealError(
            "players", len(players), f"a deal with {rules.decks} decks has {MIN_PLAYERS} to {most} players"
        )
    if not 0 <= deal.closer < len(players):
        raise InvalidDealError("closer", deal.closer, f"the closer must be a player index 0 to {len(players) - 1}")
    names: dict[str, int] = {}
    out = set(deal.eliminated)
    for i, player in enumerate(players):
        if player.name in names:
            raise InvalidDealError(f"players[{i}].name", player.name, f"the same name as players[{names[player.name]}]")
        names[player.name] = i
        if player.name in out:
            raise InvalidDealError(f"players[{i}].name", player.name, "this player is already out of the match")
        if len(player.cards) != HAND:
            raise InvalidDealError(f"players[{i}].cards", len(player.cards), f"every player shows exactly {HAND} cards")
    # Every card given, section by section; a field path is built only for an error.
    sections: list[tuple[str, Sequence[Card]]] = [(f"players[{i}].cards", p.cards) for i, p in enumerate(players)]
    sections.append(("discard", (deal.discard,)))
    for name, pile in (("discard_pile", deal.discard_pile), ("stock", deal.stock)):
        sections.append((f"{name}.cards", pile or ()))
    placed = [card for _, cards in sections for card in cards]

    def field_of(position: int) -> str:
        for prefix, cards in sections:
            if position < len(cards):
                return prefix if prefix == "discard" else f"{prefix}[{position}]"
            position -= len(cards)
        raise IndexError(position)

    check_copies(placed, rules.decks, field_of)
    # With no card beyond its copies, the right total means every card is there.
    if deal.discard_pile is not None and deal.stock is not None and len(placed) != deck_size(rules.decks):
        missing = deck_counts(rules.decks) - Counter(placed)
        if missing:
            card = min(missing, key=lambda c: c.index)
            raise InvalidDealError(
                "stock", card.code(), f"{sum(missing.values())} cards of the deck are missing, among them this one"
            )
