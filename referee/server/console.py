"""The server's status lines on stderr ("listening on ...", "stopped ..."): what scripts and tests
wait for; and the one shape of a JSON log line, which the status lines and the log records share
(``referee.server.logs`` formats records with it)."""

from __future__ import annotations

import json
import logging
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
    for handler in logging.root.handlers:  # the log's lines held till now come first
        handler.flush()
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


# The second last formatted and its text: the server writes a JSON line per call, thousands a
# second, and formatting the time of day was a tenth of a line's cost.
_second: list[object] = [None, ""]


def json_line(created: float, level: str, logger: str, message: str, fields: dict[str, object] | None = None) -> str:
    """One log line as JSON: time, level, logger, pid and message, then ``fields``."""
    second = int(created // 1)
    if _second[0] != second:
        _second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    line: dict[str, object] = {
        "time": f"{_second[1]}.{int(created % 1 * 1000):03d}Z",
        "level": level,
        "logger": logger,
        "pid": _pid,
        "message": message,
    }
    if fields:
        line.update(fields)
    return json.dumps(line, ensure_ascii=False)


# This process's id, kept (``os.getpid`` is a system call); a forked process reads its own.
_pid = os.getpid()


def process_id() -> int:
    """This process's id, without a system call (``os.getpid`` is one; the log reads it per line)."""
    return _pid


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


__all__ = ["address", "json_line", "process_id", "say", "use_json"]
