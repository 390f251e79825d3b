"""Benchmark of the fair-play statistics: are planted cheaters flagged, and honest players spared?

Run from the repository root::

    python -m bench.fairplay                    # 2 populations of 24 players, 2,000 deals each
    python -m bench.fairplay --quick            # a short run (200 deals, one population)
    python -m bench.fairplay --seeds 1 2 3 4    # more populations, more honest samples

Each population is ``referee.play.simulate.roster`` (a peeker, a colluding pair, a soft player, each
of the default strength, and honest players, plain and careful in turn) seated at random over
four-seat deals by ``referee.play.simulate.population`` from a seed. Every deal is reviewed
(``review_deal``) and counted (``fairplay.observations``) on ``--jobs`` processes; the rows are
cached under ``--out`` (one file per population: a rerun reads them instead of reviewing again).

Then, deal by deal, the rows so far are judged every ``--every`` deals (``fairplay.judge``), and for
each planted behaviour the number of its player's deals at the first judgement that flags it with
its own signal (the peeker: HIDDEN_KNOWLEDGE; the pair: COLLUSION naming feeder and taker; the
soft player: SOFT_PLAY). At the end of each population every honest player is one honest sample:
flagged falsely if any flag names it. Targets: every planted cheater flagged within 300 of its
deals; false flags on at most 1% of honest samples (at least 500 samples over several seeds).

Last, ``remigio-referee fairplay --jobs 2`` is run as a process on ``--speed-deals`` of the records
(as JSON lines) and its records per second printed (wall time; the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import load_average  # noqa: E402
from referee.game.rules import Engine, RuleSet  # noqa: E402
from referee.play.fairplay import COLLUSION, HIDDEN_KNOWLEDGE, SOFT_PLAY, Observation, aggregate, judge, merge  # noqa: E402
from referee.play.record import Record  # noqa: E402
from referee.play.review import review_deal  # noqa: E402
from referee.play.simulate import Player, Style, population, roster  # noqa: E402

TARGET_DEALS = 300
TARGET_FALSE = 0.01
_RECORDS: list[Record] = []  # the population being reviewed (read by the forked workers)


def _rows(index: int) -> tuple[float, list[dict[str, object]]]:
    """A deal's rows, and the CPU seconds its review and counting took (in a worker)."""
    from referee.play.fairplay import observations

    start = time.process_time()
    record = _RECORDS[index]
    rows = observations(record, review_deal(record))
    return time.process_time() - start, [asdict(row) for row in rows]


def reviewed(
    seed: int, players: tuple[Player, ...], deals: int, jobs: int, out: Path
) -> tuple[list[list[Observation]], list[Record], float]:
    """The rows of each deal of a population, its records, and the median CPU seconds a deal. The
    rows are cached a deal a line as they come (the first deals of a population do not depend on
    how many follow), so an interrupted run resumes and a longer one extends a shorter one."""
    rules = RuleSet().with_options(engine=Engine.SEARCH)
    records = list(population(seed, players, deals, rules))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / f"population-{seed}-{len(players)}.jsonl"
    done: list[tuple[float, list[dict[str, object]]]] = []
    if cache.exists():
        for line in cache.read_text(encoding="utf-8").splitlines()[:deals]:
            try:
                data = json.loads(line)
            except ValueError:
                break  # a line cut short by an interrupted run
            done.append((data["cpu"], data["rows"]))
    _RECORDS[:] = records
    started = time.monotonic()
    if len(done) < deals:
        with open(cache, "w", encoding="utf-8") as sink, multiprocessing.get_context("fork").Pool(jobs) as pool:
            sink.write("".join(json.dumps({"cpu": cpu, "rows": rows}) + "\n" for cpu, rows in done))
            first = len(done)
            for i, item in enumerate(pool.imap(_rows, range(first, deals), chunksize=2), first + 1):
                done.append(item)
                sink.write(json.dumps({"cpu": item[0], "rows": item[1]}) + "\n")
                sink.flush()
                if i % 50 == 0 or i == deals:
                    rate = (i - first) / (time.monotonic() - started)
                    print(
                        f"  population {seed}: {i}/{deals} deals reviewed, {rate:.2f} deals/s",
                        file=sys.stderr,
                        flush=True,
                    )
    rows = [[Observation(**row) for row in item] for _, item in done[:deals]]
    return rows, records, statistics.median(cpu for cpu, _ in done[:deals])


