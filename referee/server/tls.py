"""TLS for the server: certificates read again when their files change, and mutual TLS.

gRPC asks ``ServerCertificates.fetch`` for the certificate configuration at every new handshake
(``grpc.dynamic_ssl_server_credentials``, which serves ``grpc.aio`` servers too). It looks at the
files at most once a second and hands gRPC a new configuration only when they changed and the new
pair loads: a rotation takes effect at the next handshake, calls on open connections go on
untouched, and a half-written or mismatched pair keeps the previous one (and says why in the log).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import logging
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from referee.server import metrics

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
        return self.load_with_expiry()[0]

    def load_with_expiry(self) -> tuple[grpc.ServerCertificateConfiguration, float | None]:
        """``load``, and when the certificate expires (None when its date cannot be read)."""
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
        configuration = grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)
        return configuration, certificate_expiry(cert)


_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.DOTALL)


def certificate_expiry(pem: bytes) -> float | None:
    """When the first certificate of a PEM chain expires (its notAfter), in seconds since the
    epoch; None when it cannot be read. ssl has no public reader of a certificate's dates, and
    the DER path to notAfter is short: Certificate, TBSCertificate, then past the version, the
    serial number, the signature algorithm and the issuer, Validity's second element."""
    found = _PEM_CERTIFICATE.search(pem)
    if found is None:
        return None
    try:
        der = base64.b64decode(b"".join(found.group(1).split()), validate=True)
        _, body, _ = _der_element(der, 0)  # Certificate
        tag, tbs, _ = _der_element(der, body)  # TBSCertificate
        at = tbs
        if der[at] == 0xA0:  # [0] version, when present
            at = _der_element(der, at)[2]
        for _skipped in ("serial number", "signature algorithm", "issuer"):
            at = _der_element(der, at)[2]
        _, validity, _ = _der_element(der, at)
        not_before_end = _der_element(der, validity)[2]
        tag, start, end = _der_element(der, not_before_end)
        text = der[start:end].decode("ascii")
    except (binascii.Error, IndexError, ValueError):
        return None
    # UTCTime YYMMDDHHMMSSZ (years 1950-2049), GeneralizedTime YYYYMMDDHHMMSSZ.
    if tag == 0x17 and re.fullmatch(r"\d{12}Z", text):
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18 or not re.fullmatch(r"\d{14}Z", text):
        return None
    moment = time.strptime(text, "%Y%m%d%H%M%SZ")
    return float(calendar.timegm(moment))


def _der_element(der: bytes, at: int) -> tuple[int, int, int]:
    """The DER element at ``at``: its tag, where its content starts and where it ends."""
    tag, length = der[at], der[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4:
            raise ValueError("a DER length of an unexpected size")
        length = int.from_bytes(der[at : at + count], "big")
        at += count
    if at + length > len(der):
        raise ValueError("a DER element past the end")
    return tag, at, at + length


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
        # Files that do not load at start are the caller's error.
        self.initial, expires = files.load_with_expiry()
        metrics.certificate_loaded(expires)
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
                config, expires = self.files.load_with_expiry()
            except TlsFileError as error:
                # Often a rotation half done (the certificate written, not yet its key): the next
                # check, a second on, tries again.
                log.error("TLS files changed but do not load; the previous certificate stays: %s", error)
                metrics.reload_failed("tls")
                return None
            if self.files.stamps() != stamps:  # changed while being read: read them again next time
                return None
            self._stamps = stamps
            metrics.certificate_loaded(expires)
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


__all__ = ["ServerCertificates", "TlsFileError", "TlsFiles", "certificate_expiry", "server_credentials", "tls_files"]
