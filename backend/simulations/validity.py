"""Validity gates: how many of a round's agents took part, how many answers could not be read,
and whether the run stayed above its participation floor.

One owner for the rule. The store counts a round below the floor in the same transaction that
keeps it (simulations.rounds_below_floor); the API, the live events, the export record, the CLI
and the dashboard read that count, so a run with such rounds is never shown as whole."""

from __future__ import annotations

from typing import Any

# A round in which fewer than this share of the agents give a valid answer is below the floor
# (SimulationConfig.participation_floor).
DEFAULT_PARTICIPATION_FLOOR = 0.8


def participation(n_valid: int, n_invalid: int, n_late: int, n_lost: int) -> float | None:
    """Share of the round's agents whose answer counted (valid); None for a round of nobody.
    Unreadable (invalid), late and lost answers all count against it."""
    agents = n_valid + n_invalid + n_late + n_lost
    return n_valid / agents if agents else None


def parse_failure_rate(n_valid: int, n_invalid: int) -> float | None:
    """Share of the answers that arrived in time but could not be read as an action."""
    answered = n_valid + n_invalid
    return n_invalid / answered if answered else None


def round_rates(n_valid: int, n_invalid: int, n_late: int, n_lost: int) -> dict[str, Any]:
    """Both rates of a round, as `round.completed` carries them (RoundOut computes the same)."""
    return {
        "participation": participation(n_valid, n_invalid, n_late, n_lost),
        "parse_failure_rate": parse_failure_rate(n_valid, n_invalid),
    }


def run_validity(floor: float, rounds_below_floor: int) -> dict[str, Any]:
    """The run's verdict as the export record carries it."""
    return {
        "participation_floor": floor,
        "rounds_below_floor": rounds_below_floor,
        "whole": rounds_below_floor == 0,
    }
