"""The base of the game's enumerations (suits, group kinds, verdicts, violations...)."""

from __future__ import annotations

import enum


class Kind(enum.Enum):
    """An enumeration of the game, its members hashed by identity.

    ``enum.Enum``'s own hash is a Python method (the hash of the member's name), called at every
    lookup of a member in a dict or a set: some thirty a deal record judged. A member is a
    singleton that equals only itself, so the hash of its identity (computed in C, no call) is as
    good a hash. No order of the referee's output depends on these hashes (string hashes differ
    from one process to the next already)."""

    __hash__ = object.__hash__
