"""``remigio-referee batch --ray ADDRESS``: the batch judged on a Ray cluster, with Ray Data.

Ray Data reads the input files (a path, a glob, a directory, or a URI pyarrow's file systems
read: ``s3://``, ``gs://``, ``file://``), splits each into numbered lines, judges them in tasks
spread over the cluster's CPUs and streams the verdicts out with backpressure: a bounded amount
in flight whatever the input's size, a task lost with its worker or node run again. Each line is
judged by ``batch.judge_line``, the function of the local run, so a verdict is the same bytes
here as there.

The verdicts go to standard output or a file (written by this process in the order of the input,
so a run over one file writes what the local run writes), or to a directory (a name ending in
``/``, an existing directory, a URI, or any ``--format parquet`` output), written by the cluster's
tasks as Ray writes datasets: one file per write task, JSON lines or Parquet with a column per
field of the verdict. A directory's files appear whole (written aside, then renamed, where the
file system is local; an object store shows an object only once it is uploaded), so ``--resume``
reads the ids of the files there and judges only the other cases.

Ray and pyarrow are imported here only: the rest of the command line runs without them.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import logging
import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from referee.cli import batch
from referee.cli.batch import (
    EXIT_MALFORMED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    Line,
    Progress,
    judge_line,
    line_id,
    outcome_of,
    resume_ids,
    summary,
)
from referee.cli.shards import Shard

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from google.protobuf.descriptor import Descriptor, FieldDescriptor

SPLIT_LINES = 256  # lines per block handed to the judging tasks: small enough to spread a file
JUDGE_BATCH = 512  # lines a judging task takes at once: amortises a task's overhead (about 1 ms)
OUTCOME_PREFIX = "DISPUTE_OUTCOME_"
PARTIAL = ".partial-"  # a file still being written (local file systems); never read, removed by --resume


@dataclass(frozen=True, slots=True)
class Place:
    """A file or directory on a pyarrow file system, with the name the user gave it."""

    fs: pafs.FileSystem
    path: str
    name: str


def run_batch(args: argparse.Namespace) -> int:
    """``remigio-referee batch``: on the Ray cluster of ``--ray``, else as ``batch.run`` judges."""
    if not args.ray:
        return batch.run(args)
    if args.target:
        return _usage("--ray and --target are two ways to judge: give one")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Judge the input on the Ray cluster of ``args.ray``; the same exit statuses as a local run."""
    try:
        import pyarrow  # noqa: F401
        import ray
    except ImportError:
        return _usage("--ray needs Ray: pip install 'remigio-referee[ray]'")
    if args.report:
        return _usage("--report is written by a local run (the Ray run writes verdicts only)")
    if args.ray.startswith("ray://"):
        # Ray Data 2.60 cannot execute a dataset from a Ray Client (its executor needs the
        # driver's core worker): the driver has to run in the cluster.
        return _usage(
            "Ray Client (ray://) cannot run Ray Data: run the command in the cluster, "
            "e.g. ray job submit --address http://HEAD:8265 -- remigio-referee batch ... --ray auto"
        )
    to_directory = args.format == "parquet" or _is_directory_output(args.output)
    if args.format == "parquet" and args.output == "-":
        return _usage("--format parquet writes a directory: give one with -o")
    try:
        inputs = None if args.input == "-" else input_files(args.input)
        output = place_of(args.output.rstrip("/")) if to_directory else None
        done = _resume(args, output) if args.resume else set()
    except (ValueError, OSError) as error:
        return _usage(str(error))
    started = time.monotonic()
    try:
        join_cluster(ray, args.ray)
    except (ConnectionError, ValueError, RuntimeError) as error:
        print(f"remigio-referee batch: cannot join the Ray cluster at {args.ray}: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    cpus = int(ray.cluster_resources().get("CPU", 0))
    print(f"ray: {cpus} CPUs, joined in {time.monotonic() - started:.2f} s", file=sys.stderr)
    from ray.data import DataContext

    # A file or standard output gets the verdicts in the order of the input, as from a local run;
    # a directory's files need no order, and no task waits for an earlier one.
    DataContext.get_current().execution_options.preserve_order = output is None
    dataset = _verdicts(_lines(inputs), args, done, parquet=args.format == "parquet")
    progress = Progress(None, enabled=False)
    counts: Counter[str] = Counter()
    try:
        if output is not None:
            sink = _directory_datasink(output, args.format)
            # Writing asks less than a CPU, so Ray keeps it apart from judging. Each judged block
            # is written as it comes, a file each: bundling blocks into larger files held
            # verdicts in the object store until it was full, and the run waited for ever.
            dataset.write_datasink(sink, ray_remote_args={"num_cpus": 0.25})
            counts = sink.counts
        else:
            counts = _write_in_order(dataset, args, progress)
    except OSError as error:
        print(f"\nremigio-referee batch: cannot write {args.output}: {error.strerror}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the cluster failed the run: said in one line, what is written kept
        print(f"\nremigio-referee batch: the Ray run failed: {first_line(error)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    summary(counts, progress.elapsed, skipped=len(done))
    return EXIT_MALFORMED if counts["MALFORMED"] else EXIT_OK


def _usage(message: str) -> int:
    print(f"remigio-referee batch: {message}", file=sys.stderr)
    return 2


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1] if text else type(error).__name__


def join_cluster(ray: Any, address: str) -> None:
    """Connect to the cluster (``auto``: RAY_ADDRESS's, the one last started here, or a new local one)."""
    # A token given as Ray reads it (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token) is
    # sent: the clusters ``ray start`` makes ask for one. RAY_AUTH_MODE, when set, decides.
    if "RAY_AUTH_MODE" not in os.environ and (
        os.environ.get("RAY_AUTH_TOKEN")
        or os.environ.get("RAY_AUTH_TOKEN_PATH")
        or os.path.exists(os.path.expanduser("~/.ray/auth_token"))
    ):
        os.environ["RAY_AUTH_MODE"] = "token"
    ray.init(
        address=None if address == "auto" else address,
        logging_level=logging.ERROR,
        log_to_driver=False,
        ignore_reinit_error=True,
    )
    from ray.data import DataContext

    logging.getLogger("ray.data").setLevel(logging.ERROR)
    context = DataContext.get_current()
    # Ray Data's own progress bars on a terminal; elsewhere only the summary, as a local run.
    context.enable_progress_bars = sys.stderr.isatty()
    context.enable_auto_log_stats = False
    # Blocks of about a megabyte (a dataset takes the context it is made in): a split file becomes
    # blocks of SPLIT_LINES lines, judged by many tasks, not one block judged by one.
    context.target_max_block_size = 1 << 20


# Inputs ----------------------------------------------------------------------------------------


def place_of(name: str) -> Place:
    """The file system and path of a local path or URI."""
    import pyarrow.fs as pafs

    if "://" in name:
        fs, path = pafs.FileSystem.from_uri(name)
        return Place(fs, path, name)
    return Place(pafs.LocalFileSystem(), os.path.abspath(name), name)


def input_files(name: str) -> tuple[Place, ...]:
    """The files an input names, sorted: the file itself, a directory's files (recursively, less
    the hidden ones and those starting with ``_``), or a glob's matches; ValueError when none."""
    import pyarrow.fs as pafs

    root = place_of(name)
    glob = any(char in root.path for char in "*?[")  # the path's: a URI's query has a "?"
    if glob:
        # The folder above the first wildcard is listed, and its files matched against the pattern.
        head, _, _ = root.path.partition(next(c for c in root.path if c in "*?["))
        base = head.rpartition("/")[0] or "/"
        selector = pafs.FileSelector(base, recursive=True)
        infos = [info for info in root.fs.get_file_info(selector) if fnmatch.fnmatchcase(info.path, root.path)]
    else:
        info = root.fs.get_file_info(root.path)
        if info.type == pafs.FileType.NotFound:
            raise ValueError(f"cannot read {name}: No such file or directory")
        if info.type == pafs.FileType.Directory:
            infos = root.fs.get_file_info(pafs.FileSelector(root.path, recursive=True))
        else:
            infos = [info]
    files = sorted(
        info.path for info in infos if info.type == pafs.FileType.File and not info.base_name.startswith((".", "_"))
    )
    if not files:
        raise ValueError(f"{name}: no input files there")
    return tuple(Place(root.fs, path, path) for path in files)


def _lines(inputs: tuple[Place, ...] | None) -> Any:
    """A dataset of numbered lines (``number``, ``text``) in the order of the files and their lines."""
    import ray.data

    if inputs is None:
        # Standard input is this process's: read here and handed to the cluster in blocks.
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        tables = [_numbered(lines, first) for lines, first in _blocks(stdin)]
        return ray.data.from_arrow(tables) if tables else ray.data.from_arrow(_numbered([], 1))
    files = ray.data.read_binary_files([place.path for place in inputs], filesystem=inputs[0].fs)
    # Splitting asks less than a CPU, so Ray keeps it apart from judging (operators of different
    # resources are not fused): each file's lines come out as many blocks, judged in parallel.
    return files.map_batches(_split, batch_size=1, batch_format="pyarrow", num_cpus=0.25)


def _blocks(source: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """Lines in blocks of ``SPLIT_LINES``, each with the number of its first line."""
    block: list[str] = []
    first = 1
    for number, text in enumerate(source, start=1):
        if not block:
            first = number
        block.append(text)
        if len(block) == SPLIT_LINES:
            yield block, first
            block = []
    if block:
        yield block, first


def _numbered(lines: list[str], first: int) -> pa.Table:
    import pyarrow as pa

    return pa.table(
        {"number": pa.array(range(first, first + len(lines)), pa.int64()), "text": pa.array(lines, pa.string())}
    )


def _split(files: pa.Table) -> Iterator[pa.Table]:
    """A file's bytes as blocks of numbered lines, read as the local run reads a file (universal
    newlines); bytes that are not UTF-8 are read as U+FFFD, so their line gets its verdict."""
    for data in files.column("bytes").to_pylist():
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
        for lines, first in _blocks(text):
            yield _numbered(lines, first)


# Judging -------------------------------------------------------------------------------------


def _verdicts(lines: Any, args: argparse.Namespace, done: set[str], parquet: bool) -> Any:
    """The dataset of verdicts: ``id``, ``outcome`` and ``verdict`` (the JSON line), or the
    verdict's own fields as columns (``parquet``)."""
    judge = _Judge(args.engine, frozenset(done), args.shard, args.require_committed_shuffle, parquet)
    return lines.map_batches(judge, batch_size=JUDGE_BATCH, batch_format="pyarrow", num_cpus=1)


@dataclass(frozen=True, slots=True)
class _Judge:
    """What a judging task runs on a batch of numbered lines (pickled once, sent with the tasks)."""

    engine: str | None
    done: frozenset[str]
    shard: Shard | None
    strict: bool
    parquet: bool

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        from referee.api import handlers

        handlers.require_committed_shuffles(self.strict)
        ids: list[str] = []
        verdicts: list[str] = []
        for number, text in zip(batch.column("number").to_pylist(), batch.column("text").to_pylist()):
            if not text.strip():
                continue
            line = Line(number, text)
            if self.done or self.shard is not None:
                case_id = line_id(line)
                if case_id in self.done or (self.shard is not None and not self.shard.holds(case_id)):
                    continue
            verdicts.append(judge_line(line, self.engine))
        if self.parquet:
            return pa.Table.from_pylist([json.loads(verdict) for verdict in verdicts], schema=verdict_schema())
        ids = [_verdict_id(verdict) for verdict in verdicts]
        outcomes = [_outcome(verdict) for verdict in verdicts]
        return pa.table(
            {
                "id": pa.array(ids, pa.string()),
                "outcome": pa.array(outcomes, pa.string()),
                "verdict": pa.array(verdicts, pa.string()),
            }
        )


# The id is field 1 of the verdict and always set, so its line starts with it (batch.verdict_json).
_ID = re.compile(r'\{"id":("(?:[^"\\]|\\.)*")')


def _verdict_id(verdict: str) -> str:
    found = _ID.match(verdict)
    return str(json.loads(found.group(1))) if found else str(json.loads(verdict)["id"])


def _outcome(verdict: str) -> str:
    return OUTCOME_PREFIX + outcome_of(verdict)


def _write_in_order(dataset: Any, args: argparse.Namespace, progress: Progress) -> Counter[str]:
    """Write the verdicts to standard output or a file, in the order of the input; their counts."""
    sink = sys.stdout if args.output == "-" else open(args.output, "a" if args.resume else "w", encoding="utf-8")
    counts: Counter[str] = Counter()
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            verdicts = batch.column("verdict").to_pylist()
            if not verdicts:
                continue
            # One write and one flush per batch, as locally: --resume cuts a line left half written.
            sink.write("".join(f"{verdict}\n" for verdict in verdicts))
            sink.flush()
            counts.update(outcome.removeprefix(OUTCOME_PREFIX) for outcome in batch.column("outcome").to_pylist())
            progress.step(len(verdicts))
    finally:
        if sink is not sys.stdout:
            sink.close()
    return counts


# Directory outputs -----------------------------------------------------------------------------


def _is_directory_output(name: str) -> bool:
    return name != "-" and (name.endswith("/") or "://" in name or os.path.isdir(name))


def _resume(args: argparse.Namespace, output: Place | None) -> set[str]:
    """The ids already written: of the output file (a cut last line removed, as locally), or of
    the directory's files (a file left partial removed, its cases judged again)."""
    if output is None:
        return resume_ids(args.output)
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    selector = pafs.FileSelector(output.path, allow_not_found=True)
    done: set[str] = set()
    for info in output.fs.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        if info.base_name.startswith(PARTIAL):
            output.fs.delete_file(info.path)
        elif info.base_name.endswith(".parquet"):
            try:
                done.update(pq.read_table(info.path, columns=["id"], filesystem=output.fs).column("id").to_pylist())
            except (OSError, ValueError):
                output.fs.delete_file(info.path)
        elif info.base_name.endswith(".jsonl"):
            with output.fs.open_input_stream(info.path) as stream:
                for raw in stream.read().splitlines():
                    try:
                        done.add(json.loads(raw)["id"])
                    except (ValueError, KeyError, TypeError):
                        continue
    return done


def _directory_datasink(output: Place, file_format: str) -> Any:
    """A Ray datasink that writes each write task's verdicts to one file of the directory and
    counts their outcomes (``.counts`` once written). Made here, so Ray is imported only when used."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class Verdicts(Datasink):
        def __init__(self) -> None:
            self.run = uuid.uuid4().hex[:12]  # files of another run (resumed) keep their names
            self.counts: Counter[str] = Counter()

        def get_name(self) -> str:
            return "Verdicts"

        def on_write_start(self, schema: Any = None) -> None:
            output.fs.create_dir(output.path, recursive=True)

        def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, int]:
            tables = [BlockAccessor.for_block(block).to_arrow() for block in blocks]
            tables = [table for table in tables if table.num_rows]
            if not tables:
                return {}
            table = pa.concat_tables(tables)
            name = f"{self.run}-{ctx.task_idx:06d}.{'parquet' if file_format == 'parquet' else 'jsonl'}"
            local = isinstance(output.fs, pafs.LocalFileSystem)
            final = f"{output.path}/{name}"
            # A retried task writes the same name again: a file is never there twice.
            path = f"{output.path}/{PARTIAL}{name}" if local else final
            if file_format == "parquet":
                pq.write_table(table, path, filesystem=output.fs)
            else:
                with output.fs.open_output_stream(path) as stream:
                    stream.write("".join(f"{verdict}\n" for verdict in table.column("verdict").to_pylist()).encode())
            if local:
                output.fs.move(path, final)  # whole or not at all: a rename
            outcomes = table.column("outcome").to_pylist()
            return dict(Counter(outcome.removeprefix(OUTCOME_PREFIX) for outcome in outcomes))

        def on_write_complete(self, write_result: Any) -> None:
            for counted in write_result.write_returns:
                self.counts.update(counted)

    return Verdicts()


# The Parquet schema ----------------------------------------------------------------------------


def verdict_schema() -> pa.Schema:
    """The verdict (``CheckDisputesResponse``) as a pyarrow schema: a column per field, a message
    a struct, a repeated field a list, an enum its name, a field with presence null when unset."""
    from referee._gen.remigio.referee.v1 import referee_pb2 as pb

    return _schema_of(pb.CheckDisputesResponse.DESCRIPTOR)


def _schema_of(message: Descriptor) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(field.name, _arrow_type(field)) for field in message.fields])


def _arrow_type(field: FieldDescriptor) -> pa.DataType:
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.message_type is not None:
        kind: pa.DataType = pa.struct(list(_schema_of(field.message_type)))
    else:
        scalars = {
            F.TYPE_STRING: pa.string(),
            F.TYPE_ENUM: pa.string(),
            F.TYPE_BOOL: pa.bool_(),
            F.TYPE_INT32: pa.int32(),
            F.TYPE_SINT32: pa.int32(),
            F.TYPE_UINT32: pa.uint32(),
            F.TYPE_DOUBLE: pa.float64(),
            F.TYPE_FLOAT: pa.float32(),
        }
        if field.type not in scalars:
            # 64-bit integers are strings in protobuf JSON: a new such field needs a conversion here.
            raise TypeError(f"no Parquet type for the verdict's field {field.full_name}")
        kind = scalars[field.type]
    return pa.list_(kind) if field.is_repeated else kind
