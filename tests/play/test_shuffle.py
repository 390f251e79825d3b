"""remigio-shuffle-v1 (RULES §9.5): the documented test vectors, an independent reading of the rule
book compared on many seeds, and the checks of a Shuffle's fields.

The independent reading below imports nothing from ``referee``: its deck is strings, its stream
is ``hmac.new`` over the message text, and its Fisher-Yates is written from the rule book's words.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.game.cards import Card, parse_cards
from referee.game.errors import InvalidShuffleError, RefereeError
from referee.play.shuffle import ALGORITHM, Shuffle, commitment, dealt_deck, permute, reshuffled, words

RECORDS_DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"

# An independent reading of RULES §9.5 -----------------------------------------------------------


def canonical_deck(decks: int) -> list[str]:
    """For each suit in C D H S, for each rank A 2 ... 10 J Q K, that card ``decks`` times; then 2 × decks jokers."""
    ranks = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
    return [rank + suit for suit in "CDHS" for rank in ranks for _ in range(decks)] + ["JK"] * (2 * decks)


def byte_stream(seed: bytes, client_seed: str, nonce: int, k: int) -> Iterator[int]:
    """HMAC-SHA256(key = seed, message = UTF-8 of "client_seed:nonce:k:r") for r = 0, 1, ..., bytes one by one."""
    r = 0
    while True:
        message = f"{client_seed}:{nonce}:{k}:{r}".encode()
        yield from hmac.new(seed, message, hashlib.sha256).digest()
        r += 1


def uniform_below(n: int, stream: Iterator[int]) -> int:
    """Read 4 bytes big-endian as x; if x >= 2^32 - (2^32 mod n) read again, else x mod n."""
    while True:
        x = int.from_bytes(bytes(next(stream) for _ in range(4)), "big")
        if x < 2**32 - (2**32 % n):
            return x % n


def fisher_yates(items: list[str], stream: Iterator[int]) -> list[str]:
    """For i from len - 1 down to 1: j uniform below i + 1, swap items i and j."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = uniform_below(i + 1, stream)
        items[i], items[j] = items[j], items[i]
    return items


def independent_deck(seed_hex: str, client_seed: str, nonce: int, decks: int) -> list[str]:
    """The deck of a deal, top first, by the independent reading."""
    return fisher_yates(canonical_deck(decks), byte_stream(bytes.fromhex(seed_hex), client_seed, nonce, 0))


def independent_reshuffle(seed_hex: str, client_seed: str, nonce: int, k: int, pile: list[str]) -> list[str]:
    """Reshuffle ``k`` of the discard pile less its top (oldest first), by the independent reading."""
    return fisher_yates(pile, byte_stream(bytes.fromhex(seed_hex), client_seed, nonce, k))


def codes(cards: tuple[Card, ...]) -> list[str]:
    return [card.code() for card in cards]


# The documented vectors -----------------------------------------------------------------------


def documented_vectors() -> dict[str, dict[str, str]]:
    """The test vectors of docs/records.md: each ``### title`` followed by a ```text block of
    ``key: value`` lines, a value on the following indented lines when the key's line ends with ``:``."""
    text = RECORDS_DOC.read_text(encoding="utf-8")
    section = text[text.index("## remigio-shuffle-v1 test vectors") :]
    vectors = {}
    for title, block in re.findall(r"^### (.+?)\n\n```text\n(.*?)```", section, re.S | re.M):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith("  "):
                fields[key] = (fields[key] + " " + line.strip()).strip()
            else:
                key, _, value = line.partition(": ")
                key = key.rstrip(":")
                fields[key] = value.strip()
        vectors[title] = fields
    return vectors


VECTORS = documented_vectors()


def shuffle_of(fields: dict[str, str]) -> Shuffle:
    client_seed = fields["client_seed"]
    assert client_seed.startswith('"') and client_seed.endswith('"')
    return Shuffle(fields["server_seed"], client_seed[1:-1], int(fields["nonce"]), fields["server_seed_hash"])


