#!/usr/bin/env python3
"""Build the Dockerfile's image with podman from Debian's packages, run it locked down, prove it serves.

    sudo .venv/bin/python scripts/build_image.py [--port 51051] [--keep] [--rebuild-base]

No registry is involved. The steps:

1. Install podman, runc and mmdebstrap with apt-get when they are missing (needs root).
2. Make a Debian bookworm base with Python 3.11 (mmdebstrap, from the machine's own apt
   sources) and import it into podman: it stands in for the Dockerfile's ``FROM`` image. Kept
   between runs unless ``--rebuild-base``.
3. Build the Dockerfile with that base. Its pip steps reach the Python package index with the
   host's pip configuration and CA bundle mounted read-only for the build, when the host has them.
4. Run the image as the Kubernetes manifests do: a read-only root file system, all capabilities
   dropped, no new privileges, a tmpfs on /tmp, TLS and an API key file from read-only mounts
   (certificates made for the run with trustme, the key with ``remigio-referee keygen``), health
   on its own plain-text port, the server on a non-default port inside (so the HEALTHCHECK must
   follow the configuration), and only the gRPC port published, on 127.0.0.1.
5. Check inside it: the image's own HEALTHCHECK passes; the process runs as the image's
   unprivileged user with no capabilities; the root file system refuses writes. Through the
   published port, over TLS: health SERVING, a call without a key refused, and with the key a
   SolveHand answer and a CheckDisputes stream's verdicts. Then the metrics port (inside): the
   SolveHand counted, both workers up.
6. Stop it with SIGTERM: it must drain and exit 0.

Prints one line per step and "image proven" at the end; exits non-zero at the first failure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_IMAGE = "localhost/remigio-debian-python:bookworm"
IMAGE = "localhost/remigio-referee:proof"
CONTAINER = "remigio-referee-proof"
SUITE = "bookworm"
# The base: Python with venv (the Dockerfile makes venvs), `python` on PATH as in the official
# images, and the CA certificates pip needs.
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"}
# Inside the container; not the default 50051, so a HEALTHCHECK fixed on 50051 would fail.
INNER_PORT = 50061
HEALTH_PORT = 50062
# Where the Kubernetes manifests mount their Secrets.
TLS_DIR, KEYS_DIR = "/etc/remigio/tls", "/etc/remigio/api-keys"
# The image's user, who must be able to read the mounted files.
IMAGE_UID = 10001
# Metrics are read from inside the container, so only the gRPC port is published.
METRICS_PORT = 9464
# podman asks for the host's hard limits by default, more than this machine lets a container have.
ULIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
HOST_PIP_FILES = ("/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run every step; 0 when the image is proven."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=51051, help="host port on 127.0.0.1 to publish (default 51051)")
    parser.add_argument("--keep", action="store_true", help="keep the built image (the base is always kept)")
    parser.add_argument("--rebuild-base", action="store_true", help="make the Debian base again")
    args = parser.parse_args(argv)
    started = time.monotonic()
    install_tools()
    make_base(rebuild=args.rebuild_base)
    build_image()
    try:
        with secrets_for_the_run() as secrets, running(args.port, secrets) as address:
            check_inside()
            check_through_port(address, secrets)
            check_metrics()
        say("stop: SIGTERM drained the server and it exited 0")
    finally:
        if not args.keep:
            podman("rmi", "--force", IMAGE, check=False, quiet=True)
    say(f"image proven in {time.monotonic() - started:.0f} s: {describe_host()}")
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


def build_image() -> None:
    """Build the Dockerfile on the Debian base."""
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
        IMAGE,
        "--file",
        str(ROOT / "Dockerfile"),
        str(ROOT),
    )
    size = podman("image", "inspect", "--format", "{{.Size}}", IMAGE).strip()
    say(f"build: {IMAGE} in {time.monotonic() - started:.0f} s, {int(size) / 1e6:.0f} MB")


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
        certificate = ca.issue_cert("localhost")
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
def running(host_port: int, secrets: Secrets) -> Iterator[str]:
    """The image running locked down, published on 127.0.0.1:host_port; stopped with SIGTERM after."""
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
        f"--volume={secrets.tls}:{TLS_DIR}:ro",
        f"--volume={secrets.keys}:{KEYS_DIR}:ro",
        "--publish",
        f"127.0.0.1:{host_port}:{INNER_PORT}",
        IMAGE,
    )
    address = f"127.0.0.1:{host_port}"
    try:
        wait_healthy()
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


def wait_healthy(timeout: float = 120) -> None:
    """Run the image's own HEALTHCHECK until it passes (the server loads OR-Tools first)."""
    deadline = time.monotonic() + timeout
    while True:
        result = subprocess.run(
            ["podman", "--runtime", "runc", "healthcheck", "run", CONTAINER],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if result.returncode == 0:
            say("health: the image's HEALTHCHECK passes (it asks REMIGIO_HEALTH_PORT)")
            return
        state = podman("inspect", "--format", "{{.State.Status}}", CONTAINER).strip()
        if state != "running" or time.monotonic() > deadline:
            raise SystemExit(f"build_image: not healthy ({state}): {result.stdout.strip()}")
        time.sleep(1)


def check_inside() -> None:
    """The server runs unprivileged, with no capabilities, on a root file system it cannot write."""
    script = (
        "import os; from pathlib import Path\n"
        "status = dict(l.split(':', 1) for l in Path('/proc/1/status').read_text().splitlines())\n"
        "print(os.getuid(), os.getgid(), int(status['CapEff'], 16), int(status['NoNewPrivs']))\n"
        "Path('/tmp/probe').write_text('x')\n"
        "try:\n"
        "    Path('/opt/referee/probe').write_text('x')\n"
        "except OSError as error:\n"
        "    print(error.strerror)\n"
    )
    lines = podman("exec", CONTAINER, "python", "-c", script).splitlines()
    if lines[0].split() != ["10001", "10001", "0", "1"]:
        raise SystemExit(f"build_image: expected uid/gid 10001, no capabilities, no new privileges: {lines[0]}")
    if lines[1:] != ["Read-only file system"]:
        raise SystemExit(f"build_image: the root file system took a write: {lines[1:]}")
    say("inside: uid/gid 10001, CapEff 0, NoNewPrivs 1, root fs read-only, /tmp writable")


def check_through_port(address: str, secrets: Secrets) -> None:
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
        f"calls over TLS via {address}: health SERVING; no key UNAUTHENTICATED; with the key SolveHand (9 points), CheckDisputes (confirmed, wrong)"
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
