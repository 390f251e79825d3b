"""Metrics: ``serve --metrics-port`` scraped from real server processes after known calls.

The text is parsed with prometheus_client's own parser; counts are exact (the scrape is retried
until the last call has been recorded, then must not change), labels are gRFC A66's, and the
two workers' counts are summed in the parent.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from servers import LISTENING, METRICS, WORKERS, refused_start

from referee import __version__
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.game.cards import parse_cards
from referee.game.linking import best_linking, forget_linkings, linkings_observer
from referee.game.rules import RuleSet
from referee.server import metrics
from referee.server.config import add_arguments

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT workers")]

SERVICE = "remigio.referee.v1.RefereeService"
HAND = "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample at ``url``, keyed by sample name and labels."""
    # No proxy from the environment: the server is on loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as reply:
        assert reply.headers.get_content_type() == "text/plain"
        text = reply.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when it is absent (a counter not yet incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def scrape_until(url: str, done: Callable[[Samples], bool], timeout: float = 20) -> Samples:
    """Scrape until ``done`` holds (the server records a call as it ends, maybe just after the
    client has its reply); fail with the last scrape after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if done(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"the metrics never got there: {samples}")
        time.sleep(0.1)


def solve_on_fresh_connections(
    address: str, until: Callable[[set[str]], bool] | None = None, limit: int = 200
) -> dict[str, int]:
    """SolveHand calls, each on a fresh connection (which the kernel may give to either worker),
    until ``until(pids seen)``, or ``limit`` of them when there is no ``until``; the calls each
    worker process answered."""
    answered: dict[str, int] = {}
    for _ in range(limit):
        with grpc.insecure_channel(address) as chan:
            reply, call = referee_pb2_grpc.RefereeServiceStub(chan).SolveHand.with_call(
                pb.SolveHandRequest(cards=HAND), timeout=20, wait_for_ready=True
            )
        assert reply.linking.points == 9
        pid = dict(call.trailing_metadata())["x-referee-pid"]
        answered[pid] = answered.get(pid, 0) + 1
        if until is not None and until(set(answered)):
            return answered
    if until is None:
        return answered
    raise AssertionError(f"calls reached only {answered}")


DISPUTES = [
    pb.CheckDisputesRequest(id="confirmed", hand=pb.HandDispute(cards="AH 2H 3H".split(), claimed_points=0)),
    pb.CheckDisputesRequest(id="wrong", hand=pb.HandDispute(cards="AH 2H 3H".split(), claimed_points=5)),
    pb.CheckDisputesRequest(id="no-claim", hand=pb.HandDispute(cards="5C 5D 9S".split())),
    pb.CheckDisputesRequest(id="malformed", hand=pb.HandDispute(cards=["ZZ"], claimed_points=0)),
]


def test_two_workers_counted_exactly_and_summed(launch, tmp_path: Path) -> None:
    server = launch(
        "--port",
        "0",
        "--workers",
        "2",
        "--metrics-port",
        "0",
        "--runtime-dir",
        str(tmp_path),
        "--grace",
        "2",
        "--debug-pid",
    )
    url = server.wait_for(METRICS).group(1)
    address = f"127.0.0.1:{server.wait_for(WORKERS).group(2)}"
    workers = {server.wait_for(LISTENING).group(3), server.wait_for(LISTENING).group(3)}

    answered = solve_on_fresh_connections(address, until=lambda seen: seen == workers)
    solved = sum(answered.values())
    with grpc.insecure_channel(address) as chan:
        stub = referee_pb2_grpc.RefereeServiceStub(chan)
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as refused:
                stub.SolveHand(pb.SolveHandRequest(cards=["ZZ"]), timeout=20)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        verdicts = list(stub.CheckDisputes(iter(DISPUTES), timeout=30))
    assert [v.id for v in verdicts] == [case.id for case in DISPUTES]

    solve, disputes = f"{SERVICE}/SolveHand", f"{SERVICE}/CheckDisputes"
    samples = scrape_until(
        url,
        lambda s: (
            value(s, "grpc_server_call_duration_seconds_count", grpc_method=disputes, grpc_status="OK") == 1
            and value(s, "grpc_server_call_duration_seconds_count", grpc_method=solve, grpc_status="INVALID_ARGUMENT")
            == 3
        ),
    )
    # gRFC A66: calls started by method, durations by method and final status.
    assert value(samples, "grpc_server_call_started_total", grpc_method=solve) == solved + 3
    assert value(samples, "grpc_server_call_started_total", grpc_method=disputes) == 1
    assert value(samples, "grpc_server_call_duration_seconds_count", grpc_method=solve, grpc_status="OK") == solved
    assert (
        value(samples, "grpc_server_call_duration_seconds_bucket", grpc_method=solve, grpc_status="OK", le="+Inf")
        == solved
    )
    statuses = {
        dict(labels)["grpc_status"] for name, labels in samples if name == "grpc_server_call_duration_seconds_count"
    }
    assert statuses == {"OK", "INVALID_ARGUMENT"}
    # The referee's own.
    for outcome in ("CONFIRMED", "WRONG", "NO_CLAIM", "MALFORMED"):
        assert value(samples, "referee_dispute_cases_total", outcome=outcome) == 1, outcome
    assert value(samples, "referee_calls_in_flight", grpc_method=solve) == 0
    assert value(samples, "referee_workers_up") == 2
    assert value(samples, "referee_worker_restarts_total") == 0
    # A worker answers the repeated hand once from a solve or the linking cache, and again with
    # the reply it remembers; the three readable dispute cases looked the linking cache up once
    # each. Each worker solved the hand once at most, and every miss was an engine's solve.
    hits, misses, remembered = (
        value(samples, "referee_linking_cache_hits_total"),
        value(samples, "referee_linking_cache_misses_total"),
        value(samples, "referee_replies_remembered_total"),
    )
    assert hits + misses + remembered == solved + 3
    assert remembered == solved - 2
    assert 2 <= misses <= 4
    assert value(samples, "referee_solve_duration_seconds_count", engine="cpsat") == misses
    # Nothing counted twice: a later scrape says the same (of the referee's own and gRPC's; the
    # standard collectors read the parent as it is at each scrape).
    assert ours(scrape(url)) == ours(samples)

    # The files live in the server's own directory under --runtime-dir, removed when it stops.
    (directory,) = tmp_path.iterdir()
    assert directory.name == f"remigio-metrics-{server.proc.pid}"
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    assert list(tmp_path.iterdir()) == []


def socket_holders(port: int) -> set[int]:
    """The pids of the processes holding an IPv4 socket that listens on ``port``."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    holders = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:  # gone, or not ours to read
            continue
        if links & inodes:
            holders.add(int(pid))
    return holders


def test_a_restarted_workers_counts_are_neither_lost_nor_doubled(launch, tmp_path: Path) -> None:
    server = launch(
        "--port", "0", "--workers", "2", "--debug-pid", "--metrics-port", "0", "--runtime-dir", str(tmp_path)
    )
    url = server.wait_for(METRICS).group(1)
    address = f"127.0.0.1:{server.wait_for(WORKERS).group(2)}"
    workers = [int(server.wait_for(LISTENING).group(3)), int(server.wait_for(LISTENING).group(3))]
    solve = f"{SERVICE}/SolveHand"

    def calls(samples: Samples) -> float:
        return value(samples, "grpc_server_call_duration_seconds_count", grpc_method=solve, grpc_status="OK")

    before = sum(solve_on_fresh_connections(address, limit=12).values())
    scrape_until(url, lambda s: calls(s) == before)

    os.kill(workers[0], signal.SIGKILL)
    replaced = scrape_until(url, lambda s: value(s, "referee_worker_restarts_total") == 1, timeout=30)
    server.wait_for(LISTENING)  # the new worker serves
    replaced = scrape_until(url, lambda s: value(s, "referee_workers_up") == 2, timeout=30)
    assert calls(replaced) == before  # the dead worker's calls are still counted
    assert value(replaced, "grpc_server_call_started_total", grpc_method=solve) == before
    assert value(replaced, "referee_calls_in_flight", grpc_method=solve) == 0

    # Only the parent holds the metrics port: not the first workers, nor the one forked later.
    holders = socket_holders(int(url.rsplit(":", 1)[1].split("/")[0]))
    assert holders == {server.proc.pid}, holders

    after = sum(solve_on_fresh_connections(address, limit=12).values())
    done = scrape_until(url, lambda s: calls(s) >= before + after)
    assert calls(done) == before + after  # and the new worker's are counted once
    assert value(done, "grpc_server_call_started_total", grpc_method=solve) == before + after


def ours(samples: Samples) -> Samples:
    """The samples of the server's own metrics, without the standard collectors'."""
    return {key: found for key, found in samples.items() if not key[0].startswith(STANDARD_PREFIXES)}


STANDARD_PREFIXES = ("process_", "python_")


def test_the_parent_serves_the_standard_process_and_python_collectors(launch, tmp_path: Path) -> None:
    server = launch("--port", "0", "--workers", "2", "--metrics-port", "0", "--runtime-dir", str(tmp_path))
    url = server.wait_for(METRICS).group(1)
    parent = int(server.wait_for(WORKERS).group(3))
    samples = scrape(url)
    names = {name for name, _ in samples}
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
        "process_max_fds",
        "python_info",
        "python_gc_objects_collected_total",
        "python_gc_collections_total",
    ):
        assert name in names, name
    # They read the parent, the process that serves /metrics: its start time and memory.
    started = Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[19]
    boot = next(
        float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
    )
    ticks = os.sysconf("SC_CLK_TCK")
    assert abs(value(samples, "process_start_time_seconds") - (boot + int(started) / ticks)) < 2
    assert value(samples, "process_resident_memory_bytes") > 10e6
    (info,) = [labels for name, labels in samples if name == "python_info"]
    assert dict(info)["implementation"] == "CPython"
    # The build that serves, among them: the parent sets it with its first count of the workers
    # running, which may follow the start-up lines by a poll on a busy machine.
    deadline = time.monotonic() + 10
    while value(samples, "referee_build_info", version=__version__, api="v1") != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        samples = scrape(url)
    assert value(samples, "referee_build_info", version=__version__, api="v1") == 1


