"""``remigio-referee batch --ray`` on a real local Ray cluster, and ``--shard`` with ``batch-merge``.

One Ray head (``ray start --block``: 2 CPUs, a 100 MB object store, no dashboard) is started for
the module and joined by every run; the node-loss test adds a second node of its own and stops
it mid-run. Each Ray run is held to the local run (``--jobs 1``) on the same file: the same
verdict lines, byte for byte. Every subprocess and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from clusters import (
    EXAMPLES,
    ROOT,
    batch,
    busy_workers,
    dispute_lines,
    local_verdicts,
    read_directory,
    record_lines,
    started_head,
    summary,
    without_nulls,
    write,
)

from bench.rays import RayNode, ray_env
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.cli.shards import shard_of

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]


head = pytest.fixture(scope="module", name="head")(started_head)  # a Ray head of the module's own


# The same answers ------------------------------------------------------------------------------


def test_records_from_a_glob_into_a_directory_are_the_local_verdicts_and_resume(head: RayNode, tmp_path: Path) -> None:
    lines = record_lines(600)
    whole = write(tmp_path / "whole.jsonl", lines)
    expected = local_verdicts(whole, tmp_path)
    # Three files (no case without an id: its line:N would name a line of its own file).
    with_ids = [line for line in lines if not line or json.loads(line).get("id")]
    assert len(with_ids) < len(lines)
    for part in range(3):
        write(tmp_path / "in" / f"part-{part}.jsonl", with_ids[part::3])
    out = tmp_path / "out"
    # A URI (file://, as s3:// or gs:// would be) with a glob in it.
    files = f"file://{tmp_path}/in/part-*.jsonl"
    result = batch(head, files, "-o", f"{out}/")
    assert result.returncode == 3, result.stderr
    wanted = [line for line in expected.splitlines() if not json.loads(line)["id"].startswith("line:")]
    written = read_directory(out)
    assert sorted(written) == sorted(wanted)
    assert summary(result.stderr)["total"] == len(wanted)
    # As a driver that died leaves the directory: a third of the verdicts written, a file still
    # partial. A rerun with --resume judges only what is missing.
    kept = written[: len(written) // 3]
    for file in out.glob("*.jsonl"):
        file.unlink()
    write(out / "earlier-000000.jsonl", kept)
    write(out / ".partial-earlier-000001.jsonl", written[len(kept) :][:5])
    result = batch(head, files, "-o", f"{out}/", "--resume")
    assert result.returncode == 3, result.stderr
    assert not list(out.glob(".partial-*")), "a partial file was left"
    assert sorted(read_directory(out)) == sorted(wanted)
    resumed = re.search(r"^resumed\s+(\d+)", result.stderr, re.M)
    assert resumed and int(resumed.group(1)) == len(kept), result.stderr
    assert summary(result.stderr)["total"] == len(written) - len(kept)


def test_parquet_has_a_column_per_field_and_reads_back_as_the_verdicts(head: RayNode, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = write(tmp_path / "mixed.jsonl", dispute_lines() + record_lines(120))
    expected = {json.loads(line)["id"]: json.loads(line) for line in local_verdicts(path, tmp_path).splitlines()}
    result = batch(head, path, "-o", tmp_path / "parquet", "--format", "parquet")
    assert result.returncode == 3, result.stderr
    table = pq.read_table(tmp_path / "parquet")
    assert table.column_names == [field.name for field in pb.CheckDisputesResponse.DESCRIPTOR.fields]
    assert table.schema.field("outcome").type == pa.string()
    assert pa.types.is_list(table.schema.field("claims").type)
    assert table.schema.field("record").type.field("turns_played").type == pa.int32()
    rows = {row["id"]: without_nulls(row) for row in table.to_pylist()}
    assert rows == expected


def test_disputes_and_bad_lines_from_standard_input_on_ray_are_the_local_runs_bytes(
    head: RayNode, tmp_path: Path
) -> None:
    """Every type of case, deal records among them, and lines that are not cases, read from
    standard input: each bad line is a verdict naming its line and field, and the run goes on."""
    good = dispute_lines() + record_lines(20)
    bad = [
        "{not json",
        '{"id": "a-card-that-is-no-card", "hand": {"cards": ["AH", "XX"]}}',
        "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ]
    path = write(tmp_path / "cases.jsonl", good[:10] + bad + good[10:])
    local = batch(None, path, "-o", tmp_path / "local.jsonl")
    with open(path, encoding="utf-8") as stdin:
        result = subprocess.run(
            [sys.executable, "-m", "referee.cli", "batch", "-", "--ray", head.address],
            cwd=ROOT,
            env=ray_env(head.folder),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode == local.returncode == 3, result.stderr
    # One input in, its order out: the very bytes, not only the same set.
    assert result.stdout == (tmp_path / "local.jsonl").read_text(encoding="utf-8")
    assert summary(result.stderr) == summary(local.stderr), result.stderr
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    errors = {v["id"]: v["error"] for v in verdicts if v["outcome"] == "DISPUTE_OUTCOME_MALFORMED"}
    assert errors["line:11"]["field"] == "line"
    assert (
        errors["a-card-that-is-no-card"]["field"].startswith("hand.cards")
        and errors["a-card-that-is-no-card"]["value"] == "XX"
    )
    assert len(verdicts) == len([line for line in good if line]) + len(bad)
    assert summary(result.stderr)["MALFORMED"] > len(bad)  # the every-type cases have malformed ones too


# Faults ----------------------------------------------------------------------------------------


def _run_and_kill(
    head: RayNode, path: Path, out: Path | None, kill: Callable[[subprocess.Popen[str]], bool]
) -> subprocess.CompletedProcess[str]:
    """A Ray run over ``path`` into the directory ``out`` (None: standard output), ``kill()`` called
    once judging has begun."""
    to = [] if out is None else ["-o", f"{out}/"]
    command = [sys.executable, "-m", "referee.cli", "batch", str(path), *to, "--ray", head.address]
    with subprocess.Popen(
        command, cwd=ROOT, env=ray_env(head.folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as run:
        killed = kill(run)
        stdout, stderr = run.communicate(timeout=200)
    assert killed, f"no task was seen running where it was awaited:\n{stderr}"
    return subprocess.CompletedProcess(command, run.returncode, stdout, stderr)


def _every_case_once(out: Path, expected: str) -> None:
    written = read_directory(out)
    ids = Counter(json.loads(line)["id"] for line in written)
    assert [case for case, times in ids.items() if times > 1] == [], "a case judged twice"
    assert sorted(written) == sorted(expected.splitlines()), "a case lost or changed"


def test_a_worker_killed_mid_run_loses_and_doubles_no_case(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "records.jsonl", record_lines(4000))
    expected = local_verdicts(path, tmp_path)
    raylets = set(head.pids())  # the head's raylet among them: the parent of its workers

    def kill(run: subprocess.Popen[str]) -> bool:
        while run.poll() is None:
            if workers := busy_workers(raylets):
                os.kill(workers[0], signal.SIGKILL)
                return True
            time.sleep(0.05)
        return False

    # To standard output: the driver writes every verdict once, in order, and Ray's own words
    # about the lost worker stay off it.
    result = _run_and_kill(head, path, None, kill)
    assert result.returncode == 3, result.stderr
    assert result.stdout == expected


def test_a_node_that_leaves_mid_run_loses_and_doubles_no_case(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "records.jsonl", record_lines(6000, seed=6))
    expected = local_verdicts(path, tmp_path)
    second = RayNode(tmp_path / "second", head=head, cpus=1)
    try:
        raylets = set(second.pids())  # its raylet among them: the parent of its workers

        def kill(run: subprocess.Popen[str]) -> bool:
            while run.poll() is None:
                if busy_workers(raylets, judging=False):
                    second.stop()  # the node leaves: its raylet, object store and workers at once
                    return True
                time.sleep(0.05)
            return False

        result = _run_and_kill(head, path, tmp_path / "out", kill)
    finally:
        second.stop()
    assert result.returncode == 3, result.stderr
    _every_case_once(tmp_path / "out", expected)


# Shards (a Kubernetes Indexed Job) ---------------------------------------------------------------


def test_shards_cover_every_case_once_and_merge_into_the_whole_runs_bytes(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "cases.jsonl", dispute_lines() + record_lines(200, seed=8))
    expected = local_verdicts(path, tmp_path)
    count = 3
    outputs = []
    for index in range(count):
        out = tmp_path / f"shard-{index}.jsonl"
        result = batch(None, path, "-o", out, "--shard", f"{index}/{count}")
        assert result.returncode in (0, 3), result.stderr
        outputs.append(out)
        for line in out.read_text(encoding="utf-8").splitlines():
            assert shard_of(json.loads(line)["id"], count) == index
    # The same shard on the cluster: the same verdicts as the pod's.
    on_ray = tmp_path / "shard-1-ray.jsonl"
    assert batch(head, path, "-o", on_ray, "--shard", f"1/{count}").returncode in (0, 3)
    assert on_ray.read_bytes() == outputs[1].read_bytes()
    sizes = [len(out.read_text(encoding="utf-8").splitlines()) for out in outputs]
    assert sum(sizes) == len(expected.splitlines()) and min(sizes) > 0
    merged = tmp_path / "merged.jsonl"
    merge = [sys.executable, "-m", "referee.cli", "batch-merge", str(path), *map(str, outputs), "-o", str(merged)]
    result = subprocess.run(merge, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert merged.read_text(encoding="utf-8") == expected
    # A shard's output missing a verdict is named, not merged.
    lines = outputs[2].read_text(encoding="utf-8").splitlines()
    write(outputs[2], lines[:-1])
    result = subprocess.run(merge, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "shard 2/3" in result.stderr and json.loads(lines[-1])["id"] in result.stderr


def test_the_shard_of_an_id_is_the_documented_hash() -> None:
    import hashlib

    assert shard_of("record-1", 4) == int.from_bytes(hashlib.sha256(b"record-1").digest()[:8], "big") % 4
    counts = Counter(shard_of(f"case-{n}", 8) for n in range(8000))
    assert set(counts) == set(range(8)) and max(counts.values()) < 1.1 * 1000


# Without Ray -----------------------------------------------------------------------------------

_BLOCK_RAY = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("ray", "pyarrow"):
            raise ImportError(f"{name} is blocked")
        return None
sys.meta_path.insert(0, Blocker())
from referee.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_batch_runs_locally_with_ray_not_importable_and_says_what_ray_needs(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    local = subprocess.run(
        [sys.executable, "-c", _BLOCK_RAY, "batch", str(EXAMPLES), "-o", str(out), "--jobs", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert local.returncode == 0, local.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(EXAMPLES.read_text(encoding="utf-8").splitlines())
    refused = subprocess.run(
        [sys.executable, "-c", _BLOCK_RAY, "batch", str(EXAMPLES), "--ray", "auto"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "pip install 'remigio-referee[ray]'" in refused.stderr, refused.stderr
