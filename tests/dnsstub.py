"""A DNS server on loopback for the tests: it answers A and AAAA questions from a table the test
may change while it runs, so that a gRPC client with a ``dns://127.0.0.1:PORT/NAME:PORT`` target
sees one name behind several servers, and sees new ones appear.

It speaks just enough of RFC 1035 over UDP: one question per query, answers with a TTL of 0,
NXDOMAIN for a name not in the table, an empty answer for any other question type.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections.abc import Iterable

A, AAAA = 1, 28


class DnsStub:
    """A DNS server on 127.0.0.1 (a free UDP port); ``names`` maps a name to its addresses."""

    def __init__(self, names: dict[str, Iterable[str]]) -> None:
        self._names = {name.lower().rstrip("."): list(addresses) for name, addresses in names.items()}
        self._lock = threading.Lock()
        self.questions: list[tuple[str, int]] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-stub", daemon=True)
        self._thread.start()

    def set(self, name: str, addresses: Iterable[str]) -> None:
        """Answer ``name`` with ``addresses`` from now on."""
        with self._lock:
            self._names[name.lower().rstrip(".")] = list(addresses)

    def close(self) -> None:
        """Stop answering (and end the thread: closing a socket does not wake a blocked read)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> DnsStub:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                query, client = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            reply = self._answer(query)
            if reply is not None:
                try:
                    self._sock.sendto(reply, client)
                except OSError:
                    return

    def _answer(self, query: bytes) -> bytes | None:
        if len(query) < 12:
            return None
        ident, flags, questions = struct.unpack("!HHH", query[:6])
        if questions != 1:
            return None
        labels, at = [], 12
        while at < len(query) and query[at]:
            length = query[at]
            labels.append(query[at + 1 : at + 1 + length].decode("ascii", "replace"))
            at += 1 + length
        if at + 5 > len(query):
            return None
        qtype, _qclass = struct.unpack("!HH", query[at + 1 : at + 5])
        question = query[12 : at + 5]
        name = ".".join(labels).lower()
        with self._lock:
            self.questions.append((name, qtype))
            addresses = self._names.get(name)
        records = []
        for address in addresses or ():
            ip = ipaddress.ip_address(address)
            if (qtype, ip.version) in {(A, 4), (AAAA, 6)}:
                # The name as a pointer to the question (offset 12), class IN, TTL 0.
                records.append(struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(ip.packed)) + ip.packed)
        rcode = 3 if addresses is None else 0  # NXDOMAIN for a name not in the table
        reply_flags = 0x8000 | (flags & 0x0100) | 0x0400 | rcode  # response, RD copied, authoritative
        header = struct.pack("!HHHHHH", ident, reply_flags, 1, len(records), 0, 0)
        return header + question + b"".join(records)
