"""Several nodes on one machine (tests/netns.py): each worker node in its own network namespace,
reaching the manager (in the root namespace, next to Postgres) over a bridge, and dialled back by
the manager at the address it advertises. A deploy and runs across nodes, a partition that
cuts a node off between runs and heals, a link cut mid-run, and TLS on both planes across the
namespaces."""

from __future__ import annotations

import asyncio
import csv
import io
import os
import subprocess
from pathlib import Path

import grpc
import pytest

from tests.netns import NetnsBed
from tests.support import (
    WORKER_RPC_SECRET,
    Manager,
    populace_cmd,
    stop_process,
    wait_for,
    worker_client,
    worker_metadata,
)
from tests.support_faults import FAST
from tests.support_simulations import deploy, export, finish, level_k, rounds_of, start
from worker_server.rpc import worker_pb2, worker_pb2_grpc

pytestmark = pytest.mark.postgres

NODES = ("node-a", "node-b")


@pytest.fixture
def bed():
    with NetnsBed(len(NODES)) as made:
        yield made


@pytest.fixture
def cluster(bed, manager_factory, postgres_url, tmp_path):
    """make(**env): a manager (fresh Postgres database) listening on the bridge IP;
    start_node(name, ...): a `populace worker` node in that node's namespace (`namespace` maps
    node names to namespaces). The nodes are stopped before the bed is torn down."""
    nodes: list[subprocess.Popen] = []

    class Cluster:
        manager: Manager
        namespace = dict(zip(NODES, bed.names, strict=True))

        def make(self, **extra_env: str) -> Manager:
            self.manager = manager_factory(
                database_url=postgres_url, host=bed.bridge_ip, extra_env=extra_env
            ).start()
            return self.manager

        def log_path(self, name: str) -> Path:
            return tmp_path / f"{name}.log"

        def log(self, name: str) -> str:
            return self.log_path(name).read_text(errors="replace")

        def start_node(
            self, name: str, procs: int = 2, listen: str | None = None, **env: str
        ) -> subprocess.Popen:
            """The real flow: the join token in the environment, never on the command line."""
            ns = self.namespace[name]
            argv = populace_cmd(
                "worker",
                "--manager",
                self.manager.url,
                "--host",
                listen or bed.ip(ns),
                "--advertise-host",
                bed.ip(ns),
                "--node",
                name,
                "--procs",
                str(procs),
            )
            environment = {
                **os.environ,
                "POPULACE_JOIN_TOKEN": self.manager.join_token,
                "POPULACE_RPC_SECRET": WORKER_RPC_SECRET,  # so the test can ask them too
                **env,
            }
            log = open(self.log_path(name), "ab")  # noqa: SIM115 (the process's)
            proc = bed.run(ns, argv, env=environment, cwd=tmp_path, stdout=log, stderr=log)
            nodes.append(proc)
            assert self.manager.join_token not in " ".join(argv)
            wait_for(
                lambda: proc.poll() is None and len(online(self.manager, name)) == procs,
                60,
                what=f"{name} online (log: {self.log_path(name)})",
            )
            return proc

    yield Cluster()
    for proc in nodes:
        stop_process(proc)


def online(manager: Manager, node: str | None = None) -> list[dict]:
    return [
        w
        for w in manager.workers()
        if w["state"] == "online" and (node is None or w["node"] == node)
    ]


def held(addresses: list[str], population_id: int) -> dict[str, set[int]]:
    """The ids of the population's agents each worker says it holds (asked over gRPC)."""

    async def read() -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for address in addresses:
            ids: set[int] = set()
            after = None
            async with worker_client(address) as client:
                while True:
                    page = await client.list_agents(str(population_id), after=after, limit=1000)
                    ids.update(a.id for a in page.agents)
                    if not page.HasField("next_after_id"):
                        break
                    after = page.next_after_id
            out[address] = ids
        return out

    return asyncio.run(read())


def placed(api, population_id: int) -> dict[int | None, set[int]]:
    """The store's placement: worker id -> the ids of the population's agents placed there."""
    out: dict[int | None, set[int]] = {}
    after = None
    while True:
        params = {"population_id": population_id, "limit": 1000}
        if after is not None:
            params["after"] = after
        page = api.get("/api/agents", params=params).json()
        for agent in page["items"]:
            out.setdefault(agent["worker_id"], set()).add(agent["id"])
        if page["next_after"] is None:
            return out
        after = page["next_after"]


def decisions(api, sid: int) -> list[dict]:
    return list(csv.DictReader(io.StringIO(export(api, sid, "csv").decode())))


def assert_every_agent_decided(api, sid: int, rounds: int, agent_ids: set[int]) -> None:
    """Every round kept, whole, and every agent's decision stored once per round."""
    played = rounds_of(api, sid)
    assert [r["round"] for r in played] == list(range(1, rounds + 1))
    n = len(agent_ids)
    assert all(r["n_valid"] + r["n_invalid"] + r["n_late"] == n for r in played), played
    assert all(r["n_lost"] == 0 for r in played), played
    rows = decisions(api, sid)
    for number in range(1, rounds + 1):
        ids = [int(row["agent_id"]) for row in rows if int(row["round"]) == number]
        assert len(ids) == n and set(ids) == agent_ids, f"round {number}"
    assert all(row["status"] != "lost" for row in rows)


