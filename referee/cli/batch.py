"""``remigio-referee batch``: judge a file of dispute cases, locally or on referee servers.

One case per input line (protobuf JSON of ``CheckDisputesRequest``), one verdict per output line
(protobuf JSON of ``CheckDisputesResponse``), in the order of the cases. The cases go out in
chunks of lines and the verdicts come back in chunks, each written and flushed as soon as it and
every chunk before it are known, so ``--resume`` can skip the ids already written.

Locally the worker processes read and write the JSON themselves: the main process only cuts the
input into blocks of bytes (after a newline) and writes the chunks of verdict text back in order,
so it stays off the workers' cores, and a chunk is one message each way instead of a pickle per
case.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import json
import os
import queue
import re
import shutil
import socket
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, TextIO

from google.protobuf import json_format
from google.protobuf.message import Message

from referee.api import handlers, jsonmsg
from referee.cli.workers import Workers, WorkersLost
from referee.game.errors import shorten
from referee.game.limits import CASE_ID, MESSAGE_BYTES
from referee.game.linking import engine_for
from referee.game.rules import Engine, RuleSet
from referee.server.cpus import usable_cpus

if TYPE_CHECKING:
    import grpc

    from referee._gen.remigio.referee.v1 import referee_pb2
    from referee.cli.report import Report


EXIT_OK = 0
EXIT_MALFORMED = 3  # every case was judged, some were MALFORMED
EXIT_UNREACHABLE = 4  # a server could not be reached or failed; what was done is kept

CHUNK = 64  # the most cases a local worker takes at once: one message each way, one write
CHUNKS_PER_JOB = 4  # chunks in flight per local job: bounds memory whatever the input's size
FULL_COLLECTION_EVERY = 1000  # collections of the middle generation (CPython's default: 10)
SCAN_CHUNK = 256  # lines per task when the local workers read the ids
SCAN_IN_FLIGHT = 8  # such tasks at once: memory bounded whatever the input's size
STREAM_CHUNK = 128  # cases per CheckDisputes call when sending to servers
# A server that turns streams away (busy, or a key over its rate) is asked again for this long (seconds).
BUSY_GIVE_UP = 300.0
CONNECT_SECONDS = 10.0  # the longest wait for servers that neither answer nor refuse


@dataclass(frozen=True, slots=True)
class Line:
    """One input line with its number (from 1)."""

    number: int
    text: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ``batch`` subcommand."""
    parser.add_argument(
        "input",
        metavar="IN.jsonl",
        help="cases, one JSON object per line (- for stdin); with --ray also a glob, a directory or a URI (s3://, gs://, file://)",
    )
    parser.add_argument("-o", "--output", default="-", metavar="OUT.jsonl", help="verdicts (default - for stdout)")
    parser.add_argument(
        "--target",
        help="referee servers, round-robin: host:port[,host:port...], or a gRPC target such as dns:///host:port (every address of the name); none: judge locally",
    )
    parser.add_argument("--jobs", type=int, default=usable_cpus(), help="local processes, or concurrent streams")
    parser.add_argument("--resume", action="store_true", help="skip the cases whose ids the output already holds")
    parser.add_argument("--engine", choices=tuple(Engine), help="engine for cases that name none")
    parser.add_argument(
        "--require-committed-shuffle",
        action="store_true",
        help="judge only deal records whose deck order was committed before the deal (else the violation "
        "UNCOMMITTED_SHUFFLE); local runs only: a server holds to its own --require-committed-shuffle",
    )
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="also write a dispute report: one self-contained HTML page, the cases not confirmed drawn",
    )
    from referee.cli.shards import parse_shard

    parser.add_argument(
        "--shard",
        type=parse_shard,
        metavar="I/N",
        help="judge only the cases of shard I of N (a stable hash of the case id; docs/commands.md): "
        "one pod of a Kubernetes Indexed Job each, merged by batch-merge",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="judge on a Ray cluster (the ray extra): auto (the cluster of RAY_ADDRESS, or a local one), "
        "host:port (its head), or ray://host:port (Ray Client, from outside the cluster: the input "
        "and a directory output are then read and written where the cluster sees them)",
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="the verdicts as JSON lines (default) or, with --ray, as Parquet: a directory of files, a column per field",
    )
    from referee.connection import KEEPALIVE_SECONDS, KEEPALIVE_TIMEOUT_SECONDS
    from referee.connection import add_arguments as add_connection_arguments

    add_connection_arguments(parser)
    group = parser.add_argument_group("lost connections (docs/operations.md, Keepalive)")
    group.add_argument(
        "--keepalive",
        type=_seconds,
        default=KEEPALIVE_SECONDS,
        metavar="SECONDS",
        help=f"ping a server after this long without data while cases are in flight (default {KEEPALIVE_SECONDS:g}; a server refuses pings more often than its --min-client-ping-interval)",
    )
    group.add_argument(
        "--keepalive-timeout",
        type=_seconds,
        default=KEEPALIVE_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"a server that does not answer a ping this long is given up, its unanswered cases sent to another (default {KEEPALIVE_TIMEOUT_SECONDS:g})",
    )


