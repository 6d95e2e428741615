"""Response bodies for populations and agents."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    field_serializer,
    model_validator,
)

from backend.db.times import utc_iso
from backend.populations.store import is_dedicated
from backend.wire import Seed, config_for_browsers

_iso = utc_iso


class GraphClustering(BaseModel):
    clustering: float = Field(description="share of closed wedges among sampled ones")
    stderr: float = Field(description="its standard error")


class GraphStats(BaseModel):
    """What the population's graph looks like (computed once, at deploy)."""

    kind: str
    nodes: int
    edges: int
    mean_degree: float
    min_degree: int
    max_degree: int
    isolated: int = Field(description="agents without neighbours")
    components: int | None = Field(description="connected components; null past 5·10^7 edges")
    largest_component: int | None = Field(description="agents in the largest component")
    clustering: GraphClustering | None = Field(description="null when no agent has two neighbours")
    degree_histogram: list[int] | None = Field(
        description="agents per degree bin: [0], [1], [2, 3], [4, 7], ... (null for complete)"
    )
    cut_fraction: float = Field(
        description="share of edges whose ends the deploy placed on different workers"
    )


class PopulationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    size: int
    # Agents a live worker hosts: size when deployed, fewer when degraded.
    hosted: int = 0
    seed: Seed
    status: str
    counts: dict[str, dict[str, int]] | None = None
    error: str | None = None
    created_at: datetime
    updated_at: datetime
    dedicated_process: bool = Field(
        False,
        description="whether each agent has a worker process of its own "
        "(placement.dedicated_process), which hosts no other agent",
    )
    graph: GraphStats | None = Field(
        None, description="the population's graph (config `graph:`); null without one"
    )
    # Read (from the row) for dedicated_process only; PopulationDetail shows it.
    config: dict[str, Any] | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _placement(self) -> PopulationOut:
        if self.config is not None:  # from the row (a client reads the field itself)
            self.dedicated_process = is_dedicated(self.config)
        return self

    @field_serializer("created_at", "updated_at")
    def _utc(self, value: datetime) -> str:
        return _iso(value)


class PopulationDetail(PopulationOut):
    config: Annotated[dict[str, Any], PlainSerializer(config_for_browsers, when_used="json")]
    agents_per_worker: dict[str, int]


class PopulationPage(BaseModel):
    items: list[PopulationOut]
    next_after: int | None


class AgentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    population_id: int
    worker_id: int | None
    attributes: dict[str, Any]
    persona: str
    orphaned: bool


class AgentPage(BaseModel):
    items: list[AgentOut]
    next_after: int | None


class NeighbourOut(BaseModel):
    id: int
    number: int = Field(description="its index in the population (id & 0xFFFFFFFF)")
    attributes: dict[str, Any]
    value: float | None = Field(
        description="its decision in the latest stored round of the population's latest "
        "simulation; null when there is none or it had no valid answer"
    )


class NeighbourPage(BaseModel):
    items: list[NeighbourOut]
    next_after: int | None
