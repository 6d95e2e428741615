"""A policy another package adds to a simulation it does not own (populace.policies): the
example examples/plugins/contrarian adds `contrarian` to the built-in El Farol. It is offered
with El Farol's own policies, plays on real worker processes, and a launch is refused up front,
naming the policy and the worker, where a host of the population does not have it.

A node "without the policy" is a real worker process whose Python path starts with a package of
the same name and version that registers no entry point (as a stale install on that node would
be)."""

from __future__ import annotations

import os
from pathlib import Path

from populace.registry import installed
from tests.support import wait_for
from tests.support_faults import online_workers
from tests.support_populations import deploy_population, population_yaml
from tests.support_simulations import finish, rounds_of

SOURCE_ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "populace-contrarian"


def _without_entry_points(root: Path, distribution: str, version: str) -> Path:
    """A directory that, first on a worker's Python path, hides the entry points of this
    distribution (same name and version, none registered)."""
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text("")
    return root


def _node(manager, name: str, zone: str, procs: int, python_path: Path | None = None) -> None:
    env = {"POPULACE_LABELS": f"zone={zone}"}
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_path), str(SOURCE_ROOT)])
    manager.start_workers(procs=procs, node=name, env=env)
    wait_for(lambda: len(online_workers(manager, name)) == procs, 60, what=f"node {name} online")


def _near(name: str, zone: str, size: int = 40) -> str:
    """tests/configs/education.yaml placed on the workers labelled zone=`zone`."""
    return population_yaml(
        "education", name=name, size=size, placement={"node_selector": {"zone": zone}}
    )


def test_an_added_policy_plays_where_installed_and_is_refused_where_not(manager, tmp_path):
    el_farol = installed().get("el_farol")
    distribution, version = el_farol.added["contrarian"]
    assert distribution == DISTRIBUTION
    _node(manager, "node-with", "with", procs=2)
    hidden = _without_entry_points(tmp_path / "hidden", DISTRIBUTION, version)
    _node(manager, "node-without", "without", procs=1, python_path=hidden)
    reported = {w["node"]: w["plugins"] for w in online_workers(manager)}
    assert reported["node-with"]["el_farol:contrarian"] == version
    assert "el_farol:contrarian" not in reported["node-without"]

    config = {
        "plugin": {"name": "el_farol", "params": {"group_size": 10}},
        "policy": {"kind": "contrarian", "params": {"first": 0.5, "crowded_above": 0.6}},
        "rounds": 3,
        "seed": 11,
    }
    with manager.api() as api:
        listed = api.get("/api/plugins/el_farol").json()["policies"]
        added = [p for p in listed if p["name"] == "contrarian"]
        assert added and added[0]["added_by"] == DISTRIBUTION, listed

        pid = deploy_population(api, _near("without", "without", size=40))["id"]
        worker = online_workers(manager, "node-without")[0]
        before = api.get("/api/simulations").json()["items"]
        resp = api.post("/api/simulations", json={"population_id": pid, **config})
        assert resp.status_code == 409, resp.text
        detail = resp.json()["detail"]
        assert f"policy 'contrarian' of plugin 'el_farol' ({DISTRIBUTION} {version})" in detail
        assert f"worker {worker['id']} (node-without, {worker['address']}) has no such policy" in (
            detail
        )
        assert api.get("/api/simulations").json()["items"] == before  # nothing stored

        # A policy El Farol does not have is a 422 listing the ones it has, the added included.
        wrong = {**config, "policy": {"kind": "contrarion"}}
        resp = api.post("/api/simulations", json={"population_id": pid, **wrong})
        assert resp.status_code == 422, resp.text
        assert "contrarian" in resp.text and "policy" in resp.text

        pid = deploy_population(api, _near("with", "with", size=200))["id"]
        resp = api.post("/api/simulations", json={"population_id": pid, **config})
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        assert finish(api, sid)["status"] == "completed"
        played = rounds_of(api, sid)
    ratios = [r["metrics"]["go_ratio"] for r in played]
    assert [r["n_valid"] for r in played] == [200, 200, 200]
    # Round 1 by chance; then a group that was crowded goes whole (and stays crowded), one that
    # was not stays home whole: from round 2 on every group is all-go or all-stay, unchanged.
    assert 0 < ratios[0] < 1
    assert ratios[1] == ratios[2]
    assert ratios[1] * 20 == round(ratios[1] * 20)  # 20 groups of 10, each all in or all out
