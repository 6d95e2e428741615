"""A worker process per agent (`placement.dedicated_process`), on real worker processes over real
gRPC: each agent alone on a process that hosts nothing else, refused up front when too few
processes are free, a SIGKILLed process back with its agent, an agent lost for good re-placed
only onto a free process, and rounds that compute what they compute on shared processes."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess

from tests.support import populace_cmd, wait_for
from tests.support_faults import FAST, hosted_on, online_workers
from tests.support_populations import YAML, deploy_population, population_yaml
from tests.support_simulations import export, finish, level_k, rounds_of, start

DEDICATED = {"dedicated_process": True}
SHARED = None


def _education(name: str, size: int, placement: dict | None) -> str:
    """tests/configs/education.yaml as `name` with `size` agents and this placement."""
    if placement is None:
        return population_yaml("education", name=name, size=size)
    return population_yaml("education", name=name, size=size, placement=placement)


def _node(manager, name: str, procs: int) -> subprocess.Popen:
    # Its own process group, so the whole node can be killed at once.
    proc = manager.start_workers(procs=procs, node=name, start_new_session=True)
    wait_for(lambda: len(online_workers(manager, name)) == procs, 60, what=f"node {name} online")
    return proc


def _population(api, pid: int) -> dict:
    return api.get(f"/api/populations/{pid}").json()


def _hosts(api, pid: int) -> dict[int, int]:
    """{worker id: agents of the population the store places there}."""
    return {int(w): n for w, n in _population(api, pid)["agents_per_worker"].items()}


def _listed(api) -> list[dict]:
    return api.get("/api/populations").json()["items"]


def _delete(api, pid: int) -> None:
    assert api.delete(f"/api/populations/{pid}").status_code == 202
    wait_for(lambda: _population(api, pid)["status"] == "deleted", 60, what="deleted")


def _decisions_by_index(csv_bytes: bytes) -> list[tuple[str, int, str, str]]:
    """(round, agent number in its population, value, status): comparable across populations."""
    rows = csv.DictReader(io.StringIO(csv_bytes.decode()))
    return sorted(
        (r["round"], int(r["agent_id"]) & 0xFFFFFFFF, r["value"], r["status"]) for r in rows
    )


STATS = ("round", "n_valid", "n_invalid", "mean", "median", "std", "min", "max", "target")


def test_each_agent_gets_a_process_of_its_own_shared_by_no_one_and_survives_a_sigkill(
    manager_factory, database_url
):
    manager = manager_factory(database_url=database_url).start()
    _node(manager, "node-a", procs=3)
    workers = {w["id"]: w for w in online_workers(manager)}
    with manager.api() as api:
        # Too few processes: refused before anything is stored, naming the field and numbers.
        before = _listed(api)
        resp = api.post("/api/populations", content=_education("big", 4, DEDICATED), headers=YAML)
        assert resp.status_code == 409, resp.text
        detail = resp.json()["detail"]
        assert detail.startswith("placement.dedicated_process: 4 agents need 4 free worker")
        assert "3 of the 3 online worker process(es) are free" in detail
        assert _listed(api) == before
        # Bad input: 422 naming the field, nothing stored either.
        for bad, field in (
            (_education("huge", 5000, DEDICATED), "dedicated_process"),
            (
                _education("x", 2, {"dedicated_process": "sure"}),
                "dedicated_process",
            ),
        ):
            resp = api.post("/api/populations", content=bad, headers=YAML)
            assert resp.status_code == 422, resp.text
            assert any(e["loc"][-1] == field for e in resp.json()["detail"]), resp.text
        assert _listed(api) == before

        dedicated = deploy_population(api, _education("heavy", 2, DEDICATED))["id"]
        hosts = _hosts(api, dedicated)
        assert sorted(hosts.values()) == [1, 1] and set(hosts) <= set(workers)
        assert _population(api, dedicated)["dedicated_process"] is True
        assert [p["dedicated_process"] for p in _listed(api) if p["id"] == dedicated] == [True]
        addresses = {wid: workers[wid]["address"] for wid in hosts}
        assert hosted_on(list(addresses.values()), dedicated) == dict.fromkeys(
            addresses.values(), 1
        )

        # A shared population goes around the held processes, onto the free one only.
        shared = deploy_population(api, _education("crowd", 2, SHARED))["id"]
        (third,) = set(workers) - set(hosts)
        assert _hosts(api, shared) == {third: 2}
        assert _population(api, shared)["dedicated_process"] is False
        assert set(hosted_on(list(addresses.values()), shared).values()) == {0}
        # Now no process is free: another dedicated population is refused, from the CLI too.
        resp = api.post("/api/populations", content=_education("more", 1, DEDICATED), headers=YAML)
        assert resp.status_code == 409, resp.text
        assert "0 of the 3 online worker process(es) are free" in resp.json()["detail"]
        config = manager.tmp / "more.yaml"
        config.write_text(_education("more", 1, DEDICATED))
        refused = subprocess.run(
            populace_cmd("population", "create", str(config), "--manager", manager.url),
            env=manager.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0
        (line,) = refused.stderr.strip().splitlines()
        assert "placement.dedicated_process: 1 agents need 1 free worker processes" in line

        # Rounds are rounds: a process hosting one agent is a cohort of one. Deterministic
        # level-k (no noise) on the same sample gives each agent the same decisions as shared.
        plain = {"policy": {**level_k(0)["policy"], "noise_std": 0.0}, "seed": 3, "rounds": 4}
        alone = finish(api, start(api, level_k(dedicated, **plain))["id"])
        together = finish(api, start(api, level_k(shared, **plain))["id"])
        assert alone["status"] == together["status"] == "completed"
        assert [{k: r[k] for k in STATS} for r in rounds_of(api, alone["id"])] == [
            {k: r[k] for k in STATS} for r in rounds_of(api, together["id"])
        ]
        assert _decisions_by_index(export(api, alone["id"], "csv")) == _decisions_by_index(
            export(api, together["id"], "csv")
        )

        # A SIGKILLed dedicated process is restarted in its slot and gets its agent back.
        noisy = level_k(dedicated, rounds=4, seed=21)
        first = finish(api, start(api, noisy)["id"])
        assert first["status"] == "completed"
        victim = next(iter(hosts))
        old_pid = workers[victim]["pid"]
        os.kill(old_pid, signal.SIGKILL)

        def back() -> dict | None:
            row = next((w for w in online_workers(manager) if w["id"] == victim), None)
            return row if row is not None and row["pid"] != old_pid else None

        restarted = wait_for(back, 60, what="the killed process back in its slot")
        wait_for(
            lambda: hosted_on([restarted["address"]], dedicated)[restarted["address"]] == 1,
            60,
            what="its agent restored",
        )
        wait_for(lambda: _population(api, dedicated)["status"] == "deployed", 60, what="whole")
        assert _hosts(api, dedicated) == hosts
        again = finish(api, start(api, noisy)["id"])
        assert again["status"] == "completed" and again["lost_agents"] == 0
        assert export(api, again["id"], "csv") == export(api, first["id"], "csv")

        # Cleanup frees the processes: the shared population's process takes a dedicated
        # agent once it is gone, and the dedicated ones take shared agents once they are.
        _delete(api, shared)
        more = deploy_population(api, _education("more", 1, DEDICATED))["id"]
        assert _hosts(api, more) == {third: 1}
        _delete(api, dedicated)
        crowd = deploy_population(api, _education("crowd-2", 20, SHARED))["id"]
        assert set(_hosts(api, crowd)) == set(hosts)


def test_an_agent_lost_for_good_moves_only_to_a_free_process_or_waits_degraded(manager_factory):
    manager = manager_factory(extra_env=dict(FAST)).start()
    node_a = _node(manager, "node-a", procs=1)
    _node(manager, "node-b", procs=2)
    node_b = {w["id"]: w["address"] for w in online_workers(manager, "node-b")}
    with manager.api() as api:
        dedicated = deploy_population(api, _education("heavy", 1, DEDICATED))["id"]
        (on_a,) = online_workers(manager, "node-a")
        assert _hosts(api, dedicated) == {on_a["id"]: 1}
        shared = deploy_population(api, _education("crowd", 10, SHARED))["id"]
        assert set(_hosts(api, shared)) == set(node_b)

        # Node a dies for good: node b's processes host shared agents, so the agent waits
        # unplaced and the population says why, instead of moving onto a shared process.
        os.killpg(node_a.pid, signal.SIGKILL)
        degraded = wait_for(
            lambda: (p := _population(api, dedicated))["status"] == "degraded" and p["error"] and p,
            60,
            what="degraded with a reason",
        )
        assert degraded["hosted"] == 0
        assert degraded["error"].startswith("placement.dedicated_process: 1 agent(s) wait")
        assert set(hosted_on(list(node_b.values()), dedicated).values()) == {0}
        assert sum(hosted_on(list(node_b.values()), shared).values()) == 10

        # A process comes free on a new node: the agent goes there, and the reason goes away.
        _node(manager, "node-c", procs=1)
        (on_c,) = online_workers(manager, "node-c")
        whole = wait_for(
            lambda: (p := _population(api, dedicated))["status"] == "deployed" and p,
            60,
            what="re-placed",
        )
        assert whole["error"] is None and whole["hosted"] == 1
        assert _hosts(api, dedicated) == {on_c["id"]: 1}
        assert hosted_on([on_c["address"]], dedicated) == {on_c["address"]: 1}
