"""Simulations end to end through the REST API and the CLI: a real manager (SQLite and Postgres),
two real worker processes, populations deployed through the API."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess

import pytest

from tests.support import (
    populace_cmd,
    reset_postgres,
    running_cluster,
    wait_for,
)
from tests.support_populations import YAML
from tests.support_simulations import (
    DEPTHS,
    EventLog,
    deploy,
    export,
    finish,
    level_k,
    rounds_of,
    rounds_running,
    start,
)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def cluster(request, tmp_path_factory):
    """One manager with two worker processes per database for the whole module: every test
    deploys populations of its own, so tests do not see each other's simulations."""
    tmp = tmp_path_factory.mktemp(f"simulations-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    with running_cluster(tmp, url) as manager:
        yield manager


def test_level_k_half_mean_plus_5_converges_to_10_with_every_result_kept(cluster):
    pid = deploy(cluster)
    with cluster.api() as api:
        # The simulation ids are sequential: subscribe to the next one before creating it.
        upcoming = api.get("/api/simulations", params={"limit": 1000}).json()["items"] or [
            {"id": 0}
        ]
        events = EventLog(cluster, f"simulation:{max(s['id'] for s in upcoming) + 1}")
        try:
            created = start(api, level_k(pid))
            assert created["status"] == "pending" and created["seed"] == "11"
            done = finish(api, created["id"])
            assert done["status"] == "completed", done.get("error")
            wait_for(
                lambda: any(
                    e["payload"]["status"] == "completed" for e in events.of("simulation.updated")
                ),
                10,
                what="the final simulation.updated event",
            )
        finally:
            events.close()
        sid = created["id"]
        # The updates carry the run's times: the final one says when it started and ended.
        final = [e["payload"] for e in events.of("simulation.updated")][-1]
        assert final["status"] == "completed"
        assert (final["started_at"], final["finished_at"]) == (
            done["started_at"],
            done["finished_at"],
        )
        assert done["status"] == "completed" and done["current_round"] == 6, done
        assert done["error"] is None and done["started_at"] and done["finished_at"]
        assert done["models"] == [] and done["version"] and done["config"]["seed"] == "11"
        assert done["config"]["plugin"]["params"]["rule"]["preset"] == "1/2+5"

        rounds = rounds_of(api, sid)
        assert [r["round"] for r in rounds] == [1, 2, 3, 4, 5, 6]
        means = [r["mean"] for r in rounds]
        assert abs(means[-1] - 10) <= 2, means
        assert means[0] > 20, "round 1 starts far from the equilibrium"
        for r in rounds:
            assert (r["n_valid"], r["n_invalid"], r["n_late"]) == (1000, 0, 0)
            assert r["target"] == pytest.approx(0.5 * r["mean"] + 5)
            assert r["min"] <= r["median"] <= r["max"] and r["std"] > 0
            assert r["winner_count"] >= 1 and len(r["winner_agents"]) == min(r["winner_count"], 100)
            assert sum(r["histogram"]) == 1000 and len(r["histogram"]) == 101
            education = r["segments"]["education"]
            assert {k: v["count"] for k, v in education.items()} == {c: 200 for c in DEPTHS}
            # Deeper thinkers guess lower when the anchor is above the equilibrium.
            if r["round"] == 1:
                assert education["doctorate"]["mean"] < education["primary school"]["mean"]

        # Every decision is kept, and the round's statistics are the decisions' statistics.
        rows = list(csv.DictReader(io.StringIO(export(api, sid, "csv").decode())))
        assert len(rows) == 6000
        assert [(int(r["round"]), int(r["agent_id"])) for r in rows] == sorted(
            (int(r["round"]), int(r["agent_id"])) for r in rows
        )
        last = [float(r["value"]) for r in rows if r["round"] == "6"]
        assert sum(last) / len(last) == pytest.approx(means[-1], rel=1e-12)
        round_two = export(api, sid, "jsonl", round=2).decode().splitlines()
        assert len(round_two) == 1000 and all(json.loads(x)["round"] == 2 for x in round_two)
        winners = set(rounds[0]["winner_agents"])
        winning = [r for r in rows if r["round"] == "1" and int(r["agent_id"]) in winners]
        assert {float(r["value"]) for r in winning} == {rounds[0]["winner_value"]}

    completed = events.of("round.completed")
    assert [e["payload"]["round"] for e in completed] == [1, 2, 3, 4, 5, 6]
    assert completed[-1]["payload"]["mean"] == means[-1]
    progress = events.of("round.progress")
    assert progress and all(e["payload"]["total"] == 1000 for e in progress)
    assert {e["payload"]["round"] for e in progress} == {1, 2, 3, 4, 5, 6}
    statuses = [e["payload"]["status"] for e in events.of("simulation.updated")]
    assert statuses[:2] == ["pending", "running"] and statuses[-1] == "completed", statuses
    assert [e["payload"]["current_round"] for e in events.of("simulation.updated")][-1] == 6


def test_every_round_carries_its_declared_metrics_in_the_api_and_on_round_completed(cluster):
    pid = deploy(cluster)
    with cluster.api() as api:
        upcoming = api.get("/api/simulations", params={"limit": 1000}).json()["items"] or [
            {"id": 0}
        ]
        events = EventLog(cluster, f"simulation:{max(s['id'] for s in upcoming) + 1}")
        try:
            sid = start(api, level_k(pid, rounds=3))["id"]
            done = finish(api, sid)
            assert done["status"] == "completed", done.get("error")
            wait_for(lambda: len(events.of("round.completed")) == 3, 10, what="round.completed")
        finally:
            events.close()
        rounds = rounds_of(api, sid)

    declared = done["metrics"]
    names = [m["name"] for m in declared]
    assert {"mean", "median", "std", "min", "max", "target", "n_valid", "n_invalid"} <= set(names)
    assert all(m["title"] and m["type"] in ("number", "integer") for m in declared)
    integers = {m["name"] for m in declared if m["type"] == "integer"}
    for r in rounds:
        # The generic record holds the very values of the game's columns, typed as declared.
        assert r["metrics"] == {name: r[name] for name in names}
        assert all(type(r["metrics"][name]) is int for name in integers)
    completed = [e["payload"] for e in events.of("round.completed")]
    assert [p["metrics"] for p in completed] == [r["metrics"] for r in rounds]


def test_two_thirds_mean_falls_every_round_and_the_same_seed_exports_the_same_bytes(cluster):
    pid = deploy(cluster)
    config = level_k(pid, rule={"preset": "2/3"}, rounds=5, seed=2024)
    exports = []
    with cluster.api() as api:
        for seed in (2024, 2024, 7):
            sid = start(api, {**config, "seed": seed})["id"]
            assert finish(api, sid)["status"] == "completed"
            means = [r["mean"] for r in rounds_of(api, sid)]
            assert all(b < a for a, b in zip(means, means[1:], strict=False)), means
            exports.append((export(api, sid, "csv"), export(api, sid, "jsonl")))
    (csv_a, jsonl_a), (csv_b, jsonl_b), (csv_c, _) = exports
    assert len(csv_a.splitlines()) == 1 + 5 * 1000
    assert csv_a == csv_b and jsonl_a == jsonl_b, "same seed, byte-identical exports"
    assert csv_a != csv_c, "another seed, other decisions"


def test_synthetic_policy_custom_rule_and_stop_when_converged(cluster):
    pid = deploy(cluster)
    with cluster.api() as api:
        sid = start(
            api,
            {
                "population_id": pid,
                "rounds": 10,
                "rule": {"ratio": 0.8, "offset": 1, "min": 10, "max": 20},
                "policy": {"kind": "synthetic", "latency_s": 0.01},
                "histogram_bins": 10,
                "store_responses": True,
                "stop_when_converged": {"window": 2, "tolerance": 1.0},
            },
        )["id"]
        done = finish(api, sid)
        assert done["status"] == "completed" and done["stop_reason"] == "converged", done
        assert done["current_round"] == 2, "uniform draws have the same mean every round"
        rounds = rounds_of(api, sid)
        assert len(rounds) == 2
        for r in rounds:
            assert r["n_valid"] == 1000 and r["min"] >= 10 and r["max"] <= 20
            assert len(r["histogram"]) == 10 and sum(r["histogram"]) == 1000
            assert r["target"] == pytest.approx(0.8 * r["mean"] + 1)
        lines = export(api, sid, "jsonl").decode().splitlines()
        decisions = [json.loads(x) for x in lines]
        assert len(decisions) == 2000
        assert all(10 <= d["value"] <= 20 and d["status"] == "valid" for d in decisions)
        assert all(d["response"] is None for d in decisions), "no LLM, no raw answers"


def test_cancel_stops_the_workers_round_and_frees_the_population(cluster):
    pid = deploy(cluster)
    addresses = [w["address"] for w in cluster.workers()]
    slow = {"population_id": pid, "rounds": 3, "policy": {"kind": "synthetic", "latency_s": 60}}
    with cluster.api() as api:
        sid = start(api, slow)["id"]
        wait_for(lambda: rounds_running(addresses) == 2, 20, what="both workers in the round")

        busy = api.post("/api/simulations", json=slow)
        assert busy.status_code == 409 and f"simulation {sid}" in busy.json()["detail"]

        cancelled = api.post(f"/api/simulations/{sid}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        wait_for(lambda: rounds_running(addresses) == 0, 10, what="workers stopped the round")
        assert rounds_of(api, sid) == [] and export(api, sid, "jsonl") == b""
        again = api.post(f"/api/simulations/{sid}/cancel")
        assert again.status_code == 409 and "already cancelled" in again.json()["detail"]

        # The population is free again.
        second = start(api, {**slow, "policy": {"kind": "synthetic", "latency_s": 0}})
        assert finish(api, second["id"])["status"] == "completed"
        listed = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        assert [(s["id"], s["status"]) for s in listed] == [
            (sid, "cancelled"),
            (second["id"], "completed"),
        ]


def test_a_finished_simulation_is_deleted_with_everything_it_stored(cluster):
    pid = deploy(cluster, name="deletable")
    addresses = [w["address"] for w in cluster.workers()]
    slow = {"population_id": pid, "rounds": 3, "policy": {"kind": "synthetic", "latency_s": 60}}
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": cluster.url,
        "POPULACE_API_TOKEN": cluster.api_token,
    }
    with cluster.api() as api:
        running = start(api, slow)["id"]
        wait_for(lambda: rounds_running(addresses) == 2, 20, what="both workers in the round")
        refused = api.delete(f"/api/simulations/{running}")
        assert refused.status_code == 409 and "cancel it first" in refused.json()["detail"]
        assert api.post(f"/api/simulations/{running}/cancel").json()["status"] == "cancelled"

        done = start(api, level_k(pid, rounds=2))["id"]
        assert finish(api, done)["status"] == "completed"
        assert len(rounds_of(api, done)) == 2 and export(api, done, "csv").count(b"\n") == 2001
        gone = api.delete(f"/api/simulations/{done}")
        assert gone.status_code == 204, gone.text
        for path in ("", "/rounds", "/decisions"):
            assert api.get(f"/api/simulations/{done}{path}").status_code == 404, path
        assert api.delete(f"/api/simulations/{done}").status_code == 404
        listed = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        assert [s["id"] for s in listed] == [running]

        cli = subprocess.run(
            populace_cmd("simulation", "delete", str(running)),
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 0 and "deleted" in cli.stdout, cli.stderr
        again = subprocess.run(
            populace_cmd("simulation", "delete", str(running)),
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert again.returncode != 0 and "404" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1, again.stderr
        assert api.get("/api/simulations", params={"population_id": pid}).json()["items"] == []


def test_bad_input_is_422_naming_the_field_and_unusable_populations_are_409(cluster):
    pid = deploy(cluster, size=100)
    with cluster.api() as api:
        for change, loc in [
            ({"rule": {"ratio": 2.0}}, ["body", "rule", "ratio"]),
            ({"rule": {"ratio": 0}}, ["body", "rule", "ratio"]),
            ({"rule": {"preset": "2/3", "min": 100, "max": 0}}, ["body", "rule", "max"]),
            ({"rounds": 0}, ["body", "rounds"]),
            ({"rounds": 1001}, ["body", "rounds"]),
            ({"colour": "red"}, ["body", "colour"]),
            ({"segment_by": ["shoe_size"]}, ["body", "segment_by", 0]),
        ]:
            resp = api.post("/api/simulations", json=level_k(pid, **change))
            assert resp.status_code == 422, (change, resp.text)
            assert loc in [e["loc"] for e in resp.json()["detail"]], (change, resp.text)
        resp = api.post("/api/simulations", content="population_id: [unclosed", headers=YAML)
        assert resp.status_code == 422

        unknown = api.post("/api/simulations", json=level_k(999_999))
        assert unknown.status_code == 409 and "does not exist" in unknown.json()["detail"]
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="deleted",
        )
        gone = api.post("/api/simulations", json=level_k(pid))
        assert gone.status_code == 409 and "is deleted" in gone.json()["detail"]
        assert api.get("/api/simulations", params={"population_id": pid}).json()["items"] == []
        assert api.get("/api/simulations/999999").status_code == 404
        assert api.get("/api/simulations/999999/decisions").status_code == 404
        assert (
            api.get("/api/simulations", headers={"Authorization": "Bearer nope"}).status_code == 401
        )


def test_cli_simulate_list_export(cluster, tmp_path):
    pid = deploy(cluster)
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": cluster.url,
        "POPULACE_API_TOKEN": cluster.api_token,
    }

    def populace(*args):
        return subprocess.run(
            populace_cmd(*args), env=env, capture_output=True, text=True, timeout=180
        )

    config = tmp_path / "simulation.yaml"
    config.write_text(
        f"""
population_id: {pid}
name: cli run
rounds: 3
rule: {{preset: "1/2+5"}}
policy:
  kind: level-k
  depth_attribute: education
  depth_by_category: {json.dumps(DEPTHS)}
  noise_std: 1.5
seed: 5
"""
    )
    run = populace("simulate", str(config), "--json")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines if ln.startswith("round ")] == [
        "round 1",
        "round 2",
        "round 3",
    ], run.stdout
    assert "mean" in lines[1] and "target" in lines[1]
    summary = json.loads(lines[-1])
    assert summary["status"] == "completed" and summary["rounds_played"] == 3
    sid = summary["id"]

    listed = populace("simulation", "list", "--population-id", str(pid))
    assert listed.returncode == 0 and "cli run" in listed.stdout and "3/3" in listed.stdout

    out = tmp_path / "decisions.jsonl"
    exported = populace(
        "simulation", "export", str(sid), "--format", "jsonl", "--round", "3", "-o", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    assert len(out.read_bytes().splitlines()) == 1000
    with cluster.api() as api:
        assert out.read_bytes() == export(api, sid, "jsonl", round=3)

    slow = tmp_path / "slow.yaml"
    slow.write_text(
        f"population_id: {pid}\nrounds: 2\npolicy: {{kind: synthetic, latency_s: 60}}\n"
    )
    started = populace("simulate", str(slow), "--no-wait")
    assert started.returncode == 0, started.stderr
    slow_id = int(started.stdout.split()[1])
    stopped = populace("simulation", "cancel", str(slow_id))
    assert stopped.returncode == 0, stopped.stderr
    assert f"simulation {slow_id}: cancelled" in stopped.stdout
    again = populace("simulation", "cancel", str(slow_id))
    assert again.returncode != 0 and "409" in again.stderr and "already cancelled" in again.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text(config.read_text().replace("rounds: 3", "rounds: 5000"))
    refused = populace("simulate", str(bad))
    assert refused.returncode != 0 and "422" in refused.stderr and "rounds" in refused.stderr

    # A run that fails exits non-zero with the reason: an LLM nobody serves.
    failing = tmp_path / "failing.yaml"
    failing.write_text(
        f"""
population_id: {pid}
rounds: 2
policy:
  kind: llm
  endpoints: [{{base_url: "http://127.0.0.1:9", model: nobody}}]
"""
    )
    failed = populace("simulate", str(failing))
    assert failed.returncode != 0 and "failed" in failed.stderr, (failed.stdout, failed.stderr)
    assert "http://127.0.0.1:9" in failed.stderr and "not usable" in failed.stderr, failed.stderr
