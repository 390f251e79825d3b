"""Quotas: one token bucket per key name, shared by every worker process of the server."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import mmap
import os
import struct
import tempfile
import threading
import time
from typing import Any

log = logging.getLogger("referee.access")

# Quotas -------------------------------------------------------------------------------------


class QuotaTable:
    """Token buckets, one per key name, shared by this process and every process forked from it.

    The buckets live in a file mapped into memory (in ``directory``, by default /dev/shm when there
    is one) and are changed
    under an fcntl lock: the kernel drops such a lock when its process dies, so a worker killed in
    the middle of a change cannot leave the others waiting. Each slot is a tag (from the name's
    SHA-256), the tokens left and the CLOCK_MONOTONIC time they were counted, which every process
    on the machine reads alike. A name not in the table takes a free slot, or the slot used least
    recently when none is free.
    """

    _SLOT = struct.Struct("<Qdd")

    def __init__(self, slots: int = 1024, directory: str | None = None) -> None:
        if directory is None and os.path.isdir("/dev/shm"):
            directory = "/dev/shm"
        # Unlinked at once: nothing is left behind, whatever way the server ends.
        self._file = tempfile.TemporaryFile(prefix="remigio-quotas-", dir=directory)
        self.slots = slots
        os.ftruncate(self._file.fileno(), slots * self._SLOT.size)
        self._memory = mmap.mmap(self._file.fileno(), slots * self._SLOT.size)
        self._thread_lock = threading.Lock()  # fcntl locks are per process; threads take this first
        self._where: dict[str, int] = {}  # this process's memory of where each name's slot is

    @staticmethod
    def _tag(name: str) -> int:
        return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") or 1

    @contextlib.contextmanager
    def _locked(self) -> Any:
        with self._thread_lock:
            fcntl.lockf(self._file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self._file.fileno(), fcntl.LOCK_UN)

    def _slot_of(self, tag: int, name: str) -> tuple[int, bool]:
        """The slot holding ``tag`` (and False), or the one it may take (and True)."""
        cached = self._where.get(name)
        if cached is not None and self._SLOT.unpack_from(self._memory, cached * self._SLOT.size)[0] == tag:
            return cached, False
        oldest, oldest_time, free = 0, math.inf, None
        for index, (slot_tag, _, last) in enumerate(self._SLOT.iter_unpack(self._memory)):
            if slot_tag == tag:
                self._where[name] = index
                return index, False
            if slot_tag == 0 and free is None:
                free = index
            if last < oldest_time:
                oldest, oldest_time = index, last
        index = free if free is not None else oldest
        self._where[name] = index
        return index, True

    def take(self, name: str, rate: float, now: float | None = None) -> float:
        """Take one call from ``name``'s bucket (``rate`` per second, burst ``max(rate, 1)``).

        Returns 0.0 when the call may go ahead, else the seconds until the bucket holds one.
        """
        burst = max(rate, 1.0)
        tag = self._tag(name)
        with self._locked():
            now = time.monotonic() if now is None else now
            index, fresh = self._slot_of(tag, name)
            offset = index * self._SLOT.size
            if fresh:
                tokens = burst
            else:
                _, tokens, last = self._SLOT.unpack_from(self._memory, offset)
                tokens = min(burst, tokens + max(0.0, now - last) * rate)
            if tokens >= 1.0:
                self._SLOT.pack_into(self._memory, offset, tag, tokens - 1.0, now)
                return 0.0
            self._SLOT.pack_into(self._memory, offset, tag, tokens, now)
            return (1.0 - tokens) / rate

    def close(self) -> None:
        """Unmap the table in this process."""
        self._memory.close()
        self._file.close()
