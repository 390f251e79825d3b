"""``remigio-referee fairplay --ray ADDRESS``: the fair-play statistics on a Ray cluster.

The three steps of ``referee.play.fairplay`` as a Ray Data pipeline: the input files (paths,
globs, directories, URIs, as ``batch --ray`` reads them) are split into small blocks of numbered
lines; each line is reviewed and counted in tasks spread over the cluster's CPUs
(``fairplay.observe_line``, the local run's function), giving flat rows of integer counts; Ray's
group-by sums the rows by player and pair across the cluster (exact integer sums, so any split
and any order give the same totals); only the sums, one row per player and per pair, come back
to this process, which judges the batch (``fairplay.judge``) and writes the results as the local
run does. The results are therefore the local run's bytes whatever the cluster does.

A line that cannot be read or is not a legal deal travels through the group-by as a row of its
own (its message the key), so it is named on stderr as locally, in the order of the input.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Iterator
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TextIO

from referee.cli import fairplay
from referee.cli.batch import EXIT_UNREACHABLE
from referee.cli.cluster import first_line, input_files, join_cluster, place_of, results_only_on_stdout
from referee.cli.common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import pyarrow as pa

    from referee.cli.cluster import Place
    from referee.play.fairplay import Observation

# A review costs about a tenth of a second: a few lines a block spread even a small file over
# every CPU, and a task of a block still outweighs its overhead (about a millisecond).
LINES_PER_BLOCK = 4

# What a row of the reviewed dataset is (the ``kind`` column).
COUNTED = 0  # a player's or a pair's counts from one deal
REVIEWED = 1  # a line reviewed (counted in ``lines``)
LEFT_OUT = 2  # a line left out; ``note`` says why, naming the file and the line

KEYS = ("kind", "player", "taker", "note")


def run_fairplay(args: argparse.Namespace) -> int:
    """``remigio-referee fairplay``: on the Ray cluster of ``--ray``, else as ``fairplay.run`` reviews."""
    if not args.ray:
        return fairplay.run(args)
    if args.jobs != 1:
        return _usage("--ray and --jobs are two ways to review: give one")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Review the files on the Ray cluster of ``args.ray``; the local run's output and exit status."""
    try:
        import pyarrow  # noqa: F401
        import ray
    except ImportError:
        return _usage("--ray needs Ray: pip install 'remigio-referee[ray]'")
    if args.files.count("-") > 1:
        return _usage("stdin (-) can be read once")
    sources = None  # through Ray Client the files are the cluster's: listed there
    if not args.ray.startswith("ray://"):  # this machine's: named wrong, said before joining
        try:
            sources = [_source(name) for name in args.files]
        except (ValueError, OSError) as error:
            return _usage(str(error))
    # Standard input is this process's: read here, handed to the cluster in blocks.
    stdin = list(_split_text(_stdin(), args.files.index("-"), "-")) if "-" in args.files else None
    started = time.monotonic()
    with results_only_on_stdout() as stdout:
        try:
            return _run(ray, args, sources, stdin, started, stdout)
        finally:
            ray.shutdown()  # before standard output is given back: Ray's threads print until then


