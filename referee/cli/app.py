"""``remigio-referee``: the parser of every command, and ``main``, which runs one and turns its
errors into one line and an exit status.

One convention for every command but ``batch`` (docs/commands.md, "Exit status"): **0** it
answered (an invalid close or an illegal record is an answer); **1** the referee refused the
input, what the service answers INVALID_ARGUMENT, on one line ``remigio-referee COMMAND: error:
FIELD: what`` (``serve``: it could not start); **2** the command line itself is wrong (an unknown
or contradictory flag, a file it cannot read or write), on one line ``remigio-referee COMMAND:
what``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from referee import __version__
from referee.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_rule_flags,
    add_svg_flag,
)
from referee.cli.hands import run_close, run_score, run_solve
from referee.cli.serve import add_keygen_arguments, run_keygen, run_serve
from referee.game.errors import RefereeError


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    words = list(argv if argv is not None else sys.argv[1:])
    # The first word is the command (the only options before it are --help and --version).
    command = words[0] if words and not words[0].startswith("-") else None
    if command == "serve":
        from referee.server.logs import quiet_grpc_core

        quiet_grpc_core(words)  # before the parser imports gRPC
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except RefereeError as error:
        print(f"remigio-referee {args.command}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except UsageError as error:
        print(f"remigio-referee {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback, and the status a shell gives a process SIGINT ended
        # (128 + 2). ``batch`` has flushed every chunk it wrote, which ``--resume`` goes on from.
        print(f"remigio-referee {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand; given ``command``, the options of ``serve``,
    ``batch`` and ``fairplay`` are built only when it names them: their modules load the server,
    the gRPC client or the judging of cases (a fifth of a second for ``serve``, a tenth for
    ``batch``), which no other command needs before it starts. Every command is listed either way."""

    def wanted(name: str) -> bool:
        return command is None or command == name

    parser = argparse.ArgumentParser(prog="remigio-referee", description="Referee for the card game Remigio.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    solve = commands.add_parser("solve", help="best linking of a hand (cards, or one hand per line on stdin)")
    solve.add_argument("cards", nargs="*", metavar="CARD")
    add_rule_flags(solve)
    add_svg_flag(solve, "the linking")
    solve.set_defaults(run=run_solve)

    close = commands.add_parser("close", help="verdict on a close: 11 cards, or 10 with --discard")
    close.add_argument("cards", nargs="+", metavar="CARD")
    close.add_argument("--discard", metavar="CARD", help="the face-down discard, when 10 cards are given")
    add_rule_flags(close)
    add_svg_flag(close, "the close verdict")
    close.set_defaults(run=run_close)

    score = commands.add_parser("score", help="score an end-of-deal state (ScoreDealRequest JSON; - for stdin)")
    score.add_argument("file", metavar="FILE")
    add_rule_flags(score)
    add_svg_flag(score, "the scored deal")
    score.set_defaults(run=run_score)

    from referee.cli.records import add_commands as add_record_commands

    add_record_commands(commands)

    serve = commands.add_parser("serve", help="serve the gRPC API")
    if wanted("serve"):
        from referee.server.config import add_arguments

        add_arguments(serve)
    serve.set_defaults(run=run_serve)

    keygen = commands.add_parser(
        "keygen", help="a new API key on stdout, and the key-file line that admits it on stderr"
    )
    add_keygen_arguments(keygen)
    keygen.set_defaults(run=run_keygen)

    batch = commands.add_parser("batch", help="judge a file of dispute cases (JSON lines)")
    if wanted("batch"):
        from referee.cli.batch import add_arguments as add_batch_arguments
        from referee.cli.cluster import run_batch

        add_batch_arguments(batch)
        batch.set_defaults(run=run_batch)

    fairplay = commands.add_parser("fairplay", help="fair-play statistics and flags over deal records (JSON lines)")
    if wanted("fairplay"):
        from referee.cli.fairplay import add_arguments as add_fairplay_arguments
        from referee.cli.fairplay_ray import run_fairplay

        add_fairplay_arguments(fairplay)
        fairplay.set_defaults(run=run_fairplay)

    from referee.cli.merge import add_command as add_merge_command

    add_merge_command(commands)
    return parser


__all__ = ["build_parser", "main"]
