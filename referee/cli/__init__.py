"""The command line, ``remigio-referee``: the commands, one module per family (``hands``: solve,
close, score; ``records``: replay, shuffle, simulate; ``batch``: dispute batches and their HTML
``report``; ``serve``: serve, keygen), their shared flags and output (``common``), and the parser
that runs them (``app``). A front of the referee: it may read files, print, start processes and
open connections; the domain below it does none of that."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``app.main``); return the exit status. The commands are loaded here,
    so a Ctrl-C while they load ends it as one while a command runs does: one line, status 130."""
    try:
        from referee.cli import app
    except KeyboardInterrupt:
        print("remigio-referee: interrupted", file=sys.stderr)
        return 130  # common.EXIT_INTERRUPTED, whose module may be the one that was loading
    return app.main(argv)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command (``app.build_parser``)."""
    from referee.cli import app

    return app.build_parser(command)


__all__ = ["build_parser", "main"]