def _seconds(text: str) -> float:
    """A number of seconds above 0 (argparse names the option in its error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """Judge every case of the input; return the documented exit status."""
    if args.jobs < 1:
        print("remigio-referee batch: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.require_committed_shuffle and args.target:
        print(
            "remigio-referee batch: --require-committed-shuffle judges locally; "
            "servers hold to their own (serve --require-committed-shuffle)",
            file=sys.stderr,
        )
        return 2
    if args.format != "jsonl":
        print("remigio-referee batch: --format parquet is written by a Ray run (--ray)", file=sys.stderr)
        return 2
    # Before the local workers are forked: they inherit it.
    handlers.require_committed_shuffles(args.require_committed_shuffle)
    if args.target:
        from referee.connection import access_from

        try:
            access_from(args)  # a missing file or a half pair is bad usage, found before any work
        except ValueError as error:
            print(f"remigio-referee batch: {error}", file=sys.stderr)
            return 2
    # A file that cannot be opened is bad usage: one line and status 2, before any work.
    try:
        source = _spooled_stdin() if args.input == "-" else open(args.input, encoding="utf-8")
    except OSError as error:
        print(f"remigio-referee batch: cannot read {args.input}: {error.strerror}", file=sys.stderr)
        return 2
    if args.shard is not None:
        from referee.cli.shards import select

        try:
            source = select(source, args.shard, lambda number, text: _line_id(Line(number, text)))
        except UnicodeDecodeError:
            print(f"remigio-referee batch: {args.input}: not UTF-8 text", file=sys.stderr)
            return 2
    with _local_workers(args) as pool:
        return _judge_all(args, source, pool)


def _judge_all(args: argparse.Namespace, source: TextIO, pool: Workers | None) -> int:
    """``run`` once the input is open and the local workers (if any) have started."""
    # A file whose ids repeat is bad usage too (--resume could not tell its cases apart): refused
    # before any case is judged and before the output is touched.
    try:
        total = _scan(source, "stdin" if args.input == "-" else args.input, pool)
    except ValueError as error:
        source.close()
        print(f"remigio-referee batch: {error}", file=sys.stderr)
        return 2
    except WorkersLost as error:
        source.close()
        print(f"remigio-referee batch: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.report and not _writable(args.report):
        source.close()
        return 2
    try:
        done = _resume_ids(args.output) if args.resume else set()
        sink: TextIO = (
            sys.stdout if args.output == "-" else open(args.output, "a" if args.resume else "w", encoding="utf-8")
        )
    except OSError as error:
        source.close()
        print(f"remigio-referee batch: cannot write {args.output}: {error.strerror}", file=sys.stderr)
        return 2
    lines: Iterator[Line] = (
        line
        for line in (Line(n, text) for n, text in enumerate(source, start=1))
        if line.text.strip() and not (done and _line_id(line) in done)
    )
    report = None
    if args.report:
        from referee.cli.report import Report

        report = Report(f"Dispute report: {'stdin' if args.input == '-' else os.path.basename(args.input)}")
        report.skipped = len(done)
        lines = report.watch(lines)
    progress = Progress(total - len(done), enabled=sys.stderr.isatty())
    counts: Counter[str] = Counter()
    status = EXIT_OK
    try:
        chunks: Iterator[Judged]
        if args.target:
            chunks = map(judged, _remote(lines, args))
        elif done or report is not None:
            chunks = map(judged, _local(lines, args, total - len(done), pool))
        else:
            # Every case is judged: the workers read the input's blocks themselves.
            chunks = _local_blocks(source, args, total, pool)
        for chunk in chunks:
            # One write and one flush per chunk: a crash loses at most the chunk being written,
            # and --resume cuts a line it left half written.
            sink.write(chunk.text)
            sink.flush()
            counts.update(dict(chunk.outcomes))
            if report is not None:
                for verdict in chunk.text.split("\n")[:-1]:
                    report.add(verdict)
            progress.step(chunk.cases)
    except _Unreachable as error:
        print(f"\nremigio-referee batch: {error}", file=sys.stderr)
        status = EXIT_UNREACHABLE
    except WorkersLost as error:
        print(f"\nremigio-referee batch: {error}; the verdicts so far are kept: rerun with --resume", file=sys.stderr)
        status = EXIT_UNREACHABLE
    finally:
        progress.close()
        if sink is not sys.stdout:
            sink.close()
        source.close()
    _summary(counts, progress.elapsed, skipped=len(done))
    if report is not None and not _write_report(report, args.report):
        status = 2
    if status == EXIT_OK and counts["MALFORMED"]:
        status = EXIT_MALFORMED
    return status


def _writable(path: str) -> bool:
    """Whether the report can be written to ``path`` (bad usage, said on stderr, when not)."""
    try:
        open(path, "w", encoding="utf-8").close()
    except OSError as error:
        print(f"remigio-referee batch: cannot write {path}: {error.strerror}", file=sys.stderr)
        return False
    return True


def _write_report(report: Report, path: str) -> bool:
    """Write the dispute report; False, said on stderr, when it cannot be."""
    from referee.cli.report import write_report

    try:
        write_report(report, path)
    except OSError as error:
        print(f"remigio-referee batch: cannot write {path}: {error.strerror}", file=sys.stderr)
        return False
    return True


# Reading cases -----------------------------------------------------------------------------


def _line_id(line: Line) -> str:
    """The id of a case line: its ``id`` field, or ``line:N`` when it has none or cannot be read."""
    from referee.api import record_lines

    try:
        # A deal record's turns, most of its text, are read by their text (once per distinct turn).
        value = record_lines.decoded(line.text)
    except ValueError:
        return f"line:{line.number}"
    case_id = value.get("id") if isinstance(value, dict) else None
    # An id over its limit is never echoed whole, so such a case is known by its line.
    if isinstance(case_id, str) and 0 < len(case_id) <= CASE_ID.most:
        return case_id
    return f"line:{line.number}"


def _spooled_stdin() -> TextIO:
    """Standard input copied to a temporary file, so it can be read twice (the id check, then the
    cases) with memory bounded whatever its size."""
    spool = tempfile.TemporaryFile()
    shutil.copyfileobj(sys.stdin.buffer, spool)
    spool.seek(0)
    return io.TextIOWrapper(spool, encoding="utf-8")


def _scan(source: TextIO, name: str, pool: Workers | None = None) -> int:
    """The number of cases (non-blank lines) of ``source``, rewound for reading; ValueError naming
    both lines when two cases have the same id, or when the text is not UTF-8.

    The workers of ``pool``, when given, read the lines (the blocks of the file still taken in
    order), so no core waits while this process reads the whole file alone; this process only
    cuts the file into blocks of bytes. Most lines name their id first and plainly, and for them
    the first pass reads only that (``_candidate_ids``): the line's id is one of two candidates,
    and when no two lines share a candidate, no two share an id. Only when two do (a file that is
    likely refused) is every line read whole, which says exactly which lines share an id.
    A file whose every line is such a line is read here, as bytes, without the workers
    (``_plain_scanned``): handing its blocks to them cost more than the reading."""
    cases = _plain_scanned(source.buffer)
    if cases is None:
        cases = _scanned(source, name, pool, candidates=True)
    if cases is None:
        cases = _scanned(source, name, pool, candidates=False)
    source.seek(0)
    assert cases is not None  # ids, not candidates: a repeat raised
    return cases


def _scanned(source: TextIO, name: str, pool: Workers | None, candidates: bool) -> int | None:
    """One pass of ``_scan``, over each line's candidate ids (``_candidate_ids``) or its id
    (``_ids_of``): the number of cases when none is given twice; otherwise None for candidates,
    ValueError naming the lines for ids."""
    ids_of = _candidate_ids if candidates else _ids_of
    seen: dict[str, int] = {}
    cases, last = 0, 0
    source.seek(0)
    raw = source.buffer
    try:
        tasks = ((first, block) for first, block in _blocks(raw, SCAN_CHUNK))
        if pool is None:
            found: Iterable[tuple[str, int]] = (pair for task in tasks for pair in ids_of(*task))
        else:
            found = (pair for ids in pool.in_order(ids_of, tasks, SCAN_IN_FLIGHT) for pair in ids)
        for case_id, number in found:
            if number != last:  # the pairs come in the order of the lines, a line's together
                cases, last = cases + 1, number
            first = seen.setdefault(case_id, number)
            if first != number:
                if candidates:
                    return None
                raise ValueError(
                    f"{name}: lines {first} and {number} both have the id {case_id!r} (ids must be unique in a batch)"
                )
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not UTF-8 text") from None
    return cases


def _plain_scanned(raw: BinaryIO) -> int | None:
    """The number of cases of a file in which every line is blank or a plain line of
    ``_candidate_ids``, and no two lines share a candidate; None otherwise (and for a file that
    holds a carriage return or is not UTF-8: the lines are then cut as text, by ``_scanned``).

    Read as bytes, line by line, which the same rules allow: no byte of a character beyond ASCII
    is a quote or a backslash, and a line blank as bytes is blank as text (a line blank only as
    text is not a plain one)."""
    seen: set[bytes] = set()
    cases = 0
    raw.seek(0)
    try:
        for first, block in _blocks(raw, SCAN_CHUNK):
            if b"\r" in block:
                return None
            block.decode("utf-8")  # raises when it is not UTF-8
            for number, line in enumerate(block.split(b"\n"), first):
                if not line.strip():
                    continue
                plain = _PLAIN_ID_BYTES.match(line) if b"\\" not in line and line.count(b'"id"') == 1 else None
                if plain is None:
                    return None
                by_line = b"line:%d" % number
                case_id = plain.group(1)
                if case_id in seen or by_line in seen or case_id == by_line:
                    return None
                seen.add(case_id)
                seen.add(by_line)
                cases += 1
    except UnicodeDecodeError:
        return None
    finally:
        raw.seek(0)
    return cases


def _ids_of(first: int, block: bytes) -> list[tuple[str, int]]:
    """The ids of a block's cases, with their line numbers (in a worker, for ``_scan``)."""
    return [(_line_id(line), line.number) for line in _lines_of(first, block)]


