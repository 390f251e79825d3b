"""Who may call the referee, and how often: API keys, quotas, and the interceptor that applies them.

- **Keys.** A key file holds one ``NAME SHA256HEX [CALLS_PER_SECOND]`` line per key: the server
  knows each key's name and the SHA-256 of its UTF-8 bytes, never the key. ``KeyRing`` reads it,
  reads it again on ``reload`` (SIGHUP) or when the file changes (``watch``), and keeps the keys
  it had when the new text is broken.
- **Quotas.** ``QuotaTable`` holds one token bucket per key name in memory shared by every process
  forked after it was made (the parent makes it before its workers start, and a worker started
  again inherits the same table), so a rate holds for the whole server, not per process.
- **The interceptor.** ``AccessInterceptor`` lets the health service through and answers every
  other call without a good key with UNAUTHENTICATED (one message whatever was wrong). It binds
  the key's name (``current_key_name``, for the call's log line) and its bucket to the call; the
  servicer takes a token per call and per CheckDisputes case (``take_call``), and an empty bucket
  is RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` saying when to try again.
- **Refusals.** Every authentication failure and quota refusal passes through ``refused``: the
  one function to count them from.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import fcntl
import hashlib
import hmac
import inspect
import ipaddress
import logging
import math
import mmap
import os
import re
import secrets
import struct
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health

from referee.errors import shorten
from referee.server import metrics
from referee.server.status import KeyRevoked, QuotaExceeded, quota_status
from referee.server.tls import TlsFiles, file_stamp, server_credentials, tls_files

log = logging.getLogger("referee.access")

# Names appear in logs and metric labels: short, no spaces, nothing to escape.
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
KEY_BYTES = 32  # 256 random bits per key
# Longer values are not keys this server made, and are not worth hashing.
MAX_KEY_CHARS = 512
AUTHORIZATION = "authorization"
UNAUTHENTICATED_MESSAGE = "a valid API key is required: send the metadata 'authorization: Bearer KEY'"
# A removed key's open streams end within about this long (and the stream's own check).
WATCH_SECONDS = 0.5
# A rate below this would tell a refused client to wait for hours (or, near 0, for longer than any
# duration a status can carry); above it a rate limits nothing.
MIN_RATE = 0.001
MAX_RATE = 1_000_000.0
MAX_CONCURRENCY = 10_000

# Keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One line of a key file: a name, the SHA-256 of the key, and an optional rate (calls per second)."""

    name: str
    digest: bytes
    rate: float | None = None
    # Calls of this key admitted at once per server process (running or waiting for a compute
    # slot); None leaves the server's --max-calls-per-client.
    concurrency: int | None = None

    @property
    def burst(self) -> float:
        """Calls the key may make at once after a pause: its rate, and at least 1."""
        return max(self.rate or 0.0, 1.0)

    def line(self) -> str:
        """The key as a line of a key file."""
        rate = "" if self.rate is None else f" {self.rate:g}"
        if self.concurrency is not None:
            rate = f"{rate or ' -'} {self.concurrency}"
        return f"{self.name} {self.digest.hex()}{rate}"


class KeyFileError(ValueError):
    """A key file that cannot be read as keys; the message names the line and what is wrong."""


def digest_of(key: str) -> bytes:
    """The SHA-256 of a key's UTF-8 bytes, as the key file holds it."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def new_key() -> str:
    """A fresh random key: 256 bits, URL-safe base64 without padding."""
    return secrets.token_urlsafe(KEY_BYTES)


def parse_rate(text: str) -> float:
    """A rate in calls per second, from ``MIN_RATE`` to ``MAX_RATE``."""
    try:
        rate = float(text)
    except ValueError:
        raise ValueError(f"a rate is a number of calls per second, not {text[:20]!r}") from None
    if not (MIN_RATE <= rate <= MAX_RATE):
        raise ValueError(f"a rate is {MIN_RATE:g} to {MAX_RATE:g} calls per second, not {text[:20]!r}")
    return rate


def parse_concurrency(text: str) -> int:
    """A key's calls at once: a whole number from 1 to ``MAX_CONCURRENCY``."""
    try:
        most = int(text)
    except ValueError:
        raise ValueError(f"a key's concurrency is a whole number of calls, not {text[:20]!r}") from None
    if not 1 <= most <= MAX_CONCURRENCY:
        raise ValueError(f"a key's concurrency is 1 to {MAX_CONCURRENCY} calls, not {text[:20]!r}")
    return most


