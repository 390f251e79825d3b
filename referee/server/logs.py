"""The server's log: one line per call, as text or as JSON lines."""

from __future__ import annotations

import json
import logging
import sys
import time


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; a call's fields (method, code, duration_ms, ...) at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "rpc", {}))
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(log_format: str = "text") -> None:
    """Log INFO and above to stderr, as text or as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLinesFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s pid=%(process)d %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


__all__ = ["JsonLinesFormatter", "configure_logging"]