def test_the_documentation_has_the_three_vectors() -> None:
    assert set(VECTORS) == {"Two decks", "Three decks", "A reshuffle"}


@pytest.mark.parametrize("title", ["Two decks", "Three decks"])
def test_a_documented_deal_vector(title: str) -> None:
    fields = VECTORS[title]
    shuffle = shuffle_of(fields)
    decks = int(fields["decks"])
    dealt = fields["dealt (top first)"].split()
    assert len(dealt) == 54 * decks
    assert commitment(shuffle.server_seed) == fields["server_seed_hash"]
    assert shuffle.matches_commitment()
    assert codes(dealt_deck(shuffle, decks)) == dealt
    assert independent_deck(shuffle.server_seed, shuffle.client_seed, shuffle.nonce, decks) == dealt
    first = hmac.new(shuffle.seed, f"{shuffle.client_seed}:{shuffle.nonce}:0:0".encode(), hashlib.sha256)
    assert first.hexdigest() == fields["first block (k = 0, r = 0)"]


def test_the_documented_reshuffle_vector() -> None:
    fields = VECTORS["A reshuffle"]
    shuffle = shuffle_of(fields)
    k = int(fields["k"])
    pile = fields["pile less its top (oldest first)"].split()
    new = fields["new stock (top first)"].split()
    assert sorted(new) == sorted(pile)
    assert codes(reshuffled(shuffle, k, parse_cards(pile))) == new
    assert independent_reshuffle(shuffle.server_seed, shuffle.client_seed, shuffle.nonce, k, pile) == new


def test_the_documented_first_swaps() -> None:
    for fields in VECTORS.values():
        shuffle = shuffle_of(fields)
        k = int(fields.get("k", "0"))
        size = len(fields.get("dealt (top first)", fields.get("pile less its top (oldest first)", "")).split())
        stream = byte_stream(shuffle.seed, shuffle.client_seed, shuffle.nonce, k)
        swaps = [(i, uniform_below(i + 1, stream)) for i in range(size - 1, size - 6, -1)]
        assert " ".join(f"({i}, {j})" for i, j in swaps) == fields["first swaps (i, j)"]


# The module against the independent reading, on many seeds -------------------------------------

SEEDS = st.binary(min_size=32, max_size=32).map(bytes.hex)
CLIENT_SEEDS = st.text(max_size=64).filter(lambda text: len(text.encode("utf-8", "surrogatepass")) <= 64)
NONCES = st.integers(min_value=0, max_value=2**64 - 1)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(SEEDS, CLIENT_SEEDS.filter(_encodable), NONCES, st.integers(min_value=1, max_value=4))
def test_the_dealt_deck_agrees_with_the_independent_reading(
    seed: str, client_seed: str, nonce: int, decks: int
) -> None:
    shuffle = Shuffle(seed, client_seed, nonce)
    assert codes(dealt_deck(shuffle, decks)) == independent_deck(seed, client_seed, nonce, decks)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    SEEDS,
    CLIENT_SEEDS.filter(_encodable),
    NONCES,
    st.integers(min_value=1, max_value=50),
    st.lists(st.sampled_from(canonical_deck(1)), min_size=0, max_size=120),
)
def test_a_reshuffle_agrees_with_the_independent_reading(
    seed: str, client_seed: str, nonce: int, k: int, pile: list[str]
) -> None:
    shuffle = Shuffle(seed, client_seed, nonce)
    assert codes(reshuffled(shuffle, k, parse_cards(pile))) == independent_reshuffle(seed, client_seed, nonce, k, pile)


def test_a_rejected_word_is_read_again() -> None:
    # The first word is rejected for n = 3 (2^32 - 1 >= 2^32 - (2^32 mod 3)); then i = 2 takes
    # j = 4 mod 3 = 1 and i = 1 takes j = 6 mod 2 = 0. Taken as 0, it would give b c a.
    assert permute(["a", "b", "c"], iter([2**32 - 1, 4, 6])) == ["c", "a", "b"]


