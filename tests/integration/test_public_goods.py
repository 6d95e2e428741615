"""More simulations on the same runtime: the built-in `public_goods` and `el_farol` plugins
launched through the REST API on real worker processes, played by their own rule-based policies
in groups, their declared metrics kept with each round, their decisions exported in the action's
type (whole numbers of tokens; go or stay), and bad input refused at the field. A resumed run
reads back what each group heard from the stored decisions."""

from __future__ import annotations

import asyncio
import csv
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from backend.db.session import make_engine, make_sessionmaker
from backend.simulations.config import SimulationConfig
from backend.simulations.runner import resume_point
from backend.simulations.spec import game_spec
from populace.registry import installed
from tests.integration import test_simulations_api
from tests.support import wait_for
from tests.support_populations import YAML
from tests.support_simulations import deploy, export, finish, start

# The same module-wide manager with two workers, per database.
cluster = test_simulations_api.cluster

SIZE = 205  # 20 groups of 10 and one of 5


def _launch(api, pid: int, **config) -> dict:
    body = {"population_id": pid, "rounds": 3, "plugin": {"name": "public_goods"}, "seed": 3}
    return start(api, body | config)


def _invalid(api, pid: int, **config) -> tuple[list, str]:
    body = {"population_id": pid, "rounds": 3, "plugin": {"name": "public_goods"}} | config
    resp = api.post("/api/simulations", json=body)
    assert resp.status_code == 422, resp.text
    (error,) = resp.json()["detail"]
    return error["loc"], error["msg"]


def test_public_goods_is_declared_with_its_own_policies(cluster):
    with cluster.api() as api:
        declared = api.get("/api/plugins/public_goods").json()
    assert declared["action"] == {"kind": "integer", "low": 0, "high": 20}
    assert declared["default_policy"] == "conditional_cooperator"
    policies = {p["name"]: p for p in declared["policies"]}
    assert set(policies) == {"conditional_cooperator", "free_rider", "full_cooperator", "llm"}
    assert policies["conditional_cooperator"]["vectorised"] is True
    assert policies["llm"]["uses_llm"] is True and policies["llm"]["params_schema"] is None
    first = policies["conditional_cooperator"]["params_schema"]["properties"]["first"]
    assert (first["default"], first["title"]) == (0.5, "First round")
    assert {"mean_contribution", "free_rider_share", "mean_payoff"} <= {
        m["name"] for m in declared["metrics"]
    }


def test_a_public_goods_run_plays_in_groups_with_its_default_policy(cluster):
    pid = deploy(cluster, size=SIZE, name="commons")
    with cluster.api() as api:
        created = _launch(api, pid)
        done = finish(api, created["id"])
        assert done["status"] == "completed", done.get("error")
        sid = created["id"]
        assert done["config"]["policy"] == {
            "kind": "conditional_cooperator",
            "params": {"first": 0.5},
        }
        assert [m["name"] for m in done["metrics"]] == [
            "mean_contribution",
            "contribution_share",
            "free_rider_share",
            "mean_payoff",
            "n_valid",
            "n_invalid",
        ]
        assert done["config"]["plugin"]["params"] == {
            "endowment": 20,
            "multiplier": 2.0,
            "group_size": 10,
        }
        rounds = api.get(f"/api/simulations/{sid}/rounds").json()["items"]
        decisions = export(api, sid, "csv")
    assert [r["round"] for r in rounds] == [1, 2, 3]
    # Everyone gives half of 20; each group's pot of 10 per member is doubled and shared.
    for played in rounds:
        assert played["metrics"] == {
            "mean_contribution": 10.0,
            "contribution_share": 0.5,
            "free_rider_share": 0.0,
            "mean_payoff": 30.0,
            "n_valid": SIZE,
            "n_invalid": 0,
        }
        assert played["mean"] is None and played["winner_count"] == 0
    rows = list(csv.DictReader(io.StringIO(decisions.decode())))
    assert len(rows) == 3 * SIZE
    # Whole numbers of tokens, as the action's type says.
    assert {(r["value"], r["status"]) for r in rows} == {("10", "valid")}

    # Resumed after its last round, the run hears what each group heard: read back from the
    # stored decisions, resolved again.
    async def read_back():
        engine = make_engine(cluster.database_url)
        try:
            async with make_sessionmaker(engine)() as session:
                config = SimulationConfig.model_validate(done["config"])
                return await resume_point(session, sid, game_spec(config, sid, int(done["seed"])))
        finally:
            await engine.dispose()

    point = asyncio.run(read_back())
    assert point.played == 3 and len(point.metrics) == 3
    assert [t.values for t in point.told] == [{"mean_contribution": 10.0}] * 3
    assert point.groups["mean_contribution"].tolist() == [10.0] * 21
    assert np.array_equal(point.groups["pot"], [100.0] * 20 + [50.0])


def test_free_riders_on_two_processes(cluster):
    pid = deploy(cluster, size=SIZE, name="riders")
    with cluster.api() as api:
        created = _launch(api, pid, policy={"kind": "free_rider"}, segment_by=["education"])
        done = finish(api, created["id"])
        assert done["status"] == "completed", done.get("error")
        rounds = api.get(f"/api/simulations/{created['id']}/rounds").json()["items"]
        lines = export(api, created["id"], "jsonl").decode().splitlines()
    assert {r["metrics"]["free_rider_share"] for r in rounds} == {1.0}
    values = {json.loads(line)["value"] for line in lines}
    assert values == {0} and isinstance(values.pop(), int)
    assert {r["metrics"]["mean_payoff"] for r in rounds} == {20.0}
    # Segments come from the workers' aggregates, as for any plugin.
    assert sum(c["count"] for c in rounds[0]["segments"]["education"].values()) == SIZE


