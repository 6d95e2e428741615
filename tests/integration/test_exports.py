"""Research exports end to end: decisions as CSV, JSON lines and Parquet joined with the agents'
attributes and personas, and the run's reproducibility record, from a real manager (Postgres and
SQLite) with two real worker processes that played a 10^5-agent synthetic round."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import Manager, populace_cmd, reset_postgres, running_cluster, wait_for
from tests.support_populations import deploy_population, population_yaml

FIXED = ["round", "agent_id", "value", "status", "response"]
ATTRIBUTES = ["education", "occupation", "age", "age_value"]
BIG = 100_000
FINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(
    scope="module", params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
)
def cluster(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"exports-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    with running_cluster(tmp, url) as manager:
        yield manager


def _one_round(manager: Manager, pid: int) -> int:
    """A finished one-round synthetic simulation of the population (every agent answers)."""
    config = {
        "population_id": pid,
        "name": "export me",
        "rounds": 1,
        "policy": {"kind": "synthetic", "latency_s": 0},
        "seed": 2**63 - 25,
    }
    with manager.api() as api:
        resp = api.post("/api/simulations", json=config)
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        done = wait_for(
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] in FINAL and s,
            300,
            what=f"simulation {sid} to end",
        )
    assert done["status"] == "completed", done.get("error")
    return sid


@pytest.fixture(scope="module")
def big(cluster) -> tuple[int, int]:
    """(population id, simulation id) of a 10^5-agent population after one round."""
    config = population_yaml("education-occupation-age", name="export study", size=BIG)
    with cluster.api() as api:
        pid = deploy_population(api, config, wait_s=300)["id"]
    return pid, _one_round(cluster, pid)


def _export(manager: Manager, sid: int, **params) -> httpx.Response:
    with manager.api() as api:
        api.timeout = httpx.Timeout(300)
        resp = api.get(f"/api/simulations/{sid}/decisions", params=params)
    assert resp.status_code == 200, resp.text
    return resp


def _record(manager: Manager, sid: int, token: str | None = None) -> dict:
    with httpx.Client(
        base_url=manager.url, headers={"Authorization": f"Bearer {token or manager.api_token}"}
    ) as client:
        resp = client.get(f"/api/simulations/{sid}/record")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _parquet(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def _agent_text(value) -> str:
    """An attribute as exported: text (bin values are stored as numbers)."""
    return value if isinstance(value, str) else str(value)


def test_parquet_of_a_100k_agent_round_equals_the_csv_export(cluster, big):
    _, sid = big
    plain = _export(cluster, sid, format="csv").content
    joined = _export(cluster, sid, format="csv", attributes="true")
    parquet = _export(cluster, sid, format="parquet", attributes="true")
    assert parquet.headers["content-type"] == "application/vnd.apache.parquet"
    assert f"simulation-{sid}-decisions.parquet" in parquet.headers["content-disposition"]

    table = _parquet(parquet.content)
    assert table.num_rows == BIG and table.column_names == FIXED + ATTRIBUTES
    assert pq.ParquetFile(io.BytesIO(parquet.content)).metadata.num_row_groups > 1, "streamed"
    schema = table.schema
    assert (schema.field("round").type, schema.field("agent_id").type) == (pa.int32(), pa.int64())
    assert schema.field("value").type == pa.float64()
    assert all(schema.field(name).type == pa.string() for name in ATTRIBUTES + ["response"])

    rows = list(csv.reader(io.StringIO(joined.text)))
    assert rows[0] == FIXED + ATTRIBUTES and len(rows) == BIG + 1
    columns = list(zip(*rows[1:], strict=True))
    assert table.column("round").to_pylist() == [int(x) for x in columns[0]]
    assert table.column("agent_id").to_pylist() == [int(x) for x in columns[1]]
    assert table.column("value").to_pylist() == [float(x) if x else None for x in columns[2]]
    assert table.column("status").to_pylist() == list(columns[3])
    assert [r or "" for r in table.column("response").to_pylist()] == list(columns[4])
    for offset, name in enumerate(ATTRIBUTES, start=5):
        values = table.column(name).to_pylist()
        assert None not in values and values == list(columns[offset]), name
    assert set(table.column("education").to_pylist()) == {
        "primary school",
        "high school",
        "bachelor",
        "doctorate",
    }

    # Without the join the CSV is the plain export; with it, each line only gains columns.
    plain_lines = plain.decode().splitlines()
    assert plain_lines[0] == ",".join(FIXED)
    assert all(
        line.startswith(base + ",")
        for base, line in zip(plain_lines[1:], joined.text.splitlines()[1:], strict=True)
    )
    # Same stored rows, same bytes.
    assert _export(cluster, sid, format="parquet", attributes="true").content == parquet.content


def test_the_parquet_record_is_the_record_route(cluster, big):
    pid, sid = big
    table = _parquet(_export(cluster, sid, format="parquet", round=1).content)
    assert table.column_names == FIXED and table.num_rows == BIG
    embedded = json.loads(table.schema.metadata[b"populace.record"])
    # The viewer (read-only) token may read the record.
    record = _record(cluster, sid, token=cluster.viewer_token)
    assert embedded == record
    simulation, population = record["simulation"], record["population"]
    assert simulation["id"] == sid and simulation["population_id"] == pid
    assert simulation["seed"] == str(2**63 - 25) and simulation["rounds"] == 1
    assert simulation["config"]["policy"]["kind"] == "synthetic" and simulation["version"]
    assert simulation["models"] == [] and isinstance(simulation["record"], dict)
    assert population["id"] == pid and population["size"] == BIG and population["seed"] == "13"
    assert [d["name"] for d in population["config"]["distributions"]] == ATTRIBUTES[:3]
    with cluster.api() as api:
        assert api.get("/api/simulations/999999/record").status_code == 404


def test_attributes_and_persona_are_the_agents_own(cluster, big):
    pid, sid = big
    lines = _export(cluster, sid, format="jsonl", attributes="true", persona="true").text
    decisions = [json.loads(line) for line in lines.splitlines()]
    assert len(decisions) == BIG
    by_agent = {d["agent_id"]: d for d in decisions}
    with cluster.api() as api:
        for index in (0, 1, 4_242, 77_777, BIG - 1):
            agent = api.get(f"/api/agents/{(pid << 32) | index}").json()
            exported = by_agent[agent["id"]]
            assert {name: exported[name] for name in ATTRIBUTES} == {
                name: _agent_text(agent["attributes"][name]) for name in ATTRIBUTES
            }
            assert exported["persona"] == agent["persona"] and agent["persona"]
            assert list(exported)[:5] == FIXED


def test_bad_format_or_flag_is_a_422_naming_the_field(cluster, big):
    _, sid = big
    with cluster.api() as api:
        for params, field in (
            ({"format": "xlsx"}, "format"),
            ({"attributes": "maybe"}, "attributes"),
            ({"format": "parquet", "persona": "2"}, "persona"),
        ):
            resp = api.get(f"/api/simulations/{sid}/decisions", params=params)
            assert resp.status_code == 422, (params, resp.text)
            assert [e["loc"][-1] for e in resp.json()["detail"]] == [field], resp.text


def test_cli_writes_a_loadable_parquet_file_and_the_record(cluster, big, tmp_path):
    _, sid = big
    out, record = tmp_path / "decisions.parquet", tmp_path / "record.json"
    run = subprocess.run(
        populace_cmd(
            "simulation",
            "export",
            str(sid),
            "--format",
            "parquet",
            "--attributes",
            "-o",
            str(out),
            "--record",
            str(record),
        ),
        env={
            **os.environ,
            "POPULACE_MANAGER_URL": cluster.url,
            "POPULACE_API_TOKEN": cluster.api_token,
        },
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == b""
    # Not a terminal: no progress redraws, one summary line.
    assert run.stderr.decode().splitlines() == [
        f"simulation {sid}: exported 100,000 rows ({out.stat().st_size / 2**20:.1f} MiB) to {out}"
    ]
    assert out.read_bytes() == _export(cluster, sid, format="parquet", attributes="true").content
    assert pq.read_table(out).num_rows == BIG
    assert json.loads(record.read_text()) == _record(cluster, sid)


def test_a_deleted_populations_run_still_exports_with_empty_attributes(cluster):
    config = population_yaml("education-occupation-age", name="short-lived", size=300)
    with cluster.api() as api:
        pid = deploy_population(api, config, wait_s=300)["id"]
    sid = _one_round(cluster, pid)
    before = _export(cluster, sid, format="csv").content
    with cluster.api() as api:
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            120,
            what="population deleted",
        )
        assert api.get(f"/api/agents/{pid << 32}").status_code == 404, "agent rows are gone"
    assert _export(cluster, sid, format="csv").content == before
    table = _parquet(
        _export(cluster, sid, format="parquet", attributes="true", persona="true").content
    )
    assert table.num_rows == 300 and table.column_names == FIXED + ATTRIBUTES + ["persona"]
    for name in ATTRIBUTES + ["persona"]:
        assert table.column(name).null_count == 300, name
    assert table.column("status").to_pylist() == ["valid"] * 300
    joined = list(csv.reader(io.StringIO(_export(cluster, sid, attributes="true").text)))
    assert joined[0] == FIXED + ATTRIBUTES and {tuple(r[5:]) for r in joined[1:]} == {("",) * 4}
    record = json.loads(table.schema.metadata[b"populace.record"])
    assert record == _record(cluster, sid) and record["population"]["id"] == pid
