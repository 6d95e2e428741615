"""Sweeps end to end: a real manager, real worker processes over gRPC, synthetic runs. In
sequence and in parallel, a refused point, a cancel, a manager SIGKILLed mid-sweep, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

import pytest

from tests.support import Manager, populace_cmd, reset_postgres, running_cluster, wait_for
from tests.support_populations import YAML
from tests.support_simulations import deploy, rounds_of

FINAL = {"completed", "failed", "cancelled"}
RULES = [{"preset": "2/3"}, {"ratio": 0.5, "offset": 5}]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def cluster(request, tmp_path_factory):
    """One manager with two worker processes per database for the module; every test deploys
    populations of its own."""
    tmp = tmp_path_factory.mktemp(f"sweeps-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    with running_cluster(tmp, url) as manager:
        yield manager


def sweep_file(populations: list[int], mode: str = "sequence", **base) -> dict:
    return {
        "name": f"rule-by-seed-{mode}",
        "mode": mode,
        "populations": populations,
        "base": {"rounds": 3, "policy": {"kind": "synthetic"}, **base},
        "grid": {"rule": RULES, "seed": [1, 2]},
    }


def launch(api, document: dict) -> dict:
    resp = api.post("/api/sweeps", json=document)
    assert resp.status_code == 202, resp.text
    return resp.json()


def finish(api, sweep_id: int, timeout: float = 120) -> dict:
    return wait_for(
        lambda: (s := api.get(f"/api/sweeps/{sweep_id}").json())["status"] in FINAL and s,
        timeout,
        what=f"sweep {sweep_id} to end",
    )


def sweep_params_in_store(database_url: str, sweep_id: int) -> dict[int, dict]:
    """simulation id -> sweep_params, read from the database itself."""
    from sqlalchemy import select

    from backend.db.models import Simulation
    from backend.db.session import make_engine, make_sessionmaker

    async def read() -> dict[int, dict]:
        engine = make_engine(database_url)
        try:
            async with make_sessionmaker(engine)() as session:
                rows = await session.execute(
                    select(Simulation.id, Simulation.sweep_params).where(
                        Simulation.sweep_id == sweep_id
                    )
                )
                return {sid: params for sid, params in rows}
        finally:
            await engine.dispose()

    return asyncio.run(read())


def check_results(api, manager: Manager, sweep: dict) -> list[dict]:
    """The results table against each run's own rounds and config."""
    rows = sweep["results"]["items"]
    expected = [{"rule": rule, "seed": seed} for rule in RULES for seed in (1, 2)]
    assert [r["params"] for r in rows] == expected
    assert [r["point"] for r in rows] == [1, 2, 3, 4]
    assert all(r["status"] == "completed" for r in rows), rows
    stored = sweep_params_in_store(manager.database_url, sweep["id"])
    assert stored == {r["simulation_id"]: r["params"] for r in rows}
    for row in rows:
        run = api.get(f"/api/simulations/{row['simulation_id']}").json()
        assert run["config"]["seed"] == str(row["params"]["seed"])
        assert {
            k: run["config"]["plugin"]["params"]["rule"][k] for k in row["params"]["rule"]
        } == row["params"]["rule"]
        last = rounds_of(api, row["simulation_id"])[-1]
        assert row["rounds_played"] == last["round"] == 3
        assert (row["final_mean"], row["target"], row["winner_value"], row["n_valid"]) == (
            last["mean"],
            last["target"],
            last["winner_value"],
            last["n_valid"],
        )
        assert row["n_valid"] == 200
    return rows


def test_a_sweep_in_sequence_runs_every_point_one_after_another(cluster):
    pid = deploy(cluster, size=200, name="sweep-sequence")
    with cluster.api() as api, cluster.events(topics="sweep:*") as ws:
        ws.recv(timeout=10)  # hello
        created = launch(api, sweep_file([pid]))
        assert (created["status"], created["runs"], created["mode"]) == ("running", 4, "sequence")
        done = finish(api, created["id"])
        assert done["status"] == "completed", done
        assert (done["launched"], done["finished"], done["error"]) == (4, 4, None)
        rows = check_results(api, cluster, done)
        assert {r["population_id"] for r in rows} == {pid}
        # One after another: each run was created after the one before had finished.
        runs = [api.get(f"/api/simulations/{r['simulation_id']}").json() for r in rows]
        for before, after in zip(runs, runs[1:], strict=False):
            assert after["created_at"] >= before["finished_at"]
        # The same seed and rule give the same game: the seeds differ, so the runs do.
        assert rows[0]["final_mean"] != rows[1]["final_mean"]

        events = []
        while not any(
            e["type"] == "sweep.updated" and e["payload"]["status"] == "completed" for e in events
        ):
            events.append(json.loads(ws.recv(timeout=10)))
    runs_done = [
        e["payload"]
        for e in events
        if e["type"] == "sweep.run" and e["payload"]["status"] == "completed"
    ]
    assert sorted(p["point"] for p in runs_done) == [1, 2, 3, 4]
    assert all(e["topic"] == f"sweep:{created['id']}" for e in events)


