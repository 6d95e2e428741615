"""Response bodies for simulations and their rounds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    computed_field,
    field_serializer,
    field_validator,
    model_validator,
)

from backend.db.times import utc_iso
from backend.lifecycles.simulation import TIMELINE_KINDS
from backend.simulations import validity
from backend.simulations.metrics_declared import MetricDeclaration, MetricValue, run_metrics
from backend.simulations.validity import DEFAULT_PARTICIPATION_FLOOR
from backend.wire import Seed, big_ints_for_browsers, config_for_browsers


def _iso(value: datetime | None) -> str | None:
    return None if value is None else utc_iso(value)


class EndpointMeter(BaseModel):
    """What one LLM endpoint (base_url, model) was asked in a round or a run, and its cost."""

    base_url: str
    model: str
    requests: int = Field(description="requests sent, retries included")
    errors: int = Field(description="attempts that got no usable answer (late ones included)")
    skipped: int = Field(
        0, description="requests not sent: the endpoint's circuit was open (not in errors)"
    )
    breaker_opened: int = Field(0, description="times its circuit breakers opened")
    breaker_half_opened: int = Field(0, description="times its circuit breakers went half-open")
    breaker_closed: int = Field(0, description="times its circuit breakers closed again")
    late: int = Field(0, description="attempts cut by the agents' deadline")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_p50_s: float | None = Field(None, description="of answered attempts (±20 %)")
    latency_p95_s: float | None = None
    latency_mean_s: float | None = None
    requests_per_s: float | None = Field(None, description="over the round's (run's) time")
    cost_usd: float | None = Field(None, description="from the endpoint's price; null without")
    last_error: str = ""


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
    stores_changes: bool = Field(
        False,
        description="each round keeps only the decisions that changed since the agent's round "
        "before (a network simulation); reads and exports carry the others forward",
    )
    participation_floor: float = Field(
        DEFAULT_PARTICIPATION_FLOOR,
        description="the run's config: a round with a smaller share of valid answers is below it",
    )
    rounds_below_floor: int = Field(
        0,
        description="rounds kept with participation below participation_floor; a run with any "
        "is not whole (its export record says so)",
    )
    cancel_reason: str | None = None
    # Set when a sweep launched the run: the sweep and the run's point of its grid.
    sweep_id: int | None = None
    sweep_params: Annotated[
        dict[str, Any] | None, PlainSerializer(big_ints_for_browsers, when_used="json")
    ] = None
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
    record: dict[str, Any] = Field(
        default_factory=dict,
        description="the reproducibility record beyond config and seed: populace_version, "
        "placement [{worker_id, node, address, agents}], endpoints [{base_url, model, "
        "served_models}] as /v1/models reported them, rerun_of, and policies [{label, kind, "
        "policy, agents, share | attribute and categories}]: who plays which policy",
    )
    meters: list[EndpointMeter] = Field(
        default_factory=list, description="the LLM meters per endpoint, summed over kept rounds"
    )
    cost_usd: float | None = Field(
        None, description="the estimated cost of the kept rounds (null without prices)"
    )
    metrics: list[MetricDeclaration] = Field(
        default_factory=list,
        description="the per-round metrics the run's plugin declares: each round's `metrics` "
        "has a value (or null) under each `name`, so they can be charted and exported "
        "generically",
    )

    @model_validator(mode="after")
    def _plugins_metrics(self) -> SimulationDetail:
        if not self.metrics:
            self.metrics = list(run_metrics(self.config))
        return self

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


class SimulationListItem(SimulationOut):
    """A run as the runs table lists it: what a column of its params or of its final metrics
    needs, beside the run itself."""

    plugin: str | None = Field(None, description="the plugin it plays (its config's plugin.name)")
    policy: str | None = Field(None, description="its policy's kind (llm, level_k, ...)")
    params: Annotated[dict[str, Any], PlainSerializer(big_ints_for_browsers, when_used="json")] = (
        Field(default_factory=dict, description="the plugin's params (its config's plugin.params)")
    )
    sweep_name: str | None = Field(None, description="the name of the sweep that launched it")
    last_metrics: dict[str, MetricValue] = Field(
        default_factory=dict,
        description="the declared metrics of its last kept round, {name: value} ({} before "
        "its first round ends)",
    )

    @classmethod
    def of(
        cls, simulation: Any, sweep_name: str | None, last_metrics: dict[str, Any]
    ) -> SimulationListItem:
        item = cls.model_validate(simulation)
        plugin = (simulation.config or {}).get("plugin")
        if isinstance(plugin, dict):
            item.plugin = plugin.get("name")
            item.params = plugin.get("params") or {}
        policy = (simulation.config or {}).get("policy")
        if isinstance(policy, dict):
            item.policy = policy.get("kind")
        item.sweep_name = sweep_name
        item.last_metrics = last_metrics
        return item


class SimulationPage(BaseModel):
    items: list[SimulationListItem]
    next_after: int | None = Field(
        description="the last id of this page when more follow and the list is sorted by id "
        "(pass it as `after`); null otherwise"
    )
    next_cursor: str | None = Field(
        None,
        description="where the next page starts, in any sort (pass it as `cursor` with the "
        "same filters and sort); null on the last page",
    )


class RoundStatistics(BaseModel):
    """A played round's statistics: what the runner keeps (RoundOutcome.stats(), the same
    names), the API answers (RoundOut) and `round.completed` carries (backend.events.catalog).
    The one place they are spelled."""

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
    segments: dict[str, dict[str, dict[str, float | int | None]]]
    metrics: dict[str, MetricValue] = Field(
        default_factory=dict,
        description="the round's declared metrics, {name: value}: the names are the run's "
        "`metrics` declarations (GET /api/simulations/{id})",
    )
    metrics_by_policy: dict[str, dict[str, float | int | None]] = Field(
        default_factory=dict,
        description="a mixed policy's round by part (the labels of the run record's "
        "`policies`): {label: {agents, n_valid, n_invalid, n_late, n_lost, mean}}, mean being "
        "the mean valid action; {} for a run of one policy",
    )
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
    network_bytes: int = Field(
        0,
        description="a network simulation: bytes of agents' values the worker processes sent "
        "each other in the round (worker to worker, only the values that changed); 0 otherwise",
    )
    endpoints: list[EndpointMeter] = Field(default_factory=list)
    duration_s: float

    @field_validator("metrics", "metrics_by_policy", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        # The column is nullable (it was added beside older rounds); the record is always a map.
        return {} if value is None else value


class RoundOut(RoundStatistics):
    """A kept round, as GET /api/simulations/{id}/rounds shows it."""

    model_config = ConfigDict(from_attributes=True)

    decisions_stored: int | None = Field(
        None,
        description="decision rows the round wrote: every agent's, or in a run that stores "
        "changes (simulation.stores_changes) only the decisions that differ from the agent's "
        "round before; null for rounds kept before it was counted",
    )
    finished_at: datetime | None = None

    @computed_field(  # type: ignore[prop-decorator]
        description="share of the round's agents whose answer counted (n_valid over every "
        "agent: unreadable, late and lost answers count against it); null for no agents"
    )
    @property
    def participation(self) -> float | None:
        return validity.participation(self.n_valid, self.n_invalid, self.n_late, self.n_lost)

    @computed_field(  # type: ignore[prop-decorator]
        description="share of the answers that arrived in time but could not be read as an "
        "action (n_invalid over n_valid + n_invalid); null when none arrived"
    )
    @property
    def parse_failure_rate(self) -> float | None:
        return validity.parse_failure_rate(self.n_valid, self.n_invalid)

    @field_serializer("finished_at")
    def _utc(self, value: datetime | None) -> str | None:
        return _iso(value)


class RoundPage(BaseModel):
    items: list[RoundOut]
    next_after: int | None


class GroupOut(BaseModel):
    group: int = Field(
        description="the group's number: a component (numbered by its lowest agent) or agent // group_size"
    )
    values: dict[str, float | None] = Field(description="each group metric's value (null: none)")
    label: str | None = Field(
        None, description="a run grouped by an attribute (group_by): the group's category"
    )


class GroupPage(BaseModel):
    """One round's group metrics, a page of groups (GET /api/simulations/{id}/groups)."""

    round: int | None = Field(
        description="the round shown; null when the run kept no group metrics"
    )
    groups: int = Field(description="groups in the round")
    names: list[str] = Field(description="the plugin's group metrics, as kept")
    items: list[GroupOut]
    next_after: int | None


