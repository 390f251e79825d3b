"""A lean load generator for gRPC unary calls: HTTP/2 frames written and read by hand.

On a small machine the load generator shares the cores with the server it measures, and every
millisecond of CPU it spends is taken from the server. ``grpc.aio`` clients cost about 0.25 ms of
CPU per call; this client a small fraction of that. It sends frames encoded ahead, waits on one
``epoll`` for all its connections, and decodes nothing while the clock runs that can wait until
after it.

Per connection (one TCP connection per client, plain-text HTTP/2 as gRPC's insecure channels
use), one call at a time:

- at the start, the client preface, a SETTINGS frame that opens a large window per stream, and
  a WINDOW_UPDATE that opens the connection's window, topped up again as replies arrive;
- a call is a HEADERS frame (one fixed HPACK block: literal fields without indexing and without
  Huffman coding, so nothing depends on the server's decoder state) and the length-prefixed
  request in DATA frames no longer than the server's SETTINGS_MAX_FRAME_SIZE (16 KiB until its
  SETTINGS say otherwise), the last with END_STREAM;
- from the server: SETTINGS are acknowledged, PINGs answered, WINDOW_UPDATEs counted (a request
  waits when the server's window is too small for it), GOAWAY takes no new call (and fails the
  call in flight if the server says it never took it), RST_STREAM ends a call; DATA is collected per call and header blocks are kept
  as they came;
- a call whose reply takes longer than its deadline is cancelled (RST_STREAM) and counted as
  failed with DEADLINE_EXCEEDED, as a gRPC client would.

After the run, :func:`settle` decodes each connection's header blocks in the order they came
(HPACK keeps a table across a connection's blocks, so they can only be decoded in order) with
the ``hpack`` package: each call's ``grpc-status`` and ``grpc-message`` and its trailing
metadata come from there. A call succeeds only with ``grpc-status`` 0 and exactly one reply
message.
"""

from __future__ import annotations

import contextlib
import heapq
import select
import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from hpack import Decoder

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 0x4, 0x5
DEFAULT_WINDOW = 65535
# The largest frame payload a peer takes until its SETTINGS allow more (RFC 9113 6.5.2).
DEFAULT_MAX_FRAME = 16384
RECEIVE_WINDOW = 1 << 30  # per stream and per connection; topped up when half of it is used
CANCEL = 0x8  # RST_STREAM error code
FRAME_HEAD = struct.Struct(">IBI")  # a frame header: length (24 bits) and type in one word, flags, stream


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload) << 8 | kind) + bytes((flags,)) + struct.pack(">I", stream) + payload


def literal(name: bytes, value: bytes, name_index: int = 0) -> bytes:
    """An HPACK literal field without indexing, strings without Huffman coding (RFC 7541 6.2.2)."""

    def length(n: int, prefix_bits: int) -> bytes:
        top = (1 << prefix_bits) - 1
        if n < top:
            return bytes((n,))
        out, n = [top], n - top
        while n >= 128:
            out.append(n % 128 + 128)
            n //= 128
        return bytes(out + [n])

    head = length(name_index, 4) if name_index else b"\x00" + length(len(name), 7) + name
    return head + length(len(value), 7) + value


def data_frames(stream: int, body: bytes, max_frame: int) -> bytes:
    """``body`` as DATA frames of at most ``max_frame`` bytes each, the last one ending the stream."""
    last = max(0, len(body) - 1) // max_frame * max_frame
    return b"".join(
        frame(DATA, END_STREAM if at == last else 0, stream, body[at : at + max_frame])
        for at in range(0, last + 1, max_frame)
    )


