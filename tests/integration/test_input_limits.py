"""Bounded, clear input: every class of hostile or broken input gets a 4xx naming the problem,
nothing stored changes, and the manager keeps serving (a live worker is not marked offline).

One real manager on Postgres with one real worker, a deployed population and a finished
simulation for the whole module; each test checks the store is as it was.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support import Manager, reset_postgres, stop_process, wait_for

pytestmark = pytest.mark.postgres

YAML = {"Content-Type": "application/yaml"}
JSON = {"Content-Type": "application/json"}
INT32_OVER = 2**31
MAX_BODY = 4 * 1024 * 1024
POPULATION = {
    "name": "limits",
    "size": 100,
    "seed": 3,
    "distributions": [
        {
            "name": "education",
            "categories": [{"name": "school", "weight": 0.5}, {"name": "phd", "weight": 0.5}],
        }
    ],
    "persona": {"template": "You studied at {education}."},
}
SIMULATION = {"rounds": 1, "policy": {"kind": "synthetic"}}
# "Billion laughs": 9 levels of 9 aliases each, 10^9 strings once expanded, in 340 bytes.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.fixture(scope="module")
def played(tmp_path_factory, postgres_server_url):
    """(manager, worker id, population id, simulation id)."""
    tmp = tmp_path_factory.mktemp("limits")
    reset_postgres(postgres_server_url)
    manager = Manager(tmp=tmp, database_url=postgres_server_url).start()
    node = manager.start_workers(procs=1)
    try:
        (worker,) = wait_for(
            lambda: [w for w in manager.workers() if w["state"] == "online"] or None,
            30,
            what="a worker online",
        )
        with manager.api() as api:
            created = api.post("/api/populations", json=POPULATION)
            assert created.status_code == 202, created.text
            pid = created.json()["id"]
            wait_for(
                lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
                60,
                what="deployed",
            )
            launched = api.post("/api/simulations", json={**SIMULATION, "population_id": pid})
            assert launched.status_code == 202, launched.text
            sid = launched.json()["id"]
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["status"] == "completed",
                60,
                what="simulation completed",
            )
            # The worker's heartbeats have caught up with what it hosts: the store is settled.
            wait_for(
                lambda: api.get(f"/api/workers/{worker['id']}").json()["agents"] == 100,
                15,
                what="the worker's heartbeat counting its agents",
            )
        yield manager, worker["id"], pid, sid
    finally:
        stop_process(node)
        manager.stop()


def _stored(manager: Manager) -> dict:
    """What the store holds, without the fields that move on their own: a worker's agent count
    is what its heartbeats report (it read 0 once in CI between two reads of 100, with nothing
    deployed or deleted), so a worker is compared by id and state."""
    with manager.api() as api:
        populations = api.get("/api/populations", params={"include_deleted": True}).json()
        simulations = api.get("/api/simulations").json()
        workers = api.get("/api/workers").json()
    return {
        "populations": [
            (p["id"], p["name"], p["size"], p["status"], p["hosted"]) for p in populations["items"]
        ],
        "simulations": [(s["id"], s["status"], s["current_round"]) for s in simulations["items"]],
        "workers": [(w["id"], w["state"]) for w in workers["items"]],
    }


@pytest.fixture
def unchanged(played):
    """Checks after the test that nothing stored changed."""
    manager = played[0]
    before = _stored(manager)
    yield
    assert _stored(manager) == before


def _issue(resp: httpx.Response, loc: list) -> dict:
    """The 422's entry at `loc` (the one error shape: a list of {loc, msg, type}, and the
    rule's bounds or choices as ctx where it has them)."""
    assert resp.status_code == 422, resp.text
    issues = resp.json()["detail"]
    shape = {"loc", "msg", "type"}
    assert all(shape <= set(issue) <= shape | {"ctx"} for issue in issues), issues
    found = [issue for issue in issues if issue["loc"] == loc]
    assert found, f"no issue at {loc}: {issues}"
    return found[0]


