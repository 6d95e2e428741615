"""Workers report their simulation plugins at registration, and a launch is refused up front,
naming the worker and the versions, where a host of the population lacks the run's plugin or has
another version of it (issue 27: versions). The run record keeps the plugin that played.

A node "with another version" is a real worker process whose Python path starts with a package
of the same name and another version (as a stale install on that node would be); a node
"without the plugin" has one that registers none."""

from __future__ import annotations

import os
from pathlib import Path

from populace.registry import installed
from tests.support import wait_for
from tests.support_faults import online_workers
from tests.support_populations import deploy_population, population_yaml
from tests.support_simulations import finish, start

SOURCE_ROOT = Path(__file__).resolve().parents[2]


def _shadow_install(root: Path, version: str, entry_points: str) -> Path:
    """A directory that, first on a worker's Python path, makes it see populace `version`
    registering these entry points (the package itself is still the real one)."""
    info = root / f"populace-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: populace\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


def _node(manager, name: str, zone: str, python_path: Path | None = None) -> None:
    env = {"POPULACE_LABELS": f"zone={zone}"}
    if python_path is not None:
        # Before the source tree too (whose populace.egg-info the worker would find first).
        env["PYTHONPATH"] = os.pathsep.join([str(python_path), str(SOURCE_ROOT)])
    manager.start_workers(procs=1, node=name, env=env)
    wait_for(lambda: len(online_workers(manager, name)) == 1, 60, what=f"node {name} online")


def _near(name: str, zone: str, size: int = 40) -> str:
    """tests/configs/education.yaml placed on the workers labelled zone=`zone`."""
    return population_yaml(
        "education", name=name, size=size, placement={"node_selector": {"zone": zone}}
    )


def test_a_launch_is_refused_where_a_host_lacks_the_plugin_or_has_another_version(
    manager, tmp_path
):
    guess = installed().get("guess")
    stale = _shadow_install(
        tmp_path / "stale",
        "9.9.9",
        f"[populace.simulations]\nguess = {guess.simulation.__module__}:GuessingGame\n",
    )
    bare = _shadow_install(tmp_path / "bare", guess.version, "")
    _node(manager, "node-good", "good")
    _node(manager, "node-stale", "stale", stale)
    _node(manager, "node-bare", "bare", bare)
    # Plugins from other distributions (an installed example, say) are not shadowed.
    # (A policy added to a plugin of populace's, el_farol:contrarian say, goes with the plugin.)
    elsewhere = {
        key: version
        for key, version in installed().versions().items()
        if installed().get(key.split(":")[0]).distribution != guess.distribution
    }
    reported = {w["node"]: w["plugins"] for w in online_workers(manager)}
    assert reported == {
        "node-good": installed().versions(),
        "node-stale": {"guess": "9.9.9", **elsewhere},
        "node-bare": elsewhere,
    }

    config = {"rounds": 2, "policy": {"kind": "synthetic"}, "seed": 5}
    with manager.api() as api:
        for zone, what in (("stale", "has version 9.9.9"), ("bare", "has no such plugin")):
            pid = deploy_population(api, _near(f"on-{zone}", zone))["id"]
            worker = online_workers(manager, f"node-{zone}")[0]
            before = api.get("/api/simulations").json()["items"]
            resp = api.post("/api/simulations", json={"population_id": pid, **config})
            assert resp.status_code == 409, resp.text
            detail = resp.json()["detail"]
            assert f"plugin 'guess' {guess.version} (the manager's)" in detail
            assert f"worker {worker['id']} (node-{zone}, {worker['address']}) {what}" in detail
            assert api.get("/api/simulations").json()["items"] == before  # nothing stored

        pid = deploy_population(api, _near("on-good", "good"))["id"]
        run = start(api, {"population_id": pid, **config})
        assert finish(api, run["id"])["status"] == "completed"
        record = api.get(f"/api/simulations/{run['id']}").json()["record"]
    assert record["plugin"] == {"name": "guess", "version": guess.version}
