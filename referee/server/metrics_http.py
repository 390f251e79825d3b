"""The ``/metrics`` port: a small HTTP/1.1 server that no client can pin.

One thread runs one poll loop over non-blocking sockets, so an open connection costs a
descriptor and a few hundred bytes, never a thread, and only for a while:

- At most ``max_connections`` are open at once. A connection beyond them takes the place of the
  oldest one that has not yet sent its whole request (a scraper sends its request as soon as it
  connects, an idle client never does); when every open one is being answered, the new one is
  closed at once.
- Each connection has ``timeout`` seconds from its accept to send its request and take its
  reply; then it is dropped, whether it sent nothing, sent slowly or reads slowly.
- A request is its head alone, at most ``MAX_REQUEST_BYTES``. Only ``GET`` (and ``HEAD``) of
  ``/metrics`` and ``/`` are answered; anything else gets a one-line error. Every reply ends its
  connection (``Connection: close``).
- Out of descriptors (``EMFILE``, ``ENFILE``), accepting pauses for a moment rather than spinning
  on a listening socket that stays readable; a scrape that cannot read the metrics then gets a
  503.
- A forked child (a worker) closes its copies of the server's sockets at once, so a connection
  the parent closes is closed, and the child never holds the metrics port.

Every dropped connection is counted (``on_drop`` with a reason from ``DROP_REASONS``), and the
drops, pauses and failed scrapes are logged together at most every ``REPORT_EVERY_SECONDS``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import selectors
import socket
import struct
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence

log = logging.getLogger("referee.service")

# A request line and headers; a scraper sends a few hundred bytes.
MAX_REQUEST_BYTES = 8192
# Connections accepted in one turn of the loop, so reading and answering are never starved.
ACCEPT_BATCH = 64
# How long accepting pauses when the process has no descriptor left for a connection.
ACCEPT_PAUSE_SECONDS = 0.1
# The loop wakes at least this often (for the report below).
TICK_SECONDS = 1.0
# Drops, pauses and failed scrapes are logged together, at most this often.
REPORT_EVERY_SECONDS = 10.0
# Connections the kernel holds for the loop to accept.
BACKLOG = 128
# Why a connection was dropped (the ``reason`` label of the drop counter):
# full: every open connection was being answered, so the new one was closed at once;
# evicted: it had not sent its whole request when a new connection needed its place;
# timeout: its exchange did not end within the timeout.
DROP_REASONS = ("full", "evicted", "timeout")

_NO_DESCRIPTOR = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# SO_LINGER on, zero seconds: close() resets the connection and frees it at once (no TIME_WAIT).
_RESET = struct.pack("ii", 1, 0)
_REASONS = {
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}
_INDEX = b"Remigio referee: Prometheus metrics at /metrics\n"

# render(Accept, Accept-Encoding) -> (body, headers): the exposition of the metrics.
Render = Callable[[str, str], tuple[bytes, Sequence[tuple[str, str]]]]


class _Connection:
    """One accepted connection: its socket, its deadline and where its exchange stands."""

    __slots__ = ("deadline", "fd", "received", "reply", "sent", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.deadline = deadline
        self.received = bytearray()
        self.reply: memoryview | None = None  # set once the request is answered
        self.sent = 0


class MetricsServer:
    """Serves ``render``'s exposition at ``http://host:port/metrics`` from a thread of its own
    until ``stop``. Raises OSError when the address cannot be bound."""

    def __init__(
        self,
        host: str,
        port: int,
        render: Render,
        *,
        max_connections: int,
        timeout: float,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        if max_connections < 1 or timeout <= 0:
            raise ValueError("max_connections and timeout must be positive")
        self.max_connections = max_connections
        self.timeout = timeout
        self._render = render
        self._on_drop = on_drop
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, kind, proto)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(BACKLOG)
            listener.setblocking(False)
            wake_read, wake_write = os.pipe()
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self.port: int = listener.getsockname()[1]
        self._wake_read, self._wake_write = wake_read, wake_write
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        # poll(2): no descriptor of its own, and no limit on descriptor numbers (select has 1024).
        self._selector = selectors.PollSelector()
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(wake_read, selectors.EVENT_READ)
        # Open connections in the order they were accepted, so also by deadline.
        self._connections: dict[int, _Connection] = {}
        # Held by the loop while it works (never while it waits) and across a fork, so a child
        # is forked between two turns of the loop and knows every socket it must close.
        self._lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self._paused_until: float | None = None
        self._events: Counter[str] = Counter()
        self._last_report = -REPORT_EVERY_SECONDS
        _servers.add(self)
        self._thread = threading.Thread(target=self._run, name="referee-metrics", daemon=True)
        self._thread.start()

    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._connections)

    def stop(self) -> None:
        """Stop serving: close every connection and the port."""
        with self._lock:
            self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        self._thread.join(timeout=5)
        with self._lock:
            self._close_all()

    # The loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                events = self._selector.select(self._wait())
            except OSError:  # poll itself short of memory: try again shortly
                time.sleep(ACCEPT_PAUSE_SECONDS)
                continue
            with self._lock:
                if self._stopping or self._closed:
                    return
                now = time.monotonic()
                listening = False
                for key, mask in events:
                    connection = key.data
                    if connection is None:
                        if key.fileobj is self._listener:
                            listening = True
                        else:
                            self._drain_wake()
                    elif connection.fd in self._connections:
                        self._serve(connection, mask, now)
                # Requests already in are answered before new connections may take their place.
                if listening:
                    self._accept(now)
                self._expire(now)
                self._resume(now)
                self._report(now)

    def _wait(self) -> float:
        """Seconds until the loop has something to do without an event."""
        now = time.monotonic()
        wake = now + TICK_SECONDS
        for connection in self._connections.values():  # the oldest has the first deadline
            wake = min(wake, connection.deadline)
            break
        if self._paused_until is not None:
            wake = min(wake, self._paused_until)
        return max(0.0, wake - now)

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._wake_read, 64)

    # Accepting -----------------------------------------------------------------------------------

    def _accept(self, now: float) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue  # the client gave up before its turn
                self._pause(now, error)  # out of descriptors (or worse): never spin on it
                return
            self._admit(sock, now)

    def _admit(self, sock: socket.socket, now: float) -> None:
        if len(self._connections) >= self.max_connections:
            waiting = next((c for c in self._connections.values() if c.reply is None), None)
            # Counted before the close, so whoever sees the close can read the count.
            if waiting is None:
                self._dropped("full")
                _reset(sock)
                return
            self._dropped("evicted")
            self._close(waiting, reset=True)
        try:
            sock.setblocking(False)
            connection = _Connection(sock, now + self.timeout)
            self._selector.register(sock, selectors.EVENT_READ, connection)
        except (OSError, ValueError):
            _reset(sock)
            return
        self._connections[connection.fd] = connection

    def _pause(self, now: float, error: OSError) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(self._listener)
        self._paused_until = now + ACCEPT_PAUSE_SECONDS
        self._events[f"accepting paused ({error.strerror or error})"] += 1

    def _resume(self, now: float) -> None:
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            self._selector.register(self._listener, selectors.EVENT_READ)

    # One exchange --------------------------------------------------------------------------------

    def _serve(self, connection: _Connection, mask: int, now: float) -> None:
        try:
            if mask & selectors.EVENT_READ and connection.reply is None:
                self._receive(connection)
            if connection.reply is not None and connection.fd in self._connections:
                self._send(connection)
        except Exception:  # a bug must cost one connection, never the loop
            log.exception("metrics port: error serving a connection")
            if connection.fd in self._connections:
                self._close(connection, reset=True)

    def _receive(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(connection, reset=True)
            return
        if not data:  # the client went away
            self._close(connection, reset=False)
            return
        connection.received += data
        end = _end_of_head(connection.received)
        if end is None:
            if len(connection.received) > MAX_REQUEST_BYTES:
                self._answer(connection, _error(431))
            return
        if end > MAX_REQUEST_BYTES:
            self._answer(connection, _error(431))
            return
        self._answer(connection, self._reply_to(bytes(connection.received[:end])))

    def _answer(self, connection: _Connection, reply: bytes) -> None:
        connection.reply = memoryview(reply)
        connection.received = bytearray()
        self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)

    def _send(self, connection: _Connection) -> None:
        assert connection.reply is not None
        try:
            connection.sent += connection.sock.send(connection.reply[connection.sent :])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(connection, reset=True)
            return
        if connection.sent >= len(connection.reply):
            self._close(connection, reset=False)

    def _reply_to(self, head: bytes) -> bytes:
        lines = head.decode("latin-1").split("\n")
        parts = lines[0].strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _error(400)
        method, target, _ = parts
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/"):
            return _error(404)
        if method not in ("GET", "HEAD"):
            return _error(405, [("Allow", "GET, HEAD")])
        if path == "/":
            return _response(200, [("Content-Type", "text/plain; charset=utf-8")], _INDEX, method == "HEAD")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, text = line.partition(":")
            if colon:
                headers[name.strip().lower()] = text.strip()
        try:
            body, more = self._render(headers.get("accept", ""), headers.get("accept-encoding", ""))
        except Exception as error:  # out of descriptors, a damaged file: the scrape fails, not the port
            self._events[f"scrapes answered 503 ({getattr(error, 'strerror', None) or error})"] += 1
            return _error(503)
        return _response(200, more, body, method == "HEAD")

    # Ending connections --------------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        while self._connections:
            oldest = next(iter(self._connections.values()))
            if oldest.deadline > now:
                return
            self._dropped("timeout")
            self._close(oldest, reset=True)

    def _close(self, connection: _Connection, reset: bool) -> None:
        self._connections.pop(connection.fd, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection.sock)
        if reset:
            _reset(connection.sock)
            return
        # Unread bytes in the receive queue would turn the close into a reset that can cut the
        # reply short at the client: read what is there first.
        with contextlib.suppress(OSError):
            for _ in range(16):
                if not connection.sock.recv(4096):
                    break
        connection.sock.close()

    def _dropped(self, reason: str) -> None:
        self._events[f"connections dropped ({reason})"] += 1
        if self._on_drop is not None:
            try:
                self._on_drop(reason)
            except Exception:  # counting must never cost the loop
                self._events["drops not counted"] += 1

    def _report(self, now: float) -> None:
        if not self._events or now - self._last_report < REPORT_EVERY_SECONDS:
            return
        what = ", ".join(f"{count} {event}" for event, count in sorted(self._events.items()))
        log.warning(
            "metrics port: %s (at most %d connections, each ending within %gs)",
            what,
            self.max_connections,
            self.timeout,
        )
        self._events.clear()
        self._last_report = now

    def _close_all(self) -> None:
        if self._closed:
            return
        self._closed = True
        _servers.discard(self)
        for connection in list(self._connections.values()):
            self._close(connection, reset=True)
        self._selector.close()
        self._listener.close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _forget_in_child(self) -> None:
        """In a forked child: close this process's copies of every socket, touching nothing the
        parent shares (no shutdown, no reset), and never serve here."""
        _servers.discard(self)  # a later fork of the child must not close these numbers again
        if self._closed:
            return
        self._closed = True
        for connection in self._connections.values():
            connection.sock.close()
        self._connections.clear()
        self._listener.close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def _end_of_head(received: bytearray) -> int | None:
    """Where the request's head ends (after its blank line), or None before it has."""
    for blank in (b"\r\n\r\n", b"\n\n"):
        at = received.find(blank)
        if at >= 0:
            return at + len(blank)
    return None


def _response(status: int, headers: Sequence[tuple[str, str]], body: bytes, head_only: bool = False) -> bytes:
    reason = "OK" if status == 200 else _REASONS[status]
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers)]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (b"" if head_only else body)


def _error(status: int, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    body = f"{_REASONS[status]}\n".encode()
    return _response(status, [("Content-Type", "text/plain; charset=utf-8"), *headers], body)


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    sock.close()


# Forks -------------------------------------------------------------------------------------------

_servers: weakref.WeakSet[MetricsServer] = weakref.WeakSet()
_held: list[MetricsServer] = []


def _before_fork() -> None:
    _held[:] = list(_servers)
    for server in _held:
        server._lock.acquire()


def _after_fork_in_parent() -> None:
    held = list(_held)
    _held.clear()
    for server in held:
        server._lock.release()


def _after_fork_in_child() -> None:
    held = list(_held)
    _held.clear()
    for server in held:
        with contextlib.suppress(OSError):
            server._forget_in_child()
        server._lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)

__all__ = ["DROP_REASONS", "MAX_REQUEST_BYTES", "MetricsServer", "Render"]
