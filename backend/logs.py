"""The manager's logging: the shared format and redaction (worker_server.logs, so worker nodes
log alike without importing the backend) and uvicorn's own config on top, in text or JSON."""

from __future__ import annotations

import copy
from typing import Any

from worker_server.logs import (
    JsonFormatter,
    RedactSecrets,
    configure_logging,
    install_redaction,
    redact,
)

__all__ = [
    "JsonFormatter",
    "RedactSecrets",
    "configure_logging",
    "install_redaction",
    "redact",
    "uvicorn_log_config",
]


def uvicorn_log_config(log_format: str = "text", role: str = "manager") -> dict[str, Any]:
    """uvicorn's own logging config with the filter on its handlers (the access log and the
    error log, which records each websocket handshake's path and query); with "json", its lines
    are JSON objects like everyone else's."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_secrets"] = {"()": RedactSecrets}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact_secrets")
    if log_format == "json":
        for name in config["formatters"]:
            config["formatters"][name] = {"()": JsonFormatter, "role": role}
    return config
