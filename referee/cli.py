"""The ``remigio-referee`` command: solve hands, check closes, score deals, replay deal records, serve, batch.

Every subcommand builds the same request message the service takes, calls the same handler,
and prints the reply: readable by default, protobuf's JSON mapping with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from google.protobuf import json_format
from google.protobuf.message import Message

from referee import __version__
from referee.api import jsonmsg
from referee.cards import Card
from referee.errors import RefereeError
from referee.rules import RULE_OPTIONS

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """The command cannot start as asked (a file it cannot open): exit status 2, one line."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    serving = "serve" in (argv if argv is not None else sys.argv[1:])
    if serving:
        from referee.server.logs import quiet_grpc_core

        quiet_grpc_core(argv if argv is not None else sys.argv[1:])  # before the parser imports gRPC
    parser = build_parser(serving)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except RefereeError as error:
        print(f"remigio-referee: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except UsageError as error:
        print(f"remigio-referee {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


def build_parser(serving: bool = True) -> argparse.ArgumentParser:
    """The argument parser with every subcommand; ``serving`` False leaves out the options of
    ``serve``, whose module loads the whole server (about a fifth of a second before any other command
    could start)."""
    parser = argparse.ArgumentParser(prog="remigio-referee", description="Referee for the card game Remigio.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    solve = commands.add_parser("solve", help="best linking of a hand (cards, or one hand per line on stdin)")
    solve.add_argument("cards", nargs="*", metavar="CARD")
    add_rule_flags(solve)
    add_svg_flag(solve, "the linking")
    solve.set_defaults(run=_run_solve)

    close = commands.add_parser("close", help="verdict on a close: 11 cards, or 10 with --discard")
    close.add_argument("cards", nargs="+", metavar="CARD")
    close.add_argument("--discard", metavar="CARD", help="the face-down discard, when 10 cards are given")
    add_rule_flags(close)
    add_svg_flag(close, "the close verdict")
    close.set_defaults(run=_run_close)

    score = commands.add_parser("score", help="score an end-of-deal state (ScoreDealRequest JSON; - for stdin)")
    score.add_argument("file", metavar="FILE")
    add_rule_flags(score)
    add_svg_flag(score, "the scored deal")
    score.set_defaults(run=_run_score)

    from referee.cli_records import add_commands as add_record_commands

    add_record_commands(commands)

    serve = commands.add_parser("serve", help="serve the gRPC API")
    if serving:
        from referee.server.config import add_arguments

        add_arguments(serve)
    serve.set_defaults(run=_run_serve)

    keygen = commands.add_parser(
        "keygen", help="a new API key on stdout, and the key-file line that admits it on stderr"
    )
    keygen.add_argument("name", type=_key_name, metavar="NAME", help="the key's name in logs and metrics")
    keygen.add_argument("--rate", type=_rate, metavar="N", help="calls per second the key may make (default: no limit)")
    keygen.add_argument(
        "--concurrency",
        type=_concurrency,
        metavar="N",
        help="calls the key may have admitted at once per server process (default: the server's --max-calls-per-client)",
    )
    keygen.set_defaults(run=_run_keygen)

    from referee.batch import add_arguments as add_batch_arguments
    from referee.batch import run as run_batch

    batch = commands.add_parser("batch", help="judge a file of dispute cases (JSON lines)")
    add_batch_arguments(batch)
    batch.set_defaults(run=run_batch)
    return parser


def add_rule_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per answer (protobuf JSON mapping)")
    rules = parser.add_argument_group("rule options (unset: the rule book's defaults)")
    for option in RULE_OPTIONS:  # each declared once, in referee.rules
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


def write_svg(path: str | None, answer: Message) -> None:
    """Write the drawing of ``answer`` (a Linking, Close or ScoreDealResponse) to ``path`` (none:
    nothing); a file it cannot write is bad usage."""
    if not path:
        return
    from referee import render, report

    # The drawings take domain values: the answer is read back from its JSON, as a report reads it.
    data = jsonmsg.to_dict(answer)
    name = answer.DESCRIPTOR.name
    if name == "Linking":
        drawing = render.linking_svg(report.linking_from_json(data))
    elif name == "Close":
        drawing = render.close_svg(report.close_from_json(data))
    else:
        drawing = render.deal_svg(report.deal_from_json(data))
    write_drawing(path, drawing)


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


def _key_name(text: str) -> str:
    from referee.server.access import check_name

    try:
        return check_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rate(text: str) -> float:
    from referee.server.access import parse_rate

    try:
        return parse_rate(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _concurrency(text: str) -> int:
    from referee.server.access import parse_concurrency

    try:
        return parse_concurrency(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _run_serve(args: argparse.Namespace) -> int:
    from referee.server.config import ServerConfig
    from referee.server.process import run

    if args.env_errors:  # a REMIGIO_* variable that did not convert: bad usage, as a bad flag is
        print(f"remigio-referee serve: error: {args.env_errors[0]}", file=sys.stderr)
        return 2
    return run(ServerConfig.from_args(args))


def _run_keygen(args: argparse.Namespace) -> int:
    from referee.server.access import keygen_lines

    key, line = keygen_lines(args.name, args.rate, args.concurrency)
    # The key goes to stdout alone, so `KEY=$(remigio-referee keygen NAME)` keeps it out of sight;
    # the line for the server's key file, which holds no secret, goes to stderr.
    print(key, flush=True)
    print(line, file=sys.stderr)
    return EXIT_OK


def dump_json(obj: object, out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    out.flush()


def _run_solve(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.disputes import malformed
    from referee.api.handlers import solve_hand

    def answer(cards: Iterable[str]) -> Message:
        request = pb.SolveHandRequest(cards=list(cards))
        rule_options(args, request.rules)
        return solve_hand(request).linking

    if args.cards:
        linking = answer(args.cards)
        write_svg(args.svg, linking)
        dump_json(jsonmsg.to_dict(linking), sys.stdout) if args.json else print(format_linking(linking))
        return EXIT_OK
    if args.svg:
        raise UsageError("--svg draws one hand: give its cards as arguments")
    status = EXIT_OK
    for number, line in enumerate(sys.stdin, start=1):
        cards = line.split()
        if not cards:
            continue
        try:
            linking = answer(cards)
        except RefereeError as error:
            status = EXIT_ERROR
            if args.json:
                # The shape batch gives a line it cannot judge: one JSON shape, the contract's.
                verdict = malformed(f"line:{number}", error.field, str(error.value), error.message)
                dump_json(jsonmsg.to_dict(verdict), sys.stdout)
            else:
                print(f"line {number}: error: {error}", flush=True)
            continue
        if args.json:
            dump_json(jsonmsg.to_dict(linking), sys.stdout)
        else:
            print(format_linking(linking).replace("\n", "  |  "), flush=True)
    return status


def _run_close(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.handlers import check_close

    # The request's own errors name its fields; here the flags that set them are named instead.
    count = len(args.cards)
    if count == 10 and not args.discard:
        raise UsageError("10 cards are a close's shown cards: name the face-down discard with --discard CARD")
    if count == 11 and args.discard:
        raise UsageError("with 11 cards the referee picks the discard: leave out --discard, or give the 10 shown")
    if count not in (10, 11):
        raise UsageError(f"a close takes 11 cards, or 10 shown cards and --discard CARD; {count} given")
    request = pb.CheckCloseRequest(cards=args.cards, discard=args.discard or "")
    rule_options(args, request.rules)
    close = check_close(request).close
    write_svg(args.svg, close)
    if args.json:
        dump_json(jsonmsg.to_dict(close), sys.stdout)
    else:
        print(format_close(close))
    return EXIT_OK


def _run_score(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.handlers import score_deal

    text = sys.stdin.read() if args.file == "-" else read_input(args.file)
    request = pb.ScoreDealRequest()
    try:
        jsonmsg.parse(text, request)
    except json_format.ParseError as error:
        raise RefereeError(args.file, text[:60], f"not a ScoreDealRequest in protobuf JSON: {error}") from None
    rule_options(args, request.rules)
    response = score_deal(request)
    write_svg(args.svg, response)
    if args.json:
        dump_json(jsonmsg.to_dict(response), sys.stdout)
    else:
        print(format_deal(response))
    return EXIT_OK


def read_input(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or 'unreadable'}") from None


# Readable output ---------------------------------------------------------------------------


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


if __name__ == "__main__":
    sys.exit(main())