def grpc_message(message: bytes) -> bytes:
    """A message as gRPC frames it in DATA: uncompressed (flag 0), its length, its bytes."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def header_block(authority: str, method: str, timeout_s: float, metadata: Sequence[tuple[str, str]] = ()) -> bytes:
    """The HPACK block of every call of ``method`` (a path like ``/pkg.Service/Method``), with
    ``metadata`` (lower-case names, such as ``authorization``) after gRPC's own fields."""
    return b"".join(
        (
            b"\x83",  # :method POST (static table 3)
            b"\x86",  # :scheme http (static table 6)
            literal(b":path", method.encode(), name_index=4),
            literal(b":authority", authority.encode(), name_index=1),
            literal(b"content-type", b"application/grpc", name_index=31),
            literal(b"te", b"trailers"),
            literal(b"grpc-timeout", f"{max(1, round(timeout_s * 1000))}m".encode()),
            *(literal(name.encode(), value.encode()) for name, value in metadata),
        )
    )


@dataclass
class Call:
    """One call: when it was due or sent, when it ended, what came back."""

    began: float
    ended: float = 0.0
    message: bytearray = field(default_factory=bytearray)  # the DATA payload: length-prefixed messages
    status: int | None = None  # grpc-status, set by settle()
    details: str = ""
    metadata: dict[str, str] = field(default_factory=dict)  # headers and trailers, set by settle()
    failure: str = ""  # set when the call failed on this side (deadline, lost connection)

    def replies(self) -> list[bytes] | None:
        """The reply messages, or None when the framing is wrong or a message is compressed."""
        out, at, data = [], 0, bytes(self.message)
        while at < len(data):
            if at + 5 > len(data) or data[at] != 0:
                return None
            size = int.from_bytes(data[at + 1 : at + 5], "big")
            if at + 5 + size > len(data):
                return None
            out.append(data[at + 5 : at + 5 + size])
            at += 5 + size
        return out


@dataclass
class Client:
    """One client: one connection, sending requests ``first``, ``first + step``, ... of the pool,
    its first call due at ``start_at``."""

    first: int
    step: int
    start_at: float
    calls: list[Call] = field(default_factory=list)
    blocks: list[tuple[int, bytes]] = field(default_factory=list)  # (call number, header block) in order
    sent: int = 0


