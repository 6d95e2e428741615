"""The paper's synthetic benchmark, entered where users enter: through the manager's API.

Creates a scratch Postgres database, starts a real manager on it and one worker node with
`procs` processes, deploys `agents` agents with `POST /api/populations` (two attributes,
template personas) and waits until the population is deployed, then runs a `rounds`-round
simulation with `POST /api/simulations` and the synthetic policy: every agent "waits" latency_s,
standing in for an LLM call, and answers uniformly in [min, max]. Each round goes through the
whole platform: placement, fan-out to the workers, decisions streamed back, the outcome
(target, winners, statistics) and persistence of every decision and the round on Postgres.

What it does NOT measure: concurrency of 10^6 waits. The synthetic policy waits ONCE PER
COHORT (one timer per worker process cohort, not one per agent: `SyntheticPolicy.decide`), so a
round costs about latency_s plus the platform's per-agent overhead (placement, fan-out, decision
streaming, outcome, persistence); that overhead is what this benchmark measures. For per-agent
waits with real requests see `populace bench llm`.

All round timings are read from the manager's websocket events, as a dashboard sees them:
round_s is a round's first `round.progress` (sent when the round starts) to its
`round.completed` (sent after the round and its decisions are committed). `fanout_s` is the
manager's own `duration_s` of each round (fan-out until the last decision arrived, before the
outcome and persistence). A round is stored while the next one plays, so rounds overlap:
`round_period_s` is from each round's start to the next one's, and `run_wall_s` from the POST to
the last round.completed. `delete_s` is DELETE /api/simulations/{id} afterwards (the run's
rounds, and its decisions with their partition), checked to leave no decision. CPU seconds of
the manager, the worker node (its processes) and the Postgres processes serving the scratch
database (plus the server's background processes) are read with psutil from just before the
simulation is POSTed to its end (bench.harness, shared with `populace bench round`). Prints one
JSON line.

`naive_baseline` (off by default) runs one asyncio task per agent, each awaiting its own timer,
in one process: the work the synthetic policy skips, so it is reported beside the figures,
never as a ratio to them.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

import httpx

from bench import harness, processes
from bench.cluster import LocalCluster
from bench.deploy import scratch_database

CONFIG = """
name: synthetic-benchmark
size: {size}
seed: {seed}
distributions:
  - name: education
    categories:
      - {{name: primary school, weight: 0.2}}
      - {{name: high school, weight: 0.3}}
      - {{name: bachelor, weight: 0.3}}
      - {{name: doctorate, weight: 0.2}}
  - name: occupation
    categories:
      - {{name: clerk, weight: 0.5}}
      - {{name: engineer, weight: 0.3}}
      - {{name: game theory professor, weight: 0.2}}
persona:
  mode: template
  template: "You are a {{occupation}} whose highest education is {{education}}."
"""

POLICY_NOTE = (
    "the synthetic policy waits once per cohort (one timer per worker process cohort, not one "
    "per agent): this measures the platform's per-agent overhead (placement, fan-out, decision "
    "streaming, outcome, persistence on Postgres), not concurrency of one wait per agent"
)


def _naive_baseline(agents: int, latency_s: float) -> float:
    process = processes.spawn(
        [sys.executable, "-m", "bench.naive_asyncio", str(agents), str(latency_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = process.communicate()
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args, out, err)
    return float(out.strip())


def run(
    agents: int = 1_000_000,
    procs: int = 2,
    latency_s: float = 1.0,
    seed: int = 7,
    rounds: int = 3,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    naive_baseline: bool = False,
) -> dict:
    with (
        scratch_database(admin_url) as database_url,
        LocalCluster(
            POPULACE_DATABASE_URL=database_url,
            # The manager refuses populations above its limit (10^6 unless raised).
            POPULACE_MAX_POPULATION_SIZE=str(max(agents, 1_000_000)),
        ) as cluster,
    ):
        figures = _measure(cluster, database_url, agents, procs, latency_s, seed, rounds)
    result = {
        "benchmark": "synthetic",
        "entry": "manager API (POST /api/populations, POST /api/simulations)",
        "database": "postgresql",
        "agents": agents,
        "procs": procs,
        "latency_s": latency_s,
        "policy_waits": "once per cohort",
        "note": POLICY_NOTE,
        **figures,
        "target_round_s": 5.0,
    }
    if naive_baseline:
        # After the cluster is gone, so it has the machine to itself. A different workload:
        # one task and one timer per agent, which the synthetic policy does not do.
        result["naive_asyncio_one_task_per_agent_s"] = round(_naive_baseline(agents, latency_s), 3)
    return result


def _delete_run(cluster: LocalCluster, database_url: str, simulation_id: int) -> float:
    """Delete the run through the API (its rounds, and its decisions with their partition),
    check no decision is left; the DELETE's seconds."""
    started = time.perf_counter()
    resp = httpx.delete(
        f"{cluster.url}/api/simulations/{simulation_id}", headers=cluster.headers, timeout=600
    )
    delete_s = time.perf_counter() - started
    resp.raise_for_status()
    left = asyncio.run(harness.decisions_persisted(database_url, simulation_id))
    if left:
        raise RuntimeError(f"{left} decisions left after DELETE /api/simulations/{simulation_id}")
    return delete_s


def _measure(
    cluster: LocalCluster,
    database_url: str,
    agents: int,
    procs: int,
    latency_s: float,
    seed: int,
    rounds: int,
) -> dict:
    node = cluster.start_node(procs=procs)
    cluster.wait_online(procs)
    population_id, deploy_s = harness.deploy(cluster, CONFIG.format(size=agents, seed=seed))
    run = harness.simulate(
        cluster,
        database_url,
        node,
        {
            "population_id": population_id,
            "rounds": rounds,
            "policy": {"kind": "synthetic", "latency_s": latency_s},
            "segment_by": ["education"],
            "seed": seed,
        },
    )
    kept, persisted = run.rounds, run.persisted
    n_valid = [r["n_valid"] for r in kept]
    if persisted != agents * rounds or n_valid != [agents] * rounds:
        raise RuntimeError(f"{persisted} decisions persisted, n_valid {n_valid}, for {agents}")
    agent_rounds = agents * rounds
    delete_s = _delete_run(cluster, database_url, run.simulation_id)
    return {
        "rounds": rounds,
        "deploy_s": round(deploy_s, 3),
        "round_s": [round(s, 3) for s in run.round_s],
        "round_s_median": round(statistics.median(run.round_s), 3),
        # The manager's own duration_s: fan-out until the last decision, before the outcome
        # and persistence.
        "fanout_s": [round(r["duration_s"], 3) for r in kept],
        # Before each round: the POST (round 1) or the previous round.completed to its start
        # (negative: the round started while the one before was being stored).
        "between_rounds_s": [round(s, 3) for s in run.gaps_s],
        # From each round's start to the next one's.
        "round_period_s": [round(s, 3) for s in run.periods_s],
        "run_wall_s": round(run.wall_s, 3),
        "decisions_persisted": persisted,
        "n_valid": n_valid,
        "cpu_s": run.cpu_s,
        "cpu_us_per_agent_round": {
            k: round(v / agent_rounds * 1e6, 2) for k, v in run.cpu_s.items()
        },
        "round_means": [round(r["mean"], 3) for r in kept],
        "delete_s": round(delete_s, 3),
        "decisions_deleted": persisted,
    }
