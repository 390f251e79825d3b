"""Benchmark of ``remigio-referee batch``: cases/s on end-of-deal disputes, locally and through a server.

Run from the repository root::

    python -m bench.batch                      # default run (about four minutes on 2 cores)
    python -m bench.batch --quick              # a short run: --count 2000 --cpsat-count 1000 --records 2000
    python -m bench.batch --only-records --baseline ../other-checkout   # deal records, two builds
    python -m bench.batch --engines search --records 0 --baseline ../other-checkout   # two builds' servers

It writes ``--count`` (default 20,000) dispute cases to a temporary JSON-lines file, each a whole
end-of-deal state of 4 players (``bench.service.make_deals``: the closer's 10 shown cards are real
linked groups, sometimes with a joker, so every close is valid; the others hold 10 cards each; the
discard pile and the stock account for the rest of the deck), with claims on the multiplier and
on every player's points and score change. The claimed values are guesses, so most verdicts are
WRONG; judging a claim costs the same whatever its verdict. The seed is fixed: two runs time the
same cases.

Then it times the command as a subprocess, from its start to its exit (so interpreter start-up
and imports count, as for a user), on

- the local pool, ``--jobs 2``, with the default engine (CP-SAT) and with ``--engine search``;
- a server started as ``python -m referee.server --workers 2`` (each worker judges its
  CheckDisputes calls in one process: cores / workers), with ``--target`` and ``--server-jobs``
  concurrent streams (default 4: each stream is its own connection, and the kernel spreads
  connections over the SO_REUSEPORT workers by a hash, so 2 streams land on one worker half
  the time), for both engines.

CP-SAT runs take the first ``--cpsat-count`` cases (default 10,000) to keep the default run
under five minutes; the report says so.

**Two builds' servers.** With ``--baseline DIR``, this build's server and DIR's are started side
by side (``--workers 2`` each) and the same batch command (this build's, ``--server-jobs``
streams) sends each the same cases, ``--rounds`` times, the builds in turn (each round the other
first): both medians of cases/s and of the server's CPU per case (all its processes: workers,
dispute jobs, parent), and their ratios. Only the server differs between the two.

**Deal records.** ``--records`` (default 10,000; 0 for none) simulated deal records
(``referee.play.simulate``, 4 bots, seeded shuffles and explicit decks in turn, the search engine),
each a ``record`` case with claims on the multiplier and every player's points and score change,
are judged locally with ``--jobs 2 --engine search``: the whole pipeline (JSON in, the replay,
the scoring and its linkings, JSON out). ``--rounds`` (default 3) timings; with ``--baseline DIR``
(a checkout of another commit, such as a worktree at the starting commit of a change) each round
also times that checkout's command on the same file, the builds taking turns going first, and
the report gives both medians (records/s, and CPU per record, which holds up better on a busy
machine) and their ratios. ``--only-records`` runs just that. Beside them, the cores' limit: the
cores over the fresh replay-and-score time of a record (``fresh_replay_and_score``: its replay
and the scoring of its end state, the caches of linkings and close verdicts emptied before each,
the median of the first 1,000 records, timed in the benchmark's process), the records/s the
cores would allow were reading and writing the JSON, handing records between processes and
start-up free; each build's median is given as a share of it.

Every run's verdicts must be the same lines, byte for byte (the same case gives the same verdict
whatever the engine, the jobs, the server or the build) and no case may be MALFORMED: otherwise
the exit status is 1. A missed target is reported, not a failure.

The CPU time of the batch command (with its pool workers) and of the server processes is printed
next to each figure, in cores: on a 2-core machine the batch client competes with the server for
the same cores (it parses and prints JSON for every case).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/batch.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from google.protobuf import json_format  # noqa: E402

from bench.machine import load_average  # noqa: E402
from bench.service import Server, make_deals  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
SEED = 20240601
DEFAULT_COUNT = 20_000
DEFAULT_CPSAT_COUNT = 10_000
QUICK_COUNT, QUICK_CPSAT_COUNT = 2_000, 1_000
JOBS = 2
SERVER_WORKERS = 2
DEFAULT_SERVER_JOBS = 4
RUN_TIMEOUT = 900.0

# The targets: 300 cases/s with the default engine (on a 2-core machine, locally and
# through a 2-worker server); 2,000 cases/s with --engine search --jobs 2, locally; 1,000 deal
# records/s with --engine search --jobs 2, locally.
TARGETS = {
    ("local", "cpsat"): 300.0,
    ("server", "cpsat"): 300.0,
    ("local", "search"): 2000.0,
    ("records", "search"): 1000.0,
}
RECORDS_SEED = 20261201
DEFAULT_RECORDS = 10_000
QUICK_RECORDS = 2_000
PLAYERS_PER_RECORD = 4
DEFAULT_ROUNDS = 3


def write_cases(path: Path, count: int, seed: int = SEED) -> None:
    """``count`` end-of-deal dispute cases, one JSON object per line."""
    import random

    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for n, deal in enumerate(make_deals(seed, count)):
            closer = deal.closer
            multiplier = rng.choice((1, 2, 2, 3))
            claims = pb.DealClaims(multiplier=multiplier)
            owed = 0
            for i in range(len(deal.players)):
                if i == closer:
                    continue
                points = rng.randint(0, 60)
                owed += points * multiplier
                claims.players.add(player=i, points=points, score_change=-points * multiplier)
            claims.players.add(player=closer, points=0, score_change=owed + 40)
            case = pb.CheckDisputesRequest(id=f"deal-{n:06d}", deal=pb.ScoreDealRequest(deal=deal, claims=claims))
            out.write(json.dumps(json_format.MessageToDict(case), separators=(",", ":")) + "\n")


def record_case(n: int, seed: int = RECORDS_SEED) -> str:
    """Case ``n`` of the deal records: a simulated record of 4 bots, with guessed claims."""
    import random

    from referee.api import jsonmsg
    from referee.api.records import request_of
    from referee.game.rules import Engine, RuleSet
    from referee.play.simulate import simulate

    rng = random.Random(seed * 1_000_003 + n)
    record = simulate(seed + n, PLAYERS_PER_RECORD, RuleSet(engine=Engine.SEARCH), seeded=n % 2 == 0)
    claims = pb.DealClaims(multiplier=rng.choice((1, 2, 2, 3)))
    for seat in range(PLAYERS_PER_RECORD):
        points = rng.randint(0, 60)
        claims.players.add(player=seat, points=points, score_change=-points)
    request = request_of(record, claims)
    request.rules.ClearField("engine")  # the command's --engine search decides
    # Without the empty ``notation`` (which the JSON writer prints as a default): a build from before
    # that field (such as a --baseline of 697676c) then reads the same cases; every build's verdicts
    # are the same without it.
    line = jsonmsg.to_json(pb.CheckDisputesRequest(id=f"record-{n:06d}", record=request))
    return line.replace(',"notation":""', "", 1)


def write_record_cases(path: Path, count: int) -> None:
    """``count`` deal record cases, one JSON object per line, simulated by ``JOBS`` processes."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(JOBS) as pool, path.open("w", encoding="utf-8") as out:
        for line in pool.map(record_case, range(count), chunksize=200):
            out.write(line + "\n")


