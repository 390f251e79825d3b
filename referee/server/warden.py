"""The connection warden: at most so many connections per client address, whatever they do.

gRPC's core counts every accepted connection against the server's one connection cap, silent ones
included, and has no cap per client: left alone, one address that opens a thousand connections
and never speaks keeps every other client out. The warden looks at the process's own TCP
connections on the ports it guards (its open descriptors), groups them by the client's address,
and shuts down the newest connections of an address over its cap, silent ones first; gRPC then
sees the connection end and lets it go. Connections that never complete their HTTP/2 handshake
are closed by gRPC itself after ``--handshake-timeout``.

The look is cheap: a descriptor seen before (same number, same socket) is not examined again, so a
sweep costs one ``readlink`` per open descriptor plus a few system calls per new connection.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("referee.service")

DEFAULT_MAX_CONNECTIONS_PER_PEER = 64
SWEEP_SECONDS = 0.2
# After a sweep that shut connections down the next comes sooner: an address that opens them
# again as fast as they are shut must not fill the server's connection cap in between.
BUSY_SWEEP_SECONDS = 0.02
# At most one line a second about refusals; the rest are counted in the next line.
_LOG_EVERY_SECONDS = 1.0
# struct tcp_info (linux/tcp.h): tcpi_bytes_received is the u64 at offset 128.
_TCP_INFO_BYTES = 136
_BYTES_RECEIVED = struct.Struct("=Q")
_BYTES_RECEIVED_OFFSET = 128


@dataclass(slots=True)
class _Connection:
    """A connection the warden has seen: its descriptor, its client's address, when it was seen."""

    fd: int
    link: str  # "socket:[inode]": a reused descriptor number links to another socket
    peer: str
    first_seen: float


class ConnectionWarden:
    """A thread that holds each client address to ``per_peer`` connections on ``ports``.

    ``refused(reason)`` is called for every connection it shuts down (the metrics count them).
    """

    def __init__(
        self,
        ports: set[int],
        per_peer: int = DEFAULT_MAX_CONNECTIONS_PER_PEER,
        refused: Callable[[str], None] = lambda _reason: None,
        every: float = SWEEP_SECONDS,
    ) -> None:
        self.ports = ports
        self.per_peer = per_peer
        self.every = every
        self._refused = refused
        self._known: dict[int, _Connection] = {}
        self._other: dict[int, str] = {}  # descriptors that are no connection of ours, by their link
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unlogged = 0
        self._last_line = 0.0
        self.shut = 0

    def start(self) -> None:
        """Sweep every ``every`` seconds in a daemon thread, until ``stop``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="connection-warden", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the sweeps."""
        self._stop.set()

    def _run(self) -> None:
        pause = self.every
        while not self._stop.wait(pause):
            try:
                pause = BUSY_SWEEP_SECONDS if self.sweep() else self.every
            except Exception:  # the warden must outlive any surprise
                log.exception("the connection warden's sweep failed")
                pause = self.every

    def sweep(self) -> int:
        """Look at the connections once and shut those over a peer's cap; how many were shut."""
        now = time.monotonic()
        live: dict[int, _Connection] = {}
        others: dict[int, str] = {}
        for name in _descriptors():
            fd = int(name)
            try:
                link = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if not link.startswith("socket:"):
                continue
            known = self._known.get(fd)
            if known is not None and known.link == link:
                live[fd] = known
                continue
            if self._other.get(fd) == link:
                others[fd] = link
                continue
            peer = self._peer_of(fd)
            if peer is None:
                others[fd] = link
            else:
                live[fd] = _Connection(fd, link, peer, now)
        self._known, self._other = live, others
        by_peer: defaultdict[str, list[_Connection]] = defaultdict(list)
        for connection in live.values():
            by_peer[connection.peer].append(connection)
        shut = 0
        for peer, connections in by_peer.items():
            extra = len(connections) - self.per_peer
            if extra <= 0:
                continue
            # Silent ones first, then the newest: a client's old, working connections stay.
            connections.sort(key=lambda c: (_bytes_received(c.fd) != 0, -c.first_seen))
            for connection in connections[:extra]:
                if _shut_down(connection.fd, connection.link):
                    shut += 1
                    self._known.pop(connection.fd, None)
                    self._refused("per_peer")
            self._report(peer, extra)
        self.shut += shut
        return shut

    def _peer_of(self, fd: int) -> str | None:
        """The client address of a TCP connection accepted on one of our ports, else None."""
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                    return None
                local = sock.getsockname()
                if local[1] not in self.ports:
                    return None
                address = str(sock.getpeername()[0])  # a listening socket has no peer: OSError
        except OSError:
            return None
        # A dual-stack port sees IPv4 clients as ::ffff:a.b.c.d: the same client either way.
        return address.removeprefix("::ffff:") if "." in address else address

    def _report(self, peer: str, extra: int) -> None:
        self._unlogged += extra
        now = time.monotonic()
        if now - self._last_line >= _LOG_EVERY_SECONDS:
            log.warning(
                "connections refused: %s held more than %d connections (%d shut down since the last line)",
                peer,
                self.per_peer,
                self._unlogged,
            )
            self._last_line, self._unlogged = now, 0


def _descriptors() -> list[str]:
    try:
        return os.listdir("/proc/self/fd")
    except OSError:
        return []


def _bytes_received(fd: int) -> int:
    """Bytes the connection has received (0 for one that never spoke); -1 when unknown."""
    with contextlib.suppress(OSError):
        with socket.socket(fileno=os.dup(fd)) as sock:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
            if len(info) >= _BYTES_RECEIVED_OFFSET + 8:
                return int(_BYTES_RECEIVED.unpack_from(info, _BYTES_RECEIVED_OFFSET)[0])
    return -1


def _shut_down(fd: int, link: str) -> bool:
    """Shut the connection down both ways (gRPC, which owns the descriptor, then closes it), if the
    descriptor still is that connection's (``link``)."""
    try:
        duplicate = os.dup(fd)
        if os.readlink(f"/proc/self/fd/{duplicate}") != link:  # the number now names another socket
            os.close(duplicate)
            return False
        with socket.socket(fileno=duplicate) as sock:
            sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False


__all__ = ["DEFAULT_MAX_CONNECTIONS_PER_PEER", "ConnectionWarden"]
