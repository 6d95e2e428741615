"""Network simulations end to end: a population with a graph deployed through the REST API over
real worker processes, played by a built-in network plugin whose values go worker to worker.
Every agent's value in every round is the one the in-process reference driver computes over the
whole graph at once (tests/support_network.py): so the placement, the cohorts and the peer
plane change nothing. A SIGKILLed worker's agents are re-placed, seeded with their values and
the run completes with the export of an undisturbed run."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from populace.builtins.sir import Sir
from populace.builtins.voter import Voter
from tests.support import install_plugin_package, populace_cmd, running_cluster, wait_for
from tests.support_network import play
from tests.support_network_runs import (
    assert_same_run,
    deploy_network,
    exported_values,
    online_count,
    run_to_the_end,
)
from tests.support_populations import deploy_population, population_config
from tests.support_simulations import export, finish, rounds_of, start
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One manager with two worker processes for the module's tests."""
    tmp = tmp_path_factory.mktemp("network")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def test_sir_over_two_processes_plays_exactly_the_reference(cluster):
    size, seed = 3000, 11
    spec = {"kind": "erdos_renyi", "mean_degree": 6}
    params = {"transmission": 0.3, "initial_infected": 12}
    with cluster.api() as api:
        population = deploy_network(api, size, spec)
        done, played, got = run_to_the_end(
            api, population, "sir", params, rounds=200, seed=seed, options=("S", "I", "R")
        )
    assert done["stop_reason"], done  # the epidemic ended before the rounds ran out
    graph = generate(parse_graph_spec(spec), size, population["seed"])
    sim = Sir()
    want = play(sim, sim.params.model_validate(params), None, graph, seed, 200)
    assert_same_run(got, want.values)
    assert [r["metrics"] for r in played] == want.metrics
    # The epidemic spread over the edges: more than the first infected ever fell ill.
    assert want.metrics[-1]["attack_rate"] > 12 / size
    # Values crossed between the two processes; after round 1 (everything a peer needs), only
    # those that changed.
    sent = [r["network_bytes"] for r in played]
    assert sent[0] > 0 and min(sent[1:]) < sent[0], sent
    with cluster.api() as api:
        assert_only_changes_stored_and_carried(api, done, played, want.values)


def changed_count(now: np.ndarray, before: np.ndarray) -> int:
    return int(np.count_nonzero(~((now == before) | (np.isnan(now) & np.isnan(before)))))


def assert_only_changes_stored_and_carried(api, done, played, want: list[np.ndarray]) -> None:
    """A network run stores round 1 whole and then only the agents whose value changed, and
    every reader carries the others forward: the export (checked by the caller), a late
    round's page in the decisions browser, one agent's history."""
    sid, size = done["id"], len(want[0])
    assert done["stores_changes"] is True, done
    stored = [r["decisions_stored"] for r in played]
    moved = [size] + [changed_count(want[i], want[i - 1]) for i in range(1, len(want))]
    assert stored == moved
    assert stored[-1] < size // 10, stored  # a quiet round writes next to nothing
    late = len(want) - 1
    page = api.get(
        f"/api/simulations/{sid}/transcripts", params={"round": late, "limit": 200}
    ).json()
    assert len(page["items"]) == 200 and page["next_after"] is not None
    for item in page["items"]:
        assert item["round"] == late
        assert item["value"] == want[late - 1][item["agent_id"] & 0xFFFFFFFF], item
    # Filtered after carrying: values at least 2 (R, recovered) in that round, all of them.
    recovered = int(np.count_nonzero(want[late - 1] >= 2))
    seen, after = 0, None
    while True:
        params = {"round": late, "min": 2, "limit": 200} | ({"after": after} if after else {})
        page = api.get(f"/api/simulations/{sid}/transcripts", params=params).json()
        assert all(item["value"] >= 2 for item in page["items"])
        seen += len(page["items"])
        if (after := page["next_after"]) is None:
            break
    assert seen == recovered
    # An agent that changed state: every round of its history, carried between its changes.
    number = int(np.flatnonzero(want[-1] != want[0])[0])
    agent = int(page_agent_id(api, sid, number))
    history = api.get(
        f"/api/agents/{agent}/decisions", params={"simulation_id": sid, "limit": 200}
    ).json()["items"]
    assert [h["round"] for h in history] == list(range(1, len(want) + 1))
    assert [h["value"] for h in history] == [float(w[number]) for w in want]


