"""The connection warden: each client address held to its share, and the slots kept for clients
that call.

gRPC's core counts every accepted connection against one cap, silent ones included, and has no cap
per client: left alone, one address that opens a thousand connections and never speaks keeps every
other client out, and so do a few hundred addresses that each keep a few idle ones. The warden
looks at a process's TCP connections on the ports it guards (its open descriptors), and shuts
down, each sweep:

- the newest connections of an address over its cap, silent ones first (an IPv6 client is its
  /64: one customer's allocation, which hands anyone millions of addresses);
- a connection that has made no call ``first_call_seconds`` after it was seen: a client connects
  to call, and one that does not only holds a slot;
- past ``max_connections``, the connections that never called, oldest first, then those idle
  longest, until the count is back at the cap (for another process's connections, whose calls it
  is not told of: the silent ones, then those that have received nothing for longest). gRPC's core is given room above that cap
  (``core_cap``), so a new client is accepted and can make its first call before the warden
  chooses whom to shed: a full server sheds the silent, it does not refuse the caller.

A call is known by the servicers telling the warden (``note_call``) the peer, address and port,
that made it. gRPC then sees the connection end and lets it go; connections that never complete
their HTTP/2 handshake are also closed by gRPC itself after ``--handshake-timeout``.

The warden can also guard another process's connections (``pid``): the gateway's launcher
guards Envoy's, which has no cap per client address of its own. It borrows each socket with
``pidfd_getfd`` (Linux 5.6; the launcher is Envoy's parent, so it may) to read its addresses or
shut it down; the other process sees its peer hang up.

The look is cheap: a descriptor seen before (same number, same socket) is not examined again, so a
sweep costs one ``readlink`` per open descriptor plus a few system calls per new connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import logging
import os
import socket
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

log = logging.getLogger("referee.service")

DEFAULT_MAX_CONNECTIONS_PER_PEER = 64
DEFAULT_FIRST_CALL_SECONDS = 10.0
# gRPC's core refuses at this many times the warden's cap: room for new clients while the warden
# sheds, and still a bound on what a flood faster than the sweeps can open.
CORE_CAP_FACTOR = 4
SWEEP_SECONDS = 0.2
# After a sweep that shut connections down the next comes sooner: an address that opens them
# again as fast as they are shut must not fill the server's connection cap in between.
BUSY_SWEEP_SECONDS = 0.02
# At most one line a second about refusals; the rest are counted in the next line.
_LOG_EVERY_SECONDS = 1.0
# A call noted for a connection the warden has not seen yet is kept this long for it.
_NOTE_GRACE_SECONDS = 5.0
# struct tcp_info (linux/tcp.h): tcpi_bytes_received is the u64 at offset 128.
_TCP_INFO_BYTES = 136
_BYTES_RECEIVED = struct.Struct("=Q")
_BYTES_RECEIVED_OFFSET = 128
# tcpi_last_data_recv: the u32 at offset 52, milliseconds since data last came in.
_LAST_DATA_RECEIVED = struct.Struct("=I")
_LAST_DATA_RECEIVED_OFFSET = 52
_SYS_PIDFD_GETFD = 438  # the same number on every architecture (a syscall of the unified table)


def core_cap(max_connections: int) -> int:
    """gRPC core's own connection cap for a warden cap of ``max_connections``."""
    return max_connections * CORE_CAP_FACTOR


def peer_key(address: str) -> str:
    """The client an address counts as: an IPv4 address itself, an IPv6 address its /64."""
    if "." in address:
        return address.removeprefix("::ffff:")  # a dual-stack port sees IPv4 clients as ::ffff:a.b.c.d
    try:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    except ValueError:
        return address


