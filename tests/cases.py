"""Dispute case files for ``remigio-referee batch`` and the CheckDisputes stream, with expected verdicts.

Every expected value here is known by construction, never by asking the referee:

- the worked examples of RULES §8 (hands and closes, with their printed points and kinds);
- hand-made hands: *loose* cards among which no group exists (no rank three times, no three
  consecutive ranks of one suit, the ace next to both the 2 and the K), whose points are simply
  the sum of their values; *planned* groups (same rank, or a same-suit run) that link fully; and
  hands of planned groups plus loose cards that cannot reach any planned group, so the best
  linking takes the planned groups whole and leaves exactly the loose cards;
- deal scoring done by hand from RULES §5 (HEAD_TO_HEAD, POOL, ELIMINATION) with those points.

The small self-check ``_natural_groups`` (every 3+ card subset of a joker-free hand that is a
group) only guards the construction: it never computes an expected value.

``mixed_cases`` is the every-type file (hands, closes of 11 and of 10 + discard, 2-4 player
deals; CONFIRMED, WRONG, INVALID and NO_CLAIM cases; malformed lines). ``deal_cases`` makes any
number of end-of-deal disputes with known answers. Run as a script to write a file::

    python tests/cases.py OUT.jsonl [--deals N] [--players 4] [--seed 0] [--clean]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS = ("C", "D", "H", "S")
JOKER = "JK"
JOKER_POINTS = 20
DECKS = 2

# A hand that takes the CP-SAT engine tens of ms (several solves): seven sevens, a two, a king and
# two jokers do not link in full, so the engine cannot read its answer off one or two candidate
# groups. With joker points of its own per call, no cache answers it: the tests of deadlines and
# limits need a call that lasts.
HEAVY_HAND = "7H 7H 7S 7S 7D 7D 7C 2C KD JK JK"

# The multipliers of RULES §4.
MULTIPLIER = {
    "REMIGIO": 10,
    "STRAIGHT_FLUSH_CLEAN": 6,
    "STRAIGHT_FLUSH": 5,
    "COLOR_CLEAN": 4,
    "COLOR": 3,
    "LINKED_CLEAN": 2,
    "LINKED": 1,
}


# Cards -----------------------------------------------------------------------------------------


def rank_of(card: str) -> str:
    """The rank part of a natural card code."""
    return card[:-1]


def suit_of(card: str) -> str:
    """The suit letter of a natural card code."""
    return card[-1]


def value(card: str) -> int:
    """Points of a card left unlinked (RULES §1; joker 20)."""
    if card == JOKER:
        return JOKER_POINTS
    rank = rank_of(card)
    if rank == "A":
        return 1
    if rank in ("J", "Q", "K"):
        return 10
    return int(rank)


def points(cards: Iterable[str]) -> int:
    """Sum of the values of unlinked cards."""
    return sum(value(card) for card in cards)


def _positions(rank: str) -> tuple[int, ...]:
    """Places of a rank on the A 2 ... K A scale (the ace is 1 and 14)."""
    index = RANKS.index(rank) + 1
    return (1, 14) if index == 1 else (index,)


def _is_natural_group(cards: Sequence[str]) -> bool:
    """Whether 3+ natural cards form a same-rank group or a run (no wrap)."""
    if len(cards) < 3:
        return False
    if len({rank_of(c) for c in cards}) == 1:
        return True
    if len({suit_of(c) for c in cards}) != 1 or len(set(cards)) != len(cards):
        return False
    for choice in itertools.product(*(_positions(rank_of(c)) for c in cards)):
        ordered = sorted(choice)
        if ordered == list(range(ordered[0], ordered[0] + len(ordered))):
            return True
    return False


def _makes_group(loose: Sequence[str], card: str) -> bool:
    """Whether adding ``card`` to joker-free cards that hold no group makes one (it would be in it)."""
    if sum(rank_of(c) == rank_of(card) for c in loose) >= 2:
        return True
    held = {p for c in loose if suit_of(c) == suit_of(card) for p in _positions(rank_of(c))}
    for p in _positions(rank_of(card)):
        if {p - 2, p - 1} <= held or {p - 1, p + 1} <= held or {p + 1, p + 2} <= held:
            return True
    return False


def _natural_groups(hand: Sequence[str]) -> list[tuple[str, ...]]:
    """Every subset of 3+ cards of a joker-free hand that is a group (a construction guard only)."""
    found = []
    for size in range(3, len(hand) + 1):
        for combo in itertools.combinations(hand, size):
            if _is_natural_group(combo):
                found.append(combo)
    return found


def _fits(cards: Iterable[str], used: Counter[str] | None = None) -> bool:
    """Whether the cards (with ``used`` ones) fit in two decks: each natural twice, four jokers."""
    count = Counter(used or {})
    count.update(cards)
    return all(n <= (2 * DECKS if card == JOKER else DECKS) for card, n in count.items())


# Hand construction -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hand:
    """A hand with its best linking known by construction: planned groups linked, loose cards not."""

    groups: tuple[tuple[str, ...], ...]
    loose: tuple[str, ...]

    @property
    def cards(self) -> list[str]:
        """The hand's cards, groups first."""
        return [card for group in self.groups for card in group] + list(self.loose)

    @property
    def points(self) -> int:
        """The best linking's points: the loose cards' values."""
        return points(self.loose)


