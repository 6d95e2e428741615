"""Deploy, browse and clean up populations through the REST API, with real worker processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

import numpy as np
import pytest
import yaml

from backend.db.session import make_engine, make_sessionmaker
from backend.populations import store
from backend.workers.grpc_client import AgentColumns
from tests.support import (
    ManagerFactory,
    descendants,
    empty_cluster,
    populace_cmd,
    wait_for,
    worker_client,
)
from tests.support_populations import YAML, population_text

CONFIG = population_text("education-study")


def _start_cluster(factory: ManagerFactory, database_url: str):
    manager = factory(
        database_url=database_url, extra_env={"POPULACE_REAPER_INTERVAL_S": "1"}
    ).start()
    nodes = [manager.start_workers(procs=1, start_new_session=True) for _ in range(2)]
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="online",
    )
    return manager, nodes


@pytest.fixture
def cluster(manager_factory, database_url):
    """A manager on SQLite or Postgres (each test runs on both) with two worker nodes, fresh
    for the test: the tests that freeze a node have it to themselves."""
    return _start_cluster(manager_factory, database_url)


@pytest.fixture(scope="module")
def shared_cluster(module_database_url, tmp_path_factory):
    """The same cluster, started once per database for the module's tests that only deploy
    and delete (each on its own population). Stopped with its database's turn, before a
    Postgres database is dropped."""
    factory = ManagerFactory(tmp_path_factory.mktemp("populations"))
    try:
        yield _start_cluster(factory, module_database_url)
    finally:
        factory.stop()


@pytest.fixture
def clean_cluster(shared_cluster):
    """The shared cluster as a fresh one would be: no population, both workers online and
    empty."""
    manager, _ = shared_cluster
    empty_cluster(manager, workers=2)
    return shared_cluster


def _population(api, pid):
    return api.get(f"/api/populations/{pid}").json()


def _hosted(addresses, pid) -> int:
    async def count():
        total = 0
        for address in addresses:
            async with worker_client(address) as client:
                total += (await client.info()).population_agents.get(str(pid), 0)
        return total

    return asyncio.run(count())


def _all_agents(api, **params):
    agents, after = [], None
    while True:
        page = api.get(
            "/api/agents", params={**params, "limit": 100, **({"after": after} if after else {})}
        ).json()
        agents += page["items"]
        after = page["next_after"]
        if after is None:
            return agents


def test_deploy_browse_and_delete(clean_cluster):
    manager, _ = clean_cluster
    addresses = [w["address"] for w in manager.workers()]
    with manager.api() as api:
        resp = api.post("/api/populations", content=CONFIG, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        population = wait_for(
            lambda: (p := _population(api, pid))["status"] == "deployed" and p, 60, what="deployed"
        )
        assert population["counts"]["education"] == {
            "high school": 500,
            "bachelor": 300,
            "doctorate": 200,
        }
        assert population["counts"]["occupation"]["engineer"] == 150
        per_worker = population["agents_per_worker"]
        assert sum(per_worker.values()) == 1000 and len(per_worker) == 2, per_worker
        assert _hosted(addresses, pid) == 1000

        agents = _all_agents(api, population_id=pid)
        assert len({a["id"] for a in agents}) == 1000
        assert [a["id"] for a in agents] == sorted(a["id"] for a in agents)
        profs = _all_agents(api, population_id=pid, attribute="occupation:game theory professor")
        assert len(profs) == 200 and all(a["attributes"]["education"] == "doctorate" for a in profs)
        one = api.get(f"/api/agents/{agents[0]['id']}").json()
        assert one["persona"] == (
            f"You are a {one['attributes']['occupation']} whose highest education is "
            f"{one['attributes']['education']}."
        )
        assert str(one["worker_id"]) in per_worker
        wait_for(
            lambda: sum(w["agents"] for w in manager.workers()) == 1000,
            10,
            what="heartbeats carry agents",
        )

        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(lambda: _population(api, pid)["status"] == "deleted", 30, what="deleted")
        assert api.get("/api/agents", params={"population_id": pid}).json()["items"] == []
        assert _hosted(addresses, pid) == 0
        assert api.delete(f"/api/populations/{pid}").status_code == 202  # idempotent


def test_a_64_bit_seed_comes_back_exact_as_a_string(clean_cluster):
    """JavaScript numbers hold integers exactly only to 2^53: seeds go out as decimal strings,
    and come in as numbers or such strings."""
    manager, _ = clean_cluster
    big = 5561286856019017598
    config = yaml.safe_load(CONFIG)
    with manager.api() as api:
        for sent in (big, str(big)):
            resp = api.post("/api/populations", json={**config, "size": 10, "seed": sent})
            assert resp.status_code == 202, resp.text
            assert resp.json()["seed"] == str(big)
            pid = resp.json()["id"]
            wait_for(lambda p=pid: _population(api, p)["status"] == "deployed", 30, what="deployed")
            detail = _population(api, pid)
            assert detail["seed"] == str(big) and detail["config"]["seed"] == str(big)
        resp = api.post("/api/populations", json={**config, "seed": "12x"})
        assert resp.status_code == 422 and "seed" in resp.json()["detail"][0]["loc"]


def test_bad_configs_are_422_naming_the_field_and_too_big_is_409(shared_manager):
    with shared_manager.api() as api:
        bad = CONFIG.replace("weight: 0.2}", "weight: 0.1}")
        resp = api.post("/api/populations", content=bad, headers=YAML)
        assert resp.status_code == 422
        assert resp.json()["detail"][0]["loc"][:4] == ["body", "distributions", 0, "categories"]
        assert "not 1" in resp.json()["detail"][0]["msg"]
        for broken, field in [
            (CONFIG.replace("size: 1000", "size: -5"), "size"),
            (CONFIG.replace("seed: 7", "seed: 7\ncolour: red"), "colour"),
        ]:
            resp = api.post("/api/populations", content=broken, headers=YAML)
            assert resp.status_code == 422 and field in resp.json()["detail"][0]["loc"], resp.text
        # No workers at all in this manager: nothing fits.
        resp = api.post("/api/populations", content=CONFIG, headers=YAML)
        assert resp.status_code == 409 and "0 agents fit" in resp.json()["detail"]
        assert api.get("/api/populations").json()["items"] == [], "nothing half-created"


def test_offline_worker_agents_are_orphaned_then_reaped_when_it_returns(cluster):
    manager, nodes = cluster
    with manager.api() as api:
        pid = api.post("/api/populations", content=CONFIG, headers=YAML).json()["id"]
        wait_for(lambda: _population(api, pid)["status"] == "deployed", 60, what="deployed")
        frozen_node = nodes[0]
        frozen = next(w for w in manager.workers() if w["pid"] in descendants(frozen_node.pid))
        os.killpg(frozen_node.pid, signal.SIGSTOP)  # alive but silent: it goes offline
        try:
            wait_for(
                lambda: api.get(f"/api/workers/{frozen['id']}").json()["state"] == "offline",
                15,
                what="offline",
            )
            api.delete(f"/api/populations/{pid}")
            wait_for(lambda: _population(api, pid)["status"] == "deleted", 30, what="deleted")
            orphans = _all_agents(api, population_id=pid, worker_id=frozen["id"])
            assert orphans == [], "orphans are hidden from the browser"
        finally:
            os.killpg(frozen_node.pid, signal.SIGCONT)
        wait_for(
            lambda: api.get(f"/api/workers/{frozen['id']}").json()["state"] == "online",
            15,
            what="back online",
        )
        wait_for(
            lambda: _hosted([frozen["address"]], pid) == 0, 20, what="the reaper cleaned the worker"
        )
        wait_for(lambda: _rows(manager, pid) == 0, 10, what="the orphan rows removed")


def test_emptying_a_worker_moves_its_agents_and_the_population_stays_whole(cluster):
    manager, nodes = cluster
    with manager.api() as api:
        pid = api.post("/api/populations", content=CONFIG, headers=YAML).json()["id"]
        population = wait_for(
            lambda: (p := _population(api, pid))["status"] == "deployed" and p, 60, what="deployed"
        )
        per_worker = {int(w): n for w, n in population["agents_per_worker"].items()}
        workers = {w["id"]: w for w in manager.workers()}
        emptied, kept = sorted(per_worker)
        size = sum(per_worker.values())

        result = api.delete(f"/api/workers/{emptied}/agents")
        assert result.status_code == 200, result.text
        assert result.json() == {
            "worker_id": emptied,
            "populations": [
                {
                    "population_id": pid,
                    "agents": per_worker[emptied],
                    "moved": per_worker[emptied],
                    "unplaced": 0,
                }
            ],
            "agents_moved": per_worker[emptied],
            "agents_unplaced": 0,
        }
        assert _hosted([workers[emptied]["address"]], pid) == 0
        assert _hosted([workers[kept]["address"]], pid) == size
        assert _rows(manager, pid) == size
        assert _all_agents(api, population_id=pid, worker_id=emptied) == []
        after = _population(api, pid)
        assert after["agents_per_worker"] == {str(kept): size}
        assert (after["status"], after["hosted"]) == ("deployed", size)
        again = api.delete(f"/api/workers/{emptied}/agents").json()
        assert again["populations"] == [] and again["agents_moved"] == 0, "idempotent"
        assert api.delete("/api/workers/999999/agents").status_code == 404

        # Emptying a silent worker moves its agents all the same; the stale copies it still
        # holds are reaped when it is back.
        frozen_node = next(n for n in nodes if workers[kept]["pid"] in descendants(n.pid))
        os.killpg(frozen_node.pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: api.get(f"/api/workers/{kept}").json()["state"] == "offline",
                15,
                what="offline",
            )
            moved = api.delete(f"/api/workers/{kept}/agents").json()
            assert moved["agents_moved"] == size, moved
            assert _population(api, pid)["agents_per_worker"] == {str(emptied): size}
        finally:
            os.killpg(frozen_node.pid, signal.SIGCONT)
        wait_for(
            lambda: _hosted([workers[kept]["address"]], pid) == 0, 20, what="the reaper cleaned it"
        )
        assert _hosted([workers[emptied]["address"]], pid) == size
        assert _rows(manager, pid) == size


def _rows(manager, pid) -> int:
    """Agent rows in the store, orphans included (the API hides orphans)."""

    async def count() -> int:
        engine = make_engine(manager.database_url)
        try:
            async with make_sessionmaker(engine)() as session:
                return await store.count_agents(session, pid)
        finally:
            await engine.dispose()

    return asyncio.run(count())


def test_cli_create_list_delete(clean_cluster, tmp_path):
    manager, _ = clean_cluster
    config = tmp_path / "population.yaml"
    config.write_text(CONFIG)
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": manager.url,
        "POPULACE_API_TOKEN": manager.api_token,
    }

    def populace(*args):
        return subprocess.run(
            populace_cmd(*args), env=env, capture_output=True, text=True, timeout=120
        )

    created = populace("population", "create", str(config), "--json")
    assert created.returncode == 0, created.stderr
    summary = json.loads(created.stdout.strip().splitlines()[-1])
    assert summary["status"] == "deployed"
    assert summary["counts"]["education"]["doctorate"] == 200

    listed = populace("population", "list")
    assert (
        listed.returncode == 0
        and "education-study" in listed.stdout
        and "deployed" in listed.stdout
    )

    deleted = populace("population", "delete", str(summary["id"]))
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted, 0 agent rows left" in deleted.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("size: 1000", "size: -1"))
    failed = populace("population", "create", str(bad))
    assert failed.returncode != 0 and "size" in failed.stderr and "422" in failed.stderr


def test_a_failed_deploy_leaves_nothing_behind(manager_factory, database_url):
    """A worker refuses its share (it already hosts agents with those ids): the deploy is undone
    everywhere, on the workers and in the store, and the population says why it failed."""
    manager = manager_factory(
        database_url=database_url, extra_env={"POPULACE_REAPER_INTERVAL_S": "600"}
    ).start()
    manager.start_workers(procs=2)
    workers = wait_for(
        lambda: (
            (ws := [w for w in manager.workers() if w["state"] == "online"]) and len(ws) == 2 and ws
        ),
        30,
        what="online",
    )
    addresses = [w["address"] for w in workers]
    first_population = 1  # a fresh store: the population the POST below creates
    squatters = AgentColumns(
        population_id=str(first_population),
        ids=np.arange(1000, dtype=np.int64) | (first_population << 32),
    )

    async def squat():
        for address in addresses:
            async with worker_client(address) as client:
                await client.create_agents(squatters)

    asyncio.run(squat())
    with manager.api() as api:
        resp = api.post("/api/populations", content=CONFIG, headers=YAML)
        assert resp.status_code == 202 and resp.json()["id"] == first_population
        failed = wait_for(
            lambda: (p := _population(api, first_population))["status"] == "failed" and p,
            60,
            what="failed",
        )
        error = failed["error"]
        assert "refused its" in error and "INVALID_ARGUMENT" in error, error
        assert any(address in error for address in addresses), error
        assert _rows(manager, first_population) == 0
        assert _hosted(addresses, first_population) == 0
