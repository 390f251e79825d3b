"""Protobuf bytes no client library builds on purpose: unknown fields, as a newer client (or an
attacker) may send them."""

from __future__ import annotations

from google.protobuf.message import Message


def varint(value: int) -> bytes:
    """``value`` (at least 0) as a protobuf varint."""
    out = b""
    while value >= 0x80:
        out += bytes((value & 0x7F | 0x80,))
        value >>= 7
    return out + bytes((value,))


def unknown_field(size: int, number: int = 1000, fill: bytes = b"x") -> bytes:
    """A length-delimited field numbered ``number`` holding ``size`` bytes of ``fill``, repeated."""
    return varint((number << 3) | 2) + varint(size) + (fill * size)[:size]


def padded(message: Message, size: int, fill: bytes = b"x") -> bytes:
    """``message`` serialized with an unknown field after it: ``size`` bytes in all."""
    data = message.SerializeToString()
    key = len(varint(1000 << 3 | 2))
    pad = size - len(data) - key - 1
    while key + len(varint(pad)) + pad + len(data) > size:  # a longer length takes more bytes
        pad -= 1
    return data + unknown_field(pad, fill=fill)
