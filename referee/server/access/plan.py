"""What the access flags ask for, checked at start, and what a bind leaves open."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from referee.server.access.interceptor import AccessInterceptor
from referee.server.access.keys import KeyRing
from referee.server.access.proxies import TrustedProxies
from referee.server.access.quotas import QuotaTable
from referee.server.tls import TlsFiles, server_credentials, tls_files

log = logging.getLogger("referee.access")

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

    def interceptor(
        self, quotas: QuotaTable | None, self_metered: Sequence[str] = (), proxies: TrustedProxies | None = None
    ) -> AccessInterceptor | None:
        """This process's interceptor, its key ring watching the file; None when keys are off.
        ``self_metered`` names the services whose servicer takes their calls' tokens itself;
        ``proxies`` are believed about the client's address."""
        if self.key_file is None:
            return None
        keys = KeyRing(self.key_file)
        keys.watch()
        return AccessInterceptor(keys, quotas, self_metered=self_metered, proxies=proxies)

    def warning(self, host: str, port: int) -> str | None:
        """What the bind leaves open (``exposure_warning``)."""
        return exposure_warning(host, port, tls=self.tls is not None, keys=self.key_file is not None)
