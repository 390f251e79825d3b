"""Local Ray nodes for the cluster tests and ``bench.cluster``: ``ray start --block`` processes.

Each node is started in a session of its own (``ray start --block``, so the command stays up
while its node runs), with its own temporary folder, few CPUs and a small object store, on
127.0.0.1. ``stop`` ends exactly that node: a signal to its session (the raylet, its workers and,
for a head, the GCS), as when a machine leaves; ``ray stop`` would stop every Ray node of the
machine. The cluster asks for a token (Ray's token authentication) made for it, in its folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
STARTED = re.compile(r"ray start --address='([^']+)'")


def ray_env(folder: Path, root: Path | None = None) -> dict[str, str]:
    """The environment of a cluster's processes and of the drivers that join it: its token, and
    this checkout (or the checkout ``root``: a baseline build) on the path (the workers import
    the referee from it)."""
    token = folder / "auth_token"
    if not token.exists():
        folder.mkdir(parents=True, exist_ok=True)
        token.write_text(secrets.token_hex(32), encoding="utf-8")
    here = str(Path(__file__).resolve().parent.parent)
    first = str(root) if root else here
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    paths = [first, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in (first, here))]
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token),
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONPATH=os.pathsep.join(paths),
    )
    return env


class RayNode:
    """One Ray node of a local cluster: the head (``head=None``), or a node joining ``head``
    (with the head's token; ``folder`` holds this node's log), its workers importing the referee
    of ``root`` (default: this checkout)."""

    def __init__(
        self,
        folder: Path,
        *,
        head: RayNode | None = None,
        cpus: int = 1,
        object_store_bytes: int = 100_000_000,
        timeout: float = 90,
        root: Path | None = None,
        quick_loss: bool = False,
    ) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        # Ray's unix sockets must fit in 107 bytes: a short folder of the node's own.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray"))
        args = [
            str(RAY),
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={cpus}",
            f"--object-store-memory={object_store_bytes}",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
        ]
        self.client_port = _free_port() if head is None else 0
        head_args = ["--head", "--port=0", "--include-dashboard=false", f"--ray-client-server-port={self.client_port}"]
        args += head_args if head is None else [f"--address={head.address}"]
        self.log = folder / f"ray-start-{os.getpid()}-{time.monotonic_ns()}.log"
        env = ray_env(head.folder if head else folder, root)
        if quick_loss:
            # The head's GCS declares a node dead after 3 failed health checks a second apart
            # (Ray's default: 5, 3 s apart): a test that stops a node waits seconds for the run
            # to move its tasks, not a quarter of a minute. A stopped node's port refuses at once;
            # a live one under load still has 3 s to answer each check.
            env.update(RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3")
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                args,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.address = head.address if head else ""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_text(encoding="utf-8", errors="replace")
            if "Ray runtime started" in text:
                if head is None:
                    found = STARTED.search(text)
                    assert found, text
                    self.address = found.group(1)
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ray start failed:\n{text[-3000:]}")
            time.sleep(0.2)

    def pids(self) -> list[int]:
        """The node's processes: those with a file open in its folder (its logs), which its
        workers are too, though they leave the session of ``ray start``."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if any(str(link.readlink()).startswith(str(self.temp_dir)) for link in (entry / "fd").iterdir()):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        """End the node's processes at once, as when its machine leaves."""
        for _ in range(3):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        self.process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