def test_a_sweep_in_parallel_spreads_its_runs_over_its_populations(cluster):
    first = deploy(cluster, size=200, name="sweep-parallel-a")
    second = deploy(cluster, size=200, name="sweep-parallel-b")
    with cluster.api() as api:
        created = launch(api, sweep_file([first, second], mode="parallel"))
        done = finish(api, created["id"])
        assert done["status"] == "completed", done
        rows = check_results(api, cluster, done)
        assert {r["population_id"] for r in rows} == {first, second}
        # Paged by point: two pages of two rows, the same rows.
        page1 = api.get(f"/api/sweeps/{created['id']}", params={"limit": 2}).json()["results"]
        assert [r["point"] for r in page1["items"]] == [1, 2] and page1["next_after"] == 2
        page2 = api.get(f"/api/sweeps/{created['id']}", params={"limit": 2, "after": 2}).json()[
            "results"
        ]
        assert page1["items"] + page2["items"] == rows and page2["next_after"] is None
        listed = api.get("/api/sweeps", params={"limit": 1000}).json()["items"]
        assert created["id"] in [s["id"] for s in listed]


def test_a_refused_launch_fails_the_sweep_naming_the_point_and_cancels_its_runs(cluster):
    free = deploy(cluster, size=200, name="sweep-refused-free")
    busy = deploy(cluster, size=200, name="sweep-refused-busy")
    with cluster.api() as api:
        # Someone else's long run holds the second population.
        other = api.post(
            "/api/simulations",
            json={
                "population_id": busy,
                "rounds": 200,
                "policy": {"kind": "synthetic", "latency_s": 0.5},
            },
        )
        assert other.status_code == 202, other.text
        slow = sweep_file([free, busy], mode="parallel", rounds=200)
        slow["base"]["policy"]["latency_s"] = 0.5
        created = launch(api, slow)
        done = finish(api, created["id"])
        assert done["status"] == "failed"
        assert done["error"].startswith(
            f'point 2 (rule={{"preset":"2/3"}}, seed=2) on population {busy}'
        )
        assert f"simulation {other.json()['id']} is" in done["error"]
        rows = done["results"]["items"]
        # Point 1 had started on the free population: cancelled with the sweep.
        assert rows[0]["status"] == "cancelled" and rows[0]["population_id"] == free
        assert [r["simulation_id"] for r in rows[1:]] == [None, None, None]
        assert api.post(f"/api/simulations/{other.json()['id']}/cancel").status_code == 200


