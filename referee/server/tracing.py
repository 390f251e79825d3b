"""Tracing: with ``serve --otlp-endpoint URL`` each call is an OpenTelemetry server span, sent to an
OTLP collector over gRPC.

A span continues the caller's trace when the call's metadata carries a W3C ``traceparent`` (and
``tracestate``), and starts a trace of its own otherwise; its trace id is written in the call's
log line. The span is named as gRPC's own instrumentation names it,
``remigio.referee.v1.RefereeService/SolveHand``, with the ``rpc.*`` attributes of OpenTelemetry's
semantic conventions and the status code the client got.

The OpenTelemetry packages are an extra (``pip install 'remigio-referee[otel]'``): nothing here
imports them until ``configure`` runs, so a server without ``--otlp-endpoint`` needs none of them.
Each server process configures its own provider after it has started (the exporter's thread
and channel do not survive a fork), and flushes it when it stops (``shutdown``).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

import grpc

from referee import __version__

SERVICE_NAME = "remigio-referee"
TRACEPARENT_KEYS = ("traceparent", "tracestate")
# Server spans of calls that ended with these are errors (OpenTelemetry's gRPC conventions: the
# client's own mistakes, INVALID_ARGUMENT and the like, are not the server's errors).
SERVER_ERRORS = frozenset({"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"})

MISSING = "--otlp-endpoint needs the OpenTelemetry packages: pip install 'remigio-referee[otel]'"
# The most a worker waits for the collector, per export and when it stops.
EXPORT_TIMEOUT_SECONDS = 5

_tracer: Any = None
_provider: Any = None


class TracingUnavailable(RuntimeError):
    """``--otlp-endpoint`` was given but the OpenTelemetry packages are not installed."""


def available() -> bool:
    """Whether the OpenTelemetry SDK and its OTLP exporter are installed."""
    try:
        import opentelemetry.exporter.otlp.proto.grpc.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def configure(endpoint: str | None = None, *, exporter: Any = None) -> None:
    """Trace every call of this process from now on: spans go to the OTLP collector at
    ``endpoint``, or to ``exporter`` (a test's in-memory one)."""
    global _tracer, _provider
    if not available():
        raise TracingUnavailable(MISSING)
    import os

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create(
        {"service.name": SERVICE_NAME, "service.version": __version__, "process.pid": os.getpid()}
    )
    provider = TracerProvider(resource=resource)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        assert endpoint is not None
        insecure = urllib.parse.urlsplit(endpoint).scheme == "http"
        # Batched: a call never waits for the collector; spans go out every second or so.
        provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=endpoint, insecure=insecure, timeout=EXPORT_TIMEOUT_SECONDS),
                schedule_delay_millis=1000,
                export_timeout_millis=EXPORT_TIMEOUT_SECONDS * 1000,
            )
        )
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _provider = provider
    _tracer = provider.get_tracer("referee.service", __version__)


def shutdown() -> None:
    """Send the spans still waiting and stop tracing (a server process, as it stops)."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether calls of this process are traced."""
    return _tracer is not None


class CallSpan:
    """The server span of one call, begun when the call is and ended with its final status."""

    __slots__ = ("_span", "trace_id")

    def __init__(self, span: Any) -> None:
        self._span = span
        self.trace_id = format(span.get_span_context().trace_id, "032x")

    def end(self, status: str) -> None:
        """End the span with the status code (its name) the client got."""
        from opentelemetry.trace import Status, StatusCode

        code = grpc.StatusCode.__members__.get(status, grpc.StatusCode.UNKNOWN)
        self._span.set_attribute("rpc.grpc.status_code", code.value[0])
        if status in SERVER_ERRORS:
            self._span.set_status(Status(StatusCode.ERROR, status))
        self._span.end()


def begin(method: str, metadata: Iterable[tuple[str, str | bytes]] | None) -> CallSpan | None:
    """The server span of a call to ``method`` (``package.Service/Method``) that continues the
    caller's trace from ``metadata``; None when tracing is off."""
    tracer = _tracer
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {key: value for key, value in metadata or () if key in TRACEPARENT_KEYS and isinstance(value, str)}
    parent = TraceContextTextMapPropagator().extract(carrier) if carrier else None
    service, _, name = method.partition("/")
    span = tracer.start_span(
        method,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
    )
    return CallSpan(span)


__all__ = [
    "CallSpan",
    "TracingUnavailable",
    "available",
    "begin",
    "configure",
    "enabled",
    "shutdown",
]
