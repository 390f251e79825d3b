"""The commands of a hand and a deal: ``solve``, ``close`` and ``score``. Each builds the request
the service takes, calls the same handler, and prints the reply (readable, or protobuf JSON)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from google.protobuf import json_format
from google.protobuf.message import Message

from referee.api import jsonmsg
from referee.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    UsageError,
    dump_json,
    format_close,
    format_deal,
    format_linking,
    read_input,
    rule_options,
    write_svg,
)
from referee.game.errors import RefereeError


def run_solve(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.disputes import malformed
    from referee.api.handlers import solve_hand

    def question(cards: Iterable[str]) -> pb.SolveHandRequest:
        request = pb.SolveHandRequest(cards=list(cards))
        rule_options(args, request.rules)
        return request

    def answer(cards: Iterable[str]) -> Message:
        return solve_hand(question(cards)).linking

    if args.cards:
        linking = answer(args.cards)
        write_svg(args.svg, pb.DrawAnswerRequest(solve_hand=question(args.cards)))
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


def run_close(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.handlers import check_close

    # A wrong count is a request the referee refuses (status 1), as solve's is; the words name the
    # flag that would fix it.
    count = len(args.cards)
    if count == 10 and not args.discard:
        raise RefereeError(
            "discard", "", "10 cards are a close's shown cards: name the face-down discard with --discard CARD"
        )
    if count == 11 and args.discard:
        raise RefereeError(
            "discard",
            args.discard,
            "with 11 cards the referee picks the discard: leave out --discard, or give the 10 shown",
        )
    if count not in (10, 11):
        raise RefereeError(
            "cards", count, f"a close takes 11 cards, or 10 shown cards and --discard CARD; {count} given"
        )
    request = pb.CheckCloseRequest(cards=args.cards, discard=args.discard or "")
    rule_options(args, request.rules)
    close = check_close(request).close
    write_svg(args.svg, pb.DrawAnswerRequest(check_close=request))
    if args.json:
        dump_json(jsonmsg.to_dict(close), sys.stdout)
    else:
        print(format_close(close))
    return EXIT_OK


def run_score(args: argparse.Namespace) -> int:
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
    write_svg(args.svg, pb.DrawAnswerRequest(score_deal=request))
    if args.json:
        dump_json(jsonmsg.to_dict(response), sys.stdout)
    else:
        print(format_deal(response))
    return EXIT_OK


__all__ = ["run_close", "run_score", "run_solve"]
