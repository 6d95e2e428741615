"""GET /api/plugins and `populace plugins list|show` against a real manager: the installed
simulation plugins with what each declares (the built-in guessing game among them)."""

from __future__ import annotations

import httpx

from tests.support import Cli


def test_the_api_lists_the_guessing_game_with_its_declaration(shared_manager):
    with shared_manager.api() as api:
        page = api.get("/api/plugins").json()
        assert page["next_after"] is None and page["broken"] == []
        guess = next(p for p in page["items"] if p["name"] == "guess")
        assert api.get("/api/plugins/guess").json() == guess
        # A page of one, then the rest after it.
        first = api.get("/api/plugins", params={"limit": 1}).json()
        assert len(first["items"]) == 1
    assert guess["title"] == "Guessing game" and guess["distribution"] == "populace"
    rule = guess["params_schema"]["$defs"]["RuleConfig"]["properties"]
    assert rule["max"]["default"] == 100.0 and rule["max"]["title"] == "Largest number"
    assert guess["action"] == {"kind": "number", "low": 0.0, "high": 100.0}
    assert {"mean", "target", "winner_value"} <= {m["name"] for m in guess["metrics"]}
    assert guess["default_policy"] == "level_k"


def test_unknown_and_malformed_names_are_refused_clearly(shared_manager):
    with shared_manager.api() as api:
        missing = api.get("/api/plugins/dice")
        malformed = api.get("/api/plugins/Dice!")
    assert missing.status_code == 404
    assert "no plugin named 'dice'" in missing.json()["detail"]
    assert "guess" in missing.json()["detail"]  # the known ones
    assert malformed.status_code == 422
    assert malformed.json()["detail"][0]["loc"] == ["path", "name"]


def test_the_plugins_need_a_token(shared_manager):
    assert httpx.get(f"{shared_manager.url}/api/plugins", timeout=10).status_code == 401


def test_the_cli_lists_and_shows_plugins(shared_manager):
    cli = Cli(shared_manager)
    listed = cli("plugins", "list")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:1] == ["guess"] for line in listed.stdout.splitlines())
    shown = cli("plugins", "show", "guess")
    assert shown.returncode == 0, shown.stderr
    assert "action: " in shown.stdout and "level_k" in shown.stdout and "(default)" in shown.stdout
    assert "  rule " in shown.stdout and "  target " in shown.stdout

    unknown = cli("plugins", "show", "dice")
    assert unknown.returncode == 1
    assert len(unknown.stderr.strip().splitlines()) == 1
    assert "no plugin named 'dice'" in unknown.stderr
    malformed = cli("plugins", "show", "../workers")
    assert malformed.returncode == 1 and "plugin name" in malformed.stderr