def test_a_population_deploys_over_two_namespaced_nodes_and_a_run_completes(bed, cluster):
    manager = cluster.make()
    assert manager.url.startswith(f"http://{bed.bridge_ip}:")
    # Node A listens on every interface of its namespace, node B on its address only; each
    # advertises its namespace's address, and that is what the manager dials.
    cluster.start_node("node-a", listen="0.0.0.0")
    cluster.start_node("node-b")
    workers = online(manager)
    for name, ns in cluster.namespace.items():
        addresses = [w["address"] for w in workers if w["node"] == name]
        assert len(addresses) == 2 and all(a.startswith(f"{bed.ip(ns)}:") for a in addresses)

    pid = deploy(manager, size=2000)
    with manager.api() as api:
        population = api.get(f"/api/populations/{pid}").json()
        assert (population["status"], population["hosted"]) == ("deployed", 2000)
        per_worker = {int(k): v for k, v in population["agents_per_worker"].items()}
        for name in NODES:
            ids = {w["id"] for w in workers if w["node"] == name}
            assert sum(per_worker.get(i, 0) for i in ids) > 0, f"{name} hosts no agents"

        # What the store says each worker holds is what each worker, asked across the bridge,
        # holds; no agent twice.
        store = placed(api, pid)
        assert None not in store
        agent_ids = set().union(*store.values())
        assert len(agent_ids) == 2000
        holding = held([w["address"] for w in workers], pid)
        for w in workers:
            assert holding[w["address"]] == store.get(w["id"], set()), w["address"]

        sid = start(api, level_k(pid, rounds=3))["id"]
        done = finish(api, sid)
        assert done["status"] == "completed", done
        assert done["lost_agents"] == 0
        assert_every_agent_decided(api, sid, 3, agent_ids)


def test_a_partitioned_node_loses_its_agents_to_the_other_and_rejoins_without_duplicates(
    bed, cluster
):
    # Quick detection and re-placement (as in test_faults), and no start-up grace before a
    # silent worker may be marked offline.
    manager = cluster.make(**FAST, POPULACE_STARTUP_GRACE_S="0")
    cluster.start_node("node-a")
    cluster.start_node("node-b")
    a_before = {w["id"]: w for w in online(manager, "node-a")}
    b_ids = {w["id"] for w in online(manager, "node-b")}
    pid = deploy(manager, size=1000)
    with manager.api() as api:
        population = api.get(f"/api/populations/{pid}").json()
        assert set(a_before) & {int(k) for k in population["agents_per_worker"]}, "A hosts some"

        bed.link_down(cluster.namespace["node-a"])
        # Past the heartbeat TTL, the manager marks node A's workers offline...
        wait_for(
            lambda: all(
                api.get(f"/api/workers/{i}").json()["state"] == "offline" for i in a_before
            ),
            30,
            what="node A's workers offline",
        )
        assert {w["id"] for w in online(manager)} == b_ids
        # ... and, past the re-placement delay, the keeper puts their agents on node B.
        wait_for(
            lambda: (
                (p := api.get(f"/api/populations/{pid}").json())["hosted"] == 1000
                and {int(k) for k in p["agents_per_worker"]} <= b_ids
            ),
            60,
            what="node A's agents re-placed on node B",
        )
        repaired = api.post(f"/api/populations/{pid}/repair")
        assert repaired.status_code == 200, repaired.text
        assert (repaired.json()["status"], repaired.json()["hosted"]) == ("deployed", 1000)
        store = placed(api, pid)
        assert set(store) <= b_ids
        agent_ids = set().union(*store.values())
        assert len(agent_ids) == 1000

        # A run on node B alone.
        sid = start(api, level_k(pid, rounds=2, seed=3))["id"]
        done = finish(api, sid)
        assert done["status"] == "completed", done
        assert_every_agent_decided(api, sid, 2, agent_ids)

        # Node A, still cut off, notices: its heartbeats time out and it keeps retrying.
        wait_for(
            lambda: "waiting for manager" in cluster.log("node-a"),
            30,
            what="node A's heartbeats failing",
        )

        # The link heals: node A's workers come back as themselves (same node/slot, same ids),
        # no new worker rows.
        bed.link_up(cluster.namespace["node-a"])
        wait_for(
            lambda: {w["id"] for w in online(manager, "node-a")} == set(a_before),
            60,
            what="node A's workers online again",
        )
        workers = manager.workers()
        assert len(workers) == 4
        for w in workers:
            if w["id"] in a_before:
                assert (w["node"], w["address"]) == ("node-a", a_before[w["id"]]["address"])

        # Node A still held its old agents; once reaped, every agent is held by exactly one
        # worker, the one the store places it on, and the population is whole.
        addresses = {w["id"]: w["address"] for w in online(manager)}

        def consistent() -> bool:
            holding = held(list(addresses.values()), pid)
            store = placed(api, pid)
            counts = sum(len(ids) for ids in holding.values())
            return (
                counts == 1000
                and set().union(*holding.values()) == agent_ids
                and all(holding[a] == store.get(i, set()) for i, a in addresses.items())
            )

        wait_for(consistent, 30, every=0.5, what="each agent held once, where the store says")
        population = api.get(f"/api/populations/{pid}").json()
        assert (population["status"], population["hosted"], population["size"]) == (
            "deployed",
            1000,
            1000,
        )
        assert sum(population["agents_per_worker"].values()) == 1000

        # The healed cluster still runs whole.
        again = start(api, level_k(pid, rounds=1, seed=4))["id"]
        assert finish(api, again)["status"] == "completed"
        assert_every_agent_decided(api, again, 1, agent_ids)


