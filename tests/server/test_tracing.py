"""Tracing: ``serve --otlp-endpoint URL`` makes each call a server span that continues the caller's
``traceparent``, sent over OTLP/gRPC to a collector (here a stub collector on loopback), and the
call's log line carries the trace id. The OpenTelemetry packages are the ``otel`` extra, installed
by the dev set-up; without them these tests are skipped.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from servers import ServerProcess, refused_start, server_env

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server import tracing

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", reason="the otel extra is not installed")

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

SERVICE = "remigio.referee.v1.RefereeService"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
HAND = "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector on loopback that keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, object], object]] = []  # (resource attributes, span)
        self._arrived = threading.Condition()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):  # noqa: N802 - the OTLP method's name
        """Keep the spans of one export."""
        with self._arrived:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend((resource, span) for span in scope_spans.spans)
            self._arrived.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, count: int, timeout: float = 30) -> list:
        """The spans, once at least ``count`` have arrived (the server exports every second)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.spans) >= count, timeout=timeout):
                raise AssertionError(f"{len(self.spans)} spans arrived, not {count}")
            return list(self.spans)


def _value(value) -> object:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    stub = Collector()
    yield stub
    stub.server.stop(0)


def attributes(span) -> dict[str, object]:
    """A span's attributes as a dict."""
    return {a.key: _value(a.value) for a in span.attributes}


def test_each_call_is_a_server_span_continuing_the_callers_trace(collector: Collector) -> None:
    endpoint = f"http://127.0.0.1:{collector.port}"
    server = ServerProcess("--port", "0", "--otlp-endpoint", endpoint, "--log-format", "json").listening()
    try:
        with grpc.insecure_channel(server.address) as chan:
            stub = referee_pb2_grpc.RefereeServiceStub(chan)
            stub.SolveHand(
                pb.SolveHandRequest(cards=HAND),
                metadata=(("traceparent", TRACEPARENT), ("x-request-id", "traced")),
                timeout=20,
            )
            with pytest.raises(grpc.RpcError):
                stub.SolveHand(pb.SolveHandRequest(cards=["ZZ"]), metadata=(("x-request-id", "fresh"),), timeout=20)
            verdicts = list(
                stub.CheckDisputes(
                    iter([pb.CheckDisputesRequest(id="a", hand=pb.HandDispute(cards=HAND, claimed_points=9))]),
                    metadata=(("traceparent", TRACEPARENT), ("x-request-id", "stream")),
                    timeout=20,
                )
            )
        assert [v.outcome for v in verdicts] == [pb.DISPUTE_OUTCOME_CONFIRMED]
        spans = collector.wait_for(3)
    finally:
        server.terminate()

    by_name: dict[str, list] = {}
    for resource, span in spans:
        assert resource["service.name"] == "remigio-referee"
        by_name.setdefault(span.name, []).append(span)
    solved, refused = sorted(by_name[f"{SERVICE}/SolveHand"], key=lambda s: attributes(s)["rpc.grpc.status_code"])
    (stream,) = by_name[f"{SERVICE}/CheckDisputes"]

    # The caller's trace goes on: same trace id, the caller's span as parent.
    for span in (solved, stream):
        assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
        assert span.kind == span.SPAN_KIND_SERVER
    assert attributes(solved) == {
        "rpc.system": "grpc",
        "rpc.service": SERVICE,
        "rpc.method": "SolveHand",
        "rpc.grpc.status_code": 0,
    }
    # A call with no traceparent starts a trace of its own; the client's error is no server error.
    assert refused.trace_id.hex() != TRACE_ID and not refused.parent_span_id
    assert attributes(refused)["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert refused.status.code != refused.status.STATUS_CODE_ERROR
    assert solved.end_time_unix_nano > solved.start_time_unix_nano

    # The log line of each call names its trace.
    logged = {
        entry["request_id"]: entry
        for entry in (json.loads(line) for line in server.lines if line.startswith("{"))
        if "request_id" in entry
    }
    assert logged["traced"]["trace_id"] == TRACE_ID
    assert logged["stream"]["trace_id"] == TRACE_ID
    assert logged["fresh"]["trace_id"] == refused.trace_id.hex()


def test_without_the_flag_no_span_and_no_trace_id_in_the_log(collector: Collector) -> None:
    server = ServerProcess("--port", "0", "--log-format", "json").listening()
    try:
        with grpc.insecure_channel(server.address) as chan:
            referee_pb2_grpc.RefereeServiceStub(chan).SolveHand(
                pb.SolveHandRequest(cards=HAND), metadata=(("traceparent", TRACEPARENT),), timeout=20
            )
        deadline = time.monotonic() + 10
        while not any('"request_id"' in line for line in server.lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.terminate()
    calls = [json.loads(line) for line in server.lines if line.startswith("{") and '"request_id"' in line]
    assert calls and all("trace_id" not in call for call in calls)
    assert collector.spans == []


@pytest.mark.parametrize("endpoint", ["127.0.0.1:4317", "ftp://collector:4317", "http://", "http://host:port"])
def test_a_bad_endpoint_is_a_usage_error_naming_it(endpoint: str) -> None:
    done = refused_start("--port", "0", "--otlp-endpoint", endpoint)
    assert done.returncode == 2
    assert "--otlp-endpoint" in done.stderr and repr(endpoint) in done.stderr


def test_span_status_follows_the_grpc_conventions() -> None:
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    try:
        for status in ("OK", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "INTERNAL", "CANCELLED"):
            span = tracing.begin(f"{SERVICE}/CheckClose", [("traceparent", TRACEPARENT)])
            assert span is not None and span.trace_id == TRACE_ID
            span.end(status)
    finally:
        tracing.shutdown()
    assert tracing.begin(f"{SERVICE}/CheckClose", ()) is None  # off again
    finished = exporter.get_finished_spans()
    assert [s.kind for s in finished] == [SpanKind.SERVER] * 5
    assert [s.status.status_code for s in finished] == [
        StatusCode.UNSET,
        StatusCode.UNSET,
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert [s.attributes["rpc.grpc.status_code"] for s in finished] == [0, 3, 4, 13, 1]
    assert {format(s.parent.span_id, "016x") for s in finished} == {PARENT_ID}


def test_a_malformed_traceparent_starts_a_fresh_trace() -> None:
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    try:
        span = tracing.begin(f"{SERVICE}/SolveHand", [("traceparent", "00-not-a-trace-01")])
        assert span is not None
        span.end("OK")
    finally:
        tracing.shutdown()
    (finished,) = exporter.get_finished_spans()
    assert finished.parent is None and format(finished.context.trace_id, "032x") == span.trace_id


BLOCK_OPENTELEMETRY = """
import sys


class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ImportError(f"no module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, NoOpenTelemetry())
from referee.server.process import main

sys.exit(main())
"""


def test_without_the_otel_extra_the_flag_stops_the_start_naming_the_extra() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", BLOCK_OPENTELEMETRY, "--port", "0", "--otlp-endpoint", "http://127.0.0.1:4317"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "pip install 'remigio-referee[otel]'" in done.stderr and "Traceback" not in done.stderr
