"""The deal record commands of ``remigio-referee``: ``replay``, ``review``, ``shuffle`` and ``simulate``.

``replay`` reads a record in the notation of docs/records.md, or a ReplayDealRequest (or a bare
DealRecord) in protobuf JSON, builds the request the service takes and calls the same handler.
``shuffle`` prints the commitment and the deck order of ``remigio-shuffle-v1``, so a platform can
check its own implementation. ``review`` annotates every decision of a legal record as a chess
annotator does (``?!``, ``?``, ``??`` and the better choice). ``simulate`` plays a deal with simple bots and prints its record.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any, TextIO

from google.protobuf import json_format

from referee.api import jsonmsg
from referee.cli.common import (
    EXIT_OK,
    UsageError,
    add_rule_flags,
    add_svg_flag,
    card_codes,
    dump_json,
    format_deal,
    pretty,
    read_input,
    rule_options,
    write_svg,
)
from referee.game.errors import RefereeError

# Cards a line in the printed deck order, as in the test vectors of docs/records.md.
CARDS_A_LINE = 18


def add_commands(commands: Any) -> None:
    """Add ``replay``, ``review``, ``shuffle`` and ``simulate`` to the subcommands of ``remigio-referee``."""
    replay = commands.add_parser(
        "replay", help="replay a deal record (the notation, or ReplayDealRequest JSON; - for stdin)"
    )
    replay.add_argument("file", metavar="FILE")
    replay.add_argument(
        "--notation", action="store_true", help="print the record in the notation instead of replaying it"
    )
    replay.add_argument(
        "--require-committed-shuffle",
        action="store_true",
        help="judge the record only if its deck order was committed before the deal (else the violation "
        "UNCOMMITTED_SHUFFLE)",
    )
    add_rule_flags(replay)
    add_svg_flag(replay, "the deal as replayed (every hand, the pile, the first violation)")
    replay.set_defaults(run=_run_replay)

    review = commands.add_parser(
        "review",
        help="review every decision of a deal record: losses, marks, accuracy (docs/review.md; - for stdin)",
    )
    review.add_argument("file", metavar="FILE")
    add_rule_flags(review)
    review.set_defaults(run=_run_review)

    shuffle = commands.add_parser("shuffle", help="the commitment and the deck order of remigio-shuffle-v1")
    shuffle.add_argument("--server-seed", required=True, metavar="HEX", help="the server seed: 64 hex digits")
    shuffle.add_argument("--client-seed", default="", metavar="TEXT", help="the client seed (default empty)")
    shuffle.add_argument("--nonce", type=int, default=0, metavar="N", help="the deal's nonce (default 0)")
    shuffle.add_argument("--decks", type=int, default=2, metavar="D", help="decks in play (default 2)")
    shuffle.set_defaults(run=_run_shuffle)

    simulate = commands.add_parser("simulate", help="play a deal with simple bots and print its record")
    simulate.add_argument("--players", type=int, required=True, metavar="N", help="players at the table")
    simulate.add_argument("--seed", type=int, required=True, metavar="S", help="the seed of the deal")
    simulate.add_argument(
        "--explicit-deck", action="store_true", help="give the deck order in the record, not a seeded shuffle"
    )
    simulate.add_argument(
        "--max-turns", type=int, default=300, metavar="N", help="stop unfinished after N turns (default 300)"
    )
    simulate.add_argument("-o", "--output", default="-", metavar="FILE", help="where to write (default - for stdout)")
    add_rule_flags(simulate)
    simulate.set_defaults(run=_run_simulate)


# replay ----------------------------------------------------------------------------------------


def read_request(text: str, source: str) -> Any:
    """The ReplayDealRequest in ``text``: the notation, or protobuf JSON of a ReplayDealRequest or
    of a DealRecord (then under the default rules)."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.records import request_of
    from referee.play.record import parse_notation

    if not text.lstrip().startswith("{"):
        return request_of(parse_notation(text))
    try:
        keys = set(json.loads(text))
    except ValueError:
        keys = set()
    # A request holds record, rules or claims; anything else is read as a bare record.
    record = not keys & {"record", "rules", "claims"}
    message = pb.DealRecord() if record else pb.ReplayDealRequest()
    try:
        jsonmsg.parse(text, message)
    except json_format.ParseError as error:
        name = "DealRecord" if record else "ReplayDealRequest"
        raise RefereeError(source, text[:60], f"not a {name} in protobuf JSON: {error}") from None
    return pb.ReplayDealRequest(record=message) if record else message