class Connection:
    """The state of one client's connection during the run."""

    def __init__(self, client: Client, sock: socket.socket, block: bytes) -> None:
        self.client = client
        self.sock = sock
        self.block = block
        self.buffer = b""
        self.stream = -1
        self.next_stream = 1
        self.send_window = DEFAULT_WINDOW
        self.stream_window = DEFAULT_WINDOW  # the server's initial window for each new stream
        self.max_frame = DEFAULT_MAX_FRAME  # the largest frame payload the server takes
        self.used = 0  # DATA bytes received since the connection's window was last topped up
        self.partial: tuple[int, int, bytes] | None = None  # (stream, flags, block so far) until END_HEADERS
        self.waiting: bytes | None = None  # a request held back by the server's window
        self.index = client.first
        self.closed = ""

    def send_call(self, request: bytes, began: float) -> None:
        stream = self.next_stream
        self.next_stream += 2
        self.stream = stream
        self.client.calls.append(Call(began))
        self.client.sent += 1
        self.sock.sendall(frame(HEADERS, END_HEADERS, stream, self.block))
        self._send_data(request)

    def _send_data(self, request: bytes) -> None:
        body = grpc_message(request)
        if len(body) > min(self.send_window, self.stream_window):
            self.waiting = request
            return
        self.waiting = None
        self.send_window -= len(body)
        self.sock.sendall(data_frames(self.stream, body, self.max_frame))

    def cancel(self, why: str, now: float) -> None:
        """End the call in flight on this side."""
        call = self.client.calls[-1]
        call.failure, call.ended = why, now
        if not self.closed:
            self.sock.sendall(frame(RST_STREAM, 0, self.stream, CANCEL.to_bytes(4, "big")))
        self.stream = -1

    def feed(self, data: bytes, now: float) -> bool:
        """Take bytes from the server; True when the call in flight ended."""
        buffer = self.buffer + data if self.buffer else data
        at, ended, size = 0, False, len(buffer)
        unpack = FRAME_HEAD.unpack_from
        while size - at >= 9:
            word, flags, stream = unpack(buffer, at)
            length, kind = word >> 8, word & 0xFF
            if size - at - 9 < length:
                break
            payload = buffer[at + 9 : at + 9 + length]
            at += 9 + length
            stream &= 0x7FFFFFFF
            if kind == DATA:
                self.used += length
                if stream == self.stream:
                    if flags & PADDED:
                        payload = payload[1 : length - payload[0]]
                    self.client.calls[-1].message += payload
                    if flags & END_STREAM:
                        ended = self._end(now)
            elif kind == HEADERS or kind == CONTINUATION:
                if kind == HEADERS:
                    if flags & PADDED:
                        payload = payload[1 : length - payload[0]]
                    if flags & PRIORITY:
                        payload = payload[5:]
                    self.partial = (stream, flags, payload)
                elif self.partial is not None:
                    self.partial = (self.partial[0], self.partial[1], self.partial[2] + payload)
                if flags & END_HEADERS and self.partial is not None:
                    first_stream, first_flags, block = self.partial
                    self.partial = None
                    mine = first_stream == self.stream
                    # Every block is kept, a cancelled call's too: decoding needs all of them in order.
                    self.client.blocks.append((len(self.client.calls) - 1 if mine else -1, block))
                    if mine and first_flags & END_STREAM:
                        ended = self._end(now)
            elif kind == SETTINGS:
                if not flags & ACK:
                    for i in range(0, length - length % 6, 6):
                        key, value = struct.unpack_from(">HI", payload, i)
                        if key == SETTINGS_INITIAL_WINDOW_SIZE:
                            self.stream_window = value
                        elif key == SETTINGS_MAX_FRAME_SIZE:
                            self.max_frame = value
                    self.sock.sendall(frame(SETTINGS, ACK, 0))
            elif kind == PING:
                if not flags & ACK:
                    self.sock.sendall(frame(PING, ACK, 0, payload))
            elif kind == WINDOW_UPDATE:
                increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                if stream == 0:
                    self.send_window += increment
                elif stream == self.stream:
                    self.stream_window += increment
                if self.waiting is not None and stream in (0, self.stream):
                    self._send_data(self.waiting)
            elif kind == RST_STREAM:
                if stream == self.stream:
                    self.client.calls[
                        -1
                    ].failure = f"stream reset by the server (code {int.from_bytes(payload, 'big')})"
                    ended = self._end(now)
            elif kind == GOAWAY:
                # No new calls here; the call in flight still ends normally if the server took it.
                self.closed = "GOAWAY from the server"
                last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                if self.stream > last:
                    self.client.calls[-1].failure = f"{self.closed} before it took the call"
                    ended = self._end(now)
        self.buffer = buffer[at:]
        if self.used > RECEIVE_WINDOW // 2:
            self.sock.sendall(frame(WINDOW_UPDATE, 0, 0, self.used.to_bytes(4, "big")))
            self.used = 0
        return ended

    def _end(self, now: float) -> bool:
        self.client.calls[-1].ended = now
        self.stream = -1
        return True


def connect(address: tuple[str, int], client: Client, block: bytes, timeout: float) -> Connection:
    """Open a client's connection and send the preface; the server's SETTINGS are read in the run."""
    sock = socket.create_connection(address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    settings = struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, RECEIVE_WINDOW)
    sock.sendall(
        PREFACE
        + frame(SETTINGS, 0, 0, settings)
        + frame(WINDOW_UPDATE, 0, 0, (RECEIVE_WINDOW - DEFAULT_WINDOW).to_bytes(4, "big"))
    )
    sock.settimeout(None)
    return Connection(client, sock, block)


def open_connections(
    target: str, method: str, clients: Sequence[Client], timeout: float, metadata: Sequence[tuple[str, str]] = ()
) -> list[Connection]:
    """One connection per client to ``target`` (``host:port``), each call of ``method`` with ``metadata``."""
    host, port = target.rsplit(":", 1)
    block = header_block(target, method, timeout, metadata)
    return [connect((host, int(port)), client, block, timeout) for client in clients]


