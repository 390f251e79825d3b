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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health

from referee.service import metrics
from referee.service.status import QuotaExceeded, quota_status
from referee.service.tls import TlsFiles, file_stamp, server_credentials, tls_files

log = logging.getLogger("referee.access")

# Names appear in logs and metric labels: short, no spaces, nothing to escape.
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
KEY_BYTES = 32  # 256 random bits per key
# Longer values are not keys this server made, and are not worth hashing.
MAX_KEY_CHARS = 512
AUTHORIZATION = "authorization"
UNAUTHENTICATED_MESSAGE = "a valid API key is required: send the metadata 'authorization: Bearer KEY'"
WATCH_SECONDS = 1.0

# The key name of the call in progress, for its log line ("" when keys are off).
_current_key = contextvars.ContextVar("referee_key_name", default="")


def current_key_name() -> str:
    """The name of the key the current call came with ("" when keys are off or before the check)."""
    return _current_key.get()


# Keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One line of a key file: a name, the SHA-256 of the key, and an optional rate (calls per second)."""

    name: str
    digest: bytes
    rate: float | None = None

    @property
    def burst(self) -> float:
        """Calls the key may make at once after a pause: its rate, and at least 1."""
        return max(self.rate or 0.0, 1.0)

    def line(self) -> str:
        """The key as a line of a key file."""
        rate = "" if self.rate is None else f" {self.rate:g}"
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
    """A rate in calls per second: a finite number above 0."""
    try:
        rate = float(text)
    except ValueError:
        raise ValueError(f"a rate is a number of calls per second, not {text[:20]!r}") from None
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"a rate is a finite number above 0, not {text[:20]!r}")
    return rate


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
        if len(fields) not in (2, 3):
            # The fields are not quoted: a key pasted by mistake must not reach the log.
            raise KeyFileError(f"{where}: want NAME SHA256HEX [CALLS_PER_SECOND], found {len(fields)} fields")
        try:
            name = check_name(fields[0])
        except ValueError as error:
            raise KeyFileError(f"{where}: {error}") from None
        if not _SHA256_HEX.fullmatch(fields[1]):
            raise KeyFileError(
                f"{where}: the second field of {name!r} is not a SHA-256 in 64 lower-case hex digits "
                f"(it has {len(fields[1])} characters); `remigio-referee keygen` prints a line to copy"
            )
        rate = None
        if len(fields) == 3:
            try:
                rate = parse_rate(fields[2])
            except ValueError as error:
                raise KeyFileError(f"{where}: {error}") from None
        digest = bytes.fromhex(fields[1])
        if name in names:
            raise KeyFileError(f"{where}: the name {name!r} is taken by an earlier line")
        if digest in digests:
            raise KeyFileError(f"{where}: the hash of {name!r} is on an earlier line too")
        names.add(name)
        digests.add(digest)
        keys.append(ApiKey(name, digest, rate))
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
        self._by_digest = self._read()  # a broken file at start is an error for the caller
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def _read(self) -> dict[bytes, ApiKey]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            raise KeyFileError(f"cannot read the key file {str(self.path)!r}: {reason}") from None
        return {key.digest: key for key in parse_keys(text, repr(str(self.path)))}

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
        """Reload when the file's inode, size or modification time changed since the last read."""
        if file_stamp(self.path) == self._stamp:
            return False
        return self.reload()

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


def keygen_lines(name: str, rate: float | None = None) -> tuple[str, str]:
    """A fresh key and the key-file line that admits it, as ``(key, line)``."""
    key = new_key()
    return key, ApiKey(check_name(name), digest_of(key), rate).line()


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


def refused(reason: Refusal, key_name: str, method: str) -> None:
    """Record one refused call (``key_name`` is "" when no known key came with it).

    Every authentication failure and quota refusal passes here, once per refused call or
    CheckDisputes case: count them here. Only names are logged, never what a client sent.
    """
    log.info("refused %s: %s key=%s", method, reason.value, key_name or "-")
    if reason is Refusal.QUOTA:
        metrics.quota_refused(key_name)
    else:
        metrics.auth_failed(key_name or "-")


# The interceptor ----------------------------------------------------------------------------

Behavior = Callable[..., Any]


class AccessInterceptor(grpc.aio.ServerInterceptor):
    """Keys for every call but the health service's; each call's key name and meter for the servicer.

    The interceptor only authenticates. The servicer takes the tokens (``take_call``) where the
    work is, one per unary call and one per CheckDisputes case as it is read, so a quota refusal
    ends a call in the servicer's one place like any other status.
    """

    def __init__(
        self,
        keys: KeyRing | None,
        quotas: QuotaTable | None = None,
        open_services: Sequence[str] = (health.SERVICE_NAME,),
    ) -> None:
        self.keys = keys
        self.quotas = quotas
        self.open_services = frozenset(open_services)

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
            refused(Refusal.UNAUTHENTICATED, "", method)
            return _refusing(handler, grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        meter = _Meter(self.quotas, key, method) if self.quotas is not None and key.rate is not None else None
        _bind(key.name, meter)
        return handler if handler is None else _with_key(handler, key.name, meter)


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


_current_meter: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("referee_meter", default=None)


def _bind(key_name: str, meter: _Meter | None) -> None:
    _current_key.set(key_name)
    _current_meter.set(meter)


def take_call() -> None:
    """Count one call (or one CheckDisputes case) against the current call's key: QuotaExceeded
    when its bucket is empty; nothing when keys, quotas or the key's rate are off."""
    meter = _current_meter.get()
    if meter is not None:
        meter.take()


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


def _refusing(handler: grpc.RpcMethodHandler | None, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that ends the call with ``code`` before reading it."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(code, message)

    return _KINDS[_kind(handler)][1](refuse)  # no deserializer: the request is never read


def _with_key(handler: grpc.RpcMethodHandler, key_name: str, meter: _Meter | None) -> grpc.RpcMethodHandler:
    """``handler`` with the key's name and meter bound inside it, whatever task it runs in."""
    attribute, factory = _KINDS[_kind(handler)]
    inner = getattr(handler, attribute)
    # The aio server tells a generator of replies from a coroutine by the function itself, so the
    # wrapper is of the same kind as what it wraps; a synchronous handler runs in a thread of its
    # own and is left as it is.
    if inspect.isasyncgenfunction(inner):

        async def replies(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            _bind(key_name, meter)
            async for reply in inner(request, context):
                yield reply

        behavior: Behavior = replies
    elif inspect.iscoroutinefunction(inner):

        async def reply(request: Any, context: grpc.aio.ServicerContext) -> Any:
            _bind(key_name, meter)
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

    def interceptor(self, quotas: QuotaTable | None) -> AccessInterceptor | None:
        """This process's interceptor, its key ring watching the file; None when keys are off."""
        if self.key_file is None:
            return None
        keys = KeyRing(self.key_file)
        keys.watch()
        return AccessInterceptor(keys, quotas)

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
    "current_key_name",
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
