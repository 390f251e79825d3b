"""``remigio-referee fairplay --ray`` on a real local Ray cluster, both commands through Ray Client,
and the Ray runs over object storage.

A Ray head of its own (2 CPUs, a 100 MB object store), apart from ``test_cluster``'s so the two
modules run side by side; every run is held to the local run's bytes on the same records, with a
worker killed and a node lost mid-run, through Ray Client, and from an S3 bucket on a local
S3-compatible server. Every subprocess and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import (
    EXAMPLES,
    ROOT,
    batch,
    busy_workers,
    dispute_lines,
    fairplay,
    local_verdicts,
    record_lines,
    started_head,
    summary,
    title_of,
    without_nulls,
    write,
)

from bench.rays import RayNode, ray_env
from referee.api import jsonmsg
from referee.api.records import request_of
from referee.game.rules import Engine, RuleSet
from referee.play.simulate import simulate

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]


head = pytest.fixture(scope="module", name="head")(started_head)  # a Ray head of the module's own


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A folder of two files of records (two lines of the second left out) and the local run's
    results over them."""
    rules = RuleSet(engine=Engine.SEARCH)
    lines = [jsonmsg.to_json(request_of(simulate(seed, 4, rules, max_turns=60))) for seed in range(9)]
    folder = tmp_path_factory.mktemp("fairplay") / "records"
    first = write(folder / "a.jsonl", lines[:5])
    bad_card = lines[0].replace('"discard":"', '"discard":"ZZ', 1)
    second = write(folder / "b.jsonl", ["", lines[5], "not json", *lines[6:], bad_card])
    local = fairplay(None, "--json", first, second)
    assert local.returncode == 3, local.stderr
    assert len(local.stdout.splitlines()) > 4
    return folder, local


def _left_out(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("remigio-referee fairplay: ")]