def call_key(peer: str) -> tuple[str, int] | None:
    """(address, port) of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``), else None."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.rpartition(":")
    try:
        return host.strip("[]").removeprefix("::ffff:"), int(port)
    except ValueError:
        return None


@dataclass(slots=True)
class _Connection:
    """A connection the warden has seen: its descriptor, its client, when it was seen."""

    fd: int
    link: str  # "socket:[inode]": a reused descriptor number links to another socket
    peer: str  # the client it counts as (peer_key)
    address: tuple[str, int]  # the client's address and port, as calls are noted
    first_seen: float


class _Descriptors:
    """The descriptors of a process: this one, or another whose sockets are borrowed."""

    def __init__(self, pid: int | None) -> None:
        self.proc = "/proc/self/fd" if pid is None else f"/proc/{pid}/fd"
        self._pidfd = None if pid is None else os.pidfd_open(pid)
        self._libc = None if pid is None else ctypes.CDLL(None, use_errno=True)

    def names(self) -> list[str]:
        try:
            return os.listdir(self.proc)
        except OSError:
            return []

    def link(self, fd: int) -> str | None:
        try:
            return os.readlink(f"{self.proc}/{fd}")
        except OSError:
            return None

    @contextlib.contextmanager
    def socket(self, fd: int, link: str) -> Iterator[socket.socket | None]:
        """The socket behind ``fd``, if it still is ``link``'s; closing it leaves the owner's."""
        if self._pidfd is None:
            try:
                duplicate = os.dup(fd)
            except OSError:
                yield None
                return
        else:
            assert self._libc is not None
            duplicate = self._libc.syscall(_SYS_PIDFD_GETFD, self._pidfd, fd, 0)
            if duplicate < 0:
                yield None
                return
        try:
            if os.readlink(f"/proc/self/fd/{duplicate}") != link:  # the number now names another socket
                os.close(duplicate)
                yield None
                return
            sock = socket.socket(fileno=duplicate)
        except OSError:
            with contextlib.suppress(OSError):
                os.close(duplicate)
            yield None
            return
        with sock:
            yield sock

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)


class ConnectionWarden:
    """A thread that holds each client to ``per_peer`` connections on ``ports``, closes those that
    make no call within ``first_call_seconds``, and sheds past ``max_connections``.

    ``refused(reason)`` is called for every connection it shuts down (the metrics count them):
    ``per_peer``, ``no_call``, ``over_cap``. ``pid`` guards another process's connections.
    ``first_call_seconds`` None: connections are never closed for making no call. ``notes_calls``
    False: the warden is told of no calls (another process's connections, Envoy's), and past the
    cap sheds the silent, then those that have received nothing for longest.
    """

    def __init__(
        self,
        ports: set[int],
        per_peer: int = DEFAULT_MAX_CONNECTIONS_PER_PEER,
        refused: Callable[[str], None] = lambda _reason: None,
        every: float = SWEEP_SECONDS,
        *,
        max_connections: int | None = None,
        first_call_seconds: float | None = None,
        pid: int | None = None,
        notes_calls: bool = True,
    ) -> None:
        self.ports = ports
        self.per_peer = per_peer
        self.max_connections = max_connections
        self.first_call_seconds = first_call_seconds
        self.notes_calls = notes_calls
        self.every = every
        self._refused = refused
        self._descriptors = _Descriptors(pid)
        self._known: dict[int, _Connection] = {}
        self._other: dict[int, str] = {}  # descriptors that are no connection of ours, by their link
        # (address, port) → when it last made a call: written by the servicers' thread, read here.
        self._calls: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unlogged: defaultdict[str, int] = defaultdict(int)
        self._over: list[str] = []  # clients over their cap since the last line (the first few)
        self._last_line = 0.0
        self.shut = 0

    def note_call(self, peer: str) -> None:
        """A call came from ``peer`` (gRPC's ``context.peer()``): its connection is a caller's."""
        key = call_key(peer)
        if key is not None:
            self._calls[key] = time.monotonic()

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
        self._descriptors.close()

    def sweep(self) -> int:
        """Look at the connections once and shut those it must; how many were shut."""
        now = time.monotonic()
        live = self._look(now)
        self._forget_calls(live, now)
        shut = 0
        by_peer: defaultdict[str, list[_Connection]] = defaultdict(list)
        for connection in live.values():
            by_peer[connection.peer].append(connection)
        for connections in by_peer.values():
            extra = len(connections) - self.per_peer
            if extra > 0:
                # Silent ones first, then the newest: a client's old, working connections stay.
                connections.sort(key=lambda c: (self._last_call(c) is not None, self._spoke(c), -c.first_seen))
                shut += self._shut(connections[:extra], "per_peer", live)
                if len(self._over) < _NAMED_IN_A_LINE and connections[0].peer not in self._over:
                    self._over.append(connections[0].peer)
        if self.first_call_seconds is not None:
            late = now - self.first_call_seconds
            silent = [c for c in live.values() if c.first_seen <= late and self._last_call(c) is None]
            shut += self._shut(silent, "no_call", live)
        if self.max_connections is not None and len(live) > self.max_connections:
            # Never called, oldest first; then idle longest. A new client has just connected and
            # calls at once: it is the last to go.
            # Without the calls (another process's connections): silent first, then the one that
            # has received nothing for longest.
            def order(c: _Connection) -> tuple[bool, float]:
                if not self.notes_calls:
                    received, idle = self._traffic(c)
                    return (received != 0, -idle)
                last = self._last_call(c)
                return (last is not None, c.first_seen if last is None else last)

            shut += self._shut(sorted(live.values(), key=order)[: len(live) - self.max_connections], "over_cap", live)
        self.shut += shut
        if shut:
            self._report(now)
        return shut

    def _look(self, now: float) -> dict[int, _Connection]:
        live: dict[int, _Connection] = {}
        others: dict[int, str] = {}
        for name in self._descriptors.names():
            fd = int(name)
            link = self._descriptors.link(fd)
            if link is None or not link.startswith("socket:"):
                continue
            known = self._known.get(fd)
            if known is not None and known.link == link:
                live[fd] = known
                continue
            if self._other.get(fd) == link:
                others[fd] = link
                continue
            address = self._address_of(fd, link)
            if address is None:
                others[fd] = link
            else:
                live[fd] = _Connection(fd, link, peer_key(address[0]), address, now)
        self._known, self._other = live, others
        return live

    def _forget_calls(self, live: dict[int, _Connection], now: float) -> None:
        if len(self._calls) <= len(live):
            return
        wanted = {connection.address for connection in live.values()}
        for key, when in list(self._calls.items()):
            if key not in wanted and now - when > _NOTE_GRACE_SECONDS:
                self._calls.pop(key, None)

    def _last_call(self, connection: _Connection) -> float | None:
        return self._calls.get(connection.address)

    def _shut(self, connections: list[_Connection], reason: str, live: dict[int, _Connection]) -> int:
        shut = 0
        for connection in connections:
            if connection.fd not in live:
                continue  # shut already this sweep, for another reason
            if self._shut_down(connection):
                shut += 1
                self._unlogged[reason] += 1
                self._refused(reason)
            live.pop(connection.fd, None)
            self._known.pop(connection.fd, None)
        return shut

    def _address_of(self, fd: int, link: str) -> tuple[str, int] | None:
        """The client's address and port of a TCP connection accepted on one of our ports, else None."""
        with self._descriptors.socket(fd, link) as sock:
            if sock is None:
                return None
            try:
                if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                    return None
                if sock.getsockname()[1] not in self.ports:
                    return None
                peer = sock.getpeername()  # a listening socket has no peer: OSError
            except OSError:
                return None
        return str(peer[0]).removeprefix("::ffff:"), int(peer[1])

    def _spoke(self, connection: _Connection) -> bool:
        """Whether the connection has sent anything (a silent socket is the first to go)."""
        return self._traffic(connection)[0] != 0

    def _traffic(self, connection: _Connection) -> tuple[int, float]:
        """Bytes the connection has received, and seconds since it last received any (-1, 0.0
        when unknown: it counts as a busy one)."""
        with self._descriptors.socket(connection.fd, connection.link) as sock:
            if sock is None:
                return -1, 0.0
            with contextlib.suppress(OSError):
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
                if len(info) >= _BYTES_RECEIVED_OFFSET + 8:
                    received = _BYTES_RECEIVED.unpack_from(info, _BYTES_RECEIVED_OFFSET)[0]
                    idle_ms = _LAST_DATA_RECEIVED.unpack_from(info, _LAST_DATA_RECEIVED_OFFSET)[0]
                    return int(received), idle_ms / 1000
        return -1, 0.0

    def _shut_down(self, connection: _Connection) -> bool:
        """Shut the connection down both ways (its owner then sees it end and closes it), if the
        descriptor still is that connection's."""
        with self._descriptors.socket(connection.fd, connection.link) as sock:
            if sock is None:
                return False
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                return False
        return True

    def _report(self, now: float) -> None:
        if now - self._last_line < _LOG_EVERY_SECONDS:
            return
        said = []
        for reason, count in sorted(self._unlogged.items()):
            if reason == "per_peer":
                said.append(f"{count} over a client's cap of {self.per_peer} ({', '.join(self._over)} held more)")
            else:
                said.append(f"{count} {_REASONS[reason]}")
        log.warning("connections shut down since the last line: %s", "; ".join(said))
        self._last_line = now
        self._unlogged.clear()
        self._over.clear()


_NAMED_IN_A_LINE = 3
_REASONS = {
    "no_call": "that made no call in time",
    "over_cap": "that never called or idled longest, past the connection cap",
}


__all__ = [
    "DEFAULT_FIRST_CALL_SECONDS",
    "DEFAULT_MAX_CONNECTIONS_PER_PEER",
    "ConnectionWarden",
    "call_key",
    "core_cap",
    "peer_key",
]
