"""Benchmark of ``remigio-referee batch --ray``: Ray's start-up, and the Ray run's records per
second against the local run's on the same machine and the same records.

Run from the repository root (the ray extra installed)::

    python -m bench.cluster                   # 20,000 deal records, 3 rounds (about ten minutes on 2 cores)
    python -m bench.cluster --records 100000  # the issue's size (simulating the records alone takes minutes)
    python -m bench.cluster --quick           # 2,000 records, one round
    python -m bench.cluster --baseline DIR    # another build's Ray runs too (DIR: its checkout)

The records are ``bench.batch``'s (simulated deals of 4 bots, claims on every player; fixed
seeds). Each round times, as subprocesses from start to exit:

- the local run, ``batch IN -o OUT --jobs 2 --engine search``;
- the Ray run on a local two-node cluster (``ray start --head`` of 1 CPU, and a second node of
  1 CPU joining it: 2 CPUs in all, as the local run's 2 jobs), ``batch IN -o OUT --ray ADDRESS
  --engine search``, to a file (the driver writes the verdicts in order) and to a directory (the
  cluster's tasks write the files).

It prints the medians: records/s of each, the Ray run's judging alone (its summary's seconds,
without joining the cluster), and the per-core ratio (Ray records/s per Ray CPU over local
records/s per job); the CPU time per record of each (the local run and its workers; the Ray
driver and every process of both nodes: raylets, GCS, workers), whose ratio is the per-core
ratio a busy machine does not skew; and Ray's start-up: seconds for ``ray start`` of the head
and of the second node, and for a driver to join. ``--baseline DIR`` (a checkout of another
commit, e.g. ``git worktree add DIR COMMIT``) measures that build's Ray runs too, on a cluster of
its own, in the same rounds, the two builds in turns. Every Ray run's verdicts must be the local run's lines (sorted
by id: a directory's files are in no order), else the exit status is 1. A missed target (a
per-core ratio of 0.8) is reported, not a failure.
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.batch import head as head_of  # noqa: E402
from bench.batch import write_record_cases  # noqa: E402
from bench.machine import load_average  # noqa: E402
from bench.rays import RayNode, ray_env  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 0.8
JOBS = 2
SAMPLE_SECONDS = 0.5  # how often the CPU time of the nodes' processes is read during a Ray run


def _run(command: list[str], env: dict[str, str], root: Path = REPO) -> tuple[float, float, str]:
    """Seconds from start to exit of ``remigio-referee`` (of the checkout ``root``) with
    ``command``, the CPU seconds it and its children took, and its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "referee.cli", *command], cwd=root, env=env, capture_output=True, text=True, timeout=3600
    )
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, result.stderr


def _cpu_of(pids: list[int]) -> dict[int, float]:
    """CPU seconds (user and system) each of ``pids`` has taken so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    taken = {}
    for pid in pids:
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        taken[pid] = (int(stat[11]) + int(stat[12])) / ticks
    return taken


def _with_descendants(roots: set[int]) -> list[int]:
    """``roots`` and every process below them."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = set(roots)
    grown = True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= below
        grown = bool(below)
    return sorted(found)


