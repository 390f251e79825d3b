"""The size limits of a request: one table, every repeated field and string of the contract in it.

Each limit is checked before any work or cache touches the field, and a request over one is a
malformed request (INVALID_ARGUMENT naming the field path, ``LimitError``). The limits follow from
the rules wherever the rules bound a field (a hand holds at most 11 cards); where they do not
(names, ids) they are generous for any real client and small for the server. ``LIMITS`` is the
table ``docs/operations.md`` quotes; a test checks that every repeated and string field of every
request message is in it.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

from referee.game.errors import LimitError

# The largest request or reply by default, in bytes (the server's --max-message-bytes).
MESSAGE_BYTES = 1 << 20
# The rules allow 1 to 4 decks of 54 cards (RuleSet.decks).
_MOST_DECKS = 4
_DECK = 54


@dataclass(frozen=True, slots=True)
class Limit:
    """The most a request field may hold: elements of a repeated field, or characters of a string."""

    most: int
    unit: str
    # The fields it applies to, as "Message.field" of the proto; "Message.field[]" for each
    # element of a repeated string field.
    fields: tuple[str, ...]
    why: str

    def check_count(self, values: Sized, field: str) -> None:
        """Raise naming ``field`` when ``values`` holds more than ``most`` elements."""
        if len(values) > self.most:
            raise LimitError(field, len(values), f"at most {self.most} {self.unit}")

    def check_length(self, text: str, field: str) -> None:
        """Raise naming ``field`` when ``text`` is longer than ``most`` characters."""
        if len(text) > self.most:
            raise LimitError(field, text, f"at most {self.most} {self.unit} ({len(text)} given)")


def check_reply(size: int, most: int) -> None:
    """Raise when a reply of ``size`` bytes would be over the message limit of ``most`` bytes.

    gRPC would fail such a call with RESOURCE_EXHAUSTED, a code that invites the client to retry
    what can never succeed; the request is what asks for too much, so it is the client's error.
    """
    if size > most:
        raise LimitError("", f"{size} bytes", f"the reply would be over the message limit of {most} bytes")


CARD_CODE = Limit(
    8,
    "characters",
    (
        "SolveHandRequest.cards[]",
        "HandDispute.cards[]",
        "CheckCloseRequest.cards[]",
        "CheckCloseRequest.discard",
        "Player.cards[]",
        "Deal.discard",
        "Pile.cards[]",
        "ClaimedGroup.cards[]",
        "Turn.drawn",
        "Turn.discard",
    ),
    "the longest spelling of a card is 4 characters (10♠ with an emoji variation selector); "
    "4 more leave room for spaces around it",
)
HAND_CARDS = Limit(
    11,
    "cards",
    ("SolveHandRequest.cards", "HandDispute.cards", "CheckCloseRequest.cards"),
    "a hand holds 1 to 11 cards, a close 10 or 11",
)
PLAYERS = Limit(
    (_MOST_DECKS * _DECK - 1) // 10,
    "players",
    ("Deal.players", "DealRecord.seats"),
    "the most players a deck deals 10 cards to: ⌊(4 × 54 − 1) / 10⌋ with 4 decks",
)
PLAYER_CARDS = Limit(10, "cards", ("Player.cards",), "every player shows 10 cards")
PILE_CARDS = Limit(_MOST_DECKS * _DECK, "cards", ("Pile.cards",), "the whole deck with 4 decks")
ELIMINATED = Limit(
    PLAYERS.most,
    "names",
    ("Deal.eliminated", "DealRecord.eliminated"),
    "no match holds more players than a deal can be dealt to",
)
NAME = Limit(
    64, "characters", ("Player.name", "Deal.eliminated[]", "Seat.name", "DealRecord.eliminated[]"), "a player's name"
)
CLAIMED_PLAYERS = Limit(PLAYERS.most, "claims", ("DealClaims.players",), "one claim per player")
CLAIMED_GROUPS = Limit(
    11,
    "groups",
    ("PlayerClaim.groups", "HandDispute.claimed_groups"),
    "a group of a claimed linking holds at least one card of a hand of at most 11",
)
CLAIMED_GROUP_CARDS = Limit(11, "cards", ("ClaimedGroup.cards",), "a group holds at most the 11 cards of a hand")
MULTIPLIERS = Limit(7, "rows", ("RuleOptions.multipliers",), "one row per close kind")
# A deal record (RULES §9).
TURNS = Limit(
    1000,
    "turns",
    ("DealRecord.turns",),
    "a long deal: two players who never close go round a two-deck stock of 87 cards in 87 turns; "
    "1000 turns are eleven times round it",
)
RESTOCK_CARDS = Limit(
    TURNS.most + 1,
    "cards",
    ("Turn.restock",),
    "all the restocks of a record together: every card restocked was thrown on a turn since the "
    "last restock, or is the first face-up card",
)
SHUFFLE_TEXT = Limit(
    64,
    "characters",
    ("Shuffle.algorithm", "Shuffle.server_seed", "Shuffle.server_seed_hash", "Shuffle.client_seed"),
    "a server seed and its hash are 64 hex digits, a client seed at most 64 bytes of UTF-8, an "
    "algorithm's name is short",
)
CASE_ID = Limit(128, "characters", ("CheckDisputesRequest.id",), "a dispute case's id, echoed in its verdict")

NOTATION = Limit(
    200_000,
    "characters",
    ("ReplayDealRequest.notation", "ReviewDealRequest.notation"),
    "a record in the notation: 1000 turns of about 30 characters, with room for restocks and comments",
)
DRAWN_TURNS = Limit(
    12,
    "turns",
    ("DrawAnswerRequest.turns",),
    "the turns of a review drawn in one picture, which stays quick to open",
)
LIMITS: tuple[Limit, ...] = (
    CARD_CODE,
    HAND_CARDS,
    PLAYERS,
    PLAYER_CARDS,
    PILE_CARDS,
    ELIMINATED,
    NAME,
    CLAIMED_PLAYERS,
    CLAIMED_GROUPS,
    CLAIMED_GROUP_CARDS,
    MULTIPLIERS,
    TURNS,
    RESTOCK_CARDS,
    SHUFFLE_TEXT,
    CASE_ID,
    DRAWN_TURNS,
    NOTATION,
)

__all__ = [
    "CARD_CODE",
    "CASE_ID",
    "CLAIMED_GROUPS",
    "CLAIMED_GROUP_CARDS",
    "CLAIMED_PLAYERS",
    "DRAWN_TURNS",
    "ELIMINATED",
    "HAND_CARDS",
    "LIMITS",
    "MESSAGE_BYTES",
    "NOTATION",
    "MULTIPLIERS",
    "NAME",
    "PILE_CARDS",
    "PLAYERS",
    "PLAYER_CARDS",
    "RESTOCK_CARDS",
    "SHUFFLE_TEXT",
    "TURNS",
    "Limit",
    "check_reply",
]
