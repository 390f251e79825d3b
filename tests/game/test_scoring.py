"""Deal scoring and match progress (RULES §5), every expected value worked out by hand.

Hands used throughout (best-linking points by hand, joker = 20):
- CLOSER_LC  2C 3C 4C 6D 6H 6S 8S 8D 8C 8H + discard KC: LINKED_CLEAN, ×2.
- CLOSER_SF  AD..10D + discard JD: STRAIGHT_FLUSH_CLEAN, ×6.
- CLOSER_BAD nothing links, not one suit: no close.
- HAND_33    AH 2H 3H | 5C 5D 5S | KS KD 9C 4D left: 10 + 10 + 9 + 4 = 33.
- HAND_40    5H JK JK 8H | 9C KD QS 2D 6S 3C left: 9 + 10 + 10 + 2 + 6 + 3 = 40.
- HAND_57    nothing links: 1 + 3 + 5 + 7 + 9 + 10 + 10 + 2 + 4 + 6 = 57.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.game.cards import Card, parse_cards
from referee.game.deal import Deal, PlayerHand
from referee.game.errors import InvalidDealError
from referee.game.rules import CloseKind, RuleSet, ScoringMode, ScoringRules
from referee.game.scoring import DealResult, score_deal

CLOSER_LC = ("2C 3C 4C 6D 6H 6S 8S 8D 8C 8H", "KC")
CLOSER_SF = ("AD 2D 3D 4D 5D 6D 7D 8D 9D 10D", "JD")
CLOSER_BAD = ("AC 3D 5H 7S 10C JD KH 2S 4C 6D", "8H")
HAND_33 = "AH 2H 3H 5C 5D 5S KS KD 9C 4D"
HAND_40 = "JK JK 5H 9C KD QS 2D 6S 8H 3C"
HAND_57 = "AS 3S 5S 7D 9D JH KC 2H 4H 6C"

HTH, POOL, ELIM = ScoringMode.HEAD_TO_HEAD, ScoringMode.POOL, ScoringMode.ELIMINATION


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def rules(mode: ScoringMode | None = None, **params: int) -> RuleSet:
    return RuleSet(scoring=ScoringRules(mode=mode, **params))


def play(
    closer: tuple[str, str],
    others: list[str],
    ruleset: RuleSet,
    scores: list[int | None] | None = None,
    closer_at: int = 0,
) -> DealResult:
    """Score a deal: the closer sits at ``closer_at``, the others in order around it."""
    hands = list(others)
    hands.insert(closer_at, closer[0])
    names = ["Ana", "Beto", "Carla", "Dani", "Eva"][: len(hands)]
    scores = scores or [None] * len(hands)
    players = tuple(PlayerHand(n, cards(h), s) for n, h, s in zip(names, hands, scores))
    return score_deal(Deal(players=players, closer=closer_at, discard=Card.parse(closer[1])), ruleset)


def changes(result: DealResult) -> list[int]:
    return [p.score_change for p in result.players]


def totals(result: DealResult) -> list[int]:
    return [p.score for p in result.players]


def test_hands_have_the_points_worked_out_by_hand() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40, HAND_57], rules(POOL))
    assert result.close.kind is CloseKind.LINKED_CLEAN
    assert [p.points for p in result.players] == [0, 33, 40, 57]
    assert [p.closer for p in result.players] == [True, False, False, False]


# --- HEAD_TO_HEAD ---------------------------------------------------------------------------


@pytest.mark.parametrize("closer_at", [0, 1])
def test_head_to_head_defaults(closer_at: int) -> None:
    result = play(CLOSER_LC, [HAND_33], rules(), closer_at=closer_at)
    assert result.scoring.mode is HTH
    assert result.scoring.start_score == 0 and result.scoring.target == 150
    closer, other = result.players[closer_at], result.players[1 - closer_at]
    assert (closer.score_change, closer.score) == (66, 66)
    assert (other.score_change, other.score) == (0, 0)
    assert not closer.eliminated and not other.eliminated
    assert result.match_over is False
    assert result.winner is None


def test_head_to_head_other_keeps_its_score() -> None:
    result = play(CLOSER_LC, [HAND_33], rules(HTH), scores=[10, 140])
    assert changes(result) == [66, 0]
    assert totals(result) == [76, 140]
    assert result.winner is None


@pytest.mark.parametrize(("incoming", "over"), [(84, True), (83, False), (120, True)])
def test_head_to_head_reaching_the_target(incoming: int, over: bool) -> None:
    result = play(CLOSER_LC, [HAND_33], rules(HTH), scores=[incoming, 0])
    assert result.players[0].score == incoming + 66
    assert result.match_over is over
    assert result.winner == ("Ana" if over else None)


@pytest.mark.parametrize(("target", "over"), [(160, True), (166, True), (167, False)])
def test_head_to_head_changed_start_and_target(target: int, over: bool) -> None:
    result = play(CLOSER_LC, [HAND_33], rules(HTH, start_score=100, target=target))
    assert totals(result) == [166, 100]
    assert result.match_over is over
    assert result.winner == ("Ana" if over else None)


def test_head_to_head_multiplier_on_every_loser() -> None:
    # Three players in HEAD_TO_HEAD mode: the closer takes (33 + 40) × 2; nobody loses points.
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(HTH))
    assert changes(result) == [146, 0, 0]
    assert totals(result) == [146, 0, 0]


def test_head_to_head_never_eliminates() -> None:
    # No score puts a player out: the lowest reachable one (the start) stays in, a loss or not.
    result = play(CLOSER_LC, [HAND_33], rules(HTH), scores=[0, 0])
    assert [p.eliminated for p in result.players] == [False, False]
    assert result.winner is None


# --- POOL -----------------------------------------------------------------------------------


def test_pool_defaults_three_players() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules())
    assert result.scoring.mode is POOL
    # closer: (33 + 40) × 2 + 40 bonus = 186; others lose P × 2.
    assert changes(result) == [186, -66, -80]
    assert totals(result) == [386, 134, 120]
    assert not any(p.eliminated for p in result.players)
    assert result.match_over is False
    assert result.winner is None


def test_pool_multiplier_six_on_every_loser_bonus_once() -> None:
    result = play(CLOSER_SF, [HAND_33, HAND_40, HAND_57], rules())
    assert result.close.kind is CloseKind.STRAIGHT_FLUSH_CLEAN
    assert result.close.multiplier == 6
    # losers: 33×6 = 198, 40×6 = 240, 57×6 = 342; closer 780 + 40 = 820.
    assert changes(result) == [820, -198, -240, -342]
    assert totals(result) == [1020, 2, -40, -142]
    assert [p.eliminated for p in result.players] == [False, False, True, True]
    assert result.match_over is True
    assert result.winner == "Ana"


@pytest.mark.parametrize(("bonus", "closer_change"), [(40, 186), (25, 171), (0, 146), (100, 246)])
def test_pool_bonus_added_once_not_multiplied(bonus: int, closer_change: int) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(POOL, close_bonus=bonus))
    assert changes(result) == [closer_change, -66, -80]


def test_pool_bonus_with_a_single_loser_not_doubled() -> None:
    # ×2 close: 33 × 2 + 40 = 106 (a multiplied bonus would give 146).
    result = play(CLOSER_LC, [HAND_33], rules(POOL))
    assert changes(result) == [106, -66]
    assert totals(result) == [306, 134]


@pytest.mark.parametrize(("target", "winner"), [(1200, None), (1186, "Ana"), (1100, "Ana")])
def test_pool_changed_start_and_target(target: int, winner: str | None) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(POOL, start_score=1000, target=target))
    assert totals(result) == [1186, 934, 920]
    assert result.winner == winner
    assert result.match_over is (winner is not None)


@pytest.mark.parametrize(("incoming", "out"), [(66, False), (65, True), (67, False), (1, True)])
def test_pool_out_below_zero(incoming: int, out: bool) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(), scores=[200, incoming, 200])
    assert result.players[1].score == incoming - 66
    assert result.players[1].eliminated is out
    assert result.players[2].eliminated is False
    assert result.winner is None


@pytest.mark.parametrize(("incoming", "over"), [(314, True), (313, False)])
def test_pool_closer_reaching_500(incoming: int, over: bool) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(), scores=[incoming, 200, 200])
    assert result.players[0].score == incoming + 186
    assert result.match_over is over
    assert result.winner == ("Ana" if over else None)


def test_pool_last_one_left_wins_below_target() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(), scores=[100, 60, 79])
    assert totals(result) == [286, -6, -1]
    assert [p.eliminated for p in result.players] == [False, True, True]
    assert result.match_over is True
    assert result.winner == "Ana"


def test_pool_changed_start_eliminates_everyone_else() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(POOL, start_score=50, target=10_000, close_bonus=10))
    assert totals(result) == [50 + 146 + 10, -16, -30]
    assert result.winner == "Ana"


# --- ELIMINATION ----------------------------------------------------------------------------


def test_elimination_defaults() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(ELIM))
    assert result.scoring.start_score == 0 and result.scoring.limit == 100
    assert changes(result) == [0, 66, 80]
    assert totals(result) == [0, 66, 80]
    assert not any(p.eliminated for p in result.players)
    assert result.winner is None and result.match_over is False


def test_elimination_exactly_at_limit_is_not_out() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(ELIM), scores=[90, 34, 21])
    assert totals(result) == [90, 100, 101]
    assert [p.eliminated for p in result.players] == [False, False, True]
    assert result.winner is None
    assert result.match_over is False


def test_elimination_last_one_left() -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(ELIM), scores=[90, 35, 21])
    assert totals(result) == [90, 101, 101]
    assert [p.eliminated for p in result.players] == [False, True, True]
    assert result.match_over is True
    assert result.winner == "Ana"


@pytest.mark.parametrize(
    ("limit", "start", "scores", "out", "winner"),
    [
        (60, 10, [10, 76, 90], [False, True, True], "Ana"),
        (80, 10, [10, 76, 90], [False, False, True], None),
        (200, 0, [0, 66, 80], [False, False, False], None),
    ],
)
def test_elimination_changed_limit_and_start(
    limit: int, start: int, scores: list[int], out: list[bool], winner: str | None
) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(ELIM, limit=limit, start_score=start))
    assert totals(result) == scores
    assert [p.eliminated for p in result.players] == out
    assert result.winner == winner


def test_elimination_multiplier_six_on_every_loser() -> None:
    result = play(CLOSER_SF, [HAND_33, HAND_40, HAND_57], rules(ELIM, limit=300))
    assert changes(result) == [0, 198, 240, 342]
    assert [p.eliminated for p in result.players] == [False, False, False, True]
    assert result.winner is None


def test_elimination_closer_never_wins_by_target() -> None:
    # ELIMINATION has no target: a closer at or above one does not end the match.
    result = play(CLOSER_SF, [HAND_33], rules(ELIM, target=1, start_score=5, limit=1000))
    assert totals(result) == [5, 5 + 198]
    assert result.winner is None
    assert result.match_over is False


# --- invalid close --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [HTH, POOL, ELIM])
def test_invalid_close_scores_nothing(mode: ScoringMode) -> None:
    result = play(CLOSER_BAD, [HAND_33, HAND_40], rules(mode))
    assert result.close.valid is False
    assert result.close.multiplier == 0
    assert changes(result) == [0, 0, 0]
    start = result.scoring.start_score
    assert totals(result) == [start, start, start]
    assert not any(p.eliminated for p in result.players)
    assert result.winner is None


def test_invalid_close_with_incoming_scores_keeps_them() -> None:
    result = play(CLOSER_BAD, [HAND_33, HAND_40], rules(POOL), scores=[480, 3, 7])
    assert totals(result) == [480, 3, 7]


# --- mode defaulting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("others", "mode", "expected_changes"),
    [
        ([HAND_33], HTH, [66, 0]),
        ([HAND_33, HAND_40], POOL, [186, -66, -80]),
        ([HAND_33, HAND_40, HAND_57], POOL, [300, -66, -80, -114]),
    ],
)
def test_mode_defaults_by_player_count(others: list[str], mode: ScoringMode, expected_changes: list[int]) -> None:
    result = play(CLOSER_LC, others, RuleSet())
    assert result.scoring.mode is mode
    assert changes(result) == expected_changes


def test_four_player_pool_reaches_the_target_exactly() -> None:
    # (33 + 40 + 57) × 2 + 40 = 300; 200 + 300 = 500 = target.
    result = play(CLOSER_LC, [HAND_33, HAND_40, HAND_57], RuleSet())
    assert totals(result) == [500, 134, 120, 86]
    assert result.winner == "Ana"


def test_explicit_mode_overrides_the_default() -> None:
    result = play(CLOSER_LC, [HAND_33], rules(POOL))
    assert result.scoring.mode is POOL
    assert result.scoring.start_score == 200


# --- eliminated players sent again ----------------------------------------------------------


def test_player_named_in_eliminated_is_rejected() -> None:
    players = (
        PlayerHand("Ana", cards(CLOSER_LC[0])),
        PlayerHand("Beto", cards(HAND_33)),
        PlayerHand("Carla", cards(HAND_40)),
    )
    deal = Deal(players=players, closer=0, discard=Card.parse("KC"), eliminated=("Dani", "Carla"))
    with pytest.raises(InvalidDealError) as caught:
        score_deal(deal, RuleSet())
    assert caught.value.field == "players[2].name"
    assert "Carla" in str(caught.value)


def test_eliminated_names_not_playing_are_fine() -> None:
    players = (
        PlayerHand("Ana", cards(CLOSER_LC[0])),
        PlayerHand("Beto", cards(HAND_33)),
        PlayerHand("Carla", cards(HAND_40)),
    )
    deal = Deal(players=players, closer=0, discard=Card.parse("KC"), eliminated=("Dani",))
    assert changes(score_deal(deal, RuleSet())) == [186, -66, -80]


@pytest.mark.parametrize(
    ("mode", "scores", "field"),
    [
        (POOL, [200, 200, -1], "players[2].score"),
        (POOL, [-5, 200, 200], "players[0].score"),
        (ELIM, [0, 101, 0], "players[1].score"),
        (ELIM, [0, 0, 250], "players[2].score"),
        # The match is already over: a score at or above the target.
        (HTH, [0, 150, 0], "players[1].score"),
        (HTH, [0, 0, 200], "players[2].score"),
        (POOL, [500, 200, 200], "players[0].score"),
        (POOL, [200, 600, 200], "players[1].score"),
        # Below the start where scores only grow.
        (HTH, [0, -1, 0], "players[1].score"),
        (ELIM, [0, 0, -40], "players[2].score"),
    ],
)
def test_incoming_score_no_match_reaches_is_rejected(mode: ScoringMode, scores: list[int], field: str) -> None:
    with pytest.raises(InvalidDealError) as caught:
        play(CLOSER_LC, [HAND_33, HAND_40], rules(mode), scores=scores)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("mode", "scores"),
    [(POOL, [200, 0, 200]), (POOL, [499, 0, 1]), (ELIM, [0, 100, 0]), (HTH, [0, 149, 0]), (HTH, [0, 0, 0])],
)
def test_incoming_score_at_the_edge_is_accepted(mode: ScoringMode, scores: list[int]) -> None:
    result = play(CLOSER_LC, [HAND_33, HAND_40], rules(mode), scores=scores)  # type: ignore[arg-type]
    assert result.close.valid


def test_unreachable_incoming_scores_name_the_score() -> None:
    # Two players, one already at 200 of a 150 target; a POOL player at 600 of 500.
    with pytest.raises(InvalidDealError, match="target 150") as caught:
        play(CLOSER_LC, [HAND_33], RuleSet(), scores=[0, 200])
    assert caught.value.field == "players[1].score"
    with pytest.raises(InvalidDealError, match="target 500") as caught:
        play(CLOSER_LC, [HAND_33, HAND_40], RuleSet(), scores=[200, 600, 200])
    assert caught.value.field == "players[1].score"


def test_changed_start_and_target_move_the_reachable_scores() -> None:
    hth = rules(HTH, start_score=100, target=300)
    assert play(CLOSER_LC, [HAND_33], hth, scores=[100, 299]).close.valid
    for scores in ([99, 100], [100, 300]):
        with pytest.raises(InvalidDealError):
            play(CLOSER_LC, [HAND_33], hth, scores=scores)  # type: ignore[arg-type]


def test_every_players_points_are_their_linkings_the_closers_too() -> None:
    # ELIMINATION, a color closer with one loose card (5H): P is 5 and reported, never charged.
    color = ("AH 2H 3H 5H 7H 8H 9H JH QH KH", "4C")
    result = play(color, [HAND_33], rules(ELIM))
    assert result.close.kind is CloseKind.COLOR_CLEAN
    ana, beto = result.players
    assert (ana.points, ana.linking.points, ana.score_change) == (5, 5, 0)
    assert (beto.points, beto.score_change) == (33, 132)
    for mode in (HTH, POOL, ELIM):
        for player in play(color, [HAND_33, HAND_40], rules(mode)).players:
            assert player.points == player.linking.points


# --- the incoming state against an independent reading of RULES §5 ------------------------------


def reachable(mode: str, score: int, start: int, target: int, limit: int) -> bool:
    """RULES §5 read literally: the match not over, the player not out, no score below the start
    where scores only grow."""
    if mode in ("HEAD_TO_HEAD", "POOL") and score >= target:
        return False
    if mode == "POOL" and score < 0:
        return False
    if mode == "ELIMINATION" and score > limit:
        return False
    return not (mode in ("HEAD_TO_HEAD", "ELIMINATION") and score < start)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    mode=st.sampled_from(["HEAD_TO_HEAD", "POOL", "ELIMINATION"]),
    start=st.integers(0, 300),
    span=st.integers(1, 400),
    score=st.integers(-50, 800),
    seat=st.integers(0, 2),
)
def test_an_incoming_score_is_accepted_exactly_when_reachable(
    mode: str, start: int, span: int, score: int, seat: int
) -> None:
    target = limit = start + span
    ruleset = rules(ScoringMode(mode), start_score=start, target=target, limit=limit)
    scores: list[int | None] = [None, None, None]
    scores[seat] = score
    if reachable(mode, score, start, target, limit):
        assert play(CLOSER_LC, [HAND_33, HAND_40], ruleset, scores=scores).close.valid
    else:
        with pytest.raises(InvalidDealError) as caught:
            play(CLOSER_LC, [HAND_33, HAND_40], ruleset, scores=scores)
        assert caught.value.field == f"players[{seat}].score"
