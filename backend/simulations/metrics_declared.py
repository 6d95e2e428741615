"""Declared per-round metrics: what a simulation measures each round, named and described.

A round stores its metrics generically, `rounds.metrics` = {name: value}, beside the guessing
game's own columns; the same mapping is on each REST round record and on `round.completed`, and
the run's detail lists the declarations, so a dashboard can chart and export any simulation's
metrics with no code about the game. The declarations are the plugin's (populace.plugin.Metric);
this is their shape in the API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from populace.plugin import Simulation
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


@lru_cache(maxsize=64)
def declarations(simulation: type[Simulation]) -> tuple[MetricDeclaration, ...]:
    """The metrics a plugin's simulation declares, in the API's shape."""
    return tuple(MetricDeclaration(**metric.describe()) for metric in simulation.metrics)


def declared_metrics(plugin: str) -> tuple[MetricDeclaration, ...]:
    """The metrics the installed plugin of this name declares."""
    return declarations(type(installed().get(plugin).simulation))


def run_metrics(config: Mapping[str, Any]) -> tuple[MetricDeclaration, ...]:
    """The metrics of a stored run's plugin (every stored config names it since migration
    0015); none when that plugin is no longer installed."""
    plugin = config.get("plugin") if isinstance(config, Mapping) else None
    name = plugin.get("name", "guess") if isinstance(plugin, Mapping) else "guess"
    try:
        return declared_metrics(name)
    except KeyError:
        return ()


def guess_metrics() -> tuple[MetricDeclaration, ...]:
    """The guessing game's: every run plays it until the round loop plays any plugin."""
    return declared_metrics("guess")


_AS_TYPE = {"number": float, "integer": int}


def metric_values(
    declared: tuple[MetricDeclaration, ...], round_values: Mapping[str, Any]
) -> dict[str, MetricValue]:
    """{name: value} of each declared metric, read by its name from the round's values and
    given its declared JSON type (null stays null). ValueError naming the metric when one is
    missing, not a number, or not finite: a plugin's resolve that got it wrong."""
    values: dict[str, MetricValue] = {}
    for metric in declared:
        if metric.name not in round_values:
            raise ValueError(f"metric {metric.name!r} has no value (give None for none)")
        value = round_values[metric.name]
        if value is None:
            values[metric.name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"metric {metric.name!r}: a number or None, not {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"metric {metric.name!r}: a finite number or None, not {value!r}")
        values[metric.name] = _AS_TYPE[metric.type](value)
    unknown = sorted(set(round_values) - {m.name for m in declared})
    if unknown:
        raise ValueError(f"metrics {', '.join(map(repr, unknown))} are not declared")
    return values