def check_name(name: str) -> str:
    """``name`` if it may name a key (1-64 of letters, digits and ``._@-``), else ValueError."""
    if not KEY_NAME.fullmatch(name):
        raise ValueError(
            f"a key name is 1 to 64 letters, digits or ._@- (starting with a letter or digit), not {name[:20]!r}"
        )
    return name


def parse_keys(text: str, source: str = "key file") -> tuple[ApiKey, ...]:
    """The keys of a key file's text; KeyFileError naming the line at the first fault."""
    keys: list[ApiKey] = []
    names: set[str] = set()
    digests: set[bytes] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        where = f"{source} line {number}"
        if len(fields) not in (2, 3, 4):
            # The fields are not quoted: a key pasted by mistake must not reach the log.
            raise KeyFileError(
                f"{where}: want NAME SHA256HEX [CALLS_PER_SECOND|- [CONCURRENCY]], found {len(fields)} fields"
            )
        try:
            name = check_name(fields[0])
        except ValueError as error:
            raise KeyFileError(f"{where}: {error}") from None
        if not _SHA256_HEX.fullmatch(fields[1]):
            raise KeyFileError(
                f"{where}: the second field of {name!r} is not a SHA-256 in 64 lower-case hex digits "
                f"(it has {len(fields[1])} characters); `remigio-referee keygen` prints a line to copy"
            )
        rate, concurrency = None, None
        try:
            if len(fields) >= 3 and fields[2] != "-":
                rate = parse_rate(fields[2])
            if len(fields) == 4:
                concurrency = parse_concurrency(fields[3])
        except ValueError as error:
            raise KeyFileError(f"{where}: {error}") from None
        digest = bytes.fromhex(fields[1])
        if name in names:
            raise KeyFileError(f"{where}: the name {name!r} is taken by an earlier line")
        if digest in digests:
            raise KeyFileError(f"{where}: the hash of {name!r} is on an earlier line too")
        names.add(name)
        digests.add(digest)
        keys.append(ApiKey(name, digest, rate, concurrency))
    return tuple(keys)