# A line that begins by naming its id plainly: no escape in it, within the limit, more keys after.
_PLAIN_ID = re.compile(rf'\{{"id":"([^"\\]{{1,{CASE_ID.most}}})",')
# The same on a line's bytes: at most CASE_ID.most bytes, so no more characters (maybe fewer:
# such a line is then read as text).
_PLAIN_ID_BYTES = re.compile(_PLAIN_ID.pattern.encode())


def _candidate_ids(first: int, block: bytes) -> list[tuple[str, int]]:
    """Like ``_ids_of``, but a line that begins ``{"id":"ID",``, holds no backslash and spells
    ``"id"`` nowhere else is not decoded: its id is ID when the line is JSON (no other key can be
    ``id``: a key would spell it, escapes aside), ``line:N`` when it is not, and both are given
    as its candidates. Other lines are read whole, their one id given."""
    pairs = []
    for line in _lines_of(first, block):
        text = line.text
        plain = _PLAIN_ID.match(text) if "\\" not in text and text.count('"id"') == 1 else None
        if plain is None:
            pairs.append((_line_id(line), line.number))
        else:
            pairs.append((plain.group(1), line.number))
            pairs.append((f"line:{line.number}", line.number))
    return pairs


# The blocks of an input ------------------------------------------------------------------------