def _blocked(groups: Sequence[Sequence[str]]) -> set[str]:
    """Cards a loose card must not be: anything that could join or extend a planned group."""
    blocked = set()
    for group in groups:
        for card in group:
            rank, suit = rank_of(card), suit_of(card)
            blocked.update(rank + s for s in SUITS)  # a third card of the rank
            for pos in _positions(rank):
                for step in (-2, -1, 1, 2):  # a run through this card
                    near = pos + step
                    if 1 <= near <= 14:
                        blocked.add(RANKS[(near - 1) % 13] + suit)
    return blocked


def random_group(rng: random.Random, used: Counter[str]) -> tuple[str, ...]:
    """A random joker-free group that fits with ``used``: 3-4 of a rank, or a run of 3-5."""
    for _ in range(1000):
        if rng.random() < 0.5:
            rank = rng.choice(RANKS)
            size = rng.choice((3, 4))
            group = tuple(rank + s for s in rng.sample(SUITS, size))
        else:
            size = rng.choice((3, 4, 5))
            start = rng.randrange(0, 14 - size + 1)  # positions 1..14, the ace at both ends
            suit = rng.choice(SUITS)
            group = tuple(RANKS[(p - 1) % 13] + suit for p in range(start + 1, start + 1 + size))
        if _fits(group, used):
            return group
    raise RuntimeError("no group fits")


def random_hand(
    rng: random.Random, size: int, used: Counter[str], groups: int | None = None, guard: bool = False
) -> Hand:
    """A joker-free hand of ``size`` cards: 0-2 planned groups and loose cards that join none.

    A loose card never shares a rank with a planned card nor sits within two places of one in
    its suit, so no group mixes loose and planned cards (a run from a planned card to a loose one
    would pass through a blocked neighbour); and no group forms among the loose cards. So every
    group lies within the planned cards, and taking the planned groups whole is a best linking.
    ``guard`` re-checks that by listing every group of the hand (slow: for small files).
    """
    for _ in range(1000):
        want = rng.choice((0, 1, 1, 2)) if groups is None else groups
        taken: Counter[str] = Counter(used)
        planned: list[tuple[str, ...]] = []
        for _ in range(want):
            group = random_group(rng, taken)
            if sum(map(len, planned)) + len(group) > size:
                break
            planned.append(group)
            taken.update(group)
        blocked = _blocked(planned)
        loose: list[str] = []
        candidates = [r + s for r in RANKS for s in SUITS if r + s not in blocked]
        rng.shuffle(candidates)
        for card in candidates * 2:
            if len(loose) + sum(map(len, planned)) == size:
                break
            if _fits([card], taken) and not _makes_group(loose, card):
                loose.append(card)
                taken[card] += 1
        hand = Hand(tuple(planned), tuple(loose))
        if len(hand.cards) != size:
            continue
        if guard:
            loose_count = Counter(loose)
            for group in _natural_groups(hand.cards):
                assert not Counter(group) & loose_count, (hand, group)
        used.update(hand.cards)
        return hand
    raise RuntimeError("could not build a hand")


def linked_close_hand(rng: random.Random, used: Counter[str]) -> Hand:
    """10 joker-free cards that link fully in two or three planned groups of at least two suits.

    Such a close is LINKED_CLEAN (×2): no joker, not one suit (so no color, no straight flush),
    and no Remigio without jokers.
    """
    for _ in range(1000):
        sizes = rng.choice(((3, 3, 4), (3, 4, 3), (4, 3, 3), (5, 5), (4, 3, 3), (5, 5)))
        taken: Counter[str] = Counter(used)
        planned = []
        for size in sizes:
            for _ in range(200):
                group = random_group(rng, taken)
                if len(group) == size:
                    break
            else:
                break
            planned.append(group)
            taken.update(group)
        hand = Hand(tuple(planned), ())
        if len(hand.cards) == 10 and len({suit_of(c) for c in hand.cards}) > 1:
            used.update(hand.cards)
            return hand
    raise RuntimeError("could not build a close")


# Cases -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What the referee must answer for one case."""

    id: str
    outcome: str  # CONFIRMED, WRONG, INVALID, NO_CLAIM or MALFORMED
    claims: tuple[tuple[str, str, str], ...] = ()  # (field, verdict, the referee's value as text)
    answer: dict[str, Any] = field(default_factory=dict)  # e.g. {"points": 33} or {"kind": ..., "multiplier": ...}
    error_field: str | None = None  # for MALFORMED


@dataclass(frozen=True)
class CaseLine:
    """One input line and what its verdict must be."""

    text: str
    expected: Expected


def _line(case: dict[str, Any], expected: Expected) -> CaseLine:
    return CaseLine(json.dumps(case, separators=(",", ":")), expected)


def _claim(field_name: str, claimed: object, actual: object) -> tuple[tuple[str, str, str], bool]:
    """The expected verdict on a plain value claim, and whether it is right."""
    return (field_name, "CONFIRMED" if claimed == actual else "WRONG", str(actual)), claimed == actual


