"""Response bodies for sweeps and their results table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field, field_serializer

from backend.db.times import utc_iso
from backend.wire import big_ints_for_browsers


class SweepOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    status: str
    mode: str
    runs: int = Field(description="points in the grid: one simulation each")
    populations: list[int] = Field(
        default_factory=list,
        # Read from the stored sweep file: the list names them next to the sweep.
        validation_alias=AliasChoices("populations", AliasPath("config", "populations")),
        description="the populations its runs play on",
    )
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None

    @field_serializer("created_at", "finished_at")
    def _utc(self, value: datetime | None) -> str | None:
        return None if value is None else utc_iso(value)


class SweepPage(BaseModel):
    items: list[SweepOut]
    next_after: int | None


class SweepRow(BaseModel):
    """One point of the grid: its params, its run (once launched) and the run's final
    statistics (its last kept round)."""

    point: int = Field(description="1-based, in grid order (first key slowest)")
    params: dict[str, Any]
    simulation_id: int | None = None
    population_id: int | None = None
    status: str | None = Field(None, description="the run's status; null until launched")
    rounds: int | None = None
    rounds_played: int | None = None
    final_mean: float | None = None
    target: float | None = None
    winner_value: float | None = None
    n_valid: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None

    @field_serializer("params", when_used="json")
    def _params(self, value: dict[str, Any]) -> dict[str, Any]:
        return big_ints_for_browsers(value)


class SweepResults(BaseModel):
    items: list[SweepRow]
    next_after: int | None = Field(description="the last point of this page, when more follow")


class SweepDetail(SweepOut):
    config: dict[str, Any] = Field(description="the sweep file, validated")
    grid: dict[str, list[Any]]
    launched: int = Field(description="runs created so far")
    finished: int = Field(description="runs in a final status")
    results: SweepResults

    @field_serializer("config", "grid", when_used="json")
    def _big_ints(self, value: dict[str, Any]) -> dict[str, Any]:
        return big_ints_for_browsers(value)
