"""Response bodies for simulations and their rounds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    computed_field,
    field_serializer,
)

from backend.db.times import utc_iso
from backend.wire import Seed, config_for_browsers


def _iso(value: datetime | None) -> str | None:
    return None if value is None else utc_iso(value)


class SimulationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    population_id: int
    name: str
    status: str
    rounds: int
    current_round: int
    seed: Seed
    error: str | None = None
    stop_reason: str | None = None
    # Why it is paused (an operator, a dead LLM endpoint, agents not hosted in time).
    pause_reason: str | None = None
    # Agents counted lost over all kept rounds (only with allow_partial).
    lost_agents: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @field_serializer("created_at", "started_at", "finished_at")
    def _utc(self, value: datetime | None) -> str | None:
        return _iso(value)


class SimulationDetail(SimulationOut):
    config: Annotated[dict[str, Any], PlainSerializer(config_for_browsers, when_used="json")]
    models: list[str]
    version: str
    prompt_tokens: int
    cached_prompt_tokens: int = Field(
        0,
        description="Of prompt_tokens, those the LLM servers reported taking from their prefix "
        "cache, over all kept rounds (0 when the servers do not report it)",
    )
    completion_tokens: int

    @computed_field(  # type: ignore[prop-decorator]
        description="How the LLM answered agents with identical prompts: per_agent (one "
        "request each), shared (temperature 0: one request answers them all) or exchangeable "
        "(their answer distribution read once, each agent drawing from it); null without an LLM"
    )
    @property
    def llm_mode(self) -> str | None:
        from backend.simulations.config import SimulationConfig
        from backend.simulations.spec import llm_mode

        try:
            return llm_mode(SimulationConfig.model_validate(self.config))
        except ValidationError:  # a config stored by an older version
            return None


class SimulationPage(BaseModel):
    items: list[SimulationOut]
    next_after: int | None


class RoundOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    round: int
    n_valid: int
    n_invalid: int
    n_late: int
    n_lost: int = 0
    mean: float | None
    median: float | None
    std: float | None
    min: float | None
    max: float | None
    target: float | None
    winner_value: float | None
    winner_count: int
    winner_agents: list[int]
    histogram: list[int]
    segments: dict[str, Any]
    prompt_tokens: int
    cached_prompt_tokens: int = Field(
        0,
        description="Of prompt_tokens, those the LLM servers reported taking from their prefix "
        "cache (usage.prompt_tokens_details.cached_tokens, or llama.cpp's timings.cache_n); 0 "
        "when the servers do not report it",
    )
    completion_tokens: int
    llm_errors: int
    llm_requests: int = Field(
        0,
        description="LLM requests sent (retries included); fewer than the agents answered "
        "when agents with identical prompts shared one (temperature 0)",
    )
    duration_s: float


class RoundPage(BaseModel):
    items: list[RoundOut]
    next_after: int | None
