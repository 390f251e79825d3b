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
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from referee.server import console
from referee.server.console import SecondStamp, json_line, process_id

if TYPE_CHECKING:
    import asyncio

GRPC_VERBOSITY = "GRPC_VERBOSITY"
_T = TypeVar("_T")
# Every key it names is one ``TextFormatter.line`` fills.
TEXT_FORMAT = "%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; a call's fields (method, code, duration_ms, ...) at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        fields: dict[str, object] = {"pid": record.process, **getattr(record, "rpc", {})}
        if record.exc_info:
            fields["traceback"] = self.formatException(record.exc_info)
        return json_line(record.created, record.levelname, record.name, record.getMessage(), fields)


# The lines' texts between time and message kept at most (one per logger and level in practice).
_MIDDLES = 64


class TextFormatter(logging.Formatter):
    """``logging.Formatter``'s lines, its time of day formatted once a second: the server writes a
    line per call, thousands a second, and ``time.strftime`` was a tenth of a cheap call's cost."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._stamp = SecondStamp(self.default_time_format, self.converter)
        # A format that begins with the time and ends with the message, with only the level, the
        # process and the logger's name between (``TEXT_FORMAT``): the text between is the same on
        # every line of a logger, made once (``line``) rather than formatted from a dictionary.
        head, tail = "%(asctime)s", "%(message)s"
        middle = fmt[len(head) : -len(tail)] if fmt.startswith(head) and fmt.endswith(tail) else None
        if middle is not None and not set(re.findall(r"%\((\w+)\)", middle)) <= {"levelname", "process", "name"}:
            middle = None
        self._middle = middle
        self._middles: dict[tuple[str, str, int], str] = {}

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        """The record's local time as ``logging.Formatter`` writes it (``2026-12-04 05:30:41,123``)."""
        return f"{self._stamp.of(record.created)},{int(record.msecs):03d}"  # default_msec_format, "%s,%03d"

    def line(self, created: float, levelname: str, name: str, message: str) -> str:
        """The line ``format`` writes for a record of this time, level, logger and message, with no
        arguments, no error and the process's own id (``write_direct``)."""
        asctime = f"{self._stamp.of(created)},{int(created % 1 * 1000):03d}"
        if self._middle is not None:
            pid = process_id()
            middle = self._middles.get((levelname, name, pid))
            if middle is None:
                if len(self._middles) >= _MIDDLES:
                    self._middles.clear()
                middle = self._middle % {"levelname": levelname, "process": pid, "name": name}
                self._middles[(levelname, name, pid)] = middle
            return f"{asctime}{middle}{message}"
        values = {"asctime": asctime, "levelname": levelname, "process": process_id(), "name": name, "message": message}
        return self._fmt % values  # type: ignore[operator]


# How long the event loop's call lines are held at most, and how many: a loop ends about one
# call a turn, so lines held only to the turn's end were still written one by one.
HOLD_SECONDS = 0.02
HOLD_LINES = 256


# A line held by ``LineHandler``: when it was written, its logger's name, its message's format and
# arguments, and (for a JSON line) what makes its fields, with what from. Made into text when
# written: a plain tuple, since one is made per call.
Held = tuple[float, str, str, tuple[object, ...], "Callable[[Any], dict[str, object]] | None", object]


