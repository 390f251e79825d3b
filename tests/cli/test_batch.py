"""``remigio-referee batch`` as a real process: locally, through real servers, killed and resumed.

The case files come from ``cases`` (next to this file), whose expected verdicts are known by
construction. Every subprocess and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cases
import grpc
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from played import rules_for
from prometheus_client.parser import text_string_to_metric_families
from servers import METRICS, ServerProcess, server_env

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg
from referee.api.convert import close_kind_to_proto
from referee.api.records import request_of
from referee.game.deal import most_players
from referee.game.rules import Engine, RuleSet
from referee.game.scoring import score_deal
from referee.play.replay import replay
from referee.play.simulate import simulate

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="signals, ptys")]

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("CONFIRMED", "WRONG", "INVALID", "NO_CLAIM", "MALFORMED")


def batch_command(*args: object) -> list[str]:
    """The command line of ``remigio-referee batch`` with ``args``."""
    return [sys.executable, "-m", "referee.cli", "batch", *map(str, args)]


def run_batch(*args: object, timeout: float = 90, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``remigio-referee batch`` to its end (at most ``timeout`` seconds), capturing its output."""
    return subprocess.run(
        batch_command(*args),
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,  # type: ignore[call-overload]
    )


def read_verdicts(path: Path) -> list[dict[str, object]]:
    """The verdicts of an output file, one JSON object per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def summary_counts(stderr: str) -> dict[str, int]:
    """The counts of the summary table on stderr, by outcome (and total)."""
    counts = {}
    for name in (*OUTCOMES, "total"):
        found = re.search(rf"^{name}\s+(\d+)\s*$", stderr, re.MULTILINE)
        assert found, f"no {name} row in the summary:\n{stderr}"
        counts[name] = int(found.group(1))
    return counts


def assert_verdicts(out: Path, expected: dict[str, cases.Expected]) -> list[str]:
    """Every verdict as expected, one per case, in the order of the cases; return the lines."""
    lines = out.read_text(encoding="utf-8").splitlines()
    verdicts = [json.loads(line) for line in lines]
    assert [v["id"] for v in verdicts] == list(expected), "ids missing, doubled or out of input order"
    problems = [p for v in verdicts for p in cases.mismatches(v, expected[str(v["id"])])]
    assert not problems, "\n".join(problems[:20])
    return lines


def assert_summary(stderr: str, expected: dict[str, cases.Expected]) -> None:
    """The summary table counts what was expected, with the time and rate; no progress bar."""
    want = Counter(e.outcome for e in expected.values())
    assert summary_counts(stderr) == {**{name: want[name] for name in OUTCOMES}, "total": len(expected)}
    assert re.search(r"^time [\d.]+ s, [\d,]+ cases/s$", stderr, re.MULTILINE), stderr
    assert "\r" not in stderr and "ETA" not in stderr, "a progress bar was drawn on a non-terminal stderr"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, cases.Expected]]:
    """The every-type file: hands, closes, deals, every outcome, malformed lines among them."""
    path = tmp_path_factory.mktemp("mixed") / "cases.jsonl"
    expected = cases.write_cases(path, cases.mixed_cases(seed=1))
    assert {e.outcome for e in expected.values()} == set(OUTCOMES)
    return path, expected


@pytest.fixture(scope="module")
def local_lines(mixed: tuple[Path, dict[str, cases.Expected]], tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The verdict lines of a local ``--jobs 1`` run on the mixed file (checked in its own test too)."""
    path, expected = mixed
    out = tmp_path_factory.mktemp("local") / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--jobs", "1")
    assert result.returncode == 3, result.stderr
    return assert_verdicts(out, expected)


# Local runs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_run_gives_the_expected_verdicts(
    jobs: int, mixed: tuple[Path, dict[str, cases.Expected]], local_lines: list[str], tmp_path: Path
) -> None:
    path, expected = mixed
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--jobs", jobs)
    assert result.returncode == 3, f"malformed lines must give exit status 3\n{result.stderr}"
    assert result.stdout == ""
    lines = assert_verdicts(out, expected)
    assert lines == local_lines, "the verdicts depend on --jobs"
    assert_summary(result.stderr, expected)


def test_a_file_without_malformed_lines_exits_0_through_stdin_and_stdout(tmp_path: Path) -> None:
    path = tmp_path / "clean.jsonl"
    expected = cases.write_cases(path, cases.mixed_cases(seed=2, malformed=False))
    result = run_batch("-", "-o", "-", "--jobs", "2", input=path.read_text(encoding="utf-8"))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out.jsonl"
    out.write_text(result.stdout, encoding="utf-8")
    assert_verdicts(out, expected)
    assert_summary(result.stderr, expected)