def _outcome(claims: Sequence[tuple[str, str, str]]) -> str:
    verdicts = {verdict for _, verdict, _ in claims}
    if not verdicts:
        return "NO_CLAIM"
    if "INVALID" in verdicts:
        return "INVALID"
    if verdicts & {"WRONG", "VALID_NOT_BEST"}:
        return "WRONG"
    return "CONFIRMED"


# RULES §8, hands: cards, best points, the best groups, and a valid but worse claimed linking.
EXAMPLE_HANDS: list[tuple[list[str], int, list[list[str]], list[list[str]] | None]] = [
    ("AH 2H 3H 5C 5D 5S KS KD 9C 4D".split(), 33, [["AH", "2H", "3H"], ["5C", "5D", "5S"]], [["5C", "5D", "5S"]]),
    (
        "AH 2H 3H 5C 5D 5S KS KD 9C JK".split(),
        9,
        [["AH", "2H", "3H"], ["5C", "5D", "5S"], ["KS", "KD", "JK"]],
        [["AH", "2H", "3H"], ["5C", "5D", "5S"]],
    ),
    (
        "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split(),
        9,
        [["QS", "KS", "AS"], ["2S", "3S", "4S"], ["7H", "7D", "7C"]],
        [["AS", "2S", "3S", "4S"], ["7H", "7D", "7C"]],
    ),
    ("2C 2C 9D 9D 4S 7H KH KH QC JK".split(), 43, [["KH", "KH", "JK"]], None),
    ("JK JK 5H 9C KD QS 2D 6S 8H 3C".split(), 40, [["5H", "JK", "JK", "8H"]], [["KD", "JK", "JK"]]),
]

