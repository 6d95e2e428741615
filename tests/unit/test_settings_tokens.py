import stat

import pytest
from pydantic import ValidationError

from backend.settings import ManagerSettings
from backend.tokens import ensure_tokens


def test_tokens_generated_once_stored_private_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("POPULACE_API_TOKEN", raising=False)
    monkeypatch.delenv("POPULACE_JOIN_TOKEN", raising=False)
    said = []
    first = ensure_tokens(ManagerSettings(data_dir=tmp_path), announce=said.append)
    assert len(said) == 2 and first.api_token.get_secret_value() in said[0]
    assert first.api_token.get_secret_value() != first.join_token.get_secret_value()
    assert len(first.api_token.get_secret_value()) >= 32
    mode = stat.S_IMODE((tmp_path / "api_token").stat().st_mode)
    assert mode == 0o600
    again = []
    second = ensure_tokens(ManagerSettings(data_dir=tmp_path), announce=again.append)
    assert again == []  # shown once, when created
    assert second.api_token.get_secret_value() == first.api_token.get_secret_value()


def test_environment_tokens_win_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("POPULACE_API_TOKEN", "from-env")
    monkeypatch.setenv("POPULACE_JOIN_TOKEN", "join-from-env")
    settings = ensure_tokens(ManagerSettings(data_dir=tmp_path), announce=lambda _: None)
    assert settings.api_token.get_secret_value() == "from-env"
    assert not (tmp_path / "api_token").exists()


def test_unknown_database_driver_is_rejected_naming_the_field():
    with pytest.raises(ValidationError) as err:
        ManagerSettings(database_url="mysql://root@localhost/x")
    assert "database_url" in str(err.value)
    assert ManagerSettings(database_url="postgresql+asyncpg://u@h/db").database_kind == "postgresql"
