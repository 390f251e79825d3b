"""Groups (RULES §2): same rank, runs with the ace low or high, wrapping, jokers and their limits."""

from __future__ import annotations

from collections import Counter

import pytest

from referee.game.cards import Card, parse_cards
from referee.game.groups import Group, GroupKind, NotAGroup, is_run, is_same_rank, judge_group, run_group
from referee.game.rules import JokerLimit, RuleSet

DEFAULT = RuleSet()
WRAP = RuleSet(wrap_runs=True)


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def codes(group: Group) -> list[str]:
    return [card.code() for card in group.cards]


def judge(text: str, rules: RuleSet = DEFAULT) -> Group | NotAGroup:
    return judge_group(cards(text), rules)


def assert_not_a_group(judged: Group | NotAGroup) -> str:
    assert isinstance(judged, NotAGroup), judged
    assert not judged
    assert isinstance(judged.reason, str) and judged.reason.strip()
    return judged.reason


# --- same rank ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["7H 7S 7D", "7H 7H 7S", "7C 7D 7H 7S", "7H 7H 7S 7S 7D 7D 7C 7C", "KS KS KD", "AC AD AH AS AC"],
)
def test_same_rank_any_suits_and_duplicates(text: str) -> None:
    judged = judge(text)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.SAME_RANK
    assert Counter(codes(judged)) == Counter(text.split())
    # Every natural stands for itself.
    assert sorted(judged.stands_for) == sorted(text.split())
    assert is_same_rank(cards(text), DEFAULT)
    assert not is_run(cards(text), DEFAULT)


def test_same_rank_joker_stands_for_the_rank() -> None:
    judged = judge("KS KD JK")
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.SAME_RANK
    assert Counter(zip(codes(judged), judged.stands_for)) == Counter({("KS", "KS"): 1, ("KD", "KD"): 1, ("JK", "K"): 1})


@pytest.mark.parametrize("text", ["7H 7S", "7H", "JK JK", "AH 2H", "5C JK"])
def test_fewer_than_three_cards_is_not_a_group(text: str) -> None:
    assert_not_a_group(judge(text))


def test_empty_is_not_a_group() -> None:
    assert_not_a_group(judge_group((), DEFAULT))


# --- runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ordered"),
    [
        ("AH 2H 3H", ["AH", "2H", "3H"]),
        ("3H AH 2H", ["AH", "2H", "3H"]),
        ("QS KS AS", ["QS", "KS", "AS"]),
        ("AS KS QS", ["QS", "KS", "AS"]),
        ("9D 10D JD QD", ["9D", "10D", "JD", "QD"]),
        ("10C JC QC KC AC", ["10C", "JC", "QC", "KC", "AC"]),
        ("4C 5C 6C 7C 8C 9C 10C", ["4C", "5C", "6C", "7C", "8C", "9C", "10C"]),
    ],
)
def test_runs_ace_low_and_high(text: str, ordered: list[str]) -> None:
    judged = judge(text)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert codes(judged) == ordered
    assert list(judged.stands_for) == ordered
    assert is_run(cards(text), DEFAULT)


@pytest.mark.parametrize(
    "text",
    [
        "5H 6S 7H",  # two suits
        "5H 6H 8H",  # a gap
        "5H 5H 6H 7H",  # a rank twice
        "AH 2H KH",  # no wrap
        "JD QD KD AD 2D",  # no wrap, longer
        "2C 4C 6C",
        "AS QS KS 2S",
    ],
)
def test_not_runs(text: str) -> None:
    assert_not_a_group(judge(text))
    assert not is_run(cards(text), DEFAULT)


@pytest.mark.parametrize("text", ["KS AS 2S", "QD KD AD 2D 3D", "KH AH 2H", "JC QC KC AC 2C"])
def test_wrap_only_with_wrap_runs(text: str) -> None:
    assert_not_a_group(judge(text))
    assert not is_run(cards(text), DEFAULT)
    judged = judge(text, WRAP)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert Counter(codes(judged)) == Counter(text.split())
    assert is_run(cards(text), WRAP)


