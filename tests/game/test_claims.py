"""Claims and disputes (RULES §7): claimed linkings, close kinds, points and scores, judged."""

from __future__ import annotations

import pytest

from referee.game.cards import Card, parse_cards
from referee.game.claims import (
    ClaimVerdict,
    DealClaims,
    PlayerClaim,
    Verdict,
    judge_close_claims,
    judge_deal_claims,
    judge_linking,
    judge_value,
)
from referee.game.closing import check_close
from referee.game.deal import Deal, PlayerHand
from referee.game.errors import InvalidDealError
from referee.game.groups import NotAGroup, judge_group
from referee.game.linking import best_linking
from referee.game.rules import CloseKind, JokerLimit, RuleSet
from referee.game.scoring import DealResult, score_deal

RULES = RuleSet()
HAND_33 = "AH 2H 3H 5C 5D 5S KS KD 9C 4D"  # best: A-2-3♥, 5-5-5; 33 left; 54 in all
HAND_9 = "QS KS AS 2S 3S 4S 7H 7D 7C 9D"  # best: Q-K-A♠, 2-3-4♠, 7-7-7; 9 left
HAND_40 = "JK JK 5H 9C KD QS 2D 6S 8H 3C"  # best: 5H JK JK 8H; 40 left
CLOSER = "2C 3C 4C 6D 6H 6S 8S 8D 8C 8H"  # LINKED_CLEAN with KC discarded


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def claim_linking(hand: str, groups: list[str], rules: RuleSet = RULES) -> ClaimVerdict:
    held = cards(hand)
    return judge_linking("claim.groups", held, [cards(g) for g in groups], best_linking(held, rules), rules)


# --- claimed linkings -----------------------------------------------------------------------


def test_linking_with_a_non_group_is_invalid() -> None:
    verdict = claim_linking(HAND_33, ["AH 2H 3H", "KS KD 9C"])
    assert verdict.verdict is Verdict.INVALID
    assert verdict.field == "claim.groups"
    assert verdict.expected == "33"
    assert "group 1" in verdict.reason
    assert "KS KD 9C" in verdict.reason
    why = judge_group(cards("KS KD 9C"), RULES)
    assert isinstance(why, NotAGroup)
    assert why.reason in verdict.reason


def test_linking_with_a_two_card_group_is_invalid() -> None:
    verdict = claim_linking(HAND_33, ["KS KD"])
    assert verdict.verdict is Verdict.INVALID
    assert "group 0" in verdict.reason
    assert "3" in verdict.reason


def test_linking_with_a_wrapping_run_is_invalid_by_default() -> None:
    hand = "KH AH 2H 5C 5D 5S KS KD 9C 4D"
    verdict = claim_linking(hand, ["5C 5D 5S", "KH AH 2H"])
    assert verdict.verdict is Verdict.INVALID
    assert "group 1" in verdict.reason
    wrap = RuleSet(wrap_runs=True)
    assert claim_linking(hand, ["5C 5D 5S", "KH AH 2H"], wrap).verdict is not Verdict.INVALID


def test_linking_breaking_the_joker_limit_is_invalid() -> None:
    one = RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP)
    verdict = claim_linking(HAND_40, ["5H JK JK 8H"], one)
    assert verdict.verdict is Verdict.INVALID
    assert "group 0" in verdict.reason
    assert "joker" in verdict.reason.lower()


def test_linking_with_a_card_the_hand_lacks_is_invalid() -> None:
    verdict = claim_linking(HAND_33, ["5C 5D 5S", "5H 6H 7H"])
    assert verdict.verdict is Verdict.INVALID
    assert "group 1" in verdict.reason
    assert "5H" in verdict.reason
    assert verdict.expected == "33"


def test_linking_using_a_card_twice_is_invalid() -> None:
    verdict = claim_linking(HAND_33, ["5C 5D 5S", "AH 2H 3H", "5S 5D 5C"])
    assert verdict.verdict is Verdict.INVALID
    assert "group 2" in verdict.reason
    assert "5C" in verdict.reason


def test_linking_using_a_joker_more_often_than_held_is_invalid() -> None:
    verdict = claim_linking(HAND_40, ["5H JK JK 8H", "KD JK JK"])
    assert verdict.verdict is Verdict.INVALID
    assert "group 1" in verdict.reason
    assert "JK" in verdict.reason


