#!/usr/bin/env python3
"""Build the referee's and the gateway's images with podman from Debian's packages, run them locked down, prove they serve.

    sudo .venv/bin/python scripts/build_image.py [--port 51051] [--gateway-port 51080] [--keep] [--rebuild-base]

No registry is involved. The steps:

1. Install podman, runc and mmdebstrap with apt-get when they are missing (needs root).
2. Make a Debian bookworm base with Python 3.11 (mmdebstrap, from the machine's own apt
   sources) and import it into podman: it stands in for the Dockerfile's ``FROM`` image. Kept
   between runs unless ``--rebuild-base``.
3. Build the Dockerfile and gateway/Dockerfile with that base. Their pip steps reach the Python
   package index with the host's pip configuration and CA bundle mounted read-only for the build,
   when the host has them.
4. Run the image as the Kubernetes manifests do: a read-only root file system, all capabilities
   dropped, no new privileges, a tmpfs on /tmp, TLS and an API key file from read-only mounts
   (certificates made for the run with trustme, the key with ``remigio-referee keygen``), health
   on its own plain-text port, the server on a non-default port inside (so the HEALTHCHECK must
   follow the configuration), and only the gRPC port and the gateway's published, on 127.0.0.1.
5. Check inside it: the image's own HEALTHCHECK passes; the process runs as the image's
   unprivileged user with no capabilities; the root file system refuses writes. Through the
   published port, over TLS: health SERVING, a call without a key refused, and with the key a
   SolveHand answer and a CheckDisputes stream's verdicts. Then the metrics port (inside): the
   SolveHand counted, both workers up.
6. Run the gateway's image beside it as the Kubernetes sidecar runs: in the referee's network
   namespace (the pod's loopback), locked down the same way, TLS at the edge with the same
   certificate and mutual TLS to the referee, on a non-default port inside (its HEALTHCHECK must
   follow it too), configured by flags and REMIGIO_GATEWAY_* variables.
7. Check the gateway inside (its HEALTHCHECK, the user, no capabilities, the read-only root) and,
   through its published port over TLS: GET /healthz 200; GET /desk 200, the desk's page (HTML)
   of the image's own build; a JSON SolveHand 200 with the known
   linking; a JSON call without a key 401 and one with a bad card 400, both google.rpc.Status
   JSON (the latter with its BadRequest details); native gRPC health, SolveHand and a
   CheckDisputes stream. Stop it with SIGTERM: Envoy must exit 0.
8. Stop the referee with SIGTERM: it must drain and exit 0.

Prints one line per step and "images proven" at the end; exits non-zero at the first failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_IMAGE = "localhost/remigio-debian-python:bookworm"
IMAGE = "localhost/remigio-referee:proof"
CONTAINER = "remigio-referee-proof"
GATEWAY_IMAGE = "localhost/remigio-gateway:proof"
GATEWAY_CONTAINER = "remigio-gateway-proof"
SUITE = "bookworm"
# The base: Python with venv (the Dockerfile makes venvs), `python` on PATH as in the official
# images, and the CA certificates pip needs.
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"}
# Inside the container; not the default 50051, so a HEALTHCHECK fixed on 50051 would fail.
INNER_PORT = 50061
HEALTH_PORT = 50062
# The gateway's port inside: not the image's 8080, so a HEALTHCHECK fixed on 8080 would fail.
GATEWAY_PORT = 8081
# Where the Kubernetes manifests mount their Secrets.
TLS_DIR, KEYS_DIR = "/etc/remigio/tls", "/etc/remigio/api-keys"
# The image's user, who must be able to read the mounted files.
IMAGE_UID = 10001
# Metrics are read from inside the container, so only the gRPC and gateway ports are published.
METRICS_PORT = 9464
# podman asks for the host's hard limits by default, more than this machine lets a container have.
ULIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
HOST_PIP_FILES = ("/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run every step; 0 when the image is proven."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=51051, help="host port on 127.0.0.1 to publish (default 51051)")
    parser.add_argument(
        "--gateway-port", type=int, default=51080, help="host port on 127.0.0.1 for the gateway (default 51080)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the built images (the base is always kept)")
    parser.add_argument("--rebuild-base", action="store_true", help="make the Debian base again")
    args = parser.parse_args(argv)
    started = time.monotonic()
    install_tools()
    make_base(rebuild=args.rebuild_base)
    try:
        build_image(IMAGE, ROOT / "Dockerfile")
        build_image(GATEWAY_IMAGE, ROOT / "gateway" / "Dockerfile")
        with secrets_for_the_run() as secrets, running(args.port, args.gateway_port, secrets) as address:
            check_inside(CONTAINER, "/opt/referee")
            check_through_port(address, secrets)
            check_metrics()
            with gateway_running(args.gateway_port, secrets) as gateway:
                check_inside(GATEWAY_CONTAINER, "/opt/gateway")
                check_through_gateway(gateway, secrets)
            say("gateway stop: SIGTERM ended Envoy and it exited 0")
        say("stop: SIGTERM drained the server and it exited 0")
    finally:
        if not args.keep:
            for image in (IMAGE, GATEWAY_IMAGE):
                podman("rmi", "--force", image, check=False, quiet=True)
    say(f"images proven in {time.monotonic() - started:.0f} s: {describe_host()}")
    return 0


def say(line: str) -> None:
    """One progress line, at once."""
    print(f"build_image: {line}", flush=True)


def run(command: Sequence[str], *, check: bool = True, quiet: bool = False, **kwargs: object) -> str:
    """Run ``command``; its output (stdout and stderr together), or SystemExit naming it when it fails."""
    result = subprocess.run(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)  # type: ignore[call-overload]
    if check and result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-40:])
        raise SystemExit(f"build_image: failed ({result.returncode}): {' '.join(command)}\n{tail}")
    if not quiet and result.returncode != 0:
        say(f"(exit {result.returncode}) {' '.join(command)}")
    return str(result.stdout)


def podman(*args: str, check: bool = True, quiet: bool = False) -> str:
    """Run a podman command with runc, the runtime that works in this kind of sandbox."""
    return run(["podman", "--runtime", "runc", *args], check=check, quiet=quiet)


def install_tools() -> None:
    """apt-get install whatever of podman, runc and mmdebstrap is missing."""
    missing = [package for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if not missing:
        say("tools: podman, runc and mmdebstrap present")
        return
    if os.geteuid() != 0:
        raise SystemExit(f"build_image: missing {', '.join(missing)}; run as root to install them with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update"], env=env)
    run(["apt-get", "install", "-y", "--no-install-recommends", *missing, "uidmap", "slirp4netns"], env=env)
    say(f"tools: installed {', '.join(missing)}")


def make_base(*, rebuild: bool) -> None:
    """A Debian base with Python in podman's store, made by mmdebstrap unless it is there already."""
    exists = subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode == 0
    if exists and not rebuild:
        say(f"base: {BASE_IMAGE} already made")
        return
    tarball = Path("/var/tmp/remigio-debian-python.tar")
    # No mirror given: mmdebstrap then uses the machine's own apt sources.
    run(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--include=" + ",".join(BASE_PACKAGES),
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            '--aptopt=Acquire::Languages "none"',
            '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
            SUITE,
            str(tarball),
        ]
    )
    podman("import", "--change", 'CMD ["python3"]', str(tarball), BASE_IMAGE, quiet=True)
    tarball.unlink()
    say(f"base: made {BASE_IMAGE} ({podman('run', '--rm', *ULIMITS, BASE_IMAGE, 'python', '--version').strip()})")


