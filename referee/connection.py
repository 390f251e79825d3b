"""How a client connects to a server, as the client (``referee.client``) and the commands that call
a server (``batch --target``) both take it: TLS files, the API key, keepalive. Apart from the client,
so that a command's parser is built, and its options read, without loading gRPC."""

from __future__ import annotations

import os
from typing import Any

# Keepalive (docs/operations.md, "Keepalive"): while calls are in flight the client pings each
# connection after this long without data, and a ping not answered within the timeout ends the
# connection, its calls UNAVAILABLE. A link cut without a reset or a stopped server is so found
# within 25 s, before the default 30 s deadline ends a call, leaving it time for a retry on
# another replica. 15 s is above the server's --min-client-ping-interval (10 s), which sends
# GOAWAY to clients pinging more often.
KEEPALIVE_SECONDS = 15.0
KEEPALIVE_TIMEOUT_SECONDS = 10.0

Pem = str | os.PathLike[str] | bytes


def read_pem(value: Pem | None, what: str) -> bytes | None:
    """PEM bytes as given, or read from the file named."""
    if value is None or isinstance(value, bytes):
        return value
    try:
        with open(value, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise ValueError(f"{what}: cannot read {os.fspath(value)!r}: {error.strerror or error}") from None


def add_arguments(parser: Any) -> None:
    """The connection options of a command that calls a server: TLS, mutual TLS and the API key."""
    group = parser.add_argument_group("connection (TLS and API key)")
    group.add_argument(
        "--tls-ca", metavar="FILE", help="PEM of the CA that signed the server's certificate; turns TLS on"
    )
    group.add_argument("--tls", action="store_true", help="TLS with the system's CAs (no --tls-ca)")
    group.add_argument("--tls-cert", metavar="FILE", help="this client's certificate (PEM), for mutual TLS")
    group.add_argument("--tls-key", metavar="FILE", help="this client's private key (PEM), for mutual TLS")
    group.add_argument(
        "--api-key-file", metavar="FILE", help="a file holding the API key (env REMIGIO_API_KEY: the key itself)"
    )


def access_from(args: Any) -> dict[str, Any]:
    """The ``Referee`` keywords of the options of ``add_arguments`` (ValueError naming the option at fault)."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together (the client's certificate and its private key)")
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as handle:
                api_key: str | None = handle.read().strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or "not UTF-8 text"
            raise ValueError(f"--api-key-file {args.api_key_file!r}: {reason}") from None
    else:
        api_key = os.environ.get("REMIGIO_API_KEY", "").strip() or None
    if api_key is not None and (not api_key.isascii() or not api_key.isprintable() or " " in api_key):
        where = f"--api-key-file {args.api_key_file!r}" if args.api_key_file else "REMIGIO_API_KEY"
        raise ValueError(f"{where}: a key is printable ASCII without spaces (as `remigio-referee keygen` prints it)")
    return {
        "api_key": api_key,
        "tls_ca": read_pem(args.tls_ca, "--tls-ca"),
        "tls_cert": read_pem(args.tls_cert, "--tls-cert"),
        "tls_key": read_pem(args.tls_key, "--tls-key"),
        "tls": bool(args.tls),
    }
