"""Validity gates: participation and parse failures per round, and how a run below its
participation floor reads in the export record and the CLI."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.cli_simulate import run_summary
from backend.simulations.config import SimulationConfig
from backend.simulations.validity import (
    DEFAULT_PARTICIPATION_FLOOR,
    parse_failure_rate,
    participation,
    round_rates,
    run_validity,
)


def test_participation_counts_unreadable_late_and_lost_answers_against_it():
    assert participation(75, 20, 4, 1) == 0.75
    assert participation(100, 0, 0, 0) == 1.0
    assert participation(0, 0, 0, 0) is None  # a round of nobody has no share


def test_parse_failures_are_a_share_of_the_answers_that_arrived():
    assert parse_failure_rate(75, 25) == 0.25
    assert parse_failure_rate(0, 0) is None
    assert round_rates(60, 20, 20, 0) == {"participation": 0.6, "parse_failure_rate": 0.25}


def test_a_run_is_whole_only_without_a_round_below_its_floor():
    assert run_validity(0.8, 0) == {
        "participation_floor": 0.8,
        "rounds_below_floor": 0,
        "whole": True,
    }
    assert run_validity(0.5, 3)["whole"] is False


def test_the_floor_defaults_to_80_percent_and_must_be_a_share():
    config = {"population_id": 1, "rounds": 2}
    assert SimulationConfig.model_validate(config).participation_floor == 0.8
    assert DEFAULT_PARTICIPATION_FLOOR == 0.8
    for bad in (-0.1, 1.5):
        with pytest.raises(ValidationError, match="participation_floor"):
            SimulationConfig.model_validate({**config, "participation_floor": bad})


def test_the_cli_summary_says_a_run_is_below_its_floor():
    final = {"id": 4, "name": "gemma", "status": "completed", "current_round": 3, "rounds": 3}
    assert "participation" not in run_summary({**final, "rounds_below_floor": 0})
    line = run_summary({**final, "rounds_below_floor": 2, "participation_floor": 0.8})
    assert line.endswith("2 rounds below the participation floor (80%)"), line