def test_one_process_serves_metrics_of_its_own(launch, tmp_path: Path) -> None:
    server = launch("--port", "0", "--metrics-port", "0", "--runtime-dir", str(tmp_path))
    url = server.wait_for(METRICS).group(1)
    server.listening()
    with grpc.insecure_channel(server.address) as chan:
        referee_pb2_grpc.RefereeServiceStub(chan).SolveHand(pb.SolveHandRequest(cards=HAND), timeout=20)
    samples = scrape_until(
        url,
        lambda s: (
            value(s, "grpc_server_call_duration_seconds_count", grpc_method=f"{SERVICE}/SolveHand", grpc_status="OK")
            == 1
        ),
    )
    assert value(samples, "referee_workers_up") == 1
    assert value(samples, "grpc_server_call_started_total", grpc_method=f"{SERVICE}/SolveHand") == 1


def test_metrics_are_off_by_default(launch, tmp_path: Path) -> None:
    server = launch("--port", "0", "--runtime-dir", str(tmp_path), "--workers", "2")
    address = f"127.0.0.1:{server.wait_for(WORKERS).group(2)}"
    server.wait_for(LISTENING)
    with grpc.insecure_channel(address) as chan:
        referee_pb2_grpc.RefereeServiceStub(chan).SolveHand(
            pb.SolveHandRequest(cards=HAND), timeout=20, wait_for_ready=True
        )
    assert not any(METRICS.search(line) for line in server.lines)
    assert list(tmp_path.iterdir()) == []  # no process wrote a file


