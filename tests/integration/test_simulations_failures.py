"""How simulations fail or are guarded: a worker dying mid-round, a population delete refused
while it plays, the manager stopping mid-run. Each ends with a clear status and error, and no half-written round."""

from __future__ import annotations

import os
import signal

import pytest

from tests.integration.test_simulations_api import (
    _rounds_running,
    deploy,
    export,
    finish,
    rounds_of,
    start,
)
from tests.support import pid_alive, wait_for


@pytest.fixture
def cluster(manager_factory, database_url):
    manager = manager_factory(database_url=database_url).start()
    manager.start_workers(procs=2)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="two workers online",
    )
    return manager


def _synthetic(pid: int, latency_s: float, rounds: int) -> dict:
    return {
        "population_id": pid,
        "rounds": rounds,
        "policy": {"kind": "synthetic", "latency_s": latency_s},
        "seed": 1,
    }


def test_a_worker_dying_mid_round_fails_the_simulation_naming_it(cluster):
    pid = deploy(cluster)
    workers = [w for w in cluster.workers() if w["state"] == "online"]
    with cluster.api() as api:
        sid = start(api, _synthetic(pid, latency_s=0.2, rounds=50))["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 2,
            30,
            what="two rounds played",
        )
        victim = workers[0]
        os.kill(victim["pid"], signal.SIGKILL)
        wait_for(lambda: not pid_alive(victim["pid"]), 10, what="worker gone")
        done = finish(api, sid, timeout=60)
        assert done["status"] == "failed", done
        assert victim["address"] in done["error"] and "round" in done["error"], done["error"]
        played = rounds_of(api, sid)
        assert 2 <= len(played) == done["current_round"] < 50
        # Only whole rounds: every kept round has all its decisions, and nothing else is kept.
        assert all(r["n_valid"] == 1000 for r in played)
        lines = export(api, sid, "csv").decode().splitlines()
        assert len(lines) == 1 + 1000 * len(played)


def test_a_population_playing_a_simulation_cannot_be_deleted_until_it_is_cancelled(cluster):
    pid = deploy(cluster)
    with cluster.api() as api:
        sid = start(api, _synthetic(pid, latency_s=0.3, rounds=100))["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round played",
        )
        refused = api.delete(f"/api/populations/{pid}")
        assert refused.status_code == 409, refused.text
        assert f"simulation {sid}" in refused.json()["detail"]
        assert api.get(f"/api/populations/{pid}").json()["status"] == "deployed"
        assert api.post(f"/api/simulations/{sid}/cancel").status_code == 200
        done = finish(api, sid, timeout=60)
        assert done["status"] == "cancelled", done
        played = rounds_of(api, sid)
        assert 1 <= len(played) == done["current_round"] < 100
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="the delete finished",
        )
        # The results outlive the population.
        assert len(export(api, sid, "jsonl").splitlines()) == 1000 * len(played)


def test_a_manager_stopping_mid_run_fails_the_run_and_stops_the_workers_round(cluster):
    pid = deploy(cluster)
    addresses = [w["address"] for w in cluster.workers()]
    with cluster.api() as api:
        sid = start(api, _synthetic(pid, latency_s=60, rounds=2))["id"]
        wait_for(lambda: _rounds_running(addresses) == 2, 20, what="both workers in the round")
    cluster.stop()
    wait_for(lambda: _rounds_running(addresses) == 0, 15, what="the workers dropped the round")
    cluster.start()
    wait_for(
        lambda: len([w for w in cluster.workers() if w["state"] == "online"]) == 2,
        30,
        what="workers back online",
    )
    with cluster.api() as api:
        stopped = api.get(f"/api/simulations/{sid}").json()
        assert stopped["status"] == "failed"
        assert "manager stopped" in stopped["error"], stopped
        # The population is free for the next run.
        again = start(api, _synthetic(pid, latency_s=0, rounds=1))
        assert finish(api, again["id"])["status"] == "completed"
