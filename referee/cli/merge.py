"""``remigio-referee batch-merge IN.jsonl SHARD0.jsonl ... SHARDN-1.jsonl``: the outputs of the
shards of ``batch --shard I/N`` (``referee.cli.shards``) as the one output of the whole input.

It walks the input once, and for each case takes the next verdict of the shard the case belongs
to: the merged output is byte for byte what one run over the whole input writes, in the same
order, with memory flat whatever the size, and a verdict missing, doubled or out of place in a
shard is an error naming the shard, its line and the case.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

from referee.cli.batch import Line, line_id
from referee.cli.common import UsageError
from referee.cli.shards import shard_of


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``batch-merge`` subcommand."""
    merge = commands.add_parser(
        "batch-merge",
        help="merge the outputs of batch --shard I/N (I = 0 .. N-1) into the one output of the whole input",
    )
    merge.add_argument("input", metavar="IN.jsonl", help="the cases every shard read")
    merge.add_argument("shards", nargs="+", metavar="SHARD.jsonl", help="the outputs of shards 0 to N-1, in order")
    merge.add_argument("-o", "--output", default="-", metavar="OUT.jsonl", help="verdicts (default - for stdout)")
    merge.set_defaults(run=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    """Write the shards' verdicts in the input's order; status 2 (said on stderr) when they do not
    hold every case exactly once."""
    try:
        source = open(args.input, encoding="utf-8")
        shards = [open(path, encoding="utf-8") for path in args.shards]
    except OSError as error:
        raise UsageError(f"cannot read {error.filename}: {error.strerror}") from None
    try:
        merged = _merged(source, shards, args.shards)
        sink = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
        try:
            written = 0
            for verdict in merged:
                sink.write(verdict)
                written += 1
        finally:
            if sink is not sys.stdout:
                sink.close()
    except OSError as error:
        raise UsageError(f"cannot write {args.output}: {error.strerror}") from None
    finally:
        source.close()
        for handle in shards:
            handle.close()
    print(f"merged {written} verdicts from {len(shards)} shards", file=sys.stderr)
    return 0


def _merged(source: TextIO, shards: Sequence[TextIO], names: Sequence[str]) -> Iterator[str]:
    """The verdict lines in the input's order; UsageError at the first one missing or out of place."""
    read = [0] * len(shards)
    for number, text in enumerate(source, start=1):
        if not text.strip():
            continue
        case_id = line_id(Line(number, text))
        index = shard_of(case_id, len(shards))
        verdict = _next_verdict(shards[index], read, index)
        if verdict is None:
            raise UsageError(
                f"{names[index]} (shard {index}/{len(shards)}) ends before the case {case_id!r} of line {number}"
            )
        found = _verdict_id(verdict)
        if found != case_id:
            raise UsageError(
                f"{names[index]} line {read[index]}: the verdict of {found!r}, where the case {case_id!r} "
                f"of line {number} is next in shard {index}/{len(shards)}"
            )
        yield verdict if verdict.endswith("\n") else verdict + "\n"
    for index, handle in enumerate(shards):
        extra = _next_verdict(handle, read, index)
        if extra is not None:
            raise UsageError(
                f"{names[index]} line {read[index]}: the verdict of {_verdict_id(extra)!r} is of no case of the input"
            )


def _next_verdict(handle: TextIO, read: list[int], index: int) -> str | None:
    for line in handle:
        read[index] += 1
        if line.strip():
            return line
    return None


def _verdict_id(line: str) -> str | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
