"""Mixed populations through the REST API on real worker processes over real gRPC: one run gives
different agents different policies, by share (exact counts, seeded) or by attribute. The run
record lists each part's agents, every round breaks down by policy (REST and round.completed),
the export does not depend on how many worker processes host the agents, and a tenth played by
an LLM (the tests' own OpenAI-compatible server) asks for that tenth alone."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.openai_server import OpenAIServer
from tests.integration import test_simulations_api
from tests.support import running_cluster
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    rounds_of,
    start,
)
from worker_server.rounds.assignment import ShareAssignment

# The module-wide manager with two worker processes, per database.
cluster = test_simulations_api.cluster

SIZE = 200
MODEL = "test-model"


def _public_goods(pid: int, policy: dict, rounds: int = 3, seed: int = 5) -> dict:
    return {
        "population_id": pid,
        "rounds": rounds,
        "plugin": {"name": "public_goods"},
        "policy": policy,
        "seed": seed,
    }


SHARES = {
    "kind": "mixed",
    "shares": [
        {"share": 0.25, "policy": {"kind": "free_rider"}},
        {"share": 0.35, "policy": {"kind": "full_cooperator"}, "label": "cooperators"},
        {"share": 0.4, "policy": {"kind": "conditional_cooperator"}},
    ],
}


def _numbers_by_value(csv_bytes: bytes) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for row in csv.DictReader(io.StringIO(csv_bytes.decode())):
        if row["round"] == "1":
            out.setdefault(row["value"], set()).add(int(row["agent_id"]) & 0xFFFFFFFF)
    return out


def test_parts_by_share_get_exact_counts_shown_in_the_record_and_every_round(cluster):
    pid = deploy(cluster, size=SIZE, name="mixed-shares")
    events = EventLog(cluster, "simulation:*")
    try:
        with cluster.api() as api:
            sid = start(api, _public_goods(pid, SHARES))["id"]
            done = finish(api, sid)
            assert done["status"] == "completed", done.get("error")
            policies = done["record"]["policies"]
            assert [(p["label"], p["kind"], p["agents"]) for p in policies] == [
                ("free_rider", "free_rider", 50),
                ("cooperators", "full_cooperator", 70),
                ("conditional_cooperator", "conditional_cooperator", 80),
            ]
            played = rounds_of(api, sid)
            assert len(played) == 3
            for r in played:
                by = r["metrics_by_policy"]
                assert [by[p["label"]]["agents"] for p in policies] == [50, 70, 80]
                assert sum(v["n_valid"] for v in by.values()) == r["n_valid"] == SIZE
                assert by["free_rider"]["mean"] == 0  # a free rider gives nothing
                assert by["cooperators"]["mean"] == 20  # a full cooperator gives it all
            # Who free-rides is the seeded assignment's part 0, exactly.
            rule = ShareAssignment.seeded(5, [0.25, 0.35, 0.4], SIZE)
            parts = rule.parts(np.arange(SIZE))
            exported = export(api, sid, "csv")
            by_value = _numbers_by_value(exported)
            free_riders = set(np.flatnonzero(parts == 0).tolist())
            assert by_value["0"] >= free_riders
            assert by_value["20"] >= set(np.flatnonzero(parts == 1).tolist())
            # The export says who played which part, in every format.
            labels = ["free_rider", "cooperators", "conditional_cooperator"]
            for row in csv.DictReader(io.StringIO(exported.decode())):
                number = int(row["agent_id"]) & 0xFFFFFFFF
                assert row["policy"] == labels[parts[number]], row
            lines = export(api, sid, "jsonl").decode().splitlines()
            assert {json.loads(line)["policy"] for line in lines} == set(labels)
            table = pq.read_table(io.BytesIO(export(api, sid, "parquet")))
            assert sorted(set(table.column("policy").to_pylist())) == sorted(labels)
        completed = [
            e
            for e in events.events
            if e["type"] == "round.completed" and e["payload"].get("simulation_id") == sid
        ]
        assert completed and all(
            e["payload"]["metrics_by_policy"]["free_rider"]["agents"] == 50 for e in completed
        )
    finally:
        events.close()


def test_parts_by_attribute_follow_the_agents_category(cluster):
    pid = deploy(cluster, size=SIZE, name="mixed-attribute")
    policy = {
        "kind": "mixed",
        "attribute": "education",
        "by_category": {"doctorate": {"kind": "full_cooperator"}},
        "default": {"kind": "free_rider"},
    }
    with cluster.api() as api:
        population = api.get(f"/api/populations/{pid}").json()
        doctors = population["counts"]["education"]["doctorate"]
        sid = start(api, _public_goods(pid, policy, rounds=2))["id"]
        done = finish(api, sid)
        assert done["status"] == "completed", done.get("error")
        assert [(p["label"], p["agents"]) for p in done["record"]["policies"]] == [
            ("full_cooperator (doctorate)", doctors),
            ("free_rider (default)", SIZE - doctors),
        ]
        for r in rounds_of(api, sid):
            by = r["metrics_by_policy"]
            assert by["full_cooperator (doctorate)"] == {
                "agents": doctors, "n_valid": doctors, "n_invalid": 0, "n_late": 0,
                "n_lost": 0, "mean": 20.0,
            }  # fmt: skip
            assert by["free_rider (default)"]["mean"] == 0
        rows = csv.DictReader(io.StringIO(export(api, sid, "csv", attributes="true").decode()))
        for row in rows:
            assert row["value"] == ("20" if row["education"] == "doctorate" else "0"), row


def test_bad_mixtures_are_422_naming_the_field(cluster):
    pid = deploy(cluster, size=50, name="mixed-bad")

    def refused(policy: dict) -> tuple[list, str]:
        with cluster.api() as api:
            resp = api.post("/api/simulations", json=_public_goods(pid, policy))
        assert resp.status_code == 422, resp.text
        error = resp.json()["detail"][0]
        return error["loc"], error["msg"]

    loc, msg = refused({**SHARES, "shares": SHARES["shares"][:2]})
    assert loc[-1] == "shares" and "add up to 0.6, not 1" in msg
    loc, msg = refused(
        {
            "kind": "mixed",
            "attribute": "education",
            "by_category": {"astronaut": {"kind": "free_rider"}},
            "default": {"kind": "free_rider"},
        }  # fmt: skip
    )
    assert loc == ["body", "policy", "by_category", "astronaut"] and "not a category" in msg
    loc, msg = refused(
        {
            "kind": "mixed",
            "attribute": "shoe_size",
            "by_category": {"x": {"kind": "free_rider"}},
            "default": {"kind": "free_rider"},
        }  # fmt: skip
    )
    assert loc[-1] == "attribute" and "not an attribute" in msg
    loc, msg = refused({"kind": "mixed", "shares": [{"share": 1, "policy": {"kind": "level_k"}}]})
    assert loc[-2:] == ["policy", "kind"] and "no policy 'level_k'" in msg
    loc, msg = refused({"kind": "mixed", "shares": [{"share": 1, "policy": SHARES}]})
    assert loc[-1] == "policy" and "not another mixed" in msg


def test_the_same_seed_exports_the_same_bytes_on_one_or_two_worker_processes(tmp_path):
    exported = []
    for procs in (1, 2):
        tmp = tmp_path / f"procs-{procs}"
        tmp.mkdir()
        with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=procs) as manager:
            pid = deploy(manager, size=SIZE)
            with manager.api() as api:
                sid = start(api, _public_goods(pid, SHARES, seed=17))["id"]
                done = finish(api, sid)
                assert done["status"] == "completed", done.get("error")
                workers = {p["worker_id"] for p in done["record"]["placement"]}
                assert len(workers) == procs
                exported.append(
                    (export(api, sid, "csv"), [r["metrics_by_policy"] for r in rounds_of(api, sid)])
                )
    assert exported[0] == exported[1]


def test_a_tenth_played_by_an_llm_asks_for_that_tenth_alone(cluster):
    pid = deploy(cluster, size=SIZE, name="mixed-llm")
    policy = {
        "kind": "mixed",
        "shares": [
            {
                "share": 0.1,
                "policy": {
                    "kind": "llm",
                    "endpoints": [{"base_url": "", "model": MODEL, "max_concurrency": 8}],
                    "identical_prompts": "each_asks",
                },
            },
            {"share": 0.9, "policy": {"kind": "free_rider"}},
        ],
    }
    rounds = 2
    with OpenAIServer(model=MODEL, answer=lambda request: "7") as server, cluster.api() as api:
        policy["shares"][0]["policy"]["endpoints"][0]["base_url"] = server.base_url
        body = _public_goods(pid, policy, rounds=rounds)
        estimate = api.post("/api/simulations/estimate", json=body)
        assert estimate.status_code == 200, estimate.text
        assert estimate.json()["llm_agents"] == 20
        assert estimate.json()["asks"] == 20 * rounds
        sid = start(api, body)["id"]
        done = finish(api, sid)
        assert done["status"] == "completed", done.get("error")
        assert server.requests == 20 * rounds
        for r in rounds_of(api, sid):
            assert r["llm_requests"] == 20
            assert r["metrics_by_policy"]["llm"] == {
                "agents": 20, "n_valid": 20, "n_invalid": 0, "n_late": 0, "n_lost": 0,
                "mean": 7.0,
            }  # fmt: skip
            assert r["metrics_by_policy"]["free_rider"]["mean"] == 0


@pytest.mark.parametrize(
    ("plugin", "first", "second"),
    [
        ("el_farol", "fixed_probability", "predictor"),
        ("volunteer", "fixed_chance", "equilibrium"),
        ("guess", "level_k", "synthetic"),
    ],
)
def test_every_plugin_plays_a_mixture_of_its_own_policies(cluster, plugin, first, second):
    pid = deploy(cluster, size=SIZE, name=f"mixed-{plugin}")
    policy = {
        "kind": "mixed",
        "shares": [
            {"share": 0.3, "policy": {"kind": first}},
            {"share": 0.7, "policy": {"kind": second}},
        ],
    }
    body = {
        "population_id": pid,
        "rounds": 2,
        "plugin": {"name": plugin},
        "policy": policy,
        "seed": 2,
    }
    with cluster.api() as api:
        sid = start(api, body)["id"]
        done = finish(api, sid)
        assert done["status"] == "completed", done.get("error")
        assert [(p["label"], p["agents"]) for p in done["record"]["policies"]] == [
            (first, 60),
            (second, 140),
        ]
        for r in rounds_of(api, sid):
            by = r["metrics_by_policy"]
            assert (by[first]["agents"], by[second]["agents"]) == (60, 140)
            assert by[first]["n_valid"] + by[second]["n_valid"] == r["n_valid"] == SIZE
