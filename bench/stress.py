"""The stress case, end to end in one run: 10^7 agents on one machine, entered only through the
manager's API (like `populace bench synthetic`) on a scratch Postgres database.

1. A manager (its population limit raised to the agent count) and one worker node with `procs`
   processes.
2. deploy: `POST /api/populations` (template personas, an `education` attribute) until the
   population is deployed (deploy_s).
3. A 1-round synthetic simulation (the synthetic policy waits latency_s once per cohort and
   answers at random): every agent's decision must be valid and persisted.
4. A 1-round level-k simulation on the same population, depth by education (as in the tests'
   level_k config): every decision valid and persisted. Round timings as bench.harness reads
   them from the manager's websocket events: a round's first `round.progress` to its
   `round.completed` (sent once the round and its decisions are committed); fanout_s is the
   manager's own duration_s (fan-out until the last decision, before outcome and persistence).
5. browse, like a dashboard user, over HTTP (one keep-alive client, `samples` requests of each
   kind, p50/p95 in ms): the first agent page; keyset pages deep in (a random `after` in the
   second half of the population); a page filtered on education:doctorate from such a
   position; one agent (`GET /api/agents/{id}`); and its decisions
   (`GET /api/agents/{id}/decisions`, one per simulation played).
6. clean-up to zero: DELETE each simulation (timed), then DELETE the population, timed until it
   reports `deleted`; then, on the database (asyncpg), no agent, decision (any partition, and
   no partition of these simulations left), round or simulation of it, and after a few
   heartbeats no agent on any worker, asked over gRPC (GetInfo) and through GET /api/workers.
   Anything left raises.

Also: the peak RSS of the manager and of each worker process (psutil, sampled every 0.5 s in a
background thread), overall and per stage, and CPU seconds per stage of the manager, the worker
node (all its processes) and Postgres (the backends serving the scratch database and the server's
background processes). Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import threading
import time
from collections.abc import Callable

import asyncpg
import httpx
import psutil

from backend.workers.grpc_client import WorkerClient, WorkerCredentials
from bench import harness, synthetic
from bench.cluster import LocalCluster, wait_until
from bench.deploy import _plain, scratch_database

# The population of `bench synthetic` (template personas; education and occupation).
CONFIG = synthetic.CONFIG

# Level-k depth by education (the categories of the synthetic population), as in the tests.
DEPTHS = {"primary school": 0, "high school": 1, "bachelor": 1, "doctorate": 3}
FILTER = ("education", "doctorate")
PAGE = 100
# The agent browser's requests, each timed apart.
BROWSE_KINDS = ("first_page", "deep_page", "filtered_deep_page", "agent", "agent_decisions")
RSS_PERIOD_S = 0.5
HEARTBEAT_FLUSH_S = 3.0
MB = 1024 * 1024


class RssSampler(threading.Thread):
    """Peak RSS (MB) of the manager (its whole process tree) and of each worker process, every
    RSS_PERIOD_S, overall and per stage (the stage named in `stage` when sampled)."""

    def __init__(self, manager_pid: int, node_pid: int, labels: dict[int, str]) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.manager_pid, self.node_pid, self.labels = manager_pid, node_pid, labels
        self.stage = "start"
        self.peak: dict[str, float] = {}
        self.by_stage: dict[str, dict[str, float]] = {}
        self.samples = 0
        self._halt = threading.Event()
        self._procs: dict[int, psutil.Process] = {}

    def _rss(self, pid: int) -> int:
        try:
            process = self._procs.get(pid) or self._procs.setdefault(pid, psutil.Process(pid))
            return process.memory_info().rss
        except psutil.Error:
            self._procs.pop(pid, None)
            return 0

    def _label(self, pid: int) -> str:
        if pid in self.labels:
            return self.labels[pid]
        return "worker_node" if pid == self.node_pid else f"worker_pid_{pid}"

    def sample(self) -> None:
        reading: dict[str, float] = {}
        try:
            manager = harness.tree(self.manager_pid)
        except psutil.Error:
            manager = set()
        reading["manager"] = sum(self._rss(pid) for pid in manager) / MB
        try:
            node = harness.tree(self.node_pid)
        except psutil.Error:
            node = set()
        for pid in node:
            label = self._label(pid)
            reading[label] = reading.get(label, 0.0) + self._rss(pid) / MB
        stage = self.by_stage.setdefault(self.stage, {})
        for label, mb in reading.items():
            self.peak[label] = max(self.peak.get(label, 0.0), mb)
            stage[label] = max(stage.get(label, 0.0), mb)
        self.samples += 1

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(RSS_PERIOD_S)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
        self.sample()


class CpuMeter:
    """CPU seconds (user + system) of the manager, the worker node and Postgres per stage."""

    def __init__(self, manager_pid: int, node_pid: int, database_url: str) -> None:
        self.manager_pid, self.node_pid, self.database_url = manager_pid, node_pid, database_url
        self.pids = {"manager": set(), "workers": set(), "postgres": set()}
        self.by_stage: dict[str, dict[str, float]] = {}

    def _reading(self) -> dict[str, dict[int, float]]:
        for name, root in (("manager", self.manager_pid), ("workers", self.node_pid)):
            try:
                self.pids[name] |= harness.tree(root)
            except psutil.Error:
                pass
        # Backends opened since the last reading count from zero; ones that exited are lost.
        self.pids["postgres"] |= asyncio.run(harness.postgres_pids(self.database_url))
        return {name: harness.cpu(pids) for name, pids in self.pids.items()}

    def stage(self, name: str, work: Callable[[], object]):
        before = self._reading()
        result = work()
        after = self._reading()
        self.by_stage[name] = {k: round(harness.spent(before[k], after[k]), 2) for k in after}
        return result


def _quantiles_ms(timings: list[float]) -> dict:
    ms = sorted(t * 1000 for t in timings)
    p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) > 1 else ms[0]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(p95, 2),
        "max_ms": round(ms[-1], 2),
    }


def _browse(cluster: LocalCluster, population_id: int, size: int, samples: int, seed: int) -> dict:
    """Agent-browser requests over one keep-alive HTTP client, like a dashboard: p50/p95 ms."""
    rng = random.Random(seed)
    base = population_id << 32
    name, value = FILTER
    timings: dict[str, list[float]] = {kind: [] for kind in BROWSE_KINDS}
    decisions_seen = set()
    with httpx.Client(base_url=cluster.url, headers=cluster.headers, timeout=120) as client:

        def get(kind: str, path: str, **params) -> dict:
            started = time.perf_counter()
            resp = client.get(path, params=params)
            timings[kind].append(time.perf_counter() - started)
            resp.raise_for_status()
            return resp.json()

        for _ in range(samples):
            page = get("first_page", "/api/agents", population_id=population_id, limit=PAGE)
            if len(page["items"]) != min(PAGE, size) or page["items"][0]["id"] != base:
                raise RuntimeError(f"first page of population {population_id} is wrong")

            after = base + rng.randrange(size // 2, max(size // 2 + 1, size - PAGE))
            page = get(
                "deep_page", "/api/agents", population_id=population_id, after=after, limit=PAGE
            )
            ids = [a["id"] for a in page["items"]]
            if not ids or ids[0] != after + 1 or ids != sorted(ids):
                raise RuntimeError(f"the page after {after} starts at {ids[:1]}")

            after = base + rng.randrange(size // 2, max(size // 2 + 1, size * 3 // 4))
            page = get(
                "filtered_deep_page",
                "/api/agents",
                population_id=population_id,
                attribute=f"{name}:{value}",
                after=after,
                limit=PAGE,
            )
            if not page["items"] or any(
                a["attributes"].get(name) != value or a["id"] <= after for a in page["items"]
            ):
                raise RuntimeError(f"the {name}:{value} page after {after} is wrong")

            agent_id = base + rng.randrange(size)
            agent = get("agent", f"/api/agents/{agent_id}")
            if agent["id"] != agent_id:
                raise RuntimeError(f"GET /api/agents/{agent_id} answered agent {agent['id']}")
            history = get("agent_decisions", f"/api/agents/{agent_id}/decisions", limit=50)
            decisions_seen.add(len(history["items"]))
    return {
        **{kind: _quantiles_ms(t) for kind, t in timings.items()},
        "page_size": PAGE,
        "filter": f"{name}:{value}",
        # Decisions each sampled agent showed (one per simulation round played).
        "decisions_per_agent": sorted(decisions_seen),
    }


async def _left_in_database(
    database_url: str, population_id: int, simulation_ids: list[int]
) -> dict:
    conn = await asyncpg.connect(_plain(database_url))
    try:
        lo, hi = population_id << 32, (population_id + 1) << 32
        partitions = await conn.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'decisions'::regclass"
        )
        names = {f"decisions_{sid}" for sid in simulation_ids}
        return {
            "agents": await conn.fetchval(
                "SELECT count(*) FROM agents WHERE population_id = $1 OR (id >= $2 AND id < $3)",
                population_id,
                lo,
                hi,
            ),
            # Through the parent table: every partition, and rows in none of them.
            "decisions": await conn.fetchval(
                "SELECT count(*) FROM decisions WHERE simulation_id = ANY($1::int[])",
                simulation_ids,
            ),
            "decision_partitions": sum(r["relname"] in names for r in partitions),
            "rounds": await conn.fetchval(
                "SELECT count(*) FROM rounds WHERE simulation_id = ANY($1::int[])", simulation_ids
            ),
            "simulations": await conn.fetchval(
                "SELECT count(*) FROM simulations WHERE population_id = $1 OR id = ANY($2::int[])",
                population_id,
                simulation_ids,
            ),
            # The scratch database holds this run only: the whole tables are empty too.
            "agents_all": await conn.fetchval("SELECT count(*) FROM agents"),
            "decisions_all": await conn.fetchval("SELECT count(*) FROM decisions"),
        }
    finally:
        await conn.close()


async def _worker_agents(addresses: list[str], secret: str) -> dict[str, int]:
    """Agents each worker process says it hosts (gRPC GetInfo)."""
    hosted = {}
    for address in addresses:
        async with WorkerClient(address, WorkerCredentials(secret)) as client:
            info = await client.info(timeout=30)
        hosted[address] = int(info.agents)
    return hosted


def run(
    agents: int = 10_000_000,
    procs: int = 2,
    seed: int = 7,
    latency_s: float = 1.0,
    samples: int = 40,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
) -> dict:
    with (
        scratch_database(admin_url) as database_url,
        LocalCluster(
            POPULACE_DATABASE_URL=database_url,
            # The manager refuses populations above its limit (10^6 unless raised).
            POPULACE_MAX_POPULATION_SIZE=str(max(agents, 1_000_000)),
        ) as cluster,
    ):
        figures = _measure(cluster, database_url, agents, procs, seed, latency_s, samples)
    return {
        "benchmark": "stress",
        "entry": "manager API (populations, simulations, agents; DELETE both)",
        "database": "postgresql",
        "agents": agents,
        "procs": procs,
        "seed": seed,
        "latency_s": latency_s,
        **figures,
    }


def _play(
    cluster: LocalCluster, database_url: str, node, agents: int, body: dict
) -> tuple[harness.Run, dict]:
    played = harness.simulate(cluster, database_url, node, body)
    n_valid = [r["n_valid"] for r in played.rounds]
    if played.persisted != agents or n_valid != [agents]:
        raise RuntimeError(
            f"{body['policy']['kind']}: {played.persisted} decisions persisted, n_valid "
            f"{n_valid}, for {agents} agents"
        )
    (stored,) = played.rounds
    return played, {
        "simulation_id": played.simulation_id,
        "round_s": round(played.round_s[0], 3),
        "fanout_s": round(stored["duration_s"], 3),
        "run_wall_s": round(played.wall_s, 3),
        "n_valid": stored["n_valid"],
        "decisions_persisted": played.persisted,
        "mean": round(stored["mean"], 3),
        "target": round(stored["target"], 3),
    }


def _synthetic_body(population_id: int, latency_s: float, seed: int) -> dict:
    return {
        "population_id": population_id,
        "name": "stress-synthetic",
        "rounds": 1,
        "policy": {"kind": "synthetic", "latency_s": latency_s},
        "segment_by": ["education"],
        "seed": seed,
    }


def _level_k_body(population_id: int, seed: int) -> dict:
    return {
        "population_id": population_id,
        "name": "stress-level-k",
        "rounds": 1,
        "rule": {"preset": "1/2+5"},
        "policy": {
            "kind": "level_k",
            "depth_attribute": "education",
            "depth_by_category": DEPTHS,
            "noise_std": 2.0,
        },
        "segment_by": ["education"],
        "seed": seed,
    }


def _check_hosted(cluster: LocalCluster, addresses: list[str], agents: int) -> None:
    """The workers (asked over gRPC) host every agent of the deployed population."""
    hosted_after_deploy = sum(asyncio.run(_worker_agents(addresses, cluster.rpc_secret)).values())
    if hosted_after_deploy != agents:
        raise RuntimeError(f"the workers host {hosted_after_deploy} agents, not {agents}")


def _left_after_cleanup(
    cluster: LocalCluster,
    database_url: str,
    addresses: list[str],
    population_id: int,
    simulation_ids: list[int],
) -> dict:
    """What the deletions left in the database and on the workers: all zero, or raise."""
    left = asyncio.run(_left_in_database(database_url, population_id, simulation_ids))
    # Heartbeats carry the workers' counts to the manager: a few go by first.
    time.sleep(HEARTBEAT_FLUSH_S)
    by_grpc = asyncio.run(_worker_agents(addresses, cluster.rpc_secret))
    by_api = {w["address"]: w["agents"] for w in cluster.api("/api/workers")["items"]}
    left["worker_agents_grpc"] = sum(by_grpc.values())
    left["worker_agents_api"] = sum(by_api.values())
    if any(left.values()):
        raise RuntimeError(
            f"left after deleting simulations {simulation_ids} and population "
            f"{population_id}: {left} (GetInfo {by_grpc}, /api/workers {by_api})"
        )
    return left


def _memory(rss: RssSampler, idle_rss: dict) -> dict:
    """The RSS report in MB: peak, idle (before deploy), peak by stage, and the samples."""
    return {
        "peak_rss_mb": {k: round(v, 1) for k, v in sorted(rss.peak.items())},
        "idle_rss_mb": {k: round(v, 1) for k, v in sorted(idle_rss.items())},
        "peak_rss_mb_by_stage": {
            stage: {k: round(v, 1) for k, v in sorted(peaks.items())}
            for stage, peaks in rss.by_stage.items()
        },
        "rss_samples": rss.samples,
    }


def _meters(
    manager_pid: int, node_pid: int, workers: list[dict], database_url: str
) -> tuple[RssSampler, CpuMeter]:
    """Memory and CPU meters of the manager, the node's workers (by label) and the database."""
    labels = {w["pid"]: f"worker_{w['id']}" for w in workers}
    rss = RssSampler(manager_pid, node_pid, labels)
    cpu = CpuMeter(manager_pid, node_pid, database_url)
    return rss, cpu


