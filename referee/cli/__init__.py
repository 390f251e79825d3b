"""The command line, ``remigio-referee``: the commands, one module per family (``hands``: solve,
close, score; ``records``: replay, shuffle, simulate; ``batch``: dispute batches and their HTML
``report``; ``serve``: serve, keygen), their shared flags and output (``common``), and the parser
that runs them (``app``). A front of the referee: it may read files, print, start processes and
open connections; the domain below it does none of that."""

from referee.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
