"""How simulations survive or are guarded: a worker process dying mid-round, a population
delete refused while it plays, the manager stopping mid-run. No round is ever kept half-written,
and no run is left in a state nobody can leave."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support import pid_alive, wait_for
from tests.support_simulations import (
    deploy,
    export,
    finish,
    rounds_of,
    rounds_running,
    start,
)


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


def test_a_worker_process_dying_mid_round_comes_back_and_the_round_is_kept_whole(cluster):
    pid = deploy(cluster)
    workers = [w for w in cluster.workers() if w["state"] == "online"]
    with cluster.api() as api:
        sid = start(api, _synthetic(pid, latency_s=0.3, rounds=8))["id"]
        wait_for(
            lambda: rounds_running([w["address"] for w in workers]) == 2,
            30,
            what="both workers in a round",
        )
        victim = workers[0]
        os.kill(victim["pid"], signal.SIGKILL)
        wait_for(lambda: not pid_alive(victim["pid"]), 10, what="worker gone")
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        assert done["lost_agents"] == 0
        played = rounds_of(api, sid)
        assert len(played) == 8
        # Every kept round is whole: each agent answered once, nobody lost.
        assert all(r["n_valid"] == 1000 and r["n_lost"] == 0 for r in played)
        lines = export(api, sid, "csv").decode().splitlines()
        assert len(lines) == 1 + 1000 * 8
        # The supervisor restarted the process, which came back as the same worker, agents
        # included (the store still places them there).
        back = api.get(f"/api/workers/{victim['id']}").json()
        assert back["state"] == "online" and back["pid"] != victim["pid"], back
        assert api.get(f"/api/populations/{pid}").json()["status"] == "deployed"
        placed = api.get(f"/api/populations/{pid}").json()["agents_per_worker"]
        assert placed[str(victim["id"])] > 0
        wait_for(
            lambda: (
                api.get(f"/api/workers/{victim['id']}").json()["agents"]
                == placed[str(victim["id"])]
            ),
            15,
            what="the restarted worker hosts its agents again",
        )


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


def _log_count(manager, pattern: str, text: str) -> int:
    return sum(p.read_text(errors="replace").count(text) for p in manager.tmp.glob(pattern))


def test_a_manager_stopping_mid_run_resumes_the_run_at_its_next_start(cluster):
    pid = deploy(cluster)
    addresses = [w["address"] for w in cluster.workers()]
    with cluster.api() as api:
        sid = start(api, _synthetic(pid, latency_s=5, rounds=2))["id"]
        wait_for(lambda: rounds_running(addresses) == 2, 20, what="both workers in the round")
    cluster.stop()
    wait_for(lambda: rounds_running(addresses) == 0, 15, what="the workers dropped the round")
    # Down for longer than the TTL (each worker failed three heartbeats: 0.5 + 1 + 2 s of
    # backoff), so the store's heartbeats are all older than the TTL when it starts again.
    missed = _log_count(cluster, "manager-*.log", "missed heartbeats")
    before = _log_count(cluster, "worker-*.log", "waiting for manager")
    wait_for(
        lambda: _log_count(cluster, "worker-*.log", "waiting for manager") >= before + 6,
        30,
        what="the workers missing the manager for longer than the TTL",
    )
    cluster.start()
    with cluster.api() as api:
        # Never reported as failed: the run goes on by itself from its last kept round.
        done = finish(api, sid, timeout=60)
        assert done["status"] == "completed", done
        assert [r["round"] for r in rounds_of(api, sid)] == [1, 2]
        assert all(r["n_valid"] == 1000 for r in rounds_of(api, sid))
        # Start-up gave every live worker a TTL to heartbeat: none was called offline.
        assert _log_count(cluster, "manager-*.log", "missed heartbeats") == missed
        again = start(api, _synthetic(pid, latency_s=0, rounds=1))
        assert finish(api, again["id"])["status"] == "completed"
