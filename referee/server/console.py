"""The server's status lines on stderr ("listening on ...", "stopped ..."): what scripts and tests
wait for; and the one shape of a JSON log line, which the status lines and the log records share
(``referee.server.logs`` formats records with it)."""

from __future__ import annotations

import json
import os
import sys
import time

PREFIX = "remigio-referee: "
ERROR = "error: "
_as_json = False


def use_json(on: bool) -> None:
    """Write the status lines as JSON objects (``--log-format json``), or as text."""
    global _as_json
    _as_json = on


def say(line: str) -> None:
    """One status line on stderr in a single write, so lines from several workers never interleave.

    As JSON, the line's text without the command's name is the message, and an error is at level
    ERROR: ``remigio-referee: listening on ...`` is ``{..., "level": "INFO", "message": "listening on ..."}``.
    """
    if _as_json:
        text = line.removeprefix(PREFIX)
        level = "ERROR" if text.startswith(ERROR) else "INFO"
        line = json_line(time.time(), level, "referee.console", text.removeprefix(ERROR))
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def json_line(created: float, level: str, logger: str, message: str, fields: dict[str, object] | None = None) -> str:
    """One log line as JSON: time, level, logger, pid and message, then ``fields``."""
    line: dict[str, object] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z",
        "level": level,
        "logger": logger,
        "pid": os.getpid(),
        "message": message,
    }
    line.update(fields or {})
    return json.dumps(line, ensure_ascii=False)


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


__all__ = ["address", "json_line", "say", "use_json"]
