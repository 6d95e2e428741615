"""JSON log lines (worker_server.logs, used by the manager, the node and its worker processes):
one object per line with the fields operators' log shippers key on, and no secret in any of
them, the traceback included."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest

from backend.logs import uvicorn_log_config
from worker_server.logs import JsonFormatter, RedactSecrets, configure_logging

SECRET = "s3cr3t-token-value-1234"


def _logger(stream: io.StringIO, role: str = "manager") -> logging.Logger:
    logger = logging.getLogger(f"test.json.{role}")
    logger.handlers.clear()
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(role))
    handler.addFilter(RedactSecrets())
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_has_time_level_logger_message_role_and_pid():
    stream = io.StringIO()
    _logger(stream, role="worker[3]").warning("round %d of %s took %.1f s", 4, "sim 7", 1.25)
    (line,) = _lines(stream)
    assert line["level"] == "WARNING"
    assert line["logger"] == "test.json.worker[3]"
    assert line["message"] == "round 4 of sim 7 took 1.2 s"
    assert line["role"] == "worker[3]"
    assert isinstance(line["pid"], int) and line["pid"] > 0
    assert line["time"].endswith("+00:00") and "T" in line["time"]
    assert "exception" not in line


@pytest.mark.parametrize(
    "message,args",
    [
        ("GET /ws/events?token=%s&topics=cluster", (SECRET,)),
        ("sent headers %s", ({"Authorization": f"Bearer {SECRET}"},)),
        ("Authorization: Bearer " + SECRET, ()),
        ("subprotocols populace.v1, populace.auth.%s", (SECRET,)),
    ],
)
def test_secrets_are_redacted_in_json_lines(message, args):
    stream = io.StringIO()
    _logger(stream).info(message, *args)
    (line,) = _lines(stream)
    assert SECRET not in stream.getvalue()
    assert "[redacted]" in line["message"]


def test_exception_text_is_in_the_line_and_redacted():
    stream = io.StringIO()
    logger = _logger(stream)
    try:
        raise ConnectionError(f"refused: http://llm:8000/v1?api_key={SECRET}")
    except ConnectionError:
        logger.exception("endpoint %s failed", "llm")
    (line,) = _lines(stream)
    assert line["level"] == "ERROR" and line["message"] == "endpoint llm failed"
    assert "ConnectionError" in line["exception"] and "Traceback" in line["exception"]
    assert SECRET not in stream.getvalue() and "api_key=[redacted]" in line["exception"]


def test_uvicorn_gets_json_formatters_and_keeps_the_redaction_filter():
    config = uvicorn_log_config("json")
    assert all(f["()"] is JsonFormatter for f in config["formatters"].values())
    assert all("redact_secrets" in h["filters"] for h in config["handlers"].values())
    # Built as dictConfig builds them: the factory with its keyword arguments.
    spec = dict(config["formatters"]["default"])
    formatter = spec.pop("()")(**spec)
    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        '"WebSocket /ws/events?token=%s" 403',
        (SECRET,),
        None,
    )
    assert config["filters"]["redact_secrets"]["()"]().filter(record)
    line = json.loads(formatter.format(record))
    assert line["role"] == "manager" and line["logger"] == "uvicorn.error"
    assert SECRET not in line["message"] and "token=[redacted]" in line["message"]
    text = uvicorn_log_config("text")
    assert all(f.get("()") is not JsonFormatter for f in text["formatters"].values())


def test_configure_logging_switches_the_root_logger_to_json_in_a_fresh_process():
    code = (
        "import logging; from worker_server.logs import configure_logging; "
        "configure_logging('info', 'json', role='node'); "
        f"logging.getLogger('populace.node').info('join %s', 'Bearer {SECRET}')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    (line,) = [json.loads(x) for x in done.stderr.splitlines()]
    assert line["role"] == "node" and line["logger"] == "populace.node"
    assert SECRET not in done.stderr


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="text, json"):
        configure_logging("info", "yaml")


@pytest.mark.parametrize("command", [["manager"], ["worker", "--manager", "http://127.0.0.1:9"]])
def test_a_bad_log_format_option_is_refused_naming_the_field(command, monkeypatch):
    from typer.testing import CliRunner

    from backend import cli

    monkeypatch.setenv("POPULACE_JOIN_TOKEN", "join-token-for-the-test")
    result = CliRunner().invoke(cli.app, [*command, "--log-format", "yaml"])
    assert result.exit_code == 2
    assert "log_format" in result.output and "'text' or 'json'" in result.output
