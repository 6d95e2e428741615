"""Log lines of every populace process (manager, node supervisor, worker processes): plain text
or one JSON object per line, and a filter on every handler that keeps secrets out of them.

It lives on the worker side so a worker node (which never imports `backend`) formats and redacts
exactly as the manager does; `backend.logs` adds uvicorn's config on top.

The filter is defence in depth: no client of ours puts a token in a URL or a log message, but an
old client may still send `/ws/events?token=...`, and uvicorn logs every websocket handshake with
its query string.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[str, ...] = ("text", "json")

_SECRET_NAME = r"[\w.-]*(?:token|ticket|key|secret|password)"
_REDACTIONS = (
    # ?token=...&api_key=... in a logged URL or request line
    (re.compile(rf"([?&;]{_SECRET_NAME}=)[^&#\s\"']+", re.IGNORECASE), r"\1[redacted]"),
    # Authorization-like values: "Authorization: Basic abc", "'authorization': 'abc'", "Bearer abc"
    # (?+: a scheme, once seen, is not taken for the value)
    (
        re.compile(
            r"(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:basic|bearer|digest|token)\s+)?+)"
            r"[^\s\"',}<]+",
            re.IGNORECASE,
        ),
        r"\1[redacted]",
    ),
    (re.compile(r"\b(bearer\s+)[\w.~+/=-]{8,}", re.IGNORECASE), r"\1[redacted]"),
    # the websocket auth subprotocol (backend.events.socket_auth)
    (re.compile(r"(populace\.auth\.)[\w-]+"), r"\1[redacted]"),
)


def redact(text: str) -> str:
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _redact_arg(arg: Any) -> Any:
    if arg is None or isinstance(arg, (bool, int, float)):
        return arg
    text = str(arg)
    redacted = redact(text)
    # Unchanged arguments keep their type, so %d and %r format them as before.
    return arg if redacted == text else redacted


class RedactSecrets(logging.Filter):
    """Rewrites a record's message and arguments so no token-like value reaches a handler.
    Arguments are redacted one by one: uvicorn's access formatter unpacks them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        if isinstance(record.msg, str):
            redacted = redact(record.msg)
            if redacted != record.msg and record.args:
                # The template itself held a secret's place ("?token=%s"): redacting it ate a
                # placeholder, so the line is rendered first and redacted whole.
                record.msg, record.args = redact(record.getMessage()), None
            else:
                record.msg = redacted
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, role (which
    process: manager, node, worker[0], ...), pid and, when there is one, the exception text.
    The message and the exception are redacted here too: a traceback can quote a URL or a
    header, and the filter only sees the message and its arguments."""

    def __init__(self, role: str = "populace") -> None:
        super().__init__()
        self.role = role

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
            "role": self.role,
            "pid": record.process if record.process is not None else os.getpid(),
        }
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            entry["exception"] = redact(record.exc_text)
        if record.stack_info:
            entry["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


# The text lines each process wrote before JSON existed (operators' greps rely on them).
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def formatter(log_format: str, role: str, text: str = TEXT_FORMAT) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(role)
    return logging.Formatter(text)


def install_redaction(logger: logging.Logger | None = None) -> None:
    """Add the filter to every handler of `logger` (default: root) that lacks it. On handlers,
    not loggers: a logger's filters do not see records propagated from its children."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())


def configure_logging(
    level: str, log_format: str = "text", role: str = "populace", text: str = TEXT_FORMAT
) -> None:
    """The root logger writes `log_format` lines to stderr, redacted. Replaces any handler set
    before (a second call switches format rather than doubling every line)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}; got {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, role, text))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    install_redaction()