def bearer_key(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The key of a call's one ``authorization: Bearer KEY`` entry; None when there is no such entry."""
    found = [value for key, value in metadata or () if key == AUTHORIZATION]
    if len(found) != 1 or not isinstance(found[0], str):
        return None
    scheme, _, key = found[0].partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or len(key) > MAX_KEY_CHARS:
        return None
    return key


class KeyRing:
    """The keys of a key file, read again by ``reload``; a broken file keeps the keys it had."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp = file_stamp(self.path)
        self._text = ""
        self._by_digest = self._read()  # a broken file at start is an error for the caller
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def _read(self) -> dict[bytes, ApiKey]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            raise KeyFileError(f"cannot read the key file {str(self.path)!r}: {reason}") from None
        keys = {key.digest: key for key in parse_keys(text, repr(str(self.path)))}
        self._text = text
        return keys

    @property
    def keys(self) -> tuple[ApiKey, ...]:
        """The keys in force, in the file's order."""
        return tuple(self._by_digest.values())

    def find(self, key: str | None) -> ApiKey | None:
        """The entry of ``key``, or None.

        The lookup is by the key's SHA-256, so the time it takes depends on the digest, which a
        caller cannot steer towards a stored one; the final comparison is constant-time anyway.
        """
        if key is None:
            return None
        digest = digest_of(key)
        entry = self._by_digest.get(digest)
        if entry is None or not hmac.compare_digest(entry.digest, digest):
            return None
        return entry

    def reload(self) -> bool:
        """Read the file again; True if the keys were replaced, False (and a log line) if it was broken."""
        with self._lock:
            self._stamp = file_stamp(self.path)
            try:
                keys = self._read()
            except KeyFileError as error:
                log.error("API keys not reloaded, the %d keys in force stay: %s", len(self._by_digest), error)
                return False
            self._by_digest = keys
        log.info("API keys reloaded from %s: %d keys", self.path, len(keys))
        return True

    def reload_if_changed(self) -> bool:
        """Reload when the file's text changed since the last read.

        The text is compared, not only the file's inode, size and modification time: a rewrite of
        the same size within the clock's granularity (or one that sets the old time back) keeps
        the stamp. The file is small, and read once a second.
        """
        if file_stamp(self.path) == self._stamp:
            try:
                if self.path.read_text(encoding="utf-8") == self._text:
                    return False
            except (OSError, UnicodeDecodeError):
                pass  # reload() reports it
        return self.reload()

    def holds(self, key: ApiKey) -> bool:
        """Whether ``key`` is still in force (a stream checks it again before each case)."""
        return key.digest in self._by_digest

    def watch(self, interval: float = WATCH_SECONDS) -> None:
        """Check the file for changes every ``interval`` seconds in a daemon thread, until ``stop``."""
        if self._watcher is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.reload_if_changed()
                except Exception:  # the watch must outlive any surprise
                    log.exception("checking the key file failed")

        self._watcher = threading.Thread(target=loop, name="key-file-watch", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        """End the watch."""
        self._stop.set()


def keygen_lines(name: str, rate: float | None = None, concurrency: int | None = None) -> tuple[str, str]:
    """A fresh key and the key-file line that admits it, as ``(key, line)``."""
    key = new_key()
    return key, ApiKey(check_name(name), digest_of(key), rate, concurrency).line()


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


# Refusals -----------------------------------------------------------------------------------


class Refusal(enum.Enum):
    """Why the access layer turned a call away."""

    UNAUTHENTICATED = "unauthenticated"
    QUOTA = "quota"


# At most this many refusal lines a second (and a burst of REFUSAL_LINES_BURST) reach the log; the
# rest are counted, and the next line written says how many were left out. A client refused
# thousands of times a second must not be able to fill the disk or drown the other lines.
REFUSAL_LINES_PER_SECOND = 10.0
REFUSAL_LINES_BURST = 50


class _LineBudget:
    """A token bucket for log lines, and the count of the lines it held back."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.last = float(burst), time.monotonic()
        self.held_back = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        """None when the line must be left out; else how many lines were left out before it."""
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens < 1:
                self.held_back += 1
                return None
            self.tokens -= 1
            held_back, self.held_back = self.held_back, 0
            return held_back


_refusal_lines = _LineBudget(REFUSAL_LINES_PER_SECOND, REFUSAL_LINES_BURST)
# Method names the log may print as they are; any other path is quoted, cut short and escaped.
_KNOWN_METHODS: set[str] = set()


def know_methods(paths: Sequence[str]) -> None:
    """Add the full method paths (``/package.Service/Method``) this server serves."""
    _KNOWN_METHODS.update(paths)


def method_label(path: str) -> str:
    """``path`` for a log line: itself when it is a method this server serves, else a short quote
    (a client chooses the path: written raw, a newline in it would forge a log line)."""
    if path in _KNOWN_METHODS:
        return path
    return "unknown method " + ascii(shorten(path))


def refused(reason: Refusal, key_name: str, method: str) -> None:
    """Record one refused call (``key_name`` is "" when no known key came with it).

    Every authentication failure and quota refusal passes here, once per refused call or
    CheckDisputes case: count them here. Only names are logged, never what a client sent, and
    no more than ``REFUSAL_LINES_PER_SECOND`` lines a second.
    """
    held_back = _refusal_lines.take()
    if held_back is not None:
        more = f" ({held_back} refusal lines left out before this one)" if held_back else ""
        log.info("refused %s: %s key=%s%s", method_label(method), reason.value, key_name or "-", more)
    if reason is Refusal.QUOTA:
        metrics.quota_refused(key_name)
    else:
        metrics.auth_failed(key_name or "-")


# The interceptor ----------------------------------------------------------------------------

Behavior = Callable[..., Any]

# Calls without a valid key, per client address: a burst of this many, then this many a second.
# Beyond it a call is RESOURCE_EXHAUSTED before its key is looked at.
FAILED_KEYS_BURST = 100
FAILED_KEYS_PER_SECOND = 10.0
_FAILED_KEYS_ADDRESSES = 4096  # addresses remembered; the one seen least recently is forgotten


class _FailureThrottle:
    """Token buckets of failed authentications, one per client address, in this process."""

    def __init__(self) -> None:
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def wait(self, address: str) -> float:
        """Count one failure of ``address``: 0.0 when it may be answered, else the seconds until it may."""
        now = time.monotonic()
        tokens, last = self._buckets.pop(address, (float(FAILED_KEYS_BURST), now))
        tokens = min(float(FAILED_KEYS_BURST), tokens + (now - last) * FAILED_KEYS_PER_SECOND)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / FAILED_KEYS_PER_SECOND
        self._buckets[address] = (tokens, now)
        if len(self._buckets) > _FAILED_KEYS_ADDRESSES:
            self._buckets.popitem(last=False)
        return wait


class AccessInterceptor(grpc.aio.ServerInterceptor):
    """Keys for every call but the health service's; each call's key and meter for the servicer.

    The interceptor authenticates. The servicer takes the tokens of its own service's calls
    (``take_call``) where the work is, one per unary call and one per CheckDisputes case as it is
    read, so a quota refusal ends a call in the servicer's one place like any other status; a call
    of any other keyed service (reflection) takes its token here, as it starts.
    """

    def __init__(
        self,
        keys: KeyRing | None,
        quotas: QuotaTable | None = None,
        open_services: Sequence[str] = (health.SERVICE_NAME,),
        self_metered: Sequence[str] = (),
    ) -> None:
        self.keys = keys
        self.quotas = quotas
        self.open_services = frozenset(open_services)
        self.self_metered = frozenset(self_metered)
        self._failures = _FailureThrottle()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """The call's handler when its key is good; a handler that refuses it otherwise."""
        method = details.method
        service = method.lstrip("/").partition("/")[0]
        if self.keys is None or service in self.open_services:
            return await continuation(details)
        key = self.keys.find(bearer_key(details.invocation_metadata))
        handler = await continuation(details)
        if key is None:
            return _refusing(handler, self._refuse_unauthenticated(method))
        meter = _Meter(self.quotas, key, method) if self.quotas is not None and key.rate is not None else None
        grant = _Grant(key, self.keys, meter, method)
        _bind(grant)
        if handler is None:
            return handler
        return _with_key(handler, grant, metered_here=service not in self.self_metered)

    def _refuse_unauthenticated(self, method: str) -> Callable[[grpc.aio.ServicerContext], Awaitable[None]]:
        async def refuse(context: grpc.aio.ServicerContext) -> None:
            wait = self._failures.wait(client_address(context.peer()))
            if wait > 0:
                metrics.auth_failed("-")
                context.set_trailing_metadata(
                    quota_status(QuotaExceeded("", wait, FAILED_KEYS_MESSAGE)).trailing_metadata
                )
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, FAILED_KEYS_MESSAGE)
            refused(Refusal.UNAUTHENTICATED, "", method)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)

        return refuse