def test_the_metrics_port_comes_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMIGIO_METRICS_PORT", "9464")
    monkeypatch.setenv("REMIGIO_RUNTIME_DIR", "/run/referee")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    assert (args.metrics_port, args.runtime_dir) == (9464, "/run/referee")
    assert parser.parse_args(["--metrics-port", "9100"]).metrics_port == 9100
    monkeypatch.delenv("REMIGIO_METRICS_PORT")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).metrics_port is None


def serve_and_fail(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``serve`` with ``args`` where it must refuse to start; its exit status and stderr."""
    return refused_start("--host", "127.0.0.1", "--port", "0", *args)


def test_a_bad_metrics_port_is_a_usage_error_naming_it() -> None:
    done = serve_and_fail("--metrics-port", "http")
    assert done.returncode == 2
    assert "--metrics-port" in done.stderr and "'http'" in done.stderr


def test_a_runtime_dir_that_cannot_be_written_stops_the_start_naming_it(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    done = serve_and_fail("--metrics-port", "0", "--runtime-dir", str(blocked))
    assert done.returncode == 1
    assert repr(str(blocked)) in done.stderr and "--runtime-dir" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_metrics_port_in_use_stops_the_start_and_leaves_no_files(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve_and_fail("--metrics-port", str(port), "--runtime-dir", str(tmp_path))
    assert done.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert list(tmp_path.iterdir()) == []


# The metrics module in this process --------------------------------------------------------------


@pytest.fixture
def metrics_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Metrics on in this process, in a directory under ``tmp_path``; off again afterwards."""
    monkeypatch.delenv(metrics.DIRECTORY_ENV, raising=False)
    directory = metrics.enable(str(tmp_path))
    try:
        yield directory
    finally:
        metrics.disable()


def test_enable_removes_directories_of_servers_that_are_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"remigio-metrics-{int(gone.stdout)}"
    stale.mkdir()
    (stale / "counter_1.db").write_bytes(b"old")
    running = tmp_path / f"remigio-metrics-{os.getppid()}"  # a live process's: left alone
    running.mkdir()
    monkeypatch.delenv(metrics.DIRECTORY_ENV, raising=False)
    directory = metrics.enable(str(tmp_path))
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([directory.name, running.name])
        assert os.environ[metrics.DIRECTORY_ENV] == str(directory)
    finally:
        metrics.disable()
    assert not directory.exists() and metrics.DIRECTORY_ENV not in os.environ


def test_the_linking_cache_and_engines_report_to_the_metrics(metrics_here: Path) -> None:
    from prometheus_client import CollectorRegistry, multiprocess

    rules = RuleSet()
    hand = parse_cards("4C 5C 6C 8D 8H 8S JD".split())
    forget_linkings()
    for _ in range(3):
        best_linking(hand, rules)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(metrics_here))
    assert registry.get_sample_value("referee_linking_cache_misses_total") == 1
    assert registry.get_sample_value("referee_linking_cache_hits_total") == 2
    assert registry.get_sample_value("referee_solve_duration_seconds_count", {"engine": "cpsat"}) == 1