@dataclass
class Cluster:
    """The two nodes of one build, and what its Ray runs measured."""

    name: str
    root: Path
    head: RayNode
    second: RayNode
    file_rates: list[float] = field(default_factory=list)
    dir_rates: list[float] = field(default_factory=list)
    judging_rates: list[float] = field(default_factory=list)
    file_cpu: list[float] = field(default_factory=list)  # CPU ms per record
    dir_cpu: list[float] = field(default_factory=list)
    joins: list[float] = field(default_factory=list)

    roots: set[int] = field(default_factory=set)

    def pids(self) -> list[int]:
        """The processes of both nodes and their children (the workers, children of a raylet)."""
        # The nodes' own processes found once (a look at every open file of the machine); their
        # children each time.
        if not self.roots:
            self.roots = set(self.head.pids()) | set(self.second.pids())
        return _with_descendants(self.roots)

    def run(self, command: list[str], env: dict[str, str], records: int) -> tuple[float, float, str]:
        """A Ray run: records/s, CPU ms per record (the driver, and every process of the nodes),
        and its stderr."""
        # A job's workers end with its driver, so the nodes' processes are sampled while it runs
        # (what a worker takes in its last sampling period is missed: well under 1% of a run).
        before = _cpu_of(self.pids())
        seen: dict[int, float] = {}
        running = threading.Event()
        running.set()

        def sample() -> None:
            while running.is_set():
                for pid, taken in _cpu_of(self.pids()).items():
                    seen[pid] = max(taken, seen.get(pid, 0.0))
                time.sleep(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            seconds, driver_cpu, stderr = _run(command, env, self.root)
        finally:
            running.clear()
            sampler.join()
        for pid, taken in _cpu_of(self.pids()).items():
            seen[pid] = max(taken, seen.get(pid, 0.0))
        nodes_cpu = sum(taken - before.get(pid, 0.0) for pid, taken in seen.items())
        return records / seconds, 1000 * (driver_cpu + nodes_cpu) / records, stderr

    def stop(self) -> None:
        self.second.stop()
        self.head.stop()


def _judging_seconds(stderr: str) -> float:
    found = re.search(r"^time ([\d.]+) s", stderr, re.M)
    return float(found.group(1)) if found else float("nan")


def _joined_seconds(stderr: str) -> float:
    found = re.search(r"joined in ([\d.]+) s", stderr)
    return float(found.group(1)) if found else float("nan")


def _worker_rss_mb(raylets: set[int]) -> float:
    """The largest resident memory of the nodes' worker processes (a worker that has judged keeps
    what it loaded), in MB; 0 when none is found."""
    largest = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            stat = (entry / "stat").read_text().rpartition(")")[2].split()
            if title.startswith("ray::") and "Agent" not in title and int(stat[1]) in raylets:
                largest = max(largest, int(stat[21]) * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, IndexError):
            continue
    return largest / 1e6


def _sorted_lines(path: Path) -> list[str]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    lines = [line for file in files for line in file.read_text(encoding="utf-8").splitlines()]
    return sorted(lines, key=lambda line: json.loads(line)["id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 records, one round")
    parser.add_argument(
        "--input", type=Path, help="records already written by an earlier run (its first --records lines)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of another build: its Ray runs measured too, in the same rounds"
    )
    args = parser.parse_args(argv)
    load_at_start = load_average()
    if args.quick:
        args.records, args.rounds = 2_000, 1
    folder = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    cases = folder / "records.jsonl"
    started = time.monotonic()
    if args.input:
        head_of(args.input, cases, args.records)
    else:
        write_record_cases(cases, args.records)
        print(f"{args.records:,} deal records simulated in {time.monotonic() - started:.0f} s", flush=True)

    builds = [("this build", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    clusters: list[Cluster] = []
    head_starts, node_starts = [], []
    local_rates, local_cpu, rss = [], [], []
    status = 0
    try:
        for name, root in builds:
            ray_folder = folder / f"ray-{len(clusters)}"
            started = time.monotonic()
            head = RayNode(ray_folder, cpus=1, object_store_bytes=300_000_000, root=root)
            head_starts.append(time.monotonic() - started)
            started = time.monotonic()
            try:
                second = RayNode(ray_folder / "second", head=head, cpus=1, object_store_bytes=300_000_000, root=root)
            except BaseException:
                head.stop()
                raise
            node_starts.append(time.monotonic() - started)
            clusters.append(Cluster(name, root, head, second))
        for round_ in range(args.rounds):
            local_out = folder / "local.jsonl"
            local = ["batch", str(cases), "-o", str(local_out), "--engine", "search", "--jobs", str(JOBS)]
            seconds, cpu, _ = _run(local, ray_env(folder / "local"))
            local_rates.append(args.records / seconds)
            local_cpu.append(1000 * cpu / args.records)
            expected = _sorted_lines(local_out)
            # The builds in turns: each goes first in every other round.
            for cluster in clusters if round_ % 2 == 0 else clusters[::-1]:
                env = ray_env(cluster.head.folder, cluster.root)
                file_out, dir_out = (
                    folder / "ray.jsonl",
                    folder / f"ray-{len(cluster.dir_rates)}-{cluster.head.client_port}",
                )
                on_ray = ["batch", str(cases), "--engine", "search", "--ray", cluster.head.address]
                rate, cpu, stderr = cluster.run([*on_ray, "-o", str(file_out)], env, args.records)
                cluster.file_rates.append(rate)
                cluster.file_cpu.append(cpu)
                cluster.judging_rates.append(args.records / _judging_seconds(stderr))
                cluster.joins.append(_joined_seconds(stderr))
                rate, cpu, stderr = cluster.run([*on_ray, "-o", f"{dir_out}/"], env, args.records)
                cluster.dir_rates.append(rate)
                cluster.dir_cpu.append(cpu)
                rss.append(_worker_rss_mb(set(cluster.pids())))
                for name, out in (("file", file_out), ("directory", dir_out)):
                    if _sorted_lines(out) != expected:
                        print(
                            f"round {round_ + 1}: the Ray run's verdicts ({cluster.name}, {name}) are not the local run's"
                        )
                        status = 1
            print(
                f"round {round_ + 1}: local {local_rates[-1]:,.0f}/s ({local_cpu[-1]:.2f} CPU ms/record); "
                + "; ".join(
                    f"{c.name}: ray to a file {c.file_rates[-1]:,.0f}/s ({c.file_cpu[-1]:.2f} CPU ms/record, "
                    f"judging {c.judging_rates[-1]:,.0f}/s), to a directory {c.dir_rates[-1]:,.0f}/s "
                    f"({c.dir_cpu[-1]:.2f} CPU ms/record)"
                    for c in clusters
                ),
                flush=True,
            )
    finally:
        for cluster in clusters:
            cluster.stop()
    local_rate = statistics.median(local_rates)
    local_ms = statistics.median(local_cpu)
    print()
    print(
        f"machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
        f"load {load_average()} (at the start: {load_at_start})"
    )
    print(
        f"records: {args.records:,} deal records, {args.rounds} rounds, medians; local --jobs {JOBS}, Ray 2 nodes x 1 CPU"
    )
    print(
        f"ray start --head: {statistics.median(head_starts):.1f} s; a second node joining: "
        f"{statistics.median(node_starts):.1f} s; a driver joining: "
        f"{statistics.median(j for c in clusters for j in c.joins):.1f} s"
    )
    print(f"a judging worker process: {max(rss):.0f} MB resident at most")
    # The same 2 cores on each side: the ratio of records/s is the ratio per core. (A busy machine
    # gives the Ray run, of more processes, a larger share of the cores: compare on a quiet one,
    # or by the CPU time a record takes, which other work on the machine does not shift much.)
    print(f"{'run':<36}{'records/s':>11}{'per core vs local':>20}{'CPU ms/record':>15}{'by CPU vs local':>17}")
    print(f"{'local (--jobs 2)':<36}{local_rate:>11,.0f}{1:>20.2f}{local_ms:>15.2f}{1:>17.2f}")
    for cluster in clusters:
        for name, rates, cpus in (
            ("ray, to a file", cluster.file_rates, cluster.file_cpu),
            ("ray, to a directory", cluster.dir_rates, cluster.dir_cpu),
            ("ray, judging alone", cluster.judging_rates, None),
        ):
            rate = statistics.median(rates)
            ratio = rate / local_rate
            missed = f"  (target {TARGET_RATIO:.2f})" if ratio < TARGET_RATIO and cpus is not None else ""
            label = f"{name} ({cluster.name})" if len(clusters) > 1 else name
            cpu = f"{statistics.median(cpus):>15.2f}{local_ms / statistics.median(cpus):>17.2f}" if cpus else ""
            print(f"{label:<36}{rate:>11,.0f}{ratio:>20.2f}{cpu}{missed}")
    return status


if __name__ == "__main__":
    sys.exit(main())