FAILED_KEYS_MESSAGE = "too many calls without a valid API key from this address; retry later"


def client_address(peer: str) -> str:
    """The client's address without its port (``ipv4:1.2.3.4:5`` -> ``ipv4:1.2.3.4``)."""
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


class _Meter:
    """Takes tokens from one key's bucket for one call."""

    __slots__ = ("quotas", "key", "method")

    def __init__(self, quotas: QuotaTable, key: ApiKey, method: str) -> None:
        self.quotas = quotas
        self.key = key
        self.method = method

    def take(self) -> None:
        """One token, or QuotaExceeded (recorded as a refusal)."""
        assert self.key.rate is not None
        wait = self.quotas.take(self.key.name, self.key.rate)
        if wait > 0:
            refused(Refusal.QUOTA, self.key.name, self.method)
            raise QuotaExceeded(self.key.name, wait)


class _Grant:
    """What a call's key allows: checked again as the call goes on (the key may be removed)."""

    __slots__ = ("key", "ring", "meter", "method")

    def __init__(self, key: ApiKey, ring: KeyRing, meter: _Meter | None, method: str) -> None:
        self.key = key
        self.ring = ring
        self.meter = meter
        self.method = method

    def check(self) -> None:
        """KeyRevoked when the key is no longer in the key file."""
        if not self.ring.holds(self.key):
            refused(Refusal.UNAUTHENTICATED, self.key.name, self.method)
            raise KeyRevoked(UNAUTHENTICATED_MESSAGE)

    def take(self) -> None:
        """The key still in force, and one token of its bucket."""
        self.check()
        if self.meter is not None:
            self.meter.take()


_current_grant: contextvars.ContextVar[_Grant | None] = contextvars.ContextVar("referee_grant", default=None)


def _bind(grant: _Grant | None) -> None:
    _current_grant.set(grant)


def current_key() -> ApiKey | None:
    """The key the current call came with (None when keys are off)."""
    grant = _current_grant.get()
    return None if grant is None else grant.key


def current_key_name() -> str:
    """The name of the key the current call came with ("" when keys are off or before the check)."""
    grant = _current_grant.get()
    return "" if grant is None else grant.key.name


def take_call() -> None:
    """Count one call (or one CheckDisputes case) against the current call's key: KeyRevoked when
    the key was removed since the call began, QuotaExceeded when its bucket is empty; nothing when
    keys are off."""
    grant = _current_grant.get()
    if grant is not None:
        grant.take()


def check_key() -> None:
    """KeyRevoked when the current call's key was removed since the call began."""
    grant = _current_grant.get()
    if grant is not None:
        grant.check()


