"""The gateway's generated files: the OpenAPI document is current and valid, the descriptor set
holds what the transcoder needs, every RPC has its JSON routes, and every configuration the
template renders is one Envoy itself accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trustme
import yaml
from gateways import descriptor_set, document, envoy_binary
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2
from openapi_spec_validator import validate
from servers import ROOT

from gateway.envoy import DESK_MAX_BYTES, GatewayConfig, render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["RefereeService"]


def test_the_openapi_document_is_current_and_valid() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "openapi", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    validate(document())
    assert document()["openapi"] == "3.1.0"


def test_every_rpc_has_its_rest_route_and_its_method_route() -> None:
    paths = document()["paths"]
    for method in SERVICE.methods:
        rule = method.GetOptions().Extensions[annotations_pb2.http]
        assert rule.post.startswith("/v1/") and rule.body == "*", method.name
        (auto,) = rule.additional_bindings
        assert auto.post == f"/{SERVICE.full_name}/{method.name}" and auto.body == "*"
        for path in (rule.post, auto.post):
            operation = paths[path]["post"]
            if method.client_streaming:
                assert operation["requestBody"]["content"]["application/json"]["schema"]["type"] == "array"
            assert "google.rpc.Status" in str(operation["responses"]["default"])
    assert {"/v1/hands:solve", "/v1/closes:check", "/v1/deals:score", "/v1/deals:replay", "/v1/disputes:check"} <= set(
        paths
    )
    assert {"/healthz", "/grpc.health.v1.Health/Check"} <= set(paths)


def test_the_documents_schemas_use_the_proto_field_names() -> None:
    schemas = document()["components"]["schemas"]
    assert "stands_for" in schemas["remigio.referee.v1.Group"]["properties"]
    assert "field_violations" in schemas["google.rpc.BadRequest"]["properties"]
    assert schemas["remigio.referee.v1.Verdict"]["enum"][0] == "VERDICT_UNSPECIFIED"


def test_the_descriptor_set_holds_the_contract_its_errors_and_health() -> None:
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set().read_bytes())
    names = {file.name for file in files.file}
    assert {
        "remigio/referee/v1/referee.proto",
        "google/api/annotations.proto",
        "google/api/http.proto",
        "google/rpc/status.proto",
        "google/rpc/error_details.proto",
        "google/protobuf/duration.proto",
        "grpc_health/v1/health.proto",
    } <= names


def _validate(config: GatewayConfig, tmp_path: Path) -> None:
    path = tmp_path / "envoy.yaml"
    path.write_text(render(config), encoding="utf-8")
    yaml.safe_load(path.read_text())
    done = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and " OK" in done.stdout + done.stderr, done.stdout + done.stderr


def test_envoy_accepts_the_default_configuration(tmp_path: Path) -> None:
    _validate(GatewayConfig(str(descriptor_set())), tmp_path)


def test_envoy_accepts_tls_at_the_edge_and_mutual_tls_to_the_referee(tmp_path: Path) -> None:
    ca = trustme.CA()
    files = {}
    for name, cert in (("edge", ca.issue_cert("gateway.example.com")), ("client", ca.issue_cert("gateway"))):
        cert.private_key_pem.write_to_path(tmp_path / f"{name}-key.pem")
        cert.cert_chain_pems[0].write_to_path(tmp_path / f"{name}.pem")
        files[name] = (str(tmp_path / f"{name}.pem"), str(tmp_path / f"{name}-key.pem"))
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    config = GatewayConfig(
        str(descriptor_set()),
        listen_host="0.0.0.0",
        upstream_host="referee.internal",
        cors_origins=("https://game.example.com", "http://localhost:3000"),
        xff_trusted_hops=1,
        tls_cert=files["edge"][0],
        tls_key=files["edge"][1],
        upstream_ca=str(tmp_path / "ca.pem"),
        upstream_cert=files["client"][0],
        upstream_key=files["client"][1],
        access_log=str(tmp_path / "access.log"),
    )
    _validate(config, tmp_path)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cors_origins": ("game.example.com",)}, "not an origin"),
        ({"cors_origins": ("https://a.example.com/path",)}, "not an origin"),
        ({"json_timeout": "30"}, "json_timeout"),
        ({"tls_cert": "cert.pem"}, "both a certificate and its key"),
        ({"upstream_cert": "c.pem", "upstream_key": "k.pem"}, "needs the referee's CA"),
    ],
)
def test_the_configuration_refuses_what_would_not_work(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GatewayConfig("referee.binpb", **options)  # type: ignore[arg-type]


def test_no_value_can_break_out_of_its_place_in_the_yaml() -> None:
    config = GatewayConfig('x", admin: {}, "y', listen_host="127.0.0.1\nadmin: {}")
    loaded = yaml.safe_load(render(config))
    listener = loaded["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"]["address"] == "127.0.0.1\nadmin: {}"
    assert loaded["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"


def test_the_command_line_writes_a_configuration(tmp_path: Path) -> None:
    out = tmp_path / "envoy.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "config", str(out), "--descriptor-set", "/etc/gateway/referee.binpb",
         "--listen", "0.0.0.0:8080", "--upstream", "referee:50051", "--cors-origin", "https://game.example.com"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert '"/etc/gateway/referee.binpb"' in text and '"https://game.example.com"' in text
    refused = subprocess.run(
        [sys.executable, "-m", "gateway", "config", str(out), "--descriptor-set", "x", "--cors-origin", "nope"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "not an origin" in refused.stderr


def test_the_desk_is_written_served_by_its_own_route_and_accepted_by_envoy(tmp_path: Path) -> None:
    page, out = tmp_path / "desk.html", tmp_path / "envoy.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "desk", str(page)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert page.stat().st_size < DESK_MAX_BYTES  # Envoy refuses a larger direct response at load
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "config", str(out), "--descriptor-set", str(descriptor_set()),
         "--desk-file", str(page)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manager = yaml.safe_load(out.read_text())["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    routes = manager["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    assert routes[0]["match"]["path"] == "/desk" and routes[0]["direct_response"]["body"] == {"filename": str(page)}
    assert all("direct_response" not in route for route in routes[1:])
    _validate(GatewayConfig(str(descriptor_set()), desk_file=str(page)), tmp_path)
    # Without a page, no desk: every route goes to the referee.
    bare = yaml.safe_load(render(GatewayConfig(str(descriptor_set()))))
    bare_routes = bare["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert all("direct_response" not in route for route in bare_routes["route_config"]["virtual_hosts"][0]["routes"])


def test_every_field_the_desk_reads_is_a_field_of_the_contract() -> None:
    """The desk reads replies by their proto field names (``f(message, "name")``): each name it
    reads must be a field of some message of the contract or of google.rpc.Status's details, so
    a field renamed in the proto fails here, not in a support call."""
    import re

    from google.rpc import error_details_pb2, status_pb2

    script = (ROOT / "gateway" / "desk.js").read_text(encoding="utf-8")
    read = set(re.findall(r'\bf\([^,()]+, "([a-z_]+)"', script))
    assert len(read) > 15, "the desk's field reads were not found: has f() changed?"

    def fields(file: object) -> set[str]:
        names: set[str] = set()
        pending = list(file.message_types_by_name.values())  # type: ignore[attr-defined]
        while pending:
            message = pending.pop()
            names.update(message.fields_by_name)
            pending.extend(message.nested_types)
        return names

    known = fields(pb.DESCRIPTOR) | fields(status_pb2.DESCRIPTOR) | fields(error_details_pb2.DESCRIPTOR)
    assert not read - known, f"the desk reads fields the contract does not have: {sorted(read - known)}"
