"""TLS for the server: certificates read again when their files change, and mutual TLS.

gRPC asks ``ServerCertificates.fetch`` for the certificate configuration at every new handshake
(``grpc.dynamic_ssl_server_credentials``, which serves ``grpc.aio`` servers too). It looks at the
files at most once a second and hands gRPC a new configuration only when they changed and the new
pair loads: a rotation takes effect at the next handshake, calls on open connections go on
untouched, and a half-written or mismatched pair keeps the previous one (and says why in the log).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

log = logging.getLogger("referee.access")

CHECK_SECONDS = 1.0


class TlsFileError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names the file and why."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The server's PEM files: its certificate chain, its private key, and the CA of client certificates (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def stamps(self) -> tuple[tuple[int, int, int] | None, ...]:
        """What changes when any of the files is written or replaced."""
        return tuple(file_stamp(path) for path in (self.cert, self.key, self.client_ca) if path is not None)

    def load(self) -> grpc.ServerCertificateConfiguration:
        """The files as a gRPC certificate configuration, checked first: TlsFileError if they do not load."""
        cert, key = _read(self.cert, "--tls-cert"), _read(self.key, "--tls-key")
        client_ca = _read(self.client_ca, "--tls-client-ca") if self.client_ca is not None else None
        # gRPC reports a bad pair only at a handshake, to the client; ssl says at once and why.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, ValueError) as error:
            raise TlsFileError(
                f"--tls-cert {str(self.cert)!r} and --tls-key {str(self.key)!r} are not a certificate and its key: {error}"
            ) from None
        if client_ca is not None:
            try:
                context.load_verify_locations(cadata=client_ca.decode("ascii"))
            except (ssl.SSLError, ValueError) as error:
                raise TlsFileError(
                    f"--tls-client-ca {str(self.client_ca)!r} holds no CA certificate: {error}"
                ) from None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is written or replaced (a Kubernetes secret swaps a symlink); None if absent."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsFileError(f"{flag} {str(path)!r}: {error.strerror or error}") from None


class ServerCertificates:
    """The certificate configuration gRPC fetches at each handshake, replaced when the files change."""

    def __init__(self, files: TlsFiles, check_seconds: float = CHECK_SECONDS) -> None:
        self.files = files
        self.check_seconds = check_seconds
        self._stamps = files.stamps()
        self.initial = files.load()  # files that do not load at start are the caller's error
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when the files changed and load; None (keep the current one) otherwise."""
        now = time.monotonic()
        if now - self._checked < self.check_seconds or not self._lock.acquire(blocking=False):
            return None
        try:
            self._checked = now
            stamps = self.files.stamps()
            if stamps == self._stamps:
                return None
            try:
                config = self.files.load()
            except TlsFileError as error:
                # Often a rotation half done (the certificate written, not yet its key): the next
                # check, a second on, tries again.
                log.error("TLS files changed but do not load; the previous certificate stays: %s", error)
                return None
            if self.files.stamps() != stamps:  # changed while being read: read them again next time
                return None
            self._stamps = stamps
            log.info("TLS certificate reloaded from %s", self.files.cert)
            return config
        except Exception:  # an exception here would fail the client's handshake
            log.exception("checking the TLS files failed; the previous certificate stays")
            return None
        finally:
            self._lock.release()


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Server credentials from ``files`` that follow the files as they change; a client certificate
    signed by ``files.client_ca`` is required when there is one (mutual TLS)."""
    certificates = ServerCertificates(files)
    return grpc.dynamic_ssl_server_credentials(
        certificates.initial, certificates.fetch, require_client_authentication=files.client_ca is not None
    )


def tls_files(cert: str | None, key: str | None, client_ca: str | None) -> TlsFiles | None:
    """The TLS files of the flags, None when TLS is off; TlsFileError when the flags do not fit together."""
    if not cert and not key:
        if client_ca:
            raise TlsFileError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")
        return None
    if not cert or not key:
        raise TlsFileError("--tls-cert and --tls-key go together (a certificate and its private key)")
    return TlsFiles(
        Path(os.path.expanduser(cert)), Path(os.path.expanduser(key)), Path(client_ca) if client_ca else None
    )


__all__ = ["ServerCertificates", "TlsFileError", "TlsFiles", "server_credentials", "tls_files"]
