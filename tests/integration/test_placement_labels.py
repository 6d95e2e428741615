"""Placement across real worker nodes: node labels (`populace worker --labels`), a population's
node selector and spread, and re-placement that keeps to the selector when a labelled node dies.
"""

from __future__ import annotations

import os
import signal

from tests.support import wait_for
from tests.support_faults import FAST, hosted_on, online_workers
from tests.support_populations import YAML, deploy_population, population_yaml

SELECTED = {"node_selector": {"zone": "a"}, "spread": "even"}


def _node(manager, name: str, labels: str, procs: int = 2):
    proc = manager.start_workers(
        procs=procs,
        node=name,
        env={"POPULACE_LABELS": labels, "POPULACE_CAPACITY": "2000"},
        start_new_session=True,
    )
    wait_for(lambda: len(online_workers(manager, name)) == procs, 30, what=f"node {name} online")
    return proc


def _population(api, pid: int) -> dict:
    return api.get(f"/api/populations/{pid}").json()


def test_a_node_selector_places_agents_on_labelled_nodes_only_and_keeps_them_there(
    manager_factory,
):
    manager = manager_factory(extra_env=dict(FAST)).start()
    node_a = _node(manager, "node-a", "zone=a,gpu=a100")
    _node(manager, "node-b", "zone=b")
    workers = {w["id"]: w for w in online_workers(manager)}
    assert {w["node"]: w["labels"] for w in workers.values()} == {
        "node-a": {"gpu": "a100", "zone": "a"},
        "node-b": {"zone": "b"},
    }
    a_addresses = [w["address"] for w in workers.values() if w["node"] == "node-a"]
    b_addresses = [w["address"] for w in workers.values() if w["node"] == "node-b"]

    with manager.api() as api:
        # More than node a can hold: refused up front, naming the selector; nothing is stored.
        before = api.get("/api/populations").json()["items"]
        big = population_yaml("education", name="big", size=4001, placement=SELECTED)
        resp = api.post("/api/populations", content=big, headers=YAML)
        assert resp.status_code == 409, resp.text
        assert "4000 agents fit on 2 online worker(s) labelled zone=a" in resp.json()["detail"]
        assert api.get("/api/populations").json()["items"] == before

        near = population_yaml("education", name="near", size=1001, placement=SELECTED)
        pid = deploy_population(api, near)["id"]
        # Even spread: each of node a's two processes holds half; node b holds none.
        assert sorted(hosted_on(a_addresses, pid).values()) == [500, 501]
        assert sum(hosted_on(b_addresses, pid).values()) == 0

        # Node a dies: its agents have nowhere to go that the selector admits, so they stay
        # unplaced (degraded) instead of moving to node b.
        os.killpg(node_a.pid, signal.SIGKILL)
        wait_for(
            lambda: _population(api, pid)["status"] == "degraded", 60, what="degraded population"
        )
        assert _population(api, pid)["hosted"] == 0
        assert sum(hosted_on(b_addresses, pid).values()) == 0

        # A new node a comes up: the keeper re-places the agents there.
        _node(manager, "node-a2", "zone=a")
        wait_for(lambda: _population(api, pid)["status"] == "deployed", 60, what="repaired")
        a2 = [w["address"] for w in online_workers(manager, "node-a2")]
        assert sum(hosted_on(a2, pid).values()) == 1001
        assert sum(hosted_on(b_addresses, pid).values()) == 0


def test_bad_labels_are_refused_with_the_field_and_reason(manager_factory):
    manager = manager_factory().start()
    with manager.api() as api:
        bad = population_yaml(
            "education", name="x", size=10, placement={"node_selector": {"zone a": "b"}}
        )
        resp = api.post("/api/populations", content=bad, headers=YAML)
        assert resp.status_code == 422, resp.text
        assert "node_selector" in resp.text and "label name" in resp.text
    # A worker started with malformed labels says so and exits non-zero, before registering.
    proc = manager.start_workers(env={"POPULACE_LABELS": "zone"})
    assert proc.wait(60) != 0
    assert "labels" in open(proc.log_path).read()  # type: ignore[attr-defined]
    assert manager.workers() == []
