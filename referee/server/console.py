"""The server's status lines on stderr ("listening on ...", "stopped ..."): what scripts and tests
wait for; and the one shape of a JSON log line, which the status lines and the log records share
(``referee.server.logs`` formats records with it)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable

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


class SecondStamp:
    """A time's text to the second (``time.strftime`` of ``fmt``, ``convert`` making the time's
    fields from its seconds), made once a second: the server writes a line per call, thousands a
    second, and formatting the time of day was a tenth of a cheap call's cost."""

    __slots__ = ("_convert", "_format", "_second", "_text")

    def __init__(self, fmt: str, convert: Callable[[float], time.struct_time]) -> None:
        self._format = fmt
        self._convert = convert
        self._second: int | None = None
        self._text = ""

    def of(self, created: float) -> str:
        """The text of ``created`` (seconds since the epoch) to the second."""
        second = int(created // 1)
        if second != self._second:
            self._text = time.strftime(self._format, self._convert(second))
            self._second = second
        return self._text


_JSON_STAMP = SecondStamp("%Y-%m-%dT%H:%M:%S", time.gmtime)


def json_line(created: float, level: str, logger: str, message: str, fields: dict[str, object] | None = None) -> str:
    """One log line as JSON: time, level, logger, pid and message, then ``fields``."""
    line: dict[str, object] = {
        "time": f"{_JSON_STAMP.of(created)}.{int(created % 1 * 1000):03d}Z",
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


__all__ = ["SecondStamp", "address", "json_line", "process_id", "say", "use_json"]
