"""Benchmark of recovery from network faults: how long a fault holds up a batch or a client.

Run from the repository root, as root (network namespaces)::

    python -m bench.network               # five runs of the fault tests (a few minutes)
    python -m bench.network --runs 1      # one run

Each run is one pass of ``tests/server/test_hostile_network.py``: clients and two replicas on hosts of
their own (network namespaces joined by veth cables to a bridge), the replicas one DNS name, and
each fault in turn. The tests' clients ping every second with a second to answer, so a silent
connection is found within 2 s (the defaults: 25 s). Each test prints its figures as
``figure: WHAT: SECONDS s``; this collects them over the runs and prints, per figure, the
median, the lowest and the highest. A test that fails makes the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench.machine import load_average

ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"^figure: (.+): ([\d.]+) s$", re.MULTILINE)


def run_once() -> tuple[dict[str, float], str]:
    """One pass of the fault tests: their figures, and pytest's output when a test failed ("" else)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:randomly", "-p", "no:cacheprovider"]
        + ["tests/server/test_hostile_network.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    figures = {what: float(seconds) for what, seconds in FIGURE.findall(done.stdout)}
    return figures, "" if done.returncode == 0 else done.stdout[-4000:] + done.stderr[-2000:]


def main(argv: list[str] | None = None) -> int:
    """Run the fault tests ``--runs`` times; print each figure's median and range."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="passes of the fault tests (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if os.geteuid() != 0:
        print("bench.network: network namespaces need root", file=sys.stderr)
        return 1
    load_before = load_average()
    collected: dict[str, list[float]] = {}
    failed = False
    for number in range(1, args.runs + 1):
        figures, failure = run_once()
        print(f"run {number}: {len(figures)} figures", flush=True)
        if failure:
            print(failure, file=sys.stderr)
            failed = True
        for what, seconds in figures.items():
            collected.setdefault(what, []).append(seconds)
    print()
    print("| fault and figure | median s | lowest s | highest s | runs |")
    print("|---|---|---|---|---|")
    for what, values in collected.items():
        print(f"| {what} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | {len(values)} |")
    print()
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average before {load_before}, after {load_average()}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
