"""A whole epidemic on a network, entered where users enter: the manager's API.

Creates a scratch Postgres database, starts a real manager on it and one worker node with
`procs` processes, deploys `agents` agents with an Erdős–Rényi graph of mean degree
`mean_degree` (`POST /api/populations`: the graph is generated, written to its file and sent to
the workers row by row), then runs the built-in `sir` plugin (`POST /api/simulations`) with
transmission `transmission` and `initial_infected` first cases until no agent is infectious, or
(`plugin`) the voter model or Hegselmann-Krause (epsilon 0.2) for at most `max_rounds` rounds.

Every round goes through the whole platform: the manager fans the round out with the placement,
each worker process decides for its agents over numpy cohorts reading its neighbours' values,
sends the values its peers need (only those that changed) to each peer directly, streams every
decision back; the manager resolves the round and persists, per round, the decisions that changed
(round 1: all of them; docs/networks.md "Storing only what changed").

Figures: `deploy_s` (POST to deployed, graph included); `fanout_s` per round (the manager's
`duration_s`: the workers' round, peer exchange included, until the last aggregate); `period_s`
per round (from one round's commit to the next's: what a round costs with its persistence);
`epidemic_s` (POST to completed); `network_bytes` per round (values sent worker to worker);
`decisions_stored` per round (rows written);
the worker processes' resident memory before the deploy, after it and after the run, per agent;
and the final attack rate beside the analytic final size (S = 1 - exp(-c T S)). Prints one JSON
line.
"""

from __future__ import annotations

import math
import statistics
import time
from datetime import datetime

import httpx
import psutil

from bench import harness
from bench.cluster import LocalCluster, wait_until
from bench.deploy import scratch_database

CONFIG = """
name: network-benchmark
size: {size}
seed: {seed}
distributions:
  - name: group
    categories:
      - {{name: a, weight: 0.5}}
      - {{name: b, weight: 0.5}}
graph: {{kind: erdos_renyi, mean_degree: {mean_degree}}}
placement: {{spread: even}}
"""


def final_size(reproduction: float) -> float:
    """The share ever infected solving S = 1 - exp(-R S) (0 at or below the threshold)."""
    if reproduction <= 1:
        return 0.0
    share = 0.5
    for _ in range(200):
        share = 1 - math.exp(-reproduction * share)
    return share


def rss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total


def worker_rss(node) -> int:
    """Resident memory of the node's worker processes (its supervisor left out)."""
    return rss(harness.tree(node.pid) - {node.pid})


# The plugins the benchmark plays: what each is launched with.
PLUGINS = ("sir", "voter", "hegselmann_krause")


def plugin_body(plugin: str, transmission: float, initial_infected: int) -> dict:
    if plugin == "sir":
        params = {"transmission": transmission, "initial_infected": initial_infected}
        return {"name": "sir", "params": params}
    if plugin == "voter":
        return {"name": "voter", "params": {"initial_share": 0.5}}
    if plugin == "hegselmann_krause":
        params = {"model": "hegselmann_krause", "epsilon": 0.2}
        return {"name": "bounded_confidence", "params": params}
    raise ValueError(f"plugin: one of {', '.join(PLUGINS)}, not {plugin!r}")


def _play(
    cluster: LocalCluster, population_id: int, rounds: int, seed: int, plugin: dict
) -> tuple[int, float]:
    """POST the simulation and wait until it completes: (its id, POST to completed in s)."""
    body = {
        "population_id": population_id,
        "rounds": rounds,
        "seed": seed,
        "plugin": plugin,
    }
    posted = time.monotonic()
    resp = httpx.post(
        f"{cluster.url}/api/simulations", json=body, headers=cluster.headers, timeout=120
    )
    resp.raise_for_status()
    sid = resp.json()["id"]

    def ended() -> bool:
        status = cluster.api(f"/api/simulations/{sid}")["status"]
        if status in ("failed", "cancelled", "paused"):
            raise RuntimeError(f"the simulation ended {status}")
        return status == "completed"  # stopped by the plugin, or at max_rounds

    wait_until(ended, 3600, "the epidemic over")
    return sid, time.monotonic() - posted


