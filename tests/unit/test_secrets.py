"""Keeping tokens out of URLs, logs and command lines: the websocket auth subprotocol, the log
filter, the viewer token file, and where `populace worker` reads its join token from."""

from __future__ import annotations

import logging
import logging.config
import stat

import pytest
from pydantic import SecretStr, ValidationError
from typer.testing import CliRunner

from backend import cli
from backend.auth import role_of
from backend.events.socket_auth import auth_subprotocols, events_url, token_from_subprotocols
from backend.logs import RedactSecrets, redact, uvicorn_log_config
from backend.settings import ManagerSettings
from backend.tokens import ensure_tokens, viewer_token


@pytest.mark.parametrize("token", ["abc", "a", "ab", "x" * 43, "with space/+=&?é"])
def test_subprotocol_round_trip_uses_only_token_characters(token):
    offered = auth_subprotocols(token)
    assert offered[0] == "populace.v1"
    assert all(c.isalnum() or c in "._-" for c in offered[1])
    assert token_from_subprotocols(["chat", *offered]) == token


def test_no_or_malformed_auth_subprotocol_is_no_token():
    assert token_from_subprotocols([]) is None
    assert token_from_subprotocols(["populace.v1"]) is None
    assert token_from_subprotocols(["populace.auth.%%%"]) in (None, "")
    assert token_from_subprotocols(["populace.auth.gA"]) is None  # not UTF-8


def test_events_url_never_needs_a_token():
    assert events_url("https://m:8443/", topics="population:*") == (
        "wss://m:8443/ws/events?topics=population%3A%2A"
    )


def test_roles_by_token():
    settings = ManagerSettings(api_token=SecretStr("op"), join_token=SecretStr("jn"))
    assert role_of("op", settings) == "operator"
    assert role_of("jn", settings) is None and role_of(None, settings) is None
    assert role_of("", settings) is None
    with_viewer = settings.model_copy(update={"viewer_token": SecretStr("vw")})
    assert role_of("vw", with_viewer) == "viewer" and role_of("vw", settings) is None


@pytest.mark.parametrize(
    "line,secret",
    [
        ('"WebSocket /ws/events?token=s3cr3t&topics=cluster" 403', "s3cr3t"),
        ("GET /x?a=1&api_key=s3cr3t HTTP/1.1", "s3cr3t"),
        ("/x?ticket=s3cr3t#f", "s3cr3t"),
        ("/x?password=s3cr3t;y", "s3cr3t"),
        ("< authorization: Bearer s3cr3t-long-value", "s3cr3t-long-value"),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
        ("headers Bearer s3cr3t-long-value", "s3cr3t-long-value"),
        ("< sec-websocket-protocol: populace.v1, populace.auth.czNjcjN0", "czNjcjN0"),
    ],
)
def test_redact_removes_token_like_values(line, secret):
    assert secret not in redact(line)
    assert "[redacted]" in redact(line)


def test_redact_leaves_ordinary_lines_alone():
    for line in (
        "GET /api/agents?population_id=1&after=5&limit=50 HTTP/1.1",
        "basic prompts give guesses near 50",
        "missing bearer token: send 'Authorization: Bearer <API token>'",
    ):
        assert redact(line) == line


def test_filter_keeps_uvicorn_access_records_formattable():
    from uvicorn.logging import AccessFormatter

    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/ws/events?token=s3cr3t&topics=cluster", "1.1", 403),
        None,
    )
    assert RedactSecrets().filter(record)
    text = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s').format(record)
    assert text.startswith(
        '127.0.0.1:5 - "GET /ws/events?token=[redacted]&topics=cluster HTTP/1.1" 403'
    )


