"""`populace simulate` prints each round in its plugin's terms: the guessing game's mean, target
and winner, any other plugin's declared metrics."""

from __future__ import annotations

from backend.cli_simulate import round_line

COUNTS = {"n_valid": 10, "n_invalid": 0, "n_late": 0, "duration_s": 0.5}


def test_a_guessing_round_says_its_target_and_winner():
    line = round_line(
        {"round": 1, "mean": 50.0, "target": 35.0, "winner_value": 34.9, "metrics": {}} | COUNTS
    )
    assert line == "round 1: mean 50, target 35, winner 34.9 (valid 10, invalid 0, late 0, 0.50s)"


def test_another_plugins_round_says_its_declared_metrics():
    metrics = {"mean_contribution": 10.0, "free_rider_share": None, "n_valid": 10, "n_invalid": 0}
    line = round_line(
        {"round": 2, "mean": None, "target": None, "winner_value": None, "metrics": metrics}
        | COUNTS
    )
    assert line == (
        "round 2: mean_contribution 10, free_rider_share - (valid 10, invalid 0, late 0, 0.50s)"
    )
