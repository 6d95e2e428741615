"""`populace bench network` at a toy size on Postgres (a smoke test, not a timed one: the
figures belong in BENCHMARKS.md): the epidemic runs to its end and reaches about the analytic
final size, and the voter model plays the rounds asked for, through the manager's API."""

from __future__ import annotations

import pytest

from bench import network
from tests.conftest import PG_ADMIN_URL

pytestmark = pytest.mark.postgres

AGENTS = 4_000


def test_the_epidemic_ends_near_the_final_size_and_its_figures_are_reported(postgres_server_url):
    result = network.run(
        agents=AGENTS, procs=2, seed=5, initial_infected=20, admin_url=PG_ADMIN_URL
    )
    assert result["plugin"] == "sir" and result["agents"] == AGENTS
    assert result["stop_reason"] == "no agent is infectious"
    assert result["last_metrics"]["infectious"] == 0
    assert abs(result["attack_rate"] - result["final_size_expected"]) < 0.06, result
    rounds = result["rounds"]
    assert len(result["fanout_s"]) == len(result["decisions_stored"]) == rounds
    assert result["decisions_stored"][0] == AGENTS  # round 1 stores everyone, then changes
    assert sum(result["decisions_stored"][1:]) < AGENTS * (rounds - 1) / 2
    assert result["network_bytes"][0] > 0 and result["graph"]["cut_fraction"] > 0


def test_the_voter_model_plays_the_rounds_asked_for(postgres_server_url):
    result = network.run(
        agents=AGENTS, procs=2, seed=5, max_rounds=3, plugin="voter", admin_url=PG_ADMIN_URL
    )
    assert result["plugin"] == "voter" and result["rounds"] == 3
    assert result["attack_rate"] is None
    assert 0.3 < result["last_metrics"]["share_ones"] < 0.7, result["last_metrics"]
