"""Where the test suite's time goes: its wall time, and its CPU by the kind of process that spent it.

Run from the repository root::

    python -m bench.suite                  # make test (about six and a half minutes on 2 cores)
    python -m bench.suite -- make test-fast
    python -m bench.suite -- .venv/bin/python -m pytest tests/game/test_cards.py

The command runs as it would alone, its output passed through. Meanwhile the command and every
process below it are read from ``/proc`` every ``--interval`` seconds (Linux only): a process's
command line says its kind (the pytest processes with their in-process servers, server processes,
dispute job processes, the command line, Node.js, the browser, Envoy, other Python scripts; a fork
is read again until it runs a program of its own) and its last reading is the CPU it spent. Two totals are printed, each short of the truth in its own way:
- the sum of the readings misses a process that lives less than an interval;
- the kernel's count, for this process, of every process of the tree that its parent waited for
  misses the processes orphaned and reaped elsewhere (a browser's, a daemon's).

With the wall time, the larger says how far tuning can go: on N cores the suite cannot take less
than its CPU divided by N, however it is scheduled.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # Run as ``python bench/suite.py``: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import finish, load_average

DEFAULT_COMMAND = ("make", "test")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# Python processes by a word of their command line, tried in order.
PYTHON_KINDS: tuple[tuple[str, str], ...] = (
    ("pytest (tests, in-process servers)", "-m pytest"),
    ("pytest (tests, in-process servers)", "import sys;exec(eval(sys.stdin.readline()))"),  # an xdist worker
    ("server processes", "-m referee.server"),
    ("server processes", "remigio-referee serve"),
    ("dispute job processes", "multiprocessing.spawn"),
    ("command line", "-m referee.cli"),
    ("command line", "remigio-referee"),
)
# Other programs by the start of their name.
PROGRAMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gateway (Envoy)", ("envoy",)),
    ("browser (Chromium)", ("chrom",)),
    ("Node.js", ("node", "npm", "npx")),
)


def kind_of(command_line: str) -> str:
    """The kind of a process, from its command line (its arguments joined by spaces)."""
    for kind, word in PYTHON_KINDS:
        if word in command_line:
            return kind
    program = command_line.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"
    if program.startswith("python"):
        return f"other Python ({_script(command_line.split()[1:])})"
    for kind, starts in PROGRAMS:
        if program.startswith(starts):
            return kind
    return f"other ({program})"


def _script(args: Sequence[str]) -> str:
    """What a Python command line runs: a script's file name, ``-m`` and a module, or ``-c``."""
    for index, arg in enumerate(args):
        if arg == "-c":
            return "-c"
        if arg == "-m":
            return "-m " + (args[index + 1] if index + 1 < len(args) else "")
        if not arg.startswith("-"):
            return arg.rsplit("/", 1)[-1]
    return "-"


@dataclass(frozen=True, slots=True)
class Reading:
    """One process as ``/proc`` shows it: its parent, and the CPU seconds it has spent."""

    pid: int
    start: int  # clock ticks after boot: with the pid, names the process across pid reuse
    parent: int
    cpu: float


def readings() -> Iterator[Reading]:
    """Every process now running (those that end while they are read are left out)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, ... utime (12th), stime (13th), ... starttime (20th).
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS
        yield Reading(int(entry.name), int(fields[19]), int(fields[1]), cpu)


def command_line(pid: int) -> str:
    """A process's arguments joined by spaces ("" once it has ended)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as text:
            return text.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Tree:
    """A process and those below it, each with its command line and the CPU it was last seen to have spent."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.lines: dict[tuple[int, int], str] = {}  # by (pid, start)
        self.cpu: dict[tuple[int, int], float] = {}

    def sample(self) -> None:
        """Read every process once; the root and a new process below it (or below one already known) join."""
        now = {reading.pid: reading for reading in readings()}
        below = {pid for pid, start in self.lines if pid in now and now[pid].start == start}
        grew = True
        while grew:  # a child seen before its parent joins on the next pass
            grew = False
            for reading in now.values():
                if reading.pid not in below and (reading.pid == self.root or reading.parent in below):
                    self.lines[(reading.pid, reading.start)] = command_line(reading.pid)
                    below.add(reading.pid)
                    grew = True
        for pid in below:
            reading = now[pid]
            key = (pid, reading.start)
            self.cpu[key] = reading.cpu
            parent = now.get(reading.parent)
            if parent is not None and self.lines[key] == self.lines.get((parent.pid, parent.start)):
                # Forked and perhaps not yet running its own program: read again until it does.
                self.lines[key] = command_line(pid) or self.lines[key]

    def by_kind(self) -> list[tuple[str, int, float]]:
        """Each kind: its processes and their CPU seconds, the most CPU first."""
        counts: Counter[str] = Counter()
        seconds: defaultdict[str, float] = defaultdict(float)
        for key, line in self.lines.items():
            kind = kind_of(line)
            counts[kind] += 1
            seconds[kind] += self.cpu.get(key, 0.0)
        return sorted(((kind, counts[kind], seconds[kind]) for kind in counts), key=lambda row: -row[2])


def children_cpu() -> float:
    """The CPU seconds of this process's waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: Sequence[str], interval: float) -> tuple[int, float, float, Tree]:
    """Run ``command`` to its end, sampling its processes; its exit status, wall and CPU seconds, and the tree."""
    cpu_before = children_cpu()
    started = time.monotonic()
    process = subprocess.Popen(list(command))
    tree = Tree(process.pid)
    while process.poll() is None:
        tree.sample()
        time.sleep(interval)
    wall = time.monotonic() - started
    return process.returncode, wall, children_cpu() - cpu_before, tree


def report(command: Sequence[str], status: int, wall: float, cpu: float, tree: Tree) -> list[str]:
    """Print the figures; the problems (a command that failed)."""
    cores = os.cpu_count() or 1
    kinds = tree.by_kind()
    sampled = sum(seconds for _, _, seconds in kinds)
    most = max(cpu, sampled)
    print()
    print(f"bench.suite: {' '.join(command)}")
    print(f"machine: {platform.machine()}, {cores} cores, Python {platform.python_version()}")
    print(f"wall {wall:.1f} s; CPU {most:.1f} s ({most / wall:.2f} cores busy on average)")
    print(f"CPU of the processes waited for {cpu:.1f} s; the sum of the readings {sampled:.1f} s")
    print(f"on {cores} cores no schedule takes less than {most / cores:.1f} s")
    print(f"{'kind':<40} {'processes':>9} {'CPU s':>8} {'share':>6}")
    for kind, count, seconds in kinds:
        print(f"{kind:<40} {count:>9} {seconds:>8.1f} {seconds / sampled if sampled else 0:>6.0%}")
    return [] if status == 0 else [f"the command exited {status}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between readings (default 0.25)")
    parser.add_argument("command", nargs="*", help="the command to run, after -- (default: make test)")
    args = parser.parse_args(argv)
    if not Path("/proc/self/stat").exists():
        parser.error("this benchmark reads /proc (Linux)")
    command = tuple(args.command) or DEFAULT_COMMAND
    print(f"load average at the start: {load_average()}")
    status, wall, cpu, tree = run(command, args.interval)
    return finish(report(command, status, wall, cpu, tree))


if __name__ == "__main__":
    sys.exit(main())