def _measure(
    cluster: LocalCluster,
    database_url: str,
    agents: int,
    procs: int,
    seed: int,
    latency_s: float,
    samples: int,
) -> dict:
    assert cluster.manager is not None
    node = cluster.start_node(procs=procs)
    workers = cluster.wait_online(procs)
    addresses = [w["address"] for w in workers]
    rss, cpu = _meters(cluster.manager.pid, node.pid, workers, database_url)
    rss.sample()
    idle_rss = dict(rss.peak)
    rss.start()
    try:
        rss.stage = "deploy"
        population_id, deploy_s = cpu.stage(
            "deploy", lambda: harness.deploy(cluster, CONFIG.format(size=agents, seed=seed))
        )
        _check_hosted(cluster, addresses, agents)

        rss.stage = "synthetic"
        synthetic_body = _synthetic_body(population_id, latency_s, seed)
        synthetic_run, synthetic = cpu.stage(
            "synthetic", lambda: _play(cluster, database_url, node, agents, synthetic_body)
        )

        rss.stage = "level_k"
        level_k_body = _level_k_body(population_id, seed)
        level_k_run, level_k = cpu.stage(
            "level_k", lambda: _play(cluster, database_url, node, agents, level_k_body)
        )
        simulation_ids = [synthetic_run.simulation_id, level_k_run.simulation_id]

        rss.stage = "browse"
        browse = cpu.stage("browse", lambda: _browse(cluster, population_id, agents, samples, seed))
        if browse["decisions_per_agent"] != [2]:
            raise RuntimeError(f"agents showed {browse['decisions_per_agent']} decisions, not 2")

        rss.stage = "cleanup"
        cleanup = cpu.stage("cleanup", lambda: _clean_up(cluster, population_id, simulation_ids))
        left = _left_after_cleanup(cluster, database_url, addresses, population_id, simulation_ids)
    finally:
        rss.stop()
    return {
        "deploy_s": round(deploy_s, 3),
        "synthetic_round_s": synthetic["round_s"],
        "level_k_round_s": level_k["round_s"],
        "synthetic": synthetic,
        "level_k": level_k,
        "browse": browse,
        **cleanup,
        "left": left,
        **_memory(rss, idle_rss),
        "cpu_s": cpu.by_stage,
    }