BLOCK_READ = 1 << 20  # bytes read at once while cutting blocks (more when a line is longer)


def _blocks(raw: BinaryIO, lines: int) -> Iterator[tuple[int, bytes]]:
    """The input's bytes in blocks of ``lines`` lines (the last may hold fewer), each with the
    number of its first line (from 1).

    A block ends after a newline byte, never inside a character, so each decodes alone; the
    workers cut it into lines (``_lines_of``), and this process does no work per line."""
    number, pending, size = 1, b"", BLOCK_READ
    while True:
        more = raw.read(size)
        data = pending + more if pending else more
        start = 0
        while True:
            end = start
            for _ in range(lines):
                end = data.find(b"\n", end) + 1
                if not end:
                    break
            if not end:
                break
            block = data[start:end]
            yield number, block
            number += _newlines(block)
            start = end
        pending = data[start:]
        if not more:
            if pending:
                yield number, pending
            return
        # A block longer than a read: read more at once, so cutting stays linear in the size.
        size = max(BLOCK_READ, len(pending))


def _newlines(block: bytes) -> int:
    """The lines a block ending in a newline holds as a text file reads them (universal newlines:
    \\r\\n, \\r and \\n each end a line)."""
    newlines = block.count(b"\n")
    if b"\r" not in block:  # most inputs: one pass over the block, not three
        return newlines
    return newlines + block.count(b"\r") - block.count(b"\r\n")