def test_tls_on_both_planes_across_namespaces(bed, cluster, tmp_path):
    certs = tmp_path / "certs"
    hosts = [bed.bridge_ip, *(bed.ip(ns) for ns in bed.names)]
    made = subprocess.run(
        populace_cmd(
            "certs", "init", "--dir", str(certs), *(a for h in hosts for a in ("--host", h))
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    manager = cluster.make(
        POPULACE_TLS_CERT=str(certs / "manager.pem"),
        POPULACE_TLS_KEY=str(certs / "manager-key.pem"),
        POPULACE_TLS_CA=str(certs / "ca.pem"),
    )
    assert manager.url.startswith(f"https://{bed.bridge_ip}:")
    worker_tls = {
        "POPULACE_TLS_CERT": str(certs / "worker.pem"),
        "POPULACE_TLS_KEY": str(certs / "worker-key.pem"),
        "POPULACE_TLS_CA": str(certs / "ca.pem"),  # to check the manager's certificate
    }
    for name in NODES:
        cluster.start_node(name, procs=1, **worker_tls)
    workers = online(manager)
    assert len(workers) == 2 and all(w["tls"] for w in workers)

    pid = deploy(manager, size=400)
    with manager.api() as api:
        per_worker = api.get(f"/api/populations/{pid}").json()["agents_per_worker"]
        assert sorted(int(k) for k in per_worker) == sorted(w["id"] for w in workers)
        agent_ids = set().union(*placed(api, pid).values())
        sid = start(api, level_k(pid, rounds=1))["id"]
        assert finish(api, sid)["status"] == "completed"
        assert_every_agent_decided(api, sid, 1, agent_ids)

    # Across the bridge, each worker speaks TLS only, with a certificate for its namespace's
    # address that the cluster's CA vouches for.
    credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes())
    for w in workers:
        with grpc.secure_channel(w["address"], credentials) as channel:
            info = worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
                worker_pb2.GetInfoRequest(), metadata=worker_metadata(), timeout=10
            )
        assert info.worker_id == w["id"]
        with (
            grpc.insecure_channel(w["address"]) as channel,
            pytest.raises(grpc.RpcError) as refused,
        ):
            worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
                worker_pb2.GetInfoRequest(), metadata=worker_metadata(), timeout=5
            )
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_link_cut_mid_run_leaves_the_node_behind_and_the_run_completes_whole(bed, cluster):
    """Unlike a frozen or killed process, a cut link answers nothing at all, not even TCP: the
    rounds in flight to node A must give up on it once it is offline, and its agents play on B."""
    manager = cluster.make(**FAST, POPULACE_STARTUP_GRACE_S="0")
    cluster.start_node("node-a", procs=1)
    cluster.start_node("node-b", procs=1)
    (a,) = online(manager, "node-a")
    (b,) = online(manager, "node-b")
    pid = deploy(manager, size=1000)
    # Rounds of 0.5 s: the cut lands with rounds left to play, which need node A's agents.
    config = {
        "population_id": pid,
        "rounds": 6,
        "policy": {"kind": "synthetic", "latency_s": 0.5},
        "seed": 1,
    }
    with manager.api() as api:
        agent_ids = set().union(*placed(api, pid).values())
        assert placed(api, pid).keys() == {a["id"], b["id"]}
        sid = start(api, config)["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            30,
            what="a round kept",
        )
        bed.link_down(cluster.namespace["node-a"])
        assert api.get(f"/api/simulations/{sid}").json()["current_round"] < 6
        done = finish(api, sid, timeout=90)
        assert done["status"] == "completed", done
        assert_every_agent_decided(api, sid, 6, agent_ids)
        assert api.get(f"/api/workers/{a['id']}").json()["state"] == "offline"
        assert placed(api, pid) == {b["id"]: agent_ids}

        bed.link_up(cluster.namespace["node-a"])
        wait_for(
            lambda: api.get(f"/api/workers/{a['id']}").json()["state"] == "online",
            60,
            what="node A back",
        )
        wait_for(
            lambda: (
                held([a["address"], b["address"]], pid)
                == {a["address"]: set(), b["address"]: agent_ids}
            ),
            30,
            every=0.5,
            what="node A's stale agents reaped",
        )
