"""Hostile clients and faults against real server processes: nothing a client does, and no process
that dies or hangs, takes the service down.

One test per attack or fault of the server side; each
asserts the attack is ended or refused as docs/operations.md says and that the service stays
available: health answers and a SolveHand is answered. Calls that a gRPC library would not make
(HEADERS and then nothing) go over raw HTTP/2 (``bench.stall``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cases import HEAVY_HAND
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servers import LISTENING, ROOT, WORKERS, ServerProcess, descendants, refused_start, server_env

from bench.stall import Staller
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="/proc, signals")]

SERVICE = "/remigio.referee.v1.RefereeService"
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()  # 33 points
CLOSE = pb.CheckCloseRequest(cards="7H 7H 7S 7S 7D 7D 7C 7C JK JK JK".split(), claimed_multiplier=10)
RECEIVE_TIMEOUT = 2.0
STREAM_IDLE = 2.0


class Server:
    """A server process with a channel to it, and what the tests ask of it."""

    def __init__(self, *args: str, workers: int = 1) -> None:
        self.process = ServerProcess("--port", "0", "--log-format", "json", "--workers", str(workers), *args)
        if workers > 1:
            self.parent = int(self.process.wait_for(WORKERS).group(3))
        listening = [self.process.wait_for(LISTENING) for _ in range(workers)]
        self.pids = [int(found.group(3)) for found in listening]
        self.address = f"127.0.0.1:{listening[0].group(2)}"
        self.channel = grpc.insecure_channel(self.address)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = referee_pb2_grpc.RefereeServiceStub(self.channel)

    def available(self, timeout: float = 10) -> bool:
        """Health says SERVING and a SolveHand is answered right, on a fresh connection."""
        with grpc.insecure_channel(self.address) as fresh:
            status = health_pb2_grpc.HealthStub(fresh).Check(health_pb2.HealthCheckRequest(), timeout=timeout).status
            stub = referee_pb2_grpc.RefereeServiceStub(fresh)
            reply = stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=timeout)
        return status == health_pb2.HealthCheckResponse.SERVING and reply.linking.points == 33

    def calls(self) -> list[dict[str, object]]:
        """The call log lines so far (JSON)."""
        return [json.loads(line) for line in list(self.process.lines) if line.startswith("{") and '"method"' in line]

    def close(self) -> None:
        """Close the channel and kill the server's processes."""
        self.channel.close()
        self.process.kill()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One server process for the attacks, with short timeouts so the tests see them act."""
    running = Server(
        "--dispute-jobs",
        "2",
        "--receive-timeout",
        str(RECEIVE_TIMEOUT),
        "--stream-idle-timeout",
        str(STREAM_IDLE),
        "--max-streams-per-client",
        "2",
    )
    yield running
    running.close()


def _health_latencies(address: str, count: int) -> list[float]:
    with grpc.insecure_channel(address) as fresh:
        health = health_pb2_grpc.HealthStub(fresh)
        health.Check(health_pb2.HealthCheckRequest(), timeout=10)  # connected before the clock
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
            latencies.append(time.perf_counter() - started)
    return sorted(latencies)


@contextlib.contextmanager
def _load(address: str, clients: int) -> Iterator[list[int]]:
    """``clients`` closed loops of SolveHand in another process (CP-SAT, a fresh hand each call,
    so no cache answers): the server's compute slots stay busy. Yields the process's answers."""
    script = (
        "import sys, threading, grpc\n"
        "from referee._gen.remigio.referee.v1 import referee_pb2 as pb, referee_pb2_grpc as g\n"
        "hand = '7H 7H 7S 7S 7D 7D 7C 2C KD JK JK'.split()\n"
        "def loop(n):\n"
        "    stub = g.RefereeServiceStub(grpc.insecure_channel(sys.argv[1], options=[('grpc.use_local_subchannel_pool', 1)]))\n"
        "    k = 0\n"
        "    while True:\n"
        "        k += 1\n"
        "        rules = pb.RuleOptions(joker_points=100 + n * 100000 + k, engine=pb.ENGINE_CPSAT)\n"
        "        try:\n"
        "            stub.SolveHand(pb.SolveHandRequest(cards=hand, rules=rules), timeout=30); print('ok', flush=True)\n"
        "        except grpc.RpcError as e:\n"
        "            print(e.code().name, flush=True)\n"
        f"for n in range({clients}): threading.Thread(target=loop, args=(n,), daemon=True).start()\n"
        "threading.Event().wait()\n"
    )
    load = subprocess.Popen(
        [sys.executable, "-c", script, address], cwd=ROOT, env=server_env(), stdout=subprocess.PIPE, text=True
    )
    answers: list[int] = []

    def count() -> None:
        assert load.stdout is not None
        for line in load.stdout:
            answers.append(line.strip() == "ok")

    reader = threading.Thread(target=count, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while sum(answers) < clients and time.monotonic() < deadline:  # the load is on
            time.sleep(0.05)
        yield answers
    finally:
        load.kill()
        load.wait(10)
        reader.join(5)


# Finding 1: stalled calls -------------------------------------------------------------------------


def test_stalled_calls_hold_nothing_and_end_after_the_receive_timeout(server: Server) -> None:
    # Two SolveHand calls with HEADERS and no DATA, one with half a message, an idle CheckDisputes
    # and an idle reflection stream, all on one connection that answers PINGs: what froze a
    # process of the thread-per-call server for as long as the connection lived.
    staller = Staller(server.address)
    try:
        unary = staller.stall(f"{SERVICE}/SolveHand", 2) + staller.stall(
            f"{SERVICE}/ScoreDeal", 1, partial=b"\x00\x00\x00\x40"
        )
        stream = staller.stall(f"{SERVICE}/CheckDisputes")
        staller.stall("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        started = time.monotonic()
        assert server.available(timeout=5)
        assert time.monotonic() - started < 2
        # The server ends them itself: DEADLINE_EXCEEDED (4) after the receive timeout, the idle
        # stream after its idle time.
        ended = staller.wait_ended(unary + stream, timeout=RECEIVE_TIMEOUT + STREAM_IDLE + 10)
        assert ended == {s: "4" for s in unary + stream}, ended
        assert time.monotonic() - started >= RECEIVE_TIMEOUT - 0.1
    finally:
        staller.close()
    assert server.available()


@pytest.mark.alone
def test_health_answers_fast_under_50_stalled_calls_and_full_load(server: Server) -> None:
    stallers = [Staller(server.address) for _ in range(5)]
    try:
        for staller in stallers:
            staller.stall(f"{SERVICE}/SolveHand", 10)
        with _load(server.address, clients=8) as answers:
            before = sum(answers)
            latencies = _health_latencies(server.address, 200)
            assert sum(answers) > before, "the load stopped"
    finally:
        for staller in stallers:
            staller.close()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    assert p99 < 0.1, f"health p99 {p99 * 1000:.1f} ms under load (max {latencies[-1] * 1000:.1f} ms)"
    assert server.available()


def test_a_connection_that_floods_pings_is_sent_away(server: Server) -> None:
    staller = Staller(server.address)
    try:
        for _ in range(5):
            staller.ping(3)
            if staller.goaway.wait(1):
                break
        assert staller.goaway.is_set(), "no GOAWAY after pings without calls"
    finally:
        staller.close()
    assert server.available()


def test_idle_and_old_connections_are_closed() -> None:
    ages = Server("--max-connection-idle", "1", "--max-connection-age", "2", "--max-connection-age-grace", "1")
    try:
        idle = Staller(ages.address)
        busy = Staller(ages.address)
        busy.stall(f"{SERVICE}/CheckDisputes")  # a call keeps it from being idle, not from aging
        started = time.monotonic()
        assert idle.goaway.wait(10), "an idle connection stayed open"
        assert busy.goaway.wait(10), "an old connection was not sent GOAWAY"
        assert busy.closed.wait(10), "an old connection outlived its grace"
        # Age (2 s, gRPC adds up to 10% jitter) plus grace (1 s), with room for a busy machine.
        assert 1.5 < time.monotonic() - started < 8
        idle.close()
        busy.close()
        assert ages.available()
    finally:
        ages.close()


# Finding 7: streams ------------------------------------------------------------------------------


def _blocked_cases(release: threading.Event) -> Iterator[pb.CheckDisputesRequest]:
    """A stream that sends nothing until ``release``."""
    release.wait(30)
    return
    yield  # pragma: no cover - a generator


def test_an_idle_stream_is_ended_and_unary_calls_go_on(server: Server) -> None:
    release = threading.Event()
    # Before the call: gRPC may have started the stream (and the server its idle clock) by the
    # time the call object is handed back, on a busy machine a fifth of a second later.
    started = time.monotonic()
    call = server.stub.CheckDisputes(_blocked_cases(release), timeout=30)
    try:
        assert server.available()
        with pytest.raises(grpc.RpcError) as ended:
            list(call)
        assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "idle" in ended.value.details()
        assert STREAM_IDLE - 0.1 <= time.monotonic() - started < STREAM_IDLE + 10
    finally:
        release.set()
    assert server.available()


def test_streams_beyond_the_cap_per_client_are_refused(server: Server) -> None:
    releases = [threading.Event() for _ in range(2)]
    held = [server.stub.CheckDisputes(_blocked_cases(release), timeout=30) for release in releases]
    try:
        time.sleep(0.3)  # both are in the servicer (each one has its slot)
        with pytest.raises(grpc.RpcError) as refused:
            list(server.stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="third", close=CLOSE)]), timeout=10))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "this client already runs 2" in refused.value.details()
        assert server.available()
    finally:
        for release, call in zip(releases, held):
            release.set()
            call.cancel()
    # The slots are given back as the streams end.
    deadline = time.monotonic() + 10
    while True:
        try:
            verdicts = list(
                server.stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="after", close=CLOSE)]), timeout=10)
            )
            break
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() < deadline
            time.sleep(0.1)
    assert [v.id for v in verdicts] == ["after"]


# Finding 8: logs ---------------------------------------------------------------------------------


def test_a_cancelled_call_is_logged_cancelled_without_a_traceback(server: Server) -> None:
    release = threading.Event()
    call = server.stub.CheckDisputes(_blocked_cases(release), timeout=30, metadata=(("x-request-id", "cancel-me"),))
    time.sleep(0.3)
    call.cancel()  # the stream's cases never end: only the cancel ends it
    try:
        deadline = time.monotonic() + 10
        while not (logged := [c for c in server.calls() if c["request_id"] == "cancel-me"]):
            assert time.monotonic() < deadline, "the cancelled call was never logged"
            time.sleep(0.05)
    finally:
        release.set()
    assert [c["code"] for c in logged] == ["CANCELLED"], logged
    # A unary call cancelled while the server waits for its request.
    staller = Staller(server.address)
    try:
        (stream,) = staller.stall(f"{SERVICE}/SolveHand", request_id="cancel-unary")
        time.sleep(0.3)
        staller.cancel(stream)
        deadline = time.monotonic() + 10
        while not (logged := [c for c in server.calls() if c["request_id"] == "cancel-unary"]):
            assert time.monotonic() < deadline, "the cancelled unary call was never logged"
            time.sleep(0.05)
    finally:
        staller.close()
    assert [c["code"] for c in logged] == ["CANCELLED"], logged
    assert not any("Traceback" in line for line in server.process.lines)


# Finding 10: what replies reveal -----------------------------------------------------------------


def test_replies_do_not_name_the_serving_process(server: Server) -> None:
    _, call = server.stub.SolveHand.with_call(pb.SolveHandRequest(cards=HAND), timeout=10)
    trailing = dict(call.trailing_metadata())
    assert "x-referee-pid" not in trailing and "x-request-id" in trailing
    with pytest.raises(grpc.RpcError) as refused:
        server.stub.SolveHand(pb.SolveHandRequest(cards=["ZZ"]), timeout=10)
    assert "x-referee-pid" not in dict(refused.value.trailing_metadata())


# Finding 3: a dispute job process dies -------------------------------------------------------------


def _cases(count: int, pause: float) -> Iterator[pb.CheckDisputesRequest]:
    for n in range(count):
        yield pb.CheckDisputesRequest(id=f"c{n}", close=CLOSE)
        time.sleep(pause)


def _lasting_cases(count: int) -> Iterator[pb.CheckDisputesRequest]:
    """Hand cases of tens of ms each: ``HEAVY_HAND`` on CP-SAT, with joker points no cache has seen."""
    for n in range(count):
        rules = pb.RuleOptions(joker_points=1 + n % 1000, engine=pb.ENGINE_CPSAT)
        yield pb.CheckDisputesRequest(id=f"h{n}", hand=pb.HandDispute(cards=HEAVY_HAND.split(), rules=rules))


def test_a_killed_dispute_job_fails_only_the_stream_that_lost_it(server: Server) -> None:
    # Warm: both job processes have started and judged.
    assert len(list(server.stub.CheckDisputes(_cases(40, 0), timeout=60))) == 40
    jobs = [pid for pid in descendants(server.pids[0]) if "spawn_main" in _cmdline(pid)]
    assert len(jobs) == 2, jobs
    other = server.stub.CheckDisputes(_cases(4, 0), timeout=30)  # ends before the kill
    assert len(list(other)) == 4
    # Cases that each keep a job busy, and both jobs killed: a stream with no case on a job that
    # dies goes on, its next case on the job's replacement, and on a busy machine one job could
    # hold none of the stream's cases at the instant it was killed (the stream then ran to its
    # deadline). Quick cases were judged as fast as a busy client sent them, one at a time.
    victim = server.stub.CheckDisputes(_lasting_cases(100_000), timeout=60)
    verdicts = 0
    with pytest.raises(grpc.RpcError) as lost:
        for _ in victim:
            verdicts += 1
            if verdicts == 4:
                for job in jobs:
                    os.kill(job, signal.SIGKILL)
    assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "dispute job process died" in lost.value.details()
    # The job is replaced: a new stream gets every verdict, and health never stopped saying SERVING.
    assert server.available()
    assert [v.id for v in server.stub.CheckDisputes(_cases(30, 0), timeout=60)] == [f"c{n}" for n in range(30)]
    jobs_now = [pid for pid in descendants(server.pids[0]) if "spawn_main" in _cmdline(pid)]
    assert len(jobs_now) == 2 and not set(jobs) & set(jobs_now)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# Finding 3: workers die or stop; finding 10: a second instance -----------------------------------


@pytest.fixture(scope="module")
def workers() -> Iterator[Server]:
    """Two supervised workers; a silent one is replaced after 2 s."""
    running = Server("--heartbeat-timeout", "2", "--grace", "2", workers=2)
    yield running
    running.close()


def _replacement(server: Server, gone: int, timeout: float) -> int:
    """The pid of the worker that listens in place of ``gone``."""
    found = server.process.wait_for(LISTENING, timeout=timeout)
    new = int(found.group(3))
    assert new != gone
    server.pids = [new if pid == gone else pid for pid in server.pids]
    return new


def _serves_throughout(server: Server, stop: threading.Event, failures: list[str]) -> None:
    """Calls on fresh connections (either worker may get each) until ``stop``; failures noted."""
    while not stop.is_set():
        try:
            server.available(timeout=5)
        except grpc.RpcError as error:
            failures.append(f"{error.code().name}: {error.details()}")
        time.sleep(0.05)


@pytest.mark.alone
def test_a_killed_worker_is_replaced_within_a_second_while_the_other_serves(workers: Server) -> None:
    victim = workers.pids[0]
    stop, failures = threading.Event(), []
    prober = threading.Thread(target=_serves_throughout, args=(workers, stop, failures), daemon=True)
    prober.start()
    try:
        time.sleep(0.3)
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        _replacement(workers, victim, timeout=10)
        # Forked at once; listening needs the fork, the server's start and one poll of the parent.
        assert time.monotonic() - killed < 3
        time.sleep(0.5)
    finally:
        stop.set()
        prober.join(10)
    # A connection the kernel had given to the dead worker may fail once; the service does not.
    assert len(failures) <= 2, failures
    assert workers.available()
    assert workers.process.proc.poll() is None


@pytest.mark.alone
def test_a_stopped_worker_is_killed_and_replaced(workers: Server) -> None:
    victim = workers.pids[1]
    os.kill(victim, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        _replacement(workers, victim, timeout=20)
        assert 1.5 < time.monotonic() - stopped < 12
        deadline = time.monotonic() + 5
        while Path(f"/proc/{victim}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{victim}").exists(), "the stopped worker is still there"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    assert any("no heartbeat" in line for line in workers.process.lines)
    assert workers.available()


@pytest.mark.parametrize("count", ["1", "2"])
def test_a_second_instance_on_a_port_in_use_refuses_to_start(workers: Server, count: str) -> None:
    port = workers.address.rsplit(":", 1)[1]
    second = refused_start("--host", "127.0.0.1", "--port", port, "--workers", count)
    assert second.returncode == 1
    assert "already in use" in second.stderr
    assert "listening" not in second.stderr
    assert workers.available()


def test_sigterm_still_drains_and_exits_0_after_the_faults(workers: Server) -> None:
    assert workers.available()
    workers.process.proc.send_signal(signal.SIGTERM)
    assert workers.process.proc.wait(timeout=30) == 0
    for pid in workers.pids:
        assert not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text()


# Finding 9: no writable temporary directory ------------------------------------------------------


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_the_server_needs_no_writable_temporary_directory(tmp_path: Path) -> None:
    # A mount namespace of its own where /tmp, /var/tmp and the working directory are read-only,
    # as in a container with a read-only root file system: tempfile finds no usable directory.
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    # The checkout and the Python environment may themselves live under /tmp (a clone there): each
    # is held at /mnt first and bound back into the new, empty /tmp before that is made read-only.
    script = (
        "set -e; mount -t tmpfs tmpfs /mnt; mkdir /mnt/checkout /mnt/prefix; "
        'mount --bind "$0" /mnt/checkout; mount --bind "$2" /mnt/prefix; '
        "mount -t tmpfs tmpfs /tmp; mount -t tmpfs -o ro tmpfs /var/tmp; "
        'mkdir -p "$0" "$2" 2>/dev/null || true; mount --bind /mnt/checkout "$0"; mount --bind /mnt/prefix "$2"; '
        "mount -o remount,ro /tmp; "
        'mount -o remount,bind,ro "$0"; cd "$0"; '
        'python3 -c "import tempfile; tempfile.mkdtemp()" 2>/dev/null && exit 3; '
        'exec "$1" -m referee.server --host 127.0.0.1 --port 0 --dispute-jobs 2 --log-format json'
    )
    process = subprocess.Popen(
        ["unshare", "-rm", "sh", "-c", script, str(ROOT), sys.executable, sys.prefix],
        env={**server_env(), "PYTHONDONTWRITEBYTECODE": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line, f"the server exited ({process.poll()})"
            if found := LISTENING.search(line):
                port = found.group(2)
        address = f"127.0.0.1:{port}"
        with grpc.insecure_channel(address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            verdicts = list(stub.CheckDisputes(_cases(20, 0), timeout=60))
            assert [v.outcome for v in verdicts] == [pb.DISPUTE_OUTCOME_CONFIRMED] * 20
            assert stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10).linking.points == 33
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("git") is None, reason="needs unshare(1) and git")
def test_the_read_only_tmp_test_passes_from_a_clone_under_tmp(tmp_path: Path) -> None:
    # Where a fresh clone lands by default: under the temporary directory the test mounts over.
    clone = Path(tempfile.mkdtemp(prefix="referee-clone-", dir="/tmp"))
    try:
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
        # The test as the working tree has it now (a clone holds what is committed).
        shutil.copy2(Path(__file__), clone / "tests" / "server" / "test_hostile.py")
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/server/test_hostile.py",
             "-k", "needs_no_writable_temporary_directory", "--basetemp", str(tmp_path / "base")],
            cwd=clone, env=server_env(), capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


# Health tells the truth ----------------------------------------------------------------------------


def test_health_says_not_serving_while_dispute_jobs_cannot_start(tmp_path: Path) -> None:
    # Every dispute job process dies as it starts (a sitecustomize that exits in spawned children):
    # the process cannot judge a case, so health says NOT_SERVING and a stream ends UNAVAILABLE.
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\nif '--multiprocessing-fork' in sys.argv and os.environ.get('REFEREE_TEST_JOBS_DIE'):\n"
        "    os._exit(3)\n"
    )
    env = {**server_env(), "PYTHONPATH": str(tmp_path), "REFEREE_TEST_JOBS_DIE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "referee.server", "--host", "127.0.0.1", "--port", "0", "--dispute-jobs", "2"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        while not (found := LISTENING.search(process.stderr.readline() or "exited")):
            assert process.poll() is None, "the server exited"
        address = f"127.0.0.1:{found.group(2)}"
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            deadline = time.monotonic() + 20
            while health.Check(health_pb2.HealthCheckRequest(), timeout=5).status != 2:  # NOT_SERVING
                assert time.monotonic() < deadline, "health kept saying SERVING"
                time.sleep(0.1)
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            with pytest.raises(grpc.RpcError) as lost:
                list(stub.CheckDisputes(_cases(3, 0), timeout=30))
            assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
            # The unary calls, which need no job process, are still answered.
            assert stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=10).linking.points == 33
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
