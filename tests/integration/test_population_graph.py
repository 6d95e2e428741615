"""Populations with a graph, end to end on the manager side: deployed through the REST API onto
two real worker processes, described in the record, stored in a file that goes with the
population, sent to the workers row by row, browsed by neighbour; bad graphs and bad edge lists
are refused before anything is stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from backend.graphs.rows import take_rows
from backend.populations.graph import rows_of
from backend.workers.grpc_client import AgentColumns
from tests.support import empty_cluster, wait_for, worker_client
from tests.support_populations import deploy_population
from worker_server.agents import AgentStore, decode_batch
from worker_server.graphs.stats import degree_stats
from worker_server.graphs.storage import open_graph
from worker_server.rpc import worker_pb2 as pb

DISTRIBUTIONS = [
    {"name": "group", "categories": [{"name": "a", "weight": 0.5}, {"name": "b", "weight": 0.5}]}
]


@pytest.fixture
def cluster(manager_factory, database_url):
    """A manager on SQLite or Postgres with two worker processes (two nodes)."""
    manager = manager_factory(database_url=database_url).start()
    for _ in range(2):
        manager.start_workers(procs=1)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="2 workers online",
    )
    return manager


UPLOAD_LIMIT = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def shared_small_cluster(module_manager_factory):
    # The keeper checks every population each second (restores what a worker lost).
    # Uploads get a limit of their own (8 MiB here), above every other body's 4 MiB.
    env = {"POPULACE_REAPER_INTERVAL_S": "1", "POPULACE_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)}
    manager = module_manager_factory(extra_env=env).start()
    for _ in range(2):
        manager.start_workers(procs=1)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="2 workers online",
    )
    return manager


@pytest.fixture
def small_cluster(shared_small_cluster):
    """The module's small cluster as a fresh one would be: no population (so no graph file),
    both workers online and empty."""
    empty_cluster(shared_small_cluster, workers=2)
    return shared_small_cluster


def _graph_file(manager, pid: int) -> Path:
    return manager.tmp / "data" / "graphs" / f"population-{pid}.graph"


def _worker_refuses_a_row_less_batch(address: str, pid: int) -> str:
    """A batch of the population without graph rows: a worker holding the population's rows
    refuses it (INVALID_ARGUMENT naming `graph`); nothing is created either way."""

    async def call():
        async with worker_client(address) as client:
            batch = pb.AgentBatch(population_id=str(pid), agent_ids=[(pid << 32) | 4_000_000])
            try:
                await client.stub.CreateAgents(iter([batch]), metadata=client._metadata)
            except grpc.aio.AioRpcError as exc:
                return exc.details()
            await client.delete_agents(ids=[(pid << 32) | 4_000_000])
            return ""

    return asyncio.run(call())


def test_erdos_renyi_deploy_record_rows_neighbours_and_delete(cluster):
    manager = cluster
    config = {
        "name": "er",
        "size": 600,
        "seed": 5,
        "distributions": DISTRIBUTIONS,
        "graph": {"kind": "erdos_renyi", "mean_degree": 6},
    }
    with manager.api() as api:
        population = deploy_population(api, config, may_fail=True)
        assert population["status"] == "deployed", population
        pid = population["id"]
        stats = population["graph"]
        assert stats["kind"] == "erdos_renyi" and stats["nodes"] == 600
        assert 4.5 < stats["mean_degree"] < 7.5
        assert sum(stats["degree_histogram"]) == 600
        assert stats["components"] >= 1 and 0 < stats["largest_component"] <= 600
        assert 0 <= stats["clustering"]["clustering"] < 0.1 and stats["clustering"]["stderr"] >= 0
        assert 0.2 < stats["cut_fraction"] < 0.8  # about half: a random graph over two ranges
        assert "file" not in stats
        listed = api.get("/api/populations").json()["items"]
        assert next(p for p in listed if p["id"] == pid)["graph"]["edges"] == stats["edges"]

        # The file is the graph the record describes, with the spec and seed in its meta.
        path = _graph_file(manager, pid)
        stored = open_graph(path, verify=True)
        assert degree_stats(stored.graph) == {k: stats[k] for k in degree_stats(stored.graph)}
        assert stored.meta["spec"] == config["graph"] and stored.meta["seed"] == "5"

        # Each worker holds the rows of the agents it hosts.
        per_worker = population["agents_per_worker"]
        assert len(per_worker) == 2 and sum(per_worker.values()) == 600
        for worker in manager.workers():
            assert "graph" in _worker_refuses_a_row_less_batch(worker["address"], pid)
        # What the manager sends for a share (the deploy's and the keeper's path) decodes to
        # the file's rows on a worker's store.
        ids = (np.int64(pid) << 32) | np.arange(100, 400, dtype=np.int64)
        columns = AgentColumns(str(pid), ids, graph=rows_of(path, ids))
        share = columns.take(np.arange(0, 300, 2))
        store = AgentStore(1000)
        with store.upload() as upload:
            for i, message in enumerate(share.batches(size=40)):
                upload.add(decode_batch(message, i))
            upload.commit()
        hosted = store.population(str(pid))
        offsets, numbers = hosted.neighbour_block(np.arange(len(hosted)))
        for row, agent in enumerate(hosted.ids.tolist()):
            expected = stored.graph.neighbours(agent & 0xFFFFFFFF).tolist()
            assert numbers[offsets[row] : offsets[row + 1]].tolist() == expected
        assert take_rows(columns.graph, slice(0, 3)).nodes == 3

        # Neighbours, paged by id.
        agent = (pid << 32) | 7
        expected = [(pid << 32) | int(n) for n in stored.graph.neighbours(7)]
        seen, after = [], None
        while True:
            params = {"limit": 2, **({"after": after} if after is not None else {})}
            page = api.get(f"/api/agents/{agent}/neighbors", params=params).json()
            seen += page["items"]
            after = page["next_after"]
            if after is None:
                break
        assert [n["id"] for n in seen] == expected
        assert all(n["number"] == n["id"] & 0xFFFFFFFF for n in seen)
        assert all(n["attributes"]["group"] in ("a", "b") and n["value"] is None for n in seen)
        assert api.get(f"/api/agents/{(pid << 32) | 999_999}/neighbors").status_code == 404

        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="deleted",
        )
        assert not path.exists()


def test_cliques_and_populations_without_a_graph(small_cluster):
    manager = small_cluster
    with manager.api() as api:
        population = deploy_population(
            api,
            {
                "name": "cliques",
                "size": 100,
                "distributions": DISTRIBUTIONS,
                "graph": {"kind": "cliques", "size": 10},
            },
            may_fail=True,
        )
        assert population["status"] == "deployed", population
        stats = population["graph"]
        assert stats["edges"] == 10 * 45 and stats["components"] == 10
        assert stats["largest_component"] == 10 and stats["clustering"]["clustering"] == 1.0
        assert stats["min_degree"] == stats["max_degree"] == 9
        assert stats["cut_fraction"] <= 0.1  # at most one clique straddles the two ranges
        pid = population["id"]
        page = api.get(f"/api/agents/{(pid << 32) | 12}/neighbors").json()
        assert [n["number"] for n in page["items"]] == [10, 11, 13, 14, 15, 16, 17, 18, 19]

        # Agents a worker lost are restored by the keeper, with their rows read from the file.
        address = manager.workers()[0]["address"]

        async def drop_and_count(drop: bool) -> int:
            async with worker_client(address) as client:
                if drop:
                    await client.delete_agents(population_id=str(pid))
                return (await client.info()).population_agents.get(str(pid), 0)

        assert asyncio.run(drop_and_count(True)) == 0
        wait_for(lambda: asyncio.run(drop_and_count(False)) > 0, 30, what="restored")
        assert "graph" in _worker_refuses_a_row_less_batch(address, pid)

        plain = deploy_population(
            api, {"name": "plain", "size": 20, "distributions": DISTRIBUTIONS}, may_fail=True
        )
        assert plain["graph"] is None
        page = api.get(f"/api/agents/{(plain['id'] << 32) | 3}/neighbors").json()
        assert page == {"items": [], "next_after": None}


def test_bad_graphs_are_422_naming_the_field(small_cluster):
    manager = small_cluster
    with manager.api() as api:
        before = api.get("/api/populations").json()["items"]
        base = {"name": "bad", "size": 100, "distributions": DISTRIBUTIONS}
        resp = api.post(
            "/api/populations", json={**base, "graph": {"kind": "erdos_renyi", "mean_degree": 500}}
        )
        assert resp.status_code == 422, resp.text
        (issue,) = resp.json()["detail"]
        assert issue["loc"] == ["body", "graph", "mean_degree"] and "size - 1 = 99" in issue["msg"]
        resp = api.post("/api/populations", json={**base, "graph": {"kind": "cliques", "size": 7}})
        assert resp.status_code == 422
        assert resp.json()["detail"][0]["loc"] == ["body", "graph", "size"]
        resp = api.post(
            "/api/populations/validate",
            json={**base, "graph": {"kind": "watts_strogatz", "k": 100, "p": 0.1}},
        )
        assert resp.status_code == 422 and resp.json()["detail"][0]["loc"][-1] == "k"
        assert api.get("/api/populations").json()["items"] == before


def test_edge_list_uploads_refusals_and_deploy(small_cluster):
    manager = small_cluster
    uploads = manager.tmp / "data" / "uploads"
    with manager.api() as api:
        duplicated = b"source,target\n1,2\n2,3\n3,1\n2,1\n4,1\n"
        resp = api.post("/api/uploads", params={"name": "dup.csv"}, content=duplicated)
        assert resp.status_code == 201, resp.text
        assert resp.json()["bytes"] == len(duplicated)
        base = {"name": "edges", "size": 4, "distributions": DISTRIBUTIONS}
        before = api.get("/api/populations").json()["items"]
        resp = api.post(
            "/api/populations", json={**base, "graph": {"kind": "edge_list", "upload": "dup.csv"}}
        )
        assert resp.status_code == 422, resp.text
        (issue,) = resp.json()["detail"]
        assert issue["loc"] == ["body", "graph", "upload"]
        assert "1 duplicate edges" in issue["msg"] and "line 5" in issue["msg"], issue
        assert api.get("/api/populations").json()["items"] == before
        assert not (manager.tmp / "data" / "graphs").exists() or not any(
            (manager.tmp / "data" / "graphs").iterdir()
        )

        # Multipart, named by the part's file name; the edge list and its node table.
        good = b"source,target\n10,20\n20,30\n30,10\n40,10\n"
        resp = api.post("/api/uploads", files={"file": ("../edges.csv", good, "text/csv")})
        assert resp.status_code == 201 and resp.json()["name"] == "edges.csv"
        nodes = b"id,club\n10,x\n20,x\n30,y\n40,y\n50,z\n"
        api.post("/api/uploads", params={"name": "nodes.csv"}, content=nodes).raise_for_status()
        assert api.post("/api/uploads", params={"name": "../x"}, content=b"1").status_code == 422
        names = [u["name"] for u in api.get("/api/uploads").json()["items"]]
        assert names == ["dup.csv", "edges.csv", "nodes.csv"]
        page = api.get("/api/uploads", params={"limit": 2}).json()
        assert page["next_after"] == "edges.csv"

        resp = api.post(
            "/api/populations",
            json={**base, "size": 3, "graph": {"kind": "edge_list", "upload": "edges.csv"}},
        )
        assert resp.status_code == 422
        (issue,) = resp.json()["detail"]
        assert issue["loc"] == ["body", "size"] and "set size to 4" in issue["msg"]
        spec = {
            "kind": "edge_list",
            "upload": "edges.csv",
            "nodes": {"upload": "nodes.csv", "id_column": "id"},
        }
        # The node table's columns fill persona placeholders; others are refused, naming them.
        unknown = {"mode": "template", "template": "In {club}, {nope}."}
        resp = api.post(
            "/api/populations", json={**base, "size": 5, "graph": spec, "persona": unknown}
        )
        assert resp.status_code == 422, resp.text
        (issue,) = resp.json()["detail"]
        assert issue["loc"] == ["body", "persona", "template"], issue
        assert "unknown placeholder {nope}" in issue["msg"] and "club" in issue["msg"], issue
        persona = {"mode": "template", "template": "A member of club {club}, group {group}."}
        population = deploy_population(
            api, {**base, "size": 5, "graph": spec, "persona": persona}, may_fail=True
        )
        assert population["status"] == "deployed", population
        first = api.get(f"/api/agents/{population['id'] << 32}").json()  # id 10: club x
        assert first["persona"] == f"A member of club x, group {first['attributes']['group']}."
        assert population["graph"]["edges"] == 4 and population["graph"]["isolated"] == 1
        pid = population["id"]
        page = api.get(f"/api/agents/{pid << 32}/neighbors").json()  # id 10: 20, 30, 40
        assert [n["number"] for n in page["items"]] == [1, 2, 3]
        assert [n["attributes"]["club"] for n in page["items"]] == ["x", "y", "y"]

        for method, path in (("GET", "/api/uploads"), ("DELETE", "/api/uploads/nodes.csv")):
            assert httpx.request(method, manager.url + path).status_code == 401
        viewer = {"Authorization": f"Bearer {manager.viewer_token}"}
        assert httpx.get(manager.url + "/api/uploads", headers=viewer).status_code == 200
        resp = httpx.post(manager.url + "/api/uploads?name=v.csv", content=b"1", headers=viewer)
        assert resp.status_code == 403
        assert api.delete("/api/uploads/dup.csv").status_code == 204
        assert api.delete("/api/uploads/dup.csv").status_code == 404
        assert not (uploads / "dup.csv").exists()
        # The deployed population's files stay: the keeper reads them to re-place agents.
        for used in ("edges.csv", "nodes.csv"):
            refused = api.delete(f"/api/uploads/{used}")
            assert refused.status_code == 409, refused.text
            assert f"read by population {pid}" in refused.json()["detail"]
            assert (uploads / used).exists()

        # Past the 4 MiB body limit, within the uploads' own: raw, chunked and multipart.
        big = b"source,target\n" + b"".join(b"%d,%d\n" % (i, i + 1) for i in range(600_000))
        assert 4 * 1024 * 1024 < len(big) < UPLOAD_LIMIT
        chunked = (big[i : i + 65536] for i in range(0, len(big), 65536))
        for sent in (
            api.post("/api/uploads", params={"name": "big.csv"}, content=big),
            api.post("/api/uploads", params={"name": "big.csv"}, content=chunked),
            api.post("/api/uploads", files={"file": ("big.csv", big, "text/csv")}),
        ):
            assert sent.status_code == 201, sent.text
            assert (uploads / "big.csv").read_bytes() == big
        # Past the uploads' limit: a 413 naming it, declared or counted as it streams; the
        # stored file of that name stays as it was, and nothing half-written is left.
        huge = big + big
        over = (huge[i : i + 65536] for i in range(0, len(huge), 65536))
        for sent in (
            api.post("/api/uploads", params={"name": "big.csv"}, content=huge),
            api.post("/api/uploads", params={"name": "big.csv"}, content=over),
        ):
            assert sent.status_code == 413, sent.text
            assert "POPULACE_MAX_UPLOAD_BYTES" in sent.json()["detail"], sent.text
        assert (uploads / "big.csv").read_bytes() == big
        assert sorted(p.name for p in uploads.iterdir()) == ["big.csv", "edges.csv", "nodes.csv"]
        broken = api.post(
            "/api/uploads",
            params={"name": "x.csv"},
            content=b"--b\r\nContent-Disposition: form-data; name=file\r\n",
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )
        assert broken.status_code == 422 and "a part has no headers" in broken.text
        assert sorted(p.name for p in uploads.iterdir()) == ["big.csv", "edges.csv", "nodes.csv"]
