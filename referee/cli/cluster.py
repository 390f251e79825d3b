"""``remigio-referee batch --ray ADDRESS``: the batch judged on a Ray cluster, with Ray Data.

The input files (a path, a glob, a directory, or a URI pyarrow's file systems read: ``s3://``,
``gs://``, ``file://``) are cut into pieces of ``PIECE_LINES`` lines, as bytes (a task per file,
reading it as a stream: never a whole file in memory), and the pieces are judged by tasks spread
over the cluster's CPUs, streamed with backpressure: a bounded amount in flight whatever the
input's size, a task lost with its worker or node run again. Each line is judged by
``batch.judge_line``, the function of the local run, so a verdict is the same bytes here as there.

The verdicts go to standard output or a file (written by this process in the order of the input,
so a run over one file writes what the local run writes: each piece comes back as one text), or
to a directory (a name ending in ``/``, an existing directory, a URI, or any ``--format parquet``
output), written by the judging tasks themselves, a file per piece, JSON lines or Parquet with a
column per field of the verdict; only the counts come back. A directory's files appear whole
(written aside, then renamed, where the file system is local; an object store shows an object
only once it is uploaded), and a piece's file has the same name however often its task is run
again, so ``--resume`` reads the ids of the files there and judges only the other cases.

Ray Data runs only where a Ray driver does. With Ray Client (``--ray ray://HOST:PORT``), this
process is not one, so the driver is an actor in the cluster (``_Driver``): it reads the inputs
and writes a directory as the cluster sees them, and hands the verdicts back here, piece by
piece in order, to be written as a local run writes them.

Ray and pyarrow are imported here only: the rest of the command line runs without them.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import gc
import json
import logging
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, cast

from referee.cli import batch
from referee.cli.batch import (
    EXIT_MALFORMED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    Judged,
    Line,
    Progress,
    judge_line,
    judged,
    line_id,
    resume_ids,
    summary,
)
from referee.cli.shards import Shard

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from google.protobuf.descriptor import Descriptor, FieldDescriptor

# Lines a judging task takes at once (about a second of work): Ray Data notices a task has ended
# up to 0.1 s late (it waits on its tasks in rounds of 0.1 s), a gap in which the worker idles,
# so the work of a task is kept long beside it; short enough that a file is spread over the CPUs.
PIECE_LINES = 1024
CUTTERS = 2  # input files cut into pieces at once (reading, not judging: it takes no CPU of Ray's)
CLIENT_TAKE = 2  # pieces handed back through Ray Client at once (about 13 MB of deal verdicts)
CLIENT_ATTEMPTS = 3  # times a Ray Client connection is tried
PARTIAL = ".partial-"  # a file still being written (local file systems); never read, removed by --resume


@dataclass(frozen=True, slots=True)
class Place:
    """A file or directory on a pyarrow file system, with the name the user gave it."""

    fs: pafs.FileSystem
    path: str
    name: str


@dataclass(frozen=True, slots=True)
class Job:
    """A batch as the cluster's driver runs it, made from the command line (and sent into the
    cluster as it is when the command runs outside it, through Ray Client)."""

    input: str  # a path, glob, directory or URI; "-": standard input, given as pieces
    output: str | None  # a directory, as named; None: the verdicts come back, in order
    file_format: str
    engine: str | None
    done: frozenset[str]  # the ids already in an output file (--resume of a file)
    resume: bool  # --resume over a directory: its ids are read where it is, by the driver
    shard: Shard | None
    strict: bool


@dataclass(frozen=True, slots=True)
class _Plan:
    """A job's inputs, output and ids already judged, as the driver finds them."""

    inputs: tuple[Place, ...] | None
    output: Place | None
    done: frozenset[str]