def page_agent_id(api, sid: int, number: int) -> int:
    """The id of the run's agent with this number (ids are the population's base + number)."""
    first = api.get(f"/api/simulations/{sid}/transcripts", params={"round": 1, "limit": 1})
    return (first.json()["items"][0]["agent_id"] & ~0xFFFFFFFF) + number


def test_voter_on_cliques_reaches_consensus_per_group(cluster):
    size, seed = 2000, 3
    spec = {"kind": "cliques", "size": 10}
    params = {"initial_share": 0.5}
    with cluster.api() as api:
        population = deploy_network(api, size, spec)
        done, played, got = run_to_the_end(api, population, "voter", params, rounds=300, seed=seed)
        groups = group_pages(api, done["id"])
        series = api.get(f"/api/simulations/{done['id']}/groups/3").json()
        exported = api.get(f"/api/simulations/{done['id']}/groups/export").text
        missing = api.get(f"/api/simulations/{done['id']}/groups/{size}")
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": cluster.url,
        "POPULACE_API_TOKEN": cluster.api_token,
    }
    cli = subprocess.run(
        populace_cmd("simulation", "groups", str(done["id"]), "--round", "2"),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    absent = subprocess.run(
        populace_cmd("simulation", "groups", "999999"),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    graph = generate(parse_graph_spec(spec), size, population["seed"])
    sim = Voter()
    want = play(sim, sim.params.model_validate(params), None, graph, seed, 300)
    assert_same_run(got, want.values)
    last = played[-1]["metrics"]
    assert last["groups"] == size // 10 and last["groups_at_consensus"] == size // 10
    # Each clique's rounds to consensus: the first round the reference had it unanimous.
    cliques = np.stack(want.values).reshape(len(want.values), size // 10, 10)
    unanimous = (cliques == cliques[:, :, :1]).all(axis=2)
    first = unanimous.argmax(axis=0) + 1
    assert [g["values"]["consensus_round"] for g in groups] == first.tolist()
    assert all(g["values"]["share_ones"] in (0.0, 1.0) for g in groups)
    # Every round's count of cliques at consensus is the run's own metric.
    for r in played:
        assert np.count_nonzero(first <= r["round"]) == r["metrics"]["groups_at_consensus"]
    # One clique over the rounds, and the file of every group in every round.
    assert [i["round"] for i in series["items"]] == list(range(1, len(played) + 1))
    assert series["items"][-1]["values"]["consensus_round"] == first[3]
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert len(rows) == len(played) * (size // 10)
    assert list(rows[0]) == ["round", "group", "consensus_round", "share_ones"]
    final = [r for r in rows if int(r["round"]) == len(played)]
    assert [float(r["consensus_round"]) for r in final] == first.tolist()
    assert missing.status_code == 404 and "group 2000 not found" in missing.text
    assert cli.returncode == 0, cli.stderr
    header, *lines = cli.stdout.splitlines()
    assert header == "round,group,consensus_round,share_ones"
    assert lines == [
        f"{r['round']},{r['group']},{r['consensus_round']},{r['share_ones']}"
        for r in rows
        if r["round"] == "2"
    ]
    assert absent.returncode != 0 and "404" in absent.stderr
    assert len(absent.stderr.strip().splitlines()) == 1, absent.stderr


def group_pages(api, sid: int, names=("consensus_round", "share_ones")) -> list[dict]:
    """Every group of the last kept round, page by page (`after` the last of the page)."""
    items, after = [], None
    while True:
        query = {"limit": 64} if after is None else {"limit": 64, "after": after}
        page = api.get(f"/api/simulations/{sid}/groups", params=query).json()
        assert len(page["items"]) <= 64 and page["names"] == list(names)
        items += page["items"]
        after = page["next_after"]
        if after is None:
            assert [g["group"] for g in items] == list(range(page["groups"]))
            return items


def test_voter_grouped_by_an_attribute_reports_each_category(cluster):
    size, seed = 1000, 5
    with cluster.api() as api:
        population = deploy_network(api, size, {"kind": "watts_strogatz", "k": 4, "p": 0.1})
        body = {
            "population_id": population["id"],
            "rounds": 4,
            "seed": seed,
            "plugin": {"name": "voter", "params": {"initial_share": 0.5}},
            "group_by": "group",
        }
        refused = api.post("/api/simulations", json={**body, "group_by": "club"})
        sid = start(api, body)["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        page = api.get(f"/api/simulations/{sid}/groups").json()
        exported = export(api, sid, "csv", attributes="true").decode()
        labelled = api.get(f"/api/simulations/{sid}/groups/export", params={"round": 4}).text
        one = api.get(f"/api/simulations/{sid}/groups/1").json()
    assert refused.status_code == 422, refused.text
    (issue,) = refused.json()["detail"]
    assert issue["loc"] == ["body", "group_by"] and "it has: group" in issue["msg"], issue
    # The attribute's two categories are the groups (in sorted order), whatever the graph.
    assert page["round"] == 4 and page["groups"] == 2
    assert [g["label"] for g in page["items"]] == ["a", "b"]
    rows = [r for r in csv.DictReader(io.StringIO(exported)) if r["round"] == "4"]
    for item in page["items"]:
        mine = [float(r["value"]) for r in rows if r["group"] == item["label"]]
        assert item["values"]["share_ones"] == pytest.approx(sum(mine) / len(mine))
    assert labelled.splitlines()[0] == "round,group,label,consensus_round,share_ones"
    assert [line.split(",")[2] for line in labelled.splitlines()[1:]] == ["a", "b"]
    assert one["label"] == "b" and [i["round"] for i in one["items"]] == [1, 2, 3, 4]


def test_more_first_cases_than_agents_is_a_422_and_nothing_is_stored(cluster):
    with cluster.api() as api:
        population = deploy_network(api, 60, {"kind": "cliques", "size": 6})
        before = api.get("/api/simulations").json()["items"]
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": population["id"],
                "rounds": 3,
                "plugin": {"name": "sir", "params": {"initial_infected": 61}},
            },
        )
        assert resp.status_code == 422, resp.text
        (error,) = resp.json()["detail"]
        assert error["loc"][-3:] == ["plugin", "params", "initial_infected"], error
        assert "60 agents" in error["msg"], error
        assert api.get("/api/simulations").json()["items"] == before


def test_a_network_plugin_needs_a_population_with_a_graph(cluster):
    with cluster.api() as api:
        plain = population_config("two-groups", name="plain", size=50, seed=1)
        del plain["placement"]
        pid = deploy_population(api, plain)["id"]
        resp = api.post(
            "/api/simulations",
            json={"population_id": pid, "rounds": 3, "plugin": {"name": "sir", "params": {}}},
        )
        assert resp.status_code == 409, resp.text
        assert "network simulation" in resp.text and "graph" in resp.text


# A network plugin that dawdles in one round, so a worker can be killed while it plays it.
DAWDLING = """
import time

import numpy as np
from pydantic import Field

from populace.builtins.voter import CopyANeighbour, Voter, VoterParams


class DawdleParams(VoterParams):
    pause_round: int = Field(0, ge=0)
    pause_s: float = Field(0.0, ge=0, le=60)


class Dawdle(CopyANeighbour):
    def decide(self, params, policy, observation):
        if observation.round == params.pause_round:
            time.sleep(params.pause_s)
        return super().decide(params, policy, observation)


class DawdlingVoter(Voter):
    title = "Dawdling voter"
    params = DawdleParams
    policies = (Voter.policies[0].__class__("copy_a_neighbour", "Copy", rule=Dawdle),)
"""


def test_a_worker_killed_mid_round_leaves_the_export_of_an_undisturbed_run(
    manager_factory, tmp_path
):
    path = install_plugin_package(
        tmp_path / "site", "dawdling_voter", DAWDLING, "dawdling_voter", "DawdlingVoter"
    )
    manager = manager_factory(extra_env={"PYTHONPATH": str(path)}).start()
    doomed = manager.start_workers(procs=1, start_new_session=True)
    for _ in range(2):
        manager.start_workers(procs=1)
    wait_for(lambda: online_count(manager) == 3, 30, what="3 workers online")
    size, seed = 1500, 5
    spec = {"kind": "watts_strogatz", "k": 6, "p": 0.2}
    params = {"initial_share": 0.4, "pause_round": 3, "pause_s": 4.0}
    with manager.api() as api:
        population = deploy_network(api, size, spec)
        assert population["status"] == "deployed", population
        sid = start(
            api,
            {
                "population_id": population["id"],
                "rounds": 6,
                "seed": seed,
                "plugin": {"name": "dawdling_voter", "params": params},
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
        from dawdling_voter import DawdlingVoter
    finally:
        sys.path.remove(str(path))
    graph = generate(parse_graph_spec(spec), size, population["seed"])
    sim = DawdlingVoter()
    want = play(sim, sim.params.model_validate({**params, "pause_s": 0}), None, graph, seed, 6)
    assert_same_run(got, want.values)
    # The run rode out the loss (it is on its timeline), and did not just miss it.
    assert any("unanswered" in str(entry) for entry in timeline), timeline


def test_a_manager_killed_mid_run_resumes_it_on_postgres_with_the_export_of_an_undisturbed_run(
    manager_factory, postgres_url, tmp_path
):
    """The run stores only what changed: the restarted manager reads every agent's value back
    from the rows kept (carried forward, on Postgres), seeds the workers and finishes the run as
    if nothing happened. Cliques of 6: those unanimous before the kill keep the round they got
    there (the group metrics read back)."""
    path = install_plugin_package(
        tmp_path / "site", "dawdling_voter", DAWDLING, "dawdling_voter", "DawdlingVoter"
    )
    manager = manager_factory(postgres_url, extra_env={"PYTHONPATH": str(path)}).start()
    manager.start_workers(procs=2)
    wait_for(lambda: online_count(manager) == 2, 30, what="2 workers online")
    size, seed, rounds = 1200, 9, 6
    spec = {"kind": "cliques", "size": 6}
    params = {"initial_share": 0.4, "pause_round": 3, "pause_s": 4.0}
    with manager.api() as api:
        population = deploy_network(api, size, spec)
        assert population["status"] == "deployed", population
        sid = start(
            api,
            {
                "population_id": population["id"],
                "rounds": rounds,
                "seed": seed,
                "plugin": {"name": "dawdling_voter", "params": params},
            },
        )["id"]
        wait_for(lambda: len(rounds_of(api, sid)) >= 2, 60, what="two rounds kept")
    manager.stop(signal.SIGKILL)  # mid-round 3: the run stays `running` in the store
    manager.start()
    with manager.api() as api:
        done = finish(api, sid, timeout=240)
        assert done["status"] == "completed", done
        assert done["stores_changes"] is True
        kept = rounds_of(api, sid)
        got = exported_values(api, sid, size)
        timeline = api.get(f"/api/simulations/{sid}/timeline").json()["items"]
        groups = group_pages(api, sid, names=["consensus_round", "share_ones"])
    assert any(e["message"].startswith("manager restarted") for e in timeline), timeline
    stored = [r["decisions_stored"] for r in kept]
    assert stored[0] == size and all(n < size for n in stored[1:]), stored
    sys.path.insert(0, str(path))
    try:
        from dawdling_voter import DawdlingVoter
    finally:
        sys.path.remove(str(path))
    graph = generate(parse_graph_spec(spec), size, population["seed"])
    sim = DawdlingVoter()
    want = play(sim, sim.params.model_validate({**params, "pause_s": 0}), None, graph, seed, rounds)
    assert_same_run(got, want.values)
    cliques = np.stack(want.values).reshape(rounds, size // 6, 6)
    unanimous = (cliques == cliques[:, :, :1]).all(axis=2)
    first = np.where(unanimous.any(axis=0), unanimous.argmax(axis=0) + 1, -1)
    assert (first[first > 0] <= 2).any(), "no clique at consensus before the kill: proves nothing"
    got_first = [g["values"]["consensus_round"] for g in groups]
    assert got_first == [None if f < 0 else float(f) for f in first]