def test_fairplay_on_ray_is_the_local_runs_bytes_with_a_worker_killed_and_a_node_lost_mid_run(
    head: RayNode, reviewed: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """A directory's files reviewed in tasks and the rows summed by Ray's group-by, while a review
    task's worker is killed on the head and a second node is stopped with a task of the run on
    it: the sums are the local run's (a deal counted twice or lost would move them), and the
    lines left out are named as locally."""
    folder, local = reviewed
    second = RayNode(tmp_path / "second", head=head, cpus=1)
    command = [sys.executable, "-m", "referee.cli", "fairplay", "--json", str(folder), "--ray", head.address]
    try:
        on_head, on_second = set(head.pids()), set(second.pids())  # the raylets: their workers' parents
        with subprocess.Popen(
            command, cwd=ROOT, env=ray_env(head.folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as run:
            killed = left = False
            while run.poll() is None and not (killed and left):
                if not killed and (
                    workers := [p for p in busy_workers(on_head, judging=False) if "_review" in title_of(p)]
                ):
                    os.kill(workers[0], signal.SIGKILL)
                    killed = True
                if not left and busy_workers(on_second, judging=False):
                    second.stop()  # its raylet, object store and workers at once, mid-run
                    left = True
                time.sleep(0.02)
            stdout, stderr = run.communicate(timeout=200)
    finally:
        second.stop()
    assert killed, f"no review task was seen running on the head:\n{stderr}"
    assert left, f"no task of the run was seen on the second node:\n{stderr}"
    assert run.returncode == 3, stderr
    assert stdout == local.stdout
    assert _left_out(stderr) == _left_out(local.stderr)
    second_file = folder / "b.jsonl"
    assert [line.split(": ")[1] for line in _left_out(stderr)] == [f"{second_file}:3", f"{second_file}:7"]
    assert "fairplay: 9 records reviewed, 2 left out" in stderr


def test_fairplay_on_ray_refuses_jobs() -> None:
    both = fairplay(None, EXAMPLES, "--ray", "auto", "--jobs", "2")
    assert both.returncode == 2 and "--ray and --jobs" in both.stderr, both.stderr


def test_through_ray_client_the_verdicts_are_the_local_runs_bytes(head: RayNode, tmp_path: Path) -> None:
    # The head's Ray Client server: this process a client, the driver an actor in the cluster
    # that reads the input where the cluster sees it and hands the verdicts back, in order.
    path = write(tmp_path / "mixed.jsonl", dispute_lines() + record_lines(400, seed=9))
    local = batch(None, path, "-o", tmp_path / "local.jsonl")
    command = ["batch", path, "-o", tmp_path / "client.jsonl", "--ray", f"ray://127.0.0.1:{head.client_port}"]
    result = subprocess.run(
        [sys.executable, "-m", "referee.cli", *map(str, command)],
        cwd=ROOT,
        env=ray_env(head.folder),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == local.returncode == 3, result.stderr
    assert (tmp_path / "client.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert summary(result.stderr) == summary(local.stderr), result.stderr
    # An input the cluster cannot read is bad usage, said by the driver in the cluster.
    missing = [sys.executable, "-m", "referee.cli", "batch", str(tmp_path / "nowhere.jsonl"), "--ray"]
    refused = subprocess.run(
        [*missing, f"ray://127.0.0.1:{head.client_port}"],
        cwd=ROOT,
        env=ray_env(head.folder),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert refused.returncode == 2 and "No such file or directory" in refused.stderr, refused.stderr


def test_fairplay_through_ray_client_reads_the_clusters_files_and_this_stdin(
    head: RayNode, reviewed: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    folder, local = reviewed
    address = f"ray://127.0.0.1:{head.client_port}"
    env = ray_env(head.folder)
    command = [sys.executable, "-m", "referee.cli", "fairplay", "--json", "--ray", address]
    second = folder / "b.jsonl"
    with open(second, encoding="utf-8") as stdin:
        result = subprocess.run(
            [*command, str(folder / "a.jsonl"), "-"],
            cwd=ROOT,
            env=env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode == 3, result.stderr
    assert result.stdout == local.stdout
    assert [line.split(": ")[1] for line in _left_out(result.stderr)] == ["-:3", "-:7"]


# Object storage ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3 bucket on a local S3-compatible server (moto's, a process on a port of its own); the
    URI of its root, carrying the server's address and a key pair as pyarrow reads them."""
    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        pytest.skip("moto's S3 server is not installed (the dev extra)")
    port = _free_port()
    log = tmp_path_factory.mktemp("s3") / "server.log"
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        import pyarrow.fs as pafs

        query = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
        deadline = time.monotonic() + 60
        while True:
            try:
                fs, _ = pafs.FileSystem.from_uri(f"s3://key:secret@records?{query}&allow_bucket_creation=true")
                fs.create_dir("records")
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(log.read_text(encoding="utf-8")) from None
                time.sleep(0.3)
        yield f"s3://key:secret@records/{{}}?{query}"
    finally:
        process.kill()
        process.wait(timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _upload(uri: str, files: dict[str, bytes]) -> None:
    import pyarrow.fs as pafs

    fs, root = pafs.FileSystem.from_uri(uri)
    for name, data in files.items():
        with fs.open_output_stream(f"{root}/{name}") as stream:
            stream.write(data)


def test_records_in_a_bucket_judged_into_parquet_in_a_bucket_resumed_and_reviewed(
    head: RayNode, bucket: str, tmp_path: Path, reviewed: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    path = write(tmp_path / "cases.jsonl", dispute_lines() + record_lines(60))
    expected = {json.loads(line)["id"]: json.loads(line) for line in local_verdicts(path, tmp_path).splitlines()}
    _upload(bucket.format("day"), {"cases.jsonl": path.read_bytes()})
    out = bucket.format("verdicts/")
    result = batch(head, bucket.format("day/"), "-o", out, "--format", "parquet")
    assert result.returncode == 3, result.stderr
    fs, root = pafs.FileSystem.from_uri(out)
    files = [info.path for info in fs.get_file_info(pafs.FileSelector(root)) if info.type == pafs.FileType.File]
    assert files and all(name.endswith(".parquet") for name in files), files  # no partial file left behind
    rows = {row["id"]: without_nulls(row) for name in files for row in pq.read_table(name, filesystem=fs).to_pylist()}
    assert rows == expected
    again = batch(head, bucket.format("day/"), "-o", out, "--format", "parquet", "--resume")
    assert again.returncode == 0, again.stderr
    assert summary(again.stderr)["total"] == 0
    assert re.search(rf"^resumed\s+{len(expected)}\b", again.stderr, re.M), again.stderr
    # Fair play over records in the bucket: the local run's bytes.
    folder, local = reviewed
    _upload(bucket.format("deals"), {path.name: path.read_bytes() for path in sorted(folder.iterdir())})
    on_ray = fairplay(head, "--json", bucket.format("deals/"))
    assert on_ray.returncode == 3, on_ray.stderr
    assert on_ray.stdout == local.stdout
