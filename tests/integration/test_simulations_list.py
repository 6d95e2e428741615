"""The runs list through the REST API, on a real manager with real workers (SQLite and
Postgres): search, filters, sort and cursor pages over played runs and a sweep's runs, each run
with its params, its sweep's name and its last round's metrics; a 422 naming each bad
parameter."""

from __future__ import annotations

import pytest

from backend.client import Client
from tests.support import reset_postgres, running_cluster, wait_for
from tests.support_simulations import deploy, finish, rounds_of, start

FINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def played(request, tmp_path_factory):
    """A manager with two worker processes, two small populations, three synthetic runs and a
    two-run sweep, all finished: (manager, {name: run}, sweep)."""
    tmp = tmp_path_factory.mktemp(f"runs-list-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    with running_cluster(tmp, url) as manager:
        first, second = deploy(manager, size=40, name="first"), deploy(manager, size=40, name="b")
        runs = {}
        with manager.api() as api:
            for name, pid, ratio in (
                ("Alpha baseline", first, 0.5),
                ("beta low", second, 0.25),
                ("Beta high", first, 0.75),
            ):
                config = _synthetic(pid, name, rule={"ratio": ratio, "offset": 0})
                runs[name] = finish(api, start(api, config)["id"])
                assert runs[name]["status"] == "completed", runs[name]
            resp = api.post(
                "/api/sweeps",
                json={
                    "name": "ratio sweep",
                    "populations": [second],
                    "base": {"rounds": 2, "policy": {"kind": "synthetic"}},
                    "grid": {"rule.ratio": [0.3, 0.6]},
                },
            )
            assert resp.status_code == 202, resp.text
            sweep = resp.json()
            wait_for(
                lambda: api.get(f"/api/sweeps/{sweep['id']}").json()["status"] in FINAL,
                120,
                what="the sweep to end",
            )
        yield manager, runs, sweep


def _synthetic(pid: int, name: str, **overrides) -> dict:
    return {
        "population_id": pid,
        "name": name,
        "rounds": 2,
        "policy": {"kind": "synthetic"},
        "seed": 3,
        **overrides,
    }


def _list(api, **params) -> dict:
    resp = api.get("/api/simulations", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _names(api, **params) -> list[str]:
    return [s["name"] for s in _list(api, **params)["items"]]


def _walk(api, **params) -> list[dict]:
    """Every page, following next_cursor."""
    items, cursor = [], None
    while True:
        page = _list(api, **params, **({"cursor": cursor} if cursor else {}))
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        cursor = page["next_cursor"]


def test_search_and_filters(played):
    manager, runs, sweep = played
    alpha, low, high = runs["Alpha baseline"], runs["beta low"], runs["Beta high"]
    with manager.api() as api:
        assert _names(api, q="BETA") == ["beta low", "Beta high"]
        assert _names(api, q="beta", population_id=alpha["population_id"]) == ["Beta high"]
        first = alpha["population_id"]
        assert _names(api, status="completed,failed", population_id=first) == [
            "Alpha baseline",
            "Beta high",
        ]
        assert _names(api, status=["failed", "cancelled"]) == []
        assert len(_list(api, plugin="guess")["items"]) == 5
        assert _names(api, plugin="other") == []
        swept = _list(api, sweep_id=sweep["id"])["items"]
        assert [s["sweep_params"] for s in swept] == [{"rule.ratio": 0.3}, {"rule.ratio": 0.6}]
        assert {s["sweep_name"] for s in swept} == {"ratio sweep"}
        assert {s["population_id"] for s in swept} == {low["population_id"]}
        assert _list(api, q="beta")["items"][0]["sweep_name"] is None
        assert high["id"] > alpha["id"]


def test_each_run_carries_its_params_and_final_metrics(played):
    manager, runs, _ = played
    with manager.api() as api:
        listed = {s["id"]: s for s in _list(api)["items"]}
        for run in runs.values():
            item = listed[run["id"]]
            detail = api.get(f"/api/simulations/{run['id']}").json()
            assert item["plugin"] == detail["config"]["plugin"]["name"] == "guess"
            assert item["params"] == detail["config"]["plugin"]["params"]
            assert item["policy"] == detail["config"]["policy"]["kind"]
            last = rounds_of(api, run["id"])[-1]
            assert last["round"] == 2
            assert item["last_metrics"] == last["metrics"]
            assert set(item["last_metrics"]) == {m["name"] for m in detail["metrics"]}
        assert listed[runs["beta low"]["id"]]["params"]["rule"]["ratio"] == 0.25


def test_sorted_pages_follow_the_cursor(played):
    manager, runs, _ = played
    with manager.api() as api:
        everything = _list(api)["items"]
        by_name = sorted(everything, key=lambda s: (s["name"].lower(), s["id"]))
        for limit in (1, 2):
            walked = _walk(api, sort="name", limit=limit)
            assert [s["id"] for s in walked] == [s["id"] for s in by_name]
            walked = _walk(api, sort="-name", limit=limit)
            assert [s["id"] for s in walked] == [s["id"] for s in reversed(by_name)]
        newest = _walk(api, sort="-created_at", limit=2)
        assert [s["id"] for s in newest] == sorted((s["id"] for s in everything), reverse=True)
        # Filtered and sorted, across pages.
        betas = _walk(api, q="beta", sort="-name", limit=1)
        assert [s["name"] for s in betas] == ["beta low", "Beta high"]
        # `after` still pages the default order, as the CLI's client does.
        client = Client(manager.url, manager.api_token)
        assert [s.id for s in client.simulations(page_size=2)] == [s["id"] for s in everything]


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"status": "running,done"}, "status", ["'done' is not a status", "completed"]),
        ({"status": ["done"]}, "status", ["running, paused"]),
        ({"sort": "rounds_playedx"}, "sort", ["'-created_at'", "'name'", "'current_round'"]),
        ({"plugin": "Not A Name"}, "plugin", []),
        ({"sweep_id": 0}, "sweep_id", []),
        ({"cursor": "garbage"}, "cursor", ["next_cursor"]),
        ({"sort": "name", "after": 2}, "after", ["cursor=next_cursor"]),
        ({"q": "x" * 201}, "q", []),
    ],
)
def test_bad_parameters_are_422_naming_the_field(played, params, field, words):
    manager, _, _ = played
    with manager.api() as api:
        resp = api.get("/api/simulations", params=params)
    assert resp.status_code == 422, resp.text
    (issue,) = resp.json()["detail"]
    assert issue["loc"] == ["query", field], issue
    for word in words:
        assert word in issue["msg"], issue
