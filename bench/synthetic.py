"""The paper's synthetic benchmark: every agent waits latency_s (standing in for an LLM call)
and answers a random number. 10^6 agents took the paper 40 s on 4 nodes of 64 cores.

Starts a real manager and one worker node with --procs processes, deploys the agents over gRPC
(columnar batches), runs one round through the manager-side fan-out, cleans up, and runs the
naive one-task-per-agent asyncio baseline in the same invocation. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid

import numpy as np

from backend.rounds.fanout import DecisionCollector, run_round
from backend.workers.grpc_client import AgentColumns, WorkerClient, WorkerCredentials
from bench.cluster import LocalCluster
from worker_server.rpc import worker_pb2 as pb

EDUCATION = ["primary school", "high school", "bachelor", "master", "doctorate"]


def _population(agents: int, seed: int) -> AgentColumns:
    rng = np.random.default_rng(seed)
    return AgentColumns(
        population_id=f"bench-{uuid.uuid4().hex[:8]}",
        ids=np.arange(1, agents + 1, dtype=np.int64),
        codes={"education": rng.integers(0, len(EDUCATION), agents, dtype=np.uint32)},
        categories={"education": EDUCATION},
    )


def _split(agents: AgentColumns, capacities: list[int]) -> list[AgentColumns]:
    """Contiguous shares proportional to free capacity (what placement will do)."""
    weights = np.asarray(capacities, dtype=np.float64)
    bounds = np.floor(np.cumsum(weights / weights.sum()) * len(agents)).astype(int)
    bounds[-1] = len(agents)
    starts = np.concatenate([[0], bounds[:-1]])
    return [agents.take(slice(a, b)) for a, b in zip(starts, bounds, strict=True)]


async def _measure(
    addresses: list[str], secret: str, agents: int, latency_s: float, seed: int
) -> dict:
    clients = [WorkerClient(a, WorkerCredentials(secret)) for a in addresses]
    try:
        before = [await c.info() for c in clients]
        # Process stats are sampled at most twice a second: let the next reading be a fresh one.
        await asyncio.sleep(1.0)
        population = _population(agents, seed)
        shares = _split(population, [i.capacity - i.agents for i in before])

        started = time.perf_counter()
        await asyncio.gather(*(c.create_agents(s) for c, s in zip(clients, shares, strict=True)))
        deploy_s = time.perf_counter() - started
        await asyncio.sleep(1.0)
        deployed = [await c.info() for c in clients]
        rss_per_agent = (
            sum(d.rss_bytes - b.rss_bytes for d, b in zip(deployed, before, strict=True)) / agents
        )

        request = pb.RunRoundRequest(
            round_id=uuid.uuid4().hex,
            population_id=population.population_id,
            round=1,
            rule=pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
            policy=pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=latency_s)),
            seed=seed,
            segment_by=["education"],
        )
        collector = DecisionCollector()
        result = await run_round(clients, request, on_decisions=collector)
        ids, values = collector.arrays()
        if len(ids) != agents or result.stats.n_valid != agents:
            raise RuntimeError(f"round answered {len(ids)} decisions for {agents} agents")

        started = time.perf_counter()
        await asyncio.gather(*(c.delete_agents(all=True) for c in clients))
        cleanup_s = time.perf_counter() - started
        agents_left = sum([(await c.info()).agents for c in clients])
        return {
            "deploy_s": round(deploy_s, 3),
            "round_s": round(result.elapsed_s, 3),
            "cleanup_s": round(cleanup_s, 3),
            "rss_bytes_per_agent": round(rss_per_agent, 1),
            "agents_left": agents_left,
            "round_mean": round(result.stats.mean, 3),
        }
    finally:
        for client in clients:
            await client.close()


def _naive_baseline(agents: int, latency_s: float) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "bench.naive_asyncio", str(agents), str(latency_s)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip())


def run(agents: int = 1_000_000, procs: int = 2, latency_s: float = 1.0, seed: int = 7) -> dict:
    with LocalCluster() as cluster:
        cluster.start_node(procs=procs)
        workers = cluster.wait_online(procs)
        figures = asyncio.run(
            _measure([w["address"] for w in workers], cluster.rpc_secret, agents, latency_s, seed)
        )
    # After the cluster is gone, so the baseline has the machine to itself as the workers did.
    baseline_s = _naive_baseline(agents, latency_s)
    return {
        "benchmark": "synthetic",
        "agents": agents,
        "procs": procs,
        "latency_s": latency_s,
        **figures,
        "baseline_naive_asyncio_s": round(baseline_s, 3),
        "round_vs_baseline": round(figures["round_s"] / baseline_s, 3),
    }