def build_image(image: str, dockerfile: Path) -> None:
    """Build ``dockerfile`` (its context the repository's root) on the Debian base."""
    mounts = [f"--volume={path}:{path}:ro" for path in HOST_PIP_FILES if Path(path).is_file()]
    started = time.monotonic()
    podman(
        "build",
        "--format=docker",  # the OCI format has no HEALTHCHECK
        "--network=host",  # pip reaches the package index as the host does
        *mounts,
        *ULIMITS,
        "--build-arg",
        f"BASE_IMAGE={BASE_IMAGE}",
        "--tag",
        image,
        "--file",
        str(dockerfile),
        str(ROOT),
    )
    size = podman("image", "inspect", "--format", "{{.Size}}", image).strip()
    say(f"build: {image} in {time.monotonic() - started:.0f} s, {int(size) / 1e6:.0f} MB")


class Secrets:
    """A server certificate, its CA and an API key made for one run, in files the image's user can read."""

    def __init__(self, directory: Path) -> None:
        import trustme

        self.tls = directory / "tls"
        self.keys = directory / "api-keys"
        for folder in (self.tls, self.keys):
            folder.mkdir()
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.tls / "ca.crt"))
        # The gateway's HTTPS calls ask 127.0.0.1 by address; the gRPC ones name localhost.
        certificate = ca.issue_cert("localhost", "127.0.0.1")
        certificate.private_key_pem.write_to_path(str(self.tls / "tls.key"))
        certificate.cert_chain_pems[0].write_to_path(str(self.tls / "tls.crt"))
        self.ca_pem = ca.cert_pem.bytes()
        made = subprocess.run(
            [sys.executable, "-m", "referee.cli", "keygen", "proof"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        self.api_key = made.stdout.strip()
        (self.keys / "api-keys").write_text(made.stderr)
        for path in (directory, *directory.rglob("*")):
            os.chown(path, IMAGE_UID, IMAGE_UID)
            path.chmod(0o500 if path.is_dir() else 0o400)


@contextlib.contextmanager
def secrets_for_the_run() -> Iterator[Secrets]:
    """TLS files and a key file for the run (as root: owned by the image's user), removed after."""
    with tempfile.TemporaryDirectory(prefix="remigio-proof-", dir="/var/tmp") as directory:
        secrets = Secrets(Path(directory))
        say("secrets: a certificate for localhost (trustme) and a key from keygen, to mount read-only")
        yield secrets


@contextlib.contextmanager
def running(host_port: int, gateway_port: int, secrets: Secrets) -> Iterator[str]:
    """The image running locked down, published on 127.0.0.1:host_port; stopped with SIGTERM after.
    Its network namespace is the gateway's too (a pod's), so the gateway's port is published here."""
    podman("rm", "--force", CONTAINER, check=False, quiet=True)
    podman(
        "run",
        "--detach",
        "--name",
        CONTAINER,
        "--read-only",
        "--read-only-tmpfs=false",  # only the tmpfs asked for below is writable
        "--tmpfs=/tmp:rw,nosuid,nodev,size=64m",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        *ULIMITS,
        "--env",
        f"REMIGIO_PORT={INNER_PORT}",
        "--env",
        "REMIGIO_WORKERS=2",
        "--env",
        f"REMIGIO_METRICS_PORT={METRICS_PORT}",
        "--env",
        f"REMIGIO_HEALTH_PORT={HEALTH_PORT}",
        "--env",
        "REMIGIO_DISPUTE_JOBS=1",
        "--env",
        f"REMIGIO_TLS_CERT={TLS_DIR}/tls.crt",
        "--env",
        f"REMIGIO_TLS_KEY={TLS_DIR}/tls.key",
        "--env",
        f"REMIGIO_API_KEYS={KEYS_DIR}/api-keys",
        # As the Kubernetes sidecar's referee: x-forwarded-for believed from the gateway alone.
        "--env",
        "REMIGIO_TRUSTED_PROXIES=127.0.0.1/32",
        f"--volume={secrets.tls}:{TLS_DIR}:ro",
        f"--volume={secrets.keys}:{KEYS_DIR}:ro",
        "--publish",
        f"127.0.0.1:{host_port}:{INNER_PORT}",
        "--publish",
        f"127.0.0.1:{gateway_port}:{GATEWAY_PORT}",
        IMAGE,
    )
    address = f"127.0.0.1:{host_port}"
    try:
        wait_healthy(CONTAINER)
        say(
            f"run: read-only, no capabilities, TLS and keys on {INNER_PORT} inside ({address} outside), health on {HEALTH_PORT}"
        )
        yield address
        podman("stop", "--time", "30", CONTAINER)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", CONTAINER).strip()
        if code != "0":
            raise SystemExit(f"build_image: the server exited {code} after SIGTERM\n{podman('logs', CONTAINER)}")
    except BaseException:
        print(podman("logs", CONTAINER, check=False), file=sys.stderr)
        raise
    finally:
        podman("rm", "--force", CONTAINER, check=False, quiet=True)


def wait_healthy(container: str, timeout: float = 120) -> None:
    """Run the image's own HEALTHCHECK until it passes (the server loads OR-Tools first)."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        result = subprocess.run(
            ["podman", "--runtime", "runc", "healthcheck", "run", container],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if result.returncode == 0:
            asks = "REMIGIO_HEALTH_PORT" if container == CONTAINER else "GET /healthz where serve listens"
            say(f"health: {container}'s HEALTHCHECK passes after {time.monotonic() - started:.0f} s (it asks {asks})")
            return
        state = podman("inspect", "--format", "{{.State.Status}}", container).strip()
        if state != "running" or time.monotonic() > deadline:
            raise SystemExit(f"build_image: not healthy ({state}): {result.stdout.strip()}")
        time.sleep(1)


def check_inside(container: str, home: str) -> None:
    """The container's process runs unprivileged, with no capabilities, on a root file system it cannot write."""
    script = (
        "import os; from pathlib import Path\n"
        "status = dict(l.split(':', 1) for l in Path('/proc/1/status').read_text().splitlines())\n"
        "print(os.getuid(), os.getgid(), int(status['CapEff'], 16), int(status['NoNewPrivs']))\n"
        "Path('/tmp/probe').write_text('x')\n"
        "try:\n"
        f"    Path('{home}/probe').write_text('x')\n"
        "except OSError as error:\n"
        "    print(error.strerror)\n"
    )
    lines = podman("exec", container, "python", "-c", script).splitlines()
    if lines[0].split() != ["10001", "10001", "0", "1"]:
        raise SystemExit(
            f"build_image: {container}: expected uid/gid 10001, no capabilities, no new privileges: {lines[0]}"
        )
    if lines[1:] != ["Read-only file system"]:
        raise SystemExit(f"build_image: {container}: the root file system took a write: {lines[1:]}")
    say(f"inside {container}: uid/gid 10001, CapEff 0, NoNewPrivs 1, root fs read-only, /tmp writable")


def check_through_port(address: str, secrets: Secrets, what: str = "the published port") -> None:
    """Over TLS through the published port: health open, no call without a key, SolveHand and CheckDisputes with it."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from referee._gen.remigio.referee.v1 import referee_pb2 as pb
    from referee._gen.remigio.referee.v1 import referee_pb2_grpc

    credentials = grpc.ssl_channel_credentials(root_certificates=secrets.ca_pem)
    options = [("grpc.ssl_target_name_override", "localhost")]
    key = [("authorization", f"Bearer {secrets.api_key}")]
    with grpc.secure_channel(address, credentials, options=options) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        if health.status != health_pb2.HealthCheckResponse.SERVING:
            raise SystemExit(f"build_image: health says {health.status}")
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        hand = "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()
        try:
            stub.SolveHand(pb.SolveHandRequest(cards=hand), timeout=30)
            raise SystemExit("build_image: a call without a key was answered")
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAUTHENTICATED:
                raise SystemExit(f"build_image: a call without a key got {error.code().name}") from error
        linking = stub.SolveHand(pb.SolveHandRequest(cards=hand), timeout=30, metadata=key).linking
        if linking.points != 9 or sorted(linking.unlinked) != ["9D"]:
            raise SystemExit(f"build_image: unexpected SolveHand answer: {linking}")
        cases = [
            pb.CheckDisputesRequest(id="right", hand=pb.HandDispute(cards=hand, claimed_points=9)),
            pb.CheckDisputesRequest(id="wrong", hand=pb.HandDispute(cards=hand, claimed_points=10)),
        ]
        replies = stub.CheckDisputes(iter(cases), timeout=30, metadata=key)
        verdicts = {reply.id: pb.DisputeOutcome.Name(reply.outcome) for reply in replies}
        want = {"right": "DISPUTE_OUTCOME_CONFIRMED", "wrong": "DISPUTE_OUTCOME_WRONG"}
        if verdicts != want:
            raise SystemExit(f"build_image: unexpected CheckDisputes verdicts: {verdicts}")
    say(
        f"gRPC calls over TLS via {what} {address}: health SERVING; no key UNAUTHENTICATED; with the key SolveHand (9 points), CheckDisputes (confirmed, wrong)"
    )


def check_metrics(timeout: float = 30) -> None:
    """Prometheus text from inside: the calls above counted, both workers up (files on the runtime's tmpfs)."""
    script = (
        "import urllib.request\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{METRICS_PORT}/metrics', timeout=10).read().decode())\n"
    )
    solve = 'grpc_server_call_started_total{grpc_method="remigio.referee.v1.RefereeService/SolveHand"}'
    deadline = time.monotonic() + timeout
    while True:
        values = {}
        for line in podman("exec", CONTAINER, "python", "-c", script).splitlines():
            name, _, value = line.rpartition(" ")
            values[name] = value
        counted = float(values.get(solve, "0")) >= 1 and float(values.get("referee_workers_up", "0")) == 2
        if counted:
            say(f"metrics: {solve} {values[solve]}, referee_workers_up {values['referee_workers_up']}")
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"build_image: metrics do not show the calls and two workers: {values}")
        time.sleep(1)


@contextlib.contextmanager
def gateway_running(host_port: int, secrets: Secrets) -> Iterator[str]:
    """The gateway's image locked down in the referee's network namespace, as the Kubernetes
    sidecar runs (its port published with the referee's); stopped with SIGTERM after."""
    podman("rm", "--force", GATEWAY_CONTAINER, check=False, quiet=True)
    podman(
        "run",
        "--detach",
        "--name",
        GATEWAY_CONTAINER,
        f"--network=container:{CONTAINER}",
        "--read-only",
        "--read-only-tmpfs=false",
        "--tmpfs=/tmp:rw,nosuid,nodev,size=16m",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        *ULIMITS,
        # Where it listens and what it reaches from the environment, the TLS files from flags:
        # serve takes either.
        "--env",
        f"REMIGIO_GATEWAY_LISTEN=0.0.0.0:{GATEWAY_PORT}",
        "--env",
        f"REMIGIO_GATEWAY_UPSTREAM=127.0.0.1:{INNER_PORT}",
        f"--volume={secrets.tls}:{TLS_DIR}:ro",
        GATEWAY_IMAGE,
        f"--tls-cert={TLS_DIR}/tls.crt",
        f"--tls-key={TLS_DIR}/tls.key",
        f"--upstream-ca={TLS_DIR}/ca.crt",
        f"--upstream-cert={TLS_DIR}/tls.crt",
        f"--upstream-key={TLS_DIR}/tls.key",
        "--access-log=/dev/stdout",
        # Envoy's start (listeners, clusters, the first health check) in the log a failure prints.
        "--log-level=info",
    )
    address = f"127.0.0.1:{host_port}"
    try:
        wait_healthy(GATEWAY_CONTAINER)
        say(
            f"gateway run: read-only, no capabilities, in {CONTAINER}'s network, TLS on {GATEWAY_PORT} inside"
            f" ({address} outside), mutual TLS to the referee on 127.0.0.1:{INNER_PORT}"
        )
        yield address
        podman("stop", "--time", "15", GATEWAY_CONTAINER)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", GATEWAY_CONTAINER).strip()
        if code != "0":
            raise SystemExit(
                f"build_image: the gateway exited {code} after SIGTERM\n{podman('logs', GATEWAY_CONTAINER)}"
            )
    except BaseException:
        print(podman("logs", GATEWAY_CONTAINER, check=False), file=sys.stderr)
        raise
    finally:
        podman("rm", "--force", GATEWAY_CONTAINER, check=False, quiet=True)


def https(url: str, secrets: Secrets, body: object = None, key: str | None = None) -> tuple[int, Any]:
    """GET (or POST ``body`` as JSON) over TLS trusting the run's CA; the status and the JSON reply."""
    context = ssl.create_default_context(cadata=secrets.ca_pem.decode())
    headers = {"content-type": "application/json"} if body is not None else {}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as reply:
            status, text = reply.status, reply.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        return status, json.loads(text)
    except ValueError as error:
        raise SystemExit(f"build_image: {url} answered {status} with no JSON: {text[:200]!r}") from error


def check_desk(base: str, secrets: Secrets) -> None:
    """GET /desk: the referee desk's page the image's build stage made, served as HTML."""
    context = ssl.create_default_context(cadata=secrets.ca_pem.decode())
    try:
        with urllib.request.urlopen(f"{base}/desk", timeout=30, context=context) as reply:
            status, kind, text = reply.status, reply.headers.get("content-type"), reply.read()
    except urllib.error.HTTPError as error:
        status, kind, text = error.code, error.headers.get("content-type"), error.read()
    if status != 200 or kind != "text/html; charset=utf-8" or not text.startswith(b"<!DOCTYPE html>"):
        raise SystemExit(f"build_image: GET /desk through the gateway: {status} {kind} {text[:200]!r}")


def check_through_gateway(address: str, secrets: Secrets) -> None:
    """Through the gateway's published port over TLS: /healthz, JSON calls right and wrong, native gRPC."""
    base = f"https://{address}"
    status, health = https(f"{base}/healthz", secrets)
    if (status, health) != (200, {"status": "SERVING"}):
        raise SystemExit(f"build_image: GET /healthz through the gateway: {status} {health}")
    check_desk(base, secrets)
    hand = "QS KS AS 2S 3S 4S 7H 7D 7C 9D".split()
    status, reply = https(f"{base}/v1/hands:solve", secrets, {"cards": hand}, key=secrets.api_key)
    linking = reply.get("linking", {})
    if status != 200 or linking.get("points") != 9 or linking.get("unlinked") != ["9D"]:
        raise SystemExit(f"build_image: JSON SolveHand through the gateway: {status} {reply}")
    status, refused = https(f"{base}/v1/hands:solve", secrets, {"cards": hand})
    if status != 401 or refused.get("code") != 16:
        raise SystemExit(f"build_image: a JSON call without a key: {status} {refused}")
    status, bad = https(f"{base}/v1/hands:solve", secrets, {"cards": ["ZZ", *hand[1:]]}, key=secrets.api_key)
    details = bad.get("details") or [{}]
    violations = details[0].get("field_violations", [{}])
    if (
        status != 400
        or bad.get("code") != 3
        or details[0].get("@type") != "type.googleapis.com/google.rpc.BadRequest"
        or violations[0].get("field") != "cards[0]"
    ):
        raise SystemExit(f"build_image: a JSON call with a bad card: {status} {bad}")
    check_through_port(address, secrets, what="the gateway")
    say(
        f"calls over TLS via the gateway {address}: GET /healthz 200 SERVING; GET /desk 200 text/html; JSON SolveHand 200 (9 points, 9D"
        " unlinked); JSON without a key 401 (code 16); JSON with a bad card 400 (code 3, BadRequest on cards[0])"
    )


def describe_host() -> str:
    """The machine and the tools, for the record in docs/operations.md."""
    podman_version = podman("--version").strip()
    runc_version = run(["runc", "--version"]).splitlines()[0]
    os_name = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    return f"{os_name}, {platform.machine()}, {os.cpu_count()} cores, {podman_version}, {runc_version}"


if __name__ == "__main__":
    sys.exit(main())