def _lines_of(first: int, block: bytes, errors: str = "strict") -> list[Line]:
    """The non-blank lines of a block, numbered from ``first``, each as ``open(..., encoding="utf-8")``
    reads it (its newline ending it, \\r\\n and \\r read as \\n); UnicodeDecodeError when it is not UTF-8
    (``errors="replace"``: bytes that are not UTF-8 read as U+FFFD instead, as the Ray run reads them)."""
    text = block.decode("utf-8", errors)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    last = parts.pop()  # after the last newline: "" or a last line without one
    lines = [Line(number, part + "\n") for number, part in enumerate(parts, first) if part.strip()]
    if last.strip():
        lines.append(Line(first + len(parts), last))
    return lines


def judge_line(line: Line, engine: str | None = None) -> str:
    """The verdict on one input line, as one JSON line; never raises for bad input."""
    from referee.api import record_lines
    from referee.api.disputes import judge_case

    # A deal record goes the fast lane when it can (straight into the domain's values when it has
    # the plain shape); whatever that lane does not take, the message way.
    lane = record_lines.read_record_line(line.text, _engine_number(engine) if engine else 0)
    if isinstance(lane, record_lines.PlainCase):
        verdict = record_lines.judge_plain(lane, line.number)
        if verdict is not None:
            return verdict
    elif lane is not None:
        case, turns = lane
        completed = _completed(case, line, engine)
        if isinstance(completed, str):
            return completed
        verdict = record_lines.judge_record(completed, turns)
        if verdict is not None:
            return verdict
    case_or_error = parse_case(line, engine)
    if isinstance(case_or_error, str):
        return case_or_error
    return verdict_json(judge_case(case_or_error))


def parse_case(line: Line, engine: str | None = None) -> referee_pb2.CheckDisputesRequest | str:
    """The case message of a line, or (when it cannot be read) its MALFORMED verdict as JSON."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee.api.disputes import malformed

    case = pb.CheckDisputesRequest()
    try:
        jsonmsg.parse(line.text, case)
    except (json_format.ParseError, ValueError) as error:
        return verdict_json(
            malformed(
                _line_id(line), "line", line.text.strip()[:80], f"not a case in protobuf JSON: {str(error)[:200]}"
            )
        )
    return _completed(case, line, engine)


def _completed(
    case: referee_pb2.CheckDisputesRequest, line: Line, engine: str | None
) -> referee_pb2.CheckDisputesRequest | str:
    """The case of a line with its id (``line:N`` when it has none) and engine (``engine`` when it
    names none) filled in, or its MALFORMED verdict as JSON when its id is too long."""
    from referee.api.disputes import malformed

    if len(case.id) > CASE_ID.most:
        return verdict_json(
            malformed(_line_id(line), "id", str(shorten(case.id)), f"at most {CASE_ID.most} characters")
        )
    if not case.id:
        case.id = f"line:{line.number}"
    if engine:
        kind = case.WhichOneof("dispute")
        rules = getattr(case, kind).rules if kind else None
        if rules is not None and not rules.engine:
            rules.engine = _engine_number(engine)
    return case


@functools.cache
def _engine_number(engine: str) -> int:
    """The Engine enum's number for an ``--engine`` choice (looked up once: every case asks)."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    return pb.Engine.Value(f"ENGINE_{Engine(engine).name}")


def verdict_json(verdict: Message) -> str:
    """A verdict as one line of protobuf JSON (proto field names, every field present)."""
    return jsonmsg.to_json(verdict)


_OUTCOME = re.compile(r'"outcome":"DISPUTE_OUTCOME_([A-Z_]+)"')


def _outcome_of(verdict: str) -> str:
    # The verdicts are written by ``verdict_json``: a look at the text is enough, and the main
    # process, which also writes every line, stays off the workers' cores.
    found = _OUTCOME.search(verdict)
    return found.group(1) if found else ""


# Judging locally -------------------------------------------------------------------------


def judge_lines(lines: Iterable[tuple[int, str]], engine: str | None = None) -> list[str]:
    """The verdicts on numbered input lines, in their order (``judge_line`` on each)."""
    verdicts = [judge_line(Line(number, text), engine) for number, text in lines]
    _between_chunks()
    return verdicts


@dataclass(frozen=True, slots=True)
class Judged:
    """A chunk of verdicts as the output takes them: their lines in one text (each ending in a
    newline), how many, and how many of each outcome (what the summary adds up)."""

    text: str
    cases: int
    outcomes: tuple[tuple[str, int], ...]


def judged(verdicts: list[str]) -> Judged:
    """The chunk of verdict lines ``verdicts``."""
    counts = Counter(map(_outcome_of, verdicts))
    return Judged("".join(f"{verdict}\n" for verdict in verdicts), len(verdicts), tuple(counts.items()))


def judge_block(first: int, block: bytes, engine: str | None = None) -> Judged:
    """The verdicts on a block of the input (``_blocks``), in the order of its lines."""
    chunk = judged([judge_line(line, engine) for line in _lines_of(first, block)])
    _between_chunks()
    return chunk