def _run(
    ray: Any,
    args: argparse.Namespace,
    sources: list[Source] | None,
    stdin: list[pa.Table] | None,
    started: float,
    stdout: TextIO,
) -> int:
    from referee.cli.fairplay import EXIT_SKIPPED, format_json, format_text

    try:
        join_cluster(ray, args.ray)
    except (ConnectionError, ValueError, RuntimeError) as error:
        print(f"remigio-referee fairplay: cannot join the Ray cluster at {args.ray}: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    cpus = int(ray.cluster_resources().get("CPU", 0))
    print(f"ray: {cpus} CPUs, joined in {time.monotonic() - started:.2f} s", file=sys.stderr)
    try:
        if sources is None:
            # Ray Data runs only in a Ray driver or worker, and a Ray Client is neither: the sums
            # are made by a task in the cluster (taking no CPU of the reviews'), where the files
            # are read, and only they come back.
            task = ray.remote(num_cpus=0, max_retries=0)(sums_of)
            refused, table = ray.get(task.remote(args.files, stdin, cpus))
        else:
            refused, table = "", _summed(_reviewed(_lines(sources, stdin)), partitions=max(1, cpus))
    except Exception as error:  # noqa: BLE001 - the cluster failed the run: said in one line
        print(f"remigio-referee fairplay: the Ray run failed: {first_line(error)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if refused or table is None:
        return _usage(refused)
    totals, lines, left_out = _read_sums(table)
    for note in left_out:
        print(f"remigio-referee fairplay: {note}", file=sys.stderr)
    from referee.play.fairplay import judge

    results = judge(totals)
    stdout.write(format_json(results) if args.json else format_text(results))
    stdout.flush()
    seconds = time.monotonic() - started
    print(
        f"fairplay: {lines} records reviewed, {len(left_out)} left out, {seconds:.1f} s, "
        f"{lines / max(seconds, 1e-9):.2f} records/s",
        file=sys.stderr,
    )
    return EXIT_SKIPPED if left_out else EXIT_OK


def sums_of(files: list[str], stdin: list[pa.Table] | None, cpus: int) -> tuple[str, pa.Table | None]:
    """The rows of the files reviewed and summed by key, run by a task in the cluster for a Ray
    Client (the files listed where the cluster reads them): ("", the sums), or (why the files
    cannot be read, None)."""
    try:
        sources = [_source(name) for name in files]
    except (ValueError, OSError) as error:
        return str(error), None
    return "", _summed(_reviewed(_lines(sources, stdin)), partitions=max(1, cpus))


def _stdin() -> io.TextIOWrapper:
    return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")


def _usage(message: str) -> int:
    print(f"remigio-referee fairplay: {message}", file=sys.stderr)
    return EXIT_USAGE


# Inputs ----------------------------------------------------------------------------------------


Source = tuple[str, "tuple[Place, ...] | None"]  # a name as given, and its files (None: stdin)


def _source(name: str) -> Source:
    """An input as the name the user gave and its files (None: standard input)."""

    return name, None if name == "-" else input_files(name)


def _lines(sources: list[Source], stdin: list[pa.Table] | None) -> Any:
    """A dataset of lines (``order``, ``where``, ``text``): every non-blank line of every input, in
    blocks of ``LINES_PER_BLOCK``; ``where`` names the file as the local run does, ``order`` sorts
    the left-out lines as the input has them."""
    import ray.data

    datasets: list[Any] = []
    for index, (name, places) in enumerate(sources):
        if places is None:
            datasets.append(ray.data.from_arrow(stdin or [_numbered([], index, "-")]))
            continue
        # A file named as itself is named so in messages; a directory's or a glob's by its path.
        shown = {places[0].path: name} if len(places) == 1 and places[0].path == place_of(name).path else {}
        by_fs: dict[int, list[Place]] = {}
        for place in places:
            by_fs.setdefault(id(place.fs), []).append(place)
        for group in by_fs.values():
            files = ray.data.read_binary_files(
                [place.path for place in group], filesystem=group[0].fs, include_paths=True
            )
            split = _Split(index, {path: shown.get(path, path) for path in (p.path for p in group)})
            # Less than a CPU, so Ray keeps it apart from reviewing: the blocks spread over tasks.
            datasets.append(files.map_batches(split, batch_size=1, batch_format="pyarrow", num_cpus=0.25))
    return datasets[0].union(*datasets[1:]) if len(datasets) > 1 else datasets[0]


class _Split:
    """A file's bytes as blocks of numbered lines, read as the local run reads a file."""

    def __init__(self, source: int, shown: dict[str, str]) -> None:
        self.source = source
        self.shown = shown

    def __call__(self, files: pa.Table) -> Iterator[pa.Table]:
        for path, data in zip(files.column("path").to_pylist(), files.column("bytes").to_pylist()):
            text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
            yield from _split_text(text, self.source, self.shown.get(path, path))


def _split_text(text: io.TextIOBase, source: int, where: str) -> Iterator[pa.Table]:
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text, start=1):
        if not line.strip():
            continue
        block.append((number, line))
        if len(block) == LINES_PER_BLOCK:
            yield _numbered(block, source, where)
            block = []
    if block:
        yield _numbered(block, source, where)


def _numbered(block: list[tuple[int, str]], source: int, where: str) -> pa.Table:
    import pyarrow as pa

    return pa.table(
        {
            "order": pa.array([source * (1 << 40) + number for number, _ in block], pa.int64()),
            "where": pa.array([where] * len(block), pa.string()),
            "number": pa.array([number for number, _ in block], pa.int64()),
            "text": pa.array([line for _, line in block], pa.string()),
        }
    )


# Reviewing and summing -------------------------------------------------------------------------


def _counts() -> tuple[str, ...]:
    from referee.play.fairplay import Observation

    return tuple(f.name for f in fields(Observation) if f.name not in ("player", "taker"))


def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("kind", pa.int8()),
            pa.field("player", pa.string()),
            pa.field("taker", pa.string()),
            pa.field("note", pa.string()),
            pa.field("lines", pa.int64()),
            pa.field("order", pa.int64()),
            *(pa.field(name, pa.int64()) for name in _counts()),
        ]
    )