def test_with_metrics_off_nothing_observes_the_linkings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metrics.DIRECTORY_ENV, raising=False)
    metrics.disable()
    metrics.call_started(f"{SERVICE}/SolveHand")  # no-ops, and no error
    metrics.call_ended(f"{SERVICE}/SolveHand", "OK", 0.01)
    metrics.ready()
    assert linkings_observer() is None


def test_auth_failures_and_quota_refusals_are_counted_by_key_name(launch, tmp_path: Path) -> None:
    from referee.server.access import keygen_lines

    limited, limited_line = keygen_lines("alice", rate=0.01)  # one call, then one per 100 s
    free, free_line = keygen_lines("bob")
    keys = tmp_path / "keys"
    keys.write_text(f"{limited_line}\n{free_line}\n")
    runtime = tmp_path / "run"
    server = launch("--port", "0", "--api-keys", str(keys), "--metrics-port", "0", "--runtime-dir", str(runtime))
    url = server.wait_for(METRICS).group(1)
    server.listening()

    def code(key: str | None) -> grpc.StatusCode:
        metadata = (("authorization", f"Bearer {key}"),) if key else ()
        try:
            stub.SolveHand(pb.SolveHandRequest(cards=HAND), metadata=metadata, timeout=20)
        except grpc.RpcError as error:
            return error.code()
        return grpc.StatusCode.OK

    with grpc.insecure_channel(server.address) as chan:
        stub = referee_pb2_grpc.RefereeServiceStub(chan)
        unknown = [code(None), code(None), code("not-a-key")]
        alice = [code(limited) for _ in range(4)]
        bob = [code(free) for _ in range(2)]
    assert unknown == [grpc.StatusCode.UNAUTHENTICATED] * 3
    assert alice == [grpc.StatusCode.OK] + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3
    assert bob == [grpc.StatusCode.OK] * 2

    solve = f"{SERVICE}/SolveHand"
    samples = scrape_until(
        url, lambda s: value(s, "grpc_server_call_duration_seconds_count", grpc_method=solve, grpc_status="OK") == 3
    )
    assert value(samples, "referee_auth_failures_total", key="-") == 3  # no key, or a key nobody has
    assert value(samples, "referee_quota_refusals_total", key="alice") == 3
    assert value(samples, "referee_quota_refusals_total", key="bob") == 0
    refused = value(
        samples, "grpc_server_call_duration_seconds_count", grpc_method=solve, grpc_status="RESOURCE_EXHAUSTED"
    )
    assert refused == 3


