"""WorkerSettings: env names, required join token, advertise host."""

import socket

import pytest
from pydantic import ValidationError

from worker_server.settings import WorkerSettings, format_address


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (
        "MANAGER_URL",
        "JOIN_TOKEN",
        "HOST",
        "PORT",
        "PROCS",
        "ADVERTISE_HOST",
        "NODE",
        "BYTES_PER_AGENT_BUDGET",
        "LOG_LEVEL",
    ):
        monkeypatch.delenv(f"POPULACE_{name}", raising=False)


def test_reads_populace_env_vars(monkeypatch):
    monkeypatch.setenv("POPULACE_MANAGER_URL", "http://mgr:9000/")
    monkeypatch.setenv("POPULACE_JOIN_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("POPULACE_PORT", "7000")
    monkeypatch.setenv("POPULACE_PROCS", "3")
    settings = WorkerSettings()
    assert settings.manager_base_url == "http://mgr:9000"
    assert settings.join_token.get_secret_value() == "s3cr3t-value"
    assert (settings.port, settings.procs) == (7000, 3)
    assert "s3cr3t-value" not in repr(settings)


def test_join_token_is_required_and_not_empty():
    with pytest.raises(ValidationError, match="join_token"):
        WorkerSettings()
    with pytest.raises(ValidationError, match="join_token"):
        WorkerSettings(join_token="  ")


def test_procs_must_be_positive():
    with pytest.raises(ValidationError):
        WorkerSettings(join_token="t", procs=0)
    assert WorkerSettings(join_token="t").procs >= 1


def test_advertise_host_defaults_to_host():
    assert WorkerSettings(join_token="t", host="10.0.0.5").advertise_host == "10.0.0.5"


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_wildcard_host_advertises_the_hostname(wildcard):
    assert WorkerSettings(join_token="t", host=wildcard).advertise_host == socket.gethostname()


def test_explicit_advertise_host_wins():
    settings = WorkerSettings(join_token="t", host="0.0.0.0", advertise_host="node-3.lan")
    assert settings.advertise_host == "node-3.lan"


def test_log_level_is_validated():
    assert WorkerSettings(join_token="t", log_level="debug").log_level == "DEBUG"
    with pytest.raises(ValidationError):
        WorkerSettings(join_token="t", log_level="chatty")


def test_format_address_brackets_ipv6():
    assert format_address("127.0.0.1", 5) == "127.0.0.1:5"
    assert format_address("::1", 5) == "[::1]:5"
    assert format_address("[::1]", 5) == "[::1]:5"
