"""Logging of the service: the request id of every line, and text or JSON lines.

The request id lives in a context variable that ``service.api.middleware`` sets for the
duration of one request; :class:`RequestIdFilter` copies it onto every record, so every line
logged while serving that request (ours, the libraries', uvicorn's access line) carries it
without anyone passing it around. Outside a request it is ``-``.

``SIFT_LOG_FORMAT=json`` writes one JSON object per line (``time``, ``level``, ``logger``,
``message``, ``request_id``, and ``exception`` with the traceback when there is one), which log
collectors read without parsing patterns; ``text`` is for people.
"""

from __future__ import annotations

import datetime
import logging
import re
import secrets
from contextvars import ContextVar
from typing import IO, Any

import orjson

#: The id of the request being served, or None outside a request.
request_id_var: ContextVar[str | None] = ContextVar("sift_request_id", default=None)

#: An ``X-Request-ID`` a client may choose: short, and only characters that are safe in a
#: header, a log line and a JSON string. Anything else is replaced by an id of ours.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
#: Shown in log lines that belong to no request.
NO_REQUEST = "-"

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"
LOG_FORMATS = ("text", "json")
#: Loggers of uvicorn, which configures its own handlers unless told not to.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def new_request_id() -> str:
    """A fresh id: 128 random bits in hex."""
    return secrets.token_hex(16)


def accepted_request_id(offered: str | None) -> str:
    """The client's ``X-Request-ID`` if it is well formed, else a fresh one."""
    if offered is not None and REQUEST_ID_PATTERN.fullmatch(offered):
        return offered
    return new_request_id()


def current_request_id() -> str | None:
    return request_id_var.get()


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record (``record.request_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get() or NO_REQUEST
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record; never raises on odd arguments."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or NO_REQUEST,
        }
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            body["exception"] = record.exc_text
        if record.stack_info:
            body["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(body, default=str).decode()


def make_handler(log_format: str, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing ``log_format`` lines to ``stream`` (stderr), with the request id."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {log_format!r}")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    handler.addFilter(RequestIdFilter())
    return handler


def configure_logging(log_format: str, level: str = "info") -> None:
    """Route every logger (uvicorn's included) to one handler of ``log_format`` on stderr.

    uvicorn must then be run with ``log_config=None``: its own configuration would install
    handlers of its own format next to ours.
    """
    handler = make_handler(log_format)
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        for existing in list(logger.handlers):
            logger.removeHandler(existing)
        logger.propagate = True
        logger.setLevel(level.upper())
