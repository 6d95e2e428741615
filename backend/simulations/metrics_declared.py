"""Declared per-round metrics: what a simulation measures each round, named and described.

A round stores its metrics generically, `rounds.metrics` = {name: value}, beside the guessing
game's own columns; the same mapping is on each REST round record and on `round.completed`, and
the run's detail lists the declarations, so a dashboard can chart and export any simulation's
metrics with no code about the game. The declarations are data: when simulations become plugins
(issue 27) this list moves into the `guess` plugin unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MetricType = Literal["number", "integer"]
# A metric's value in JSON: its declared type, or null when the round has none (no valid answer).
MetricValue = float | int | None


class MetricDeclaration(BaseModel):
    """One per-round metric a simulation declares."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="its key in each round's `metrics`")
    title: str = Field(description="a label for a chart or a table column")
    type: MetricType
    unit: str | None = Field(None, description="what its values count or measure, if anything")
    description: str = ""


GUESS_METRICS: tuple[MetricDeclaration, ...] = (
    MetricDeclaration(
        name="mean", title="Mean guess", type="number", description="Mean of the valid guesses"
    ),
    MetricDeclaration(
        name="median",
        title="Median guess",
        type="number",
        description="Median of the valid guesses",
    ),
    MetricDeclaration(
        name="std",
        title="Standard deviation",
        type="number",
        description="Population standard deviation of the valid guesses",
    ),
    MetricDeclaration(
        name="min", title="Lowest guess", type="number", description="Lowest valid guess"
    ),
    MetricDeclaration(
        name="max", title="Highest guess", type="number", description="Highest valid guess"
    ),
    MetricDeclaration(
        name="target",
        title="Target",
        type="number",
        description="The rule's ratio × mean + offset: the number to be closest to",
    ),
    MetricDeclaration(
        name="winner_value",
        title="Winning guess",
        type="number",
        description="The valid guess closest to the target (the lower one on a tie)",
    ),
    MetricDeclaration(
        name="winner_count",
        title="Winners",
        type="integer",
        unit="agents",
        description="Agents who chose the winning guess",
    ),
    MetricDeclaration(
        name="n_valid",
        title="Valid answers",
        type="integer",
        unit="agents",
        description="Agents whose answer was a number in the rule's range",
    ),
    MetricDeclaration(
        name="n_invalid",
        title="Invalid answers",
        type="integer",
        unit="agents",
        description="Agents whose answer was out of range or could not be read",
    ),
)

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
