"""How the service and the worker log: plain text for a terminal, or one JSON object a line
(``--log-format json``, ``SCENARIOKIT_LOG_FORMAT=json``) for a log collector (docs/deployment.md, "Logs").

A JSON line carries the time, level, logger and message, and where they apply the ``runId`` of the run
being executed and the ``requestId`` of the HTTP request being answered: both come from context
variables the doors set (:func:`about_run`, :func:`about_request`), so a line logged anywhere below a
request or a run says which one it belongs to. Extra fields a call passes (``extra={...}``, as the
access log does) become fields of the object.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal, cast

LOG_FORMATS = ("text", "json")
LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "scenariokit_request_id", default=None
)
_RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("scenariokit_run_id", default=None)

#: What every LogRecord has of its own: anything else on a record was passed as ``extra``.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def parse_log_format(raw: str) -> LogFormat:
    """``text`` or ``json``; ValueError naming both otherwise."""
    if raw not in LOG_FORMATS:
        raise ValueError(f"must be one of {', '.join(LOG_FORMATS)}")
    return cast(LogFormat, raw)


@contextlib.contextmanager
def about_request(request_id: str) -> Iterator[None]:
    """Lines logged inside the block carry ``requestId``."""
    reset = _REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        _REQUEST_ID.reset(reset)


@contextlib.contextmanager
def about_run(run_id: object) -> Iterator[None]:
    """Lines logged inside the block (and in tasks it starts) carry ``runId``."""
    reset = _RUN_ID.set(str(run_id))
    try:
        yield
    finally:
        _RUN_ID.reset(reset)


def current_request_id() -> str | None:
    """The id of the request being answered, or None."""
    return _REQUEST_ID.get()


class ContextFilter(logging.Filter):
    """Put the current ``requestId`` and ``runId`` on each record that has none of its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in (("requestId", _REQUEST_ID), ("runId", _RUN_ID)):
            value = var.get()
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: ``at``, ``level``, ``logger``, ``message``, the context
    (``requestId``, ``runId``) and any extra fields; ``exception`` holds a traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            data["exception"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


class StandardErrorHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Writes to ``sys.stderr`` as it is when a record comes, never to the stream it was at set-up.

    A program that calls ``scenariokit.cli.main`` in-process (a test capturing its output, say) may
    close the stream it had: a handler bound to it would fail on every later record.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override,unused-ignore]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass  # always the current sys.stderr


def configure_logging(log_format: LogFormat = "text", *, level: int = logging.INFO) -> None:
    """Send the root logger's records to standard error in ``log_format``, replacing its handlers."""
    handler = StandardErrorHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
