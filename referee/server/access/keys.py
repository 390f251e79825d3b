"""API keys: the key file, its lines, the key ring that follows it, and new keys.

A key file holds one ``NAME SHA256HEX [CALLS_PER_SECOND|- [CONCURRENCY]]`` line per key: the
server knows each key's name and the SHA-256 of its UTF-8 bytes, never the key. ``KeyRing`` reads
it, reads it again on ``reload`` (SIGHUP) or when its text changes (``watch``), and keeps the keys
it had when the new text is broken.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from referee.server import metrics
from referee.server.tls import file_stamp

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
        metrics.keys_loaded()
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
                metrics.reload_failed("api_keys")
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