def head(source: Path, target: Path, count: int) -> None:
    """The first ``count`` lines of ``source`` into ``target``."""
    with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
        for n, line in enumerate(lines):
            if n == count:
                break
            out.write(line)


# Processes -------------------------------------------------------------------------------------


@dataclass
class Run:
    """One timed run of the batch command."""

    where: str  # local or server
    engine: str
    jobs: int
    cases: int
    seconds: float
    client_cpu: float
    server_cpu: list[float]
    status: int
    output: Path
    summary: str

    @property
    def rate(self) -> float:
        """Cases per second."""
        return self.cases / self.seconds

    @property
    def target(self) -> float | None:
        """The target rate of this run, if any."""
        return TARGETS.get((self.where, self.engine))


def time_batch(
    where: str,
    engine: str,
    cases: Path,
    count: int,
    out: Path,
    jobs: int,
    server: Server | None = None,
    repo: Path = REPO,
) -> Run:
    """Run ``remigio-referee batch`` of the checkout ``repo`` once, timed from its start to its exit."""
    command = [sys.executable, "-m", "referee.cli", "batch", str(cases), "-o", str(out), "--jobs", str(jobs)]
    if engine != "cpsat":
        command += ["--engine", engine]
    if server is not None:
        command += ["--target", server.target]
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_server = server.cpu_by_worker() if server else []
    start = time.perf_counter()
    result = subprocess.run(
        command, cwd=repo, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    seconds = time.perf_counter() - start
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (after_children.ru_utime - before_children.ru_utime) + (
        after_children.ru_stime - before_children.ru_stime
    )
    server_cpu = [a - b for a, b in zip(server.cpu_by_worker(), before_server)] if server else []
    return Run(where, engine, jobs, count, seconds, client_cpu, server_cpu, result.returncode, out, result.stderr)


# Report ----------------------------------------------------------------------------------------


def format_run(run: Run) -> str:
    """One row of the report."""
    where = (
        f"local --jobs {run.jobs}" if run.where == "local" else f"server --workers {SERVER_WORKERS}, --jobs {run.jobs}"
    )
    target = "-"
    if run.target is not None:
        target = f"{run.target:,.0f} {'met' if run.rate >= run.target else 'MISSED'}"
    server = " + ".join(f"{cpu / run.seconds:.2f}" for cpu in run.server_cpu) if run.server_cpu else "-"
    return (
        f"{where:<30} {run.engine:<7} {run.cases:>7,} {run.seconds:>8.1f} {run.rate:>9,.0f}  {target:<13}"
        f" {run.client_cpu / run.seconds:>6.2f}  {server}"
    )


HEADER = f"{'run':<30} {'engine':<7} {'cases':>7} {'time (s)':>8} {'cases/s':>9}  {'target':<13} {'client':>6}  server (cores per worker)"


def check(runs: Sequence[Run], reference: list[str]) -> list[str]:
    """Problems: a non-zero exit, a MALFORMED case, or verdicts that differ between runs."""
    problems = []
    for run in runs:
        name = f"{run.where} {run.engine}"
        if run.status != 0:
            problems.append(f"{name}: exit status {run.status}\n{run.summary[-1500:]}")
            continue
        lines = run.output.read_text(encoding="utf-8").splitlines()
        if len(lines) != run.cases:
            problems.append(f"{name}: {len(lines)} verdicts for {run.cases} cases")
        elif lines != reference[: run.cases]:
            first = next(n for n, (a, b) in enumerate(zip(lines, reference)) if a != b)
            problems.append(f"{name}: verdict {first} differs from the local search run's")
        if any('"DISPUTE_OUTCOME_MALFORMED"' in line for line in lines):
            problems.append(f"{name}: MALFORMED verdicts")
    return problems


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.batch", description="Benchmark remigio-referee batch.")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"cases (default {DEFAULT_COUNT:,})")
    parser.add_argument(
        "--cpsat-count",
        type=int,
        default=DEFAULT_CPSAT_COUNT,
        help=f"cases for the CP-SAT runs, the first of the file (default {DEFAULT_CPSAT_COUNT:,}; at most --count)",
    )
    parser.add_argument("--server-jobs", type=int, default=DEFAULT_SERVER_JOBS, help="concurrent streams to the server")
    parser.add_argument("--engines", default="cpsat,search", help="comma-separated engines (default cpsat,search)")
    parser.add_argument("--no-server", action="store_true", help="local runs only")
    parser.add_argument(
        "--records",
        type=int,
        help=f"simulated deal records (default {DEFAULT_RECORDS:,}, --quick {QUICK_RECORDS:,}; 0: none)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help="timings of the records run and the builds' server runs (median)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another checkout whose server and records runs are timed in turn with this one's",
    )
    parser.add_argument("--only-records", action="store_true", help="the records run only")
    parser.add_argument("--quick", action="store_true", help="a short run: 2,000 cases, 1,000 of them for CP-SAT")
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.cpsat_count = QUICK_COUNT, QUICK_CPSAT_COUNT
    if args.records is None:
        args.records = QUICK_RECORDS if args.quick else DEFAULT_RECORDS
    if args.only_records and not args.records:
        parser.error("--only-records needs --records above 0")
    if args.baseline is not None and not any(
        (args.baseline / "referee" / where).is_file() for where in ("cli/batch.py", "batch.py")
    ):
        parser.error(f"--baseline {args.baseline}: not a checkout of this project")
    args.cpsat_count = min(args.cpsat_count, args.count)
    args.engine_list = [e for e in args.engines.split(",") if e]
    return args


def commit_of(repo: Path) -> str:
    """The short commit of a checkout, with a + when its files differ from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return commit + ("+" if changed else "")


CORES_SAMPLE = 1000  # records timed for the cores' limit


def fresh_replay_and_score(cases: Path, count: int = CORES_SAMPLE) -> float:
    """The median seconds of the work a record needs, fresh: its replay and the scoring of its
    end state with the search engine, the caches of linkings and close verdicts emptied before
    each (the search engine keeps its caches of parts of hands, as a worker does); in this
    process, on the first ``count`` records of ``cases``."""
    import gc

    from referee.api import convert, records
    from referee.api.record_lines import read_record_case
    from referee.game.closing import forget_verdicts
    from referee.game.linking import forget_linkings
    from referee.game.rules import Engine
    from referee.game.scoring import score_deal
    from referee.play.replay import replay

    timings = []
    with cases.open(encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            if n == count:
                break
            read = read_record_case(line)
            assert read is not None, f"record {n} is not a plain record case"
            case, turns = read
            rules = convert.rules_from_proto(case.record.rules).with_options(engine=Engine.SEARCH)
            record = records.record_from_proto(case.record.record, rules, turns=turns)
            forget_linkings()
            forget_verdicts()
            gc.disable()
            start = time.perf_counter()
            played = replay(record)
            if played.deal is not None:
                score_deal(played.deal, rules)
            timings.append(time.perf_counter() - start)
            gc.enable()
    return statistics.median(timings)


def compiled_active(repo: Path) -> bool:
    """Whether the checkout ``repo`` judges records with its compiled modules (a build for its
    exact sources; none before the compiled modules existed)."""
    probe = (
        "import referee.api.record_lines\n"
        "try:\n    from referee.game import compiled\nexcept ImportError:\n    print(False)\n"
        "else:\n    print(bool(compiled.active()) and all(compiled.active().values()))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "True"


def time_records(
    args: argparse.Namespace, folder: Path, progress: Callable[[str], None]
) -> tuple[list[str], list[str]]:
    """The records runs: the report's lines and the problems found."""
    cases = folder / "records.jsonl"
    progress(f"simulating {args.records:,} deal records")
    write_record_cases(cases, args.records)
    fresh = fresh_replay_and_score(cases, min(CORES_SAMPLE, args.records))
    cores = os.cpu_count() or 1
    builds = [("this", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    runs: dict[str, list[Run]] = {name: [] for name, _ in builds}
    for round_ in range(1, args.rounds + 1):
        # Each round the other build goes first, so a load that rises or falls during the run
        # favours neither.
        for name, repo in builds if round_ % 2 else builds[::-1]:
            progress(f"records, local --jobs {JOBS}, search, {name} ({repo.name}), round {round_}")
            out = folder / f"records-{name}-{round_}.jsonl"
            runs[name].append(time_batch("records", "search", cases, args.records, out, JOBS, repo=repo))
    reference = runs["this"][0].output.read_text(encoding="utf-8").splitlines()
    problems = []
    for name, timed in runs.items():
        for problem in check(timed, reference):
            problems.append(f"records ({name}): {problem}")
    outcomes = Counter(_OUTCOME.findall("\n".join(reference)))
    lines = [
        f"deal records: {args.records:,} simulated records of {PLAYERS_PER_RECORD} players (seed {RECORDS_SEED}; "
        f"seeded shuffles and explicit decks in turn), local --jobs {JOBS} --engine search, "
        f"{args.rounds} rounds, the builds in turn (each round the other first)",
        "verdicts: " + ", ".join(f"{count:,} {name}" for name, count in sorted(outcomes.items())),
        f"the cores' limit: {cores} cores / {fresh * 1e3:.3f} ms, the fresh replay-and-score time per record "
        f"(median of {min(CORES_SAMPLE, args.records):,}, in this process) = {cores / fresh:,.0f} records/s",
        "",
        f"{'build':<10} {'commit':<10} {'records/s per round':<28} {'median':>8}  {'target':<13} {'client':>6}"
        f"  {'CPU ms/record':>13}",
    ]
    medians, cpu = {}, {}
    for name, repo in builds:
        timed = runs[name]
        medians[name] = statistics.median(run.rate for run in timed)
        cores = statistics.median(run.client_cpu / run.seconds for run in timed)
        # The CPU the command spends (its pool's included, start-up too) holds up better than the
        # rate on a machine busy with other work.
        cpu[name] = statistics.median(run.client_cpu / run.cases * 1e3 for run in timed)
        rates = ", ".join(f"{run.rate:,.0f}" for run in timed)
        target = TARGETS[("records", "search")]
        verdict = f"{target:,.0f} {'met' if medians[name] >= target else 'MISSED'}"
        lines.append(
            f"{name:<10} {commit_of(repo):<10} {rates:<28} {medians[name]:>8,.0f}  {verdict:<13} {cores:>6.2f}"
            f"  {cpu[name]:>13.2f}"
        )
    if args.baseline:
        lines.append(
            f"this build / baseline: {medians['this'] / medians['baseline']:.2f}x the records/s, "
            f"{cpu['this'] / cpu['baseline']:.2f}x the CPU per record (medians)"
        )
        # The two runs of a round are seconds apart: their ratio leaves out most of a machine's
        # drift from round to round, which the ratio of the medians keeps.
        paired = [a.rate / b.rate for a, b in zip(runs["this"], runs["baseline"])]
        lines.append(
            f"paired by round: {statistics.median(paired):.2f}x the records/s (median of "
            + ", ".join(f"{ratio:.2f}" for ratio in paired)
            + ")"
        )
    lines.append(
        "compiled modules: "
        + ", ".join(f"{name} {'yes' if compiled_active(repo) else 'NO (Python)'}" for name, repo in builds)
    )
    lines.append(
        "of the cores' limit: " + ", ".join(f"{name} {medians[name] * fresh / cores:.0%}" for name, _ in builds)
    )
    return lines, problems


def time_server_builds(
    args: argparse.Namespace, files: dict[str, tuple[Path, int]], folder: Path, progress: Callable[[str], None]
) -> tuple[list[str], list[str], list[str]]:
    """This build's server and the baseline's, each started once, the same batch command sending
    them the same cases in turn (each round the other first): the report's lines, the problems
    found, and the reference verdicts of the first run."""
    builds = [("this", REPO), ("baseline", args.baseline.resolve())]
    lines = [
        f"servers of two builds, --workers {SERVER_WORKERS}, the same batch command (--jobs {args.server_jobs} "
        f"streams), {args.rounds} rounds, the builds in turn (each round the other first); server CPU = all its "
        "processes (workers, dispute jobs, parent)",
        "",
        f"{'engine':<7} {'build':<10} {'commit':<10} {'cases/s per round':<28} {'median':>8}  {'server CPU ms/case':>18}",
    ]
    problems: list[str] = []
    reference: list[str] = []
    servers = {name: Server(SERVER_WORKERS, root=repo) for name, repo in builds}
    try:
        for server in servers.values():
            server.wait_ready()
        for engine in sorted(args.engine_list, key=lambda e: e != "search"):
            path, count = files[engine]
            runs: dict[str, list[Run]] = {name: [] for name, _ in builds}
            cpu: dict[str, list[float]] = {name: [] for name, _ in builds}
            for round_ in range(1, args.rounds + 1):
                for name, repo in builds if round_ % 2 else builds[::-1]:
                    progress(f"server of {name} ({repo.name}), {engine}, {count:,} cases, round {round_}")
                    before = servers[name].tree_cpu()
                    out = folder / f"builds-{engine}-{name}-{round_}.jsonl"
                    runs[name].append(time_batch("server", engine, path, count, out, args.server_jobs, servers[name]))
                    cpu[name].append((servers[name].tree_cpu() - before) / count * 1e3)
            if not reference:
                reference = runs["this"][0].output.read_text(encoding="utf-8").splitlines()
            medians = {}
            for name, repo in builds:
                problems += [f"server of {name}: {problem}" for problem in check(runs[name], reference)]
                medians[name] = (statistics.median(r.rate for r in runs[name]), statistics.median(cpu[name]))
                rates = ", ".join(f"{run.rate:,.0f}" for run in runs[name])
                lines.append(
                    f"{engine:<7} {name:<10} {commit_of(repo):<10} {rates:<28} {medians[name][0]:>8,.0f}"
                    f"  {medians[name][1]:>18.2f}"
                )
            lines.append(
                f"{engine:<7} this build / baseline: {medians['this'][0] / medians['baseline'][0]:.2f}x the cases/s, "
                f"{medians['this'][1] / medians['baseline'][1]:.2f}x the server's CPU per case (medians)"
            )
    finally:
        for name, server in servers.items():
            if server.stop() != 0:
                problems.append(f"the server of {name} did not exit 0 on SIGTERM")
    return lines, problems, reference


_OUTCOME = re.compile(r'"outcome":"DISPUTE_OUTCOME_([A-Z_]+)"')


def main(argv: Sequence[str] | None = None) -> int:
    """Generate the cases, time every run, print the report; 1 when a run failed or disagreed."""
    args = parse_args(argv)
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    load_before = load_average()
    runs: list[Run] = []
    problems: list[str] = []
    record_lines: list[str] = []
    build_lines: list[str] = []
    stopped = 0
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        folder = Path(tmp)
        if not args.only_records:
            cases = folder / "cases.jsonl"
            progress(f"writing {args.count:,} cases")
            write_cases(cases, args.count)
            files = {"search": (cases, args.count), "audit": (cases, args.count)}
            if args.cpsat_count < args.count:
                head(cases, folder / "cpsat.jsonl", args.cpsat_count)
                files["cpsat"] = (folder / "cpsat.jsonl", args.cpsat_count)
            else:
                files["cpsat"] = (cases, args.count)
            engines = sorted(args.engine_list, key=lambda e: e != "search")  # search first: the reference
            for engine in engines:
                path, count = files[engine]
                progress(f"local --jobs {JOBS}, {engine}, {count:,} cases")
                runs.append(time_batch("local", engine, path, count, folder / f"local-{engine}.jsonl", JOBS))
            if not args.no_server:
                server = Server(SERVER_WORKERS)
                server.wait_ready()
                try:
                    for engine in engines:
                        path, count = files[engine]
                        progress(
                            f"server --workers {SERVER_WORKERS} --jobs {args.server_jobs}, {engine}, {count:,} cases"
                        )
                        runs.append(
                            time_batch(
                                "server",
                                engine,
                                path,
                                count,
                                folder / f"server-{engine}.jsonl",
                                args.server_jobs,
                                server,
                            )
                        )
                finally:
                    stopped = server.stop()
                if stopped != 0:
                    print(f"the server exited with status {stopped}", file=sys.stderr)
            reference_run = max(runs, key=lambda run: run.cases)
            reference = reference_run.output.read_text(encoding="utf-8").splitlines()
            problems += check(runs, reference)
            if args.baseline and not args.no_server:
                build_lines, build_problems, build_reference = time_server_builds(args, files, folder, progress)
                problems += build_problems
                if build_reference[: len(reference)] != reference[: len(build_reference)]:
                    problems.append("the builds' server runs gave other verdicts than the local run")
            outcomes = {
                name: sum(f'"DISPUTE_OUTCOME_{name}"' in line for line in reference) for name in ("CONFIRMED", "WRONG")
            }
        if args.records:
            record_lines, record_problems = time_records(args, folder, progress)
            problems += record_problems

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
        f"load average before {load_before}, after {load_average()}"
    )
    print("client = CPU of the batch command and its pool, in cores; server = CPU of each server worker, in cores")
    if not args.only_records:
        print()
        print(
            f"remigio-referee batch: {args.count:,} end-of-deal disputes (4 players; claims on the multiplier, "
            f"points and score changes; seed {SEED})"
        )
        if "cpsat" in args.engine_list and args.cpsat_count < args.count:
            print(
                f"CP-SAT runs: the first {args.cpsat_count:,} of the {args.count:,} cases (--cpsat-count), to keep the run short"
            )
        print(f"verdicts: {outcomes['CONFIRMED']:,} CONFIRMED, {outcomes['WRONG']:,} WRONG of {len(reference):,}")
        print()
        print(HEADER)
        for run in runs:
            print(format_run(run))
    if build_lines:
        print()
        print("\n".join(build_lines))
    if record_lines:
        print()
        print("\n".join(record_lines))
    print()
    print(f"total {time.perf_counter() - started:.0f} s")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems or stopped != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