def _run_replay(args: argparse.Namespace) -> int:
    if args.json and args.notation:
        raise UsageError("--json and --notation are two answers: give one")
    text = sys.stdin.read() if args.file == "-" else read_input(args.file)
    request = read_request(text, args.file)
    rule_options(args, request.rules)
    if args.notation:
        sys.stdout.write(notation_of(request))
        return EXIT_OK
    from referee.api.handlers import replay_deal, require_committed_shuffles

    require_committed_shuffles(args.require_committed_shuffle)
    response = replay_deal(request)
    if args.svg:
        _write_replay_svg(args.svg, request)
    if args.json:
        dump_json(jsonmsg.to_dict(response), sys.stdout)
    else:
        print(format_replay(response))
    return EXIT_OK


def _run_review(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.handlers import review_deal

    text = sys.stdin.read() if args.file == "-" else read_input(args.file)
    replayed = read_request(text, args.file)
    rule_options(args, replayed.rules)
    response = review_deal(pb.ReviewDealRequest(record=replayed.record, rules=replayed.rules))
    if args.json:
        dump_json(jsonmsg.to_dict(response), sys.stdout)
    else:
        print(format_review(response, [seat.name for seat in replayed.record.seats]))
    return EXIT_OK


# A decision's marks as a chess annotator writes them; the others in words.
_SYMBOLS = {"REVIEW_MARK_INACCURACY": "?!", "REVIEW_MARK_MISTAKE": "?", "REVIEW_MARK_BLUNDER": "??"}
_WORDS = {"REVIEW_MARK_PASSED_CLOSE": "passed a close", "REVIEW_MARK_FED": "fed the next seat"}


def format_review(response: Any, names: list[str]) -> str:
    """A reviewed deal for people: each seat's accuracy and marks, then every turn annotated."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.records import violation_code_name

    if not response.legal:
        violation = response.violation
        return f"not reviewed: illegal: {violation.message}\n  {violation_code_name(violation.code)}"
    width = max([len(name) for name in names] + [6])
    lines = [
        f"{'player':<{width}}  accuracy  decisions  ?!   ?  ??  passed  fed  all-seeing agrees",
    ]
    for seat in response.seats:
        accuracy = f"{seat.accuracy:.1f}%" if seat.HasField("accuracy") else "-"
        agrees = f"{seat.omniscient_agrees}/{seat.omniscient_differs}"
        lines.append(
            f"{seat.name:<{width}}  {accuracy:>8}  {seat.decisions:>9}  {seat.inaccuracies:>2}  {seat.mistakes:>2}"
            f"  {seat.blunders:>2}  {seat.passed_closes:>6}  {seat.fed:>3}  {agrees:>17}"
        )
    lines += ["", "turn, player, the draw, then the card thrown or CLOSE; ?! ? ?? mark a loss (docs/review.md)"]
    for turn in response.turns:
        parts = []
        notes = []
        for decision in turn.decisions:
            marks = [pb.ReviewMark.Name(mark) for mark in decision.marks]
            symbol = "".join(_SYMBOLS.get(mark, "") for mark in marks)
            choice = pretty(decision.choice) if decision.kind == pb.DECISION_KIND_THROW else decision.choice
            parts.append(f"{choice}{symbol}")
            notes += [_WORDS[mark] for mark in marks if mark in _WORDS]
            if symbol or any(mark == "REVIEW_MARK_PASSED_CLOSE" for mark in marks):
                better = " or ".join(
                    pretty(best) if decision.kind == pb.DECISION_KIND_THROW else best for best in decision.judged.best
                )
                notes.append(f"better {better}, loss {decision.judged.loss:.2f}")
        line = f"{turn.turn:>3}. {names[turn.seat]:<{width}}  {' '.join(parts)}"
        lines.append(line + (f"  ({'; '.join(notes)})" if notes else ""))
    lines += ["", "Evidence for a person to weigh, not a verdict on a player (docs/review.md)."]
    return "\n".join(lines)


def _write_replay_svg(path: str, request: Any) -> None:
    """The deal as replayed, drawn (every hand, the pile, the first violation), to ``path``."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    write_svg(path, pb.DrawAnswerRequest(replay_deal=request))


def notation_of(request: Any) -> str:
    """The record of a ReplayDealRequest in the notation, its rules as tags."""
    from referee.api.convert import rules_from_proto
    from referee.api.records import proto_paths, record_from_proto
    from referee.game.errors import rooted_at
    from referee.play.record import format_notation

    with rooted_at("rules"):
        rules = rules_from_proto(request.rules)
    with rooted_at("record"):
        record = record_from_proto(request.record, rules)
        with proto_paths():
            return format_notation(record)


def format_replay(response: Any) -> str:
    """A replayed deal for people: legal or the violation in words, the state, the scored result."""
    from referee.api.records import violation_code_name

    names = [hand.name for hand in response.hands]
    played = f"{response.turns_played} turn{'' if response.turns_played == 1 else 's'}"
    if not response.legal:
        violation = response.violation
        code = violation_code_name(violation.code)
        lines = [f"illegal: {violation.message}"]
        if violation.turn:
            lines += [f"  {code}; {played} played legally before it", "", "the state before it:"]
        else:
            lines.append(f"  {code}")
    elif response.complete:
        closer = names[response.closer]
        lines = [
            f"legal: complete in {played}; {closer} closed laying {pretty(response.discard)} face down",
            "",
            "the end of the deal:",
        ]
    else:
        to_play = f"; {names[response.to_play]} to play" if response.HasField("to_play") else ""
        lines = [f"legal so far: {played}, not closed{to_play}", "", "the state:"]
    if response.legal or response.violation.turn:
        width = max(len(name) for name in names)
        for seat, hand in enumerate(response.hands):
            role = "  (closer: shown)" if response.HasField("closer") and seat == response.closer else ""
            lines.append(f"  {hand.name:<{width}}  {card_codes(hand.cards)}{role}")
        pile, stock = response.discard_pile.cards, response.stock.cards
        lines.append(f"  discard pile, oldest first ({len(pile)}): {card_codes(pile) or 'empty'}")
        lines.append(f"  stock, top first ({len(stock)}): {card_codes(stock) or 'empty'}")
        if response.reshuffles:
            lines.append(f"  reshuffles: {response.reshuffles}")
    lines += ["", shuffle_proof_line(response)]
    if response.HasField("result"):
        lines += ["", format_deal(response.result)]
    return "\n".join(lines)


def shuffle_proof_line(response: Any) -> str:
    """What a replayed record proves about its deck order, in words (docs/records.md, "What a
    record proves")."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.play.shuffle import ShuffleProof

    proof = ShuffleProof[pb.ShuffleProof.Name(response.shuffle_proof).removeprefix("SHUFFLE_PROOF_")]
    return proof.sentence(response.violation.code == pb.VIOLATION_CODE_SEED_MISMATCH)


# shuffle ---------------------------------------------------------------------------------------


def _run_shuffle(args: argparse.Namespace) -> int:
    from referee.game.cards import format_cards
    from referee.game.errors import InvalidShuffleError
    from referee.play.shuffle import Shuffle, dealt_deck

    if not 1 <= args.decks <= 4:
        raise UsageError(f"--decks must be 1 to 4 ({args.decks})")
    try:
        shuffle = Shuffle(server_seed=args.server_seed, client_seed=args.client_seed, nonce=args.nonce)
    except InvalidShuffleError as error:
        raise UsageError(f"--{error.field.replace('_', '-')}: {error.message} ({error.value!r})") from None
    cards = dealt_deck(shuffle, args.decks)
    out = [
        f"server_seed: {shuffle.server_seed}",
        f"server_seed_hash: {shuffle.commitment()}",
        f"client_seed: {json.dumps(shuffle.client_seed, ensure_ascii=False)}",
        f"nonce: {shuffle.nonce}",
        f"decks: {args.decks}",
        "dealt (top first):",
    ]
    out += [f"  {format_cards(cards[i : i + CARDS_A_LINE])}" for i in range(0, len(cards), CARDS_A_LINE)]
    print("\n".join(out))
    return EXIT_OK


# simulate --------------------------------------------------------------------------------------


def _run_simulate(args: argparse.Namespace) -> int:
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.convert import rules_from_proto
    from referee.api.records import request_of
    from referee.game.deal import most_players
    from referee.game.errors import rooted_at
    from referee.game.rules import Engine
    from referee.play.record import format_notation
    from referee.play.simulate import simulate

    options = pb.RuleOptions()
    rule_options(args, options)
    with rooted_at("rules"):
        rules = rules_from_proto(options)
    most = most_players(rules.decks)
    if not 2 <= args.players <= most:
        raise UsageError(f"--players must be 2 to {most} with {rules.decks} decks ({args.players})")
    if args.max_turns < 0:
        raise UsageError(f"--max-turns must be 0 or more ({args.max_turns})")
    # Every engine links alike, so the bots play with the fast one; the record keeps the rules asked for.
    played = simulate(
        args.seed,
        args.players,
        rules.with_options(engine=Engine.SEARCH),
        seeded=not args.explicit_deck,
        max_turns=args.max_turns,
    )
    record = replace(played, rules=rules)
    text = jsonmsg.to_json(request_of(record)) + "\n" if args.json else format_notation(record)
    if args.output == "-":
        sys.stdout.write(text)
        return EXIT_OK
    try:
        sink: TextIO = open(args.output, "w", encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {args.output}: {error.strerror or 'unwritable'}") from None
    with sink:
        sink.write(text)
    return EXIT_OK


__all__ = ["add_commands", "format_replay", "notation_of", "read_request"]
