"""Runs that survive faults, on real processes and Postgres: a worker node SIGKILLed mid-round,
the manager SIGKILLed mid-run, agents removed behind the manager's back, a population that lost
agents for good. Nothing is lost, nothing half-written, and nothing partial passes for whole."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from tests.support import wait_for, worker_client
from tests.support_faults import FAST, hosted_on, kill_node, online_workers, start_node
from tests.support_populations import population_yaml
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    level_k,
    rounds_of,
    start,
)


@pytest.fixture
def pg_manager(manager_factory, postgres_url):
    return manager_factory(database_url=postgres_url, extra_env=dict(FAST)).start()


def test_a_run_survives_a_node_sigkill_and_a_manager_sigkill_and_exports_the_same_bytes(
    pg_manager,
):
    manager = pg_manager
    node_a = start_node(manager, "node-a")
    start_node(manager, "node-b")
    pid = deploy(manager, size=2000)
    # Enough rounds that node A freezes with some still to play (a level-k round takes tens of ms).
    config = level_k(pid, rounds=16, seed=2024)
    events = EventLog(manager, "simulation:*")
    try:
        with manager.api() as api:
            sid = start(api, config)["id"]
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 2,
                60,
                what="two rounds kept",
            )
            # Freeze node A so the next round cannot finish without it, then kill it mid-round.
            kill_node(node_a, signal.SIGSTOP)
            kept = api.get(f"/api/simulations/{sid}").json()["current_round"]
            wait_for(
                lambda: any(
                    e["payload"]["simulation_id"] == sid and e["payload"]["round"] > kept
                    for e in events.of("round.progress")
                ),
                30,
                what="a round in flight with node A frozen",
            )
            kill_node(node_a)
            node_a.wait(10)
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= kept + 2,
                90,
                what="rounds kept again after node A died",
            )
        # The manager dies mid-run too, and comes back by itself.
        manager.stop(signal.SIGKILL)
        manager.start()
        with manager.api() as api:
            done = finish(api, sid, timeout=120)
            assert done["status"] == "completed", done
            assert done["lost_agents"] == 0 and done["pause_reason"] is None
            played = rounds_of(api, sid)
            assert [r["round"] for r in played] == list(range(1, 17))
            assert all(r["n_valid"] + r["n_invalid"] + r["n_late"] == 2000 for r in played)
            assert all(r["n_lost"] == 0 for r in played)
            disturbed = export(api, sid, "csv")

            # Node A's agents now live on node B; the population is whole.
            population = api.get(f"/api/populations/{pid}").json()
            assert (population["status"], population["hosted"]) == ("deployed", 2000)
            node_b = {w["id"]: w["address"] for w in online_workers(manager, "node-b")}
            assert {int(w) for w in population["agents_per_worker"]} <= set(node_b)
            hosted = hosted_on(list(node_b.values()), pid)
            assert sum(hosted.values()) == 2000, hosted

            # The same seed, undisturbed, exports exactly the same bytes.
            again = start(api, config)["id"]
            assert finish(api, again)["status"] == "completed"
            assert export(api, again, "csv") == disturbed
    finally:
        events.close()


def test_agents_removed_behind_the_managers_back_are_restored_and_rounds_stay_whole(
    manager_factory,
):
    manager = manager_factory(extra_env=dict(FAST)).start()
    start_node(manager, "node-a")
    pid = deploy(manager, size=1000)
    victim = online_workers(manager)[0]
    with manager.api() as api:
        sid = start(api, level_k(pid, rounds=30, seed=5))["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round kept",
        )

        async def remove() -> int:
            async with worker_client(victim["address"]) as client:
                return (await client.delete_agents(population_id=str(pid))).deleted

        assert asyncio.run(remove()) > 0
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        assert all(r["n_valid"] + r["n_invalid"] + r["n_late"] == 1000 for r in rounds_of(api, sid))
        assert len(export(api, sid, "csv").decode().splitlines()) == 1 + 30 * 1000
        wait_for(
            lambda: (
                sum(hosted_on([w["address"] for w in online_workers(manager)], pid).values())
                == 1000
            ),
            30,
            what="every agent hosted again",
        )
        assert api.get(f"/api/populations/{pid}").json()["status"] == "deployed"


def test_a_population_that_lost_agents_is_degraded_until_repaired_and_plays_only_if_asked(
    manager_factory,
):
    manager = manager_factory(extra_env=dict(FAST)).start()
    start_node(manager, "node-a", POPULACE_CAPACITY="600")
    pid = deploy(manager, size=1000)
    workers = online_workers(manager)
    with manager.api() as api:
        # Removed by an operator: the process exits, and only 100 of its 500 agents fit on
        # the other worker.
        assert api.delete(f"/api/workers/{workers[0]['id']}").status_code == 204
        population = wait_for(
            lambda: (p := api.get(f"/api/populations/{pid}").json())["hosted"] == 600 and p,
            30,
            what="the 100 agents that fit re-placed",
        )
        assert (population["status"], population["size"]) == ("degraded", 1000)

        refused = api.post("/api/simulations", json=level_k(pid, rounds=2))
        assert refused.status_code == 409, refused.text
        assert "degraded" in refused.json()["detail"] and "600 of 1000" in refused.json()["detail"]

        partial = start(api, level_k(pid, rounds=2, allow_partial=True))["id"]
        done = finish(api, partial)
        assert done["status"] == "completed" and done["lost_agents"] == 800, done
        assert [r["n_lost"] for r in rounds_of(api, partial)] == [400, 400]
        rows = export(api, partial, "csv").decode().splitlines()
        assert len(rows) == 1 + 2 * 1000
        assert sum(row.split(",")[3] == "lost" for row in rows[1:]) == 800

        # Room comes back: the keeper re-places the rest by itself, and the repair route
        # answers with the whole population.
        start_node(manager, "node-b", POPULACE_CAPACITY="600")
        repaired = api.post(f"/api/populations/{pid}/repair")
        assert repaired.status_code == 200, repaired.text
        assert (repaired.json()["status"], repaired.json()["hosted"]) == ("deployed", 1000)
        whole = start(api, level_k(pid, rounds=1))["id"]
        assert finish(api, whole)["status"] == "completed"
        assert rounds_of(api, whole)[0]["n_lost"] == 0


def test_pause_and_resume_keep_every_round_and_a_paused_run_survives_a_manager_restart(
    manager_factory,
):
    manager = manager_factory(extra_env=dict(FAST)).start()
    start_node(manager, "node-a")
    pid = deploy(manager, size=500)
    config = {
        "population_id": pid,
        "rounds": 4,
        "policy": {"kind": "synthetic", "latency_s": 0.3},
        "seed": 3,
    }
    with manager.api() as api:
        sid = start(api, config)["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round kept",
        )
        paused = api.post(f"/api/simulations/{sid}/pause")
        assert paused.status_code == 200, paused.text
        assert paused.json()["status"] == "paused"
        assert paused.json()["pause_reason"] == "paused by an operator"
        assert api.post(f"/api/simulations/{sid}/pause").status_code == 409
        # A paused run holds its population.
        assert api.post("/api/simulations", json=config).status_code == 409
        kept = paused.json()["current_round"]
        assert [r["round"] for r in rounds_of(api, sid)] == list(range(1, kept + 1))
    manager.stop(signal.SIGKILL)
    manager.start()
    with manager.api() as api:
        assert api.get(f"/api/simulations/{sid}").json()["status"] == "paused"
        resumed = api.post(f"/api/simulations/{sid}/resume")
        assert resumed.status_code == 200, resumed.text
        done = finish(api, sid)
        assert done["status"] == "completed", done
        assert [r["round"] for r in rounds_of(api, sid)] == [1, 2, 3, 4]
        assert api.post(f"/api/simulations/{sid}/resume").status_code == 409
        undisturbed = start(api, config)["id"]
        assert finish(api, undisturbed)["status"] == "completed"
        assert export(api, undisturbed, "csv") == export(api, sid, "csv")


def test_llm_agents_restored_mid_run_remember_their_choices_and_answer_the_same(
    manager_factory,
):
    """The fake server's answer is a function of the whole prompt, whose {history} shows each
    agent its own past choices: a restored agent answers the same only if its memory came back
    from the store exactly."""
    from bench.openai_server import OpenAIServer, stable_fraction

    def greedy(request) -> str:
        # Temperature 0: the answer is the prompt's alone, as greedy decoding's is. (With the
        # seed in it, agents sharing a prompt would get the answer of whichever asked first,
        # which depends on the placement the kill leaves.)
        return str(int(stable_fraction(request.prompt) * 101))

    manager = manager_factory(extra_env=dict(FAST)).start()
    start_node(manager, "node-a")
    pid = deploy(manager, size=300)
    server = OpenAIServer(model="test-model", latency_s=0.02, answer=greedy)
    with server, manager.api() as api:
        config = {
            "population_id": pid,
            "rounds": 5,
            "rule": {"preset": "2/3"},
            "prompt": {"system": "roleplay", "user": "basic"},
            "policy": {
                "kind": "llm",
                "endpoints": [
                    {"base_url": server.base_url, "model": "test-model", "max_concurrency": 8}
                ],
                "temperature": 0,
            },
            "deadlines": {"agent_s": 10},
            "seed": 9,
        }
        sid = start(api, config)["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 2,
            60,
            what="two rounds kept",
        )
        victim = online_workers(manager)[0]
        os.kill(victim["pid"], signal.SIGKILL)
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        prompts = [str(body) for body in server.bodies]
        assert any("you chose" in p for p in prompts), "prompts show the agents' own history"
        disturbed = export(api, sid, "csv")
        again = start(api, config)["id"]
        rerun = finish(api, again, timeout=120)
        assert rerun["status"] == "completed", rerun
        assert export(api, again, "csv") == disturbed


def test_an_llm_run_launched_just_after_a_worker_died_waits_for_it_instead_of_failing(
    manager_factory,
):
    """The dead process is still listed online (its TTL has not passed) when the run probes
    the LLM endpoints from every hosting worker: that is a worker fault, which round 1 recovers
    from, not a reason to fail the run."""
    from bench.openai_server import OpenAIServer

    manager = manager_factory(extra_env=dict(FAST)).start()
    start_node(manager, "node-a")
    pid = deploy(manager, size=100)
    with OpenAIServer(model="test-model") as server, manager.api() as api:
        victim = online_workers(manager)[0]
        os.kill(victim["pid"], signal.SIGKILL)
        config = {
            "population_id": pid,
            "rounds": 2,
            "policy": {
                "kind": "llm",
                "endpoints": [{"base_url": server.base_url, "model": "test-model"}],
                "temperature": 0,
            },
            "seed": 4,
        }
        done = finish(api, start(api, config)["id"], timeout=120)
        assert done["status"] == "completed", done
        assert [r["n_valid"] + r["n_invalid"] for r in rounds_of(api, done["id"])] == [100, 100]


def test_a_node_frozen_mid_round_is_left_behind_and_its_stale_agents_are_reaped_on_return(
    manager_factory,
):
    """Alive but silent (like a cut link): its round stream never fails by itself, so the round
    gives up on it once the registry says it is offline, and its agents are re-placed."""
    manager = manager_factory(extra_env=dict(FAST)).start()
    frozen = start_node(manager, "node-a", procs=1)
    start_node(manager, "node-b", procs=1)
    pid = deploy(manager, size=1000)
    a = online_workers(manager, "node-a")[0]
    b = online_workers(manager, "node-b")[0]
    # Rounds of 0.5 s: the freeze lands with rounds left to play, which need node A's agents.
    config = {
        "population_id": pid,
        "rounds": 6,
        "policy": {"kind": "synthetic", "latency_s": 0.5},
        "seed": 1,
    }
    with manager.api() as api:
        sid = start(api, config)["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round kept",
        )
        kill_node(frozen, signal.SIGSTOP)
        assert api.get(f"/api/simulations/{sid}").json()["current_round"] < 6
        try:
            done = finish(api, sid, timeout=90)
            assert done["status"] == "completed", done
            assert all(
                r["n_valid"] + r["n_invalid"] + r["n_late"] == 1000 for r in rounds_of(api, sid)
            )
            assert api.get(f"/api/workers/{a['id']}").json()["state"] == "offline"
            assert api.get(f"/api/populations/{pid}").json()["agents_per_worker"] == {
                str(b["id"]): 1000
            }
        finally:
            kill_node(frozen, signal.SIGCONT)
        wait_for(
            lambda: api.get(f"/api/workers/{a['id']}").json()["state"] == "online",
            20,
            what="node A back",
        )
        wait_for(lambda: hosted_on([a["address"]], pid)[a["address"]] == 0, 30, what="reaped")
        assert hosted_on([b["address"]], pid)[b["address"]] == 1000


def _set_population_status(database_url: str, population_id: int, status: str) -> None:
    import asyncpg

    async def update() -> None:
        conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await conn.execute(
                "UPDATE populations SET status = $1 WHERE id = $2", status, population_id
            )
        finally:
            await conn.close()

    asyncio.run(update())


def _rows(api, population_id: int) -> int:
    return len(api.get("/api/agents", params={"population_id": population_id}).json()["items"])


def test_a_deploy_cut_by_a_manager_sigkill_is_undone_at_start_up(pg_manager):
    manager = pg_manager
    start_node(manager, "node-a")
    with manager.api() as api:
        resp = api.post(
            "/api/populations",
            content=population_yaml("education", name="cut", size=200_000),
            headers={"Content-Type": "application/yaml"},
        )
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(lambda: _rows(api, pid) > 0, 60, every=0.02, what="rows being written")
        assert api.get(f"/api/populations/{pid}").json()["status"] == "deploying"
    manager.stop(signal.SIGKILL)
    manager.start()
    with manager.api() as api:
        failed = wait_for(
            lambda: (p := api.get(f"/api/populations/{pid}").json())["status"] == "failed" and p,
            60,
            what="the deploy undone",
        )
        assert "undone at start-up" in failed["error"], failed
        assert _rows(api, pid) == 0
        addresses = [w["address"] for w in online_workers(manager)]
        wait_for(lambda: sum(hosted_on(addresses, pid).values()) == 0, 30, what="workers emptied")
        # Nothing holds the cluster's room: a new population deploys in full.
        assert api.get(f"/api/populations/{deploy(manager, size=1000)}").json()["hosted"] == 1000


def test_a_delete_cut_by_a_manager_sigkill_is_finished_at_start_up(pg_manager):
    manager = pg_manager
    start_node(manager, "node-a")
    pid = deploy(manager, size=2000)
    manager.stop(signal.SIGKILL)
    _set_population_status(manager.database_url, pid, "deleting")  # where the crash left it
    manager.start()
    with manager.api() as api:
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            60,
            what="the delete finished",
        )
        assert _rows(api, pid) == 0
        addresses = [w["address"] for w in online_workers(manager)]
        wait_for(lambda: sum(hosted_on(addresses, pid).values()) == 0, 30, what="workers emptied")


def test_a_round_that_cannot_get_its_agents_back_pauses_and_resumes_partial_when_asked(
    manager_factory,
):
    manager = manager_factory(extra_env={**FAST, "POPULACE_ROUND_RECOVERY_S": "3"}).start()
    start_node(manager, "node-a", POPULACE_CAPACITY="600")
    pid = deploy(manager, size=1000)
    victim = online_workers(manager)[0]
    config = {
        "population_id": pid,
        "rounds": 6,
        "policy": {"kind": "synthetic", "latency_s": 0.5},
        "seed": 4,
    }
    with manager.api() as api:
        sid = start(api, config)["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round kept",
        )
        # Removed for good (the process exits 0 and is not restarted); only 100 of its 500
        # agents fit on the other worker.
        assert api.delete(f"/api/workers/{victim['id']}").status_code == 204
        paused = wait_for(
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] == "paused" and s,
            60,
            what="the run paused",
        )
        assert "400 of 1000 agents are not hosted" in paused["pause_reason"], paused
        kept = paused["current_round"]
        assert all(r["n_valid"] == 1000 for r in rounds_of(api, sid)), "no partial round kept"
        assert api.get(f"/api/populations/{pid}").json()["status"] == "degraded"

        resumed = api.post(f"/api/simulations/{sid}/resume", json={"allow_partial": True})
        assert resumed.status_code == 200, resumed.text
        done = finish(api, sid)
        assert done["status"] == "completed", done
        assert done["lost_agents"] == 400 * (6 - kept), done
        assert api.get(f"/api/simulations/{sid}").json()["config"]["allow_partial"] is True
        played = rounds_of(api, sid)
        assert [r["n_lost"] for r in played] == [0] * kept + [400] * (6 - kept)


def test_agents_unplaced_while_their_worker_still_holds_them_are_placed_there_again(
    pg_manager, postgres_url
):
    # A worker that stalled past the TTL is marked offline and its agents unplaced in the
    # store, yet its process still holds them when it comes back and is the only room left:
    # re-placing them there must not be refused for agents it already hosts.
    import asyncpg

    start_node(pg_manager, "node-a", procs=1)
    pid = deploy(pg_manager, size=400)
    (worker,) = online_workers(pg_manager)

    async def unplace() -> None:
        conn = await asyncpg.connect(postgres_url.replace("+asyncpg", ""))
        try:
            await conn.execute(
                "UPDATE placements SET worker_id = NULL WHERE population_id = $1", pid
            )
        finally:
            await conn.close()

    asyncio.run(unplace())
    with pg_manager.api() as api:
        repaired = api.post(f"/api/populations/{pid}/repair")
        assert repaired.status_code == 200, repaired.text
        assert (repaired.json()["status"], repaired.json()["hosted"]) == ("deployed", 400)
        assert hosted_on([worker["address"]], pid) == {worker["address"]: 400}
        run = start(api, level_k(pid, rounds=1))["id"]
        assert finish(api, run)["status"] == "completed"
        assert rounds_of(api, run)[0]["n_lost"] == 0
