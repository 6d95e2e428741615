"""Plugin rounds beside the guessing game's, entered where users enter: the manager's API.

Creates a scratch Postgres database, starts a real manager on it and one worker node with
`procs` processes, deploys `agents` agents once (`POST /api/populations`, the synthetic
benchmark's config), then runs, one after another on that population, a `rounds`-round
simulation (`POST /api/simulations`) of:

- `guess` with the synthetic policy and no wait (`latency_s: 0`): the guessing game's cheapest
  round, the reference;
- `public_goods` with its default policy (conditional cooperator: each agent gives what its
  group gave on average last round, so rounds 2+ read per-group values);
- `el_farol` with its default policy (predictor: a choice, two random streams per agent).

Each round goes through the whole platform: fan-out to the workers, the plugin's rule-based
policy over numpy cohorts on each worker, decisions streamed back, the plugin's resolve on the
manager (groups included), and every decision persisted on Postgres. Timings come from the
manager's websocket events as in `populace bench synthetic` (bench.harness): `round_s` from a
round's first `round.progress` to its `round.completed` (after its commit), `fanout_s` the
manager's own `duration_s`. `ratio_to_guess` is each plugin's median round_s over the guessing
game's in the same run (the issue's target: public_goods ≤ 2). Prints one JSON line.
"""

from __future__ import annotations

import statistics

from bench import harness
from bench.cluster import LocalCluster
from bench.deploy import scratch_database
from bench.synthetic import CONFIG

RUNS = {
    "guess": {"plugin": {"name": "guess"}, "policy": {"kind": "synthetic", "latency_s": 0.0}},
    "public_goods": {"plugin": {"name": "public_goods"}},
    "el_farol": {"plugin": {"name": "el_farol"}},
}


def run(
    agents: int = 1_000_000,
    procs: int = 2,
    seed: int = 7,
    rounds: int = 3,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
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
        population_id, deploy_s = harness.deploy(cluster, CONFIG.format(size=agents, seed=seed))
        figures = {}
        for name, body in RUNS.items():
            played = harness.simulate(
                cluster,
                database_url,
                node,
                {"population_id": population_id, "rounds": rounds, "seed": seed, **body},
            )
            n_valid = [r["n_valid"] for r in played.rounds]
            if played.persisted != agents * rounds or n_valid != [agents] * rounds:
                raise RuntimeError(
                    f"{name}: {played.persisted} decisions persisted, n_valid {n_valid}"
                )
            figures[name] = {
                "round_s": [round(s, 3) for s in played.round_s],
                "round_s_median": round(statistics.median(played.round_s), 3),
                "fanout_s": [round(r["duration_s"], 3) for r in played.rounds],
                "run_wall_s": round(played.wall_s, 3),
                "cpu_s": played.cpu_s,
                "decisions_persisted": played.persisted,
                "last_metrics": played.rounds[-1]["metrics"],
            }
    reference = figures["guess"]["round_s_median"]
    for measured in figures.values():
        measured["ratio_to_guess"] = round(measured["round_s_median"] / reference, 2)
    return {
        "benchmark": "plugins",
        "entry": "manager API (POST /api/populations, POST /api/simulations)",
        "database": "postgresql",
        "agents": agents,
        "procs": procs,
        "rounds": rounds,
        "deploy_s": round(deploy_s, 3),
        "runs": figures,
        "target_public_goods_ratio": 2.0,
    }
