"""The server as a real process: ``python -m referee.server`` on a free port.

SIGTERM under load drains cleanly (calls in flight succeed, new calls are refused, exit 0), and
``--workers 2`` serves from two processes. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servers import LISTENING, WORKERS, descendants

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

pytestmark = [pytest.mark.timeout(90), pytest.mark.skipif(sys.platform != "linux", reason="signals and SO_REUSEPORT")]

SERVICE = "remigio.referee.v1.RefereeService"


SLOW_CASES = 12


def slow_cases(stream: int) -> Iterator[pb.CheckDisputesRequest]:
    """Dispute cases sent one every 0.1 s: the stream stays in flight for over a second, by design."""
    for n in range(SLOW_CASES):
        yield pb.CheckDisputesRequest(
            id=f"s{stream}-{n}",
            close=pb.CheckCloseRequest(cards="7H 7H 7S 7S 7D 7D 7C 7C JK JK JK".split(), claimed_multiplier=10),
        )
        time.sleep(0.1)


# Each call of its light load must end within 10 s while the server drains: with no other test
# beside it (on four busy test workers a call once waited past that).
@pytest.mark.alone
def test_sigterm_under_load_drains_and_exits_0(launch) -> None:
    server = launch("--port", "0", "--threads", "6", "--grace", "20", "--solve-cap", "60", "--log-format", "json")
    found = server.wait_for(LISTENING)
    address = f"127.0.0.1:{found.group(2)}"
    with grpc.insecure_channel(address) as chan:
        grpc.channel_ready_future(chan).result(timeout=10)
        stub = referee_pb2_grpc.RefereeServiceStub(chan)
        health = health_pb2_grpc.HealthStub(chan)
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5).status
            == health_pb2.HealthCheckResponse.SERVING
        )
        watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

        # Light load all along, from a thread: every call either succeeds or is refused.
        outcomes: list[grpc.StatusCode] = []
        stop_load = threading.Event()

        def load() -> None:
            while not stop_load.is_set():
                try:
                    stub.SolveHand(pb.SolveHandRequest(cards="AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()), timeout=10)
                    outcomes.append(grpc.StatusCode.OK)
                except grpc.RpcError as error:
                    outcomes.append(error.code())
                time.sleep(0.005)

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        try:
            replies: dict[int, list[pb.CheckDisputesResponse]] = {}

            def stream(number: int) -> None:
                replies[number] = list(stub.CheckDisputes(slow_cases(number), timeout=30))

            in_flight = [threading.Thread(target=stream, args=(n,)) for n in range(4)]
            for thread in in_flight:
                thread.start()
            time.sleep(0.4)  # each stream has sent a few cases and is still sending
            assert all(thread.is_alive() for thread in in_flight)
            server.proc.send_signal(signal.SIGTERM)

            # Draining: health turns NOT_SERVING, new calls are refused without being handled ...
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
            refused = _refused_call(address)

            # ... and the calls in flight finish with all their answers.
            for thread in in_flight:
                thread.join(timeout=30)
            for number in range(4):
                assert [r.id for r in replies[number]] == [f"s{number}-{n}" for n in range(SLOW_CASES)]
                assert all(r.outcome == pb.DISPUTE_OUTCOME_CONFIRMED for r in replies[number])
                assert all(r.close.kind == pb.CLOSE_KIND_REMIGIO for r in replies[number])
        finally:
            stop_load.set()
            loader.join(timeout=15)
    assert server.proc.wait(timeout=30) == 0
    assert grpc.StatusCode.OK in outcomes
    # Refused calls: UNAVAILABLE, or CANCELLED when one arrives just as the server shuts its door.
    assert set(outcomes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, set(outcomes)

    # One JSON line per call: method, status code, duration, request id.
    server.kill()
    calls = [json.loads(line) for line in server.lines if line.startswith("{") and '"method"' in line]
    streams = [c for c in calls if c["method"] == "CheckDisputes" and c["code"] == "OK"]
    assert [c["cases"] for c in streams] == [SLOW_CASES] * 4
    assert all({"method", "code", "duration_ms", "request_id"} <= c.keys() for c in calls)
    assert refused not in {c["request_id"] for c in calls}


def _refused_call(address: str) -> str:
    """Call a draining server on a fresh channel until it refuses; the refused call's request id."""
    for attempt in range(50):
        request_id = f"after-sigterm-{attempt}"
        with grpc.insecure_channel(address) as fresh:
            try:
                referee_pb2_grpc.RefereeServiceStub(fresh).SolveHand(
                    pb.SolveHandRequest(cards=["AH"]), metadata=(("x-request-id", request_id),), timeout=2
                )
            except grpc.RpcError as error:
                # Refused at the door: no listener (UNAVAILABLE), or shut out as it came in (CANCELLED).
                assert error.code() in {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, error
                return request_id
        time.sleep(0.05)
    raise AssertionError("the draining server kept taking new calls")


def test_two_workers_serve_from_two_processes(launch) -> None:
    server = launch("--port", "0", "--workers", "2", "--grace", "2", "--debug-pid")
    parent = server.wait_for(WORKERS)
    address = f"127.0.0.1:{parent.group(2)}"
    worker_pids = {server.wait_for(LISTENING).group(3), server.wait_for(LISTENING).group(3)}
    assert len(worker_pids) == 2 and parent.group(3) not in worker_pids

    seen: set[str] = set()
    for _ in range(100):
        # A fresh channel is a fresh connection, which the kernel may hand to either process.
        with grpc.insecure_channel(address) as chan:
            reply, call = referee_pb2_grpc.RefereeServiceStub(chan).SolveHand.with_call(
                pb.SolveHandRequest(cards="QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()), timeout=10, wait_for_ready=True
            )
        assert reply.linking.points == 9
        seen.add(dict(call.trailing_metadata())["x-referee-pid"])
        if len(seen) >= 2:
            break
    assert seen == worker_pids

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    for pid in worker_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)


def _alive_after(pids: set[int], seconds: float) -> set[int]:
    """Those of ``pids`` still running after up to ``seconds`` (zombies count as ended)."""
    deadline = time.monotonic() + seconds
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            try:
                os.kill(pid, 0)
                # A finished child of a dead parent may linger as a zombie until init reaps it.
                with open(f"/proc/{pid}/status", encoding="ascii") as status:
                    if "State:\tZ" in status.read():
                        alive.discard(pid)
            except (ProcessLookupError, FileNotFoundError):
                alive.discard(pid)
        time.sleep(0.1)
    return alive


def _job_processes(worker: int, timeout: float = 60) -> set[int]:
    """The dispute job processes a worker spawned (its resource tracker left out), once both run."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = set()
        for pid in descendants(worker):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"spawn_main" in cmdline.read():
                    jobs.add(pid)
        if len(jobs) >= 2 or time.monotonic() > deadline:
            return jobs
        time.sleep(0.2)


# A one-second grace for four job processes: timing the drain, so with no other test beside it.
@pytest.mark.alone
@pytest.mark.timeout(300)
def test_dispute_jobs_end_with_their_worker_and_with_the_server(launch) -> None:
    # A job process holds both ends of its work queue: before, those of a killed worker waited for
    # work for ever, and at SIGTERM a job that missed the executor's stop kept its worker from
    # exiting after it had said "stopped" (both found by the fuzz soak, bench.soak).
    server = launch("--port", "0", "--workers", "2", "--dispute-jobs", "2", "--grace", "1")
    server.wait_for(WORKERS)
    # Generous waits: two workers spawning four job processes load a busy machine for a while.
    workers = [int(server.wait_for(LISTENING, timeout=120).group(3)) for _ in range(2)]
    killed_jobs = _job_processes(workers[0])
    assert len(killed_jobs) == 2
    os.kill(workers[0], signal.SIGKILL)
    assert not _alive_after(killed_jobs, 10), "the jobs of a killed worker outlived it"
    server.wait_for(LISTENING, timeout=120)  # its replacement
    everything = set(descendants(server.proc.pid))
    assert len(_job_processes(workers[1])) == 2
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    assert not _alive_after(everything, 10), "processes outlived the server"


def test_a_dispute_job_process_loads_neither_grpc_nor_asyncio(launch) -> None:
    # A job process judges cases and answers through its pipe: the server's runtime (gRPC, the
    # event loop) would only make every job slower to start and larger for its whole life.
    server = launch("--port", "0", "--dispute-jobs", "2").listening()
    with grpc.insecure_channel(server.address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        cases = [pb.CheckDisputesRequest(id=f"c{n}", hand=pb.HandDispute(cards=["AH", "2H", "3H"])) for n in range(8)]
        assert len(list(stub.CheckDisputes(iter(cases), timeout=60))) == 8  # both jobs have judged
    jobs = _job_processes(server.proc.pid)
    assert len(jobs) == 2, jobs
    for pid in jobs:
        loaded = _shared_objects(pid)
        assert [name for name in loaded if name.startswith(("cp_model_helper.", "libortools."))], pid  # the engines
        assert not [name for name in loaded if name.startswith(("cygrpc.", "_asyncio."))], (pid, sorted(loaded))


def _shared_objects(pid: int) -> set[str]:
    """The names of the files mapped into a process (its extension modules and libraries among them)."""
    fields = (line.split() for line in Path(f"/proc/{pid}/maps").read_text().splitlines())
    return {Path(row[5]).name for row in fields if len(row) >= 6 and row[5].startswith("/")}


def test_a_server_process_reviews_and_draws_a_record_in_the_notation(launch) -> None:
    """ReviewDeal and DrawAnswer from a real server process, the record sent in the notation."""
    from referee.play.record import format_notation
    from referee.play.review import review_deal
    from referee.play.simulate import simulate

    record = simulate(7, 3)
    server = launch("--port", "0").listening()
    with grpc.insecure_channel(server.address) as chan:
        stub = referee_pb2_grpc.RefereeServiceStub(chan)
        reviewed = stub.ReviewDeal(pb.ReviewDealRequest(notation=format_notation(record)), timeout=60)
        drawn = stub.DrawAnswer(
            pb.DrawAnswerRequest(review_deal=pb.ReviewDealRequest(notation=format_notation(record))), timeout=60
        )
    expected = review_deal(record)
    assert reviewed.legal and len(reviewed.turns) == len(expected.turns) == len(record.turns)
    assert [s.accuracy for s in reviewed.seats] == [s.accuracy for s in expected.seats]
    assert [d.caption for d in drawn.drawings] == ["The review"] and 'data-drawing="review"' in drawn.drawings[0].svg


def test_workers_stop_when_the_parent_is_killed(launch) -> None:
    server = launch("--port", "0", "--workers", "2", "--grace", "1")
    server.wait_for(WORKERS)
    worker_pids = {int(server.wait_for(LISTENING).group(3)), int(server.wait_for(LISTENING).group(3))}
    server.proc.kill()  # SIGKILL: the parent cannot forward anything
    server.proc.wait(timeout=10)
    alive = _alive_after(worker_pids, 15)
    assert not alive, f"workers outlived their parent: {alive}"


def test_a_serving_process_freezes_its_start_up_objects_and_rarely_collects_in_full() -> None:
    # In a process of its own: freezing is process-wide and would change this test process.
    probe = (
        "import gc; before = gc.get_threshold(); from referee.server import process; "
        "process.tune_garbage_collector(); print(gc.get_freeze_count(), *before, *gc.get_threshold())"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120).stdout
    frozen, *before, young, middle, full = (int(x) for x in out.split())
    assert frozen > 10000  # OR-Tools, numpy, protobuf and grpc modules among them
    assert [young, middle] == before[:2] and full == 1000 != before[2]


def test_the_server_says_which_build_it_runs_in_its_start_up_line_and_its_metrics(launch, tmp_path) -> None:
    import re
    import urllib.request

    from servers import METRICS

    from referee import __version__

    server = launch("--port", "0", "--metrics-port", "0", "--runtime-dir", str(tmp_path), "--dispute-jobs", "1")
    url = server.wait_for(METRICS).group(1)
    line = server.wait_for(re.compile(r"listening on .*")).group(0)
    assert f"version {__version__}, API v1" in line
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    assert f'referee_build_info{{api="v1",version="{__version__}"}} 1.0' in text


def _group_server(workers: str, jobs: str) -> tuple[subprocess.Popen[str], list[str]]:
    """A server in a process group of its own (a signal to the group reaches every process, as a
    terminal's Ctrl-C does), and its output read until every server process listens (their
    dispute jobs were spawned just before)."""
    from servers import server_env

    server = subprocess.Popen(
        [sys.executable, "-m", "referee.server", "--port", "0", "--workers", workers, "--dispute-jobs", jobs],
        env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    assert server.stdout is not None
    lines = []
    listening = 0
    for line in server.stdout:
        lines.append(line)
        listening += bool(LISTENING.search(line))
        if listening == int(workers):
            break
    return server, lines


@pytest.mark.parametrize("pause", [0.0, 2.0], ids=["jobs-starting", "jobs-up"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_in_a_terminal_stops_every_process_without_a_traceback(workers: str, pause: float) -> None:
    """Ctrl-C signals the terminal's whole process group: the server, its workers and their
    dispute job processes alike. It drains, says "stopped", exits 0, and no process prints a
    traceback (a job's KeyboardInterrupt did, also from a job still importing as it came)."""
    server, lines = _group_server(workers, jobs="2")
    time.sleep(pause)
    os.killpg(server.pid, signal.SIGINT)
    out, _ = server.communicate(timeout=60)
    text = "".join(lines) + out
    assert server.returncode == 0, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.rstrip().splitlines()[-1].startswith("remigio-referee: stopped"), text


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_call_line_written_straight_to_the_handler_is_the_line_its_record_makes(
    log_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call log skips ``logging``'s records when the handler ``configure_logging`` set up is
    # the only one on the way; the line must be the record's, but for its time of day. With a
    # test's handler added (pytest's), the record's way is taken again.
    import io
    import logging
    import re

    from referee.server import logs, servicer

    saved = logging.root.handlers[:], logging.root.level, logs._direct
    written = io.StringIO()
    monkeypatch.setattr(sys, "stderr", written)
    ends = [
        servicer.CallEnd("SolveHand", grpc.StatusCode.OK, 0.00123, "0123456789abcdef", "ipv4:127.0.0.1:45678"),
        servicer.CallEnd(
            "CheckDisputes", grpc.StatusCode.CANCELLED, 1.5, "r-1", "ipv6:[::1]:5", 3, "ab" * 16, "team", True
        ),
    ]
    try:
        logs.configure_logging(log_format)
        assert logs.write_direct(logging.getLogger("referee.service"), "probe")
        for end in ends:
            servicer._log_call(end)  # straight to the handler
            logging.root.addHandler(extra := logging.NullHandler())
            assert not logs.write_direct(logging.getLogger("referee.service"), "probe")
            servicer._log_call(end)  # through a record
            logging.root.removeHandler(extra)
    finally:
        logging.root.handlers[:], _, logs._direct = saved
        logging.root.setLevel(saved[1])
    lines = written.getvalue().splitlines()[1:]
    assert len(lines) == 2 * len(ends)
    timeless = [re.sub(r"\d\d:\d\d:\d\d[,.]\d{3}", "TIME", line) for line in lines]
    assert timeless[0::2] == timeless[1::2]
    assert f"pid={os.getpid()}" in lines[0] or json.loads(lines[0])["pid"] == os.getpid()


@pytest.mark.parametrize(
    "fmt",
    [
        "%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s",  # logs.TEXT_FORMAT
        "%(asctime)s%(message)s",
        "%(asctime)s [%(levelname)-8s] 100%% %(name)s | %(message)s",
        "%(asctime)s %(threadName)s %(message)s",  # not made once: a key ``line`` does not fill
        "%(levelname)s %(asctime)s %(message)s",
    ],
)
def test_a_text_line_made_without_a_record_is_the_line_its_record_makes(fmt: str) -> None:
    # ``TextFormatter.line`` makes the text between the time and the message once per logger
    # and level when the format allows it; every line must still be the record's.
    import logging

    from referee.server import logs

    formatter = logs.TextFormatter(fmt)
    for created in (1_780_000_000.0, 1_780_000_000.123, 1_780_000_001.999):
        for level, name in ((logging.INFO, "referee.service"), (logging.WARNING, "referee.other")):
            record = logging.LogRecord(name, level, "", 0, "a 100% message", None, None)
            record.created, record.msecs = created, (created - int(created)) * 1000
            record.threadName = "MainThread"
            if "threadName" in fmt:
                continue  # a key the line does not know: only the record's way writes it
            line = formatter.line(created, logging.getLevelName(level), name, "a 100% message")
            assert line == formatter.format(record)
    assert (formatter._middle is None) == ("threadName" in fmt or not fmt.startswith("%(asctime)s"))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_second_stop_signal_while_stopping_never_kills_a_server_process(workers: str) -> None:
    """A server stopping (by its first SIGTERM) may get more: the terminal's Ctrl-C reaches every
    process of the group and the parent then sends each worker SIGTERM too. Until its last
    instruction no process may die of one: a worker killed by SIGTERM after it had drained made
    its parent exit 1 (its event loop, once closed, had put back SIGTERM's default, which kills)."""
    server, lines = _group_server(workers, jobs="1")
    reader = threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 30
    # Every process of the group, again and again, until the server is gone: each stage of the
    # stop (draining, the loop closing, the interpreter's exit) gets its share of signals.
    while server.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        time.sleep(0.002)
    server.wait(timeout=30)
    reader.join(timeout=10)
    text = "".join(lines)
    assert server.returncode == 0, text
    assert "Traceback" not in text, text


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.1])
def test_a_stop_signal_while_the_workers_start_stops_them_all(delay: float) -> None:
    """SIGTERM to the group at any instant after the parent's first line: before, while or after
    it forks its workers, before or after they serve. Every process stops and the parent exits 0.
    One that came before the first fork left the workers to be started and never told (the
    parent waited for ever); one that reached a worker just after its fork ran the parent's
    handler, inherited, and was lost there."""
    from servers import server_env

    server = subprocess.Popen(
        [sys.executable, "-m", "referee.server", "--port", "0", "--workers", "2", "--dispute-jobs", "1"],
        env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    assert server.stdout is not None
    first = server.stdout.readline()
    assert WORKERS.search(first), first
    time.sleep(delay)
    os.killpg(server.pid, signal.SIGTERM)
    try:
        out, _ = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        out, _ = server.communicate(timeout=10)
        pytest.fail(f"the server did not stop within 30 s of SIGTERM:\n{first}{out}")
    assert server.returncode == 0, first + out
    assert "Traceback" not in out, first + out
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # no process of the group is left (its jobs included)
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("a process of the server's group outlived it")
