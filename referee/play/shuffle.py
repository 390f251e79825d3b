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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import count
from operator import ge, mod
from typing import TypeVar

from referee.game.cards import Card, deck
from referee.game.errors import InvalidShuffleError
from referee.game.kinds import Kind

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


class ShuffleProof(Kind):
    """What a record proves about its deck order (RULES §9.5):

    - ``COMMITTED``: a seeded shuffle whose seed's hash was committed before the deal
      (``server_seed_hash``); the replay checks the revealed seed against it (else SEED_MISMATCH),
      so the order was fixed before anyone played;
    - ``UNCOMMITTED``: a seeded shuffle with no commitment: the order follows from the seed, but
      nothing shows the seed was chosen before the deal;
    - ``EXPLICIT_DECK``: the record states the order itself: nothing proves when it was chosen.
    """

    COMMITTED = "COMMITTED"
    UNCOMMITTED = "UNCOMMITTED"
    EXPLICIT_DECK = "EXPLICIT_DECK"

    def sentence(self, seed_mismatch: bool = False) -> str:
        """What it proves, in words, for a reader of a replay (the command line, the report);
        ``seed_mismatch``: the replay found the revealed seed off its commitment."""
        if self is ShuffleProof.COMMITTED and seed_mismatch:
            return "shuffle committed, and the revealed seed does not match the hash published before the deal"
        return _PROOF_SENTENCES[self]


_PROOF_SENTENCES = {
    ShuffleProof.COMMITTED: "shuffle committed: the revealed seed matches the hash published before the deal",
    ShuffleProof.UNCOMMITTED: "shuffle seeded but not committed: nothing shows the order was fixed before the deal",
    ShuffleProof.EXPLICIT_DECK: "deck stated in the record: nothing shows when the order was chosen",
}


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

    @property
    def proof(self) -> ShuffleProof:
        """COMMITTED when a hash was committed (whether the seed matches it is the replay's to
        say), else UNCOMMITTED."""
        return ShuffleProof.UNCOMMITTED if self.server_seed_hash is None else ShuffleProof.COMMITTED

    def matches_commitment(self) -> bool:
        """False when a committed hash is given and the revealed seed does not hash to it."""
        return self.server_seed_hash is None or hmac.compare_digest(self.server_seed_hash, self.commitment())


def commitment(server_seed: str) -> str:
    """The SHA-256, in hex, of the 32 bytes a server seed of 64 hex digits stands for."""
    return hashlib.sha256(bytes.fromhex(_hex_field(server_seed, "server_seed", "a server seed"))).hexdigest()


@lru_cache(maxsize=64)
def _padded_key(seed: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """The SHA-256 states after HMAC's inner and outer padded keys (RFC 2104) for ``seed``.

    HMAC-SHA256(key, m) = SHA-256(key ⊕ opad ‖ SHA-256(key ⊕ ipad ‖ m)); a shuffle hashes up to 27
    blocks with one key, and setting the key up once instead of per block (as ``hmac.digest`` does)
    makes the stream more than twice as fast. The tests check it against ``hmac``.
    """
    block = seed.ljust(64, b"\0")  # SHA-256's block is 64 bytes; a 32-byte key is padded with zeros
    return hashlib.sha256(bytes(b ^ 0x36 for b in block)), hashlib.sha256(bytes(b ^ 0x5C for b in block))


def _blocks(shuffle: Shuffle, k: int, first: int, count: int) -> bytes:
    """Blocks ``first`` to ``first + count - 1`` of the byte stream of shuffle number ``k``:
    HMAC-SHA256 keyed by the seed over ``client_seed:nonce:k:r``."""
    inner, outer = _padded_key(shuffle.seed)
    prefixed = inner.copy()
    prefixed.update(f"{shuffle.client_seed}:{shuffle.nonce}:{k}:".encode())
    out = []
    for r in range(first, first + count):
        h = prefixed.copy()
        h.update(b"%d" % r)
        o = outer.copy()
        o.update(h.digest())
        out.append(o.digest())
    return b"".join(out)


def words(shuffle: Shuffle, k: int) -> Iterator[int]:
    """The byte stream of shuffle number ``k``, read as big-endian 4-byte words.

    A 32-byte block holds exactly eight words, so no word straddles two blocks.
    """
    for r in count():
        yield from _EIGHT_WORDS.unpack(_blocks(shuffle, k, r, 1))


def permute(items: list[T], stream: Iterator[int]) -> list[T]:
    """Fisher-Yates on ``items`` in place: for i from the last index down to 1, swap item i with
    item j, j uniform below i + 1 by rejection sampling on the words of ``stream``."""
    for i in range(len(items) - 1, 0, -1):
        n = i + 1
        # The largest multiple of n that fits in a word: a word at or above it would bias x mod n.
        bound = _WORD - _WORD % n
        x = next(stream)
        while x >= bound:
            x = next(stream)
        j = x % n
        items[i], items[j] = items[j], items[i]
    return items


@lru_cache(maxsize=64)
def _bounds(last: int) -> tuple[tuple[int, ...], range]:
    """For a shuffle of ``last + 1`` items: each swap's rejection bound and the size it draws below."""
    sizes = range(last + 1, 1, -1)
    return tuple(_WORD - _WORD % n for n in sizes), sizes


def _fisher_yates(items: list[T], shuffle: Shuffle, k: int) -> list[T]:
    """``permute`` on the stream of shuffle number ``k``, the common case in bulk.

    A word is rejected with a chance below n / 2^32 (under one in 19 million for a deck of 216
    cards), so the words the swaps need are made at once and checked against their bounds in one
    pass; only a shuffle that rejects one goes word by word.
    """
    last = len(items) - 1
    if last < 1:
        return items
    blocks = (last + 7) // 8
    drawn = struct.unpack(f">{8 * blocks}I", _blocks(shuffle, k, 0, blocks))
    bounds, sizes = _bounds(last)
    if any(map(ge, drawn, bounds)):
        return permute(items, words(shuffle, k))
    for i, j in zip(range(last, 0, -1), map(mod, drawn, sizes)):
        items[i], items[j] = items[j], items[i]
    return items


@lru_cache(maxsize=8)
def _canonical(decks: int) -> tuple[Card, ...]:
    """The canonical deck: for each suit C D H S, each rank A 2 ... K, that card ``decks`` times;
    then the jokers (``referee.game.cards.deck`` lists it in that order)."""
    return deck(decks)


def dealt_deck(shuffle: Shuffle, decks: int) -> tuple[Card, ...]:
    """The deck of a deal, top first: the canonical deck of ``decks`` decks under shuffle number 0."""
    return tuple(_fisher_yates(list(_canonical(decks)), shuffle, 0))


def reshuffled(shuffle: Shuffle, k: int, cards: Sequence[Card]) -> tuple[Card, ...]:
    """The new stock, top first, of reshuffle number ``k`` (1 for the first) of ``cards``: the
    discard pile less its top card, oldest first."""
    if k < 1:
        raise InvalidShuffleError("k", k, "reshuffles are numbered from 1 (0 is the deal)")
    return tuple(_fisher_yates(list(cards), shuffle, k))


__all__ = [
    "ALGORITHM",
    "CLIENT_SEED_BYTES",
    "SEED_BYTES",
    "Shuffle",
    "commitment",
    "dealt_deck",
    "permute",
    "reshuffled",
    "words",
]
