"""The parent of ``serve --workers N``: it forks the worker processes and keeps N of them serving.

- Each worker runs its own server on the same port with SO_REUSEPORT (the kernel spreads
  connections across them). They are forked before any gRPC object exists in the parent, which
  never creates one, so every fork (a restart too) starts from a clean process.
- A worker that dies is forked again at once; one that keeps dying soon after its start waits
  longer each time (``RESTART_BACKOFF``), so a crash loop does not eat the machine, while the
  other workers go on serving.
- Each worker writes a heartbeat down a pipe from its event loop. A worker silent for
  ``--heartbeat-timeout`` seconds (stopped with SIGSTOP, or its loop stuck) is killed with SIGKILL
  and replaced.
- A second instance on a port already in use refuses to start (``port_in_use``): SO_REUSEPORT
  would otherwise let it share the port silently.
- A worker that cannot be started (no descriptor left for its pipes, ``EMFILE``/``ENFILE``, or
  no memory or process for the fork) is logged and tried again after a wait
  (``START_RETRY_BACKOFF``); a failed start closes whatever it opened, and the parent never
  dies of it.
- SIGTERM and SIGINT are forwarded to the workers, which drain; the parent exits 0 when all of
  them did. Once stopped, a process ignores both (``stop_signals_ignored``): the terminal's Ctrl-C
  reaches every process of the group and the parent's SIGTERM follows it, so a worker may get its
  second signal after it drained, when the interpreter's own handler is gone and the default kills.

Process figures (workers up, restarts) are in ``Supervisor.restarts`` and ``Supervisor.up()``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.process import BaseProcess

from referee.server import metrics
from referee.server.console import address, say

log = logging.getLogger("referee.service")

# A worker writes a heartbeat to its parent this often, from its event loop; silent for the
# heartbeat timeout (stopped, or its loop blocked), it is killed and replaced.
HEARTBEAT_EVERY_SECONDS = 0.5
# How long a worker may take from its fork to its first heartbeat (imports are already done).
START_TIMEOUT_SECONDS = 30.0
# A worker that lived less than this before it died counts as crash-looping.
STABLE_SECONDS = 10.0
# Waits before forking again a worker that keeps dying: 0 s, then 0.5 s, 1 s, 2 s, ... 10 s.
RESTART_BACKOFF = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0)
# The signals that make a server, or the parent of its workers, drain and exit.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Waits before trying again to start a worker whose start failed (no descriptor, no memory).
START_RETRY_BACKOFF = (0.5, 1.0, 2.0, 5.0)


@dataclass(eq=False)
class _Slot:
    """One worker position: the process filling it now and its history."""

    number: int
    process: BaseProcess | None = None
    beats: int | None = None  # read end of its heartbeat pipe
    started: float = 0.0
    last_beat: float | None = None
    quick_deaths: int = 0
    failed_starts: int = 0
    ever_started: bool = False
    restart_at: float | None = None
    history: list[int] = field(default_factory=list)


# What a worker runs: ``target(port, health_port, heartbeat_fd)``, its exit status. It writes a byte
# to ``heartbeat_fd`` every HEARTBEAT_EVERY_SECONDS from its event loop.
Target = Callable[[int, "int | None", int], int]


class Supervisor:
    """Keeps ``workers`` worker processes running ``target`` on one port until told to stop."""

    def __init__(
        self, workers: int, target: Target, port: int, health_port: int | None, heartbeat_timeout: float
    ) -> None:
        self.target = target
        self.port = port
        self.health_port = health_port
        self.heartbeat_timeout = heartbeat_timeout
        self.slots = [_Slot(n) for n in range(workers)]
        self.restarts = 0
        self.stopping = False
        # Dead workers whose live gauges are still to be dropped (the directory could not be read).
        self._unmarked: list[int] = []

    def up(self) -> int:
        """Workers running now."""
        return sum(1 for slot in self.slots if slot.process is not None and slot.process.exitcode is None)

    def _start(self, slot: _Slot, now: float) -> bool:
        """Fork a worker into ``slot``. When that fails, close what was opened, log, and set
        when to try again; False then."""
        pipe: tuple[int, ...] = ()
        pipes_before = _pipes()
        try:
            pipe = os.pipe()
            # Fork, not spawn: each child starts from this process, which holds no gRPC object.
            process = _FORK.Process(
                target=_worker,
                args=(self.target, self.port, self.health_port, pipe[1]),
                name=f"referee-worker-{slot.number}",
                daemon=False,
            )
            # The child starts with the stop signals blocked (``_worker``); here they are blocked
            # only for the fork, and one that came meanwhile is handled as the mask comes back.
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            try:
                process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        except OSError as error:
            # multiprocessing's start opens two pipes before it forks and leaves them open when the
            # fork (or the second pipe) fails: close every pipe this start opened.
            _close_fds(*pipe, *(_pipes() - pipes_before))
            wait = START_RETRY_BACKOFF[min(slot.failed_starts, len(START_RETRY_BACKOFF) - 1)]
            slot.failed_starts += 1
            slot.restart_at = now + wait
            log.error("cannot start worker %d (%s); trying again in %gs", slot.number, error.strerror or error, wait)
            return False
        read, write = pipe
        os.close(write)
        os.set_blocking(read, False)
        slot.process, slot.beats, slot.started = process, read, time.monotonic()
        slot.last_beat = slot.restart_at = None
        if self.stopping:  # told to stop while it was being forked: ``stop`` did not know it yet
            _signal(process, signal.SIGTERM)
        if slot.failed_starts:
            log.warning(
                "worker %d started (pid %s) after %d failed starts", slot.number, process.pid, slot.failed_starts
            )
        slot.failed_starts, slot.ever_started = 0, True
        metrics.workers_running(self.up())
        return True

    def forward(self, signum: int) -> None:
        """Send ``signum`` to every worker running."""
        for slot in self.slots:
            _signal(slot.process, signum)

    def stop(self) -> None:
        """Ask every worker to drain (SIGTERM); no worker is started after this."""
        self.stopping = True
        for slot in self.slots:
            _signal(slot.process, signal.SIGTERM)

    def run(self) -> int:
        """Start the workers and keep them up until ``stop``; 0 if every worker drained cleanly."""
        for slot in self.slots:
            if not self.stopping:  # a stop signal may come before the first worker is forked
                self._start(slot, time.monotonic())
        clean = True
        while True:
            self._read_beats(0.2)
            now = time.monotonic()
            if self._unmarked:
                self._unmarked = [pid for pid in self._unmarked if not metrics.process_died(pid)]
            for slot in self.slots:
                process = slot.process
                if process is not None and process.exitcode is not None:
                    clean &= self._ended(slot, process, now)
                elif process is not None and not self.stopping:
                    self._check_heartbeat(slot, process, now)
                elif process is None and not self.stopping and slot.restart_at is not None and now >= slot.restart_at:
                    replacing = slot.ever_started
                    if self._start(slot, now) and replacing:
                        self.restarts += 1
                        metrics.worker_restarted()
            if self.stopping and all(slot.process is None for slot in self.slots):
                return 0 if clean else 1

    def _ended(self, slot: _Slot, process: BaseProcess, now: float) -> bool:
        """Forget a worker that exited; schedule its replacement unless stopping. Was it clean?"""
        process.join()
        pid, exitcode = process.pid, process.exitcode
        if pid is not None and not metrics.process_died(pid):
            self._unmarked.append(pid)
        # Forgotten before it is closed: a stop signal's handler may run between any two lines
        # here, and it signals every process its slots hold (a closed one raises).
        beats, slot.process, slot.beats = slot.beats, None, None
        process.close()  # its pipes to the parent, now rather than when collected
        if beats is not None:
            os.close(beats)
        metrics.workers_running(self.up())
        if self.stopping:
            if exitcode != 0:  # the parent's own status says so; this says which worker and how
                log.error("worker pid %s %s while draining", pid, _how_it_ended(exitcode))
            return exitcode == 0
        lived = now - slot.started
        slot.quick_deaths = slot.quick_deaths + 1 if lived < STABLE_SECONDS else 0
        wait = RESTART_BACKOFF[min(max(slot.quick_deaths - 1, 0), len(RESTART_BACKOFF) - 1)]
        slot.restart_at = now + wait
        log.error("worker pid %s %s after %.1fs; starting another in %gs", pid, _how_it_ended(exitcode), lived, wait)
        return True

    def _check_heartbeat(self, slot: _Slot, process: BaseProcess, now: float) -> None:
        if slot.last_beat is None:
            silent, limit = now - slot.started, START_TIMEOUT_SECONDS
        else:
            silent, limit = now - slot.last_beat, self.heartbeat_timeout
        if silent > limit:
            log.error("worker pid %s sent no heartbeat for %.1fs; killing it", process.pid, silent)
            _signal(process, signal.SIGKILL)
            slot.last_beat = now  # killed once; its exit is handled like any other

    def _read_beats(self, timeout: float) -> None:
        pipes = {slot.beats: slot for slot in self.slots if slot.beats is not None}
        if not pipes:
            time.sleep(timeout)
            return
        # poll(2): no descriptor of its own and no limit on descriptor numbers (select has 1024).
        poller = select.poll()
        for fd in pipes:
            poller.register(fd, select.POLLIN)
        try:
            ready = poller.poll(timeout * 1000)
        except InterruptedError:
            return
        for fd, _ in ready:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                continue
            if data:
                pipes[fd].last_beat = time.monotonic()


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


_FORK = get_context("fork")


def _pipes() -> set[int]:
    """This process's descriptors that are pipes (the parent's other threads open none)."""
    found = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                    found.add(int(name))
    return found


def serve_workers(
    workers: int, host: str, port: int, health_port: int | None, heartbeat_timeout: float, target: Target
) -> int:
    """``serve --workers N``: supervise N workers running ``target`` on one port (and one health
    port, when there is one) until SIGTERM or SIGINT."""
    try:
        reservation = _reserve_port(host, port)
    except OSError as error:
        say(f"remigio-referee serve: error: cannot bind {address(host, port)}: {error.strerror or error}")
        return 1
    # Held open until the workers are gone, so port 0 resolves once and the port stays ours.
    with reservation, contextlib.ExitStack() as held:
        port = reservation.getsockname()[1]
        if health_port is not None:
            # The health port is shared the same way, and port 0 resolved once for every worker.
            try:
                health = held.enter_context(_reserve_port(host, health_port))
            except OSError as error:
                where = address(host, health_port)
                say(f"remigio-referee serve: error: cannot bind the health port {where}: {error.strerror or error}")
                return 1
            health_port = health.getsockname()[1]
        supervisor = Supervisor(workers, target, port, health_port, heartbeat_timeout)
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda _signum, _frame: supervisor.stop())
        # SIGHUP (read the key file again) goes to every worker; the parent itself holds no keys.
        signal.signal(signal.SIGHUP, lambda _signum, _frame: supervisor.forward(signal.SIGHUP))
        say(f"remigio-referee: {workers} workers on {address(host, port)} (parent pid {os.getpid()})")
        status = supervisor.run()
        stop_signals_ignored()
        return status


def stop_signals_ignored() -> None:
    """From now on this process ignores SIGTERM and SIGINT: it has stopped and only exits.

    Ignored, not handled: the interpreter puts back the default of every signal it handles as it
    exits (asyncio does as its loop closes), and the default of both ends the process by the
    signal, which its parent reads as a failed stop. An ignored signal stays ignored to the end.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def port_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be ours (another process listens there), or None.

    Bound without SO_REUSEPORT, the probe fails while any socket holds the port, another
    instance's SO_REUSEPORT sockets included; SO_REUSEADDR lets it past connections of an
    earlier run still closing (TIME_WAIT).
    """
    if port == 0:
        return None
    family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return f"cannot bind {address(host, port)}: the port is already in use (another instance?)"
            return f"cannot bind {address(host, port)}: {error.strerror or error}"
    return None


def _reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (a free port for 0) with SO_REUSEPORT, so the workers can bind it too."""
    family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(where)
    except OSError:
        sock.close()
        raise
    return sock


def _worker(target: Target, port: int, health_port: int | None, heartbeat_fd: int) -> None:
    parent = os.getppid()
    _stop_with_parent()
    if os.getppid() != parent:  # the parent died before the request above took effect
        sys.exit(1)
    # The parent's handlers (forward to workers) must not run here; the server sets its own and
    # only then unblocks the stop signals (``serve_one``). Blocked since the fork, a stop signal
    # that comes before waits for them: the parent's handler, a copy in this process until the
    # line below, took one and the worker served on while its parent waited for it to stop.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the server takes it (its default would kill)
    try:
        code = target(port, health_port, heartbeat_fd)
    finally:
        # A forked worker ends without the interpreter's exit handlers: the log's held lines go now.
        logging.shutdown()
    sys.exit(code)


def _stop_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies, so no worker outlives it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _signal(process: BaseProcess | None, signum: int) -> None:
    if process is not None and process.pid is not None and process.exitcode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)


def _how_it_ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with status {exitcode}"


assert HEARTBEAT_EVERY_SECONDS < 1.0  # the parent's default timeout allows several missed beats

__all__ = ["STOP_SIGNALS", "Supervisor", "port_in_use", "serve_workers", "stop_signals_ignored"]