class LineHandler(logging.StreamHandler[TextIO]):
    """A ``StreamHandler`` that holds the call lines the event loop writes (``write_direct``) for
    up to ``HOLD_SECONDS`` (or ``HOLD_LINES`` lines), and makes and writes them in one go.

    A write of its own for each line was a system call per call, about 5 µs of the 30 or so that
    the referee's Python adds to gRPC's own cost of a cached call; and the lines made together, in
    one loop over the held ones, cost less than each made as its call ends (one worker under the
    cached load: 2% less CPU a call). A held line keeps the time it was written. The held lines
    come out before anything else the handler or a status line (``console.say``) writes, so the
    log keeps its order, and at the latest when the handler is flushed (``logging.shutdown`` at
    exit); a process killed outright loses the lines of its last ``HOLD_SECONDS``.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.held: list[Held] = []
        # A line-buffered stream (stderr is one) passes the lines on at their last newline.
        self._flushes = not getattr(stream, "line_buffering", False)

    def hold(self, line: Held, loop: asyncio.AbstractEventLoop) -> None:
        """Write ``line`` within ``HOLD_SECONDS``. Called on the loop's thread; without the lock:
        ``write_held`` takes the list before it reads it, so a line added meanwhile to the list it
        took is written with it, and one added after goes to the next."""
        held = self.held
        if not held:
            loop.call_later(HOLD_SECONDS, self.write_held)
        held.append(line)
        if len(held) >= HOLD_LINES:
            self.write_held()

    def write_held(self) -> None:
        """Make the held lines and write them now, in one write."""
        self.acquire()
        try:
            held = self.held
            if not held:
                return
            self.held = []
            self.stream.write("".join([self.text(line) for line in held]))
            if self._flushes:
                self.stream.flush()
        except Exception:  # noqa: S110 (a stream that fails has nowhere left to report it)
            pass
        finally:
            self.release()

    def text(self, line: Held) -> str:
        """The text of a held line, its terminator included (the line a record of it would make)."""
        created, name, message, args, fields_of, subject = line
        if args:
            message = message % args
        formatter = self.formatter
        if isinstance(formatter, JsonLinesFormatter):
            return (
                json_line(created, "INFO", name, message, None if fields_of is None else fields_of(subject))
                + self.terminator
            )
        assert isinstance(formatter, TextFormatter)  # ``write_direct`` holds no other's lines
        return formatter.line(created, "INFO", name, message) + self.terminator

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``'s line after the held ones."""
        if self.held:
            self.write_held()
        super().emit(record)

    def flush(self) -> None:
        """Write the held lines, then flush the stream."""
        self.write_held()
        super().flush()


# The handler ``configure_logging`` set up (None before): ``write_direct`` writes to it.
_direct: LineHandler | None = None


def _forked() -> None:
    if _direct is not None:
        _direct.held.clear()  # the parent's to write, not the child's


os.register_at_fork(after_in_child=_forked)


def write_direct(
    logger: logging.Logger,
    message: str,
    args: tuple[object, ...] = (),
    fields_of: Callable[[_T], dict[str, object]] | None = None,
    subject: _T | None = None,
) -> bool:
    """Write an INFO line of ``logger`` with ``message % args`` (``message`` alone without
    ``args``; and, as JSON, the fields ``fields_of(subject)`` at the top level) straight to the
    handler ``configure_logging`` set up, the line that handler writes for the record; False,
    writing nothing, when the line must go through ``logging`` (another handler or a filter on its
    way: a test's, a library's; or no handler set up here). On the event loop the line is held for
    a moment and made when written (``LineHandler``); elsewhere it is made and written now.

    The server writes a line per call: a record, the walk up the loggers, the handler's lock and
    the formatter's steps cost more than the rest of a cached call's bookkeeping together. The
    fields are asked for only when the line is JSON (a text line has no use for them).
    """
    handler = _direct
    root = logging.root
    if handler is None or len(root.handlers) != 1 or root.handlers[0] is not handler:
        return False
    if root.filters or handler.filters or handler.level > logging.INFO or logger.disabled:
        return False
    current: logging.Logger | None = logger
    while current is not None and current is not root:
        if current.handlers or current.filters or not current.propagate or current.disabled:
            return False
        current = current.parent
    if not isinstance(handler.formatter, TextFormatter | JsonLinesFormatter):
        return False
    line: Held = (time.time(), logger.name, message, args, fields_of, subject)
    # Not imported here: a dispute job process, which logs too, loads no asyncio (nor has a loop).
    running = sys.modules.get("asyncio")
    if running is not None:
        try:
            loop = running.get_running_loop()
        except RuntimeError:  # another thread's line: written now, after any held
            pass
        else:
            handler.hold(line, loop)
            return True
    try:
        handler.acquire()
        try:
            handler.write_held()
            stream = handler.stream
            stream.write(handler.text(line))
            # A line-buffered stream (stderr is one) has passed the line on at its newline: its
            # flush would find nothing to write.
            if not (getattr(stream, "line_buffering", False) and "\n" in handler.terminator):
                stream.flush()
        finally:
            handler.release()
    except Exception:  # the record's way reports it (``Handler.handleError``)
        return False
    return True


def configure_logging(log_format: str = "text") -> None:
    """Log INFO and above to stderr, as text or as JSON lines (with JSON, warnings and uncaught
    errors too, and the status lines)."""
    global _direct
    handler = LineHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLinesFormatter())
    else:
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    _direct = handler
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


__all__ = [
    "TEXT_FORMAT",
    "JsonLinesFormatter",
    "HOLD_LINES",
    "HOLD_SECONDS",
    "Held",
    "LineHandler",
    "TextFormatter",
    "configure_logging",
    "process_id",
    "quiet_grpc_core",
    "write_direct",
]