def _review(batch: pa.Table) -> pa.Table:
    """The rows of a block of lines: each line's counted rows and a row saying it was reviewed,
    or a row naming why it was left out."""
    import pyarrow as pa

    from referee.cli.fairplay import observe_line

    counts = _counts()
    rows: list[dict[str, object]] = []
    for order, where, number, text in zip(
        batch.column("order").to_pylist(),
        batch.column("where").to_pylist(),
        batch.column("number").to_pylist(),
        batch.column("text").to_pylist(),
    ):
        outcome = observe_line((where, number, text))
        if isinstance(outcome, str):
            rows.append(_row(LEFT_OUT, "", "", outcome, order, counts))
            continue
        rows.append(_row(REVIEWED, "", "", "", 0, counts))
        for observation in outcome:
            row = _row(COUNTED, observation.player, observation.taker, "", 0, counts)
            row.update((name, getattr(observation, name)) for name in counts)
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=_schema())


def _row(kind: int, player: str, taker: str, note: str, order: int, counts: tuple[str, ...]) -> dict[str, object]:
    return {
        "kind": kind,
        "player": player,
        "taker": taker,
        "note": note,
        "lines": int(kind != COUNTED),
        "order": order,
        **dict.fromkeys(counts, 0),
    }


def _reviewed(lines: Any) -> Any:
    return lines.map_batches(_review, batch_size=LINES_PER_BLOCK, batch_format="pyarrow", num_cpus=1)


def _summed(reviewed: Any, partitions: int) -> pa.Table:
    """The rows summed by their key with Ray's group-by, in ``partitions`` parts (Ray's default,
    200, is hundreds of tasks for the rows of a small batch); only the sums come back."""
    import pyarrow as pa
    from ray.data import DataContext
    from ray.data.aggregate import Max, Sum
    from ray.data.context import ShuffleStrategy

    # Tasks, not the hash shuffle's aggregating actors: a task lost with its node is run again
    # from its inputs, and a small batch's sums take 2 s here instead of 5.
    DataContext.get_current().shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    summed = reviewed.groupby(list(KEYS), num_partitions=partitions).aggregate(
        Sum("lines", alias_name="lines"),
        Max("order", alias_name="order"),
        *(Sum(name, alias_name=name) for name in _counts()),
    )
    tables = [table for table in summed.iter_batches(batch_format="pyarrow", batch_size=None) if table.num_rows]
    return pa.concat_tables(tables) if tables else _schema().empty_table()


def _read_sums(table: pa.Table) -> tuple[dict[tuple[str, str], Observation], int, list[str]]:
    """The totals by player and pair, the lines reviewed, and the notes of the lines left out
    (in the order of the input)."""
    from referee.play.fairplay import Observation

    counts = _counts()
    totals: dict[tuple[str, str], Observation] = {}
    reviewed = 0
    left_out: list[tuple[int, str]] = []
    for row in table.to_pylist():
        if row["kind"] == REVIEWED:
            reviewed += row["lines"]
        elif row["kind"] == LEFT_OUT:
            left_out += [(row["order"], row["note"])] * row["lines"]  # a file given twice: twice
        else:
            observation = Observation(row["player"], row["taker"], **{name: int(row[name]) for name in counts})
            totals[observation.key] = observation
    return totals, reviewed, [note for _, note in sorted(left_out)]


__all__ = ["run", "run_fairplay"]
