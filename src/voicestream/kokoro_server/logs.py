"""Structured JSON logs: one object per line, with the session and request id on every line.

The ids live in context variables, so a line logged anywhere inside a session's tasks carries
them without passing them around; `log_event` adds the event's own fields.
"""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar
from typing import Any, TextIO

session_id_var: ContextVar[str | None] = ContextVar("voicestream_session_id", default=None)
request_id_var: ContextVar[str | None] = ContextVar("voicestream_request_id", default=None)

logger = logging.getLogger("voicestream.kokoro_server")

_RESERVED = {"time", "level", "logger", "event", "session_id", "request_id"}


class JsonFormatter(logging.Formatter):
    """Formats any record (ours, uvicorn's) as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
            "session_id": getattr(record, "session_id", None) or session_id_var.get(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            body.update({key: value for key, value in fields.items() if key not in _RESERVED})
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, ensure_ascii=False)


def log_event(
    event: str,
    level: int = logging.INFO,
    request_id: str | None = None,
    exc_info: bool = False,
    **fields: Any,
) -> None:
    """Log `event` with fields; `request_id` overrides the one in context for this line."""
    if logger.isEnabledFor(level):
        extra: dict[str, Any] = {"fields": fields}
        if request_id is not None:
            extra["request_id"] = request_id
        logger.log(level, event, extra=extra, exc_info=exc_info)


class RepeatLimiter:
    """Which repeats of one event to log: the first `first`, then every `every`-th. A client that
    floods bad messages costs a log line per `every` of them, not one each, and the line logged
    says how many were left out (`suppressed`). Counted, not timed: the same inputs always log
    the same lines."""

    def __init__(self, first: int = 10, every: int = 100) -> None:
        if first < 0 or every < 1:
            raise ValueError(f"first must be >= 0 and every >= 1, got {first}, {every}")
        self.first = first
        self.every = every
        self.seen = 0
        self._suppressed = 0

    def next(self) -> int | None:
        """Count one occurrence: None when it is not to be logged, else how many were left out
        since the last line that was."""
        self.seen += 1
        if self.seen <= self.first or (self.seen - self.first) % self.every == 0:
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed
        self._suppressed += 1
        return None


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A logging.config dict that sends ours and uvicorn's records through JsonFormatter."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": handler},
        "loggers": {
            name: {"handlers": ["json"], "level": level, "propagate": False}
            for name in ("voicestream", "uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }


def capture_json_logs(stream: TextIO, level: int = logging.INFO) -> logging.Handler:
    """Attach a JSON handler writing to `stream` (for tools and tests); remove it when done."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(level)
    logging.getLogger("voicestream").addHandler(handler)
    if logging.getLogger("voicestream").getEffectiveLevel() > level:
        logging.getLogger("voicestream").setLevel(level)
    return handler