def test_linking_valid_not_best() -> None:
    verdict = claim_linking(HAND_9, ["AS 2S 3S 4S", "7H 7D 7C"])
    assert verdict.verdict is Verdict.VALID_NOT_BEST
    # QS KS 9D left: 10 + 10 + 9.
    assert verdict.claimed == "29"
    assert verdict.expected == "9"
    assert "29" in verdict.reason and "9" in verdict.reason


def test_linking_claiming_nothing_is_valid_not_best() -> None:
    verdict = claim_linking(HAND_33, [])
    assert verdict.verdict is Verdict.VALID_NOT_BEST
    assert verdict.claimed == "54"
    assert verdict.expected == "33"


def test_linking_with_the_joker_on_the_king_is_valid_not_best() -> None:
    verdict = claim_linking(HAND_40, ["KD JK JK"])
    assert verdict.verdict is Verdict.VALID_NOT_BEST
    assert (verdict.claimed, verdict.expected) == ("43", "40")


@pytest.mark.parametrize(
    ("hand", "groups", "points"),
    [
        (HAND_9, ["QS KS AS", "2S 3S 4S", "7H 7D 7C"], "9"),
        (HAND_9, ["7C 7D 7H", "AS KS QS", "4S 3S 2S"], "9"),
        (HAND_33, ["AH 2H 3H", "5C 5D 5S"], "33"),
        (HAND_40, ["8H JK 5H JK"], "40"),
        # Two best linkings with 10 left: the joker with Q-K♠ or with K-K.
        ("QS KS KD JK 2C 3C 4C 7H 7D 7S", ["QS KS JK", "2C 3C 4C", "7H 7D 7S"], "10"),
        ("QS KS KD JK 2C 3C 4C 7H 7D 7S", ["KS KD JK", "2C 3C 4C", "7H 7D 7S"], "10"),
    ],
)
def test_linking_best(hand: str, groups: list[str], points: str) -> None:
    verdict = claim_linking(hand, groups)
    assert verdict.verdict is Verdict.BEST
    assert verdict.claimed == points
    assert verdict.expected == points


# --- single values --------------------------------------------------------------------------


def test_judge_value_confirmed_and_wrong() -> None:
    assert judge_value("f", 33, 33) == ClaimVerdict("f", Verdict.CONFIRMED, "33", "33")
    wrong = judge_value("f", 30, 33)
    assert wrong.verdict is Verdict.WRONG
    assert (wrong.claimed, wrong.expected) == ("30", "33")


def test_close_claims_on_a_valid_close() -> None:
    close = check_close(cards(CLOSER), Card.parse("KC"), RULES)
    right = judge_close_claims(close, CloseKind.LINKED_CLEAN, 2)
    assert [v.verdict for v in right] == [Verdict.CONFIRMED, Verdict.CONFIRMED]
    assert [v.field for v in right] == ["claimed_kind", "claimed_multiplier"]
    wrong = judge_close_claims(close, CloseKind.LINKED, 1)
    assert [(v.verdict, v.claimed, v.expected) for v in wrong] == [
        (Verdict.WRONG, "LINKED", "LINKED_CLEAN"),
        (Verdict.WRONG, "1", "2"),
    ]


def test_close_claims_on_an_invalid_close() -> None:
    close = check_close(cards("AC 3D 5H 7S 10C JD KH 2S 4C 6D"), Card.parse("8H"), RULES)
    assert not close.valid
    verdicts = judge_close_claims(close, CloseKind.LINKED, 1)
    assert [v.verdict for v in verdicts] == [Verdict.WRONG, Verdict.WRONG]
    assert verdicts[1].expected == "0"


def test_a_kind_claimed_of_a_false_close_says_what_the_referee_found() -> None:
    close = check_close(cards("AC 3D 5H 7S 10C JD KH 2S 4C 6D"), Card.parse("8H"), RULES)
    assert not close.valid and close.reason
    verdicts = judge_close_claims(close, CloseKind.LINKED, 1)
    # No kind to name: the reason says why the close is not valid, on the multiplier's too.
    assert [(v.verdict, v.claimed, v.expected) for v in verdicts] == [
        (Verdict.WRONG, "LINKED", ""),
        (Verdict.WRONG, "1", "0"),
    ]
    assert all(v.reason == f"the close is not valid: {close.reason}" for v in verdicts), verdicts
    # The claim that it is not valid is confirmed, and says why too.
    (none,) = judge_close_claims(close, None, None, no_close=True)
    assert (none.verdict, none.claimed, none.expected) == (Verdict.CONFIRMED, "", "")
    assert none.reason == f"the close is not valid: {close.reason}"
    # Close claims are about no player.
    assert all(v.player is None and v.player_name == "" for v in [*verdicts, none])


