"""Sample deals: valid, distinct, the same for a seed, and a Deal message that maps back exactly."""

from __future__ import annotations

from referee.api.convert import deal_from_proto, deal_to_proto
from referee.game.rules import RuleSet
from referee.game.samples import sample_deals
from referee.game.scoring import score_deal


def test_sample_deals_are_valid_distinct_closes_the_same_for_a_seed() -> None:
    deals = sample_deals(5, 20)
    assert deals == sample_deals(5, 20)
    assert len({tuple(tuple(sorted(p.cards)) for p in deal.players) for deal in deals}) == 20
    for deal in deals:
        assert len(deal.players) == 4
        result = score_deal(deal, RuleSet())  # raises on any broken count or card
        assert result.close.valid


def test_a_deal_message_maps_back_to_the_same_deal() -> None:
    for deal in sample_deals(6, 5, players=3):
        assert deal_from_proto(deal_to_proto(deal)) == deal