def _stayed_online(manager: Manager, worker_id: int) -> None:
    """The worker heartbeats on after the attack, and the liveness sweep never marked it (or
    any worker) offline: the event loop was not held."""
    with manager.api() as api:
        seen = api.get(f"/api/workers/{worker_id}").json()["last_heartbeat"]

        def beat_again():
            worker = api.get(f"/api/workers/{worker_id}").json()
            return worker if worker["last_heartbeat"] != seen else None

        later = wait_for(beat_again, 15, what="a heartbeat after the attack")
    assert later["state"] == "online", later
    log = (manager.tmp / f"manager-{manager.port}.log").read_text(errors="replace")
    assert "missed heartbeats" not in log


def test_yaml_alias_bomb_is_refused(played, unchanged):
    manager, worker_id, _, _ = played
    with manager.api() as api:
        resp = api.post("/api/populations", content=ALIAS_BOMB, headers=YAML)
    issue = _issue(resp, ["body", "(document)"])
    assert "alias" in issue["msg"] and "200000 values" in issue["msg"], issue
    _stayed_online(manager, worker_id)


def test_ten_megabyte_body_is_refused_as_it_streams(played, unchanged):
    manager, worker_id, _, _ = played
    big = b"name: x\n" + b"#" * (10 * 1024 * 1024)
    with manager.api() as api:
        # With Content-Length: refused before the body is read.
        declared = api.post("/api/populations", content=big, headers=YAML)
        assert declared.status_code == 413, declared.text
        assert str(MAX_BODY) in declared.json()["detail"]
        assert "POPULACE_MAX_BODY_BYTES" in declared.json()["detail"]

        # Chunked (no length): counted as it arrives; /healthz answers all along.
        health = []

        def chunks():
            for start in range(0, len(big), 1024 * 1024):
                yield big[start : start + 1024 * 1024]
                health.append(httpx.get(f"{manager.url}/healthz", timeout=5).status_code)

        streamed = api.post("/api/populations", content=chunks(), headers=YAML)
    assert streamed.status_code == 413, streamed.text
    assert str(MAX_BODY) in streamed.json()["detail"]
    assert health and set(health) == {200}, health
    _stayed_online(manager, worker_id)


def test_ids_beyond_their_storage_range(played, unchanged):
    manager, _, pid, sid = played
    with manager.api() as api:
        for path, name in (
            (f"/api/workers/{INT32_OVER}", "worker_id"),
            (f"/api/populations/{INT32_OVER}", "population_id"),
            (f"/api/simulations/{INT32_OVER}/rounds", "simulation_id"),
            (f"/api/agents/{2**63}", "agent_id"),
        ):
            _issue(api.get(path), ["path", name])
        for path, params in (
            (f"/api/simulations/{sid}/decisions", {"round": INT32_OVER}),
            ("/api/agents", {"population_id": INT32_OVER}),
            ("/api/agents", {"worker_id": INT32_OVER}),
            ("/api/agents", {"after": 2**63}),
            ("/api/simulations", {"population_id": INT32_OVER}),
            ("/api/populations", {"after": INT32_OVER}),
            ("/api/workers", {"after": INT32_OVER}),
        ):
            (name,) = params
            issue = _issue(api.get(path, params=params), ["query", name])
            assert "less than or equal" in issue["msg"], issue
        # The decisions export answers its 422 before streaming: a JSON body, not a CSV.
        export = api.get(f"/api/simulations/{sid}/decisions", params={"round": INT32_OVER})
        assert export.headers["content-type"] == "application/json"
        body = {**SIMULATION, "population_id": INT32_OVER}
        _issue(api.post("/api/simulations", json=body), ["body", "population_id"])
        cursor = f"{INT32_OVER}:1"
        _issue(
            api.get(f"/api/agents/{pid << 32}/decisions", params={"after": cursor}),
            ["query", "after"],
        )