def run(
    connections: Sequence[Connection],
    pool: Sequence[bytes],
    stop_at: float,
    period: float = 0.0,
    timeout: float = 10.0,
) -> None:
    """Run every connection's client until ``stop_at``: closed loops (a call, its reply, the next
    call), or with ``period`` one call every ``period`` seconds per client, each call's latency
    counted from when it was due. Calls in flight at ``stop_at`` finish."""
    poller = select.epoll()
    by_fd = {}
    # (when, sequence, connection): the next call due per idle connection, and deadlines.
    due: list[tuple[float, int, Connection]] = []
    for n, conn in enumerate(connections):
        by_fd[conn.sock.fileno()] = conn
        poller.register(conn.sock.fileno(), select.EPOLLIN)
        heapq.heappush(due, (conn.client.start_at, n, conn))
    order = len(connections)
    busy: dict[Connection, float] = {}  # connection -> the deadline of its call in flight
    clock = time.monotonic
    try:
        while due or busy:
            now = clock()
            while due and due[0][0] <= now:
                when, _, conn = heapq.heappop(due)
                if conn.closed or (when if period else now) >= stop_at:
                    continue
                request = pool[conn.index % len(pool)]
                conn.index += conn.client.step
                try:
                    conn.send_call(request, when if period else now)
                except OSError as error:  # the server closed the connection since its last reply
                    conn.closed = f"connection lost: {error}"
                    conn.cancel(conn.closed, now)
                    with contextlib.suppress(OSError, ValueError):
                        poller.unregister(conn.sock.fileno())
                    continue
                busy[conn] = now + timeout
            if not due and not busy:
                break
            wait = due[0][0] - now if due else timeout
            if busy:
                wait = min(wait, min(busy.values()) - now)
            events = poller.poll(max(0.0, wait))
            now = clock()
            for fd, _ in events:
                conn = by_fd[fd]
                try:
                    data = conn.sock.recv(1 << 16)
                except OSError as error:
                    conn.closed = f"connection lost: {error}"
                    data = b""
                if not data:
                    conn.closed = conn.closed or "connection closed by the server"
                    poller.unregister(fd)
                    if conn in busy:
                        conn.cancel(conn.closed, now)
                        del busy[conn]
                    continue
                if conn.feed(data, now) and conn in busy:
                    del busy[conn]
                    order += 1
                    next_due = conn.client.calls[-1].began + period if period else now
                    heapq.heappush(due, (next_due, order, conn))
            for conn, deadline in list(busy.items()):
                if deadline <= now:
                    conn.cancel("DEADLINE_EXCEEDED: no reply within the call's deadline", now)
                    del busy[conn]
                    order += 1
                    heapq.heappush(due, (conn.client.calls[-1].began + period if period else now, order, conn))
    finally:
        poller.close()


def drive(
    target: str,
    method: str,
    clients: Sequence[Client],
    pool: Sequence[bytes],
    seconds: float,
    period: float = 0.0,
    timeout: float = 10.0,
) -> float:
    """Open a connection per client, run them for ``seconds`` (as ``run``), close them and settle
    every client's calls; the time the run started. The clock starts once the connections are
    open: on a busy machine opening them can take longer than a short run lasts."""
    connections = open_connections(target, method, clients, timeout)
    try:
        start = time.monotonic()
        for client in clients:
            client.start_at = start
        run(connections, pool, start + seconds, period, timeout)
    finally:
        close(connections)
    for client in clients:
        settle(client)
    return start


def close(connections: Sequence[Connection]) -> None:
    """Say GOAWAY and close every connection."""
    for conn in connections:
        try:
            conn.sock.sendall(frame(GOAWAY, 0, 0, struct.pack(">II", max(0, conn.next_stream - 2), 0)))
        except OSError:
            pass
        conn.sock.close()


def settle(client: Client) -> None:
    """Decode a client's header blocks in order: each call's grpc-status, message and trailers."""
    decoder = Decoder()
    for number, block in client.blocks:
        fields = decoder.decode(block, raw=False)
        if number < 0:
            continue
        call = client.calls[number]
        for name, value in fields:
            if name == "grpc-status":
                call.status = int(value)
            elif name == "grpc-message":
                call.details = value
            elif not name.startswith(":"):
                call.metadata[name] = value