@pytest.mark.parametrize(
    ("config", "loc", "reason"),
    [
        (
            {"policy": {"kind": "level_k"}},
            ["body", "policy", "kind"],
            "plugin 'public_goods' has no policy 'level_k' (it has: conditional_cooperator, "
            "free_rider, full_cooperator, llm)",
        ),
        (
            {"policy": {"kind": "conditional_cooperator", "params": {"first": 2}}},
            ["body", "policy", "params", "first"],
            "less than or equal to 1",
        ),
        (
            {"plugin": {"name": "public_goods", "params": {"multiplier": 12}}},
            ["body", "plugin", "params", "multiplier"],
            "at most group_size (10)",
        ),
        (
            {"prompt": {"system": "rational"}},
            ["body", "prompt"],
            "plugin 'public_goods' plays rule-based policies: it has no prompts",
        ),
    ],
)
def test_bad_input_is_refused_at_the_field(cluster, config, loc, reason):
    with cluster.api() as api:
        before = api.get("/api/simulations", params={"limit": 1000}).json()["items"]
        assert _invalid(api, 1, **config)[0] == loc
        assert reason in _invalid(api, 1, **config)[1]
        assert api.get("/api/simulations", params={"limit": 1000}).json()["items"] == before


def test_el_farol_choices_are_played_and_exported_as_options(cluster):
    pid = deploy(cluster, size=SIZE, name="bar")
    with cluster.api() as api:
        declared = api.get("/api/plugins/el_farol").json()
        assert declared["action"] == {"kind": "choice", "options": ["go", "stay"]}
        policy = {"kind": "predictor", "params": {"first": 1.0, "noise": 0.0}}
        created = start(
            api,
            {"population_id": pid, "rounds": 3, "plugin": {"name": "el_farol"}, "seed": 3}
            | {"policy": policy},
        )
        done = finish(api, created["id"])
        assert done["status"] == "completed", done.get("error")
        sid = created["id"]
        rounds = api.get(f"/api/simulations/{sid}/rounds").json()["items"]
        exported = {fmt: export(api, sid, fmt) for fmt in ("csv", "jsonl", "parquet")}
        # An agent's page shows its choices by name too.
        first_agent = (pid << 32) | 0
        mine = api.get(f"/api/agents/{first_agent}/decisions").json()["items"]
    # All go to a crowded bar, then all stay home, then all go again.
    assert [r["metrics"]["go_ratio"] for r in rounds] == [1.0, 0.0, 1.0]
    assert [r["metrics"]["mean_payoff"] for r in rounds] == [0.0, 5.0, 0.0]
    expected = ["go"] * SIZE + ["stay"] * SIZE + ["go"] * SIZE
    rows = list(csv.DictReader(io.StringIO(exported["csv"].decode())))
    assert [r["value"] for r in rows] == expected
    lines = exported["jsonl"].decode().splitlines()
    assert [json.loads(line)["value"] for line in lines] == expected
    table = pq.read_table(io.BytesIO(exported["parquet"]))
    assert (
        str(table.schema.field("value").type)
        == "dictionary<values=string, indices=int32, ordered=0>"
    )
    assert table.column("value").to_pylist() == expected
    assert [(d["round"], d["action"]) for d in mine] == [(1, "go"), (2, "stay"), (3, "go")]


def test_the_out_of_tree_example_plays_on_two_processes(cluster):
    # examples/plugins/volunteer, installed by `make install-examples` as a user installs theirs.
    assert "volunteer" in installed().plugins, "run `make install-examples` first"
    pid = deploy(cluster, size=SIZE, name="helpers")
    with cluster.api() as api:
        declared = api.get("/api/plugins/volunteer").json()
        assert declared["default_policy"] == "equilibrium"
        body = {"population_id": pid, "rounds": 2, "seed": 3}
        created = start(api, body | {"plugin": {"name": "volunteer", "params": {"group_size": 5}}})
        done = finish(api, created["id"])
        assert done["status"] == "completed", done.get("error")
        rounds = api.get(f"/api/simulations/{created['id']}/rounds").json()["items"]
        lines = export(api, created["id"], "jsonl").decode().splitlines()
        hosts = api.get(f"/api/populations/{pid}").json()["agents_per_worker"]
    assert len(hosts) == 2  # the population is spread over both worker processes
    # p* = 1 - 0.2 ** (1/4), about 0.33: with 205 agents the share lands near it.
    assert all(0.2 < r["metrics"]["volunteer_share"] < 0.46 for r in rounds)
    assert all(r["metrics"]["n_valid"] == SIZE for r in rounds)
    assert {json.loads(line)["value"] for line in lines} == {True, False}


def test_a_population_without_personas_plays_a_rule_based_plugin(cluster):
    plain = "name: plain\nsize: 50\ndistributions:\n  - {name: zone, categories: [{name: a, weight: 1}]}\n"
    with cluster.api() as api:
        resp = api.post("/api/populations", content=plain, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed", 60)
        query = {"population_id": pid, "limit": 5}
        agents = api.get("/api/agents", params=query).json()["items"]
        assert [a["persona"] for a in agents] == [""] * 5
        done = finish(api, _launch(api, pid, rounds=1)["id"])
    assert done["status"] == "completed", done.get("error")
