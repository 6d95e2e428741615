"""`populace bench stress` at a toy size on Postgres: deploy, a synthetic and a level-k round
with every decision persisted, agent browsing, and clean-up to zero (a smoke test, not a timed
one: the figures belong in BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from bench import stress
from tests.conftest import PG_ADMIN_URL

pytestmark = pytest.mark.postgres

KEYS = (
    "benchmark", "agents", "procs", "database", "deploy_s", "synthetic_round_s",
    "level_k_round_s", "synthetic", "level_k", "browse", "delete_simulations_s",
    "delete_population_s", "left", "peak_rss_mb", "peak_rss_mb_by_stage", "cpu_s",
)  # fmt: skip
BROWSE = ("first_page", "deep_page", "filtered_deep_page", "agent", "agent_decisions")


def test_bench_stress_plays_browses_and_cleans_up_to_zero(postgres_server_url) -> None:
    result = stress.run(agents=20_000, procs=2, seed=3, latency_s=0.0, samples=5,
                        admin_url=PG_ADMIN_URL)  # fmt: skip
    for key in KEYS:
        assert key in result, key
    assert result["benchmark"] == "stress" and result["database"] == "postgresql"
    assert result["agents"] == 20_000 and result["procs"] == 2
    for kind in ("synthetic", "level_k"):
        played = result[kind]
        assert played["n_valid"] == played["decisions_persisted"] == 20_000, played
    assert result["synthetic"]["simulation_id"] != result["level_k"]["simulation_id"]
    for kind in BROWSE:
        assert result["browse"][kind]["n"] == 5
        assert result["browse"][kind]["p95_ms"] >= result["browse"][kind]["p50_ms"] > 0
    assert result["browse"]["decisions_per_agent"] == [2]
    assert len(result["delete_simulations_s"]) == 2
    left = result["left"]
    for key in ("agents", "decisions", "decision_partitions", "rounds", "simulations",
                "worker_agents_grpc", "worker_agents_api"):  # fmt: skip
        assert left[key] == 0, left
    assert not any(left.values()), left
    assert result["peak_rss_mb"]["manager"] > 0
    workers = [k for k in result["peak_rss_mb"] if k.startswith("worker_") and k[7:].isdigit()]
    assert len(workers) == 2, result["peak_rss_mb"]
    assert set(result["cpu_s"]) == {"deploy", "synthetic", "level_k", "browse", "cleanup"}
