"""The Deffuant model end to end (bounded_confidence, model: deffuant): agents paired each round
by the runtime, over real worker processes and the peer plane. On a small-world graph the pairs
are a random matching along its edges that the processes find together (each knows only its
own agents' edges): the run over two processes, and the same population on one process, give
every agent exactly the reference driver's value in every round. On a complete graph (no edges
stored) agents meet in random pairs of the whole population and reach consensus; a plugin that
needs edges is still refused there (409). A node SIGKILLed mid-round leaves the export of an
undisturbed run, pairs included (its agents' top partners are fetched again)."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest

from populace.builtins.bounded_confidence import BoundedConfidence
from tests.support import install_plugin_package, running_cluster, wait_for
from tests.support_network import CompleteGraph, play
from tests.support_network_runs import (
    assert_same_run,
    deploy_network,
    exported_values,
    online_count,
    run_to_the_end,
)
from tests.support_simulations import finish, rounds_of, start
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One manager with two worker processes for the module's tests."""
    tmp = tmp_path_factory.mktemp("deffuant")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def hosts(api, population_id: int) -> set[int]:
    agents = api.get("/api/agents", params={"population_id": population_id, "limit": 1000})
    return {a["worker_id"] for a in agents.json()["items"]}


def on_one_process(api, size: int, spec: dict) -> dict:
    """The same population config deployed with the second worker drained: all on one."""
    workers = sorted(w["id"] for w in api.get("/api/workers").json()["items"])
    assert api.post(f"/api/workers/{workers[1]}/drain").status_code == 200
    try:
        population = deploy_network(api, size, spec)
    finally:
        assert api.post(f"/api/workers/{workers[1]}/undrain").status_code == 200
    wait_for(
        lambda: all(w["state"] == "online" for w in api.get("/api/workers").json()["items"]),
        30,
        what="undrained",
    )
    return population


def test_deffuant_on_a_small_world_plays_the_reference_on_two_processes_and_on_one(cluster):
    size, seed, rounds = 600, 5, 12
    spec = {"kind": "watts_strogatz", "k": 6, "p": 0.2}
    params = {"model": "deffuant", "epsilon": 0.4, "mu": 0.3}
    sim = BoundedConfidence()
    with cluster.api() as api:
        spread = deploy_network(api, size, spec)
        assert len(hosts(api, spread["id"])) == 2
        _, played, got = run_to_the_end(api, spread, "bounded_confidence", params, rounds, seed)
        alone = on_one_process(api, size, spec)
        assert len(hosts(api, alone["id"])) == 1
        _, played_alone, got_alone = run_to_the_end(
            api, alone, "bounded_confidence", params, rounds, seed
        )
    graph = generate(parse_graph_spec(spec), size, spread["seed"])
    want = play(sim, sim.params.model_validate(params), None, graph, seed, rounds)
    assert_same_run(got, want.values)
    assert_same_run(got_alone, want.values)
    assert [r["metrics"] for r in played] == want.metrics
    assert [r["metrics"] for r in played_alone] == want.metrics
    # Pairs met and moved; the mean opinion is kept.
    moved = [
        int(np.count_nonzero(a != b)) for a, b in zip(want.values, want.values[1:], strict=False)
    ]
    assert min(moved) > size // 10, moved
    means = [m["mean"] for m in want.metrics]
    assert max(means) - min(means) < 1e-12
    # Values and top partners crossed between the two processes; none on one process.
    assert all(r["network_bytes"] > 0 for r in played)
    assert all(r["network_bytes"] == 0 for r in played_alone)


