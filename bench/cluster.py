"""Benchmark of ``remigio-referee batch --ray``: Ray's start-up, and the Ray run's records per
second against the local run's on the same machine and the same records.

Run from the repository root (the ray extra installed)::

    python -m bench.cluster                   # 20,000 deal records, 3 rounds (about ten minutes on 2 cores)
    python -m bench.cluster --records 100000  # the issue's size (simulating the records alone takes minutes)
    python -m bench.cluster --quick           # 2,000 records, one round

The records are ``bench.batch``'s (simulated deals of 4 bots, claims on every player; fixed
seeds). Each round times, as subprocesses from start to exit:

- the local run, ``batch IN -o OUT --jobs 2 --engine search``;
- the Ray run on a local two-node cluster (``ray start --head`` of 1 CPU, and a second node of
  1 CPU joining it: 2 CPUs in all, as the local run's 2 jobs), ``batch IN -o OUT --ray ADDRESS
  --engine search``, to a file (the driver writes the verdicts in order) and to a directory (the
  cluster's tasks write the files).

It prints the medians: records/s of each, the Ray run's judging alone (its summary's seconds,
without joining the cluster), and the per-core ratio (Ray records/s per Ray CPU over local
records/s per job); and Ray's start-up: seconds for ``ray start`` of the head and of the second
node, and for a driver to join. Every Ray run's verdicts must be the local run's lines (sorted
by id: a directory's files are in no order), else the exit status is 1. A missed target (a
per-core ratio of 0.8) is reported, not a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
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


def _run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds from start to exit of ``remigio-referee`` with ``command``, and its stderr."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "referee.cli", *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600
    )
    seconds = time.monotonic() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds, result.stderr


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
    args = parser.parse_args(argv)
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

    ray_folder = folder / "ray"
    env = ray_env(ray_folder)
    started = time.monotonic()
    head = RayNode(ray_folder, cpus=1, object_store_bytes=300_000_000)
    head_start = time.monotonic() - started
    started = time.monotonic()
    second = RayNode(ray_folder / "second", head=head, cpus=1, object_store_bytes=300_000_000)
    node_start = time.monotonic() - started
    raylets = set(head.pids()) | set(second.pids())
    local_rates, file_rates, dir_rates, judging_rates, joins, rss = [], [], [], [], [], []
    status = 0
    try:
        for round_ in range(args.rounds):
            local_out, file_out, dir_out = folder / "local.jsonl", folder / "ray.jsonl", folder / f"ray-{round_}"
            local = ["batch", str(cases), "-o", str(local_out), "--engine", "search"]
            on_ray = ["batch", str(cases), "--engine", "search", "--ray", head.address]
            seconds, _ = _run([*local, "--jobs", str(JOBS)], env)
            local_rates.append(args.records / seconds)
            seconds, stderr = _run([*on_ray, "-o", str(file_out)], env)
            file_rates.append(args.records / seconds)
            judging_rates.append(args.records / _judging_seconds(stderr))
            joins.append(_joined_seconds(stderr))
            seconds, stderr = _run([*on_ray, "-o", f"{dir_out}/"], env)
            dir_rates.append(args.records / seconds)
            rss.append(_worker_rss_mb(raylets))
            expected = _sorted_lines(local_out)
            for name, out in (("file", file_out), ("directory", dir_out)):
                if _sorted_lines(out) != expected:
                    print(f"round {round_ + 1}: the Ray run's verdicts ({name}) are not the local run's")
                    status = 1
            print(
                f"round {round_ + 1}: local {local_rates[-1]:,.0f}/s, ray to a file {file_rates[-1]:,.0f}/s "
                f"(judging {judging_rates[-1]:,.0f}/s), ray to a directory {dir_rates[-1]:,.0f}/s",
                flush=True,
            )
    finally:
        second.stop()
        head.stop()
    local_rate = statistics.median(local_rates)
    print()
    print(
        f"machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, load {load_average()}"
    )
    print(
        f"records: {args.records:,} deal records, {args.rounds} rounds, medians; local --jobs {JOBS}, Ray 2 nodes x 1 CPU"
    )
    print(
        f"ray start --head: {head_start:.1f} s; a second node joining: {node_start:.1f} s; a driver joining: {statistics.median(joins):.1f} s"
    )
    print(f"a judging worker process: {max(rss):.0f} MB resident at most")
    # The same 2 cores on each side: the ratio of records/s is the ratio per core. (A busy machine
    # gives the Ray run, of more processes, a larger share of the cores: compare on a quiet one.)
    print(f"{'run':<24}{'records/s':>11}{'per core vs local':>20}")
    print(f"{'local (--jobs 2)':<24}{local_rate:>11,.0f}{1:>20.2f}")
    for name, rates in (
        ("ray, to a file", file_rates),
        ("ray, to a directory", dir_rates),
        ("ray, judging alone", judging_rates),
    ):
        rate = statistics.median(rates)
        ratio = rate / local_rate
        missed = f"  (target {TARGET_RATIO:.2f})" if ratio < TARGET_RATIO and name != "ray, judging alone" else ""
        print(f"{name:<24}{rate:>11,.0f}{ratio:>20.2f}{missed}")
    return status


if __name__ == "__main__":
    sys.exit(main())
