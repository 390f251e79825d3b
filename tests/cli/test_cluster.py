"""``remigio-referee batch --ray`` on a real local Ray cluster, and ``--shard`` with ``batch-merge``.

One Ray head (``ray start --block``: 2 CPUs, a 100 MB object store, no dashboard) is started for
the module and joined by every run; the node-loss test adds a second node of its own and stops
it mid-run. Each Ray run is held to the local run (``--jobs 1``) on the same file: the same
verdict lines, byte for byte. Every subprocess and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import cases
import pytest
from played import rules_for

from bench.rays import RayNode, ray_env
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg
from referee.api.records import request_of
from referee.cli.shards import shard_of
from referee.game.rules import Engine, RuleSet
from referee.play.simulate import simulate

pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "disputes.jsonl"


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayNode]:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")
    node = RayNode(tmp_path_factory.mktemp("ray"), cpus=2)
    try:
        yield node
    finally:
        node.stop()


def batch(head: RayNode | None, *args: object, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``remigio-referee batch`` to its end: on ``head``'s cluster, or locally (one job) when None."""
    where = ["--ray", head.address] if head else ["--jobs", "1"]
    env = ray_env(head.folder) if head else {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", "batch", *map(str, args), *where],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


# The same answers ------------------------------------------------------------------------------


def test_disputes_on_ray_are_the_local_runs_bytes(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "disputes.jsonl", dispute_lines())
    local = batch(None, path, "-o", tmp_path / "local.jsonl")
    result = batch(head, path, "-o", tmp_path / "ray.jsonl")
    assert result.returncode == local.returncode == 3, result.stderr  # malformed lines among them
    # One file in, its order out: the very bytes, not only the same set.
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert summary(result.stderr) == summary(local.stderr), result.stderr
    assert summary(result.stderr)["MALFORMED"] > 0


def test_records_from_a_glob_into_a_directory_are_the_local_verdicts(head: RayNode, tmp_path: Path) -> None:
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
    result = batch(head, f"file://{tmp_path}/in/part-*.jsonl", "-o", f"{out}/")
    assert result.returncode == 3, result.stderr
    wanted = [line for line in expected.splitlines() if not json.loads(line)["id"].startswith("line:")]
    assert sorted(read_directory(out)) == sorted(wanted)
    assert summary(result.stderr)["total"] == len(wanted)


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
    rows = {row["id"]: _without_nulls(row) for row in table.to_pylist()}
    assert rows == expected


def _without_nulls(value: object) -> object:
    """A row as its JSON reads: a field with presence that is unset is absent there, null here."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def test_a_bad_line_is_a_verdict_naming_its_line_and_field_and_the_run_goes_on(head: RayNode, tmp_path: Path) -> None:
    good = record_lines(20)
    bad = [
        "{not json",
        '{"id": "bad-field", "hand": {"cards": ["AH", "XX"]}}',
        "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ]
    path = write(tmp_path / "bad.jsonl", good[:10] + bad + good[10:])
    result = batch(head, path, "-o", tmp_path / "ray.jsonl")
    assert result.returncode == 3, result.stderr
    verdicts = [json.loads(line) for line in (tmp_path / "ray.jsonl").read_text(encoding="utf-8").splitlines()]
    errors = {v["id"]: v["error"] for v in verdicts if v["outcome"] == "DISPUTE_OUTCOME_MALFORMED"}
    assert errors["line:11"]["field"] == "line"
    assert errors["bad-field"]["field"].startswith("hand.cards") and errors["bad-field"]["value"] == "XX"
    assert len(verdicts) == len([line for line in good if line]) + len(bad)
    assert (tmp_path / "ray.jsonl").read_text(encoding="utf-8") == local_verdicts(path, tmp_path)


# Faults ----------------------------------------------------------------------------------------


def _busy_workers(parents: set[int], judging: bool = True) -> list[int]:
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
            if workers := _busy_workers(raylets):
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
                if _busy_workers(raylets, judging=False):
                    second.stop()  # the node leaves: its raylet, object store and workers at once
                    return True
                time.sleep(0.05)
            return False

        result = _run_and_kill(head, path, tmp_path / "out", kill)
    finally:
        second.stop()
    assert result.returncode == 3, result.stderr
    _every_case_once(tmp_path / "out", expected)


def test_resume_over_a_directory_judges_only_what_is_missing(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "records.jsonl", record_lines(300, seed=7))
    expected = local_verdicts(path, tmp_path)
    out = tmp_path / "out"
    assert batch(head, path, "-o", f"{out}/").returncode == 3
    files = sorted(out.glob("*.jsonl"))
    written = [line for file in files for line in file.read_text(encoding="utf-8").splitlines()]
    # As a driver that died leaves it: a third of the verdicts written, a file still partial.
    kept = written[: len(written) // 3]
    for file in files:
        file.unlink()
    write(out / "earlier-000000.jsonl", kept)
    write(out / ".partial-earlier-000001.jsonl", written[len(kept) :][:5])
    result = batch(head, path, "-o", f"{out}/", "--resume")
    assert result.returncode == 3, result.stderr
    assert not list(out.glob(".partial-*")), "a partial file was left"
    assert sorted(read_directory(out)) == sorted(expected.splitlines())
    resumed = re.search(r"^resumed\s+(\d+)", result.stderr, re.M)
    assert resumed and int(resumed.group(1)) == len(kept), result.stderr
    assert summary(result.stderr)["total"] == len(written) - len(kept)


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


# Fair play on Ray ------------------------------------------------------------------------------


def fairplay(head: RayNode | None, *args: object) -> subprocess.CompletedProcess[str]:
    """``remigio-referee fairplay`` to its end: on ``head``'s cluster, or locally (one job) when None."""
    where = ["--ray", head.address] if head else []
    env = ray_env(head.folder) if head else {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", "fairplay", *map(str, args), *where],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


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


def test_fairplay_on_ray_is_the_local_runs_bytes_and_names_the_lines_left_out(
    head: RayNode, reviewed: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    folder, local = reviewed
    # A directory: its files reviewed in tasks, the rows summed by Ray's group-by.
    on_ray = fairplay(head, "--json", folder)
    assert on_ray.returncode == 3, on_ray.stderr
    assert on_ray.stdout == local.stdout
    assert _left_out(on_ray.stderr) == _left_out(local.stderr)
    second = folder / "b.jsonl"
    assert [line.split(": ")[1] for line in _left_out(on_ray.stderr)] == [f"{second}:3", f"{second}:7"]
    assert "fairplay: 9 records reviewed, 2 left out" in on_ray.stderr
    # A glob, the text form.
    text = fairplay(head, folder / "a.*")
    assert text.returncode == 0, text.stderr
    assert text.stdout == fairplay(None, folder / "a.jsonl").stdout and "flags:" in text.stdout


def test_fairplay_with_a_worker_killed_mid_run_counts_every_deal_once(
    head: RayNode, reviewed: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    folder, local = reviewed
    raylets = set(head.pids())
    command = [sys.executable, "-m", "referee.cli", "fairplay", "--json", str(folder), "--ray", head.address]
    with subprocess.Popen(
        command, cwd=ROOT, env=ray_env(head.folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as run:
        killed = False
        while run.poll() is None and not killed:
            if workers := [pid for pid in _busy_workers(raylets, judging=False) if "_review" in _title(pid)]:
                os.kill(workers[0], signal.SIGKILL)
                killed = True
            time.sleep(0.02)
        stdout, stderr = run.communicate(timeout=200)
    assert killed, f"no review task was seen running:\n{stderr}"
    assert run.returncode == 3, stderr
    assert stdout == local.stdout  # a deal counted twice or lost would move the sums


def test_fairplay_with_a_node_that_leaves_mid_run_counts_every_deal_once(
    head: RayNode, reviewed: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    folder, local = reviewed
    second = RayNode(tmp_path / "second", head=head, cpus=1)
    command = [sys.executable, "-m", "referee.cli", "fairplay", "--json", str(folder), "--ray", head.address]
    try:
        raylets = set(second.pids())
        with subprocess.Popen(
            command, cwd=ROOT, env=ray_env(head.folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as run:
            left = False
            while run.poll() is None and not left:
                if _busy_workers(raylets, judging=False):
                    second.stop()  # its raylet, object store and workers at once, mid-run
                    left = True
                time.sleep(0.02)
            stdout, stderr = run.communicate(timeout=200)
    finally:
        second.stop()
    assert left, f"no task of the run was seen on the second node:\n{stderr}"
    assert run.returncode == 3, stderr
    assert stdout == local.stdout


def _title(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def test_fairplay_on_ray_refuses_jobs() -> None:
    both = fairplay(None, EXAMPLES, "--ray", "auto", "--jobs", "2")
    assert both.returncode == 2 and "--ray and --jobs" in both.stderr, both.stderr


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
    missing = subprocess.run(
        [*command, str(folder / "none.jsonl")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert missing.returncode == 2 and "none.jsonl" in missing.stderr, missing.stderr


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
    rows = {row["id"]: _without_nulls(row) for name in files for row in pq.read_table(name, filesystem=fs).to_pylist()}
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


def test_standard_input_on_ray_gives_the_local_runs_bytes(head: RayNode, tmp_path: Path) -> None:
    path = write(tmp_path / "disputes.jsonl", dispute_lines())
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
    assert result.returncode == 3, result.stderr
    assert result.stdout == local_verdicts(path, tmp_path)


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