def test_claims_of_a_valid_close_carry_no_reason() -> None:
    close = check_close(cards(CLOSER), Card.parse("KC"), RULES)
    verdicts = [*judge_close_claims(close, CloseKind.LINKED, 1), *judge_close_claims(close, None, None, no_close=True)]
    assert [(v.verdict, v.expected, v.reason) for v in verdicts] == [
        (Verdict.WRONG, "LINKED_CLEAN", ""),
        (Verdict.WRONG, "2", ""),
        (Verdict.WRONG, "LINKED_CLEAN", ""),
    ]


def test_no_close_claims_no_verdicts() -> None:
    close = check_close(cards(CLOSER), Card.parse("KC"), RULES)
    assert judge_close_claims(close, None, None) == []


# --- a whole deal ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_deal() -> tuple[DealResult, list[tuple[Card, ...]]]:
    """POOL, three players: the closer ×2 takes 66 + 80 + 40 = 186 (386); 134 and 120 left."""
    hands = [cards(CLOSER), cards(HAND_33), cards(HAND_40)]
    players = tuple(PlayerHand(name, hand) for name, hand in zip(("Ana", "Beto", "Carla"), hands))
    result = score_deal(Deal(players=players, closer=0, discard=Card.parse("KC")), RULES)
    return result, hands


def by_field(verdicts: list[ClaimVerdict]) -> dict[str, tuple[Verdict, str, str]]:
    return {v.field: (v.verdict, v.claimed, v.expected) for v in verdicts}


def test_deal_claims_all_right(pool_deal: tuple[DealResult, list[tuple[Card, ...]]]) -> None:
    result, hands = pool_deal
    claims = DealClaims(
        players=(
            PlayerClaim(player=1, points=33, score_change=-66, new_score=134),
            PlayerClaim(player=0, points=0, score_change=186, new_score=386),
            PlayerClaim(player=2, points=40, score_change=-80, new_score=120),
        ),
        close_kind=CloseKind.LINKED_CLEAN,
        multiplier=2,
    )
    verdicts = judge_deal_claims(claims, result, hands, RULES)
    assert len(verdicts) == 11
    assert all(v.verdict is Verdict.CONFIRMED for v in verdicts), verdicts
    # A confirmed verdict carries the referee's value too (RULES §7).
    assert all(v.expected == v.claimed and v.expected for v in verdicts), verdicts
    assert [v.field for v in verdicts[:5]] == [
        "claims.close_kind",
        "claims.multiplier",
        "claims.players[0].points",
        "claims.players[0].score_change",
        "claims.players[0].new_score",
    ]


def test_deal_claims_wrong_values(pool_deal: tuple[DealResult, list[tuple[Card, ...]]]) -> None:
    result, hands = pool_deal
    claims = DealClaims(
        players=(
            PlayerClaim(player=1, points=30, score_change=-33, new_score=167),
            PlayerClaim(player=0, score_change=146, new_score=380),
            PlayerClaim(player=2, points=40),
        ),
        close_kind=CloseKind.COLOR_CLEAN,
        multiplier=4,
    )
    got = by_field(judge_deal_claims(claims, result, hands, RULES))
    assert got == {
        "claims.close_kind": (Verdict.WRONG, "COLOR_CLEAN", "LINKED_CLEAN"),
        "claims.multiplier": (Verdict.WRONG, "4", "2"),
        "claims.players[0].points": (Verdict.WRONG, "30", "33"),
        "claims.players[0].score_change": (Verdict.WRONG, "-33", "-66"),
        "claims.players[0].new_score": (Verdict.WRONG, "167", "134"),
        "claims.players[1].score_change": (Verdict.WRONG, "146", "186"),
        "claims.players[1].new_score": (Verdict.WRONG, "380", "386"),
        "claims.players[2].points": (Verdict.CONFIRMED, "40", "40"),
    }