# RULES §8, closes of 11 cards: cards, discard, kind.
EXAMPLE_CLOSES: list[tuple[list[str], str, str]] = [
    ("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(), "2C", "STRAIGHT_FLUSH"),
    ("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD".split(), "KD", "REMIGIO"),
    ("AH 2H 3H 5H 7H 8H 9H JH QH KH 4C".split(), "4C", "COLOR_CLEAN"),
    ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC".split(), "KC", "STRAIGHT_FLUSH_CLEAN"),
]


def _hand_cases(rng: random.Random) -> list[CaseLine]:
    out = []
    for e, (cards, best, groups, worse) in enumerate(EXAMPLE_HANDS):
        # Claimed points: right, and off by one.
        out.append(
            _line(
                {"id": f"hand-ex{e}-points-ok", "hand": {"cards": cards, "claimedPoints": best}},
                Expected(f"hand-ex{e}-points-ok", "CONFIRMED", (("claimed_points", "CONFIRMED", str(best)),)),
            )
        )
        out.append(
            _line(
                {"id": f"hand-ex{e}-points-bad", "hand": {"cards": cards, "claimed_points": best + 1}},
                Expected(f"hand-ex{e}-points-bad", "WRONG", (("claimed_points", "WRONG", str(best)),)),
            )
        )
        # The best groups claimed (in a shuffled order): BEST.
        claimed = [{"cards": list(g)} for g in rng.sample(groups, len(groups))]
        out.append(
            _line(
                {
                    "id": f"hand-ex{e}-groups-best",
                    "hand": {"cards": cards, "claimed_groups": claimed, "claimed_points": best},
                },
                Expected(
                    f"hand-ex{e}-groups-best",
                    "CONFIRMED",
                    (("claimed_groups", "BEST", str(best)), ("claimed_points", "CONFIRMED", str(best))),
                ),
            )
        )
        if worse is not None:
            out.append(
                _line(
                    {
                        "id": f"hand-ex{e}-groups-worse",
                        "hand": {"cards": cards, "claimed_groups": [{"cards": g} for g in worse]},
                    },
                    Expected(f"hand-ex{e}-groups-worse", "WRONG", (("claimed_groups", "VALID_NOT_BEST", str(best)),)),
                )
            )
        # No claim: the referee's own answer.
        out.append(
            _line(
                {"id": f"hand-ex{e}-none", "hand": {"cards": cards}},
                Expected(f"hand-ex{e}-none", "NO_CLAIM", answer={"points": best}),
            )
        )
    # Claimed groups that are not groups, or use a card the hand lacks: INVALID.
    cards = EXAMPLE_HANDS[0][0]
    out.append(
        _line(
            {"id": "hand-invalid-group", "hand": {"cards": cards, "claimed_groups": [{"cards": ["KS", "KD", "9C"]}]}},
            Expected("hand-invalid-group", "INVALID", (("claimed_groups", "INVALID", "33"),)),
        )
    )
    out.append(
        _line(
            {
                "id": "hand-invalid-card",
                "hand": {"cards": cards, "claimed_groups": [{"cards": ["5C", "5D", "5H"]}], "claimed_points": 33},
            },
            Expected(
                "hand-invalid-card",
                "INVALID",
                (("claimed_groups", "INVALID", "33"), ("claimed_points", "CONFIRMED", "33")),
            ),
        )
    )
    out.append(
        _line(
            {
                "id": "hand-invalid-wrap",
                "hand": {
                    "cards": "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split(),
                    "claimed_groups": [{"cards": ["KS", "AS", "2S"]}],
                },
            },
            Expected("hand-invalid-wrap", "INVALID", (("claimed_groups", "INVALID", "9"),)),
        )
    )
    # Hand-made hands of every size, with the best points known by construction.
    for n, size in enumerate((1, 2, 3, 5, 7, 10, 10, 10, 11, 11)):
        hand = random_hand(rng, size, Counter(), guard=True)
        claimed_points = hand.points if n % 2 == 0 else hand.points + rng.choice((-3, 2, 10))
        check, _ = _claim("claimed_points", claimed_points, hand.points)
        body: dict[str, Any] = {"cards": rng.sample(hand.cards, size), "claimed_points": claimed_points}
        claims = [check]
        if hand.groups:
            body["claimed_groups"] = [{"cards": list(g)} for g in hand.groups]
            claims.insert(0, ("claimed_groups", "BEST", str(hand.points)))
        out.append(
            _line({"id": f"hand-made-{n}", "hand": body}, Expected(f"hand-made-{n}", _outcome(claims), tuple(claims)))
        )
    # A fully linked hand: 0 points, nothing lower exists.
    full = random_hand(rng, 10, Counter(), groups=0, guard=True)
    linked = linked_close_hand(rng, Counter())
    out.append(
        _line(
            {"id": "hand-linked", "hand": {"cards": linked.cards, "claimed_points": 0}},
            Expected("hand-linked", "CONFIRMED", (("claimed_points", "CONFIRMED", "0"),)),
        )
    )
    out.append(
        _line(
            {"id": "hand-loose", "hand": {"cards": full.cards, "claimed_points": 0}},
            Expected("hand-loose", "WRONG", (("claimed_points", "WRONG", str(full.points)),)),
        )
    )
    # A joker alone, and a rule option: joker_points 50 (RULES §1).
    out.append(
        _line(
            {"id": "hand-joker", "hand": {"cards": ["JK"], "claimed_points": 20}},
            Expected("hand-joker", "CONFIRMED", (("claimed_points", "CONFIRMED", "20"),)),
        )
    )
    out.append(
        _line(
            {
                "id": "hand-joker-50",
                "hand": {"cards": ["JK", "2C"], "rules": {"joker_points": 50}, "claimed_points": 22},
            },
            Expected("hand-joker-50", "WRONG", (("claimed_points", "WRONG", "52"),)),
        )
    )
    return out


def _close_cases(rng: random.Random) -> list[CaseLine]:
    out = []
    for e, (cards, discard, kind) in enumerate(EXAMPLE_CLOSES):
        mult = MULTIPLIER[kind]
        shuffled = rng.sample(cards, len(cards))
        shown = [c for c in cards if c != discard]
        answer = {"valid": True, "kind": kind, "multiplier": mult, "discard": discard}
        # 11 cards: right kind and multiplier.
        out.append(
            _line(
                {
                    "id": f"close-ex{e}-11-ok",
                    "close": {"cards": shuffled, "claimed_kind": f"CLOSE_KIND_{kind}", "claimed_multiplier": mult},
                },
                Expected(
                    f"close-ex{e}-11-ok",
                    "CONFIRMED",
                    (("claimed_kind", "CONFIRMED", kind), ("claimed_multiplier", "CONFIRMED", str(mult))),
                    answer,
                ),
            )
        )
        # 11 cards: a kind one step too high or too low, right multiplier.
        other = "LINKED" if kind != "LINKED" else "COLOR"
        out.append(
            _line(
                {
                    "id": f"close-ex{e}-11-kind-bad",
                    "close": {"cards": shuffled, "claimedKind": f"CLOSE_KIND_{other}", "claimedMultiplier": mult},
                },
                Expected(
                    f"close-ex{e}-11-kind-bad",
                    "WRONG",
                    (("claimed_kind", "WRONG", kind), ("claimed_multiplier", "CONFIRMED", str(mult))),
                    answer,
                ),
            )
        )
        # 10 shown + the discard: wrong multiplier.
        out.append(
            _line(
                {
                    "id": f"close-ex{e}-10-mult-bad",
                    "close": {"cards": shown, "discard": discard, "claimed_multiplier": mult + 1},
                },
                Expected(f"close-ex{e}-10-mult-bad", "WRONG", (("claimed_multiplier", "WRONG", str(mult)),), answer),
            )
        )
        # No claim.
        out.append(
            _line(
                {"id": f"close-ex{e}-none", "close": {"cards": shown, "discard": discard}},
                Expected(f"close-ex{e}-none", "NO_CLAIM", answer=answer),
            )
        )
    # A joker laid face down does not count (RULES §4): the clean straight flush stays clean.
    shown = "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H".split()
    out.append(
        _line(
            {
                "id": "close-joker-discard",
                "close": {"cards": shown, "discard": "JK", "claimed_kind": "CLOSE_KIND_STRAIGHT_FLUSH"},
            },
            Expected(
                "close-joker-discard",
                "WRONG",
                (("claimed_kind", "WRONG", "STRAIGHT_FLUSH_CLEAN"),),
                {"valid": True, "kind": "STRAIGHT_FLUSH_CLEAN", "multiplier": 6, "discard": "JK"},
            ),
        )
    )
    # A hand-made linked close of two suits, no joker: LINKED_CLEAN ×2.
    linked = linked_close_hand(rng, Counter())
    discard = next(c for c in ("KC", "QD", "JH", "10S") if _fits([c], Counter(linked.cards)))
    out.append(
        _line(
            {
                "id": "close-linked",
                "close": {
                    "cards": linked.cards,
                    "discard": discard,
                    "claimed_kind": "CLOSE_KIND_LINKED",
                    "claimed_multiplier": 2,
                },
            },
            Expected(
                "close-linked",
                "WRONG",
                (("claimed_kind", "WRONG", "LINKED_CLEAN"), ("claimed_multiplier", "CONFIRMED", "2")),
                {"valid": True, "kind": "LINKED_CLEAN", "multiplier": 2, "discard": discard},
            ),
        )
    )
    # No close: loose cards that are not all one suit. Claiming "no valid close" is right.
    loose = random_hand(rng, 10, Counter(), groups=0, guard=True)
    while len({suit_of(c) for c in loose.cards}) == 1:  # a color would be a valid close
        loose = random_hand(rng, 10, Counter(), groups=0, guard=True)
    discard = next(c for c in ("KC", "QD", "JH", "10S", "JK") if _fits([c], Counter(loose.cards)))
    out.append(
        _line(
            {
                "id": "close-invalid-claim-none",
                "close": {
                    "cards": loose.cards,
                    "discard": discard,
                    "claimed_kind": "CLOSE_KIND_UNSPECIFIED",
                    "claimed_multiplier": 0,
                },
            },
            Expected(
                "close-invalid-claim-none",
                "CONFIRMED",
                (("claimed_kind", "CONFIRMED", ""), ("claimed_multiplier", "CONFIRMED", "0")),
                {"valid": False, "multiplier": 0},
            ),
        )
    )
    out.append(
        _line(
            {
                "id": "close-invalid-claim-linked",
                "close": {"cards": loose.cards, "discard": discard, "claimed_kind": "CLOSE_KIND_LINKED"},
            },
            Expected(
                "close-invalid-claim-linked",
                "WRONG",
                (("claimed_kind", "WRONG", ""),),
                {"valid": False, "multiplier": 0},
            ),
        )
    )
    return out


@dataclass
class _Deal:
    """A deal built by hand, with every player's points and the scoring worked out from RULES §5."""

    hands: list[Hand]
    closer: int
    discard: str
    kind: str | None
    mode: str  # HEAD_TO_HEAD, POOL or ELIMINATION
    scores: list[int]
    shown: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.shown:
            self.shown = [h.cards for h in self.hands]

    @property
    def multiplier(self) -> int:
        return MULTIPLIER[self.kind] if self.kind else 0

    @property
    def points(self) -> list[int]:
        """P per player, the closer's too (RULES §5: reported for everyone, never charged to the closer)."""
        return [h.points for h in self.hands]

    @property
    def changes(self) -> list[int]:
        m = self.multiplier
        changes = [0] * len(self.hands)
        if not m:
            return changes  # an invalid close scores nothing
        for i, p in enumerate(self.points):
            if i == self.closer:
                continue
            if self.mode == "ELIMINATION":
                changes[i] = p * m
            else:
                changes[self.closer] += p * m
                if self.mode == "POOL":
                    changes[i] = -p * m
        if self.mode == "POOL":
            changes[self.closer] += 40
        return changes

    def message(self) -> dict[str, Any]:
        players = [
            {"name": f"p{i}", "cards": cards, "score": s} for i, (cards, s) in enumerate(zip(self.shown, self.scores))
        ]
        deal: dict[str, Any] = {"deal": {"players": players, "closer": self.closer, "discard": self.discard}}
        if self.mode == "ELIMINATION":
            deal["rules"] = {"scoring": {"mode": "SCORING_MODE_ELIMINATION"}}
        return deal


def random_deal(rng: random.Random, players: int, mode: str | None = None) -> _Deal:
    """A deal of ``players`` joker-free hands: a LINKED_CLEAN close and hands of known points."""
    mode = mode or ("HEAD_TO_HEAD" if players == 2 else "POOL")
    used: Counter[str] = Counter()
    closer = rng.randrange(players)
    close = linked_close_hand(rng, used)
    hands = [close if i == closer else random_hand(rng, 10, used) for i in range(players)]
    discard = rng.choice([c for c in (r + s for r in RANKS for s in SUITS) if _fits([c], used)])
    start = {"HEAD_TO_HEAD": (0, 140), "POOL": (0, 450), "ELIMINATION": (0, 90)}[mode]
    scores = [rng.randint(*start) for _ in range(players)]
    return _Deal(hands, closer, discard, "LINKED_CLEAN", mode, scores)


def deal_case(
    case_id: str,
    deal: _Deal,
    rng: random.Random,
    wrong: float = 0.3,
    claim_kind: bool = True,
    claim_new_score: bool = True,
) -> CaseLine:
    """A deal case with claims on the close, each player's points and score change (and new score).

    The case has some wrong claims with probability ``wrong`` (all of them with ``wrong=1``).
    """
    message = deal.message()
    claims_msg: dict[str, Any] = {"players": []}
    claims: list[tuple[str, str, str]] = []

    # A case has wrong claims with probability ``wrong``; then each claim is off with probability 1/3.
    off = 0.0 if rng.random() >= wrong else (1.0 if wrong >= 1 else 1 / 3)

    def maybe_off(right: int) -> int:
        return right + rng.choice((-5, -1, 1, 2, 10)) if rng.random() < off else right

    if claim_kind:
        kind = deal.kind if rng.random() >= off else rng.choice(["LINKED", "COLOR", "REMIGIO"])
        claims_msg["close_kind"] = f"CLOSE_KIND_{kind}"
        claims.append(_claim("claims.close_kind", kind, deal.kind or "")[0])
    mult = maybe_off(deal.multiplier)
    claims_msg["multiplier"] = mult
    claims.append(_claim("claims.multiplier", mult, deal.multiplier)[0])
    for i in rng.sample(range(len(deal.hands)), len(deal.hands)):
        at = f"claims.players[{len(claims_msg['players'])}]"
        claim: dict[str, Any] = {"player": i}
        p, change = deal.points[i], deal.changes[i]
        claim["points"] = maybe_off(p)
        claims.append(_claim(f"{at}.points", claim["points"], p)[0])
        claim["score_change"] = maybe_off(change)
        claims.append(_claim(f"{at}.score_change", claim["score_change"], change)[0])
        if claim_new_score:
            new = deal.scores[i] + change
            claim["new_score"] = maybe_off(new)
            claims.append(_claim(f"{at}.new_score", claim["new_score"], new)[0])
        claims_msg["players"].append(claim)
    message["claims"] = claims_msg
    answer = {"points": deal.points, "score_change": deal.changes}
    return _line({"id": case_id, "deal": message}, Expected(case_id, _outcome(claims), tuple(claims), answer))


def _deal_cases(rng: random.Random) -> list[CaseLine]:
    out = []
    # Generated deals of 2, 3 and 4 players in every mode, some claims right, some wrong.
    for n, (players, mode) in enumerate(
        [(2, None), (3, None), (4, None), (4, "ELIMINATION"), (3, "ELIMINATION"), (4, None)]
    ):
        deal = random_deal(rng, players, mode)
        out.append(deal_case(f"deal-{n}-ok", deal, rng, wrong=0.0))
        out.append(deal_case(f"deal-{n}-mixed", deal, rng, wrong=0.4))
    # Every claim off: the multiplier claimed as the unclean one.
    deal = random_deal(rng, 4)
    line = deal_case("deal-wrong", deal, rng, wrong=1.0)
    assert line.expected.outcome == "WRONG"
    out.append(line)
    # RULES §8: HEAD_TO_HEAD, closer LINKED_CLEAN, the other hand 33: closer +66.
    other = EXAMPLE_HANDS[0][0]
    closer = "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()  # 9 loose: not a close
    linked = "7C 8C 9C 10D 10H 10S JD QD KD AD".split()  # run ♣, three tens, J-Q-K-A ♦
    msg = {
        "deal": {
            "players": [{"name": "ana", "cards": linked}, {"name": "bo", "cards": other}],
            "closer": 0,
            "discard": "2D",
        },
        "claims": {
            "close_kind": "CLOSE_KIND_LINKED_CLEAN",
            "multiplier": 2,
            "players": [
                {"player": 0, "score_change": 66, "new_score": 66},
                {"player": 1, "points": 33, "score_change": 0},
            ],
        },
    }
    out.append(
        _line(
            {"id": "deal-example", "deal": msg},
            Expected(
                "deal-example",
                "CONFIRMED",
                (
                    ("claims.close_kind", "CONFIRMED", "LINKED_CLEAN"),
                    ("claims.multiplier", "CONFIRMED", "2"),
                    ("claims.players[0].score_change", "CONFIRMED", "66"),
                    ("claims.players[0].new_score", "CONFIRMED", "66"),
                    ("claims.players[1].points", "CONFIRMED", "33"),
                    ("claims.players[1].score_change", "CONFIRMED", "0"),
                ),
                {"points": [0, 33], "score_change": [66, 0]},
            ),
        )
    )
    # Claimed groups of a player: the best (BEST), and a non-group (INVALID).
    ex = EXAMPLE_HANDS[2]  # QS KS AS 2S 3S 4S 7H 7D 7C 9D, 9
    msg = {
        "deal": {"players": [{"cards": linked}, {"cards": ex[0]}], "closer": 0, "discard": "2D"},
        "claims": {"players": [{"player": 1, "groups": [{"cards": g} for g in ex[2]], "points": 9}]},
    }
    out.append(
        _line(
            {"id": "deal-groups-best", "deal": msg},
            Expected(
                "deal-groups-best",
                "CONFIRMED",
                (("claims.players[0].groups", "BEST", "9"), ("claims.players[0].points", "CONFIRMED", "9")),
                {"points": [0, 9], "score_change": [18, 0]},
            ),
        )
    )
    msg = {
        "deal": {"players": [{"cards": linked}, {"cards": ex[0]}], "closer": 0, "discard": "2D"},
        "claims": {
            "players": [
                {
                    "player": 1,
                    "groups": [{"cards": ["KS", "AS", "2S"]}, {"cards": ["7H", "7D", "7C"]}],
                    "score_change": 18,
                }
            ]
        },
    }
    out.append(
        _line(
            {"id": "deal-groups-invalid", "deal": msg},
            Expected(
                "deal-groups-invalid",
                "INVALID",
                (("claims.players[0].groups", "INVALID", "9"), ("claims.players[0].score_change", "WRONG", "0")),
                {"points": [0, 9], "score_change": [18, 0]},
            ),
        )
    )
    # An invalid close scores nothing; claiming "no valid close" is right.
    msg = {
        "deal": {"players": [{"cards": closer}, {"cards": other}, {"cards": linked}], "closer": 0, "discard": "2D"},
        "claims": {
            "close_kind": "CLOSE_KIND_UNSPECIFIED",
            "multiplier": 0,
            "players": [{"player": 1, "points": 33, "score_change": 0}, {"player": 2, "points": 0}],
        },
    }
    out.append(
        _line(
            {"id": "deal-no-close", "deal": msg},
            Expected(
                "deal-no-close",
                "CONFIRMED",
                (
                    ("claims.close_kind", "CONFIRMED", ""),
                    ("claims.multiplier", "CONFIRMED", "0"),
                    ("claims.players[0].points", "CONFIRMED", "33"),
                    ("claims.players[0].score_change", "CONFIRMED", "0"),
                    ("claims.players[1].points", "CONFIRMED", "0"),
                ),
                {"points": [9, 33, 0], "score_change": [0, 0, 0]},
            ),
        )
    )
    # No claim at all.
    deal = random_deal(rng, 3)
    out.append(
        _line(
            {"id": "deal-none", "deal": deal.message()},
            Expected("deal-none", "NO_CLAIM", answer={"points": deal.points, "score_change": deal.changes}),
        )
    )
    return out


def _malformed_lines(rng: random.Random) -> list[CaseLine]:
    """Lines that cannot be judged, each with the error's field."""
    good = EXAMPLE_HANDS[0][0]
    linked = "7C 8C 9C 10D 10H 10S JD QD KD AD".split()
    return [
        CaseLine('{"id": "bad-json", "hand": {"cards": ["AH"', Expected("line:{n}", "MALFORMED", error_field="line")),
        CaseLine("this is not json", Expected("line:{n}", "MALFORMED", error_field="line")),
        CaseLine('["a", "list"]', Expected("line:{n}", "MALFORMED", error_field="line")),
        _line(
            {"id": "bad-field", "hand": {"cards": good, "claimed": 3}},
            Expected("bad-field", "MALFORMED", error_field="line"),
        ),
        _line(
            {"id": "bad-card", "hand": {"cards": good[:6] + ["1H"] + good[7:], "claimed_points": 33}},
            Expected("bad-card", "MALFORMED", error_field="hand.cards[6]"),
        ),
        _line(
            {"id": "bad-card-close", "close": {"cards": good, "discard": "ZZ"}},
            Expected("bad-card-close", "MALFORMED", error_field="close.discard"),
        ),
        _line(
            {
                "id": "bad-card-deal",
                "deal": {
                    "deal": {"players": [{"cards": linked}, {"cards": good[:3] + ["11C"] + good[4:]}], "discard": "2D"}
                },
            },
            Expected("bad-card-deal", "MALFORMED", error_field="deal.deal.players[1].cards[3]"),
        ),
        _line(
            {"id": "bad-copies", "hand": {"cards": ["AH", "AH", "AH"], "claimed_points": 3}},
            Expected("bad-copies", "MALFORMED", error_field="hand.cards[2]"),
        ),
        _line(
            {"id": "bad-count-hand", "hand": {"cards": good + ["4C", "4S"]}},
            Expected("bad-count-hand", "MALFORMED", error_field="hand.cards"),
        ),
        _line(
            {"id": "bad-count-close", "close": {"cards": good[:9], "claimed_kind": "CLOSE_KIND_LINKED"}},
            Expected("bad-count-close", "MALFORMED", error_field="close.cards"),
        ),
        _line(
            {
                "id": "bad-count-deal",
                "deal": {"deal": {"players": [{"cards": linked}, {"cards": good[:9]}], "discard": "2D"}},
            },
            Expected("bad-count-deal", "MALFORMED", error_field="deal.deal.players[1].cards"),
        ),
        _line({"id": "bad-no-dispute"}, Expected("bad-no-dispute", "MALFORMED", error_field="dispute")),
        _line(
            {
                "id": "bad-claim-player",
                "deal": {
                    "deal": {"players": [{"cards": linked}, {"cards": good}], "discard": "2D"},
                    "claims": {"players": [{"player": 5, "points": 1}]},
                },
            },
            Expected("bad-claim-player", "MALFORMED", error_field="deal.claims.players[0].player"),
        ),
    ]


def mixed_cases(seed: int = 0, malformed: bool = True) -> list[CaseLine]:
    """The every-type file: hands, closes, deals (2-4 players), every outcome, malformed lines mixed in."""
    rng = random.Random(seed)
    cases = _hand_cases(rng) + _close_cases(rng) + _deal_cases(rng)
    rng.shuffle(cases)
    if malformed:
        for line in _malformed_lines(rng):
            cases.insert(rng.randrange(len(cases) + 1), line)
    return numbered(cases)


def deal_cases(count: int, seed: int = 0, players: int = 4, wrong: float = 0.5) -> Iterator[CaseLine]:
    """``count`` end-of-deal disputes of ``players`` players with claims on points and score changes."""
    rng = random.Random(seed)
    for n in range(count):
        deal = random_deal(rng, players)
        yield deal_case(
            f"deal-{seed}-{n:07d}", deal, rng, wrong=wrong, claim_kind=n % 2 == 0, claim_new_score=n % 3 == 0
        )


def numbered(cases: Sequence[CaseLine]) -> list[CaseLine]:
    """Fill in the ``line:N`` ids of lines that cannot be read (ids count lines from 1)."""
    out = []
    for n, case in enumerate(cases, start=1):
        if case.expected.id == "line:{n}":
            case = CaseLine(
                case.text, Expected(f"line:{n}", case.expected.outcome, error_field=case.expected.error_field)
            )
        out.append(case)
    return out


def write_cases(path: Any, cases: Iterable[CaseLine]) -> dict[str, Expected]:
    """Write one case per line; return the expected verdicts by id (ids must be unique)."""
    expected: dict[str, Expected] = {}
    with open(path, "w", encoding="utf-8") as out:
        for case in cases:
            assert "\n" not in case.text
            out.write(case.text + "\n")
            assert case.expected.id not in expected, case.expected.id
            expected[case.expected.id] = case.expected
    return expected


def many_hand_cases(path: Any, seed: int, copies: int) -> dict[str, Expected]:
    """Cheap hand cases, ``copies`` times over with fresh ids, written to ``path``: enough for
    several CheckDisputes calls (one call per chunk of cases)."""
    hands = [c for c in mixed_cases(seed=seed, malformed=False) if '"hand"' in c.text]
    many = [
        CaseLine(
            c.text.replace(f'"id":"{c.expected.id}"', f'"id":"{n}-{c.expected.id}"', 1),
            Expected(f"{n}-{c.expected.id}", c.expected.outcome, c.expected.claims, c.expected.answer),
        )
        for n in range(copies)
        for c in hands
    ]
    return write_cases(path, many)


def mismatches(verdict: dict[str, Any], expected: Expected) -> list[str]:
    """How a verdict (protobuf JSON, proto field names) differs from what was expected; [] when it matches."""
    problems = []

    def check(what: str, got: object, want: object) -> None:
        if got != want:
            problems.append(f"{expected.id}: {what}: got {got!r}, want {want!r}")

    check("id", verdict.get("id"), expected.id)
    check("outcome", verdict.get("outcome"), f"DISPUTE_OUTCOME_{expected.outcome}")
    got_claims = [
        (c.get("field"), str(c.get("verdict", "")).removeprefix("VERDICT_"), c.get("expected", ""))
        for c in verdict.get("claims", [])
    ]
    check("claims", got_claims, list(expected.claims))
    if expected.outcome == "MALFORMED":
        check("error.field", verdict.get("error", {}).get("field"), expected.error_field)
        return problems
    answer = expected.answer
    if "points" in answer and "hand" in verdict:
        check("hand.points", verdict["hand"].get("points"), answer["points"])
    if "deal" in verdict and answer:
        players = verdict["deal"].get("players", [])
        check("deal points", [p.get("points") for p in players], answer["points"])
        check("deal score changes", [p.get("score_change") for p in players], answer["score_change"])
    if "close" in verdict:
        close = verdict["close"]
        for key in ("valid", "kind", "multiplier", "discard"):
            if key in answer:
                want = f"CLOSE_KIND_{answer[key]}" if key == "kind" else answer[key]
                check(f"close.{key}", close.get(key), want)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Write a case file (and, with --expected, the expected outcomes by id as JSON)."""
    parser = argparse.ArgumentParser(prog="python tests/cases.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument(
        "--deals", type=int, default=0, help="write N generated end-of-deal cases instead of the mixed file"
    )
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clean", action="store_true", help="the mixed file without malformed lines")
    parser.add_argument("--expected", help="also write {id: outcome} here")
    args = parser.parse_args(argv)
    cases = deal_cases(args.deals, args.seed, args.players) if args.deals else mixed_cases(args.seed, not args.clean)
    expected = write_cases(args.output, cases)
    if args.expected:
        with open(args.expected, "w", encoding="utf-8") as out:
            json.dump({k: v.outcome for k, v in expected.items()}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
