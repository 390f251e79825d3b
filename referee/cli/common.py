"""What the commands share: the rule flags (each rule option's, from its declaration), the SVG
flag, reading an input file, exit statuses, usage errors, and the readable output of linkings,
closes and scored deals."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any, TextIO

from google.protobuf.message import Message

from referee.game.cards import Card
from referee.game.errors import RefereeError
from referee.game.rules import RULE_OPTIONS

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports a process the signal ended


class UsageError(Exception):
    """The command cannot start as asked (a file it cannot open): exit status 2, one line."""


def add_rule_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per answer (protobuf JSON mapping)")
    rules = parser.add_argument_group("rule options (unset: the rule book's defaults)")
    for option in RULE_OPTIONS:  # each declared once, in referee.game.rules
        text = f"{option.help} (default {option.spell(option.default)})"
        if option.kind is bool:
            rules.add_argument(option.flag, action="store_true", default=None, help=text)
        elif option.choices:
            # The choices as the rule book spells them, in either case (an engine's are lowercase).
            spell = str.lower if all(c.islower() for c in option.choices) else str.upper
            rules.add_argument(option.flag, type=spell, choices=option.choices, help=text)
        else:
            rules.add_argument(option.flag, type=option.kind, help=text)


def add_svg_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--svg", metavar="FILE", help=f"also write {what} drawn, as an SVG picture, to FILE")


def write_svg(path: str | None, question: Message) -> None:
    """Write the drawing of the answer to ``question`` (a DrawAnswerRequest) to ``path`` (none:
    nothing): DrawAnswer's first picture, the referee's one drawing; a file it cannot write is bad
    usage."""
    if not path:
        return
    from referee.api.drawings import draw_answer

    write_drawing(path, draw_answer(question).drawings[0].svg)


def write_drawing(path: str, drawing: str) -> None:
    """Write an SVG drawing to ``path``; a file it cannot write is bad usage."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(drawing)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or 'unwritable'}") from None


def rule_options(args: argparse.Namespace, into: Any) -> None:
    """Copy the rule flags that were given into a RuleOptions message."""

    for option in RULE_OPTIONS:
        value = getattr(args, option.name)
        if value is None or value is False:
            continue  # not given: the rule book's default
        field = into.DESCRIPTOR.fields_by_name[option.name]
        if field.enum_type is None:
            setattr(into, option.name, value)
        else:
            # The contract's enum value of the same name, after its prefix (JOKER_LIMIT_UNLIMITED).
            prefix = field.enum_type.values_by_number[0].name.removesuffix("UNSPECIFIED")
            setattr(into, option.name, field.enum_type.values_by_name[prefix + option.kind(value).name].number)


def dump_json(obj: object, out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    out.flush()


def read_input(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or 'unreadable'}") from None


def pretty(code: str) -> str:
    """A card code with its suit symbol (a joker's stand-in rank alone stays as it is)."""
    try:
        return Card.parse(code).pretty()
    except RefereeError:
        return code


def card_codes(codes: Iterable[str]) -> str:
    return " ".join(pretty(code) for code in codes)


def _group_line(group: Any) -> str:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    kind = pb.GroupKind.Name(group.kind).removeprefix("GROUP_KIND_").lower().replace("_", " ")
    stands = [f"{pretty(s) or '?'}" for c, s in zip(group.cards, group.stands_for) if c == "JK"]
    joker_note = f"  (JK as {', '.join(stands)})" if stands else ""
    return f"  {card_codes(group.cards):<32} {kind}{joker_note}"


def format_linking(linking: Any) -> str:
    """A linking for people: one group per line, then the unlinked cards and points."""
    lines = [_group_line(group) for group in linking.groups] or ["  (no group)"]
    loose = card_codes(linking.unlinked) or "none"
    lines.append(f"  unlinked: {loose}   points: {linking.points}")
    return "\n".join(lines)


def format_close(close: Any) -> str:
    """A close verdict for people."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    if close.valid:
        kind = pb.CloseKind.Name(close.kind).removeprefix("CLOSE_KIND_")
        head = f"valid close: {kind} ×{close.multiplier}, discard {pretty(close.discard)}"
    else:
        head = f"no valid close: {close.reason}"
    body = [_group_line(group) for group in close.groups]
    if close.unlinked:
        body.append(f"  unlinked: {card_codes(close.unlinked)}")
    return "\n".join([head, *body])


def format_deal(response: Any) -> str:
    """A scored deal for people: the close, then one block per player."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    lines = [format_close(response.close), ""]
    for player in response.players:
        role = f"closer, {player.points} points" if player.closer else f"{player.points} points"
        out = "  OUT" if player.eliminated else ""
        lines.append(f"{player.name}: {role}, change {player.score_change:+d}, score {player.score}{out}")
        if not player.closer:
            lines.append(format_linking(player.linking))
    if response.match_over:
        lines.append(f"match over: {response.winner} wins")
    for claim in response.claims:
        verdict = pb.Verdict.Name(claim.verdict).removeprefix("VERDICT_")
        about = f" ({claim.player_name})" if claim.HasField("player") else ""
        lines.append(
            f"claim {claim.field}{about}: {verdict} (claimed {claim.claimed}, referee {claim.expected}) "
            f"{claim.reason}".rstrip()
        )
    return "\n".join(lines)


__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "add_rule_flags",
    "add_svg_flag",
    "card_codes",
    "dump_json",
    "format_close",
    "format_deal",
    "format_linking",
    "pretty",
    "read_input",
    "rule_options",
    "write_drawing",
    "write_svg",
]