def test_the_certificates_expiry_and_failed_reloads_are_metrics(metrics_here: Path, tmp_path: Path) -> None:
    import datetime

    import trustme
    from cryptography import x509
    from prometheus_client import CollectorRegistry, multiprocess

    from referee.server.access import KeyRing
    from referee.server.tls import ServerCertificates, TlsFiles

    def sample(name: str, **labels: str) -> float | None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(metrics_here))
        return registry.get_sample_value(name, labels)

    def certificate(stem: str, not_after: datetime.datetime) -> float:
        leaf = trustme.CA().issue_cert("localhost", not_after=not_after)
        leaf.private_key_pem.write_to_path(tmp_path / f"{stem}-key.pem")
        pem = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        (tmp_path / f"{stem}.pem").write_bytes(pem)
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()

    first = certificate("server", datetime.datetime(2031, 5, 6, 7, 8, 9, tzinfo=datetime.UTC))
    files = TlsFiles(tmp_path / "server.pem", tmp_path / "server-key.pem")
    certificates = ServerCertificates(files, check_seconds=0)
    expiry = "referee_tls_certificate_expiry_timestamp_seconds"
    assert sample(expiry) == first == datetime.datetime(2031, 5, 6, 7, 8, 9, tzinfo=datetime.UTC).timestamp()
    assert sample("referee_reload_failures_total", file="tls") == 0
    # A rotation: the new certificate's expiry.
    second = certificate("next", datetime.datetime(2032, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    (tmp_path / "next-key.pem").replace(files.key)
    (tmp_path / "next.pem").replace(files.cert)
    assert certificates.fetch() is not None
    assert sample(expiry) == second
    # A certificate without its key does not load: counted, and the expiry stays the served one's.
    certificate("third", datetime.datetime(2033, 1, 1, tzinfo=datetime.UTC))
    (tmp_path / "third.pem").replace(files.cert)
    assert certificates.fetch() is None
    assert sample("referee_reload_failures_total", file="tls") == 1
    assert sample(expiry) == second

    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice {'0' * 64}\n")
    ring = KeyRing(keys)
    assert sample("referee_reload_failures_total", file="api_keys") == 0
    keys.write_text("alice not-a-hash\n")
    assert not ring.reload()
    assert sample("referee_reload_failures_total", file="api_keys") == 1
    keys.write_text(f"bob {'1' * 64}\n")
    assert ring.reload()
    assert sample("referee_reload_failures_total", file="api_keys") == 1
