"""A hostile HTTP/2 client: it opens gRPC calls and never finishes them.

``Staller`` opens one plain-text HTTP/2 connection and starts calls on it that stall: the HEADERS
of a call and then nothing (or part of its DATA), while a thread keeps the connection itself
alive, acknowledging the server's SETTINGS and answering its PINGs, as a well-behaved peer
would. It records how the server ends each call (trailers with ``grpc-status``, or RST_STREAM)
and whether it closes the connection (GOAWAY, or the socket). The hostile tests and
``bench.hostile`` use it.
"""

from __future__ import annotations

import socket
import threading
import time

from hpack import Decoder

from bench.h2client import (
    ACK,
    CANCEL,
    CONTINUATION,
    END_HEADERS,
    END_STREAM,
    FRAME_HEAD,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    RST_STREAM,
    SETTINGS,
    frame,
    grpc_message,
    literal,
)


def stalled_header_block(authority: str, method: str, request_id: str = "") -> bytes:
    """The HPACK block of a call of ``method`` with no deadline (so only the server can end it)."""
    extra = literal(b"x-request-id", request_id.encode()) if request_id else b""
    return b"".join(
        (
            b"\x83",  # :method POST
            b"\x86",  # :scheme http
            literal(b":path", method.encode(), name_index=4),
            literal(b":authority", authority.encode(), name_index=1),
            literal(b"content-type", b"application/grpc", name_index=31),
            literal(b"te", b"trailers"),
            extra,
        )
    )


class Staller:
    """One connection to ``target`` (``host:port``) holding calls that never finish."""

    def __init__(self, target: str, timeout: float = 10) -> None:
        host, port = target.rsplit(":", 1)
        self.target = target
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.sock.settimeout(None)
        self.next_stream = 1
        self.ended: dict[int, str] = {}  # stream -> grpc-status, or "RST n"
        self.goaway = threading.Event()
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._decoder = Decoder()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def stall(self, method: str, calls: int = 1, partial: bytes = b"", request_id: str = "") -> list[int]:
        """Start ``calls`` calls of ``method`` (``/pkg.Service/Method``) that send their HEADERS and
        then ``partial`` (the first bytes of a message, if any) and nothing more; their stream ids."""
        streams = []
        block = stalled_header_block(self.target, method, request_id)
        with self._lock:
            for _ in range(calls):
                stream, self.next_stream = self.next_stream, self.next_stream + 2
                frames = frame(HEADERS, END_HEADERS, stream, block)
                if partial:
                    frames += frame(0, 0, stream, partial)  # DATA without END_STREAM
                self.sock.sendall(frames)
                streams.append(stream)
        return streams

    def call(self, method: str, request: bytes) -> int:
        """Start one complete call (its reply is not read, only how it ended); its stream id."""
        block = stalled_header_block(self.target, method)
        with self._lock:
            stream, self.next_stream = self.next_stream, self.next_stream + 2
            self.sock.sendall(
                frame(HEADERS, END_HEADERS, stream, block) + frame(0, END_STREAM, stream, grpc_message(request))
            )
        return stream

    def cancel(self, stream: int) -> None:
        """Cancel a call as a gRPC client does (RST_STREAM with CANCEL)."""
        with self._lock:
            self.sock.sendall(frame(RST_STREAM, 0, stream, CANCEL.to_bytes(4, "big")))

    def ping(self, count: int = 1) -> None:
        """Send ``count`` PINGs at once (a client may not ping a server this often)."""
        with self._lock:
            self.sock.sendall(b"".join(frame(PING, 0, 0, n.to_bytes(8, "big")) for n in range(count)))

    def wait_ended(self, streams: list[int], timeout: float) -> dict[int, str]:
        """How each of ``streams`` ended, once all did or ``timeout`` passed (missing: still open)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(s in self.ended for s in streams):
            if self.closed.is_set():
                break
            time.sleep(0.02)
        return {s: self.ended[s] for s in streams if s in self.ended}

    def close(self) -> None:
        """Close the connection."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(5)

    def _read(self) -> None:
        buffer = b""
        partial: tuple[int, int, bytes] | None = None
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.closed.set()
                return
            buffer += data
            while len(buffer) >= 9:
                word, flags, stream = FRAME_HEAD.unpack_from(buffer)
                length, kind = word >> 8, word & 0xFF
                if len(buffer) < 9 + length:
                    break
                payload, buffer = buffer[9 : 9 + length], buffer[9 + length :]
                stream &= 0x7FFFFFFF
                if kind == SETTINGS and not flags & ACK:
                    self._send(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self._send(frame(PING, ACK, 0, payload))
                elif kind == GOAWAY:
                    self.goaway.set()
                elif kind == RST_STREAM:
                    self.ended.setdefault(stream, f"RST {int.from_bytes(payload[:4], 'big')}")
                elif kind in (HEADERS, CONTINUATION):
                    if kind == HEADERS:
                        if flags & PADDED:
                            payload = payload[1 : length - payload[0]]
                        if flags & PRIORITY:
                            payload = payload[5:]
                        partial = (stream, flags, payload)
                    elif partial is not None:
                        partial = (partial[0], partial[1], partial[2] + payload)
                    if flags & END_HEADERS and partial is not None:
                        first, first_flags, block = partial
                        partial = None
                        fields = dict(self._decoder.decode(block))
                        if first_flags & END_STREAM or "grpc-status" in fields:
                            self.ended[first] = str(fields.get("grpc-status", "?"))

    def _send(self, frame: bytes) -> None:
        with self._lock:
            try:
                self.sock.sendall(frame)
            except OSError:
                pass


__all__ = ["Staller", "stalled_header_block"]
