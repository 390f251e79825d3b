"""Envoy's configuration for the gateway, rendered from ``envoy.yaml.in``.

``GatewayConfig`` holds what varies from one deployment to another (addresses, origins, sizes,
timeouts, TLS files, trusted hops); ``render`` fills the template with it. Values go into the
YAML as JSON, which YAML reads as it is, so no value can break the document's structure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from gateway.descriptors import SERVICES
from referee.server.defaults import core_cap

TEMPLATE = Path(__file__).resolve().parent / "envoy.yaml.in"

# The gateway's own error replies as a google.rpc.Status: each HTTP status with the gRPC code a
# client would have got for the same fault (gRPC's HTTP to status mapping, and google.rpc.Code's).
LOCAL_REPLY_CODES: dict[int, tuple[int, str]] = {
    400: (3, "INVALID_ARGUMENT"),
    401: (16, "UNAUTHENTICATED"),
    403: (7, "PERMISSION_DENIED"),
    404: (5, "NOT_FOUND"),
    405: (12, "UNIMPLEMENTED"),
    408: (4, "DEADLINE_EXCEEDED"),
    413: (8, "RESOURCE_EXHAUSTED"),
    415: (3, "INVALID_ARGUMENT"),
    429: (8, "RESOURCE_EXHAUSTED"),
    431: (8, "RESOURCE_EXHAUSTED"),
    500: (13, "INTERNAL"),
    501: (12, "UNIMPLEMENTED"),
    502: (14, "UNAVAILABLE"),
    503: (14, "UNAVAILABLE"),
    504: (4, "DEADLINE_EXCEEDED"),
}
_DURATION = re.compile(r"\d+(\.\d+)?s")
HEALTH_PATH = "/healthz"
# A connection's read and write buffers (Envoy's edge guidance): a JSON body is gathered whole by
# the buffer filter within --max-body-bytes, a stream's own limit, not this one.
CONNECTION_BUFFER_BYTES = 32768
# Envoy's memory for a connection holding a JSON request whose body is still coming, with room:
# about 27 KB measured (bench.roundthree: 6,826 such connections took 186 MB).
CONNECTION_COST = 32 << 10
DESK_PATH = "/desk"
# The largest desk page Envoy will load (its default for a direct response is 4 KB).
DESK_MAX_BYTES = 1 << 20
# The page's own <meta> policy says what it may run and call; the headers add what a meta
# element cannot (framing) and keep the browser from guessing or caching a stale page.
DESK_HEADERS = (
    ("content-type", "text/html; charset=utf-8"),
    ("content-security-policy", "frame-ancestors 'none'"),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-cache"),
)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """What a gateway deployment chooses; the defaults are safe on loopback."""

    descriptor_set: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    upstream_host: str = "127.0.0.1"
    upstream_port: int = 50051
    admin_port: int = 9901
    # Origins a browser may call from: exact origins, or "*" for any (never by default).
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 1 << 20
    max_response_bytes: int = 4 << 20
    # Held by the launcher's connection warden, which sheds the idle past it; Envoy itself refuses
    # at envoy_connection_cap (room above this, within what the heap allows).
    max_connections: int = 4096
    # Per client address, held by the launcher's connection warden (0: none); the rest are Envoy's.
    max_connections_per_client: int = 64
    max_heap_bytes: int = 160 << 20
    max_upstream_requests: int = 1024
    json_timeout: str = "30s"
    grpc_timeout_max: str = "300s"
    headers_timeout: str = "10s"
    idle_timeout: str = "30s"
    connection_idle_timeout: str = "60s"
    # What the idle timeouts are scaled down to as the gateway fills (overload manager).
    pressed_idle_timeout: str = "2s"
    health_interval: str = "1s"
    # Proxies in front of the gateway trusted to have appended the client's address to
    # x-forwarded-for (0: the peer is the client).
    xff_trusted_hops: int = 0
    tls_cert: str | None = None
    tls_key: str | None = None
    upstream_ca: str | None = None
    upstream_cert: str | None = None
    upstream_key: str | None = None
    services: tuple[str, ...] = field(default=SERVICES)
    # One JSON line per request to this file ("/dev/stdout" for the console), or none.
    access_log: str | None = None
    # The desk's page (gateway/desk.py writes it), served at GET /desk; none: no desk.
    desk_file: str | None = None

    def __post_init__(self) -> None:
        for name in ("json_timeout", "grpc_timeout_max", "headers_timeout", "idle_timeout", "connection_idle_timeout", "pressed_idle_timeout", "health_interval"):  # fmt: skip
            if not _DURATION.fullmatch(getattr(self, name)):
                raise ValueError(f"{name}: a duration in seconds such as '30s', not {getattr(self, name)!r}")
        for origin in self.cors_origins:
            if origin != "*" and not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?", origin):
                raise ValueError(f"not an origin (scheme://host[:port]) or '*': {origin!r}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS at the edge needs both a certificate and its key")
        if (self.upstream_cert is None) != (self.upstream_key is None):
            raise ValueError("a client certificate to the referee needs its key")
        if self.upstream_cert is not None and self.upstream_ca is None:
            raise ValueError("mutual TLS to the referee needs the referee's CA too")


def _cors_origins(origins: tuple[str, ...]) -> list[dict[str, str]]:
    if "*" in origins:
        return [{"prefix": ""}]
    # None allowed: a match nothing can satisfy, so no origin gets CORS headers.
    return [{"exact": origin} for origin in origins] or [{"exact": "null-no-origin-allowed"}]


def _status_body(code: int) -> dict[str, object]:
    return {"json_format": {"code": code, "message": "%LOCAL_REPLY_BODY%"}, "content_type": "application/json"}


def _local_reply_mappers() -> list[dict[str, object]]:
    """Each local reply to an HTTP caller as JSON: GET /healthz's own shape, every other a
    google.rpc.Status with the code of its HTTP status. gRPC and gRPC-Web callers are left alone:
    they read the status from grpc-status, as from any gRPC server."""
    # A JSON caller: its request still is not gRPC, or the transcoder has turned it into gRPC
    # (and kept the path it came with) before it failed, on bad JSON say.
    http_caller = {
        "or_filter": {
            "filters": [
                {"header_filter": {"header": {"name": "x-envoy-original-path", "present_match": True}}},
                {
                    "header_filter": {
                        "header": {
                            "name": "content-type",
                            "string_match": {"prefix": "application/grpc"},
                            "invert_match": True,
                            "treat_missing_header_as_empty": True,
                        }
                    }
                },
            ]
        }
    }

    def status_is(status: int) -> dict[str, object]:
        value = {"default_value": status, "runtime_key": f"gateway.local_reply.{status}"}
        return {"status_code_filter": {"comparison": {"op": "EQ", "value": value}}}

    health = {"header_filter": {"header": {"name": ":path", "string_match": {"exact": HEALTH_PATH}}}}
    desk = {"header_filter": {"header": {"name": ":path", "string_match": {"exact": DESK_PATH}}}}
    mappers: list[dict[str, object]] = [
        # The desk's page is a local reply too: it goes out as it is.
        {"filter": {"and_filter": {"filters": [desk, status_is(200)]}}},
        {
            "filter": {"and_filter": {"filters": [health, status_is(200)]}},
            "body_format_override": {"json_format": {"status": "SERVING"}, "content_type": "application/json"},
        },
        {
            "filter": {"and_filter": {"filters": [health, status_is(503)]}},
            "body_format_override": {
                "json_format": {"code": 14, "message": "the referee is not serving", "status": "NOT_SERVING"},
                "content_type": "application/json",
            },
        },
    ]
    for status, (code, _name) in LOCAL_REPLY_CODES.items():
        mappers.append(
            {
                "filter": {"and_filter": {"filters": [status_is(status), http_caller]}},
                "body_format_override": _status_body(code),
            }
        )
    mappers.append({"filter": http_caller, "body_format_override": _status_body(2)})  # UNKNOWN
    return mappers


def _downstream_tls(config: GatewayConfig) -> str:
    if config.tls_cert is None:
        return "filter_chain_match: {}"  # plain text: any connection
    context = {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": {
                "alpn_protocols": ["h2", "http/1.1"],
                "tls_certificates": [
                    {"certificate_chain": {"filename": config.tls_cert}, "private_key": {"filename": config.tls_key}}
                ],
            },
        },
    }
    return "transport_socket: " + json.dumps(context)


def _upstream_tls(config: GatewayConfig) -> str:
    if config.upstream_ca is None:
        return ""
    common: dict[str, object] = {"validation_context": {"trusted_ca": {"filename": config.upstream_ca}}}
    if config.upstream_cert is not None:
        common["tls_certificates"] = [
            {"certificate_chain": {"filename": config.upstream_cert}, "private_key": {"filename": config.upstream_key}}
        ]
    common["alpn_protocols"] = ["h2"]
    context = {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "common_tls_context": common,
            "sni": config.upstream_host,
        },
    }
    return "transport_socket: " + json.dumps(context)


def _access_log(config: GatewayConfig) -> list[dict[str, object]]:
    if config.access_log is None:
        return []
    fields = {
        "start": "%START_TIME%",
        "method": "%REQ(:METHOD)%",
        "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "protocol": "%PROTOCOL%",
        "status": "%RESPONSE_CODE%",
        "grpc_status": "%GRPC_STATUS%",
        "flags": "%RESPONSE_FLAGS%",
        "duration_ms": "%DURATION%",
        "bytes_in": "%BYTES_RECEIVED%",
        "bytes_out": "%BYTES_SENT%",
        "client": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
        "origin": "%REQ(ORIGIN)%",
        "request_id": "%REQ(X-REQUEST-ID)%",
    }
    return [
        {
            "name": "envoy.access_loggers.file",
            # GET /healthz, asked every few seconds by probes, would drown the calls.
            "filter": {"not_health_check_filter": {}},
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                "path": config.access_log,
                "log_format": {"json_format": fields},
            },
        }
    ]


def _desk_route(config: GatewayConfig) -> str:
    """The desk's route as one YAML list item, or a comment when there is no desk."""
    if config.desk_file is None:
        return "# (no desk)"
    route = {
        "match": {"path": DESK_PATH, "headers": [{"name": ":method", "string_match": {"exact": "GET"}}]},
        "direct_response": {"status": 200, "body": {"filename": config.desk_file}},
        # The page is no gRPC method: the transcoder, which refuses unknown methods, stands aside.
        "typed_per_filter_config": {
            "envoy.filters.http.grpc_json_transcoder": {
                "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig",
                "disabled": True,
            }
        },
        "response_headers_to_add": [
            {"header": {"key": name, "value": value}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            for name, value in DESK_HEADERS
        ],
    }
    return "- " + json.dumps(route)


def envoy_connection_cap(config: GatewayConfig) -> int:
    """Where Envoy itself refuses new connections: room above the warden's cap, so a new client is
    let in while the warden sheds the idle past it (referee.server.warden), but no more
    connections than the heap holds, so a burst of them cannot outgrow it."""
    return max(config.max_connections, min(core_cap(config.max_connections), config.max_heap_bytes // CONNECTION_COST))


def render(config: GatewayConfig) -> str:
    """Envoy's YAML configuration for ``config``."""
    values: dict[str, object] = {
        "admin_port": config.admin_port,
        "listen_host": json.dumps(config.listen_host),
        "listen_port": config.listen_port,
        "upstream_host": json.dumps(config.upstream_host),
        "upstream_port": config.upstream_port,
        "max_connections": envoy_connection_cap(config),
        "max_heap_bytes": config.max_heap_bytes,
        "max_upstream_requests": config.max_upstream_requests,
        "buffer_bytes": CONNECTION_BUFFER_BYTES,
        "max_body_bytes": config.max_body_bytes,
        "max_response_bytes": config.max_response_bytes,
        "xff_trusted_hops": config.xff_trusted_hops,
        "json_timeout": config.json_timeout,
        "grpc_timeout_max": config.grpc_timeout_max,
        "headers_timeout": config.headers_timeout,
        "idle_timeout": config.idle_timeout,
        "connection_idle_timeout": config.connection_idle_timeout,
        "pressed_idle_timeout": config.pressed_idle_timeout,
        "health_interval": config.health_interval,
        "cors_origins": json.dumps(_cors_origins(config.cors_origins)),
        "descriptor_set": json.dumps(config.descriptor_set),
        "services": json.dumps(list(config.services)),
        "health_path": json.dumps(HEALTH_PATH),
        "local_reply_mappers": json.dumps(_local_reply_mappers()),
        "access_log": json.dumps(_access_log(config)),
        "desk_route": _desk_route(config),
        "desk_max_bytes": DESK_MAX_BYTES,
        "downstream_tls": _downstream_tls(config),
        "upstream_tls": _upstream_tls(config),
    }
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(values)