def _flagged(results: object, player: Player) -> bool:
    """Whether the judged results flag ``player`` with its planted behaviour's own signal."""
    from referee.play.fairplay import Results

    assert isinstance(results, Results)
    for flag in results.flags:
        if player.style is Style.PEEKER and flag.signal == HIDDEN_KNOWLEDGE and flag.players == (player.name,):
            return True
        if player.style is Style.SOFT and flag.signal == SOFT_PLAY and flag.players == (player.name,):
            return True
        if player.style is Style.FEEDER and flag.signal == COLLUSION and flag.players == (player.name, player.partner):
            return True
    return False


def detect(
    rows: list[list[Observation]], records: list[Record], players: tuple[Player, ...], every: int
) -> tuple[dict[str, int | None], int, int, list[str]]:
    """For each planted player (the pair by its feeder), its deals at the first judgement flagging it
    (None: never); and the honest players, those flagged at the end, and the flags naming them."""
    planted = [p for p in players if p.style in (Style.PEEKER, Style.FEEDER, Style.SOFT)]
    honest = {p.name for p in players if p.style in (Style.PLAIN, Style.CAREFUL)}
    found: dict[str, int | None] = {p.name: None for p in planted}
    totals: dict[tuple[str, str], Observation] = {}
    seen: dict[str, int] = {}
    for i, (deal, record) in enumerate(zip(rows, records), 1):
        for row in deal:
            known = totals.get(row.key)
            totals[row.key] = row if known is None else merge(known, row)
        for seat in record.seats:
            seen[seat.name] = seen.get(seat.name, 0) + 1
        if i % every and i != len(rows):
            continue
        waiting = [p for p in planted if found[p.name] is None]
        if not waiting:
            continue
        results = judge(totals)
        for p in waiting:
            if _flagged(results, p):
                found[p.name] = seen.get(p.name, 0)
    final = judge(aggregate(totals.values()))
    named = sorted({name for flag in final.flags for name in flag.players if name in honest})
    notes = [
        f"{flag.signal} {flag.measure} {'/'.join(flag.players)} z {flag.z:.2f} over {flag.opportunities}"
        for flag in final.flags
        if set(flag.players) & honest
    ]
    return found, len(honest), len(named), notes


def windows(rows: list[list[Observation]], players: tuple[Player, ...], parts: int) -> tuple[int, int, list[str]]:
    """More honest samples from one population: its deals cut into ``parts`` disjoint runs, each
    judged alone (each honest player a sample in each part: fewer deals each, so less is seen)."""
    honest = {p.name for p in players if p.style in (Style.PLAIN, Style.CAREFUL)}
    size = len(rows) // parts
    samples = flagged = 0
    notes = []
    for part in range(parts):
        totals = aggregate(row for deal in rows[part * size : (part + 1) * size] for row in deal)
        results = judge(totals)
        named = {name for flag in results.flags for name in flag.players if name in honest}
        samples += len({key[0] for key in totals if key[0] in honest and not key[1]})
        flagged += len(named)
        notes += [
            f"{flag.signal} {flag.measure} {'/'.join(flag.players)} z {flag.z:.2f} over {flag.opportunities}"
            for flag in results.flags
            if set(flag.players) & honest
        ]
    return samples, flagged, notes