def test_uvicorn_log_config_filters_every_handler(capsys):
    config = uvicorn_log_config()
    assert all("redact_secrets" in h["filters"] for h in config["handlers"].values())
    logging.config.dictConfig(config)
    try:
        logging.getLogger("uvicorn.error").warning('"WebSocket /ws/events?token=%s"', "s3cr3t")
        assert "token=[redacted]" in capsys.readouterr().err
    finally:
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).handlers.clear()


def test_a_viewer_token_equal_to_another_token_is_refused():
    for other in ("api_token", "join_token"):
        with pytest.raises(ValidationError, match="viewer_token must differ"):
            ManagerSettings(**{other: SecretStr("same"), "viewer_token": SecretStr("same")})


def test_viewer_token_is_made_on_request_private_and_read_by_the_manager(tmp_path, monkeypatch):
    for name in ("API", "JOIN", "VIEWER"):
        monkeypatch.delenv(f"POPULACE_{name}_TOKEN", raising=False)
    settings = ensure_tokens(ManagerSettings(data_dir=tmp_path), announce=lambda _: None)
    assert settings.viewer_token is None  # optional: never generated at start
    token, path, created = viewer_token(settings)
    assert created and path == tmp_path / "viewer_token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert viewer_token(settings)[:3] == (token, path, False)
    again = ensure_tokens(ManagerSettings(data_dir=tmp_path), announce=lambda _: None)
    assert again.viewer_token.get_secret_value() == token
    assert token not in (again.api_token.get_secret_value(), again.join_token.get_secret_value())


def test_tokens_viewer_command_prints_the_token(tmp_path, monkeypatch):
    monkeypatch.delenv("POPULACE_VIEWER_TOKEN", raising=False)
    monkeypatch.setenv("POPULACE_DATA_DIR", str(tmp_path))
    first = CliRunner().invoke(cli.app, ["tokens", "viewer"])
    assert first.exit_code == 0, first.output
    token = (tmp_path / "viewer_token").read_text().strip()
    assert first.stdout.strip() == token
    second = CliRunner().invoke(cli.app, ["tokens", "viewer"])
    assert second.stdout.strip() == token


@pytest.fixture
def started(monkeypatch):
    """`populace worker` up to the node: the settings it would run with."""
    import worker_server.node

    runs = []
    monkeypatch.setattr(worker_server.node, "run_node", lambda settings: runs.append(settings) or 0)
    monkeypatch.delenv("POPULACE_JOIN_TOKEN", raising=False)
    monkeypatch.delenv("POPULACE_JOIN_TOKEN_FILE", raising=False)
    return runs


def _worker(*args, env=None):
    return CliRunner().invoke(
        cli.app, ["worker", "--manager", "http://127.0.0.1:9", *args], env=env
    )


def test_worker_reads_the_join_token_from_a_file_without_a_warning(started, tmp_path):
    path = tmp_path / "join_token"
    path.write_text("from-the-file\n")
    result = _worker("--join-token-file", str(path), env={"POPULACE_JOIN_TOKEN": "from-env"})
    assert result.exit_code == 0, result.output
    assert started[0].join_token.get_secret_value() == "from-the-file"
    assert "warning" not in result.output


def test_worker_takes_the_environment_quietly(started):
    result = _worker(env={"POPULACE_JOIN_TOKEN": "from-env"})
    assert result.exit_code == 0, result.output
    assert started[0].join_token.get_secret_value() == "from-env"
    assert "warning" not in result.output


def test_join_token_on_the_command_line_works_with_a_warning(started):
    result = _worker("--join-token", "on-argv")
    assert result.exit_code == 0, result.output
    assert started[0].join_token.get_secret_value() == "on-argv"
    assert "visible in the process list" in result.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (("--join-token", "x", "--join-token-file", "f"), "not both"),
        (("--join-token-file", "/nonexistent/join_token"), "cannot read"),
        ((), "no join token"),
    ],
)
def test_join_token_mistakes_are_clear_errors(started, args, message):
    result = _worker(*args)
    assert result.exit_code == 2 and message in result.stderr
    assert started == []