def test_the_bulk_shuffle_is_the_word_by_word_one() -> None:
    for seed in range(20):
        shuffle = Shuffle(hashlib.sha256(bytes([seed])).hexdigest(), str(seed), seed)
        by_word = permute(list(parse_cards(canonical_deck(2))), words(shuffle, 0))
        assert dealt_deck(shuffle, 2) == tuple(by_word)


def test_shuffles_differ_by_seed_client_seed_nonce_and_number() -> None:
    base = Shuffle("00" * 32, "a", 1)
    decks = {
        tuple(codes(dealt_deck(shuffle, 2)))
        for shuffle in (base, Shuffle("01" + "00" * 31, "a", 1), Shuffle("00" * 32, "b", 1), Shuffle("00" * 32, "a", 2))
    }
    assert len(decks) == 4
    pile = parse_cards(canonical_deck(1)[:30])
    assert reshuffled(base, 1, pile) != reshuffled(base, 2, pile)


# The Shuffle value ------------------------------------------------------------------------------


def test_commitment_is_the_sha256_of_the_seed_bytes() -> None:
    seed = "00" * 32
    assert commitment(seed) == hashlib.sha256(bytes(32)).hexdigest()
    assert commitment(seed.upper()) == commitment(seed)
    assert Shuffle(seed).commitment() == commitment(seed)


def test_hex_is_read_in_either_case_and_written_in_lowercase() -> None:
    shuffle = Shuffle("AB" * 32, server_seed_hash=commitment("ab" * 32).upper())
    assert shuffle.server_seed == "ab" * 32
    assert shuffle.server_seed_hash == commitment("ab" * 32)
    assert shuffle.matches_commitment()


def test_an_empty_hash_is_no_commitment() -> None:
    shuffle = Shuffle("00" * 32, server_seed_hash="")
    assert shuffle.server_seed_hash is None
    assert shuffle.matches_commitment()
    assert not Shuffle("00" * 32, server_seed_hash=commitment("01" * 32)).matches_commitment()


@pytest.mark.parametrize(
    ("changes", "field", "quoted"),
    [
        ({"algorithm": "remigio-shuffle-v2"}, "algorithm", "remigio-shuffle-v2"),
        ({"server_seed": "00" * 31}, "server_seed", "00" * 16 + "…"),
        ({"server_seed": "zz" * 32}, "server_seed", "zz" * 16 + "…"),
        ({"server_seed": 7}, "server_seed", 7),
        ({"server_seed_hash": "12"}, "server_seed_hash", "12"),
        ({"client_seed": "x" * 65}, "client_seed", "x" * 32 + "…"),
        ({"client_seed": "ñ" * 33}, "client_seed", "ñ" * 32 + "…"),
        ({"client_seed": "\ud800"}, "client_seed", "\ud800"),
        ({"nonce": -1}, "nonce", -1),
        ({"nonce": 2**64}, "nonce", 2**64),
        ({"nonce": True}, "nonce", True),
    ],
)
def test_a_bad_field_is_named(changes: dict[str, object], field: str, quoted: object) -> None:
    fields: dict[str, object] = {"server_seed": "00" * 32, "client_seed": "", "nonce": 0, "algorithm": ALGORITHM}
    fields.update(changes)
    with pytest.raises(InvalidShuffleError) as caught:
        Shuffle(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.value == quoted
    assert isinstance(caught.value, RefereeError)


def test_the_largest_client_seed_and_nonce_are_allowed() -> None:
    shuffle = Shuffle("00" * 32, "ñ" * 32, 2**64 - 1)
    assert len(dealt_deck(shuffle, 1)) == 54


def test_reshuffles_are_numbered_from_one() -> None:
    with pytest.raises(InvalidShuffleError) as caught:
        reshuffled(Shuffle("00" * 32), 0, parse_cards(["AH", "2H"]))
    assert caught.value.field == "k"