def _clean_up(cluster: LocalCluster, population_id: int, simulation_ids: list[int]) -> dict:
    """DELETE each simulation (timed), then DELETE the population, timed until it is deleted."""
    delete_simulations_s = []
    with httpx.Client(base_url=cluster.url, headers=cluster.headers, timeout=1800) as client:
        for sid in simulation_ids:
            started = time.perf_counter()
            resp = client.delete(f"/api/simulations/{sid}")
            delete_simulations_s.append(round(time.perf_counter() - started, 3))
            if resp.status_code != 204:
                raise RuntimeError(f"DELETE /api/simulations/{sid}: {resp.status_code} {resp.text}")
        started = time.perf_counter()
        resp = client.delete(f"/api/populations/{population_id}")
        accepted_s = time.perf_counter() - started
        if resp.status_code != 202:
            raise RuntimeError(
                f"DELETE /api/populations/{population_id}: {resp.status_code} {resp.text}"
            )

        def deleted() -> bool:
            status = client.get(f"/api/populations/{population_id}").json()["status"]
            if status not in ("deleting", "deleted"):
                raise RuntimeError(f"population {population_id} is {status} while deleting")
            return status == "deleted"

        wait_until(deleted, 3600, f"population {population_id} deleted")
        delete_population_s = time.perf_counter() - started
    return {
        "delete_simulations_s": delete_simulations_s,
        "delete_population_s": round(delete_population_s, 3),
        # The DELETE's own answer (202: the clean-up goes on in the background).
        "delete_population_accepted_s": round(accepted_s, 3),
    }