def test_wrapped_run_is_laid_in_order() -> None:
    judged = judge("2S AS KS", WRAP)
    assert isinstance(judged, Group)
    assert codes(judged) == ["KS", "AS", "2S"]


def test_wrap_with_a_joker_across_the_ace() -> None:
    assert_not_a_group(judge("KS JK 2S"))
    judged = judge("KS JK 2S", WRAP)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert list(judged.stands_for) == ["KS", "AS", "2S"]


def test_wrap_runs_still_allows_ordinary_runs() -> None:
    judged = judge("4H 5H 6H", WRAP)
    assert isinstance(judged, Group) and judged.kind is GroupKind.RUN


ACE_TO_KING = "AS 2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS"


@pytest.mark.parametrize("rules", [DEFAULT, WRAP], ids=["plain", "wrap"])
def test_ace_to_king_is_a_13_card_run(rules: RuleSet) -> None:
    judged = judge(ACE_TO_KING, rules)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert len(judged.cards) == 13
    assert is_run(cards(ACE_TO_KING), rules)


def test_thirteen_with_a_joker_inside_is_a_run() -> None:
    judged = judge("AS 2S 3S 4S 5S 6S JK 8S 9S 10S JS QS KS")
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert judged.stands_for[6] == "7S"


@pytest.mark.parametrize(
    "text",
    [
        ACE_TO_KING + " AS",  # the ace low and high in one run
        ACE_TO_KING + " JK",
        "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS JK JK",
        "AS 2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS JK JK",
    ],
)
@pytest.mark.parametrize("rules", [DEFAULT, WRAP], ids=["plain", "wrap"])
def test_fourteen_cards_are_never_a_run(text: str, rules: RuleSet) -> None:
    assert len(text.split()) == 14
    assert_not_a_group(judge(text, rules))
    assert not is_run(cards(text), rules)


# --- jokers in runs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ordered", "stands"),
    [
        ("QS KS JK", ["QS", "KS", "JK"], ["QS", "KS", "AS"]),
        ("QH KH JK", ["QH", "KH", "JK"], ["QH", "KH", "AH"]),
        ("5H JK 7H", ["5H", "JK", "7H"], ["5H", "6H", "7H"]),
        ("AS JK JK 4S", ["AS", "JK", "JK", "4S"], ["AS", "2S", "3S", "4S"]),
        ("QS KS JK JK", ["JK", "QS", "KS", "JK"], ["JS", "QS", "KS", "AS"]),
        ("AD QD JK", ["QD", "JK", "AD"], ["QD", "KD", "AD"]),
        ("2C 3C JK", ["2C", "3C", "JK"], ["2C", "3C", "4C"]),
    ],
)
def test_joker_stand_ins_in_runs(text: str, ordered: list[str], stands: list[str]) -> None:
    judged = judge(text)
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert list(judged.stands_for) == stands
    # Jokers sit at their places in the run; naturals stand for themselves.
    for card, stand in zip(judged.cards, judged.stands_for):
        if card.is_joker:
            assert stand not in text.split()
        else:
            assert card.code() == stand
    assert codes(judged) == ordered


def test_ace_joker_joker_is_ace_two_three() -> None:
    # RULES §2: A JK JK is A 2 3 (a joker never stands below the ace).
    assert is_run(cards("AS JK JK"), DEFAULT)
    laid = run_group(cards("AS"), 2, wrap_runs=False)
    assert isinstance(laid, Group)
    assert list(laid.stands_for) == ["AS", "2S", "3S"]
    assert [c.code() for c in laid.cards] == ["AS", "JK", "JK"]
    # As a group it is valid too (reported as a same-rank group of aces).
    assert isinstance(judge("AS JK JK"), Group)


def test_king_joker_joker_stays_on_the_scale() -> None:
    laid = run_group(cards("KS"), 2, wrap_runs=False)
    assert isinstance(laid, Group)
    assert list(laid.stands_for) in (["JS", "QS", "KS"], ["QS", "KS", "AS"])


