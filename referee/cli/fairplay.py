"""``remigio-referee fairplay``: fair-play statistics over files of deal records.

Each input line is a deal record as ``batch`` reads one (a dispute case holding a ``record``), or
a ``ReplayDealRequest`` or bare ``DealRecord`` in protobuf JSON (what ``simulate --json`` prints). A
player is the same player in every record where a seat has its name. Each record is reviewed
(``referee.play.review``), its rows counted (``referee.play.fairplay.observations``) in worker
processes, the rows summed, and the batch judged (``judge``). The output is sorted by player and
pair with fixed float formatting, so it is the same bytes whatever the order of the input or the
number of jobs. A line that cannot be read or is not a legal deal is named on stderr and left out.

Exit status: 0 done (flags or none), 2 bad usage or an input that cannot be read, 3 done but some
lines were left out (as ``batch`` counts MALFORMED cases).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from referee.cli.common import EXIT_OK, EXIT_USAGE
from referee.cli.workers import Workers, WorkersLost

if TYPE_CHECKING:
    from referee.play.fairplay import Observation, PairResult, PlayerResult, Results
    from referee.play.record import Record

EXIT_SKIPPED = 3  # every line was read; some were left out (bad or illegal)
EXIT_WORKERS_LOST = 4  # the local workers died too often (cli/workers.py): no results
CHUNK = 4  # records a worker takes at once: a review costs a good part of a second
CHUNKS_PER_JOB = 2  # chunks in flight per job: a worker always has the next at hand


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ``fairplay`` subcommand."""
    parser.add_argument("files", nargs="+", metavar="FILE", help="deal records, one JSON object a line (- for stdin)")
    parser.add_argument("--json", action="store_true", help="one JSON object a line per player, then per pair")
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="local processes reviewing records (default 1)"
    )
    parser.add_argument(
        "--progress", action="store_true", help="a progress line on stderr even when it is not a terminal"
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="review on a Ray cluster (the ray extra): auto (the cluster of RAY_ADDRESS, or a local one), "
        "HOST:PORT, or ray://HOST:PORT (Ray Client: FILE as the cluster reads it); FILE may then also be "
        "a glob, a directory or a URI (s3://, gs://, file://)",
    )


