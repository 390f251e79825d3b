"""Field paths: a domain error names its field relative to its object; ``rooted_at`` roots it once."""

from __future__ import annotations

import pytest

from referee.game.errors import InvalidCardError, InvalidOptionError, RefereeError, rooted_at
from referee.game.rules import CloseKind, RuleSet


@pytest.mark.parametrize(
    ("field", "root", "rooted"),
    [
        ("decks", "rules", "rules.decks"),
        ("[3]", "cards", "cards[3]"),
        ("players[2].cards[7]", "deal", "deal.players[2].cards[7]"),
        ("", "claimed_kind", "claimed_kind"),
        ("decks", "", "decks"),
    ],
)
def test_rooting_places_the_path_under_the_root(field: str, root: str, rooted: str) -> None:
    error = InvalidCardError(field, "XX", "not a card code").at(root)
    assert type(error) is InvalidCardError
    assert (error.field, error.value, error.message) == (rooted, "XX", "not a card code")


def test_rooted_at_roots_every_error_raised_inside_once() -> None:
    with pytest.raises(InvalidOptionError) as caught, rooted_at("close"), rooted_at("rules"):
        RuleSet(decks=9)
    assert caught.value.field == "close.rules.decks"
    assert str(caught.value) == "close.rules.decks: decks must be 1 to 4 (9)"


def test_rooted_at_lets_other_errors_through_unchanged() -> None:
    with pytest.raises(KeyError), rooted_at("rules"):
        raise KeyError("x")


def test_a_rule_set_names_its_options_relative_to_itself() -> None:
    with pytest.raises(RefereeError) as caught:
        RuleSet(multipliers={CloseKind.LINKED: 0})
    assert caught.value.field == "multipliers[LINKED]"