_KINDS = {
    (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
    (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
    (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
    (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
}


def _kind(handler: grpc.RpcMethodHandler | None) -> tuple[bool, bool]:
    if handler is None:
        return False, False
    return bool(handler.request_streaming), bool(handler.response_streaming)


def _refusing(
    handler: grpc.RpcMethodHandler | None, refuse: Callable[[grpc.aio.ServicerContext], Awaitable[None]]
) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that ends the call with ``refuse`` before reading it."""

    async def behavior(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await refuse(context)

    return _KINDS[_kind(handler)][1](behavior)  # no deserializer: the request is never read


def _with_key(handler: grpc.RpcMethodHandler, grant: _Grant, metered_here: bool) -> grpc.RpcMethodHandler:
    """``handler`` with the call's grant bound inside it, whatever task it runs in; a token taken
    as the call starts when ``metered_here`` (a service that does not meter its own calls)."""
    attribute, factory = _KINDS[_kind(handler)]
    inner = getattr(handler, attribute)

    async def admitted(context: grpc.aio.ServicerContext) -> bool:
        _bind(grant)
        if metered_here:
            try:
                grant.take()
            except QuotaExceeded as error:
                status = quota_status(error)
                context.set_trailing_metadata(status.trailing_metadata)
                await context.abort(status.code, status.details)
            except KeyRevoked:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        return True

    # The aio server tells a generator of replies from a coroutine by the function itself, so the
    # wrapper is of the same kind as what it wraps; a synchronous handler runs in a thread of its
    # own and is left as it is.
    if inspect.isasyncgenfunction(inner):

        async def replies(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await admitted(context)
            async for reply in inner(request, context):
                yield reply

        behavior: Behavior = replies
    elif inspect.iscoroutinefunction(inner):

        async def reply(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await admitted(context)
            return await inner(request, context)

        behavior = reply
    else:
        return handler
    return factory(
        behavior, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


# Safe defaults ------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (localhost, 127.0.0.0/8, ::1)."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int, *, tls: bool, keys: bool) -> str | None:
    """What a bind of ``host`` leaves open to the network, or None when it is loopback or protected."""
    if is_loopback(host) or (tls and keys):
        return None
    if not tls and not keys:
        return (
            f"listening on {host}:{port} without TLS or API keys: anyone who can reach this port can call "
            "every method, anonymously, without a limit, and read and change the calls in transit "
            "(see --tls-cert/--tls-key and --api-keys)"
        )
    if not tls:
        return (
            f"listening on {host}:{port} without TLS: the API keys and every call cross the network in plain "
            "text (see --tls-cert/--tls-key)"
        )
    return None  # TLS without keys: an open service by choice, encrypted


# The server's set-up -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """What the serve flags ask for: TLS files, a key file, a plain-text health port."""

    tls: TlsFiles | None = None
    key_file: Path | None = None
    health_port: int | None = None

    @classmethod
    def from_flags(
        cls,
        tls_cert: str | None,
        tls_key: str | None,
        tls_client_ca: str | None,
        api_keys: str | None,
        health_port: int | None,
    ) -> AccessPlan:
        """The plan of the flags, its files checked now: ValueError naming the flag and the file."""
        files = tls_files(tls_cert, tls_key, tls_client_ca)
        if files is not None:
            files.load()
        key_file = Path(api_keys) if api_keys else None
        if key_file is not None:
            KeyRing(key_file)  # read once here, so a broken file stops the server before it starts
        return cls(files, key_file, health_port)

    def credentials(self) -> grpc.ServerCredentials | None:
        """The port's TLS credentials (following the files as they change), None for plain text."""
        return server_credentials(self.tls) if self.tls is not None else None

    def interceptor(self, quotas: QuotaTable | None, self_metered: Sequence[str] = ()) -> AccessInterceptor | None:
        """This process's interceptor, its key ring watching the file; None when keys are off.
        ``self_metered`` names the services whose servicer takes their calls' tokens itself."""
        if self.key_file is None:
            return None
        keys = KeyRing(self.key_file)
        keys.watch()
        return AccessInterceptor(keys, quotas, self_metered=self_metered)

    def warning(self, host: str, port: int) -> str | None:
        """What the bind leaves open (``exposure_warning``)."""
        return exposure_warning(host, port, tls=self.tls is not None, keys=self.key_file is not None)


__all__ = [
    "AUTHORIZATION",
    "AccessInterceptor",
    "AccessPlan",
    "ApiKey",
    "KeyFileError",
    "KeyRing",
    "QuotaExceeded",
    "QuotaTable",
    "Refusal",
    "bearer_key",
    "check_name",
    "check_key",
    "client_address",
    "current_key",
    "current_key_name",
    "know_methods",
    "method_label",
    "parse_concurrency",
    "take_call",
    "digest_of",
    "exposure_warning",
    "is_loopback",
    "keygen_lines",
    "new_key",
    "parse_keys",
    "parse_rate",
    "quota_status",
    "refused",
]
