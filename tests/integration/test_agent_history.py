"""GET /api/agents/{id}/decisions: one agent's decisions across simulations, against a real
manager (SQLite and Postgres) with real workers, cross-checked with the simulations' exports."""

from __future__ import annotations

import csv
import io

import pytest

from tests.support import Manager, reset_postgres, stop_process, wait_for
from tests.support_populations import deploy_population, population_text

FINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def played(request, tmp_path_factory):
    """A manager with one worker, a 40-agent population and two finished simulations on it:
    level-k (3 rounds, with noise so only some agents win) then synthetic (2 rounds)."""
    tmp = tmp_path_factory.mktemp(f"history-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    manager = Manager(tmp=tmp, database_url=url).start()
    node = manager.start_workers(procs=1)
    try:
        wait_for(lambda: manager.workers(state="online"), 30, what="a worker online")
        with manager.api() as api:
            pid = deploy_population(api, population_text("history"))["id"]
            level_k = _play(
                api,
                {
                    "population_id": pid,
                    "name": "first",
                    "rounds": 3,
                    "rule": {"preset": "1/2+5"},
                    "policy": {"kind": "level_k", "default_depth": 1, "noise_std": 3.0},
                    "seed": 3,
                },
            )
            synthetic = _play(
                api,
                {
                    "population_id": pid,
                    "name": "second",
                    "rounds": 2,
                    "policy": {"kind": "synthetic"},
                    "seed": 4,
                },
            )
        yield manager, pid, level_k, synthetic
    finally:
        stop_process(node)
        manager.stop()


def _play(api, config: dict) -> int:
    resp = api.post("/api/simulations", json=config)
    assert resp.status_code == 202, resp.text
    sid = resp.json()["id"]
    done = wait_for(
        lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] in FINAL and s,
        60,
        what=f"simulation {sid} to end",
    )
    assert done["status"] == "completed", done
    return sid


def _exported(api, sid: int) -> dict[tuple[int, int], str]:
    """(round, agent id) -> value as exported, from the simulation's CSV."""
    resp = api.get(f"/api/simulations/{sid}/decisions", params={"format": "csv"})
    assert resp.status_code == 200, resp.text
    return {
        (int(row["round"]), int(row["agent_id"])): row["value"]
        for row in csv.DictReader(io.StringIO(resp.text))
    }


def _rounds(api, sid: int) -> dict[int, dict]:
    return {r["round"]: r for r in api.get(f"/api/simulations/{sid}/rounds").json()["items"]}


def _decisions(api, agent: int, **params) -> dict:
    resp = api.get(f"/api/agents/{agent}/decisions", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_an_agents_decisions_match_the_exports_newest_simulation_first(played):
    manager, pid, level_k, synthetic = played
    agent = (pid << 32) | 17
    with manager.api() as api:
        items = _decisions(api, agent)["items"]
        assert [(d["simulation_id"], d["round"]) for d in items] == [
            (synthetic, 1),
            (synthetic, 2),
            (level_k, 1),
            (level_k, 2),
            (level_k, 3),
        ]
        for sid, name in ((level_k, "first"), (synthetic, "second")):
            exported = _exported(api, sid)
            rounds = _rounds(api, sid)
            for d in (d for d in items if d["simulation_id"] == sid):
                assert d["simulation_name"] == name and d["simulation_status"] == "completed"
                assert d["status"] == "valid"
                assert repr(d["value"]) == exported[(d["round"], agent)]
                assert d["action"] == d["value"]  # the guessing game's action is its number
                assert d["target"] == rounds[d["round"]]["target"]
                assert d["winner_value"] == rounds[d["round"]]["winner_value"]
                assert d["won"] == (d["value"] == d["winner_value"])


def test_won_marks_exactly_the_rounds_winners(played):
    manager, pid, level_k, _ = played
    with manager.api() as api:
        rounds = _rounds(api, level_k)
        winners = {(n, a) for n, r in rounds.items() for a in r["winner_agents"]}
        assert winners, "someone wins every round"
        won = set()
        for index in range(40):
            agent = (pid << 32) | index
            for d in _decisions(api, agent, simulation_id=level_k)["items"]:
                if d["won"]:
                    won.add((d["round"], agent))
        assert won == winners
        # With noise, not everybody wins: the flag tells winners apart.
        assert len(won) < 3 * 40


def test_pages_follow_the_cursor_to_the_same_list(played):
    manager, pid, _, _ = played
    agent = (pid << 32) | 3
    with manager.api() as api:
        whole = _decisions(api, agent)
        assert whole["next_after"] is None and len(whole["items"]) == 5
        paged, after, pages = [], None, 0
        while True:
            params = {"limit": 2, **({"after": after} if after else {})}
            page = _decisions(api, agent, **params)
            paged += page["items"]
            pages += 1
            after = page["next_after"]
            if after is None:
                break
            last = page["items"][-1]
            assert after == f"{last['simulation_id']}:{last['round']}"
        assert pages == 3 and paged == whole["items"]


def test_bad_input_and_unknown_agents(played):
    manager, pid, level_k, _ = played
    with manager.api() as api:
        bad = api.get(f"/api/agents/{pid << 32}/decisions", params={"after": "7"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "after"]
        unknown = api.get(f"/api/agents/{(pid + 999) << 32}/decisions")
        assert unknown.status_code == 404 and f"population {pid + 999}" in unknown.text
        # An agent index the population never had: no decisions, not an error.
        assert _decisions(api, (pid << 32) | 40)["items"] == []
        other = _decisions(api, (pid << 32) | 1, simulation_id=level_k)["items"]
        assert {d["simulation_id"] for d in other} == {level_k} and len(other) == 3


def test_results_outlive_the_agents(played):
    """Runs last in the module: it deletes the population."""
    manager, pid, _, _ = played
    agent = (pid << 32) | 9
    with manager.api() as api:
        before = _decisions(api, agent)["items"]
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="deleted",
        )
        assert api.get(f"/api/agents/{agent}").status_code == 404
        assert _decisions(api, agent)["items"] == before