def test_search_engine_gives_the_same_verdicts(
    mixed: tuple[Path, dict[str, cases.Expected]], local_lines: list[str], tmp_path: Path
) -> None:
    path, _ = mixed
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--jobs", "2", "--engine", "search")
    assert result.returncode == 3, result.stderr
    assert out.read_text(encoding="utf-8").splitlines() == local_lines


def test_progress_bar_on_a_terminal(mixed: tuple[Path, dict[str, cases.Expected]], tmp_path: Path) -> None:
    path, expected = mixed
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            batch_command(path, "-o", tmp_path / "out.jsonl", "--jobs", "1"),
            cwd=ROOT,
            env=server_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=slave,
        )
        os.close(slave)
        seen = bytearray()
        reader = threading.Thread(target=_read_all, args=(master, seen), daemon=True)
        reader.start()
        assert proc.wait(timeout=60) == 3
        reader.join(timeout=10)
    finally:
        os.close(master)
    text = seen.decode("utf-8", "replace")
    assert "\r[" in text and "cases/s" in text and "ETA" in text, text
    assert f"{len(expected)}/{len(expected)}" in text, text
    assert summary_counts(text.replace("\r\n", "\n"))["total"] == len(expected)


def _record_cases() -> tuple[list[str], dict[str, str]]:
    """Deal record cases as JSON lines, with the outcome each must get."""
    lines, outcomes = [], {}
    rules = RuleSet(engine=Engine.SEARCH)
    for seed in range(8):
        record = simulate(seed, 2 + seed % 3, rules, seeded=seed % 2 == 0)
        ended = replay(record).deal
        assert ended is not None
        kind = score_deal(ended, rules).close.kind
        request = request_of(record)
        case_id = f"record{seed}"
        if seed % 4 == 0:
            outcomes[case_id] = "NO_CLAIM"
        elif seed % 4 == 1:
            request.claims.close_kind = close_kind_to_proto(kind)
            outcomes[case_id] = "CONFIRMED"
        elif seed % 4 == 2:
            # The first turn names the seat after the one to play: a violation, whatever the claims.
            request.record.turns[0].seat = (record.dealer + 2) % len(record.seats)
            request.claims.close_kind = close_kind_to_proto(kind)
            outcomes[case_id] = "ILLEGAL"
        else:
            request.record.turns[0].discard = "11H"
            outcomes[case_id] = "MALFORMED"
        lines.append(jsonmsg.to_json(pb.CheckDisputesRequest(id=case_id, record=request)))
    return lines, outcomes


def test_record_cases_get_their_outcomes_and_the_summary_counts_the_illegal_ones(tmp_path: Path) -> None:
    lines, outcomes = _record_cases()
    path, out = tmp_path / "records.jsonl", tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_batch(path, "-o", out, "--jobs", "2")
    assert result.returncode == 3, result.stderr  # the malformed ones
    verdicts = read_verdicts(out)
    assert {v["id"]: str(v["outcome"]).removeprefix("DISPUTE_OUTCOME_") for v in verdicts} == outcomes
    for verdict in verdicts:
        if verdict["outcome"] == "DISPUTE_OUTCOME_ILLEGAL":
            record = verdict["record"]
            assert isinstance(record, dict) and record["legal"] is False and verdict["claims"] == []
            assert record["violation"]["code"] == "VIOLATION_CODE_NOT_YOUR_TURN" and record["violation"]["turn"] == 1
        elif verdict["outcome"] == "DISPUTE_OUTCOME_MALFORMED":
            error = verdict["error"]
            assert isinstance(error, dict)
            assert (error["field"], error["value"]) == ("record.record.turns[0].discard", "11H")
    found = re.search(r"^ILLEGAL\s+(\d+)\s*$", result.stderr, re.MULTILINE)
    assert found and int(found.group(1)) == 2, result.stderr