_chunks_done = 0


def _worker_starts() -> None:
    """A local worker collects its garbage between chunks, not while it judges (``_between_chunks``)."""
    gc.disable()


def _between_chunks() -> None:
    """In a local worker, collect the young generations after each chunk and everything after
    every FULL_COLLECTION_EVERY chunks: judging a record leaves no cycle, so the collector's
    runs within a chunk (every 700 objects made) found nothing and cost a few hundredths of the
    time; what a chunk leaves alive (the caches' new entries) is walked once here."""
    global _chunks_done
    if gc.isenabled():
        return  # not a worker: the collector runs on its own
    _chunks_done += 1
    gc.collect(2 if _chunks_done % FULL_COLLECTION_EVERY == 0 else 1)


def _windows(lines: Iterable[Line], size: int) -> Iterator[list[Line]]:
    window: list[Line] = []
    for line in lines:
        window.append(line)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def chunk_size(cases: int, jobs: int) -> int:
    """Cases per chunk: ``CHUNK``, or fewer when the input is small, so every job gets a few chunks."""
    return max(1, min(CHUNK, cases // (jobs * CHUNKS_PER_JOB)))


def load_judging(engine: str | None) -> None:
    """Load what every case needs before the first is judged: the engine the cases default to,
    and the judging code."""
    engine_for(RuleSet(engine=Engine(engine)) if engine else RuleSet())
    import referee.api.disputes  # noqa: F401


@contextlib.contextmanager
def _local_workers(args: argparse.Namespace) -> Iterator[Workers | None]:
    """The worker processes of a local run of more than one job (None otherwise), forked once
    what every case needs is loaded, so they share it instead of each importing it: the engine
    the cases default to, and the judging code."""
    if args.target:
        yield None
        return
    load_judging(args.engine)
    # Judging a case makes thousands of short-lived objects, so the collector runs all the time;
    # what is loaded by now (the modules, the engine's tables: most of the heap) is taken out of
    # its sight, so it does not walk it again and again, in this process and in the workers
    # forked below. Given back when the cases are done.
    gc.freeze()
    # The caches a worker fills as it judges (linkings, candidate groups, the turns read by their
    # text) hold tens of thousands of objects, whose turnover set off a full collection every few
    # thousand records, each walking all of them: a full collection waits for 1,000 collections
    # of the middle generation instead of 10, as in a server process (docs/design.md, the
    # garbage collector); the young generations are collected as before.
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], FULL_COLLECTION_EVERY)
    try:
        if args.jobs == 1:
            yield None
        else:
            with Workers(args.jobs, "batch", _worker_starts) as pool:
                yield pool
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _local(lines: Iterable[Line], args: argparse.Namespace, cases: int, pool: Workers | None) -> Iterator[list[str]]:
    """The verdicts in chunks, in the order of the lines: judged by ``pool``, or here when None."""
    chunks = _windows(lines, chunk_size(cases, args.jobs))
    if pool is None:
        for chunk in chunks:
            yield judge_lines(((line.number, line.text) for line in chunk), args.engine)
        return
    tasks = (([(line.number, line.text) for line in chunk], args.engine) for chunk in chunks)
    yield from pool.in_order(judge_lines, tasks, CHUNKS_PER_JOB * args.jobs)


def _local_blocks(source: TextIO, args: argparse.Namespace, cases: int, pool: Workers | None) -> Iterator[Judged]:
    """The verdicts on every case of ``source`` in chunks, in the order of the lines: each chunk
    a block of the input's bytes that a worker of ``pool`` (or this process, when None) cuts into
    lines, judges and writes as one text, so this process only moves bytes."""
    tasks = ((first, block, args.engine) for first, block in _blocks(source.buffer, chunk_size(cases, args.jobs)))
    if pool is None:
        yield from (judge_block(*task) for task in tasks)
        return
    yield from pool.in_order(judge_block, tasks, CHUNKS_PER_JOB * args.jobs)


# Judging on servers ------------------------------------------------------------------------


class _Unreachable(Exception):
    pass


# A target that names its resolver is gRPC's to resolve: with ``dns:///host:port`` gRPC asks DNS
# for every address of the name and round-robin spreads the calls over all of them (how a client
# reaches the replicas behind a headless Kubernetes Service), and asks again when a connection
# ends, as the servers' --max-connection-age makes them do, so it finds new replicas.
_TARGET_URI = re.compile(r"(dns|ipv4|ipv6|unix|unix-abstract):")