def test_cancel_stops_a_sweep_and_delete_removes_its_runs(cluster):
    pid = deploy(cluster, size=200, name="sweep-cancel")
    with cluster.api() as api:
        slow = sweep_file([pid], rounds=200)
        slow["base"]["policy"]["latency_s"] = 0.5
        created = launch(api, slow)
        sid = wait_for(
            lambda: api.get(f"/api/sweeps/{created['id']}").json()["results"]["items"][0][
                "simulation_id"
            ],
            30,
            what="the first run launched",
        )
        assert api.delete(f"/api/sweeps/{created['id']}").status_code == 409
        cancelled = api.post(f"/api/sweeps/{created['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        assert api.get(f"/api/simulations/{sid}").json()["status"] == "cancelled"
        assert api.post(f"/api/sweeps/{created['id']}/cancel").status_code == 409
        detail = api.get(f"/api/sweeps/{created['id']}").json()
        assert detail["launched"] == 1  # nothing launched after the cancel
        # The population is free again.
        again = api.post(
            "/api/simulations",
            json={"population_id": pid, "rounds": 1, "policy": {"kind": "synthetic"}},
        )
        assert again.status_code == 202, again.text
        assert api.delete(f"/api/sweeps/{created['id']}").status_code == 204
        assert api.get(f"/api/sweeps/{created['id']}").status_code == 404
        assert api.get(f"/api/simulations/{sid}").status_code == 404


def test_bad_sweeps_are_refused_naming_the_field_and_nothing_is_stored(cluster):
    pid = deploy(cluster, size=200, name="sweep-invalid")
    with cluster.api() as api:
        before = len(api.get("/api/sweeps", params={"limit": 1000}).json()["items"])

        def refused(document, status: int = 422):
            resp = api.post("/api/sweeps", json=document)
            assert resp.status_code == status, resp.text
            return {tuple(e["loc"]): e["msg"] for e in resp.json()["detail"]}

        found = refused({**sweep_file([pid]), "grid": {"seed": list(range(300))}})
        assert "at most 256" in found[("body", "grid")]
        found = refused({**sweep_file([pid]), "grid": {"policy.latency_s": [1, -1]}})
        assert ("body", "grid", "policy.latency_s", 1) in found
        found = refused(sweep_file([pid, 999_999]))
        assert found[("body", "populations", 1)] == "population 999999 does not exist"
        found = refused(sweep_file([pid], segment_by=["height"]))
        assert "'height' is not an attribute" in found[("body", "points", 1, "segment_by", 0)]
        yaml_body = "name: x\npopulations: [1]\ngrid: {seed: [1]}\ncolour: red\n"
        resp = api.post("/api/sweeps", content=yaml_body, headers=YAML)
        assert resp.status_code == 422
        assert ["body", "colour"] in [e["loc"] for e in resp.json()["detail"]]
        assert len(api.get("/api/sweeps", params={"limit": 1000}).json()["items"]) == before


def test_the_cli_runs_a_sweep_and_prints_its_results_table(cluster, tmp_path):
    pid = deploy(cluster, size=200, name="sweep-cli")
    document = {**sweep_file([pid]), "grid": {"seed": [5, 6]}}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(document))
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": cluster.url,
        "POPULACE_API_TOKEN": cluster.api_token,
    }

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            populace_cmd("sweep", *args), env=env, capture_output=True, text=True, timeout=180
        )

    ran = cli("run", str(path))
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    sweep_id = int(lines[0].split()[1])
    assert "completed, 2/2 runs finished" in ran.stdout
    table = [line.split() for line in lines if line.strip().endswith(("seed=5", "seed=6"))]
    assert [(row[0], row[2], row[3]) for row in table] == [
        ("1", "completed", "3/3"),
        ("2", "completed", "3/3"),
    ]
    with cluster.api() as api:
        rows = api.get(f"/api/sweeps/{sweep_id}").json()["results"]["items"]
    assert [float(row[4]) for row in table] == [float(f"{r['final_mean']:.4g}") for r in rows]
    shown = cli("show", str(sweep_id))
    assert shown.returncode == 0 and shown.stdout.splitlines()[2:] == lines[-2:]
    assert str(sweep_id) in cli("list").stdout

    path.write_text(json.dumps({**document, "grid": {"seed": []}}))
    bad = cli("run", str(path))
    assert bad.returncode != 0
    assert (
        bad.stderr.strip()
        == "populace: POST /api/sweeps -> 422: grid.seed: give at least one value"
    )
    down = cli("list", "--manager", "http://127.0.0.1:9")
    assert down.returncode == 1 and down.stderr.startswith("populace: cannot reach the manager")
    assert len(down.stderr.strip().splitlines()) == 1
    assert cli("cancel", str(sweep_id)).returncode != 0  # already completed: 409


def test_a_manager_restart_mid_sweep_resumes_it_without_launching_a_run_twice(manager_factory):
    manager = manager_factory().start()
    manager.start_workers(procs=2)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="workers online",
    )
    pid = deploy(manager, size=200, name="sweep-restart")
    document = {**sweep_file([pid], rounds=4), "grid": {"seed": [1, 2, 3]}}
    document["base"]["policy"]["latency_s"] = 0.3
    with manager.api() as api:
        created = launch(api, document)

        def second_run_playing():
            rows = api.get(f"/api/sweeps/{created['id']}").json()["results"]["items"]
            return rows[1]["simulation_id"] and (rows[1]["rounds_played"] or 0) >= 1

        wait_for(second_run_playing, 60, what="the second run playing")
    manager.stop(signal.SIGKILL)
    manager.start()
    with manager.api() as api:
        done = finish(api, created["id"])
        assert done["status"] == "completed", done
        rows = done["results"]["items"]
        assert [r["params"] for r in rows] == [{"seed": 1}, {"seed": 2}, {"seed": 3}]
        assert all(r["status"] == "completed" and r["rounds_played"] == 4 for r in rows)
        # One run per point, no more: the population saw exactly three simulations.
        runs = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        assert sorted(r["id"] for r in runs) == sorted(r["simulation_id"] for r in rows)
        assert len(sweep_params_in_store(manager.database_url, created["id"])) == 3