def test_ace_and_king_with_a_joker_is_queen_king_ace() -> None:
    judged = judge("KS AS JK")
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.RUN
    assert list(judged.stands_for) == ["QS", "KS", "AS"]


def test_jokers_cannot_fill_a_gap_too_wide() -> None:
    assert_not_a_group(judge("5H JK 8H"))
    assert_not_a_group(judge("2H JK JK 6H"))


def test_joker_does_not_make_a_rank_twice_a_run() -> None:
    assert_not_a_group(judge("5H 6H 6H JK"))


# --- jokers only and joker limits -----------------------------------------------------------


@pytest.mark.parametrize("n", [3, 4])
def test_jokers_only_unlimited(n: int) -> None:
    judged = judge(" ".join(["JK"] * n))
    assert isinstance(judged, Group)
    assert judged.kind is GroupKind.JOKERS_ONLY
    assert judged.stands_for == ("",) * n
    assert len(judged.cards) == n


@pytest.mark.parametrize("limit", [JokerLimit.NO_MORE_THAN_NATURALS, JokerLimit.ONE_PER_GROUP])
@pytest.mark.parametrize("n", [3, 4])
def test_jokers_only_under_limits(limit: JokerLimit, n: int) -> None:
    reason = assert_not_a_group(judge(" ".join(["JK"] * n), RuleSet(joker_limit=limit)))
    assert "joker" in reason.lower()


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("5H 6H JK", True),
        ("5H JK JK", False),
        ("5H 5D JK JK", True),
        ("5H 6H JK JK", True),
        ("5H JK JK JK", False),
        ("5H 6H JK JK JK", False),
        ("5H 6H 7H JK JK JK", True),
        ("7H 7S 7D JK JK JK", True),
        ("7H 7S JK JK JK", False),
    ],
)
def test_no_more_than_naturals(text: str, allowed: bool) -> None:
    rules = RuleSet(joker_limit=JokerLimit.NO_MORE_THAN_NATURALS)
    judged = judge(text, rules)
    if allowed:
        assert isinstance(judged, Group), judged
    else:
        assert "joker" in assert_not_a_group(judged).lower()
    # Without the limit every one of these is a group.
    assert isinstance(judge(text), Group)


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("5H 6H JK", True),
        ("5H JK 7H 8H", True),
        ("7H 7S JK", True),
        ("7H 7S 7D 7C JK", True),
        ("5H JK JK", False),
        ("5H JK 7H JK", False),
        ("7H 7S JK JK", False),
        ("5H 6H 7H 8H JK JK", False),
    ],
)
def test_one_per_group(text: str, allowed: bool) -> None:
    rules = RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP)
    judged = judge(text, rules)
    if allowed:
        assert isinstance(judged, Group), judged
    else:
        assert "joker" in assert_not_a_group(judged).lower()
    assert isinstance(judge(text), Group)


def test_limits_also_bind_is_run_and_is_same_rank() -> None:
    one = RuleSet(joker_limit=JokerLimit.ONE_PER_GROUP)
    assert is_run(cards("5H JK JK 8H"), DEFAULT)
    assert not is_run(cards("5H JK JK 8H"), one)
    assert is_same_rank(cards("7H 7S JK JK"), DEFAULT)
    assert not is_same_rank(cards("7H 7S JK JK"), one)


# --- reasons and identity -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["5H 6S 7H", "AH 2H KH", "5H 6H 8H", "7H 7S", "5H 5H 6H 7H", "2C 2D 3C"])
def test_reasons_are_not_a_group_values(text: str) -> None:
    judged = judge(text)
    assert type(judged) is NotAGroup
    assert bool(judged) is False


def test_group_is_order_free() -> None:
    a = judge("7H 5H 6H")
    b = judge("6H 7H 5H")
    assert isinstance(a, Group) and isinstance(b, Group)
    assert a == b
    assert a.key == tuple(sorted(c.index for c in cards("5H 6H 7H")))
