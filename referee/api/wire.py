"""Counting a request's repeated fields in its bytes, before it is decoded.

A request over a count limit (``referee.game.limits``) is refused from a walk over its wire format, so
200,000 card codes cost the server no more than the bytes it already received: no decoded message,
no strings, nothing for an error's traceback to keep alive. The walk stops at the first field over
its limit, and after ``MAX_FIELDS`` fields in all (a flood of unknown fields is not worth reading).

The walk only counts. Bytes it cannot follow (a truncated field, a group) end the walk quietly: the
decoder then reports the request as undecodable, in one place.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from referee.game.errors import LimitError
from referee.game.limits import LIMITS, Limit

# More fields than any valid request holds (a 21-player ScoreDeal with every claim made holds
# about 4,000), and few enough to walk in a few milliseconds.
MAX_FIELDS = 16_384

# When a field is over its limit, the error quotes its count if it is over by at most this many
# (a client's slip); beyond that the walk stops counting (an attack's flood).
COUNTED_OVER = 1_000

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# "Message.field" -> its count limit (string-length limits, "Message.field[]", are checked on
# the decoded strings: a long string costs only its own bytes).
_COUNT_LIMITS: dict[str, Limit] = {name: limit for limit in LIMITS for name in limit.fields if not name.endswith("[]")}


class _Plan:
    """What the walk needs of one message type: its fields by number, and their count limits."""

    __slots__ = ("fields", "limits")

    def __init__(self, descriptor: Descriptor) -> None:
        self.fields: dict[int, FieldDescriptor] = dict(descriptor.fields_by_number)
        self.limits: dict[int, Limit] = {}
        for number, field in self.fields.items():
            limit = _COUNT_LIMITS.get(f"{descriptor.name}.{field.name}")
            if limit is not None and field.is_repeated:
                self.limits[number] = limit


_PLANS: dict[str, _Plan] = {}


def _plan(descriptor: Descriptor) -> _Plan:
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = _PLANS[descriptor.full_name] = _Plan(descriptor)
    return plan


# A request shorter than this may be decoded before its walk, and skip the walk when its decoded
# counts are all within their limits (``counts_within``): every field takes two bytes or more on
# the wire (a tag and a length or a value), so it holds fewer than ``MAX_FIELDS`` fields, and a
# count the walk would find over its limit is a count the decoded message holds too. Small: the
# walk first is what keeps a flood of fields from ever being decoded.
DECODED_FIRST_BYTES = 2048
assert DECODED_FIRST_BYTES <= 2 * MAX_FIELDS


class _Counted:
    """What ``counts_within`` looks at in a decoded message of one type: its repeated fields with
    a count limit, and its message fields that hold such fields, themselves or further down."""

    __slots__ = ("limited", "nested", "provable")

    def __init__(self) -> None:
        self.limited: list[tuple[str, int]] = []  # (field name, most elements)
        self.nested: list[tuple[str, bool, Descriptor]] = []  # (field name, repeated, its type)
        # False when a decoded message may hold fewer elements than its bytes: a oneof of
        # message fields (the last member set clears the others, which the walk counted).
        self.provable = True


_COUNTED: dict[str, _Counted] = {}


def _counted(descriptor: Descriptor) -> _Counted:
    counted = _COUNTED.get(descriptor.full_name)
    if counted is not None:
        return counted
    counted = _COUNTED[descriptor.full_name] = _Counted()  # before the fields: a type may hold itself
    plan = _plan(descriptor)
    for oneof in descriptor.oneofs:
        if any(field.message_type is not None for field in oneof.fields):
            counted.provable = False
    for number, field in plan.fields.items():
        limit = plan.limits.get(number)
        if limit is not None:
            counted.limited.append((field.name, limit.most))
        if field.message_type is not None:
            inner = _counted(field.message_type)
            if inner.limited or inner.nested or not inner.provable:
                counted.nested.append((field.name, field.is_repeated, field.message_type))
    return counted


def counts_within(message: Message) -> bool:
    """Whether every repeated field with a count limit in the decoded ``message`` (and in the
    messages inside it) holds at most its limit: then ``check_counts`` over the bytes it was
    decoded from, if fewer than ``DECODED_FIRST_BYTES``, raises nothing.

    The decoded message holds every element the walk counts (a repeated field's elements are its
    occurrences, a message field sent twice is the two merged), so a count over its limit on the
    wire is one in the message; False means the walk must say (it may find none: two merged halves).
    """
    return _within(message, message.DESCRIPTOR)


def _within(message: Message, descriptor: Descriptor) -> bool:
    counted = _counted(descriptor)
    if not counted.provable:
        return False
    for name, most in counted.limited:
        if len(getattr(message, name)) > most:
            return False
    for name, repeated, inner in counted.nested:
        if repeated:
            if not all(_within(element, inner) for element in getattr(message, name)):
                return False
        elif message.HasField(name) and not _within(getattr(message, name), inner):
            return False
    return True


class Unreadable(ValueError):
    """Bytes that are not a varint or a field a walk can follow (the decoder says what is wrong)."""


def check_counts(data: bytes, descriptor: Descriptor) -> None:
    """Raise ``LimitError`` naming the field path when a repeated field of the message in ``data``
    (or of a message inside it) holds more elements than its limit, or when ``data`` holds more than
    ``MAX_FIELDS`` fields."""
    fields_left = [MAX_FIELDS]
    try:
        _walk(memoryview(data), 0, len(data), descriptor, "", fields_left)
    except Unreadable:
        pass


def read_varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (before ``end``) and the position after it; ``Unreadable`` when it
    runs past ``end`` or over 64 bits."""
    value = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise Unreadable