def run(args: argparse.Namespace) -> int:
    """Review every record of the files, judge the batch, write the results."""
    from referee.cli.batch import Progress
    from referee.play.fairplay import judge, merge

    if args.jobs < 1:
        print(f"remigio-referee fairplay: --jobs must be at least 1 ({args.jobs})", file=sys.stderr)
        return EXIT_USAGE
    if args.files.count("-") > 1:
        print("remigio-referee fairplay: stdin (-) can be read once", file=sys.stderr)
        return EXIT_USAGE
    sources: list[tuple[str, TextIO]] = []
    for name in args.files:
        try:
            sources.append((name, sys.stdin if name == "-" else open(name, encoding="utf-8")))
        except OSError as error:
            for _, opened in sources:
                if opened is not sys.stdin:
                    opened.close()
            print(f"remigio-referee fairplay: cannot read {name}: {error.strerror}", file=sys.stderr)
            return EXIT_USAGE
    try:
        lines = [(name, number, text) for name, source in sources for number, text in _numbered(source)]
    except UnicodeDecodeError as error:
        print(f"remigio-referee fairplay: not UTF-8 text: {error.reason}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        for _, source in sources:
            if source is not sys.stdin:
                source.close()
    progress = Progress(len(lines), enabled=args.progress or sys.stderr.isatty())
    totals: dict[tuple[str, str], Observation] = {}
    skipped = 0
    try:
        for outcome in _observed(lines, args.jobs):
            progress.step()
            if isinstance(outcome, str):
                skipped += 1
                end = "\n" if progress.enabled else ""  # off the progress line
                print(f"{end}remigio-referee fairplay: {outcome}", file=sys.stderr)
                continue
            for row in outcome:  # exact integer sums: the order the workers answer in does not matter
                known = totals.get(row.key)
                totals[row.key] = row if known is None else merge(known, row)
    except WorkersLost as error:
        progress.close()
        print(f"\nremigio-referee fairplay: {error}; no results", file=sys.stderr)
        return EXIT_WORKERS_LOST
    progress.close()
    results = judge(totals)
    sys.stdout.write(format_json(results) if args.json else format_text(results))
    sys.stdout.flush()
    return EXIT_SKIPPED if skipped else EXIT_OK


def _numbered(source: TextIO) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a file with their numbers (from 1)."""
    for number, text in enumerate(source, start=1):
        if text.strip():
            yield number, text


def _observed(lines: list[tuple[str, int, str]], jobs: int) -> Iterator[tuple[Observation, ...] | str]:
    """Each line's rows, or the line's error in words; in worker processes when ``jobs`` > 1."""
    if jobs == 1 or len(lines) <= 1:
        yield from map(observe_line, lines)
        return
    # Forked once the review's code is loaded, so the workers share it instead of importing it.
    import referee.play.fairplay  # noqa: F401

    chunks = ((lines[start : start + CHUNK],) for start in range(0, len(lines), CHUNK))
    with Workers(min(jobs, len(lines)), "fairplay") as workers:
        for outcomes in workers.in_order(observe_lines, chunks, CHUNKS_PER_JOB * jobs):
            yield from outcomes


def observe_lines(lines: list[tuple[str, int, str]]) -> list[tuple[Observation, ...] | str]:
    """``observe_line`` on each of a chunk of lines (a worker's task)."""
    return [observe_line(line) for line in lines]


def observe_line(line: tuple[str, int, str]) -> tuple[Observation, ...] | str:
    """The rows of one input line, or what is wrong with it (naming the file, the line and the field)."""
    from referee.game.errors import RefereeError
    from referee.play.fairplay import observations
    from referee.play.review import review_deal

    name, number, text = line
    where = f"{name}:{number}"
    try:
        record = read_record_line(text)
    except RefereeError as error:
        return f"{where}: {error}"
    review = review_deal(record)
    if not review.legal:
        from referee.play.replay import replay

        violation = replay(record).violation
        said = f"{violation.code.name}: {violation.message}" if violation is not None else "illegal"
        return f"{where}: not a legal deal, left out ({said})"
    return observations(record, review)


def read_record_line(text: str) -> Record:
    """The record of a line: a dispute case with a ``record`` (as ``batch`` reads it), a
    ``ReplayDealRequest``, or a bare ``DealRecord``, in protobuf JSON."""
    from referee.api import record_lines
    from referee.api.convert import rules_from_proto
    from referee.api.records import record_from_proto
    from referee.cli.records import read_request
    from referee.game.errors import RefereeError, rooted_at

    lane = record_lines.read_record_case(text)  # a case line of the plain shape: its turns read once
    if lane is not None:
        case, turns = lane
        with rooted_at("record"):
            with rooted_at("rules"):
                rules = rules_from_proto(case.record.rules)
            with rooted_at("record"):
                return record_from_proto(case.record.record, rules, turns=turns)
    try:
        data = json.loads(text)
    except ValueError as error:
        raise RefereeError("line", text.strip()[:60], f"not JSON: {error}") from None
    if type(data) is not dict:
        raise RefereeError("line", text.strip()[:60], "a record line is a JSON object")
    inner = data.get("record")
    root = ""
    if "id" in data or (type(inner) is dict and type(inner.get("record")) is dict):
        # A dispute case: its record is a ReplayDealRequest.
        if type(inner) is not dict:
            raise RefereeError("record", "", "a case line here holds a deal record")
        text, root = json.dumps(inner), "record"
    with rooted_at(root):
        request = read_request(text, "line")
        with rooted_at("rules"):
            rules = rules_from_proto(request.rules)
        with rooted_at("record"):
            return record_from_proto(request.record, rules)


# Output ----------------------------------------------------------------------------------------


def format_json(results: Results) -> str:
    """One JSON object a line: every player, then every pair, each sorted by name."""
    lines = [json.dumps(r.as_dict(), ensure_ascii=False) for r in results.players]
    lines += [json.dumps(r.as_dict(), ensure_ascii=False) for r in results.pairs]
    return "".join(f"{line}\n" for line in lines)


def format_text(results: Results) -> str:
    """Per player its figures and signals, then the pairs with enough opportunities, then the flags."""
    from referee.play.fairplay import LEAST

    out = [_player_text(r) for r in results.players]
    shown = [r for r in results.pairs if r.flags or any(s.opportunities >= LEAST[s.measure] for s in r.signals)]
    if shown:
        out.append("pairs (the first threw to the second; or was ahead when the second could close):")
        out += [_pair_text(r) for r in shown]
    flags = results.flags
    out.append(f"flags: {len(flags)}" + ("" if flags else " (none)"))
    for flag in flags:
        out.append(
            f"  FLAG {flag.signal} {flag.measure}: {' -> '.join(flag.players)}, z {flag.z:.2f} "
            f"over {flag.opportunities} opportunities"
        )
    if flags:
        out.append("A flag starts a human review of the deals; it proves nothing by itself.")
    return "\n".join(out) + "\n"


def _player_text(result: PlayerResult) -> str:
    accuracy = "none" if result.accuracy is None else f"{result.accuracy:.1f}"
    head = f"{result.player}: {result.deals} deals, {result.decisions} decisions, accuracy {accuracy}"
    return "\n".join([head, *(_signal_text(s) for s in result.signals)])


def _pair_text(result: PairResult) -> str:
    return "\n".join([f"{result.feeder} -> {result.taker}", *(_signal_text(s) for s in result.signals)])


def _signal_text(signal: object) -> str:
    from referee.play.fairplay import Signal

    assert isinstance(signal, Signal)
    return (
        f"  {signal.signal:<16} {signal.measure:<20} {signal.observed:9.1f} observed  {signal.expected:9.1f} expected"
        f"  z {signal.z:6.2f}  over {signal.opportunities}"
    )


__all__ = ["EXIT_SKIPPED", "add_arguments", "format_json", "format_text", "observe_line", "read_record_line", "run"]
