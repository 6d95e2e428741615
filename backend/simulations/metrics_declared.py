"""Declared per-round metrics: what a simulation measures each round, named and described.

A round stores its metrics generically, `rounds.metrics` = {name: value}, beside the guessing
game's own columns; the same mapping is on each REST round record and on `round.completed`, and
the run's detail lists the declarations, so a dashboard can chart and export any simulation's
metrics with no code about the game. The declarations are the plugin's (populace.plugin.Metric);
this is their shape in the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from populace.registry import installed

MetricType = Literal["number", "integer"]
# A metric's value in JSON: its declared type, or null when the round has none (no valid answer).
MetricValue = float | int | None


class MetricDeclaration(BaseModel):
    """One per-round metric a simulation declares."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="its key in each round's `metrics`")
    title: str = Field(description="a label for a chart or a table column")
    type: MetricType
    unit: str = Field("", description="what its values count or measure, if anything")
    description: str = ""


@lru_cache(maxsize=1)
def guess_metrics() -> tuple[MetricDeclaration, ...]:
    """The guessing game's declared metrics, from its plugin (populace.builtins.guess, found
    by its entry point): every run plays that game until configs name their plugin."""
    simulation = installed().get("guess").simulation
    return tuple(MetricDeclaration(**metric.describe()) for metric in simulation.metrics)


_AS_TYPE = {"number": float, "integer": int}


def metric_values(
    declared: tuple[MetricDeclaration, ...], round_values: Mapping[str, Any]
) -> dict[str, MetricValue]:
    """{name: value} of each declared metric, read by its name from the round's values and
    given its declared JSON type (null stays null)."""
    values: dict[str, MetricValue] = {}
    for metric in declared:
        value = round_values[metric.name]
        values[metric.name] = None if value is None else _AS_TYPE[metric.type](value)
    return values
