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
import functools
import ipaddress
import logging
import os
import socket
import struct
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from referee.server import defaults

log = logging.getLogger("referee.service")

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


def peer_key(address: str) -> str:
    """The client an address counts as: an IPv4 address itself, an IPv6 address its /64."""
    if "." in address:
        return address.removeprefix("::ffff:")  # a dual-stack port sees IPv4 clients as ::ffff:a.b.c.d
    try:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    except ValueError:
        return address


# Read on every call: a connection's calls share their peer string, so it is parsed once per
# connection while the connection is among the most recent few thousand.
@functools.lru_cache(maxsize=4096)
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


def _ipv4(text: str) -> str:
    """An address of /proc/net/tcp: 8 hex digits, the address's bytes in the machine's order."""
    return socket.inet_ntop(socket.AF_INET, struct.pack("=I", int(text, 16)))


def _ipv6(text: str) -> str:
    """An address of /proc/net/tcp6: four 32-bit words, each in the machine's order."""
    words = struct.pack("=4I", *(int(text[i : i + 8], 16) for i in range(0, 32, 8)))
    return socket.inet_ntop(socket.AF_INET6, words).removeprefix("::ffff:")


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
# TCP_ESTABLISHED (1) and TCP_CLOSE_WAIT (8): a socket in either is still held by a process (or
# waits in the accept queue); one that its process has closed has left both. So a descriptor
# seen before whose socket is still in the table is still that socket, with no look at it.
_OPEN_STATES = (1 << 1) | (1 << 8)
_OPEN_STATE_NAMES = ("01", "08")
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBBBI48x")  # struct inet_diag_req_v2, its socket id left zero (a dump)


_INET_DIAG_REQ_BYTECODE = 1
_INET_DIAG_BC_S_EQ = 11


def _local_port_filter(port: int) -> bytes:
    """A sock_diag filter (its bytecode, as an attribute) for sockets whose local port is
    ``port``: the clients' own ends of their connections, on this machine too, stay out."""
    # Equal: on to the end (accept); not: past the end (reject). The port rides in a second op.
    code = struct.pack("=BBH", _INET_DIAG_BC_S_EQ, 8, 12) + struct.pack("=BBH", 0, 0, port)
    return struct.pack("=HH", 4 + len(code), _INET_DIAG_REQ_BYTECODE) + code


