"""``serve`` and ``keygen``: the server's command (its options are the server's own) and a new API key."""

from __future__ import annotations

import argparse
import sys

from referee.cli.common import EXIT_OK


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


def run_serve(args: argparse.Namespace) -> int:
    from referee.server.config import ServerConfig
    from referee.server.process import run

    if args.env_errors:  # a REMIGIO_* variable that did not convert: bad usage, as a bad flag is
        print(f"remigio-referee serve: error: {args.env_errors[0]}", file=sys.stderr)
        return 2
    return run(ServerConfig.from_args(args))


def run_keygen(args: argparse.Namespace) -> int:
    from referee.server.access import keygen_lines

    key, line = keygen_lines(args.name, args.rate, args.concurrency)
    # The key goes to stdout alone, so `KEY=$(remigio-referee keygen NAME)` keeps it out of sight;
    # the line for the server's key file, which holds no secret, goes to stderr.
    print(key, flush=True)
    print(line, file=sys.stderr)
    return EXIT_OK


def add_keygen_arguments(keygen: argparse.ArgumentParser) -> None:
    """The options of ``keygen``."""
    keygen.add_argument("name", type=_key_name, metavar="NAME", help="the key's name in logs and metrics")
    keygen.add_argument("--rate", type=_rate, metavar="N", help="calls per second the key may make (default: no limit)")
    keygen.add_argument(
        "--concurrency",
        type=_concurrency,
        metavar="N",
        help="calls the key may have admitted at once per server process (default: the server's --max-calls-per-client)",
    )


__all__ = ["add_keygen_arguments", "run_keygen", "run_serve"]