def _many_mixed_lines(count: int) -> list[str]:
    """``count`` case lines of every kind: the every-type file's hands, closes, deals and malformed
    lines, and simulated deal records under drawn rule options (2 to 6 players, seeded shuffles and
    explicit decks, unfinished ones, some made illegal or malformed, some in camelCase JSON that
    only protobuf's own parser reads), with blank lines among them."""
    rng = random.Random(4)
    lines = [case.text for case in cases.mixed_cases(seed=3)]
    seed = 0
    while len(lines) < count:
        seed += 1
        rules = rules_for(rng)
        players = rng.randint(2, min(6, most_players(rules.decks)))
        record = simulate(seed, players, rules, seeded=seed % 2 == 0, closing=seed % 9 != 0, max_turns=60)
        claims = pb.DealClaims(multiplier=rng.randint(1, 3))
        for player in range(players):
            claims.players.add(player=player, points=rng.randint(0, 40))
        request = request_of(record, claims if seed % 5 else None)
        if seed % 7 == 0 and request.record.turns:
            request.record.turns[-1].seat = (request.record.turns[-1].seat + 1) % players
        if seed % 11 == 0 and request.record.turns:
            request.record.turns[0].discard = "1H"
        case = pb.CheckDisputesRequest(id=f"record-{seed}", record=request)
        if seed % 13 == 0:
            lines.append(json_format.MessageToJson(case, indent=None))  # camelCase names
        else:
            lines.append(jsonmsg.to_json(case))
    rng.shuffle(lines)
    for _ in range(5):
        lines.insert(rng.randrange(len(lines)), "")
    return lines


def test_jobs_1_and_jobs_2_write_the_same_bytes_in_the_same_order(tmp_path: Path) -> None:
    # Several chunks per job: the verdicts come back from two processes in chunks, and must
    # still be the bytes one process writes, in the order of the cases.
    lines = _many_mixed_lines(300)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = []
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}.jsonl"
        result = run_batch(path, "-o", out, "--jobs", jobs, "--engine", "search")
        assert result.returncode == 3, result.stderr  # the malformed lines
        outputs.append(out.read_bytes())
    one, two = outputs
    assert one == two, "the verdicts depend on --jobs"
    verdicts = [json.loads(line) for line in one.decode("utf-8").splitlines()]
    assert len(verdicts) == sum(1 for line in lines if line.strip())
    named = [line[line.index("record-") :].split('"')[0] for line in lines if '"record-' in line]
    assert [v["id"] for v in verdicts if str(v["id"]).startswith("record-")] == named
    outcomes = Counter(str(v["outcome"]).removeprefix("DISPUTE_OUTCOME_") for v in verdicts)
    assert {"CONFIRMED", "WRONG", "ILLEGAL", "NO_CLAIM", "MALFORMED"} <= set(outcomes), outcomes


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "{}", " ", "é", "\n", "\r", "\r\n", "\t"]), max_size=40),
    st.integers(1, 5),
    st.integers(1, 16),
)
def test_blocks_cut_the_lines_a_text_file_reads(pieces: list[str], lines: int, read: int) -> None:
    # The workers read the input's bytes in blocks: every block's lines, numbered, must be the
    # lines (and numbers) iterating the file opened as text gives, universal newlines and all,
    # whatever the block size and the size of the reads.
    import io

    from referee.cli import batch

    data = "".join(pieces).encode("utf-8")
    expected = [(n, text) for n, text in enumerate(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"), 1)]
    expected = [(n, text) for n, text in expected if text.strip()]
    original, batch.BLOCK_READ = batch.BLOCK_READ, read
    try:
        blocks = list(batch._blocks(io.BytesIO(data), lines))
    finally:
        batch.BLOCK_READ = original
    assert b"".join(block for _, block in blocks) == data
    got = [(line.number, line.text) for first, block in blocks for line in batch._lines_of(first, block)]
    assert got == expected


def test_a_local_worker_collects_its_garbage_between_chunks_not_within(monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker judges with the collector off and collects the young generations after each chunk
    # (everything after every FULL_COLLECTION_EVERY chunks); a process with the collector on (one
    # job, no pool) is left to it.
    import gc

    from referee.cli import batch

    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    block = ("\n".join(_many_mixed_lines(6)) + "\n").encode()
    was_enabled = gc.isenabled()
    try:
        batch._worker_starts()
        assert not gc.isenabled()
        monkeypatch.setattr(batch, "_chunks_done", 0)
        batch.judge_block(1, block, "search")
        batch.judge_lines([(1, _many_mixed_lines(1)[0])], "search")
        assert collected == [1, 1]
        monkeypatch.setattr(batch, "_chunks_done", batch.FULL_COLLECTION_EVERY - 1)
        batch.judge_block(1, block, "search")
        assert collected == [1, 1, 2]
        gc.enable()
        batch.judge_block(1, block, "search")
        assert collected == [1, 1, 2]
    finally:
        (gc.enable if was_enabled else gc.disable)()


def _slow_hands(tmp_path: Path, count: int = 3000) -> tuple[Path, list[str]]:
    """A file of ``count`` random hands (seconds of work with --engine cpsat) and its ids."""
    from referee.game.cards import deck

    rng = random.Random(36)
    codes = [card.code() for card in deck(2)]
    ids = [f"h{n}" for n in range(count)]
    path = tmp_path / "hands.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": case_id, "hand": {"cards": rng.sample(codes, 10), "claimed_points": 1}}) + "\n"
            for case_id in ids
        ),
        encoding="utf-8",
    )
    return path, ids