def _diag_table(ports: set[int]) -> dict[str, tuple[str, int]]:
    """``tcp_table`` from the kernel's sock_diag netlink interface (both families)."""
    table: dict[str, tuple[str, int]] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(5)
        for family, port in ((family, port) for family in (socket.AF_INET, socket.AF_INET6) for port in ports):
            request = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _OPEN_STATES) + _local_port_filter(port)
            header = _HEADER.pack(_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
            diag.send(header + request)
            done = False
            while not done:
                data = diag.recv(1 << 20)
                offset = 0
                while offset + _HEADER.size <= len(data):
                    length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
                    if kind == _NLMSG_DONE:
                        done = True
                        break
                    if kind == _NLMSG_ERROR or length < _HEADER.size:
                        raise OSError("sock_diag refused the dump")
                    # struct inet_diag_msg: family at 0, dport at 6, dst at 24, inode at 68.
                    at = offset + _HEADER.size
                    size = 4 if data[at] == socket.AF_INET else 16
                    address = socket.inet_ntop(data[at], data[at + 24 : at + 24 + size]).removeprefix("::ffff:")
                    inode = int.from_bytes(data[at + 68 : at + 72], sys.byteorder)
                    table[f"socket:[{inode}]"] = (address, int.from_bytes(data[at + 6 : at + 8], "big"))
                    offset += (length + 3) & ~3
                if not data:
                    break
    return table


def _proc_table(net: str, ports: set[int]) -> dict[str, tuple[str, int]]:
    """``tcp_table`` from the kernel's text tables in ``net`` (/proc/PID/net)."""
    table: dict[str, tuple[str, int]] = {}
    wanted = {f"{port:04X}" for port in ports}
    for name, parse in (("tcp", _ipv4), ("tcp6", _ipv6)):
        try:
            with open(f"{net}/{name}", encoding="ascii") as lines:
                next(lines, None)  # the header
                for line in lines:
                    fields = line.split(None, 10)
                    if len(fields) < 10:
                        continue
                    local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                    link = f"socket:[{inode}]"
                    if state not in _OPEN_STATE_NAMES or local[-4:] not in wanted:
                        continue
                    host, _, port = remote.partition(":")
                    table[link] = (parse(host), int(port, 16))
        except OSError:
            continue
    return table


class _Descriptors:
    """The descriptors of a process: this one, or another whose sockets are borrowed."""

    def __init__(self, pid: int | None) -> None:
        self.proc = "/proc/self/fd" if pid is None else f"/proc/{pid}/fd"
        self.net = "/proc/self/net" if pid is None else f"/proc/{pid}/net"
        self._pidfd = None if pid is None else os.pidfd_open(pid)
        self._libc = ctypes.CDLL(None, use_errno=True)

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
        duplicate = self._borrow(fd, link)
        if duplicate is None:
            yield None
            return
        try:
            sock = socket.socket(fileno=duplicate)
        except OSError:
            os.close(duplicate)
            yield None
            return
        with sock:
            yield sock

    def shut_down(self, fd: int, link: str) -> bool:
        """Shut the connection behind ``fd`` down both ways, if it still is ``link``'s (its owner
        then sees it end and closes it). Straight system calls: a sweep may shut thousands."""
        duplicate = self._borrow(fd, link)
        if duplicate is None:
            return False
        try:
            return self._libc.shutdown(duplicate, socket.SHUT_RDWR) == 0
        finally:
            os.close(duplicate)

    def _borrow(self, fd: int, link: str) -> int | None:
        """A descriptor of this process for the socket behind ``fd``, if it still is ``link``'s."""
        try:
            duplicate = os.dup(fd) if self._pidfd is None else self._libc.syscall(_SYS_PIDFD_GETFD, self._pidfd, fd, 0)
        except OSError:
            return None
        if duplicate < 0:
            return None
        try:
            same = f"socket:[{os.fstat(duplicate).st_ino}]" == link  # else the number names another socket now
        except OSError:
            same = False
        if not same:
            os.close(duplicate)
            return None
        return duplicate

    def tcp_table(self, ports: set[int]) -> dict[str, tuple[str, int]]:
        """The open TCP connections on ``ports`` in the process's network namespace, by their link
        (``socket:[inode]``): the client's address and port.
        One question to the kernel (sock_diag, open connections only), instead of a look at each
        socket: a sweep must keep pace with clients that open thousands of connections a second.
        Where sock_diag is refused, the kernel's tables in /proc (TIME_WAIT included: slower)."""
        with contextlib.suppress(OSError):
            return _diag_table(ports)
        return _proc_table(self.net, ports)

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
        per_peer: int = defaults.MAX_CONNECTIONS_PER_PEER,
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
                # Those that never called first, then the newest: a client's old, working
                # connections stay. (No look at each socket here: an address over its cap may
                # hold thousands, and the sweep must keep pace with one that reopens them.)
                connections.sort(key=lambda c: (self._last_call(c) is not None, -c.first_seen))
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
        """The connections on our ports now, by descriptor. Only descriptors not seen before, or
        whose socket has left the table, are looked at: under a flood of reopened connections a
        sweep costs what changed, not what is open."""
        live: dict[int, _Connection] = {}
        names = self._descriptors.names()
        table = self._descriptors.tcp_table(self.ports)  # after the listing: it holds every socket listed
        for name in names:
            fd = int(name)
            known = self._known.get(fd)
            if known is not None and known.link in table:
                live[fd] = known
                continue
            link = self._descriptors.link(fd)
            if link is None:
                continue
            address = table.get(link)  # None: no connection on our ports (a file, a pipe, ...)
            if address is not None:
                live[fd] = _Connection(fd, link, peer_key(address[0]), address, now)
        self._known = live
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
        return self._descriptors.shut_down(connection.fd, connection.link)

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
    "ConnectionWarden",
    "call_key",
    "peer_key",
]
