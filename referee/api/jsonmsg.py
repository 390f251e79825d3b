"""Protobuf's JSON mapping for this contract's messages, faster than ``json_format``.

The batch front door reads and writes one JSON object per case, and ``json_format`` walks every
field in Python with many checks. This module does the same for the kinds of field the contract
uses (int32, uint64, bool, string, enum, message, repeated), with a printer and a filler written
for each message type the first time it is met (no descriptor is asked about a field while a
message is read or written): the output is the dict
``json_format.MessageToDict`` gives with ``always_print_fields_with_no_presence`` and
``preserving_proto_field_name``, key order included; input that it does not fully recognise is
handed to ``json_format.Parse``, so every error is still protobuf's own.
"""

from __future__ import annotations

import json
import keyword
import re
from functools import cache
from json.encoder import encode_basestring
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# The escaper json.dumps uses for every string with ensure_ascii=False (quotes included).
_quote = encode_basestring

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


class Unsupported(Exception):
    """Something the fast path leaves to json_format."""


def to_dict(message: Message) -> dict[str, Any]:
    """The message as protobuf's JSON mapping: proto field names, every no-presence field present."""
    if not _supported(message.DESCRIPTOR):
        return json_format.MessageToDict(
            message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )
    return _to_dict(message)


def to_json(message: Message) -> str:
    """The message as one line of JSON (see ``to_dict``): the text ``json.dumps`` gives that dict
    with ``ensure_ascii=False`` and no spaces, written straight from the message."""
    if not _supported(message.DESCRIPTOR):
        return json.dumps(to_dict(message), ensure_ascii=False, separators=(",", ":"))
    return _writer(message.DESCRIPTOR)(message)


def parse(text: str, message: Message) -> Message:
    """Fill ``message`` from protobuf JSON; raises ``json_format.ParseError`` as ``json_format.Parse`` does."""
    try:
        if not _supported(message.DESCRIPTOR):
            raise Unsupported
        # json.loads keeps the last of a key given twice, where json_format refuses the text. A
        # hook on every object finds such a key, at the cost of a call per object; text whose
        # keys are each followed at once by their colon (what this module writes) is checked in C
        # instead: it holds '":' at least once per key it spells, more when a string holds that
        # pair too. The same count as the keys read means no key repeats.
        countable = keys_countable(text)
        data = json.loads(text) if countable else json.loads(text, object_pairs_hook=_no_duplicates)
        if not isinstance(data, dict):
            raise Unsupported
        keys = fill(message, data)
        if countable and text.count('":') != keys:
            raise Unsupported  # a key given twice, or '":' within a string: json_format decides
    except (Unsupported, ValueError, TypeError):
        message.Clear()
        json_format.Parse(text, message)
    return message


def keys_countable(text: str) -> bool:
    """True when no key of the JSON ``text`` is parted from its colon by whitespace, so that
    ``text.count('":')`` counts every key it spells (and more when a string holds that pair)."""
    return _SPACED_COLON.search(text) is None


_SPACED_COLON = re.compile(r'"[ \t\n\r]+:')


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise Unsupported  # json_format refuses a key given twice
    return found


def _to_dict(message: Message) -> dict[str, Any]:
    return _printer(message.DESCRIPTOR)(message)


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


# Each message type gets its own printer and filler, written out as Python source once, the
# first time the type is met: a walk driven by the descriptors spends most of its time asking
# them what each field is, and a case holds hundreds of fields (a deal record's turns). The source
# does what ``ListFields`` and the JSON mapping do, field by field, in the same order.


def _compiled(source: str, name: str, namespace: dict[str, Any]) -> Any:
    exec(compile(source, f"<jsonmsg {name}>", "exec"), namespace)  # noqa: S102 - source written here
    return namespace[name]


def _scalar_lines(field: FieldDescriptor, one: str, many: str, put: str) -> list[str]:
    """The lines that put a scalar field (``one`` the format of its value, ``many`` of a repeated
    field's) into the statement ``put`` (its ``{}``), when it is set: a no-presence scalar when it is not its default
    (0, "", false), as ``json_format`` lists fields."""
    name, var = field.name, f"v_{field.name}"
    if field.is_repeated:
        return [f"    {var} = m.{name}", f"    if {var}:", "        " + put.format(many.format(var))]
    if field.has_presence:
        return [f"    if m.HasField({name!r}):", "        " + put.format(one.format(f"m.{name}"))]
    return [f"    {var} = m.{name}", f"    if {var}:", "        " + put.format(one.format(var))]