def speed(records: list[Record], jobs: int) -> tuple[int, float]:
    """Records per second of ``remigio-referee fairplay --jobs`` on these records (wall time)."""
    from referee.api import jsonmsg
    from referee.api.records import request_of

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_text("".join(jsonmsg.to_json(request_of(r)) + "\n" for r in records), encoding="utf-8")
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "referee.cli", "fairplay", "--json", "--jobs", str(jobs), str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"fairplay failed ({done.returncode}): {done.stderr[-500:]}")
    return len(records), len(records) / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fairplay", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[20261204, 20261205], help="one population each")
    parser.add_argument("--players", type=int, default=24, help="players in a population (at least 24 for the targets)")
    parser.add_argument("--deals", type=int, default=2000, help="four-seat deals a population")
    parser.add_argument("--every", type=int, default=10, help="judge the rows so far every this many deals")
    parser.add_argument("--jobs", type=int, default=2, help="processes reviewing deals")
    parser.add_argument("--speed-deals", type=int, default=120, help="records timed through the command")
    parser.add_argument("--out", type=Path, default=Path(".bench") / "fairplay", help="where reviews are cached")
    parser.add_argument("--parts", type=int, default=4, help="also judge each population cut into this many runs")
    parser.add_argument("--quick", action="store_true", help="one population of 200 deals")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.deals, args.speed_deals = args.seeds[:1], 200, 24
    players = roster(args.players)
    print(
        f"bench.fairplay: {len(args.seeds)} population(s) of {args.players} players, {args.deals} four-seat deals each, "
        f"{args.jobs} jobs, load {load_average()}, cpus {os.cpu_count()}"
    )
    print("planted: " + ", ".join(p.spell() for p in players if p.style not in (Style.PLAIN, Style.CAREFUL)))
    delays: dict[str, list[int | None]] = {}
    honest_total = honest_flagged = part_samples = part_flagged = 0
    cpu: list[float] = []
    first_records: list[Record] = []
    for seed in args.seeds:
        rows, records, median_cpu = reviewed(seed, players, args.deals, args.jobs, args.out)
        first_records = first_records or records
        cpu.append(median_cpu)
        found, honest, flagged, notes = detect(rows, records, players, args.every)
        honest_total += honest
        honest_flagged += flagged
        shown = ", ".join(f"{name} {'not flagged' if at is None else f'{at} deals'}" for name, at in found.items())
        print(f"population {seed}: flagged at: {shown}; honest flagged {flagged}/{honest}")
        for note in notes:
            print(f"  false flag: {note}")
        for name, at in found.items():
            delays.setdefault(name, []).append(at)
        if args.parts > 1:
            samples, wrong, notes = windows(rows, players, args.parts)
            part_samples += samples
            part_flagged += wrong
            print(f"  cut into {args.parts} runs of {args.deals // args.parts} deals: honest flagged {wrong}/{samples}")
            for note in notes:
                print(f"    false flag: {note}")
    print()
    print("| planted behaviour | player | deals until flagged, per population | target |")
    print("|---|---|---|---|")
    for player in players:
        if player.name not in delays:
            continue
        what = {
            Style.PEEKER: "peeker",
            Style.FEEDER: f"colluding pair ({player.name} feeds {player.partner})",
            Style.SOFT: "soft",
        }[player.style]
        each = delays[player.name]
        met = all(at is not None and at <= TARGET_DEALS for at in each)
        text = ", ".join("not flagged" if at is None else str(at) for at in each)
        print(f"| {what} | {player.name} | {text} | {'met' if met else 'NOT met'} (within {TARGET_DEALS}) |")
    rate = honest_flagged / honest_total if honest_total else 0.0
    print()
    print(
        f"false flags: {honest_flagged} of {honest_total} honest player samples ({100 * rate:.2f}%); "
        f"target at most {100 * TARGET_FALSE:.0f}% over at least 500 samples: "
        f"{'met' if rate <= TARGET_FALSE and honest_total >= 500 else 'NOT met'}"
        + ("" if honest_total >= 500 else f" (only {honest_total} samples)")
    )
    if part_samples:
        print(
            f"in runs of {args.deals // args.parts} deals: {part_flagged} of {part_samples} honest player samples "
            f"flagged ({100 * part_flagged / part_samples:.2f}%)"
        )
    print(f"review and counting, median CPU per deal: {1000 * statistics.median(cpu):.0f} ms")
    count, per_second = speed(first_records[: args.speed_deals], 2)
    print(f"remigio-referee fairplay --jobs 2: {count} records, {per_second:.2f} records/s (wall, 2 cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
