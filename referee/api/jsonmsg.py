"""Protobuf's JSON mapping for this contract's messages, faster than ``json_format``.

The batch front door reads and writes one JSON object per case, and ``json_format`` walks every
field in Python with many checks. This module does the same walk for the kinds of field the
contract uses (int32, uint64, bool, string, enum, message, repeated): the output is the dict
``json_format.MessageToDict`` gives with ``always_print_fields_with_no_presence`` and
``preserving_proto_field_name``, key order included; input that it does not fully recognise is
handed to ``json_format.Parse``, so every error is still protobuf's own.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_INT32 = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32)
_SIMPLE = {
    *_INT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_STRING,
    FieldDescriptor.TYPE_ENUM,
    FieldDescriptor.TYPE_MESSAGE,
}
_INT32_RANGE = range(-(2**31), 2**31)
_UINT64_RANGE = range(2**64)


class _Unsupported(Exception):
    """Something the fast path leaves to json_format."""


def to_dict(message: Message) -> dict[str, Any]:
    """The message as protobuf's JSON mapping: proto field names, every no-presence field present."""
    if not _supported(message.DESCRIPTOR):
        return json_format.MessageToDict(
            message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )
    return _to_dict(message)


def to_json(message: Message) -> str:
    """The message as one line of JSON (see ``to_dict``)."""
    return json.dumps(to_dict(message), ensure_ascii=False, separators=(",", ":"))


def parse(text: str, message: Message) -> Message:
    """Fill ``message`` from protobuf JSON; raises ``json_format.ParseError`` as ``json_format.Parse`` does."""
    try:
        if not _supported(message.DESCRIPTOR):
            raise _Unsupported
        data = json.loads(text, object_pairs_hook=_no_duplicates)
        if not isinstance(data, dict):
            raise _Unsupported
        _fill(message, data)
    except (_Unsupported, ValueError, TypeError):
        message.Clear()
        json_format.Parse(text, message)
    return message


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Unsupported  # json_format refuses a key given twice
    return found


def _to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        kind = _kind(field)
        if kind is _MESSAGE:
            out[field.name] = [_to_dict(item) for item in value] if field.is_repeated else _to_dict(value)
        elif kind is _SCALAR:
            # A repeated scalar (the cards) copied in one call, not an item at a time.
            out[field.name] = list(value) if field.is_repeated else value
        elif kind is _UINT64:
            # The JSON mapping writes a 64-bit integer as a decimal string.
            out[field.name] = [str(item) for item in value] if field.is_repeated else str(value)
        else:
            assert isinstance(kind, dict)
            # An enum: its name, or the number when this build does not know it.
            out[field.name] = [kind.get(item, item) for item in value] if field.is_repeated else kind.get(value, value)
    for name, default in _defaults(message.DESCRIPTOR):
        if name not in out:
            out[name] = [] if default is _LIST else default
    return out


_MESSAGE = "message"
_SCALAR = "scalar"
_UINT64 = "uint64"


@cache
def _kind(field: FieldDescriptor) -> str | dict[int, str]:
    """How a field prints: _MESSAGE, _SCALAR, _UINT64, or (an enum) its names by number."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _MESSAGE
    if field.type == FieldDescriptor.TYPE_UINT64:
        return _UINT64
    if field.type == FieldDescriptor.TYPE_ENUM:
        return {number: value.name for number, value in field.enum_type.values_by_number.items()}
    return _SCALAR


_LIST = object()


@cache
def _defaults(descriptor: Descriptor) -> tuple[tuple[str, Any], ...]:
    """The no-presence fields in declaration order, with the value printed when unset."""
    found = []
    for field in descriptor.fields:
        if field.has_presence:
            continue
        if field.is_repeated:
            found.append((field.name, _LIST))
        elif field.type == FieldDescriptor.TYPE_ENUM:
            found.append((field.name, field.enum_type.values_by_number[0].name))
        elif field.type == FieldDescriptor.TYPE_UINT64:
            found.append((field.name, "0"))
        else:
            found.append((field.name, field.default_value))
    return tuple(found)


@cache
def _supported(descriptor: Descriptor) -> bool:
    """True when every field, all the way down, is of a kind this module handles."""
    return all(
        field.type in _SIMPLE
        and not (field.message_type is not None and field.message_type.GetOptions().map_entry)
        and (
            field.message_type is None
            or field.message_type.full_name.startswith("remigio.")
            and _supported(field.message_type)
        )
        for field in descriptor.fields
    )


@cache
def _fields_by_key(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    keys = {}
    for field in descriptor.fields:
        keys[field.name] = field
        keys[field.json_name] = field
    return keys


def _fill(message: Message, data: dict[str, Any]) -> None:
    fields = _fields_by_key(message.DESCRIPTOR)
    seen: set[str] = set()
    oneofs: set[str] = set()
    for key, value in data.items():
        field = fields.get(key)
        if field is None or field.name in seen or value is None:
            raise _Unsupported  # unknown field, a field given twice, or null: json_format decides
        seen.add(field.name)
        if field.containing_oneof is not None:
            if field.containing_oneof.name in oneofs:
                raise _Unsupported
            oneofs.add(field.containing_oneof.name)
        if field.is_repeated:
            if not isinstance(value, list):
                raise _Unsupported
            target = getattr(message, field.name)
            if field.type != FieldDescriptor.TYPE_MESSAGE:
                target.extend(_scalars(field, value))
                continue
            for item in value:
                if not isinstance(item, dict):
                    raise _Unsupported
                _fill(target.add(), item)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if not isinstance(value, dict):
                raise _Unsupported
            sub = getattr(message, field.name)
            sub.SetInParent()
            _fill(sub, value)
        else:
            setattr(message, field.name, _scalar(field, value))


def _scalars(field: FieldDescriptor, values: list[Any]) -> list[Any]:
    # Lists of card codes are most of a case: strings are checked without a call each.
    if field.type == FieldDescriptor.TYPE_STRING and all(type(value) is str for value in values):
        return values
    return [_scalar(field, value) for value in values]


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    kind = field.type
    if kind in _INT32:
        if type(value) is int and value in _INT32_RANGE:
            return value
    elif kind == FieldDescriptor.TYPE_UINT64:
        # A number, or its decimal digits as a string; any other spelling is json_format's to judge.
        if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 20:
            value = int(value)
        if type(value) is int and value in _UINT64_RANGE:
            return value
    elif kind == FieldDescriptor.TYPE_BOOL:
        if type(value) is bool:
            return value
    elif kind == FieldDescriptor.TYPE_STRING:
        if type(value) is str:
            return value
    elif kind == FieldDescriptor.TYPE_ENUM:
        if type(value) is str:
            known = field.enum_type.values_by_name.get(value)
            if known is not None:
                return known.number
        elif type(value) is int and value in _INT32_RANGE:
            return value
    raise _Unsupported