@cache
def _printer(descriptor: Descriptor) -> Any:
    """The function that gives a message of ``descriptor``'s type as a dict (as ``to_dict``).

    The keys come as ``ListFields`` gives them, the set fields in field-number order, then the
    unset no-presence fields in declaration order, as ``json_format`` writes them."""
    namespace: dict[str, Any] = {"_printer": _printer}
    body = ["def print_message(m):", "    out = {}"]
    for field in sorted(descriptor.fields, key=lambda f: f.number):
        name, var = field.name, f"v_{field.name}"
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            namespace[f"d_{name}"] = field.message_type
            convert = f"_printer(d_{name})"
            if field.is_repeated:
                body += [f"    {var} = m.{name}", f"    if {var}:", f"        p = {convert}"]
                body.append(f"        out[{name!r}] = [p(x) for x in {var}]")
            else:
                body += [f"    if m.HasField({name!r}):", f"        out[{name!r}] = {convert}(m.{name})"]
            continue
        if field.type == FieldDescriptor.TYPE_UINT64:
            one, many = "str({})", "[str(x) for x in {}]"
        elif field.type == FieldDescriptor.TYPE_ENUM:
            namespace[f"e_{name}"] = _kind(field)
            one, many = f"e_{name}.get({{0}}, {{0}})", f"[e_{name}.get(x, x) for x in {{}}]"
        else:
            one, many = "{}", "list({})"
        body += _scalar_lines(field, one, many, f"out[{name!r}] = {{}}")
    for name, default in _defaults(descriptor):
        namespace[f"default_{name}"] = default
        value = "[]" if default is _LIST else f"default_{name}"
        body += [f"    if not v_{name}:", f"        out[{name!r}] = {value}"]
    body.append("    return out")
    return _compiled("\n".join(body) + "\n", "print_message", namespace)


# A verdict is written as text once, and building the dict only for json.dumps to walk it again
# cost as much as writing the text: the writers below give the same characters in one pass. A
# string goes through json's own escaper (what json.dumps calls with ensure_ascii=False); an int as
# int.__repr__; the contract has no floats (``_supported`` refuses them).


@cache
def _writer(descriptor: Descriptor) -> Any:
    """The function that gives a message of ``descriptor``'s type as JSON text (as ``to_json``),
    keys in ``_printer``'s order."""
    namespace: dict[str, Any] = {"_writer": _writer, "_quote": _quote, "_str": str}
    _writing.add(descriptor)
    body = ["def write_message(m):", "    out = []", "    add = out.append"]
    for field in sorted(descriptor.fields, key=lambda f: f.number):
        name, var = field.name, f"v_{field.name}"
        key = _quote(name) + ":"
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            namespace[f"d_{name}"] = field.message_type
            # A nested type's writer is bound once here, not looked up per message; a type that
            # holds itself (none in the contract yet) looks its own up when called.
            if field.message_type in _writing:
                write = f"_writer(d_{name})"
            else:
                namespace[f"w_{name}"] = _writer(field.message_type)
                write = f"w_{name}"
            if field.is_repeated:
                body += [f"    {var} = m.{name}", f"    if {var}:"]
                body.append(f"        add({key!r} + '[' + ','.join(map({write}, {var})) + ']')")
            else:
                body += [f"    if m.HasField({name!r}):", f"        add({key!r} + {write}(m.{name}))"]
            continue
        if field.type == FieldDescriptor.TYPE_UINT64:
            one = "'\"' + _str({}) + '\"'"
            many = "'[' + ','.join(['\"' + _str(x) + '\"' for x in {}]) + ']'"
        elif field.type == FieldDescriptor.TYPE_ENUM:
            # A known number as its quoted name; an unknown one as the number (as json_format).
            names = {number: _quote(value.name) for number, value in field.enum_type.values_by_number.items()}
            namespace[f"e_{name}"] = names
            one = f"(e_{name}.get({{0}}) or _str({{0}}))"
            many = f"'[' + ','.join([e_{name}.get(x) or _str(x) for x in {{}}]) + ']'"
        elif field.type == FieldDescriptor.TYPE_STRING:
            one, many = "_quote({})", "'[' + ','.join(map(_quote, {})) + ']'"
        elif field.type == FieldDescriptor.TYPE_BOOL:
            one, many = "('true' if {} else 'false')", "'[' + ','.join(['true' if x else 'false' for x in {}]) + ']'"
        else:
            one, many = "_str({})", "'[' + ','.join(map(_str, {})) + ']'"
        body += _scalar_lines(field, one, many, f"add({key!r} + {{}})")
    for name, default in _defaults(descriptor):
        if default is _LIST:
            text = "[]"
        else:
            text = json.dumps(default, ensure_ascii=False)
        body += [f"    if not v_{name}:", f"        add({_quote(name) + ':' + text!r})"]
    body.append("    return '{' + ','.join(out) + '}'")
    _writing.discard(descriptor)
    return _compiled("\n".join(body) + "\n", "write_message", namespace)


_writing: set[Descriptor] = set()  # the types whose writers are being written


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