def _periods(rounds: list[dict]) -> list[float]:
    """Seconds from each round's commit to the next's."""
    finished = [datetime.fromisoformat(r["finished_at"]) for r in rounds]
    return [round((b - a).total_seconds(), 3) for a, b in zip(finished, finished[1:], strict=False)]


def _graph(population: dict, mean_degree: float) -> dict:
    return {
        "kind": "erdos_renyi",
        "mean_degree": mean_degree,
        "edges": (population.get("graph") or {}).get("edges"),
        "cut_fraction": (population.get("graph") or {}).get("cut_fraction"),
    }


def run(
    agents: int = 1_000_000,
    procs: int = 2,
    mean_degree: float = 10.0,
    transmission: float = 0.2,
    initial_infected: int = 100,
    seed: int = 7,
    max_rounds: int = 500,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    plugin: str = "sir",
) -> dict:
    with (
        scratch_database(admin_url) as database_url,
        LocalCluster(
            POPULACE_DATABASE_URL=database_url,
            POPULACE_MAX_POPULATION_SIZE=str(max(agents, 1_000_000)),
        ) as cluster,
    ):
        node = cluster.start_node(procs=procs)
        cluster.wait_online(procs)
        rss_idle = worker_rss(node)
        config = CONFIG.format(size=agents, seed=seed, mean_degree=mean_degree)
        population_id, deploy_s = harness.deploy(cluster, config)
        rss_deployed = worker_rss(node)
        population = cluster.api(f"/api/populations/{population_id}")
        launched = plugin_body(plugin, transmission, initial_infected)
        sid, epidemic_s = _play(cluster, population_id, max_rounds, seed, launched)
        rss_after = worker_rss(node)
        rounds = _all_rounds(cluster, sid)
        record = cluster.api(f"/api/simulations/{sid}")
    period_s = _periods(rounds)
    fanout_s = [round(r["duration_s"], 3) for r in rounds]
    reproduction = mean_degree * transmission
    sir = plugin == "sir"
    return {
        "benchmark": "network",
        "plugin": plugin,
        "entry": "manager API (POST /api/populations, POST /api/simulations)",
        "database": "postgresql",
        "agents": agents,
        "procs": procs,
        "graph": _graph(population, mean_degree),
        "deploy_s": round(deploy_s, 3),
        "rounds": len(rounds),
        "stop_reason": record.get("stop_reason"),
        "fanout_s_median": round(statistics.median(fanout_s), 3),
        "fanout_s_max": max(fanout_s),
        "period_s_median": round(statistics.median(period_s), 3) if period_s else None,
        "period_s_max": max(period_s) if period_s else None,
        "epidemic_s": round(epidemic_s, 3),
        "fanout_s": fanout_s,
        "network_bytes": [r["network_bytes"] for r in rounds],
        "decisions_stored": [r["decisions_stored"] for r in rounds],
        "worker_rss_bytes": {"idle": rss_idle, "deployed": rss_deployed, "after": rss_after},
        "hosted_bytes_per_agent": round((rss_deployed - rss_idle) / agents, 1),
        "bytes_per_agent_after_run": round((rss_after - rss_idle) / agents, 1),
        "attack_rate": rounds[-1]["metrics"].get("attack_rate") if sir else None,
        "final_size_expected": round(final_size(reproduction), 4) if sir else None,
        "last_metrics": rounds[-1]["metrics"],
    }


def _all_rounds(cluster: LocalCluster, sid: int) -> list[dict]:
    rounds, after = [], None
    while True:
        query = f"?limit=500&after={after}" if after is not None else "?limit=500"
        page = cluster.api(f"/api/simulations/{sid}/rounds{query}")
        rounds.extend(page["items"])
        after = page.get("next_after")
        if not after or not page["items"]:
            return rounds