def test_deal_claims_groups(pool_deal: tuple[DealResult, list[tuple[Card, ...]]]) -> None:
    result, hands = pool_deal
    claims = DealClaims(
        players=(
            PlayerClaim(player=2, groups=(cards("5H JK JK 8H"),)),
            PlayerClaim(player=2, groups=(cards("KD JK JK"),)),
            PlayerClaim(player=1, groups=(cards("AH 2H 3H"), cards("KS KD 9C"))),
            PlayerClaim(player=0, groups=(cards("2C 3C 4C"), cards("6D 6H 6S"), cards("8S 8D 8C 8H"))),
        )
    )
    verdicts = judge_deal_claims(claims, result, hands, RULES)
    assert [v.field for v in verdicts] == [f"claims.players[{i}].groups" for i in range(4)]
    assert verdicts[0].verdict is Verdict.BEST
    assert (verdicts[1].verdict, verdicts[1].claimed, verdicts[1].expected) == (Verdict.VALID_NOT_BEST, "43", "40")
    assert verdicts[2].verdict is Verdict.INVALID
    assert "group 1" in verdicts[2].reason
    assert (verdicts[3].verdict, verdicts[3].claimed) == (Verdict.BEST, "0")


def test_deal_claims_on_an_invalid_close() -> None:
    hands = [cards("AC 3D 5H 7S 10C JD KH 2S 4C 6D"), cards(HAND_33)]
    players = tuple(PlayerHand(name, hand) for name, hand in zip(("Ana", "Beto"), hands))
    result = score_deal(Deal(players=players, closer=0, discard=Card.parse("8H")), RULES)
    claims = DealClaims(
        players=(PlayerClaim(player=0, score_change=66), PlayerClaim(player=1, points=33, new_score=0)),
        close_kind=CloseKind.LINKED_CLEAN,
        multiplier=2,
    )
    got = by_field(judge_deal_claims(claims, result, hands, RULES))
    assert got == {
        "claims.close_kind": (Verdict.WRONG, "LINKED_CLEAN", ""),
        "claims.multiplier": (Verdict.WRONG, "2", "0"),
        "claims.players[0].score_change": (Verdict.WRONG, "66", "0"),
        "claims.players[1].points": (Verdict.CONFIRMED, "33", "33"),
        "claims.players[1].new_score": (Verdict.CONFIRMED, "0", "0"),
    }


def test_deal_claims_name_the_player(pool_deal: tuple[DealResult, list[tuple[Card, ...]]]) -> None:
    result, hands = pool_deal
    claims = DealClaims(
        players=(
            PlayerClaim(player=2, points=41, groups=(cards("KD JK JK"),)),
            PlayerClaim(player=0, new_score=386),
        ),
        close_kind=CloseKind.LINKED_CLEAN,
    )
    verdicts = judge_deal_claims(claims, result, hands, RULES)
    # The field path counts claims; each player's verdict names the player by index and name.
    assert [(v.field, v.player, v.player_name) for v in verdicts] == [
        ("claims.close_kind", None, ""),
        ("claims.players[0].groups", 2, "Carla"),
        ("claims.players[0].points", 2, "Carla"),
        ("claims.players[1].new_score", 0, "Ana"),
    ]
    # Every verdict has the referee's value, or a reason why it has none.
    assert all(v.expected or v.reason for v in verdicts), verdicts


def test_deal_claims_of_a_false_close_say_why_it_is_not_valid() -> None:
    hands = [cards("AC 3D 5H 7S 10C JD KH 2S 4C 6D"), cards(HAND_33)]
    players = tuple(PlayerHand(name, hand) for name, hand in zip(("Ana", "Beto"), hands))
    result = score_deal(Deal(players=players, closer=0, discard=Card.parse("8H")), RULES)
    (kind,) = judge_deal_claims(DealClaims(close_kind=CloseKind.REMIGIO), result, hands, RULES)
    assert (kind.field, kind.verdict, kind.claimed, kind.expected) == (
        "claims.close_kind",
        Verdict.WRONG,
        "REMIGIO",
        "",
    )
    assert kind.reason == f"the close is not valid: {result.close.reason}"


@pytest.mark.parametrize("player", [3, -1])
def test_deal_claim_on_no_such_player(pool_deal: tuple[DealResult, list[tuple[Card, ...]]], player: int) -> None:
    result, hands = pool_deal
    claims = DealClaims(players=(PlayerClaim(player=0, points=0), PlayerClaim(player=player, points=1)))
    with pytest.raises(InvalidDealError) as caught:
        judge_deal_claims(claims, result, hands, RULES)
    assert caught.value.field == "claims.players[1].player"