def test_nan_and_infinity_are_refused(played, unchanged):
    manager, _, pid, sid = played
    with manager.api() as api:
        nan = json.dumps({**SIMULATION, "population_id": pid, "rule": {"preset": "2/3", "max": 1}})
        resp = api.post(
            "/api/simulations", content=nan.replace('"max": 1', '"max": NaN'), headers=JSON
        )
        assert "NaN" in _issue(resp, ["body", "rule", "max"])["msg"]
        infinity = json.dumps(POPULATION).replace('"weight": 0.5', '"weight": Infinity', 1)
        resp = api.post("/api/populations", content=infinity, headers=JSON)
        issue = _issue(resp, ["body", "distributions", 0, "categories", 0, "weight"])
        assert "Infinity" in issue["msg"]
        resume = api.post(
            f"/api/simulations/{sid}/resume", content='{"allow_partial": -Infinity}', headers=JSON
        )
        _issue(resume, ["body", "allow_partial"])


def test_nul_characters_are_refused(played, unchanged):
    manager, _, pid, _ = played
    with manager.api() as api:
        named = api.post("/api/populations", json={**POPULATION, "name": "li\u0000mits"})
        assert "NUL" in _issue(named, ["body", "name"])["msg"]
        in_yaml = api.post("/api/populations", content='name: "a\\0b"\nsize: 1\n', headers=YAML)
        _issue(in_yaml, ["body", "name"])
        query = api.get(
            "/api/agents", params={"population_id": pid, "attribute": "education:ph\x00d"}
        )
        assert "NUL" in _issue(query, ["query", "attribute"])["msg"]
        for path in ("/api/populations/1%00", "/api/no%00where", "/index%00.html"):
            assert "NUL" in _issue(api.get(path), ["path"])["msg"]


def test_deep_json_is_refused(played, unchanged):
    manager = played[0]
    deep = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with manager.api() as api:
        resp = api.post("/api/populations", content=deep, headers=JSON)
    assert "nested more than 64 levels" in _issue(resp, ["body", "(document)"])["msg"]


def test_deep_yaml_is_refused(played, unchanged):
    manager = played[0]
    flow = "name: " + "[" * 10_000 + "]" * 10_000 + "\n"
    block = "name:\n" + "- " * 10_000 + "x\n"  # compact nested block sequences
    with manager.api() as api:
        for deep in (flow, block):
            resp = api.post("/api/populations", content=deep, headers=YAML)
            assert "nested more than 64 levels" in _issue(resp, ["body", "(document)"])["msg"]


def test_invalid_utf8_is_refused(played, unchanged):
    manager = played[0]
    with manager.api() as api:
        resp = api.post("/api/populations", content=b"name: caf\xe9\nsize: 1\n", headers=YAML)
        assert "not UTF-8" in _issue(resp, ["body", "(document)"])["msg"]
        typed = api.post(
            f"/api/simulations/{played[3]}/resume",
            content=b'{"allow_partial": "\xff"}',
            headers=JSON,
        )
        assert "not UTF-8" in _issue(typed, ["body", "(document)"])["msg"]


def test_population_without_distributions_is_refused(played, unchanged):
    manager = played[0]
    with manager.api() as api:
        plain = {**POPULATION, "persona": {"template": "You are a citizen."}}
        resp = api.post("/api/populations", json={**plain, "distributions": []})
        issue = _issue(resp, ["body", "distributions"])
        assert "at least one distribution" in issue["msg"]
        missing = {k: v for k, v in plain.items() if k != "distributions"}
        _issue(api.post("/api/populations", json=missing), ["body", "distributions"])


def test_population_over_the_size_limit_is_refused(played, unchanged):
    manager = played[0]
    with manager.api() as api:
        resp = api.post("/api/populations", json={**POPULATION, "size": 1_000_001})
    issue = _issue(resp, ["body", "size"])
    assert "1000001" in issue["msg"] and "1000000" in issue["msg"], issue
    assert "POPULACE_MAX_POPULATION_SIZE" in issue["msg"]


def test_overlong_paths_are_not_server_errors(played, unchanged):
    manager = played[0]
    with manager.api() as api:
        for path in ("/" + "a" * 300, "/" + "a/" * 3000, "/assets/" + "a" * 300):
            resp = api.get(path)
            assert resp.status_code != 500, (path[:20], resp.text)
        api_path = api.get("/api/" + "a" * 300)
        assert api_path.status_code == 404 and "no such route" in api_path.json()["detail"]