def channel_target(targets: str) -> str:
    """The gRPC target for ``--target``: a target URI (``dns:///host:port``, ``ipv4:...``) as it is,
    one or more host:port as ``ipv4:`` addresses for round-robin."""
    if _TARGET_URI.match(targets.strip()):
        return targets.strip()
    addresses = []
    for item in targets.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise _Unreachable(f"bad --target entry {item!r} (want host:port)")
        addresses.append(f"{socket.gethostbyname(host)}:{port}")
    return "ipv4:" + ",".join(addresses)


def connected(channel: grpc.Channel, timeout: float) -> bool:
    """Whether the channel gets ready within ``timeout`` seconds; False as soon as every server refuses."""
    import grpc

    states: queue.Queue[grpc.ChannelConnectivity] = queue.Queue()
    watch = states.put
    channel.subscribe(watch, try_to_connect=True)
    try:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                state = states.get(timeout=left)
            except queue.Empty:
                return False
            if state is grpc.ChannelConnectivity.READY:
                return True
            # Round-robin reports TRANSIENT_FAILURE only when no address could be connected.
            if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
                return False
        return False
    finally:
        channel.unsubscribe(watch)


def _remote(lines: Iterable[Line], args: argparse.Namespace) -> Iterator[list[str]]:
    """The verdicts in chunks (one per call), in the order of the lines."""
    import grpc

    from referee.client import Referee, access_from

    try:
        access = access_from(args)
    except ValueError as error:
        raise _Unreachable(str(error)) from None
    try:
        target = channel_target(args.target)
    except OSError as error:
        raise _Unreachable(f"cannot resolve {args.target}: {error}") from None
    # One channel, so one TCP connection, per job: a server of several SO_REUSEPORT worker
    # processes gets its connections spread by the kernel, and gRPC would otherwise share one
    # connection between channels of the same target and options.
    options = [
        ("grpc.lb_policy_name", "round_robin"),
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.use_local_subchannel_pool", 1),
    ]
    # host:port targets become addresses, so TLS is told the name to check the certificates
    # against; a target URI keeps its own name.
    uri = bool(_TARGET_URI.match(args.target.strip()))
    server_name = None if uri else args.target.split(",")[0].strip().rpartition(":")[0].strip("[]")
    with contextlib.ExitStack() as stack:
        referees = [
            stack.enter_context(
                Referee(
                    target,
                    timeout=600,
                    keepalive=args.keepalive,
                    keepalive_timeout=args.keepalive_timeout,
                    options=options,
                    server_name=server_name,
                    **access,
                )
            )
            for _ in range(args.jobs)
        ]
        if not all(connected(referee.channel, CONNECT_SECONDS) for referee in referees):
            secure = " over TLS" if access["tls"] or access["tls_ca"] is not None else ""
            raise _Unreachable(f"no referee server answers{secure} at {args.target}{_hint(args.target, access)}")
        idle: queue.Queue[Referee] = queue.Queue()
        for referee in referees:
            idle.put(referee)

        def send(chunk: list[Line]) -> list[str]:
            parsed = [_sendable(parse_case(line, args.engine)) for line in chunk]
            cases = [case for case in parsed if not isinstance(case, str)]
            if not cases:
                return [case for case in parsed if isinstance(case, str)]
            referee = idle.get()  # a connection no other call is using
            try:
                # A server that turns the stream away (busy, or the key over its rate) is asked
                # again after the wait it names, with the cases it has not answered; a stream
                # whose connection is lost (keepalive found the link dead or the server stopped)
                # sends them again at once, and round-robin takes them to another replica. Each
                # verdict is still read once, in the order of the cases.
                answers = referee.check_disputes(cases, patience=BUSY_GIVE_UP)
                # Lines that could not be read keep their place among the server's verdicts.
                verdicts = [case if isinstance(case, str) else verdict_json(next(answers)) for case in parsed]
                # The stream is read to its end, its final status: an error the server sends after
                # the last verdict is seen (as an RpcError), and the call ends OK for the server,
                # not cancelled by a client that stopped reading.
                for _ in answers:
                    raise _Unreachable("the server sent more verdicts than cases")
                return verdicts
            except RuntimeError as error:  # the stream ended OK before every case had its verdict
                raise _Unreachable(f"the server failed: {error}") from None
            finally:
                idle.put(referee)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            pending: deque[Future[list[str]]] = deque()
            try:
                # One call per chunk: round-robin spreads calls, not the messages of one stream.
                # Up to 2 × jobs chunks are queued, so a job that finishes a chunk starts the next
                # at once, whichever chunk is written next; the verdicts still leave in order.
                for chunk in _windows(lines, STREAM_CHUNK):
                    pending.append(pool.submit(send, chunk))
                    if len(pending) >= 2 * args.jobs:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            except (grpc.RpcError, _Unreachable) as error:
                for future in pending:
                    future.cancel()
                if isinstance(error, _Unreachable):
                    raise
                advice = ""
                if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                    advice = (
                        f" (the key of {_key_source(args)} was refused)"
                        if access["api_key"]
                        else " (give one with --api-key-file FILE or the variable REMIGIO_API_KEY)"
                    )
                raise _Unreachable(f"the server failed: {error.code().name}: {error.details()}{advice}") from None


