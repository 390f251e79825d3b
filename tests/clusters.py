"""What the cluster tiers share: running ``remigio-referee batch`` and ``fairplay`` as processes on
a real local Ray cluster or locally, the cases and records they judge, and reading Ray's worker
processes from ``/proc``."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import cases
import pytest
from played import rules_for

from bench.rays import RayNode, ray_env
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg
from referee.api.records import request_of
from referee.play.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "disputes.jsonl"


def command(
    name: str, head: RayNode | None, *args: object, local: tuple[str, ...] = (), timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``remigio-referee NAME ARGS`` to its end: on ``head``'s cluster, or locally (with the
    arguments ``local``) when None."""
    where = ["--ray", head.address] if head else list(local)
    env = ray_env(head.folder) if head else {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", name, *map(str, args), *where],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def batch(head: RayNode | None, *args: object, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``remigio-referee batch`` to its end: on ``head``'s cluster, or locally (one job) when None."""
    return command("batch", head, *args, local=("--jobs", "1"), timeout=timeout)


def fairplay(head: RayNode | None, *args: object) -> subprocess.CompletedProcess[str]:
    """``remigio-referee fairplay`` to its end: on ``head``'s cluster, or locally (one job) when None."""
    return command("fairplay", head, *args)


def started_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayNode]:
    """A Ray head of 2 CPUs and a 100 MB object store for a module's tests (its ``head`` fixture)."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")
    node = RayNode(tmp_path_factory.mktemp("ray"), cpus=2, quick_loss=True)
    try:
        yield node
    finally:
        node.stop()


def record_lines(count: int, seed: int = 5) -> list[str]:
    """Simulated deal records as case lines (some illegal, some malformed, some in camelCase, some
    without an id), with blank lines among them; copies under new ids when ``count`` is large."""
    rng = random.Random(seed)
    made = []
    for index in range(min(count, 150)):
        record = simulate(index, rng.randint(2, 4), rules_for(rng), seeded=index % 2 == 0, max_turns=80)
        request = request_of(record)
        if index % 7 == 3 and request.record.turns:
            request.record.turns[0].seat = (request.record.turns[0].seat + 1) % len(record.seats)
        if index % 11 == 5 and request.record.turns:
            request.record.turns[0].discard = "1H"
        made.append(pb.CheckDisputesRequest(record=request))
    lines = []
    for number in range(count):
        case = pb.CheckDisputesRequest()
        case.CopyFrom(made[number % len(made)])
        if number % 50 != 17:
            case.id = f"record-{number}"
        lines.append(jsonmsg.to_json(case) if number % 13 else json.dumps(json.loads(jsonmsg.to_json(case))))
    for _ in range(3):
        lines.insert(rng.randrange(len(lines)), "")
    return lines


def dispute_lines() -> list[str]:
    """The every-type cases (hands, closes, deals, every outcome, malformed lines) and the examples'."""
    lines = [case.text for case in cases.mixed_cases(seed=2)]
    return lines + EXAMPLES.read_text(encoding="utf-8").splitlines()


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def local_verdicts(cases_file: Path, tmp_path: Path) -> str:
    out = tmp_path / "local.jsonl"
    result = batch(None, cases_file, "-o", out)
    assert result.returncode in (0, 3), result.stderr
    return out.read_text(encoding="utf-8")


def by_id(text: str) -> list[str]:
    return sorted(text.splitlines(), key=lambda line: json.loads(line)["id"])


def summary(stderr: str) -> dict[str, int]:
    rows = (line.split() for line in stderr.splitlines())
    return {row[0]: int(row[1]) for row in rows if len(row) == 2 and row[1].isdigit()}


def read_directory(folder: Path) -> list[str]:
    return [line for path in sorted(folder.glob("*.jsonl")) for line in path.read_text(encoding="utf-8").splitlines()]


def without_nulls(value: object) -> object:
    """A row as its JSON reads: a field with presence that is unset is absent there, null here."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def busy_workers(parents: set[int], judging: bool = True) -> list[int]:
    """Ray worker processes of the raylets ``parents`` (a worker is its raylet's child) now
    running a task of the run: a judging task, or (``judging`` False) any task of the dataset
    (reading, splitting, judging, writing), by the process title Ray gives them."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            if not title.startswith("ray::") or ("Judge" not in title if judging else not _DATASET.search(title)):
                continue
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent in parents:
            found.append(int(entry.name))
    return found


_DATASET = re.compile(r"MapBatches|ReadBinary|Write|Split")


def title_of(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""
