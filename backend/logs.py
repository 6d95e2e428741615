"""One logging format for the manager's own loggers (uvicorn keeps its own), and a filter on
every handler that keeps secrets out of log lines.

The filter is defence in depth: no client of ours puts a token in a URL or a log message, but an
old client may still send `/ws/events?token=...`, and uvicorn logs every websocket handshake with
its query string.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

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
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        return True


def install_redaction(logger: logging.Logger | None = None) -> None:
    """Add the filter to every handler of `logger` (default: root) that lacks it. On handlers,
    not loggers: a logger's filters do not see records propagated from its children."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    install_redaction()


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging config with the filter on its handlers (the access log and the
    error log, which records each websocket handshake's path and query)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_secrets"] = {"()": RedactSecrets}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact_secrets")
    return config