class _Refused(Exception):
    """A job the driver cannot run as given (no input there, an output it cannot read)."""


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
    client = args.ray.startswith("ray://")
    to_directory = args.format == "parquet" or _is_directory_output(args.output, client)
    if args.format == "parquet" and args.output == "-":
        return _usage("--format parquet writes a directory: give one with -o")
    try:
        # An output file is this machine's, wherever the cases are judged.
        done = resume_ids(args.output) if args.resume and not to_directory else set()
    except OSError as error:
        return _usage(f"cannot read {args.output}: {error.strerror}")
    job = Job(
        input=args.input,
        output=args.output.rstrip("/") if to_directory else None,
        file_format=args.format,
        engine=args.engine,
        done=frozenset(done),
        resume=args.resume and to_directory,
        shard=args.shard,
        strict=args.require_committed_shuffle,
    )
    plan = None
    if not client:
        # The inputs are this machine's too: a missing one is bad usage, found before joining.
        try:
            plan = _plan(job)
        except _Refused as error:
            return _usage(str(error))
    with results_only_on_stdout() as stdout:
        try:
            return _judge_on(ray, args, job, plan, to_directory, stdout)
        finally:
            ray.shutdown()  # before standard output is given back: Ray's threads print until then


def _judge_on(
    ray: Any, args: argparse.Namespace, job: Job, plan: _Plan | None, to_directory: bool, stdout: TextIO
) -> int:
    """Join the cluster and judge the job there; verdicts for standard output go to ``stdout``."""
    started = time.monotonic()
    try:
        join_cluster(ray, args.ray)
    except (ConnectionError, ValueError, RuntimeError) as error:
        print(f"remigio-referee batch: cannot join the Ray cluster at {args.ray}: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    cpus = int(ray.cluster_resources().get("CPU", 0))
    print(f"ray: {cpus} CPUs, joined in {time.monotonic() - started:.2f} s", file=sys.stderr)
    progress = Progress(None, enabled=False)
    stdin = _stdin_pieces() if args.input == "-" else None
    try:
        if plan is None:
            skipped, chunks = _through_client(ray, job, stdin)
        else:
            skipped, chunks = len(plan.done), _judged(plan, job, stdin)
        counts = _write(chunks, None if to_directory else args.output, args.resume, progress, stdout)
    except _Refused as error:
        return _usage(str(error))
    except OSError as error:
        print(f"\nremigio-referee batch: cannot write {args.output}: {error.strerror}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the cluster failed the run: said in one line, what is written kept
        print(f"\nremigio-referee batch: the Ray run failed: {first_line(error)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    summary(counts, progress.elapsed, skipped=skipped)
    return EXIT_MALFORMED if counts["MALFORMED"] else EXIT_OK


@contextlib.contextmanager
def results_only_on_stdout() -> Iterator[TextIO]:
    """Standard output for the results alone: Ray's processes print what they see (a worker lost,
    a task retried) on the driver's standard output, so while the cluster runs, file descriptor 1
    is standard error and the results go to a copy of the real one."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield sys.stdout  # not a file (a test's buffer): nothing of Ray's reaches it
        return
    sys.stdout.flush()
    kept = os.dup(fd)
    os.dup2(sys.stderr.fileno(), fd)
    results = open(os.dup(kept), "w", encoding="utf-8", closefd=True)
    try:
        yield results
    finally:
        results.close()
        os.dup2(kept, fd)
        os.close(kept)


def _usage(message: str) -> int:
    print(f"remigio-referee batch: {message}", file=sys.stderr)
    return 2


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1] if text else type(error).__name__


def join_cluster(ray: Any, address: str) -> None:
    """Connect to the cluster (``auto``: RAY_ADDRESS's, the one last started here, or a new local
    one; ``ray://HOST:PORT``: through Ray Client, as a client and not a driver)."""
    # A token given as Ray reads it (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token) is
    # sent: the clusters ``ray start`` makes ask for one. RAY_AUTH_MODE, when set, decides.
    if "RAY_AUTH_MODE" not in os.environ and (
        os.environ.get("RAY_AUTH_TOKEN")
        or os.environ.get("RAY_AUTH_TOKEN_PATH")
        or os.path.exists(os.path.expanduser("~/.ray/auth_token"))
    ):
        os.environ["RAY_AUTH_MODE"] = "token"
    client = address.startswith("ray://")
    if client:
        logging.getLogger("ray.util.client").setLevel(logging.ERROR)
    for attempt in range(1, CLIENT_ATTEMPTS + 1):
        try:
            ray.init(
                address=None if address == "auto" else address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
            break
        except ConnectionError:
            # The head starts a server process for each client, which now and then dies as it
            # starts (Ray 2.60, a busy machine): asked again, it starts another.
            if not client or attempt == CLIENT_ATTEMPTS:
                raise
            time.sleep(attempt)
    # Ray Data's own progress bars on a terminal; elsewhere only the summary, as a local run.
    _configure_data(progress_bars=sys.stderr.isatty())


def _configure_data(progress_bars: bool) -> None:
    """Ray Data's settings for the datasets this process makes (a dataset takes the context it is made in)."""
    from ray.data import DataContext

    logging.getLogger("ray.data").setLevel(logging.ERROR)
    context = DataContext.get_current()
    context.enable_progress_bars = progress_bars
    context.enable_auto_log_stats = False
    # Blocks of about a megabyte: a split file becomes many blocks, judged by many tasks, not
    # one block judged by one.
    context.target_max_block_size = 1 << 20


def _plan(job: Job) -> _Plan:
    """The inputs, the output and the ids already judged of a job; _Refused when they cannot be read."""
    try:
        inputs = None if job.input == "-" else input_files(job.input)
        output = place_of(job.output) if job.output is not None else None
        done = frozenset(_resume_directory(output)) if job.resume and output is not None else job.done
    except (ValueError, OSError) as error:
        raise _Refused(str(error)) from None
    return _Plan(inputs, output, done)


def _write(
    chunks: Iterable[Judged], output: str | None, append: bool, progress: Progress, stdout: TextIO
) -> Counter[str]:
    """The verdicts to ``output`` (a file, ``-`` for ``stdout``), in the order they come, or
    (None: a directory's, written already) only counted; their counts."""
    sink = None
    if output is not None:
        sink = stdout if output == "-" else open(output, "a" if append else "w", encoding="utf-8")
    counts: Counter[str] = Counter()
    try:
        for chunk in chunks:
            if not chunk.cases:
                continue
            if sink is not None:
                # One write and one flush per piece, as locally: --resume cuts a line left half written.
                sink.write(chunk.text)
                sink.flush()
            counts.update(dict(chunk.outcomes))
            progress.step(chunk.cases)
    finally:
        if sink is not None and sink is not stdout:
            sink.close()
    return counts


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


# Pieces ----------------------------------------------------------------------------------------


def _pieces(inputs: tuple[Place, ...] | None, stdin: list[pa.Table] | None) -> Any:
    """A dataset of pieces of the input (``file``: its index, ``first``: the number of its first
    line, ``data``: its bytes, whole lines), in the order of the files and their lines."""
    import ray.data

    if inputs is None:
        return ray.data.from_arrow(stdin or [_piece_table([], [], [])])
    files = ray.data.from_items(
        [{"file": index, "path": place.path} for index, place in enumerate(inputs)], override_num_blocks=len(inputs)
    )
    # Cutting takes no CPU of Ray's: the judging tasks, a CPU each, take them all, and a cutting
    # task waiting for one would hold the run up; it is reading, a small part of a core.
    return files.map_batches(_Cut(inputs[0].fs), batch_size=1, batch_format="pyarrow", num_cpus=0, concurrency=CUTTERS)


def _piece_table(files: list[int], firsts: list[int], data: list[bytes]) -> pa.Table:
    import pyarrow as pa

    return pa.table(
        {
            "file": pa.array(files, pa.int32()),
            "first": pa.array(firsts, pa.int64()),
            "data": pa.array(data, pa.binary()),
        }
    )


def _stdin_pieces() -> list[pa.Table]:
    """Standard input (this process's) as pieces, to hand to the cluster."""
    return [_piece_table([0], [first], [data]) for first, data in batch.blocks(sys.stdin.buffer, PIECE_LINES)]


@dataclass(frozen=True, slots=True)
class _Cut:
    """What a cutting task runs on a file: its bytes read as a stream, cut after a newline every
    ``PIECE_LINES`` lines (as the local run cuts its blocks)."""

    fs: pafs.FileSystem

    def __call__(self, files: pa.Table) -> Iterator[pa.Table]:
        for index, path in zip(files.column("file").to_pylist(), files.column("path").to_pylist()):
            # The bytes as they are: a file named .gz is not the local run's to read either.
            with self.fs.open_input_stream(path, compression=None) as stream:
                for first, data in batch.blocks(cast(BinaryIO, stream), PIECE_LINES):
                    yield _piece_table([index], [first], [data])


# Judging -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Judge:
    """What a judging task runs on pieces of the input (pickled once, sent with the tasks): their
    verdicts, a row per piece (``text``: its verdict lines, ``cases``, ``outcomes``: their counts
    as JSON), the text written to a file of ``output`` instead when it is given."""

    engine: str | None
    done: frozenset[str]
    shard: Shard | None
    strict: bool
    file_format: str
    output: Place | None
    run: str  # the run's mark in its files' names: a resumed run's files keep theirs

    def __call__(self, pieces: pa.Table) -> pa.Table:
        import pyarrow as pa

        from referee.api import handlers

        _ready(self.engine)
        handlers.require_committed_shuffles(self.strict)
        texts: list[str] = []
        cases: list[int] = []
        outcomes: list[str] = []
        for file, first, data in zip(
            pieces.column("file").to_pylist(), pieces.column("first").to_pylist(), pieces.column("data").to_pylist()
        ):
            # Bytes that are not UTF-8 read as U+FFFD, so their line gets its verdict.
            lines = batch.lines_of(first, data, errors="replace")
            if self.done or self.shard is not None:
                lines = [line for line in lines if self._holds(line)]
            verdicts = [judge_line(line, self.engine) for line in lines]
            chunk = judged(verdicts)
            if self.output is not None and verdicts:
                self._write(file, first, chunk.text, verdicts)
            texts.append(chunk.text if self.output is None else "")
            cases.append(chunk.cases)
            outcomes.append(json.dumps(dict(chunk.outcomes)))
        return pa.table(
            {
                "text": pa.array(texts, pa.large_string()),
                "cases": pa.array(cases, pa.int64()),
                "outcomes": pa.array(outcomes, pa.string()),
            }
        )

    def _holds(self, line: Line) -> bool:
        case_id = line_id(line)
        return case_id not in self.done and (self.shard is None or self.shard.holds(case_id))

    def _write(self, file: int, first: int, text: str, verdicts: list[str]) -> None:
        """A piece's verdicts as one file of the output directory, whole or not at all."""
        import pyarrow as pa
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        assert self.output is not None
        output = self.output
        parquet = self.file_format == "parquet"
        # Named by the piece: a task run again writes the same file again, never a second one.
        name = f"{self.run}-{file:06d}-{first:010d}.{'parquet' if parquet else 'jsonl'}"
        local = isinstance(output.fs, pafs.LocalFileSystem)
        final = f"{output.path}/{name}"
        path = f"{output.path}/{PARTIAL}{name}" if local else final
        if parquet:
            table = pa.Table.from_pylist([json.loads(verdict) for verdict in verdicts], schema=verdict_schema())
            pq.write_table(table, path, filesystem=output.fs)
        else:
            with output.fs.open_output_stream(path) as stream:
                stream.write(text.encode())
        if local:
            output.fs.move(path, final)  # whole or not at all: a rename


_LOADED: set[str | None] = set()  # the engines this worker process has loaded for judging


def _ready(engine: str | None) -> None:
    """Load what judging needs once per worker process (Ray keeps a worker for the tasks that
    follow), and take it out of the collector's sight, as the local workers do (batch's
    ``_local_workers``): judging makes thousands of short-lived objects, and each collection would
    walk the loaded heap again. Never given back: the worker keeps what it loaded."""
    if engine in _LOADED:
        return
    batch.load_judging(engine)
    gc.freeze()
    _LOADED.add(engine)


def _judged(plan: _Plan, job: Job, stdin: list[pa.Table] | None) -> Iterator[Judged]:
    """The verdicts on a job's pieces as they come: in the order of the input for an output file
    (or standard output), in no order for a directory (only counted: the tasks wrote them)."""
    from ray.data import DataContext

    # A file or standard output gets the verdicts in the order of the input, as from a local run;
    # a directory's files need no order, and no task waits for an earlier one.
    DataContext.get_current().execution_options.preserve_order = plan.output is None
    if plan.output is not None:
        plan.output.fs.create_dir(plan.output.path, recursive=True)
    judge = _Judge(job.engine, plan.done, job.shard, job.strict, job.file_format, plan.output, uuid.uuid4().hex[:12])
    verdicts = _pieces(plan.inputs, stdin).map_batches(judge, batch_size=1, batch_format="pyarrow", num_cpus=1)
    for table in verdicts.iter_batches(batch_size=None, batch_format="pyarrow"):
        for text, cases, outcomes in zip(
            table.column("text").to_pylist(), table.column("cases").to_pylist(), table.column("outcomes").to_pylist()
        ):
            yield Judged(text, cases, tuple(json.loads(outcomes).items()))


# Ray Client ------------------------------------------------------------------------------------


class _Driver:
    """The driver of a job run through Ray Client: an actor in the cluster (Ray Data runs only in
    a Ray driver or worker), which hands the verdicts back a batch of pieces at a time."""

    def __init__(self, job: Job, stdin: list[Any] | None) -> None:
        import ray

        _configure_data(progress_bars=False)
        self.refused = ""
        self.skipped = 0
        self.chunks: Iterator[Judged] = iter(())
        try:
            plan = _plan(job)
        except _Refused as error:
            self.refused = str(error)
            return
        self.skipped = len(plan.done)
        # Standard input came as objects the client put in the cluster.
        tables = None if stdin is None else [ray.get(piece) for piece in stdin]
        self.chunks = _judged(plan, job, tables)

    def opened(self) -> tuple[str, int]:
        """Why the job cannot run ("" when it can), and how many cases its output holds already."""
        return self.refused, self.skipped

    def take(self, most: int) -> list[Judged]:
        """The next ``most`` pieces' verdicts, in order (fewer at the end; none when done)."""
        taken = []
        for chunk in self.chunks:
            taken.append(chunk)
            if len(taken) == most:
                break
        return taken


def _through_client(ray: Any, job: Job, stdin: list[pa.Table] | None) -> tuple[int, Iterator[Judged]]:
    """Run the job on the driver actor of the cluster joined through Ray Client: the cases it
    finds already judged, and the verdicts it hands back; _Refused when it cannot run the job."""
    # No CPU of Ray's: the judging tasks take them all. Not restarted: a driver lost loses the
    # run (what is written is kept, and --resume goes on from it).
    driver = ray.remote(num_cpus=0, max_restarts=0)(_Driver).remote(
        job, None if stdin is None else [ray.put(piece) for piece in stdin]
    )
    refused, skipped = ray.get(driver.opened.remote())
    if refused:
        ray.kill(driver)
        raise _Refused(refused)
    return skipped, _taken(ray, driver)


def _taken(ray: Any, driver: Any) -> Iterator[Judged]:
    try:
        # One request always ahead: the driver goes on while the verdicts before are written here.
        ahead = driver.take.remote(CLIENT_TAKE)
        while True:
            chunks = ray.get(ahead)
            if not chunks:
                return
            ahead = driver.take.remote(CLIENT_TAKE)
            yield from chunks
    finally:
        ray.kill(driver)


# Directory outputs -----------------------------------------------------------------------------


def _is_directory_output(name: str, client: bool = False) -> bool:
    """Whether ``-o`` names a directory: ending in ``/``, a URI, or (not through Ray Client, where
    the directory is the cluster's) an existing directory here."""
    return name != "-" and (name.endswith("/") or "://" in name or (not client and os.path.isdir(name)))


def _resume_directory(output: Place) -> set[str]:
    """The ids already written to the directory's files (a file left partial removed, its cases
    judged again)."""
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