def test_deffuant_on_a_complete_graph_reaches_consensus_and_sir_is_still_refused(cluster):
    size, seed = 400, 8
    params = {"model": "deffuant", "epsilon": 0.5}
    sim = BoundedConfidence()
    with cluster.api() as api:
        population = deploy_network(api, size, {"kind": "complete"})
        assert len(hosts(api, population["id"])) == 2
        done, played, got = run_to_the_end(api, population, "bounded_confidence", params, 200, seed)
        for plugin, given in (("sir", {}), ("bounded_confidence", {"epsilon": 0.5})):
            resp = api.post(
                "/api/simulations",
                json={
                    "population_id": population["id"],
                    "rounds": 3,
                    "plugin": {"name": plugin, "params": given},
                },
            )
            assert resp.status_code == 409, resp.text
            assert "complete graph" in resp.json()["detail"], resp.text
    assert done["stop_reason"].startswith("opinions are at rest"), done
    want = play(sim, sim.params.model_validate(params), None, CompleteGraph(size), seed, 200)
    assert_same_run(got, want.values)
    last = played[-1]["metrics"]
    assert last["clusters"] == 1 and last["spread"] < 1e-5 and last["unsettled"] == 0


# Deffuant that dawdles in one round, so a worker can be killed while it plays it.
DAWDLING = """
import time

from pydantic import Field

from populace.builtins.bounded_confidence import (
    Averaging,
    BoundedConfidence,
    BoundedConfidenceParams,
)
from populace.plugin import PolicySupport


class DawdleParams(BoundedConfidenceParams):
    pause_round: int = Field(0, ge=0)
    pause_s: float = Field(0.0, ge=0, le=60)


class Dawdle(Averaging):
    def decide(self, params, policy, observation):
        if observation.round == params.pause_round:
            time.sleep(params.pause_s)
        return super().decide(params, policy, observation)


class DawdlingDeffuant(BoundedConfidence):
    title = "Dawdling Deffuant"
    params = DawdleParams
    policies = (PolicySupport("averaging", "Averaging", rule=Dawdle),)
"""


@pytest.mark.parametrize(
    "spec",
    [{"kind": "watts_strogatz", "k": 6, "p": 0.2}, {"kind": "complete"}],
    ids=lambda s: s["kind"],
)
def test_a_worker_killed_mid_round_leaves_the_pairs_of_an_undisturbed_run(
    manager_factory, tmp_path, spec
):
    path = install_plugin_package(
        tmp_path / "site", "dawdling_deffuant", DAWDLING, "dawdling_deffuant", "DawdlingDeffuant"
    )
    manager = manager_factory(extra_env={"PYTHONPATH": str(path)}).start()
    doomed = manager.start_workers(procs=1, start_new_session=True)
    for _ in range(2):
        manager.start_workers(procs=1)
    wait_for(lambda: online_count(manager) == 3, 30, what="3 workers online")
    size, seed, rounds = 1200, 5, 6
    params = {"model": "deffuant", "epsilon": 0.4, "pause_round": 3, "pause_s": 4.0}
    with manager.api() as api:
        population = deploy_network(api, size, spec)
        assert population["status"] == "deployed", population
        sid = start(
            api,
            {
                "population_id": population["id"],
                "rounds": rounds,
                "seed": seed,
                "plugin": {"name": "dawdling_deffuant", "params": params},
            },
        )["id"]
        wait_for(lambda: len(rounds_of(api, sid)) >= 2, 60, what="two rounds kept before the kill")
        os.killpg(doomed.pid, signal.SIGKILL)  # a node gone mid-round 3: supervisor and child
        done = finish(api, sid, timeout=240)
        assert done["status"] == "completed", done
        got = exported_values(api, sid, size)
        timeline = api.get(f"/api/simulations/{sid}/timeline").json()["items"]
    sys.path.insert(0, str(path))
    try:
        from dawdling_deffuant import DawdlingDeffuant
    finally:
        sys.path.remove(str(path))
    if spec["kind"] == "complete":
        graph = CompleteGraph(size)
    else:
        graph = generate(parse_graph_spec(spec), size, population["seed"])
    sim = DawdlingDeffuant()
    want = play(sim, sim.params.model_validate({**params, "pause_s": 0}), None, graph, seed, rounds)
    assert_same_run(got, want.values)
    assert any("unanswered" in str(entry) for entry in timeline), timeline