@cache
def _supported(descriptor: Descriptor) -> bool:
    """True when every field, all the way down, is of a kind this module handles."""
    return all(
        field.type in _SIMPLE
        # The compiled printers and fillers name each field as an attribute.
        and field.name.isidentifier()
        and not keyword.iskeyword(field.name)
        and not (field.message_type is not None and field.message_type.GetOptions().map_entry)
        and (
            field.message_type is None
            or field.message_type.full_name.startswith("remigio.")
            and _supported(field.message_type)
        )
        for field in descriptor.fields
    )


def fill(message: Message, data: dict[str, Any]) -> int:
    """Fill ``message`` from ``data`` (a JSON object as ``json.loads`` gives it); the number of keys
    read, nested objects' included. Raises ``Unsupported`` for anything it does not fully
    recognise: ``parse`` then asks ``json_format``."""
    return int(_filler(message.DESCRIPTOR)(message, data))


# The checks each kind of scalar passes to be set as it is; any other value raises Unsupported,
# and json_format decides (a number as a string, 3.0, an enum's unknown name, null...).
_SCALAR_CHECKS = {
    **{kind: "type({0}) is int and -2147483648 <= {0} <= 2147483647" for kind in _INT32},
    FieldDescriptor.TYPE_BOOL: "type({0}) is bool",
    FieldDescriptor.TYPE_STRING: "type({0}) is str",
}


@cache
def _filler(descriptor: Descriptor) -> Any:
    """The function that fills a message of ``descriptor``'s type from a JSON object, raising
    Unsupported for anything it does not fully recognise (as ``fill`` says), and
    giving the number of keys it read, the nested objects' included (``parse`` checks it)."""
    namespace: dict[str, Any] = {"_filler": _filler, "Unsupported": Unsupported, "_scalar": _scalar}
    body = ["def fill_message(m, data):", "    keys = len(data)", "    for key, value in data.items():"]
    test = "if"
    aliased = []
    for field in descriptor.fields:
        name = field.name
        keys = (name,) if field.json_name == name else (name, field.json_name)
        if len(keys) > 1:
            aliased.append(keys)
        body.append(f"        {test} " + " or ".join(f"key == {key!r}" for key in keys) + ":")
        test = "elif"
        namespace[f"f_{name}"] = field
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            namespace[f"d_{name}"] = field.message_type
            if field.is_repeated:
                body += [
                    "            if type(value) is not list:",
                    "                raise Unsupported",
                    f"            add, fill = m.{name}.add, _filler(d_{name})",
                    "            for item in value:",
                    "                if type(item) is not dict:",
                    "                    raise Unsupported",
                    "                keys += fill(add(), item)",
                ]
            else:
                body += [
                    "            if type(value) is not dict:",
                    "                raise Unsupported",
                    f"            sub = m.{name}",
                    "            sub.SetInParent()",
                    f"            keys += _filler(d_{name})(sub, value)",
                ]
            continue
        check = _SCALAR_CHECKS.get(field.type)
        if field.is_repeated:
            body += ["            if type(value) is not list:", "                raise Unsupported"]
            if check is not None:
                body += [
                    "            for item in value:",
                    f"                if not ({check.format('item')}):",
                    "                    raise Unsupported",
                    f"            m.{name}.extend(value)",
                ]
            else:
                body.append(f"            m.{name}.extend([_scalar(f_{name}, item) for item in value])")
        elif check is not None:
            body += [
                f"            if not ({check.format('value')}):",
                "                raise Unsupported",
                f"            m.{name} = value",
            ]
        elif field.type == FieldDescriptor.TYPE_ENUM:
            # An enum by its name, or by a number; an unknown name is json_format's to judge.
            namespace[f"n_{name}"] = {value.name: value.number for value in field.enum_type.values}
            body += [
                "            if type(value) is str:",
                f"                value = n_{name}.get(value)",
                "                if value is None:",
                "                    raise Unsupported",
                f"            elif not ({_SCALAR_CHECKS[FieldDescriptor.TYPE_INT32].format('value')}):",
                "                raise Unsupported",
                f"            m.{name} = value",
            ]
        else:
            body.append(f"            m.{name} = _scalar(f_{name}, value)")
    # Unknown fields, and null (a value no check lets through), are json_format's to judge.
    body += ["        else:" if descriptor.fields else "        if True:", "            raise Unsupported"]
    # A field given by both its names, or two members of one oneof: json_format refuses them.
    for keys in aliased:
        body += [f"    if {keys[0]!r} in data and {keys[1]!r} in data:", "        raise Unsupported"]
    for oneof in descriptor.oneofs:
        if len(oneof.fields) < 2:
            continue  # a proto3 optional field's own oneof: both its names are checked above
        members = tuple(sorted({key for field in oneof.fields for key in (field.name, field.json_name)}))
        body += [f"    if sum(key in data for key in {members!r}) > 1:", "        raise Unsupported"]
    body.append("    return keys")
    return _compiled("\n".join(body) + "\n", "fill_message", namespace)


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
    raise Unsupported