def _sigint_as_a_shell_leaves_it() -> None:
    """SIGINT at its default in a command started from a test, as a terminal's shell starts one:
    pytest-xdist's workers ignore it, and an ignored signal is inherited (Python then leaves it
    ignored, rightly: a shell ignores it for a command it runs in the background)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def started_batch() -> Iterator[Callable[[Path, Path], subprocess.Popen[str]]]:
    """``start(path, out)``: ``batch --jobs 2 --engine cpsat`` on ``path`` in a process group of its
    own, returned once its first verdicts are written; a group still running after the test is
    killed (a failed test leaves no batch behind)."""
    started: list[subprocess.Popen[str]] = []

    def start(path: Path, out: Path) -> subprocess.Popen[str]:
        batch = subprocess.Popen(
            batch_command(path, "-o", out, "--jobs", "2", "--engine", "cpsat"),
            cwd=ROOT, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, preexec_fn=_sigint_as_a_shell_leaves_it,
        )  # fmt: skip
        started.append(batch)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and batch.poll() is None and not (out.exists() and out.stat().st_size):
            time.sleep(0.05)
        assert batch.poll() is None, "the batch ended before its first verdicts were written"
        return batch

    yield start
    for batch in started:
        if batch.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(batch.pid, signal.SIGKILL)
            batch.communicate(timeout=10)


def test_ctrl_c_stops_a_batch_in_one_line_and_resume_finishes_it(tmp_path: Path, started_batch) -> None:
    # Ctrl-C reaches every process of the terminal's group, the pool's workers too: the batch
    # says so in one line, exits 130 (128 + SIGINT), prints no traceback from any process, and the
    # verdicts it wrote are whole lines from which --resume finishes the file as one run would.
    path, ids = _slow_hands(tmp_path)
    out = tmp_path / "out.jsonl"
    batch = started_batch(path, out)
    os.killpg(batch.pid, signal.SIGINT)
    _, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "remigio-referee batch: interrupted", stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    written = read_verdicts(out)  # whole lines only
    assert 0 < len(written) < len(ids)
    result = run_batch(path, "-o", out, "--jobs", "2", "--engine", "cpsat", "--resume", timeout=120)
    assert result.returncode == 0, result.stderr
    assert [verdict["id"] for verdict in read_verdicts(out)] == ids


def test_a_local_worker_killed_mid_run_is_replaced_and_no_case_is_lost_or_doubled(
    tmp_path: Path, started_batch
) -> None:
    # A worker killed (SIGKILL: the out-of-memory killer's way) hung the run for ever, waiting on
    # the chunk it held. The workers are started again, the chunks they held judged again, and
    # the output is byte for byte a run's that lost no worker.
    from servers import descendants

    path, _ = _slow_hands(tmp_path)
    out = tmp_path / "out.jsonl"
    batch = started_batch(path, out)
    os.kill(descendants(batch.pid)[0], signal.SIGKILL)
    _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 0, stderr
    assert stderr.count("a worker process ended abruptly") == 1, stderr
    whole = tmp_path / "whole.jsonl"
    assert run_batch(path, "-o", whole, "--jobs", "2", "--engine", "cpsat", timeout=120).returncode == 0
    assert out.read_bytes() == whole.read_bytes()


def test_workers_killed_again_and_again_stop_the_run_keeping_its_verdicts(tmp_path: Path, started_batch) -> None:
    # Whatever kills the workers each time they start is not chance: after LOSSES losses the run
    # stops with status 4, saying so in a line, the verdicts written so far whole, and --resume
    # finishes the file.
    from servers import descendants

    from referee.cli.workers import LOSSES

    path, ids = _slow_hands(tmp_path)
    out = tmp_path / "out.jsonl"
    batch = started_batch(path, out)
    deadline = time.monotonic() + 60
    while batch.poll() is None and time.monotonic() < deadline:
        for pid in descendants(batch.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    _, stderr = batch.communicate(timeout=30)
    assert batch.returncode == 4, stderr
    assert f"a worker process ended abruptly {LOSSES} times" in stderr and "--resume" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    written = [verdict["id"] for verdict in read_verdicts(out)]
    assert written == ids[: len(written)]
    assert run_batch(path, "-o", out, "--jobs", "2", "--engine", "cpsat", "--resume", timeout=120).returncode == 0
    assert [verdict["id"] for verdict in read_verdicts(out)] == ids


def test_the_blocks_verdicts_are_the_bytes_of_judging_each_line(tmp_path: Path) -> None:
    # Every case judged (the workers read blocks of bytes) and a resumed run (this process reads
    # the lines, as when a report is drawn): the same bytes as judging each line alone, on a
    # corpus of every kind of case with \r\n and \r line ends, blank lines and no last newline.
    from referee.cli.batch import Line, judge_line

    lines = _many_mixed_lines(160)
    text = "\n".join(lines[:60]) + "\r\n" + "\r\n".join(lines[60:100]) + "\r" + "\r".join(lines[100:])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(text.encode("utf-8"))
    with path.open(encoding="utf-8") as source:
        expected = "".join(
            judge_line(Line(n, line), "search") + "\n" for n, line in enumerate(source, 1) if line.strip()
        )
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}.jsonl"
        result = run_batch(path, "-o", out, "--jobs", jobs, "--engine", "search")
        assert result.returncode == 3, result.stderr  # the malformed lines
        assert out.read_text(encoding="utf-8") == expected, f"--jobs {jobs}"
    # A resumed run skips the first verdicts and judges the rest line by line.
    out = tmp_path / "resumed.jsonl"
    kept = "".join(expected.splitlines(keepends=True)[:7])
    out.write_text(kept, encoding="utf-8")
    result = run_batch(path, "-o", out, "--jobs", "2", "--engine", "search", "--resume")
    assert result.returncode == 3, result.stderr
    assert out.read_text(encoding="utf-8") == expected


def test_a_run_in_this_process_gives_the_frozen_heap_back(tmp_path: Path) -> None:
    # The loaded heap is frozen while the cases are judged (the collector leaves it alone); a
    # caller that runs the command in its own process gets its collector back whole.
    import argparse
    import gc

    from referee.cli import batch

    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(_many_mixed_lines(40)) + "\n", encoding="utf-8")
    for jobs in ("1", "2"):
        parser = argparse.ArgumentParser()
        batch.add_arguments(parser)
        args = parser.parse_args([str(path), "-o", str(tmp_path / f"out{jobs}.jsonl"), "--jobs", jobs])
        assert gc.get_freeze_count() == 0
        assert batch.run(args) == batch.EXIT_MALFORMED  # the malformed lines
        assert gc.get_freeze_count() == 0
    assert (tmp_path / "out1.jsonl").read_bytes() == (tmp_path / "out2.jsonl").read_bytes()


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO once the child has closed the terminal
            return
        if not chunk:
            return
        into.extend(chunk)


# Through servers -------------------------------------------------------------------------------


def test_through_a_server_gives_the_same_verdicts(
    server_address: str, mixed: tuple[Path, dict[str, cases.Expected]], local_lines: list[str], tmp_path: Path
) -> None:
    path, expected = mixed
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--target", server_address, "--jobs", "2")
    assert result.returncode == 3, result.stderr
    lines = assert_verdicts(out, expected)
    assert lines == local_lines, "a server and a local run answer differently"
    assert_summary(result.stderr, expected)


@pytest.fixture
def two_servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two referee servers, each its own process and port, logging JSON lines."""
    started: list[ServerProcess] = []
    try:
        for _ in range(2):
            started.append(ServerProcess("--port", "0", "--log-format", "json", "--dispute-jobs", "1").listening())
        yield started[0], started[1]
    finally:
        for server in started:
            server.terminate()


