"""The guessing game gives the same decisions as the code before it became a plugin: runs of
fixed configs and seeds export exactly the bytes (and keep exactly the round metrics) checked in
under tests/fixtures/guess/, which were made with the runtime that played the game itself
(commit f227c38), then made again once level-k's noise became the same bits on every CPU (its
log and cosine no longer numpy's, whose SIMD paths differ in the last bit between CPUs; the
values moved by at most a few units in the last place). A change that moves any decision or
statistic fails here, naming the run, on any machine.

To make the fixtures again, on purpose (a change that is meant to change results):
POPULACE_WRITE_FIXTURES=1 pytest tests/integration/test_guess_fixtures.py
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support import ROOT, running_cluster
from tests.support_simulations import DEPTHS, deploy, export, finish, start

FIXTURES = ROOT / "tests" / "fixtures" / "guess"
WRITE = os.environ.get("POPULACE_WRITE_FIXTURES") == "1"
# What a round keeps that the fixtures pin (not its duration or LLM meters).
PINNED = (
    "round",
    "n_valid",
    "n_invalid",
    "n_late",
    "n_lost",
    "metrics",
    "winner_agents",
    "histogram",
    "segments",
)
RUNS = {
    # Depth by education, noisy, told the mean: the paper's 1/2 x mean + 5 rule.
    "level_k_half_plus_5": {
        "rounds": 5,
        "plugin": {
            "name": "guess",
            "params": {"rule": {"preset": "1/2+5"}, "feedback": {"mean": True}},
        },
        "policy": {
            "kind": "level_k",
            "depth_attribute": "education",
            "depth_by_category": DEPTHS,
            "noise_std": 4.0,
        },
        "segment_by": ["education"],
        "histogram_bins": 21,
        "seed": 11,
    },
    # A ratio and range of its own, stopped early once the mean settles.
    "level_k_converges": {
        "rounds": 12,
        "plugin": {
            "name": "guess",
            "params": {"rule": {"ratio": 0.8, "offset": 3, "min": 10, "max": 60}},
        },
        "policy": {"kind": "level_k", "default_depth": 2, "noise_std": 0.5},
        "stop_when_converged": {"window": 3, "tolerance": 1.0},
        "seed": 5,
    },
    # The paper's synthetic benchmark: uniform answers, the 2/3 rule.
    "synthetic_two_thirds": {
        "rounds": 3,
        "plugin": {"name": "guess", "params": {"rule": {"preset": "2/3"}}},
        "policy": {"kind": "synthetic", "latency_s": 0},
        "segment_by": ["education"],
        "seed": 2024,
    },
}


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> dict[str, tuple[bytes, list[dict]]]:
    """Every run, on a fresh manager (so the population is number 1, as in the fixtures)."""
    tmp = tmp_path_factory.mktemp("guess-fixtures")
    out = {}
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        pid = deploy(manager, size=300)
        assert pid == 1, "agent ids embed the population's number: the fixtures' is 1"
        with manager.api() as api:
            for name, config in RUNS.items():
                sid = start(api, {"population_id": pid, "name": name, **config})["id"]
                done = finish(api, sid)
                assert done["status"] == "completed", done.get("error")
                rounds = api.get(f"/api/simulations/{sid}/rounds").json()["items"]
                kept = [{key: r[key] for key in PINNED} for r in rounds]
                out[name] = (export(api, sid, "csv"), kept)
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_the_guessing_game_decides_as_before_it_was_a_plugin(played, name):
    decisions, rounds = played[name]
    csv_path, rounds_path = FIXTURES / f"{name}.csv", FIXTURES / f"{name}.rounds.json"
    if WRITE:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        csv_path.write_bytes(decisions)
        rounds_path.write_text(json.dumps(rounds, indent=1, sort_keys=True) + "\n")
    assert decisions.count(b"\n") > 300, "the run exported its decisions"
    assert rounds == json.loads(rounds_path.read_text()), f"{name}: the rounds' statistics moved"
    assert decisions == csv_path.read_bytes(), f"{name}: the decisions moved"
