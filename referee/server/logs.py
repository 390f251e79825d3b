"""The server's log: one line per call, as text or as JSON lines.

With JSON lines every line the server writes is one JSON object: the log's records, the status
lines (``console.say``), warnings and uncaught errors. gRPC's core writes lines of its own (a
failed TLS handshake, for one) in a format of its own: ``quiet_grpc_core`` turns them off, and must
run before gRPC is imported, since the core reads its verbosity once, when it loads.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from referee.server import console
from referee.server.console import json_line

GRPC_VERBOSITY = "GRPC_VERBOSITY"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; a call's fields (method, code, duration_ms, ...) at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        fields: dict[str, object] = {"pid": record.process, **getattr(record, "rpc", {})}
        if record.exc_info:
            fields["traceback"] = self.formatException(record.exc_info)
        return json_line(record.created, record.levelname, record.name, record.getMessage(), fields)


class TextFormatter(logging.Formatter):
    """``logging.Formatter``'s lines, its time of day formatted once a second: the server writes a
    line per call, thousands a second, and ``time.strftime`` was a tenth of a cheap call's cost."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        """The record's local time as ``logging.Formatter`` writes it (``2026-12-04 05:30:41,123``)."""
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"  # default_msec_format, "%s,%03d"


def configure_logging(log_format: str = "text") -> None:
    """Log INFO and above to stderr, as text or as JSON lines (with JSON, warnings and uncaught
    errors too, and the status lines)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLinesFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # No line names its thread or its multiprocessing process name: a record need not look them
    # up (a tenth of making one).
    logging.logThreads = False
    logging.logMultiprocessing = False
    console.use_json(log_format == "json")
    if log_format == "json":
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread


def quiet_grpc_core(argv: Sequence[str]) -> None:
    """Before gRPC is imported: with JSON logs asked for (``--log-format json`` in ``argv``, or
    REMIGIO_LOG_FORMAT), turn gRPC core's own stderr lines off (GRPC_VERBOSITY=NONE), unless
    GRPC_VERBOSITY is set already."""
    if GRPC_VERBOSITY in os.environ:
        return
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--log-format", default=os.environ.get("REMIGIO_LOG_FORMAT", "text"))
    asked, _ = peek.parse_known_args(list(argv))
    if asked.log_format == "json":
        os.environ[GRPC_VERBOSITY] = "NONE"


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    logging.getLogger("referee").critical("uncaught error", exc_info=(kind, error, trace))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    where = args.thread.name if args.thread is not None else "a thread"
    logging.getLogger("referee").error(
        "uncaught error in %s", where, exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    )


__all__ = ["JsonLinesFormatter", "TextFormatter", "configure_logging", "quiet_grpc_core"]
