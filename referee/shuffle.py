"""``remigio-shuffle-v1``: the deck order of a deal from a committed seed (RULES §9.5).

A platform commits to a deal before it is played by publishing the SHA-256 of a secret 32-byte
``server_seed``; after the deal it reveals the seed, and anyone can recompute every card the deal
dealt and every reshuffle of the discard pile. The byte stream is HMAC-SHA256 keyed by the seed,
so the client's seed and the deal's nonce change the order without the server learning anything
from them. The test vectors are in ``docs/records.md``.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from referee.cards import Card, deck
from referee.errors import InvalidShuffleError

ALGORITHM = "remigio-shuffle-v1"
SEED_BYTES = 32
CLIENT_SEED_BYTES = 64
NONCE_MOST = 2**64 - 1
_HEX_DIGITS = frozenset("0123456789abcdef")
_WORD = 1 << 32
_EIGHT_WORDS = struct.Struct(">8I")  # one HMAC-SHA256 block: eight big-endian 4-byte words

T = TypeVar("T")


def _hex_field(value: object, field: str, what: str) -> str:
    """``value`` as 64 lowercase hex digits; raise naming ``field`` when it is not."""
    if not isinstance(value, str):
        raise InvalidShuffleError(field, value, f"{what} must be a string of {2 * SEED_BYTES} hex digits")
    text = value.lower()
    if len(text) != 2 * SEED_BYTES or not _HEX_DIGITS.issuperset(text):
        raise InvalidShuffleError(field, value, f"{what} must be {2 * SEED_BYTES} hex digits ({SEED_BYTES} bytes)")
    return text


@dataclass(frozen=True, slots=True)
class Shuffle:
    """A seeded deck order: the revealed server seed (hex), the client's seed, the deal's nonce,
    and optionally the hash committed before the deal."""

    server_seed: str
    client_seed: str = ""
    nonce: int = 0
    server_seed_hash: str | None = None
    algorithm: str = ALGORITHM

    def __post_init__(self) -> None:
        if self.algorithm != ALGORITHM:
            raise InvalidShuffleError("algorithm", self.algorithm, f"unknown shuffle algorithm (known: {ALGORITHM})")
        # Hex digits of either case name the same bytes; lowercase is the spelling written back.
        object.__setattr__(self, "server_seed", _hex_field(self.server_seed, "server_seed", "a server seed"))
        if self.server_seed_hash == "":
            object.__setattr__(self, "server_seed_hash", None)  # unset, as the contract's empty string
        if self.server_seed_hash is not None:
            digest = _hex_field(self.server_seed_hash, "server_seed_hash", "a server seed hash")
            object.__setattr__(self, "server_seed_hash", digest)
        if not isinstance(self.client_seed, str):
            raise InvalidShuffleError("client_seed", self.client_seed, "a client seed must be a string")
        try:
            size = len(self.client_seed.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidShuffleError("client_seed", self.client_seed, "a client seed must be valid UTF-8") from None
        if size > CLIENT_SEED_BYTES:
            raise InvalidShuffleError(
                "client_seed", self.client_seed, f"a client seed holds at most {CLIENT_SEED_BYTES} bytes of UTF-8"
            )
        if isinstance(self.nonce, bool) or not isinstance(self.nonce, int) or not 0 <= self.nonce <= NONCE_MOST:
            raise InvalidShuffleError("nonce", self.nonce, "a nonce must be an integer 0 to 2^64 - 1")

    @property
    def seed(self) -> bytes:
        """The 32 bytes of the server seed."""
        return bytes.fromhex(self.server_seed)

    def commitment(self) -> str:
        """The SHA-256 of the server seed, in hex: what the platform publishes before the deal."""
        return commitment(self.server_seed)

    def matches_commitment(self) -> bool:
        """False when a committed hash is given and the revealed seed does not hash to it."""
        return self.server_seed_hash is None or hmac.compare_digest(self.server_seed_hash, self.commitment())


def commitment(server_seed: str) -> str:
    """The SHA-256, in hex, of the 32 bytes a server seed of 64 hex digits stands for."""
    return hashlib.sha256(bytes.fromhex(_hex_field(server_seed, "server_seed", "a server seed"))).hexdigest()


class _Words:
    """The byte stream of shuffle number ``k``, read as big-endian 4-byte words.

    A 32-byte block holds exactly eight words, so no word straddles two blocks. The blocks a
    shuffle of ``count`` swaps needs are made in one go (a rejected word is rare: at most one in
    2^25 for a deck), and more only when a rejection runs past them.
    """

    __slots__ = ("key", "prefix", "words", "blocks")

    def __init__(self, shuffle: Shuffle, k: int, count: int) -> None:
        self.key = shuffle.seed
        self.prefix = f"{shuffle.client_seed}:{shuffle.nonce}:{k}:"
        self.words: list[int] = []
        self.blocks = 0
        self.more((count + 7) // 8)

    def more(self, blocks: int = 1) -> None:
        """Append the next ``blocks`` blocks of the stream."""
        key, prefix, first = self.key, self.prefix, self.blocks
        for r in range(first, first + blocks):
            self.words.extend(_EIGHT_WORDS.unpack(hmac.digest(key, f"{prefix}{r}".encode(), "sha256")))
        self.blocks = first + blocks


# The largest multiple of n that fits in a word, by n: a word at or above it would bias x mod n.
_BOUNDS = tuple(_WORD - _WORD % n if n else 0 for n in range(4 * 54 + 1))


def _fisher_yates(items: list[T], shuffle: Shuffle, k: int) -> list[T]:
    """Shuffle ``items`` in place from the last index down, each swap partner uniform below i + 1
    by rejection sampling on the stream of shuffle number ``k``."""
    last = len(items) - 1
    stream = _Words(shuffle, k, last)
    words = stream.words
    w = 0
    for i in range(last, 0, -1):
        n = i + 1
        bound = _BOUNDS[n] if n < len(_BOUNDS) else _WORD - _WORD % n
        x = words[w]
        w += 1
        if x >= bound:
            while x >= bound:
                if w == len(words):
                    stream.more()
                x = words[w]
                w += 1
            # Every later swap still reads one word each: keep that many in hand.
            if len(words) - w < i - 1:
                stream.more((i - 1 - (len(words) - w) + 7) // 8)
        j = x % n
        items[i], items[j] = items[j], items[i]
    return items


def dealt_deck(shuffle: Shuffle, decks: int) -> tuple[Card, ...]:
    """The deck of a deal, top first: the canonical deck of ``decks`` decks under shuffle number 0."""
    return tuple(_fisher_yates(list(deck(decks)), shuffle, 0))


def reshuffled(shuffle: Shuffle, k: int, cards: Sequence[Card]) -> tuple[Card, ...]:
    """The new stock, top first, of reshuffle number ``k`` (1 for the first) of ``cards``: the
    discard pile less its top card, oldest first."""
    if k < 1:
        raise InvalidShuffleError("k", k, "reshuffles are numbered from 1 (0 is the deal)")
    return tuple(_fisher_yates(list(cards), shuffle, k))


__all__ = ["ALGORITHM", "CLIENT_SEED_BYTES", "SEED_BYTES", "Shuffle", "commitment", "dealt_deck", "reshuffled"]