def test_two_servers_behind_one_target_both_receive_cases(
    two_servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    first, second = two_servers
    path = tmp_path / "cases.jsonl"
    expected = cases.many_hand_cases(path, seed=3, copies=20)
    assert len(expected) > 4 * 128
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--target", f"{first.address},{second.address}", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert_verdicts(out, expected)
    # Each call is logged when it ends; give the log lines a moment to arrive.
    deadline = time.monotonic() + 10
    while first.judged() + second.judged() < len(expected) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.judged() > 0 and second.judged() > 0, (first.judged(), second.judged())
    assert first.judged() + second.judged() == len(expected)


def test_streams_a_busy_server_turns_away_are_sent_again(tmp_path: Path) -> None:
    # One stream slot: the server runs one CheckDisputes stream at a time and refuses the others
    # (RESOURCE_EXHAUSTED); four jobs keep it busy, so most chunks are refused at least once.
    server = ServerProcess(
        "--port", "0", "--max-streams", "1", "--log-format", "json", "--dispute-jobs", "1"
    ).listening()
    try:
        path = tmp_path / "cases.jsonl"
        expected = cases.many_hand_cases(path, seed=5, copies=12)
        out = tmp_path / "verdicts.jsonl"
        result = run_batch(path, "-o", out, "--target", server.address, "--jobs", "4")
        assert result.returncode == 0, result.stderr
        assert_verdicts(out, expected)
        deadline = time.monotonic() + 10
        while server.judged() < len(expected) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.judged() == len(expected)
        refused = [line for line in list(server.lines) if '"code": "RESOURCE_EXHAUSTED"' in line]
        assert refused, "no stream was refused: the test did not exercise the retry"
    finally:
        server.terminate()


def _check_disputes_ends(server: ServerProcess) -> list[str]:
    """The final status of each CheckDisputes call the server has logged (JSON log lines)."""
    lines = [json.loads(line) for line in list(server.lines) if line.startswith("{")]
    return [line["code"] for line in lines if str(line.get("method", "")).startswith("CheckDisputes")]


def test_each_stream_is_read_to_its_final_status_so_the_server_ends_it_ok(tmp_path: Path) -> None:
    server = ServerProcess(
        "--port", "0", "--log-format", "json", "--dispute-jobs", "1",
        "--metrics-port", "0", "--runtime-dir", str(tmp_path / "run"),
    )  # fmt: skip
    try:
        metrics_url = server.wait_for(METRICS).group(1)
        server.listening()
        path = tmp_path / "cases.jsonl"
        expected = cases.many_hand_cases(path, seed=7, copies=12)
        streams = -(-len(expected) // 128)  # one CheckDisputes call per chunk of 128 cases
        assert streams >= 3
        out = tmp_path / "verdicts.jsonl"
        result = run_batch(path, "-o", out, "--target", server.address, "--jobs", "2")
        assert result.returncode == 0, result.stderr
        assert_verdicts(out, expected)
        deadline = time.monotonic() + 10
        while len(_check_disputes_ends(server)) < streams and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _check_disputes_ends(server) == ["OK"] * streams, "the server saw streams end other than OK"
        # Its metrics say the same: every CheckDisputes call ended OK, none CANCELLED.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(metrics_url, timeout=10) as reply:
            text = reply.read().decode()
        ended = {
            sample.labels["grpc_status"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "grpc_server_call_duration_seconds_count"
            and sample.labels.get("grpc_method", "").endswith("/CheckDisputes")
        }
        assert ended == {"OK": streams}, ended
    finally:
        server.terminate()


class _ErrorAfterTheLastVerdict(grpc.GenericRpcHandler):
    """A CheckDisputes server that answers every case, then ends the stream with INTERNAL."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if not handler_call_details.method.endswith("/CheckDisputes"):  # type: ignore[attr-defined]
            return None
        return grpc.stream_stream_rpc_method_handler(
            self._stream,
            request_deserializer=pb.CheckDisputesRequest.FromString,
            response_serializer=pb.CheckDisputesResponse.SerializeToString,
        )

    def _stream(
        self, cases: Iterator[pb.CheckDisputesRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.CheckDisputesResponse]:
        for case in cases:
            yield pb.CheckDisputesResponse(id=case.id, outcome=pb.DISPUTE_OUTCOME_NO_CLAIM)
        context.abort(grpc.StatusCode.INTERNAL, "the verdicts could not be stored")


def test_an_error_after_the_last_verdict_is_reported(tmp_path: Path) -> None:
    server = grpc.server(ThreadPoolExecutor(max_workers=4), handlers=[_ErrorAfterTheLastVerdict()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        path = tmp_path / "cases.jsonl"
        path.write_text("".join(json.dumps({"id": f"c{n}", "hand": {"cards": ["AH"]}}) + "\n" for n in range(5)))
        result = run_batch(path, "-o", tmp_path / "out.jsonl", "--target", f"127.0.0.1:{port}", "--jobs", "1")
    finally:
        server.stop(grace=None)
    assert result.returncode == 4, result.stderr
    assert "the server failed: INTERNAL: the verdicts could not be stored" in result.stderr


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_target_exits_4_quickly(mixed: tuple[Path, dict[str, cases.Expected]], tmp_path: Path) -> None:
    path, _ = mixed
    out = tmp_path / "verdicts.jsonl"
    result = run_batch(path, "-o", out, "--target", f"127.0.0.1:{_closed_port()}", timeout=60)
    assert result.returncode == 4, result.stderr
    assert "no referee server answers at 127.0.0.1:" in result.stderr
    # Lines that need no server (the unreadable ones) may be written; no case was judged.
    # How quickly it gives up is timed in the process (below): the command's own start-up, a few
    # seconds on a busy machine, says nothing about it.
    import grpc

    from referee.cli.batch import CONNECT_SECONDS, connected

    with grpc.insecure_channel(f"127.0.0.1:{_closed_port()}") as channel:
        start = time.monotonic()
        assert not connected(channel, CONNECT_SECONDS)
        elapsed = time.monotonic() - start
    assert elapsed < CONNECT_SECONDS / 2, f"took {elapsed:.1f} s to give up on a refused connection"


def test_an_unknown_host_exits_4(mixed: tuple[Path, dict[str, cases.Expected]], tmp_path: Path) -> None:
    path, _ = mixed
    result = run_batch(path, "-o", tmp_path / "out.jsonl", "--target", "no-such-host.invalid:50051", timeout=60)
    assert result.returncode == 4, result.stderr
    assert "no-such-host.invalid" in result.stderr


# Repeated ids ----------------------------------------------------------------------------------

HAND_CASE = {"hand": {"cards": "AH 2H 3H 5C 5D 5S KS KD 9C JK".split(), "claimed_points": 9}}


def _seven_cases(ids: list[str]) -> str:
    assert len(ids) == 7
    return "".join(json.dumps({"id": case_id, **HAND_CASE}) + "\n" for case_id in ids)


# Seven cases, two with the id h1 (lines 2 and 6).
REPEATED = ["h0", "h1", "h2", "h3", "h4", "h1", "h6"]


def _assert_refused(result: subprocess.CompletedProcess[str], name: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, f"not one line:\n{result.stderr}"
    assert result.stderr == (
        f"remigio-referee batch: {name}: lines 2 and 6 both have the id 'h1' (ids must be unique in a batch)\n"
    )
    assert result.stdout == ""


def test_a_file_whose_ids_repeat_is_refused_before_any_case_is_judged(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(_seven_cases(REPEATED), encoding="utf-8")
    out = tmp_path / "verdicts.jsonl"
    _assert_refused(run_batch(path, "-o", out, "--jobs", "2"), str(path))
    assert not out.exists(), "the output was touched"
    _assert_refused(run_batch("-", "-o", "-", "--jobs", "1", input=path.read_text(encoding="utf-8")), "stdin")
    # A case without an id is known by its line: an explicit id of that form repeats it too.
    path.write_text(json.dumps({"id": "line:2", **HAND_CASE}) + "\n" + json.dumps(HAND_CASE) + "\n")
    result = run_batch(path, "-o", out)
    assert result.returncode == 2 and "lines 1 and 2 both have the id 'line:2'" in result.stderr


def test_resume_refuses_a_file_whose_ids_repeat_and_loses_no_case_once_they_are_unique(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    unique = ["h0", "h1", "h2", "h3", "h4", "h5", "h6"]
    # A first run judged three cases before it stopped.
    path.write_text("".join(_seven_cases(unique).splitlines(keepends=True)[:3]), encoding="utf-8")
    out = tmp_path / "verdicts.jsonl"
    assert run_batch(path, "-o", out, "--jobs", "1").returncode == 0
    before = out.read_bytes()
    assert before.count(b"\n") == 3

    path.write_text(_seven_cases(REPEATED), encoding="utf-8")
    _assert_refused(run_batch(path, "-o", out, "--jobs", "1", "--resume"), str(path))
    assert out.read_bytes() == before, "a refused resume changed the output"

    path.write_text(_seven_cases(unique), encoding="utf-8")
    result = run_batch(path, "-o", out, "--jobs", "1", "--resume")
    assert result.returncode == 0, result.stderr
    assert [v["id"] for v in read_verdicts(out)] == unique
    assert all(v["outcome"] == "DISPUTE_OUTCOME_CONFIRMED" for v in read_verdicts(out))
    assert summary_counts(result.stderr)["total"] == 4
    assert re.search(r"^resumed\s+3\b", result.stderr, re.MULTILINE), result.stderr


# Resume ----------------------------------------------------------------------------------------

RESUME_CASES = 2000  # 4-player deals; with --jobs 1 and the search engine a run takes a few seconds


def test_resume_after_sigkill_neither_redoes_nor_loses_cases(tmp_path: Path) -> None:
    path = tmp_path / "deals.jsonl"
    deals = list(cases.deal_cases(RESUME_CASES, seed=11))
    # A few unreadable lines too: their ids (line:N) must survive a resume like any other.
    for n, text, case_id in (
        (150, "not json", "line:{n}"),
        (1200, '{"id": "half', "line:{n}"),
        (1900, '{"id": "zz", "hand": {"cards": ["ZZ"]}}', "zz"),
    ):
        deals.insert(n, cases.CaseLine(text, cases.Expected(case_id, "MALFORMED")))
    expected = cases.write_cases(path, cases.numbered(deals))
    engine = ("--engine", "search")

    reference = tmp_path / "reference.jsonl"
    result = run_batch(path, "-o", reference, "--jobs", "2", *engine)
    assert result.returncode == 3, result.stderr
    reference_lines = reference.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in reference_lines] == list(expected)

    out = tmp_path / "verdicts.jsonl"
    proc = subprocess.Popen(
        batch_command(path, "-o", out, "--jobs", "1", *engine),
        cwd=ROOT,
        env=server_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while _line_count(out) < len(expected) // 2:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no progress within 60 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    written = out.read_bytes()
    assert written.count(b"\n") < len(expected), "the run finished before the kill"
    # A crash can also cut a line short: the rerun must drop it, not keep or duplicate it.
    complete = written[: written.rfind(b"\n") + 1]
    out.write_bytes(complete + reference_lines[written.count(b"\n")].encode()[:25])

    result = run_batch(path, "-o", out, "--jobs", "1", "--resume", *engine)
    assert result.returncode == 3, result.stderr
    resumed = out.read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["id"] for line in resumed]
    assert len(ids) == len(set(ids)), "a case was judged twice"
    assert set(ids) == set(expected), "a case was lost"
    assert set(resumed) == set(reference_lines) and len(resumed) == len(reference_lines)
    done_before = complete.count(b"\n")
    assert re.search(rf"^resumed\s+{done_before}\b", result.stderr, re.MULTILINE), result.stderr
    assert summary_counts(result.stderr)["total"] == len(expected) - done_before


def _line_count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


# The first pass's plain ids --------------------------------------------------------------------

# Lines whose first key names an id plainly, and the ways such a line's id can still differ from
# that start: not JSON at all, the key given again (plainly or escaped), "id" within a value, an
# explicit id of the form a line without one is known by, ids over the limit; and lines read whole.
_SCAN_LINES = (
    '{"id":"a","hand":{}}',
    '{"id":"b","hand":{}}',
    '{"id":"a","hand":{',  # not JSON: its id is line:N
    '{"id":"a","id":"b"}',  # the last key given wins
    '{"id":"b","\\u0069d":"a"}',  # the same key, escaped
    '{"id":"a","name":"id"}',
    '{"id":"line:2","hand":{}}',
    '{"id":"line:3","x":1}',
    '{"id":"' + "c" * 128 + '","x":1}',
    '{"id":"' + "c" * 129 + '","x":1}',
    '{"id": "a", "hand": {}}',
    '{"hand":{},"id":"a"}',
    '{"hand":{}}',
    "[1,2]",
    "not json",
    "   ",
    '{"id":"été","x":1}',  # beyond ASCII: read as bytes all the same
    '{"id":"' + "é" * 100 + '","x":1}',  # 100 characters, 200 bytes: read as text
    "\u3000",  # blank as text, not as bytes
    '{"id":"a","x":1}\r',  # a carriage return: the file is cut as text
    '{"id":"c","x":1}\r{"x":2}',  # two lines as text, one as bytes cut at newlines
    '{"id":"line:1","x":1}',  # its own line's number
)


def _scanned(lines: tuple[str, ...], whole: bool) -> int | str:
    """The first pass over ``lines``: the number of cases, or the error; ``whole``: every line read whole."""
    from referee.cli import batch as command

    source = io.TextIOWrapper(io.BytesIO("".join(f"{line}\n" for line in lines).encode()), encoding="utf-8")
    try:
        if whole:
            cases = command._scanned(source, "cases.jsonl", None, candidates=False)
            assert cases is not None
            return cases
        return command._scan(source, "cases.jsonl")
    except ValueError as error:
        return str(error)


def test_the_first_pass_reads_plain_ids_as_reading_every_line_whole_does() -> None:
    # Every file of three such lines: a repeat takes two lines, and a line:N id a third.
    for lines in itertools.product(_SCAN_LINES, repeat=3):
        found = _scanned(lines, whole=False)
        assert found == _scanned(lines, whole=True), lines
        as_text = io.StringIO("".join(f"{line}\n" for line in lines), newline=None)  # how a text file cuts lines
        assert isinstance(found, str) or found == sum(1 for line in as_text if line.strip()), lines
