"""The server's status lines on stderr ("listening on ...", "stopped ..."): what scripts and tests wait for."""

from __future__ import annotations

import os
import sys


def say(line: str) -> None:
    """One status line on stderr in a single write, so lines from several workers never interleave."""
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


__all__ = ["address", "say"]