class GroupRoundOut(BaseModel):
    round: int
    values: dict[str, float | None]


class GroupSeries(BaseModel):
    """One group's metrics over the rounds (GET /api/simulations/{id}/groups/{group})."""

    group: int
    label: str | None = None
    items: list[GroupRoundOut]
    next_after: int | None


class TranscriptOut(BaseModel):
    """One agent's round: what its worker asked the LLM, what came back, what it counted as."""

    agent_id: int
    round: int
    status: str
    value: float | None
    prompt: str | None = Field(
        description="the prompt as sent (completions API; with the chat API its system and "
        "user messages joined), rebuilt from the run's config, the agent's persona and the "
        "history it was told; null without an LLM policy or once the agent's row is deleted"
    )
    system: str | None
    user: str | None
    response: str | None = Field(description="the raw answer (with store_responses)")
    reason: str | None = Field(description="why the answer is invalid, late or lost")
    attributes: dict[str, Any]


class TranscriptPage(BaseModel):
    items: list[TranscriptOut]
    next_after: int | None = Field(
        description="the last agent id (simulation pages) or round (agent pages) of this page"
    )


# What a timeline entry can be (the `timeline.added` event carries the same).
TimelineKind = Literal[TIMELINE_KINDS]  # type: ignore[valid-type]


class TimelineEntryOut(BaseModel):
    """One thing that happened to a run (backend.simulations.timeline)."""

    id: int
    simulation_id: int
    kind: TimelineKind
    round: int | None = Field(description="the round it concerns, or the last one played")
    message: str
    data: dict[str, Any] = Field(description="the figures behind the message (mean, reason, ...)")
    time: datetime


class TimelinePage(BaseModel):
    items: list[TimelineEntryOut]
    next_after: int | None = Field(description="the last entry id of this page when more follow")
