"""The Deffuant model end to end (bounded_confidence, model: deffuant): agents paired each round
by the runtime, over real worker processes and the peer plane. On a small-world graph the pairs
are a random matching along its edges that the processes find together (each knows only its
own agents' edges): the run over two processes, and the same population on one process, give
every agent exactly the reference driver's value in every round. On a complete graph (no edges
stored) agents meet in random pairs of the whole population and reach consensus; a plugin that
needs edges is still refused there (409)."""

from __future__ import annotations

import numpy as np
import pytest

from populace.builtins.bounded_confidence import BoundedConfidence
from tests.integration.test_network_rounds import assert_same_run, deploy, run_to_the_end
from tests.support import running_cluster, wait_for
from tests.support_network import CompleteGraph, play
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
        population = deploy(api, size, spec)
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
        spread = deploy(api, size, spec)
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
        population = deploy(api, size, {"kind": "complete"})
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
