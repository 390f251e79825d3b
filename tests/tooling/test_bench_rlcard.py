"""The benchmark against RLCard (``bench.rlcard``): its hands are gin-compatible, and on them the
search engine and RLCard's gin rummy melding give the same answer.

RLCard is in the bench extra, not among the tests' requirements: the comparison with it runs
where it is installed (``make bench-extra``) and says why it skips elsewhere.
"""

from __future__ import annotations

import pytest

from bench import rlcard as bench_rlcard
from referee.game.cards import parse_cards, sort_cards


def test_the_hands_are_ten_distinct_naturals_of_one_deck_from_a_fixed_seed() -> None:
    hands = bench_rlcard.gin_hands(7, 300)
    assert hands == bench_rlcard.gin_hands(7, 300)
    assert len(set(hands)) == 300
    for hand in hands:
        assert len(set(hand)) == len(hand) == 10
        assert not any(card.is_joker for card in hand)
        assert hand == sort_cards(hand)
        assert not bench_rlcard.ace_high_possible(hand)


@pytest.mark.parametrize(
    ("codes", "possible"),
    [
        ("QH KH AH 2C 5D 7S 9S 10D JC 3H", True),
        ("QS KS AS", True),
        ("QH KH AS 2C 5D 7S 9S 10D JC 3H", False),
        ("QH KD AH 2C 5D 7S 9S 10D JC 3H", False),
        ("JH QH KH 2C 5D 7S 9S 10D JC 3H", False),
    ],
)
def test_an_ace_high_run_needs_a_suits_queen_king_and_ace(codes: str, possible: bool) -> None:
    assert bench_rlcard.ace_high_possible(parse_cards(codes.split())) is possible


def test_the_benchmark_agrees_with_rlcard_where_it_is_installed(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rlcard", reason="RLCard is in the bench extra: make bench-extra installs it")
    assert bench_rlcard.main(["--count", "60", "--rounds", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "answers: the same points and groups on every hand" in out
    assert "60 gin-compatible hands" in out
