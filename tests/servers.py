"""A referee server as a real process (``python -m referee.server``) for the tests, and
what the tests read from its errors."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from google.rpc import code_pb2, error_details_pb2
from grpc_status import rpc_status

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (\S+):(\d+) \(pid (\d+)[,)]")
WORKERS = re.compile(r"workers on (\S+):(\d+) \(parent pid (\d+)\)")
METRICS = re.compile(r"metrics on (http://\S+/metrics) \(pid (\d+)\)")


def server_env() -> dict[str, str]:
    """This environment without the server's own variables, so only the test's options count."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in list(env):
        if name.startswith("REMIGIO_"):  # every serve flag has its twin; only the test's flags count
            env.pop(name)
    for name in (
        "REMIGIO_HOST",
        "REMIGIO_PORT",
        "REMIGIO_WORKERS",
        "REMIGIO_LOG_FORMAT",
        "REMIGIO_METRICS_PORT",
        "REMIGIO_RUNTIME_DIR",
        "PROMETHEUS_MULTIPROC_DIR",
    ):
        env.pop(name, None)
    return env


def refused_start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m referee.server ARGS`` where it must refuse to start: its exit status and
    output, once it has ended (within a minute)."""
    return subprocess.run(
        [sys.executable, "-m", "referee.server", *args],
        cwd=ROOT,
        env={**server_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


class ServerProcess:
    """A server process on 127.0.0.1 whose stderr a thread reads, line by line, into ``lines``;
    ``prefix`` runs it through a command (``ip netns exec NS``, as ``netns.Host.command`` gives)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "referee.server", "--host", "127.0.0.1", *args],
            cwd=ROOT,
            env={**server_env(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so a failed test can take down the workers too
        )
        self.lines: list[str] = []
        self.address = ""
        self._queue: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 30) -> re.Match[str]:
        """The first stderr line (from now on) matching ``pattern``; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and self._queue.empty():
                raise AssertionError(f"no line matching {pattern.pattern!r}; stderr so far:\n" + "\n".join(self.lines))
            try:
                line = self._queue.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if found := pattern.search(line):
                return found

    def listening(self, timeout: float = 30) -> ServerProcess:
        """Wait until it listens (at most ``timeout`` seconds); its address is then in ``address``."""
        found = self.wait_for(LISTENING, timeout)
        self.address = f"{found.group(1)}:{found.group(2)}"
        return self

    def judged(self) -> int:
        """Cases judged by the CheckDisputes calls this server has logged (JSON log lines)."""
        total = 0
        for line in list(self.lines):
            if line.startswith("{"):
                logged = json.loads(line)
                if logged.get("method") == "CheckDisputes":
                    total += int(logged.get("cases", 0))
        return total

    def rss_mb(self) -> float:
        """The server process's resident memory, in MB (VmRSS)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def terminate(self) -> None:
        """SIGTERM (a clean drain), then kill the whole group if it is still there after 10 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        self.kill()

    def kill(self) -> None:
        """Kill the process and its workers if they are still running."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reader.join(timeout=5)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (workers, dispute job processes and their helpers)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def field_violation(error: grpc.RpcError) -> error_details_pb2.BadRequest.FieldViolation:
    """The one field violation of an INVALID_ARGUMENT error's ``google.rpc.BadRequest`` detail."""
    status = rpc_status.from_call(error)
    assert status is not None and status.code == code_pb2.INVALID_ARGUMENT
    (detail,) = status.details
    bad_request = error_details_pb2.BadRequest()
    assert detail.Unpack(bad_request)
    (violation,) = bad_request.field_violations
    return violation