def _count_on(data: memoryview, pos: int, end: int, number: int, count: int) -> int | str:
    """The elements of field ``number`` in all, when the rest of the message holds at most
    ``COUNTED_OVER`` more of them; else a phrase that says so."""
    counted = count
    try:
        while pos < end and counted - count < COUNTED_OVER:
            tag, pos = read_varint(data, pos, end)
            wire = tag & 7
            if wire == _VARINT:
                _, pos = read_varint(data, pos, end)
            elif wire == _FIXED64:
                pos += 8
            elif wire == _FIXED32:
                pos += 4
            elif wire == _LENGTH:
                length, pos = read_varint(data, pos, end)
                pos += length
                counted += tag >> 3 == number
            else:
                break
    except Unreadable:
        pass
    return counted if pos >= end else f"{counted} or more"


def _walk(data: memoryview, pos: int, end: int, descriptor: Descriptor, path: str, fields_left: list[int]) -> None:
    plan = _plan(descriptor)
    counts: dict[int, int] = {}
    while pos < end:
        fields_left[0] -= 1
        if fields_left[0] < 0:
            raise LimitError("", f"more than {MAX_FIELDS} fields", f"a request holds at most {MAX_FIELDS} fields")
        tag, pos = read_varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            _, pos = read_varint(data, pos, end)
            continue
        if wire == _FIXED64:
            pos += 8
            continue
        if wire == _FIXED32:
            pos += 4
            continue
        if wire != _LENGTH:
            raise Unreadable
        length, pos = read_varint(data, pos, end)
        if pos + length > end:
            raise Unreadable
        field = plan.fields.get(number)
        if field is not None:
            index = counts.get(number, 0)
            if field.is_repeated:
                counts[number] = index + 1
                limit = plan.limits.get(number)
                if limit is not None and index >= limit.most:
                    count = _count_on(data, pos + length, end, number, index + 1)
                    raise LimitError(path + field.name, count, f"at most {limit.most} {limit.unit}")
            if field.message_type is not None:
                where = f"{path}{field.name}[{index}]." if field.is_repeated else f"{path}{field.name}."
                _walk(data, pos, pos + length, field.message_type, where, fields_left)
        pos += length


__all__ = ["DECODED_FIRST_BYTES", "MAX_FIELDS", "Unreadable", "check_counts", "counts_within", "read_varint"]