def _key_source(args: argparse.Namespace) -> str:
    return f"--api-key-file {args.api_key_file}" if args.api_key_file else "REMIGIO_API_KEY"


def _hint(target: str, access: dict[str, object]) -> str:
    """The reason a probe of the target's first address finds for a failed connection, after a
    colon; "" when it finds none."""
    from referee.client import connection_hint

    text = target.strip()
    if _TARGET_URI.match(text):
        scheme, _, rest = text.partition(":")
        if scheme not in ("dns", "ipv4", "ipv6"):
            return ""
        text = rest.rpartition("/")[2] if scheme == "dns" else rest
    host, _, port = text.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        return ""
    hint = connection_hint(host.strip("[]"), int(port), access)
    return f": {hint}" if hint else ""


def _sendable(case: referee_pb2.CheckDisputesRequest | str) -> referee_pb2.CheckDisputesRequest | str:
    """The case, or its MALFORMED verdict when it is too large for a server to receive.

    A server refuses such a message with RESOURCE_EXHAUSTED and ends the whole stream: a code a
    busy server also sends, so the case would be sent again and again and never get a verdict.
    """
    if isinstance(case, str) or case.ByteSize() <= MESSAGE_BYTES:
        return case
    from referee.api.disputes import malformed

    size = f"{case.ByteSize()} bytes"
    return verdict_json(malformed(case.id, "", size, f"a case is at most {MESSAGE_BYTES} bytes (the message limit)"))


# Resume, progress, summary -----------------------------------------------------------------


def _resume_ids(path: str) -> set[str]:
    """Ids already in the output; a last line cut short by a crash is removed first."""
    if path == "-" or not os.path.exists(path):
        return set()
    with open(path, "rb+") as handle:
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            handle.truncate(end)
    ids = set()
    for raw in data[:end].splitlines():
        try:
            ids.add(json.loads(raw)["id"])
        except (ValueError, KeyError, TypeError):
            continue
    return ids


class Progress:
    """A one-line progress bar on a terminal (cases/s, ETA); silent otherwise."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.start = time.monotonic()
        self._shown = 0.0

    @property
    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.start

    def step(self, verdicts: int = 1) -> None:
        """Count more verdicts; redraw at most ten times a second."""
        self.done += verdicts
        now = time.monotonic()
        if self.enabled and now - self._shown >= 0.1:
            self._shown = now
            self._draw()

    def _draw(self) -> None:
        rate = self.done / max(self.elapsed, 1e-9)
        if self.total:
            eta = (self.total - self.done) / rate if rate else 0
            filled = int(30 * self.done / self.total)
            text = (
                f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}  {rate:,.0f} cases/s  ETA {eta:,.0f}s"
            )
        else:
            text = f"{self.done} cases  {rate:,.0f} cases/s"
        sys.stderr.write("\r" + text)
        sys.stderr.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled and self.done:
            self._draw()
            sys.stderr.write("\n")


def _summary(counts: Counter[str], seconds: float, skipped: int) -> None:
    total = sum(counts.values())
    out = io.StringIO()
    out.write(f"{'outcome':<12}{'cases':>10}\n")
    for name in ("CONFIRMED", "WRONG", "INVALID", "ILLEGAL", "NO_CLAIM", "MALFORMED"):
        out.write(f"{name:<12}{counts[name]:>10}\n")
    out.write(f"{'total':<12}{total:>10}\n")
    if skipped:
        out.write(f"{'resumed':<12}{skipped:>10}  (already in the output)\n")
    out.write(f"time {seconds:.2f} s, {total / max(seconds, 1e-9):,.0f} cases/s\n")
    sys.stderr.write(out.getvalue())


# The Ray run (referee.cli.cluster) and the shards' merge (referee.cli.merge) read ids, resume,
# count and sum up as the local run does: the same functions.
line_id = _line_id
blocks = _blocks
lines_of = _lines_of
resume_ids = _resume_ids
outcome_of = _outcome_of
summary = _summary
